#!/usr/bin/env bash
# Regenerates docs/img/operator-page.png, the operator page in the docs: a
# walrelay with two pipelines on the test environment's servers (`orders`:
# a table outbox read from the WAL; `billing`: a polled outbox on the
# wal_level=replica cluster), a few minutes of traffic at changing rates
# with one burst, then, while the traffic still flows, a headless Chromium
# screenshot of its page.
#
# Usage: scripts/screenshot-page.sh [SECONDS [OUTPUT]]
#        SECONDS of traffic before the screenshot (default 540: most of the
#        charts' ten minutes); OUTPUT defaults to docs/img/operator-page.png
#
# Needs the test environment running (scripts/env.sh up) and chromium
# (scripts/browser.sh installs it). Owns the tables page_orders and
# page_billing, the slot and publication page_orders (dropped at the end)
# and .walrelay-env/screenshot/.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

DURATION=${1:-540}
[[ $DURATION =~ ^[0-9]+$ ]] || die "SECONDS must be a number, got '$DURATION'"
ENV_FILE=$REPO_ROOT/.walrelay-env/env
WORK=$REPO_ROOT/.walrelay-env/screenshot
OUT=$(abs_path "${2:-$REPO_ROOT/docs/img/operator-page.png}")
WALRELAY_PID=
WRITER_PIDS=()

[[ -f $ENV_FILE ]] || die "no test environment: run scripts/env.sh up"
# shellcheck source=/dev/null
. "$ENV_FILE"
CHROMIUM=$("$SCRIPT_DIR/browser.sh")

# No NOTICEs from the IF EXISTS drops.
export PGOPTIONS="-c client_min_messages=warning"
WAL_PG="host=127.0.0.1 port=$WALRELAY_TEST_PG_PORT user=postgres dbname=postgres"
POLL_PG="host=127.0.0.1 port=$WALRELAY_TEST_PG_REPLICA_PORT user=postgres dbname=postgres"
wal_psql() { psql -X -q -v ON_ERROR_STOP=1 "$WAL_PG" "$@"; }
poll_psql() { psql -X -q -v ON_ERROR_STOP=1 "$POLL_PG" "$@"; }

drop_objects() {
    wal_psql -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'page_orders'" \
        -c "DROP PUBLICATION IF EXISTS page_orders" -c "DROP TABLE IF EXISTS page_orders" >/dev/null
    poll_psql -c "DROP TABLE IF EXISTS page_billing" >/dev/null
}

cleanup() {
    local rc=$? pid
    trap - EXIT INT TERM
    for pid in "${WRITER_PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if [[ -n $WALRELAY_PID ]] && kill -0 "$WALRELAY_PID" 2>/dev/null; then
        kill -TERM "$WALRELAY_PID" 2>/dev/null || true
        wait "$WALRELAY_PID" 2>/dev/null || true
    fi
    drop_objects || rc=1
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

cd "$REPO_ROOT"
note "building walrelay"
need_build_tools
cargo build --quiet --bin walrelay
mkdir -p "$WORK" "$(dirname "$OUT")"

drop_objects
wal_psql -c "CREATE TABLE page_orders (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
    aggregateid varchar(255), type varchar(255) NOT NULL, payload jsonb)"
poll_psql -c "CREATE TABLE page_billing (seq bigint GENERATED ALWAYS AS IDENTITY, id uuid PRIMARY KEY,
    aggregatetype varchar(255) NOT NULL, aggregateid varchar(255), type varchar(255) NOT NULL,
    payload jsonb, published_at timestamptz)" \
    -c "CREATE INDEX ON page_billing (seq) WHERE published_at IS NULL"

PORT=$(free_port)
cat >"$WORK/walrelay.toml" <<EOF
[kafka]
bootstrap_servers = "$WALRELAY_TEST_KAFKA"
[kafka.producer]
"linger.ms" = "5"

[metrics]
listen = "127.0.0.1:$PORT"

[[pipelines]]
name = "orders"
[pipelines.postgres]
host = "127.0.0.1"
port = $WALRELAY_TEST_PG_PORT
user = "postgres"
dbname = "postgres"
[pipelines.replication]
slot = "page_orders"
publication = "page_orders"
[pipelines.outbox]
table = "public.page_orders"
[pipelines.lag]
poll_interval_ms = 1000

[[pipelines]]
name = "billing"
[pipelines.source]
kind = "poll"
[pipelines.postgres]
host = "127.0.0.1"
port = $WALRELAY_TEST_PG_REPLICA_PORT
user = "postgres"
dbname = "postgres"
[pipelines.outbox]
table = "public.page_billing"
[pipelines.poll]
order_by = ["seq"]
interval_ms = 250
stats_interval_ms = 1000
EOF
note "starting walrelay (page on http://127.0.0.1:$PORT/)"
target/debug/walrelay run --config "$WORK/walrelay.toml" >"$WORK/walrelay.log" 2>&1 &
WALRELAY_PID=$!
for _ in $(seq 1 300); do
    curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
    kill -0 "$WALRELAY_PID" 2>/dev/null || die "walrelay exited: $(tail -n 20 "$WORK/walrelay.log")"
    sleep 0.2
done
curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null || die "walrelay is not ready: $(tail -n 20 "$WORK/walrelay.log")"

# One SQL script per table, one statement batch per second: a rate that
# swells and ebbs, and one burst of 5,000 events a third of the way in. It
# runs a minute longer than DURATION: the screenshot is taken while it runs
# (psql runs it in the background, killed at the end).
traffic() {
    local table=$1 base=$2 amp=$3 i n burst id=0
    burst=$((DURATION / 3))
    for ((i = 0; i < DURATION + 60; i++)); do
        n=$(awk -v i="$i" -v b="$base" -v a="$amp" 'BEGIN { printf "%d", b + a * sin(i / 25) }')
        ((i == burst)) && n=5000
        printf "INSERT INTO %s (id, aggregatetype, aggregateid, type, payload) SELECT gen_random_uuid(), 'Page', 'k' || (g %% 50), 'E', jsonb_build_object('n', g) FROM generate_series(%d, %d) g;\n" \
            "$table" "$id" "$((id + n - 1))"
        id=$((id + n))
        printf "SELECT pg_sleep(1);\n"
    done
}
note "writing events for ${DURATION}s"
traffic page_orders 120 80 >"$WORK/orders.sql"
traffic page_billing 40 30 >"$WORK/billing.sql"
psql -X -q -v ON_ERROR_STOP=1 "$WAL_PG" -f "$WORK/orders.sql" >/dev/null &
WRITER_PIDS+=($!)
psql -X -q -v ON_ERROR_STOP=1 "$POLL_PG" -f "$WORK/billing.sql" >/dev/null &
WRITER_PIDS+=($!)
sleep "$DURATION"
for pid in "${WRITER_PIDS[@]}"; do
    kill -0 "$pid" 2>/dev/null || die "a writer stopped early"
done
kill -0 "$WALRELAY_PID" 2>/dev/null || die "walrelay exited: $(tail -n 20 "$WORK/walrelay.log")"

note "screenshot"
rm -rf "$WORK/chromium"
"$CHROMIUM" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$WORK/chromium" --window-size=1280,900 --virtual-time-budget=5000 \
    --screenshot="$OUT" "http://127.0.0.1:$PORT/" >"$WORK/chromium.log" 2>&1 ||
    die "chromium failed: $(tail -n 20 "$WORK/chromium.log")"
note "wrote $OUT ($(stat -c %s "$OUT") bytes)"
