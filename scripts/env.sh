#!/usr/bin/env bash
# The shared test environment: one PostgreSQL cluster with logical decoding,
# one with wal_level=replica (the polling source's tests, in pg-replica/),
# and one Kafka broker under .walrelay-env/ at the repository root, described
# by .walrelay-env/env (a shell file the test harness sources). NATS, Redis,
# RabbitMQ, moto (the local AWS endpoint), the Pub/Sub emulator and Pulsar
# are only made ready (scripts/brokers.sh fetch): the tests of those brokers
# start servers of their own.
#
# Usage:
#   env.sh up       start them all at once (no-op for what already runs),
#                   write the env file
#   env.sh down     stop them all; keeps their data
#   env.sh status   prints the state of each; exit 0 only if all run
#   env.sh pg MAJOR start another shared cluster, of PostgreSQL MAJOR, in
#                   .walrelay-env/pg-MAJOR (the version matrix of
#                   scripts/test.sh); prints the WALRELAY_TEST_PG_* lines that
#                   point the tests at it. `down` stops these too.
#
# WALRELAY_OWNER_PID=<pid> makes servers started by `up` stop once that
# process has exited (scripts/test.sh sets it to itself). WALRELAY_PG_MAJOR
# picks the PostgreSQL major of a new cluster (scripts/pg.sh; default
# Debian's 15); the env file names the one that runs.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

ENV_ROOT=$REPO_ROOT/.walrelay-env
PG_DIR=$ENV_ROOT/pg
PG_REPLICA_DIR=$ENV_ROOT/pg-replica
KAFKA_DIR=$ENV_ROOT/kafka
ENV_FILE=$ENV_ROOT/env

