#!/usr/bin/env bash
# The walrelay demo: starts a local PostgreSQL and Kafka, creates an example
# `orders` service schema with an outbox table, runs walrelay, writes orders
# the way a service would (business row + outbox insert + outbox delete in one
# transaction), shows the events as a Kafka consumer sees them, and stops
# everything.
#
# With --poll, the same through the polling source on a wal_level=replica
# server: the outbox row stays (the service does not delete it), walrelay
# claims it, publishes it and marks it published; the demo shows the rows'
# published_at.
#
# With --root DIR, the relay is the binary of a container image's root
# filesystem (scripts/image.sh demo): nothing is built, and the relay runs
# as `chroot --userspec=10001:10001 DIR /usr/local/bin/walrelay`, the
# image's user, with only the image's files (its CA bundle, its passwd);
# its configuration is written to DIR/etc/walrelay/walrelay.toml. Needs root.
#
# With --env, it uses the running test environment's PostgreSQL and Kafka
# (scripts/env.sh up; .walrelay-env/env) instead of starting its own, and
# leaves them running: its database `shop` and slot are made there and
# dropped at the end, and its events go to a topic of this run,
# demo-<time>.outbox.event.Order.
#
# The demo fails unless the consumer reads one record per order.
#
# Usage: scripts/demo.sh [--poll] [--root DIR] [--env] [N_ORDERS]     (default 5)
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

