#!/usr/bin/env bash
# Backlog drain benchmark: walrelay against pg_recvlogical (the walsender's
# own ceiling) on the same backlog, measured in the same invocation.
#
# Usage: benches/drain.sh [EVENTS] [ROWS_PER_TXN]
#   EVENTS        outbox events in the backlog (default 100000)
#   ROWS_PER_TXN  1 = insert-and-delete single-event transactions (W1 shape),
#                 N > 1 = N-row insert-only transactions (W2 shape); default 1
#
# It starts its own PostgreSQL and Kafka (scripts/pg.sh, scripts/kafka.sh)
# under .walrelay-env/bench, creates two slots at the same position before
# the load, writes the backlog, then drains one slot with pg_recvlogical and
# the other with walrelay (release build, acks=all, idempotence on), and
# prints events/s, the ratio to the ceiling, CPU seconds and peak RSS.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$REPO_ROOT/scripts/lib.sh"

EVENTS=${1:-100000}
ROWS_PER_TXN=${2:-1}
BENCH_DIR=$REPO_ROOT/.walrelay-env/bench
PG_DIR=$BENCH_DIR/pg
KAFKA_DIR=$BENCH_DIR/kafka
WALRELAY_PID=

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [[ -n "$WALRELAY_PID" ]] && kill -0 "$WALRELAY_PID" 2>/dev/null; then
        pkill -KILL -P "$WALRELAY_PID" 2>/dev/null || true
    fi
    "$REPO_ROOT/scripts/kafka.sh" stop "$KAFKA_DIR" >/dev/null 2>&1 || true
    "$REPO_ROOT/scripts/pg.sh" stop "$PG_DIR" >/dev/null 2>&1 || true
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$BENCH_DIR"
chmod 755 "$REPO_ROOT/.walrelay-env" "$BENCH_DIR"
(cd "$REPO_ROOT" && cargo build --release --bin walrelay >&2)
"$REPO_ROOT/scripts/pg.sh" start "$PG_DIR"
"$REPO_ROOT/scripts/kafka.sh" start "$KAFKA_DIR"
PG_PORT=$(cat "$PG_DIR/port")
BOOTSTRAP=$("$REPO_ROOT/scripts/kafka.sh" bootstrap "$KAFKA_DIR")
psql_b() { "$REPO_ROOT/scripts/pg.sh" psql "$PG_DIR" -X -q -v ON_ERROR_STOP=1 "$@"; }

psql_b -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name IN ('bench_walrelay', 'bench_ceiling')" >/dev/null
psql_b -d postgres -c "DROP DATABASE IF EXISTS bench WITH (FORCE)" -c "CREATE DATABASE bench"
psql_b -d bench <<'SQL'
CREATE TABLE outbox (
    id uuid PRIMARY KEY,
    aggregatetype varchar(255) NOT NULL,
    aggregateid varchar(255) NOT NULL,
    type varchar(255) NOT NULL,
    payload jsonb
);
CREATE PUBLICATION bench FOR TABLE outbox;
-- single-event transactions, each inserting and deleting its outbox row
CREATE PROCEDURE load_single(n int) LANGUAGE plpgsql AS $$
DECLARE i int; u uuid;
BEGIN
  FOR i IN 1..n LOOP
    u := gen_random_uuid();
    INSERT INTO outbox VALUES (u, 'Order', 'order-' || (i % 1000), 'OrderCreated',
      jsonb_build_object('orderId', i, 'customer', 'customer-' || (i % 1000), 'note', repeat('x', 200)));
    DELETE FROM outbox WHERE id = u;
    COMMIT;
  END LOOP;
END $$;
-- batched insert-only transactions
CREATE PROCEDURE load_batched(n int, per_txn int) LANGUAGE plpgsql AS $$
DECLARE i int := 0;
BEGIN
  WHILE i < n LOOP
    INSERT INTO outbox SELECT gen_random_uuid(), 'Order', 'order-' || (g % 1000), 'OrderCreated',
      jsonb_build_object('orderId', g, 'customer', 'customer-' || (g % 1000), 'note', repeat('x', 200))
      FROM generate_series(i + 1, least(i + per_txn, n)) g;
    COMMIT;
    i := i + per_txn;
  END LOOP;
