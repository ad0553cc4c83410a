#!/usr/bin/env bash
# Records raw pgoutput messages from a throwaway PostgreSQL cluster into
# proto/tests/fixtures/<scenario>.txt, the decoder's test data.
#
# Usage: scripts/record-fixtures.sh [OUT_DIR] [SCENARIO...]
#   (defaults: proto/tests/fixtures, every scenario)
#
# File format (one file per scenario):
#   # proto_version=N binary=on|off streaming=on|off
#   <lsn> <xid> <hex of one pgoutput message>      (one line per message)
# Lines come from pg_logical_slot_peek_binary_changes in order. LSNs, xids,
# OIDs and timestamps differ between recordings; the row values below do not.
#
# Every scenario gets its own slot, created after its setup SQL and right
# before its change SQL, so a file holds exactly the changes of that scenario.
# The slot is decoded with publication 'pub' (FOR ALL TABLES) and
# messages=true; streaming/binary/two_phase as stated per scenario.
# scripts/fixtures.md summarises the scenarios.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

OUT_DIR=$(abs_path "${1:-$REPO_ROOT/proto/tests/fixtures}")
shift || true
MAX_FILE_BYTES=$((2 * 1024 * 1024))

# ---------------------------------------------------------------------------
# Shared table definitions (setup SQL; never part of a recording).

# Debezium outbox shape plus an int4 and a bool column.
OUTBOX_TABLE="
DROP TABLE IF EXISTS outbox;
CREATE TABLE outbox (
    id            uuid PRIMARY KEY,
    aggregatetype varchar(255) NOT NULL,
    aggregateid   varchar(255) NOT NULL,
    type          varchar(255) NOT NULL,
    payload       jsonb,
    attempt       int4 NOT NULL,
    urgent        bool NOT NULL
);"

# Row 1 has every column set; row 2 has a NULL payload.
OUTBOX_TWO_INSERTS="
BEGIN;
INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, attempt, urgent)
VALUES ('6f1d6d9a-8f4b-4c1e-9a77-0c1d2e3f4a5b', 'order', '42', 'OrderCreated',
        '{\"id\": 42, \"total\": 9.99}', 1, true);
INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, attempt, urgent)
VALUES ('0b9e2c4d-1a2b-4c3d-8e4f-5a6b7c8d9e0f', 'customer', 'c-7', 'CustomerUpdated',
        NULL, -5, false);
COMMIT;"

# 2000 rows of about 70 bytes: far above logical_decoding_work_mem=64kB, so
# the transaction is streamed in several Stream Start..Stop blocks.
STREAM_TABLE="
DROP TABLE IF EXISTS stream_rows;
CREATE TABLE stream_rows (id int4 PRIMARY KEY, payload text NOT NULL);"

# ---------------------------------------------------------------------------
# Scenarios. Each sets SETUP_SQL (run before the slot exists) and CHANGES_SQL
# (recorded), then calls: record NAME PROTO_VERSION STREAMING BINARY TWO_PHASE

# Begin, Relation(outbox), Insert x2, Commit.
scenario_insert() {
    SETUP_SQL=$OUTBOX_TABLE
    CHANGES_SQL=$OUTBOX_TWO_INSERTS
    record insert 2 off off off
}

# Same rows, proto_version 1 (no streaming, no messages wrapping changes).
scenario_insert_v1() {
    SETUP_SQL=$OUTBOX_TABLE
    CHANGES_SQL=$OUTBOX_TWO_INSERTS
    record insert_v1 1 off off off
}

# Same rows with binary=true: uuid 16 bytes, int4 4 bytes big-endian, bool 1
# byte, jsonb a version byte (1) then the text, varchar the text.
scenario_binary() {
    SETUP_SQL=$OUTBOX_TABLE
    CHANGES_SQL=$OUTBOX_TWO_INSERTS
    record binary 2 off on off
}

# The Debezium outbox pattern: insert and delete the same row in one txn.
# REPLICA IDENTITY DEFAULT: the Delete carries a 'K' tuple (id set, others NULL).
scenario_insert_delete() {
    SETUP_SQL=$OUTBOX_TABLE
    CHANGES_SQL="
BEGIN;
INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, attempt, urgent)
VALUES ('6f1d6d9a-8f4b-4c1e-9a77-0c1d2e3f4a5b', 'order', '42', 'OrderCreated',
        '{\"id\": 42}', 0, false);
DELETE FROM outbox WHERE id = '6f1d6d9a-8f4b-4c1e-9a77-0c1d2e3f4a5b';
COMMIT;"
    record insert_delete 2 off off off
}

