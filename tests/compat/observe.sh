#!/usr/bin/env bash
# Records, byte for byte, what the real Debezium PostgresConnector + outbox
# EventRouter produce on a Kafka Connect standalone worker, for a set of
# converter/placement scenarios. The facts go into tests/compat/observed.md;
# the raw records (one JSON object per record, keys/values/headers as hex) go
# to OUT/<scenario>/records.jsonl, the worker's files and log to
# OUT/<scenario>/worker/.
#
# Usage: tests/compat/observe.sh [OUT] [SCENARIO...]
#   OUT defaults to a new directory under /tmp; scenarios default to all the
#   table-outbox ones. `msg-*` scenarios (the logical-message outbox) run the
#   compatibility case of that name (tests/compat/cases/msg-*/ and its SQL,
#   see MSG_SCENARIOS) against Debezium alone; they also keep psql's output
#   of the feed (OUT/<scenario>/feed.out: the LSNs pg_logical_emit_message
#   returned) and what pgoutput itself sent for it (OUT/<scenario>/pgoutput.txt,
#   from a second slot peeked with pg_logical_slot_peek_binary_changes).
#
# Uses the shared environment (scripts/env.sh up, never down) and a database
# dbzcompat on it; every scenario has its own slot, publication and topic and
# drops its slot and publication afterwards.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HERE/../.." && pwd)
SCRIPTS=$REPO_ROOT/scripts
# shellcheck source=scripts/lib.sh
. "$SCRIPTS/lib.sh"

ALL_SCENARIOS=(string json-schemas json-noschemas header-json header-json-noschemas
    envelope-schemas envelope-noschemas envelope-tombstone header-placement
    expand-schemas expand-noschemas example example-json)
EXAMPLES=$REPO_ROOT/config/debezium
CASES=$REPO_ROOT/tests/compat/cases
# msg-* scenarios: name|setup SQL|feed SQL|end (records = keeps running,
# fatal = the task fails)|topics created beforehand (@AGG@ = the run token).
MSG_TOPICS='outbox.event.M_@AGG@ outbox.event.N_@AGG@ m_@AGG@.message'
MSG_SCENARIOS=(
    "msg-json-schemas|msg-none.sql|msg-feed.sql|records|$MSG_TOPICS"
    "msg-json-noschemas|msg-none.sql|msg-feed.sql|records|$MSG_TOPICS"
    "msg-string|msg-none.sql|msg-feed.sql|records|$MSG_TOPICS"
    "msg-placements-schemas|msg-none.sql|msg-placements-feed.sql|records|outbox.event.P_@AGG@ outbox.event.Q_@AGG@"
    "msg-placements-noschemas|msg-none.sql|msg-placements-feed.sql|records|outbox.event.P_@AGG@ outbox.event.Q_@AGG@"
    "msg-expand-schemas|msg-none.sql|msg-expand-feed.sql|records|outbox.event.E_@AGG@"
    "msg-expand-noschemas|msg-none.sql|msg-expand-feed.sql|records|outbox.event.E_@AGG@"
    "msg-tombstone|msg-none.sql|msg-tombstone-feed.sql|records|outbox.event.T_@AGG@"
    "msg-nulls|msg-none.sql|msg-nulls-feed.sql|records|outbox.event.M_@AGG@ outbox.event.N_@AGG@:1"
    "msg-nulls-string|msg-none.sql|msg-nulls-feed.sql|records|outbox.event.M_@AGG@ outbox.event.N_@AGG@:1"
    "msg-envelope-schemas|msg-none.sql|msg-envelope-feed.sql|records|m_@AGG@.message"
    "msg-envelope-noschemas|msg-none.sql|msg-envelope-feed.sql|records|m_@AGG@.message"
    "msg-envelope-string|msg-none.sql|msg-envelope-feed.sql|records|m_@AGG@.message"
    "msg-filter|msg-none.sql|msg-filter-feed.sql|records|m_@AGG@.message"
    "msg-exclude|msg-none.sql|msg-filter-feed.sql|records|m_@AGG@.message"
    "msg-bad-notjson|msg-none.sql|msg-bad-notjson-feed.sql|fatal|$MSG_TOPICS"
    "msg-bad-array|msg-none.sql|msg-bad-array-feed.sql|fatal|$MSG_TOPICS"
    "msg-bad-empty|msg-none.sql|msg-bad-empty-feed.sql|fatal|$MSG_TOPICS"
    "msg-bad-route|msg-none.sql|msg-bad-route-feed.sql|fatal|$MSG_TOPICS"
    "msg-bad-mixed-array|msg-none.sql|msg-bad-mixed-array-feed.sql|fatal|$MSG_TOPICS"
    "msg-bad-empty-key|msg-none.sql|msg-bad-empty-key-feed.sql|fatal|$MSG_TOPICS"
    "msg-mixed|outbox.sql|msg-mixed-feed.sql|records|outbox.event.U_@AGG@ m_@AGG@.message"
)