usage() {
    sed -n '10,18p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

cmd_down() {
    local rc=0 dir
    # Shared brokers of an older environment, if any (tests start their own).
    for dir in "$ENV_ROOT/nats" "$ENV_ROOT/redis" "$ENV_ROOT/rabbitmq"; do
        [[ -d "$dir" ]] || continue
        "$SCRIPT_DIR/brokers.sh" stop "$dir" || rc=1
    done
    "$SCRIPT_DIR/kafka.sh" stop "$KAFKA_DIR" || rc=1
    "$SCRIPT_DIR/pg.sh" stop "$PG_DIR" || rc=1
    for dir in "$ENV_ROOT"/pg-*; do
        [[ -d "$dir" ]] || continue
        "$SCRIPT_DIR/pg.sh" stop "$dir" || rc=1
    done
    return "$rc"
}

cmd_pg() {
    local major=$1 dir
    [[ "$major" =~ ^[0-9]+$ ]] || die "'$major' is not a PostgreSQL major version"
    dir=$ENV_ROOT/pg-$major
    mkdir -p "$ENV_ROOT"
    chmod 755 "$ENV_ROOT"
    WALRELAY_PG_MAJOR=$major "$SCRIPT_DIR/pg.sh" start "$dir"
    WALRELAY_PG_MAJOR=$major WALRELAY_PG_WAL_LEVEL=replica "$SCRIPT_DIR/pg.sh" start "$dir-replica"
    printf 'export WALRELAY_TEST_PG_PORT=%s\n' "$(cat "$dir/port")"
    printf 'export WALRELAY_TEST_PG_REPLICA_PORT=%s\n' "$(cat "$dir-replica/port")"
    printf 'export WALRELAY_TEST_PG_DIR=%s\n' "$dir"
    printf 'export WALRELAY_TEST_PG_MAJOR=%s\n' "$major"
}

# Runs the start command of NAME in the background (cmd_up's up_pids, logs).
# The other brokers' programs: nats-server built once, Redis and RabbitMQ
# from Debian's packages when missing, moto installed once from PyPI, the
# Pub/Sub emulator (pstest) built once, Pulsar's jars resolved once from
# Maven Central.
fetch_brokers() {
    local kind
    for kind in nats redis rabbitmq moto pubsub pulsar; do
        "$SCRIPT_DIR/brokers.sh" fetch "$kind" || return 1
    done
}

up_job() {
    local name=$1
    shift
    "$@" </dev/null >"$logs/$name.log" 2>&1 &
    up_pids[$!]=$name
}

# Waits for the start commands still running (PIDS), then stops what they
# started. They are not killed: a start script ended halfway may leave a
# server starting that nobody stops (pg_ctl's postmaster, say). Each start is
# bounded by its own timeout; a second Ctrl-C ends this wait.
up_abort() {
    local pid
    if (($# > 0)); then
        note "interrupted: waiting for the servers being started, then stopping them all"
    fi
    for pid in "$@"; do
        wait "$pid" 2>/dev/null || true
    done
    cmd_down || true
}

cmd_up() {
    mkdir -p "$ENV_ROOT"
    # The postgres user must reach pg/ when we run as root.
    chmod 755 "$ENV_ROOT"
    # Every server starts at once: each start script waits for its own
    # server, and they mostly wait (JVM, Erlang VM). Their messages go to
    # up/NAME.log and are shown once all are done.
    local logs=$ENV_ROOT/up name pid failed=()
    local -A up_pids=()
    rm -rf "$logs"
    mkdir -p "$logs"
    # A failed or interrupted `up` must not leave half an environment running.
    trap 'trap - ERR INT TERM; up_abort "${!up_pids[@]}"; exit 1' ERR INT TERM
    up_job pg "$SCRIPT_DIR/pg.sh" start "$PG_DIR"
    # The polling source's tests: a cluster without logical decoding.
    up_job pg-replica env WALRELAY_PG_WAL_LEVEL=replica "$SCRIPT_DIR/pg.sh" start "$PG_REPLICA_DIR"
    # Every integration test uses this broker at once, and none kills it: a
    # JVM stalled for a few seconds on a busy machine must not fence it (its
    # partitions would lose their leader under every client).
    up_job kafka env WALRELAY_KAFKA_SESSION_TIMEOUT_MS=30000 "$SCRIPT_DIR/kafka.sh" start "$KAFKA_DIR"
    # The other brokers' tests each start servers of their own (an outage
    # must not hit another test): only their programs are made ready here.
    up_job brokers fetch_brokers
    for pid in "${!up_pids[@]}"; do
        wait "$pid" || failed+=("${up_pids[$pid]}")
    done
    up_pids=()
    for name in pg pg-replica kafka brokers; do
        if [[ -s "$logs/$name.log" ]]; then
            cat "$logs/$name.log" >&2
        fi
    done
    if ((${#failed[@]} > 0)); then
        trap - ERR INT TERM
        cmd_down || true
        die "could not start: ${failed[*]} (messages above)"
    fi
    trap - ERR INT TERM
    local tmp
    tmp=$(mktemp "$ENV_ROOT/env.XXXXXX")
    {
        printf '# Written by scripts/env.sh up; source it before cargo test.\n'
        printf 'export WALRELAY_TEST_PG_PORT=%s\n' "$(cat "$PG_DIR/port")"
        printf 'export WALRELAY_TEST_PG_DIR=%s\n' "$PG_DIR"
        printf 'export WALRELAY_TEST_PG_REPLICA_PORT=%s\n' "$(cat "$PG_REPLICA_DIR/port")"
        printf 'export WALRELAY_TEST_PG_MAJOR=%s\n' "$("$SCRIPT_DIR/pg.sh" major "$PG_DIR")"
        printf 'export WALRELAY_TEST_KAFKA=127.0.0.1:%s\n' "$(cat "$KAFKA_DIR/port")"
        printf 'export WALRELAY_TEST_KAFKA_DIR=%s\n' "$KAFKA_DIR"
        printf 'export WALRELAY_SCRIPTS=%s\n' "$SCRIPT_DIR"
    } >"$tmp"
    chmod 644 "$tmp"
    mv "$tmp" "$ENV_FILE"
}

cmd_status() {
    local rc=0 s
    s=$("$SCRIPT_DIR/pg.sh" status "$PG_DIR" 2>/dev/null) || rc=1
    printf 'postgresql: %s (%s)\n' "${s:-stopped}" "$PG_DIR"
    s=$("$SCRIPT_DIR/pg.sh" status "$PG_REPLICA_DIR" 2>/dev/null) || rc=1
    printf 'replica:    %s (%s)\n' "${s:-stopped}" "$PG_REPLICA_DIR"
    s=$("$SCRIPT_DIR/kafka.sh" status "$KAFKA_DIR" 2>/dev/null) || rc=1
    printf 'kafka:      %s (%s)\n' "${s:-stopped}" "$KAFKA_DIR"
    return "$rc"
}

case "${1:-}" in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    pg)
        (($# == 2)) || usage
        cmd_pg "$2"
        ;;
    *) usage ;;
esac