POLL=0
ROOT=
USE_ENV=0
while (($#)); do
    case $1 in
        --poll) POLL=1 ;;
        --env) USE_ENV=1 ;;
        --root)
            (($# >= 2)) || die "--root needs a directory"
            ROOT=$(cd "$2" && pwd) || die "--root $2: no such directory"
            shift
            ;;
        *) break ;;
    esac
    shift
done
N_ORDERS=${1:-5}
DEMO_DIR=$REPO_ROOT/.walrelay-env/demo
PG_DIR=$DEMO_DIR/pg
WAL_LEVEL=logical
if ((POLL)); then
    PG_DIR=$DEMO_DIR/pg-replica
    WAL_LEVEL=replica
fi
KAFKA_DIR=$DEMO_DIR/kafka
TOPIC=outbox.event.Order
if ((USE_ENV)); then
    if [[ ! -f $REPO_ROOT/.walrelay-env/env ]] || ! "$SCRIPT_DIR/env.sh" status >/dev/null 2>&1; then
        die "--env: the test environment is not running (scripts/env.sh up)"
    fi
    # shellcheck source=/dev/null
    . "$REPO_ROOT/.walrelay-env/env"
    PG_DIR=$WALRELAY_TEST_PG_DIR
    ((POLL)) && PG_DIR=$WALRELAY_TEST_PG_DIR-replica
    KAFKA_DIR=$WALRELAY_TEST_KAFKA_DIR
    TOPIC=demo-$(date +%s).outbox.event.Order
fi
WALRELAY_PID=

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    step "stopping everything"
    if [[ -n "$WALRELAY_PID" ]] && kill -0 "$WALRELAY_PID" 2>/dev/null; then
        kill -TERM "$WALRELAY_PID" 2>/dev/null || true
        wait "$WALRELAY_PID" 2>/dev/null || true
    fi
    if ((USE_ENV)); then
        # The test environment keeps running: leave no slot holding its WAL.
        "$SCRIPT_DIR/pg.sh" psql "$PG_DIR" -X -q -d postgres \
            -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'walrelay_demo'" \
            -c "DROP DATABASE IF EXISTS shop WITH (FORCE)" >/dev/null 2>&1 || true
    else
        "$SCRIPT_DIR/kafka.sh" stop "$KAFKA_DIR" || true
        "$SCRIPT_DIR/pg.sh" stop "$PG_DIR" || true
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

cd "$REPO_ROOT"
mkdir -p "$DEMO_DIR"
chmod 755 "$REPO_ROOT/.walrelay-env" "$DEMO_DIR"

if [[ -n $ROOT ]]; then
    [[ $(id -u) -eq 0 ]] || die "--root runs the relay with chroot: run as root"
    [[ -x $ROOT/usr/local/bin/walrelay ]] || die "--root $ROOT: no usr/local/bin/walrelay there"
    step "the relay: the image's /usr/local/bin/walrelay, as its user 10001, in $ROOT"
    WALRELAY=(chroot --userspec=10001:10001 "$ROOT" /usr/local/bin/walrelay)
else
    step "building walrelay"
    need_build_tools
    cargo build --release --bin walrelay
    WALRELAY=("$REPO_ROOT/target/release/walrelay")
fi

if ((USE_ENV)); then
    step "using the test environment's PostgreSQL and Kafka"
else
    step "starting PostgreSQL 15 (wal_level=$WAL_LEVEL) and Apache Kafka (KRaft)"
    # A fresh broker each time, so the consumer below shows only this run's events.
    "$SCRIPT_DIR/kafka.sh" rm "$KAFKA_DIR"
    WALRELAY_PG_WAL_LEVEL=$WAL_LEVEL "$SCRIPT_DIR/pg.sh" start "$PG_DIR"
    "$SCRIPT_DIR/kafka.sh" start "$KAFKA_DIR"
fi
PG_PORT=$(cat "$PG_DIR/port")
BOOTSTRAP=$("$SCRIPT_DIR/kafka.sh" bootstrap "$KAFKA_DIR")
psql_demo() { "$SCRIPT_DIR/pg.sh" psql "$PG_DIR" -X -q -v ON_ERROR_STOP=1 "$@"; }
echo "postgres on 127.0.0.1:$PG_PORT, kafka on $BOOTSTRAP"

step "creating database shop: orders table and outbox table"
psql_demo -d postgres -c "DROP DATABASE IF EXISTS shop WITH (FORCE)"
psql_demo -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'walrelay_demo'" >/dev/null
psql_demo -d postgres -c "CREATE DATABASE shop"
psql_demo -d shop <<'SQL'
CREATE TABLE orders (
    id          bigserial PRIMARY KEY,
    customer    text NOT NULL,
    total_cents bigint NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
SQL
if ((POLL)); then
    # The polling outbox: an order column and the published marker, the
    # partial index the claims use, and the LISTEN trigger.
    psql_demo -d shop -f "$REPO_ROOT/deploy/postgresql/outbox_poll.sql" -v role=walrelay_demo >/dev/null
    psql_demo -d shop -f "$REPO_ROOT/deploy/postgresql/outbox_notify.sql" >/dev/null 2>&1
    psql_demo -d shop -c '\d outbox'
else
    psql_demo -d shop <<'SQL'
-- The outbox table in Debezium's shape.
CREATE TABLE outbox (
    id            uuid PRIMARY KEY,
    aggregatetype varchar(255) NOT NULL,
    aggregateid   varchar(255) NOT NULL,
    type          varchar(255) NOT NULL,
    payload       jsonb
);
SQL
fi
"$SCRIPT_DIR/kafka.sh" topics "$KAFKA_DIR" --create --if-not-exists --topic "$TOPIC" --partitions 3 --replication-factor 1 >/dev/null

step "starting walrelay"
CONFIG=$DEMO_DIR/walrelay.toml
CONFIG_ARG=$CONFIG
if [[ -n $ROOT ]]; then
    mkdir -p "$ROOT/etc/walrelay"
    CONFIG=$ROOT/etc/walrelay/walrelay.toml
    CONFIG_ARG=/etc/walrelay/walrelay.toml
fi
cat >"$CONFIG" <<TOML
[postgres]
host = "127.0.0.1"
port = $PG_PORT
user = "postgres"
dbname = "shop"

[replication]
slot = "walrelay_demo"
publication = "walrelay_demo"

[outbox]
table = "public.outbox"

[router]
route_topic_replacement = "${TOPIC%Order}\${routedByValue}"

[kafka]
bootstrap_servers = "$BOOTSTRAP"
TOML
if ((POLL)); then
    cat >>"$CONFIG" <<TOML

[source]
kind = "poll"

[poll]
order_by = ["seq"]
listen_channel = "walrelay_outbox"
TOML
fi
cat "$CONFIG"
chmod 644 "$CONFIG"
"${WALRELAY[@]}" run --config "$CONFIG_ARG" &
WALRELAY_PID=$!
if ((POLL)); then
    # Publishing once it holds the shard lock.
    for _ in $(seq 1 50); do
        held=$(psql_demo -d shop -Atc "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted")
        [[ "$held" -ge 1 ]] && break
        sleep 0.2
    done
    [[ "$held" -ge 1 ]] || die "walrelay did not take the shard lock"
else
    for _ in $(seq 1 50); do
        active=$(psql_demo -d shop -Atc "SELECT active FROM pg_replication_slots WHERE slot_name = 'walrelay_demo'")
        [[ "$active" == t ]] && break
        sleep 0.2
    done
    [[ "$active" == t ]] || die "walrelay did not start streaming"
fi

OUTBOX_DELETE="DELETE FROM outbox;"
if ((POLL)); then
    OUTBOX_DELETE=""
    step "writing $N_ORDERS orders the way a service does: order row + outbox insert, one transaction each"
else
    step "writing $N_ORDERS orders the way a service does: order row + outbox insert + outbox delete, one transaction each"
fi
for i in $(seq 1 "$N_ORDERS"); do
    psql_demo -d shop <<SQL
BEGIN;
WITH o AS (
    INSERT INTO orders (customer, total_cents) VALUES ('customer-$i', $((i * 1250))) RETURNING id, customer, total_cents
)
INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)
SELECT gen_random_uuid(), 'Order', o.id::text, 'OrderCreated',
       jsonb_build_object('orderId', o.id, 'customer', o.customer, 'totalCents', o.total_cents)
FROM o;
$OUTBOX_DELETE
COMMIT;
SQL
done
psql_demo -d shop -c "SELECT count(*) AS orders FROM orders" -c "SELECT count(*) AS rows_left_in_outbox FROM outbox"

step "reading topic $TOPIC as a consumer sees it (partition, id header, key, value)"
cat >"$DEMO_DIR/consumer-log4j2.xml" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders><Console name="err" target="SYSTEM_ERR"><PatternLayout pattern="%d %p %m%n"/></Console></Appenders>
  <Loggers><Root level="warn"><AppenderRef ref="err"/></Root></Loggers>
</Configuration>
XML
KAFKA_VERSION=$(sed -n 's/^KAFKA_VERSION=//p' "$SCRIPT_DIR/kafka.sh")
java -cp "$REPO_ROOT/.cache/kafka/$KAFKA_VERSION/libs/*" \
    -Dlog4j2.configurationFile="$DEMO_DIR/consumer-log4j2.xml" \
    org.apache.kafka.tools.consumer.ConsoleConsumer \
    --bootstrap-server "$BOOTSTRAP" --topic "$TOPIC" --from-beginning \
    --max-messages "$N_ORDERS" --timeout-ms 30000 \
    --property print.partition=true --property print.headers=true --property print.key=true \
    2> >(grep -v -E 'SLF4J|log4j' >&2) | tee "$DEMO_DIR/consumed.txt"
consumed=$(grep -c '"customer": *"customer-' "$DEMO_DIR/consumed.txt" || true)
((consumed == N_ORDERS)) || die "the consumer read $consumed order events, $N_ORDERS expected"

if ((POLL)); then
    step "the outbox rows: marked published once Kafka acknowledged them"
    sleep 1
    psql_demo -d shop -c "SELECT seq, aggregateid, type, published_at FROM outbox ORDER BY seq"
    exit 0
fi
step "the slot: confirmed position follows the server once Kafka acknowledged everything"
sleep 2
psql_demo -d shop -c "SELECT slot_name, active, confirmed_flush_lsn, pg_current_wal_lsn(),
    pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn) AS lag_bytes FROM pg_replication_slots
    WHERE slot_name = 'walrelay_demo'"