END $$;
SQL
psql_b -d bench -c "SELECT pg_create_logical_replication_slot('bench_walrelay', 'pgoutput')" \
    -c "SELECT pg_create_logical_replication_slot('bench_ceiling', 'pgoutput')" >/dev/null
"$REPO_ROOT/scripts/kafka.sh" topics "$KAFKA_DIR" --create --if-not-exists --topic outbox.event.Order \
    --partitions 6 --replication-factor 1 >/dev/null

echo "loading $EVENTS events, $ROWS_PER_TXN per transaction" >&2
if ((ROWS_PER_TXN == 1)); then
    psql_b -d bench -c "CALL load_single($EVENTS)"
else
    psql_b -d bench -c "CALL load_batched($EVENTS, $ROWS_PER_TXN)"
fi
TARGET=$(psql_b -d bench -Atc "SELECT pg_current_wal_lsn()")
BACKLOG=$(psql_b -d bench -Atc "SELECT pg_size_pretty(pg_wal_lsn_diff('$TARGET', confirmed_flush_lsn)) FROM pg_replication_slots WHERE slot_name = 'bench_walrelay'")
echo "backlog: $BACKLOG of WAL up to $TARGET" >&2

now() { date +%s.%N; }
# Ceiling: pg_recvlogical drains its slot to the same LSN, output discarded.
T0=$(now)
read -r C_WALL C_USER C_SYS C_RSS < <(
    /usr/bin/time -f "%e %U %S %M" pg_recvlogical -h 127.0.0.1 -p "$PG_PORT" -U postgres -d bench \
        --slot bench_ceiling --start -o proto_version=1 -o publication_names=bench \
        -E "$TARGET" -f /dev/null 2>&1 >/dev/null | tail -n 1)
T1=$(now)

CONFIG=$BENCH_DIR/walrelay.toml
cat >"$CONFIG" <<TOML
[postgres]
host = "127.0.0.1"
port = $PG_PORT
user = "postgres"
dbname = "bench"
[replication]
slot = "bench_walrelay"
publication = "bench"
status_interval_ms = 100
[kafka]
bootstrap_servers = "$BOOTSTRAP"
[kafka.producer]
"compression.type" = "lz4"
TOML
TIMES=$BENCH_DIR/walrelay.time
T2=$(now)
/usr/bin/time -o "$TIMES" -f "%e %U %S %M" "$REPO_ROOT/target/release/walrelay" run --config "$CONFIG" \
    2>"$BENCH_DIR/walrelay.log" &
WALRELAY_PID=$!
while :; do
    done_=$(psql_b -d bench -Atc "SELECT confirmed_flush_lsn >= '$TARGET' FROM pg_replication_slots WHERE slot_name = 'bench_walrelay'")
    [[ "$done_" == t ]] && break
    kill -0 "$WALRELAY_PID" 2>/dev/null || die "walrelay exited: $(tail -n 5 "$BENCH_DIR/walrelay.log")"
    sleep 0.02
done
T3=$(now)
# $WALRELAY_PID is /usr/bin/time; walrelay is its child.
pkill -TERM -P "$WALRELAY_PID"
wait "$WALRELAY_PID" || true
WALRELAY_PID=
read -r W_WALL W_USER W_SYS W_RSS <"$TIMES"

python3 - "$EVENTS" "$T0" "$T1" "$C_USER" "$C_SYS" "$C_RSS" "$T2" "$T3" "$W_USER" "$W_SYS" "$W_RSS" <<'PY'
import sys
n = int(sys.argv[1])
t0, t1, cu, cs, crss, t2, t3, wu, ws, wrss = map(float, sys.argv[2:])
c_s, w_s = t1 - t0, t3 - t2
c_rate, w_rate = n / c_s, n / w_s
print(f"| run | seconds | events/s | vs ceiling | CPU s per 1M events | peak RSS MB |")
print(f"|---|---|---|---|---|---|")
print(f"| pg_recvlogical (ceiling) | {c_s:.2f} | {c_rate:,.0f} | 1.00 | {(cu + cs) / n * 1e6:.1f} | {crss / 1024:.1f} |")
print(f"| walrelay | {w_s:.2f} | {w_rate:,.0f} | {w_rate / c_rate:.2f} | {(wu + ws) / n * 1e6:.1f} | {wrss / 1024:.1f} |")
PY