# REPLICA IDENTITY DEFAULT.
# txn 1: non-key update -> Update without old tuple ('N' only).
# txn 2: key update (id 1 -> 2) -> Update with a 'K' old tuple (id=1).
scenario_update_default() {
    SETUP_SQL="
DROP TABLE IF EXISTS accounts_default;
CREATE TABLE accounts_default (id int4 PRIMARY KEY, name text NOT NULL, balance int8 NOT NULL);
INSERT INTO accounts_default VALUES (1, 'ada', 100);"
    CHANGES_SQL="
UPDATE accounts_default SET balance = 200 WHERE id = 1;
UPDATE accounts_default SET id = 2 WHERE id = 1;"
    record update_default 2 off off off
}

# REPLICA IDENTITY FULL.
# txn 1: non-key update -> Update with an 'O' old tuple (1, 'ada', 100).
# txn 2: delete -> Delete with an 'O' tuple (1, 'ada', 200).
scenario_update_full() {
    SETUP_SQL="
DROP TABLE IF EXISTS accounts_full;
CREATE TABLE accounts_full (id int4 PRIMARY KEY, name text NOT NULL, balance int8 NOT NULL);
ALTER TABLE accounts_full REPLICA IDENTITY FULL;
INSERT INTO accounts_full VALUES (1, 'ada', 100);"
    CHANGES_SQL="
UPDATE accounts_full SET balance = 200 WHERE id = 1;
DELETE FROM accounts_full WHERE id = 1;"
    record update_full 2 off off off
}

# body is stored out of line and uncompressed (STORAGE EXTERNAL): 400 md5
# hex strings = 12800 bytes, string_agg(md5(i::text), '' ORDER BY i) for i in 1..400.
# txn 1: insert -> Insert with the full 12800-byte body.
# txn 2: update of title only -> Update whose body column is 'u' (unchanged TOAST).
scenario_toast_unchanged() {
    SETUP_SQL="
DROP TABLE IF EXISTS docs;
CREATE TABLE docs (id int4 PRIMARY KEY, title text NOT NULL, body text NOT NULL);
ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL;"
    CHANGES_SQL="
INSERT INTO docs (id, title, body)
SELECT 1, 'v1', string_agg(md5(i::text), '' ORDER BY i) FROM generate_series(1, 400) AS i;
UPDATE docs SET title = 'v2' WHERE id = 1;"
    record toast_unchanged 2 off off off
}

# txn 1: TRUNCATE of two tables with RESTART IDENTITY -> one Truncate, options=2, 2 relation ids.
# txn 2: TRUNCATE ... CASCADE of one table -> Truncate, options=1, 1 relation id.
scenario_truncate() {
    SETUP_SQL="
DROP TABLE IF EXISTS truncate_a, truncate_b;
CREATE TABLE truncate_a (id serial PRIMARY KEY, v text);
CREATE TABLE truncate_b (id serial PRIMARY KEY, v text);
INSERT INTO truncate_a (v) VALUES ('a1'), ('a2');
INSERT INTO truncate_b (v) VALUES ('b1');"
    CHANGES_SQL="
TRUNCATE truncate_a, truncate_b RESTART IDENTITY;
TRUNCATE truncate_a CASCADE;"
    record truncate 2 off off off
}

# Begin, Message(transactional, prefix 'walrelay', content 'hello'), Commit.
scenario_message_transactional() {
    SETUP_SQL=""
    CHANGES_SQL="
BEGIN;
SELECT pg_logical_emit_message(true, 'walrelay', 'hello');
COMMIT;"
    record message_transactional 2 off off off
}

# A lone Message (non-transactional, flags 0), no Begin/Commit.
scenario_message_nontransactional() {
    SETUP_SQL=""
    CHANGES_SQL="
SELECT pg_logical_emit_message(false, 'walrelay', 'hello');"
    record message_nontransactional 2 off off off
}

# Streamed and committed: Stream Start (first_segment=1), Relation, Inserts
# (each with the xid), Stream Stop, ... more blocks ..., Stream Commit.
# Row i: (i, 'stream-row-' || i || '-' || md5(i::text)).
scenario_stream_commit() {
    SETUP_SQL=$STREAM_TABLE
    CHANGES_SQL="
BEGIN;
INSERT INTO stream_rows SELECT i, 'stream-row-' || i || '-' || md5(i::text) FROM generate_series(1, 2000) AS i;
COMMIT;"
    record stream_commit 2 on off off
}