"$SCRIPTS/env.sh" up
# shellcheck source=/dev/null
. "$REPO_ROOT/.walrelay-env/env"
"$SCRIPTS/debezium.sh" fetch
KAFKA_LIBS=$REPO_ROOT/.cache/kafka/$(sed -n 's/^KAFKA_VERSION=//p' "$SCRIPTS/kafka.sh")/libs
[[ -d "$KAFKA_LIBS" ]] || die "no Kafka client jars in $KAFKA_LIBS (run scripts/kafka.sh fetch)"

OUT=$(abs_path "${1:-$(mktemp -d /tmp/walrelay-dbz-observe.XXXXXX)}")
shift || true
SCENARIOS=("$@")
((${#SCENARIOS[@]})) || SCENARIOS=("${ALL_SCENARIOS[@]}")
RUN=$(date +%s)
DB=dbzcompat
PARTITIONS=6
PG_ADMIN="host=127.0.0.1 port=$WALRELAY_TEST_PG_PORT user=postgres dbname=postgres"
PG_URL="host=127.0.0.1 port=$WALRELAY_TEST_PG_PORT user=postgres dbname=$DB"

psql_q() {
    psql -X -q -v ON_ERROR_STOP=1 -At -d "$PG_URL" "$@"
}

setup_db() {
    if [[ $(psql -X -At -d "$PG_ADMIN" -c "select count(*) from pg_database where datname = '$DB'") == 0 ]]; then
        psql -X -q -d "$PG_ADMIN" -c "create database $DB"
    fi
    # Debezium's outbox shape (OutboxEventRouterIT), payload nullable.
    psql_q -c "create table if not exists public.outbox (
        id uuid primary key,
        aggregatetype varchar(255) not null,
        aggregateid varchar(255) not null,
        type varchar(255) not null,
        payload jsonb)"
}

# Worker lines for SCENARIO (the converters; bootstrap is added by the caller).
worker_lines() {
    local string=org.apache.kafka.connect.storage.StringConverter
    local json=org.apache.kafka.connect.json.JsonConverter
    case "$1" in
        string | header-placement)
            printf 'key.converter=%s\nvalue.converter=%s\n' "$string" "$string"
            ;;
        json-schemas | envelope-schemas | expand-schemas)
            printf 'key.converter=%s\nvalue.converter=%s\n' "$json" "$json"
            printf 'key.converter.schemas.enable=true\nvalue.converter.schemas.enable=true\n'
            ;;
        json-noschemas | envelope-noschemas | envelope-tombstone | expand-noschemas)
            printf 'key.converter=%s\nvalue.converter=%s\n' "$json" "$json"
            printf 'key.converter.schemas.enable=false\nvalue.converter.schemas.enable=false\n'
            ;;
        header-json)
            printf 'key.converter=%s\nvalue.converter=%s\n' "$string" "$string"
            printf 'header.converter=%s\n' "$json"
            ;;
        header-json-noschemas)
            printf 'key.converter=%s\nvalue.converter=%s\n' "$string" "$string"
            printf 'header.converter=%s\nheader.converter.schemas.enable=false\n' "$json"
            ;;
        *) die "unknown scenario $1" ;;
    esac
}