# The same rows in a transaction that is rolled back: its streamed blocks,
# then Stream Abort with subxid = xid. Recorded from a live walsender
# (record_live): decoded after the fact, an aborted transaction is cut short
# and never gets its Stream Abort. The rows still in memory at the rollback
# (under 64kB) are never sent.
scenario_stream_abort() {
    SETUP_SQL=$STREAM_TABLE
    OPEN_SQL="
BEGIN;
INSERT INTO stream_rows SELECT i, 'stream-row-' || i || '-' || md5(i::text) FROM generate_series(1, 2000) AS i;"
    CLOSE_SQL="
ROLLBACK;"
    record_live stream_abort 2 on off A
}

# A streamed transaction whose savepoint is rolled back after its rows were
# streamed: Stream Abort with subxid != xid, then more rows, then Stream Commit.
# Kept rows: 1..1000 and 5000; rolled back: 2001..3000.
scenario_stream_subxact_abort() {
    SETUP_SQL=$STREAM_TABLE
    CHANGES_SQL="
BEGIN;
INSERT INTO stream_rows SELECT i, 'stream-row-' || i || '-' || md5(i::text) FROM generate_series(1, 1000) AS i;
SAVEPOINT s1;
INSERT INTO stream_rows SELECT i, 'stream-row-' || i || '-' || md5(i::text) FROM generate_series(2001, 3000) AS i;
ROLLBACK TO SAVEPOINT s1;
INSERT INTO stream_rows VALUES (5000, 'after-rollback');
COMMIT;"
    record stream_subxact_abort 2 on off off
}

# proto_version 3, slot created with two_phase=true, option two_phase=on.
# gid1: Begin Prepare, Relation, Insert (1, 'committed'), Prepare, Commit Prepared.
# gid2: Begin Prepare, Insert (2, 'rolled back'), Prepare, Rollback Prepared.
scenario_two_phase() {
    SETUP_SQL="
DROP TABLE IF EXISTS tp;
CREATE TABLE tp (id int4 PRIMARY KEY, note text NOT NULL);"
    CHANGES_SQL="
BEGIN;
INSERT INTO tp VALUES (1, 'committed');
PREPARE TRANSACTION 'gid1';
COMMIT PREPARED 'gid1';
BEGIN;
INSERT INTO tp VALUES (2, 'rolled back');
PREPARE TRANSACTION 'gid2';
ROLLBACK PREPARED 'gid2';"
    record two_phase 3 off off on
}

# proto_version 3, streaming and two_phase: a large prepared transaction is
# streamed and ends with Stream Prepare, then Commit Prepared.
scenario_stream_prepare() {
    SETUP_SQL=$STREAM_TABLE
    CHANGES_SQL="
BEGIN;
INSERT INTO stream_rows SELECT i, 'stream-row-' || i || '-' || md5(i::text) FROM generate_series(1, 2000) AS i;
PREPARE TRANSACTION 'gid_stream';
COMMIT PREPARED 'gid_stream';"
    record stream_prepare 3 on off on
}

# A transaction replayed under a replication origin: Begin, Origin (name
# 'walrelay_origin', commit_lsn 0/ABCDEF), Relation, Insert, Commit.
scenario_origin() {
    SETUP_SQL="
DROP TABLE IF EXISTS origin_rows;
CREATE TABLE origin_rows (id int4 PRIMARY KEY);
SELECT pg_replication_origin_drop('walrelay_origin')
  FROM pg_replication_origin WHERE roname = 'walrelay_origin';
SELECT pg_replication_origin_create('walrelay_origin');"
    CHANGES_SQL="
SELECT pg_replication_origin_session_setup('walrelay_origin');
BEGIN;
SELECT pg_replication_origin_xact_setup('0/ABCDEF', '2024-01-02 03:04:05+00');
INSERT INTO origin_rows VALUES (1);
COMMIT;
SELECT pg_replication_origin_session_reset();"
    record origin 2 off off off
}

# A column of a user-defined type: Begin, Type (public.mood), Relation,
# Insert (1, 'happy'), Commit.
scenario_custom_type() {
    SETUP_SQL="
DROP TABLE IF EXISTS moods;
DROP TYPE IF EXISTS mood;
CREATE TYPE mood AS ENUM ('happy', 'sad');
CREATE TABLE moods (id int4 PRIMARY KEY, m mood NOT NULL);"
    CHANGES_SQL="
INSERT INTO moods VALUES (1, 'happy');"
    record custom_type 2 off off off
}