# Connector settings for SCENARIO as key=value lines.
connector_lines() {
    local scenario=$1 slot=$2
    cat <<EOF
name=outbox-connector
connector.class=io.debezium.connector.postgresql.PostgresConnector
tasks.max=1
database.hostname=127.0.0.1
database.port=$WALRELAY_TEST_PG_PORT
database.user=postgres
database.password=unused
database.dbname=$DB
plugin.name=pgoutput
slot.name=$slot
publication.name=$slot
publication.autocreate.mode=filtered
table.include.list=public.outbox
topic.prefix=test
snapshot.mode=no_data
transforms=outbox
transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
EOF
    case "$scenario" in
        envelope-*) printf 'transforms.outbox.table.fields.additional.placement=type:envelope:eventType\n' ;;
        header-placement) printf 'transforms.outbox.table.fields.additional.placement=type:header:eventType\n' ;;
        expand-*) printf 'transforms.outbox.table.expand.json.payload=true\n' ;;
    esac
    case "$scenario" in
        envelope-tombstone) printf 'transforms.outbox.route.tombstone.on.empty.payload=true\n' ;;
    esac
}

# The same settings in the REST form ({"name":..., "config":{...}}).
properties_to_json() {
    python3 -c '
import json, sys
cfg = dict(l.rstrip("\n").split("=", 1) for l in sys.stdin if "=" in l)
print(json.dumps({"name": cfg["name"], "config": cfg}, indent=2))'
}

sort_records() {
    python3 -c '
import json, sys
rs = [json.loads(l) for l in sys.stdin if l.strip()]
rs.sort(key=lambda r: (r["timestamp"], r["partition"], r["offset"]))
for r in rs:
    print(json.dumps(r, ensure_ascii=False, separators=(",", ":")))'
}

drop_slot_and_publication() {
    local slot=$1 i
    for ((i = 0; i < 50; i++)); do
        [[ $(psql_q -c "select count(*) from pg_replication_slots where slot_name = '$slot' and active") == 0 ]] && break
        sleep 0.2
    done
    psql_q -c "select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = '$slot'" >/dev/null
    psql_q -c "drop publication if exists $slot"
}

# dump COUNT TIMEOUT_MS TOPIC...
dump() {
    local count=$1 timeout_ms=$2
    shift 2
    java -Xlog:disable -Xlog:all=error:stderr -XX:TieredStopAtLevel=1 -cp "$KAFKA_LIBS/*" \
        -Dlog4j2.configurationFile="$WALRELAY_TEST_KAFKA_DIR/tools-log4j2.xml" \
        "$HERE/DumpTopic.java" "$WALRELAY_TEST_KAFKA" "$count" "$timeout_ms" "$@"
}

run_scenario() {
    local scenario=$1 dir slot aggtype topic connector t0 t1
    dir=$OUT/$scenario
    slot="dbzc_${RUN}_${scenario//-/_}"
    aggtype="User_${RUN}_${scenario//-/_}"
    topic=outbox.event.$aggtype
    mkdir -p "$dir"
    if [[ "$scenario" == example* ]]; then
        # The documented example files, pointed at the test servers.
        sed -e "s|^bootstrap.servers=.*|bootstrap.servers=$WALRELAY_TEST_KAFKA|" \
            -e "s|^plugin.path=.*|plugin.path=$REPO_ROOT/.cache/debezium/3.6.1.Final/plugin|" \
            "$EXAMPLES/connect-standalone.properties" >"$dir/input-worker.properties"
        local ext=properties
        [[ "$scenario" == example-json ]] && ext=json
        connector=$dir/input-connector.$ext
        sed -E -e "s/(database.hostname\"?[=:] *\"?)localhost/\1127.0.0.1/" \
            -e "s/(database.port\"?[=:] *\"?)5432/\1$WALRELAY_TEST_PG_PORT/" \
            -e "s/(database.user\"?[=:] *\"?)debezium/\1postgres/" \
            -e "s/(database.dbname\"?[=:] *\"?)app/\1$DB/" \
            -e "s/debezium_outbox/$slot/" \
            "$EXAMPLES/outbox-connector.$ext" >"$connector"
    else
        {
            printf 'bootstrap.servers=%s\n' "$WALRELAY_TEST_KAFKA"
            worker_lines "$scenario"
        } >"$dir/input-worker.properties"
    fi
    if [[ "$scenario" == example* ]]; then
        :
    elif [[ "$scenario" == json-schemas ]]; then
        # One scenario passes the connector in the REST form.
        connector=$dir/input-connector.json
        connector_lines "$scenario" "$slot" | properties_to_json >"$connector"
    else
        connector=$dir/input-connector.properties
        connector_lines "$scenario" "$slot" >"$connector"
    fi
    # Six partitions, so the record's partition shows which key bytes the
    # producer hashed (murmur2 of the serialized key).
    TOOL_TIMEOUT=60 "$SCRIPTS/kafka.sh" topics "$WALRELAY_TEST_KAFKA_DIR" --create --if-not-exists \
        --topic "$topic" --partitions "$PARTITIONS" --replication-factor 1 >/dev/null
    note "$scenario: starting (slot $slot, topic $topic)"
    CURRENT_WORKER=$dir/worker
    CURRENT_SLOT=$slot
    t0=$(date +%s.%N)
    "$SCRIPTS/debezium.sh" standalone "$dir/worker" "$dir/input-worker.properties" "$connector"
    "$SCRIPTS/debezium.sh" wait-streaming "$dir/worker" "$slot" "$PG_URL"
    t1=$(date +%s.%N)
    printf '%.1f\n' "$(echo "$t1 - $t0" | bc)" >"$dir/startup_seconds"
    note "$scenario: streaming after $(cat "$dir/startup_seconds") s"
    # 1: Debezium's own example, written the outbox way (insert + delete in
    #    one transaction). 2: jsonb canonicalisation and string escaping,
    #    deleted in a later transaction (an op=d event the router drops).
    # 3: a NULL payload.
    psql_q <<EOF
begin;
insert into outbox values ('59a42efd-b015-44a9-9dde-cb36d9002425', '$aggtype', '10711fa5', 'UserCreated', '{"email":"gh@mefi.in"}');
delete from outbox where id = '59a42efd-b015-44a9-9dde-cb36d9002425';
commit;
insert into outbox values ('0b2e1c8a-6f4d-4c55-9d1e-2a7c3f1e9b01', '$aggtype', 'k2', 'UserUpdated',
  E'{"zeta": 1, "a": [1, 2.50, true, null], "name": "Zo\u00eb \\\\"q\\\\" \\\\\\\\ tab\\\\t", "nested": {"b": {}, "aa": []}, "a": "dup"}');
delete from outbox where id = '0b2e1c8a-6f4d-4c55-9d1e-2a7c3f1e9b01';
insert into outbox values ('7d9f6a55-3c2b-4e1a-8f00-5b6c7d8e9f10', '$aggtype', '10711fa5', 'UserDeleted', null);
delete from outbox where id = '7d9f6a55-3c2b-4e1a-8f00-5b6c7d8e9f10';
EOF
    dump 3 60000 "$topic" >/dev/null
    # Anything beyond the three (a delete that was not dropped, say) shows up
    # here. Partitions are read one after another: order by producer time.
    dump 4 3000 "$topic" 2>/dev/null | sort_records >"$dir/records.jsonl" || true
    "$SCRIPTS/debezium.sh" stop "$dir/worker"
    CURRENT_WORKER=
    drop_slot_and_publication "$slot"
    CURRENT_SLOT=
    note "$scenario: $(wc -l <"$dir/records.jsonl") record(s) in $topic"
}

# The MSG_SCENARIOS entry of NAME.
msg_entry() {
    local e
    for e in "${MSG_SCENARIOS[@]}"; do
        [[ "${e%%|*}" == "$1" ]] && { printf '%s\n' "$e"; return 0; }
    done
    die "unknown scenario $1"
}