ALL_SCENARIOS=(insert insert_v1 binary insert_delete update_default update_full
    toast_unchanged truncate message_transactional message_nontransactional
    stream_commit stream_abort stream_subxact_abort two_phase stream_prepare
    origin custom_type)

# ---------------------------------------------------------------------------
# Machinery.

psql_run() {
    "$SCRIPT_DIR/pg.sh" psql "$PG_DIR" "$@"
}

# Decoding only reads flushed WAL, and WAL written without a commit record (a
# non-transactional message) is flushed by the WAL writer some time later.
wait_wal_flushed() {
    local target i
    target=$(psql_run -At -c "SELECT pg_current_wal_insert_lsn()")
    for ((i = 0; i < 100; i++)); do
        [[ $(psql_run -At -c "SELECT pg_current_wal_flush_lsn() >= '$target'") == t ]] && return 0
        sleep 0.1
    done
    die "WAL up to $target was not flushed within 10 s"
}

# record NAME PROTO_VERSION STREAMING(on|off) BINARY(on|off) TWO_PHASE(on|off)
record() {
    local name=$1 proto=$2 streaming=$3 binary=$4 two_phase=$5
    local slot="s_$name" opts out tmp size
    opts="'proto_version', '$proto', 'publication_names', 'pub', 'messages', 'true'"
    [[ "$streaming" == on ]] && opts+=", 'streaming', 'on'"
    [[ "$binary" == on ]] && opts+=", 'binary', 'true'"
    [[ "$two_phase" == on ]] && opts+=", 'two_phase', 'on'"

    [[ -z "$SETUP_SQL" ]] || psql_run -f - <<<"$SETUP_SQL" >/dev/null
    psql_run -At -c "SELECT pg_create_logical_replication_slot('$slot', 'pgoutput', false, $([[ "$two_phase" == on ]] && echo true || echo false))" >/dev/null
    psql_run -f - <<<"$CHANGES_SQL" >/dev/null
    wait_wal_flushed

    out="$OUT_DIR/$name.txt"
    tmp="$out.tmp"
    {
        printf '# proto_version=%s binary=%s streaming=%s\n' "$proto" "$binary" "$streaming"
        # 64kB is the minimum; it makes the 2000-row transactions stream.
        psql_run -At -F ' ' -f - <<EOF
SET logical_decoding_work_mem = '64kB';
SELECT lsn, xid, encode(data, 'hex')
  FROM pg_logical_slot_peek_binary_changes('$slot', NULL, NULL, $opts);
EOF
    } >"$tmp"
    psql_run -At -c "SELECT pg_drop_replication_slot('$slot')" >/dev/null
    size=$(stat -c %s "$tmp")
    ((size <= MAX_FILE_BYTES)) || die "$name.txt would be $size bytes (limit $MAX_FILE_BYTES)"
    check_recording "$name" "$tmp"
    mv "$tmp" "$out"
    note "$name: $(($(wc -l <"$out") - 1)) messages, $size bytes"
}