# pgoutput's messages from pg_logical_slot_peek_binary_changes (lsn, xid,
# hex data per line on stdin), one readable line each.
decode_pgoutput() {
    python3 -c '
import struct, sys, datetime
EPOCH = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)
def lsn(v): return "%X/%X (%d)" % (v >> 32, v & 0xffffffff, v)
def ts(v): return "%d us since 1970 (%s)" % (v + 946684800000000, EPOCH + datetime.timedelta(microseconds=v))
for line in sys.stdin:
    at, xid, data = line.rstrip("\n").split("|")
    b = bytes.fromhex(data)
    k = chr(b[0])
    if k == "B":
        final, t, x = struct.unpack(">QqI", b[1:21])
        print("%s xid=%s B final_lsn=%s commit_time=%s xid=%d" % (at, xid, lsn(final), ts(t), x))
    elif k == "C":
        fl, c, e, t = struct.unpack(">BQQq", b[1:26])
        print("%s xid=%s C flags=%d commit_lsn=%s end_lsn=%s commit_time=%s" % (at, xid, fl, lsn(c), lsn(e), ts(t)))
    elif k == "M":
        fl, m = struct.unpack(">BQ", b[1:10])
        rest = b[10:]
        nul = rest.index(0)
        prefix = rest[:nul].decode()
        (n,) = struct.unpack(">I", rest[nul + 1:nul + 5])
        content = rest[nul + 5:nul + 5 + n]
        print("%s xid=%s M flags=%d lsn=%s prefix=%s content_hex=%s content=%r" % (at, xid, fl, lsn(m), prefix, content.hex(), content))
    else:
        print("%s xid=%s %s (%d bytes)" % (at, xid, k, len(b)))'
}

run_msg_scenario() {
    local scenario=$1 entry setup feed end topics dir slot peek token topic spec partitions
    entry=$(msg_entry "$scenario")
    IFS='|' read -r _ setup feed end topics <<<"$entry"
    dir=$OUT/$scenario
    token="m${RUN}_${scenario//-/_}"
    slot="dbzc_${token}"
    peek="${slot}_peek"
    mkdir -p "$dir"
    local subst=(-e "s|@BOOTSTRAP@|$WALRELAY_TEST_KAFKA|g" -e "s|@PGPORT@|$WALRELAY_TEST_PG_PORT|g"
        -e "s|@SLOT@|$slot|g" -e "s|@TABLE@|$token|g" -e "s|@AGG@|$token|g"
        -e "s|^database.dbname=postgres\$|database.dbname=$DB|" -e "s|@DB@|$DB|g")
    sed "${subst[@]}" "$CASES/$scenario/worker.properties" >"$dir/input-worker.properties"
    sed "${subst[@]}" "$CASES/$scenario/connector.properties" >"$dir/input-connector.properties"
    sed "${subst[@]}" "$CASES/$setup" >"$dir/setup.sql"
    sed "${subst[@]}" "$CASES/$feed" >"$dir/feed.sql"
    local dump_topics=()
    for spec in $topics; do
        topic=${spec%%:*}
        partitions=$PARTITIONS
        [[ "$spec" == *:* ]] && partitions=${spec##*:}
        topic=${topic//@AGG@/$token}
        dump_topics+=("$topic")
        TOOL_TIMEOUT=60 "$SCRIPTS/kafka.sh" topics "$WALRELAY_TEST_KAFKA_DIR" --create --if-not-exists \
            --topic "$topic" --partitions "$partitions" --replication-factor 1 >/dev/null
    done
    psql_q -f "$dir/setup.sql" >/dev/null
    note "$scenario: starting (slot $slot, token $token)"
    CURRENT_WORKER=$dir/worker
    CURRENT_SLOT=$slot
    CURRENT_TABLE=$token
    "$SCRIPTS/debezium.sh" standalone "$dir/worker" "$dir/input-worker.properties" "$dir/input-connector.properties"
    if ! "$SCRIPTS/debezium.sh" wait-streaming "$dir/worker" "$slot" "$PG_URL" 2>"$dir/start-error"; then
        note "$scenario: did not start streaming (see $dir/start-error)"
        "$SCRIPTS/debezium.sh" stop "$dir/worker"
        CURRENT_WORKER=
        drop_slot_and_publication "$slot"
        CURRENT_SLOT=
        psql_q -c "drop table if exists public.$token"
        CURRENT_TABLE=
        return 0
    fi
    # A second slot on the same publication, peeked afterwards: what pgoutput
    # sent (Begin/Message/Commit fields) for the feed.
    psql_q -c "select pg_create_logical_replication_slot('$peek', 'pgoutput')" >/dev/null
    CURRENT_PEEK=$peek
    psql -X -a -v ON_ERROR_STOP=1 -At -d "$PG_URL" -f "$dir/feed.sql" >"$dir/feed.out" 2>&1
    if [[ "$end" == fatal ]]; then
        local i
        for ((i = 0; i < 300; i++)); do
            grep -q 'will not recover until manually restarted' "$dir/worker/log" && break
            sleep 0.2
        done
        grep -q 'will not recover until manually restarted' "$dir/worker/log" ||
            note "$scenario: the task did not fail within 60 s"
    else
        dump 1 60000 "${dump_topics[@]}" >/dev/null || true
        sleep 3
    fi
    dump 100000 30000 "${dump_topics[@]}" 2>/dev/null | sort_records >"$dir/records.jsonl" || true
    # The task's failure, if any: the first exception and its causes.
    grep -E '^([a-z0-9_$]+\.)+[A-Za-z0-9_$]*(Exception|Error)|^Caused by: |ERROR (\[[^]]*\] )?WorkerSourceTask' "$dir/worker/log" |
        grep -vE "$NOISE" | head -n 12 >"$dir/errors.txt" || true
    psql -X -At -d "$PG_URL" -c "select lsn, coalesce(xid::text, ''), encode(data, 'hex') from pg_logical_slot_peek_binary_changes('$peek', null, null, 'proto_version', '1', 'publication_names', '$slot', 'messages', 'true')" |
        decode_pgoutput >"$dir/pgoutput.txt" || true
    psql_q -c "select pg_drop_replication_slot('$peek')" >/dev/null
    CURRENT_PEEK=
    "$SCRIPTS/debezium.sh" stop "$dir/worker"
    CURRENT_WORKER=
    cp "$dir/worker/offsets" "$dir/offsets" 2>/dev/null || true
    drop_slot_and_publication "$slot"
    CURRENT_SLOT=
    psql_q -c "drop table if exists public.$token"
    CURRENT_TABLE=
    note "$scenario: $(wc -l <"$dir/records.jsonl") record(s)"
}
NOISE='CloudEventsConverter|convertToConnect|Failed to discover Converter|ExceptionInInitializerError|ServiceConfigurationError'

# A failed scenario must not leave its worker running or its slot behind
# (a slot nobody reads pins WAL on the shared cluster).
CURRENT_WORKER=
CURRENT_SLOT=
CURRENT_PEEK=
CURRENT_TABLE=
cleanup() {
    [[ -z "$CURRENT_WORKER" ]] || "$SCRIPTS/debezium.sh" stop "$CURRENT_WORKER" || true
    [[ -z "$CURRENT_SLOT" ]] || drop_slot_and_publication "$CURRENT_SLOT" || true
    [[ -z "$CURRENT_PEEK" ]] || psql_q -c "select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = '$CURRENT_PEEK'" >/dev/null || true
    [[ -z "$CURRENT_TABLE" ]] || psql_q -c "drop table if exists public.$CURRENT_TABLE" || true
}
trap cleanup EXIT

setup_db
for s in "${SCENARIOS[@]}"; do
    case "$s" in
        msg-*) run_msg_scenario "$s" ;;
        *) run_scenario "$s" ;;
    esac
done
printf '%s\n' "$OUT"