# record_live NAME PROTO_VERSION STREAMING(on|off) BINARY(on|off) STOP_TAGS
# Runs OPEN_SQL in a session that stays open, lets a live walsender stream
# what it decodes, then runs CLOSE_SQL in that session and records until a
# message with a tag in STOP_TAGS arrives.
record_live() {
    local name=$1 proto=$2 streaming=$3 binary=$4 stop_tags=$5
    local slot="s_$name" opts out tmp body fifo rec_pid sess_pid deadline size last=-1 quiet=0
    opts="proto_version=$proto,publication_names=pub,messages=true"
    [[ "$streaming" == on ]] && opts+=",streaming=on"
    [[ "$binary" == on ]] && opts+=",binary=true"
    out="$OUT_DIR/$name.txt"
    tmp="$out.tmp"
    body="$WORK/$name.body"
    fifo="$WORK/$name.fifo"

    [[ -z "$SETUP_SQL" ]] || psql_run -f - <<<"$SETUP_SQL" >/dev/null
    psql_run -At -c "SELECT pg_create_logical_replication_slot('$slot', 'pgoutput')" >/dev/null
    # The trap stops both helpers if anything below fails.
    python3 "$SCRIPT_DIR/pgoutput-stream.py" --port "$(cat "$PG_DIR/port")" --slot "$slot" \
        --options "$opts" --stop-tags "$stop_tags" --timeout 60 >"$body" &
    rec_pid=$!
    BG_PIDS+=("$rec_pid")
    mkfifo "$fifo"
    psql_run -f - <"$fifo" >/dev/null &
    sess_pid=$!
    BG_PIDS+=("$sess_pid")
    exec 7>"$fifo"
    printf '%s\n' "$OPEN_SQL" >&7
    # Wait until something was streamed and the stream has been quiet for 1 s.
    deadline=$((SECONDS + 30))
    while ((SECONDS < deadline)); do
        sleep 0.25
        size=$(stat -c %s "$body")
        if ((size > 0 && size == last)); then
            quiet=$((quiet + 1))
            ((quiet < 4)) || break
        else
            quiet=0
        fi
        last=$size
    done
    ((size > 0)) || die "$name: nothing was streamed while the transaction was open"
    printf '%s\n' "$CLOSE_SQL" >&7
    exec 7>&-
    wait "$sess_pid" || die "$name: the session running OPEN_SQL/CLOSE_SQL failed"
    wait "$rec_pid" || die "$name: the live recording failed"
    psql_run -At -c "SELECT pg_drop_replication_slot('$slot')" >/dev/null
    {
        printf '# proto_version=%s binary=%s streaming=%s\n' "$proto" "$binary" "$streaming"
        cat "$body"
    } >"$tmp"
    size=$(stat -c %s "$tmp")
    ((size <= MAX_FILE_BYTES)) || die "$name.txt would be $size bytes (limit $MAX_FILE_BYTES)"
    check_recording "$name" "$tmp"
    mv "$tmp" "$out"
    note "$name: $(($(wc -l <"$out") - 1)) messages (live), $size bytes"
}

# Message tags (first byte) the file must contain; catches a scenario that
# silently stopped exercising what it is named after.
check_recording() {
    local name=$1 file=$2 tags tag
    case "$name" in
        stream_commit) tags="53 45 63" ;;             # S E c
        stream_abort) tags="53 45 41" ;;              # S E A
        stream_subxact_abort) tags="53 45 41 63" ;;   # S E A c
        two_phase) tags="62 50 4b 72" ;;              # b P K r
        stream_prepare) tags="53 45 70 4b" ;;         # S E p K
        toast_unchanged) tags="49 55" ;;              # I U
        truncate) tags="54" ;;                        # T
        message_*) tags="4d" ;;                       # M
        origin) tags="4f" ;;                          # O
        custom_type) tags="59" ;;                     # Y
        insert_delete) tags="49 44" ;;                # I D
        update_*) tags="55" ;;                        # U
        *) tags="42 52 49 43" ;;                      # B R I C
    esac
    for tag in $tags; do
        awk -v t="$tag" 'NR > 1 && substr($3, 1, 2) == t { found = 1 } END { exit !found }' "$file" ||
            die "$name: no message with tag 0x$tag recorded"
    done
    if [[ "$name" == toast_unchanged ]]; then
        # body is the last column: the Update must end with its kind byte 'u' (0x75).
        awk 'NR > 1 && substr($3, 1, 2) == "55" && $3 ~ /75$/ { found = 1 } END { exit !found }' "$file" ||
            die "toast_unchanged: the Update carries no unchanged-TOAST column"
    fi
}

cleanup() {
    local pid
    for pid in "${BG_PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    "$SCRIPT_DIR/pg.sh" rm "$PG_DIR" || true
    rm -rf "$WORK"
    rm -f "$OUT_DIR"/*.txt.tmp
}

main() {
    local scenarios=("$@") s
    ((${#scenarios[@]})) || scenarios=("${ALL_SCENARIOS[@]}")
    for s in "${scenarios[@]}"; do
        declare -F "scenario_$s" >/dev/null || die "unknown scenario '$s' (known: ${ALL_SCENARIOS[*]})"
    done
    mkdir -p "$OUT_DIR"
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/walrelay-fixtures.XXXXXX")
    # mktemp makes 0700; the postgres user must reach the cluster inside.
    chmod 755 "$WORK"
    PG_DIR=$WORK/pg
    BG_PIDS=()
    trap 'cleanup' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    "$SCRIPT_DIR/pg.sh" start "$PG_DIR"
    # The minimum, so the 2000-row transactions stream; cluster-wide because
    # the live recordings decode in a walsender, not in our session.
    "$SCRIPT_DIR/pg.sh" conf "$PG_DIR" logical_decoding_work_mem=64kB
    psql_run -c "CREATE PUBLICATION pub FOR ALL TABLES"
    for s in "${scenarios[@]}"; do
        "scenario_$s"
    done
}

main "$@"
