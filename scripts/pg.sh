#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests, demo and benchmarks: logical
# decoding on, trust for the superuser, password users for the auth tests,
# listening on 127.0.0.1 only. Runs the server as user postgres when started
# by root (initdb refuses root), directly otherwise.
#
# Usage:
#   pg.sh start DIR [PORT]        initdb DIR once, start; writes DIR/port
#   pg.sh stop DIR                fast shutdown (no error if not running)
#   pg.sh restart DIR             stop, then start on the same port
#   pg.sh rm DIR                  stop and delete DIR
#   pg.sh url DIR                 prints a libpq key/value connection string
#   pg.sh status DIR              prints "running PORT" (exit 0) or "stopped" (exit 3)
#   pg.sh conf DIR KEY=VALUE...   appends settings, reloads or restarts if needed
#   pg.sh psql DIR ARGS...        psql as postgres on DIR's cluster
#   pg.sh ssl DIR CERTDIR HBA     TLS on with CERTDIR's server.crt/server.key
#                                 (client certificates checked against its
#                                 ca.crt); the file HBA replaces pg_hba.conf
#
# DIR layout: data/ (PGDATA), log (server log), port, the unix socket;
# hba.conf, when present (pg.sh ssl), is used instead of the generated pg_hba.conf.
# WALRELAY_OWNER_PID=<pid> in the environment of `start` makes a watchdog stop
# the cluster once that process has exited (used by the Rust test helpers).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

usage() {
    sed -n '7,19p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

find_bindir() {
    local d
    if command -v pg_config >/dev/null 2>&1; then
        d=$(pg_config --bindir)
        if [[ -x "$d/initdb" ]]; then
            printf '%s\n' "$d"
            return 0
        fi
    fi
    # Highest installed major version first.
    for d in $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -t/ -k5,5nr); do
        if [[ -x "$d/initdb" ]]; then
            printf '%s\n' "$d"
            return 0
        fi
    done
    die "initdb not found (looked in pg_config --bindir and /usr/lib/postgresql/*/bin): install the Debian package postgresql-15"
}

BINDIR=$(find_bindir)

# Runs a PostgreSQL program as the cluster owner. From / so that a cwd the
# postgres user cannot read does not make the programs complain.
as_pg() {
    local prog=$1
    shift
    if [[ $(id -u) -eq 0 ]]; then
        (cd / && runuser -u postgres -- "$BINDIR/$prog" "$@")
    else
        (cd / && "$BINDIR/$prog" "$@")
    fi
}

is_running() {
    local dir=$1
    [[ -f "$dir/data/PG_VERSION" ]] || return 1
    as_pg pg_ctl -D "$dir/data" status >/dev/null 2>&1
}

port_of() {
    local dir=$1
    [[ -f "$dir/port" ]] || die "no cluster configured in $dir (run: pg.sh start $dir)"
    cat "$dir/port"
}

psql_in() {
    local dir=$1 port
    shift
    port=$(port_of "$dir")
    "$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" \
        -U postgres -d postgres "$@"
}

prepare_dir() {
    local dir=$1
    mkdir -p "$dir"
    if [[ $(id -u) -eq 0 ]]; then
        chown postgres: "$dir"
        runuser -u postgres -- test -w "$dir" -a -x "$dir" ||
            die "$dir is not reachable by user postgres: every parent directory needs o+x (mktemp -d makes 0700 directories)"
    fi
}

init_cluster() {
    local dir=$1
    [[ -f "$dir/data/PG_VERSION" ]] && return 0
    rm -rf "$dir/data"
    as_pg initdb -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C --no-sync \
        >"$dir/initdb.log" 2>&1 || {
        cat "$dir/initdb.log" >&2
        die "initdb failed for $dir/data"
    }
    cat >>"$dir/data/postgresql.conf" <<'EOF'

# walrelay test settings: walrelay.conf is rewritten by pg.sh on every start,
# walrelay-extra.conf collects `pg.sh conf` settings and wins over both.
include 'walrelay.conf'
include_if_exists 'walrelay-extra.conf'
EOF
}

write_config() {
    local dir=$1 port=$2
    # Written as the cluster owner so the server can always read it.
    as_pg_write "$dir/data/walrelay.conf" <<EOF
# Written by scripts/pg.sh on every start; edits are overwritten.
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
max_connections = 200
wal_level = logical
max_replication_slots = 32
max_wal_senders = 32
max_prepared_transactions = 20
track_commit_timestamp = on
password_encryption = 'scram-sha-256'
# Durability is not what these clusters are for. synchronous_commit stays on:
# logical decoding only sends flushed WAL, and an asynchronous commit would
# reach the slot up to wal_writer_delay later.
fsync = off
full_page_writes = off
EOF
    if [[ -f "$dir/hba.conf" ]]; then
        as_pg_write "$dir/data/pg_hba.conf" <"$dir/hba.conf"
        return 0
    fi
    # Order matters: the first matching line wins, so the password users come
    # before the catch-all trust lines.
    as_pg_write "$dir/data/pg_hba.conf" <<'EOF'
# Written by scripts/pg.sh on every start; edits are overwritten.
# TYPE  DATABASE     USER             ADDRESS        METHOD
local   all          all                             trust
local   replication  all                             trust
host    all          walrelay_md5     127.0.0.1/32   md5
host    replication  walrelay_md5     127.0.0.1/32   md5
host    all          walrelay_plain   127.0.0.1/32   password
host    replication  walrelay_plain   127.0.0.1/32   password
host    all          walrelay_scram   127.0.0.1/32   scram-sha-256
host    replication  walrelay_scram   127.0.0.1/32   scram-sha-256
host    all          all              127.0.0.1/32   trust
host    replication  all              127.0.0.1/32   trust
EOF
}

# Copies stdin to FILE, owned by the cluster owner.
as_pg_write() {
    local file=$1
    cat >"$file"
    if [[ $(id -u) -eq 0 ]]; then
        chown postgres: "$file"
    fi
}

cmd_start() {
    local dir port_arg=${2:-} port auto_port
    dir=$(abs_path "$1")
    prepare_dir "$dir"
    exec 9>"$dir/.lock"
    flock 9
    if is_running "$dir"; then
        return 0
    fi
    init_cluster "$dir"
    for _ in 1 2 3; do
        auto_port=0
        if [[ -n "$port_arg" ]]; then
            port=$port_arg
        elif [[ -f "$dir/port" ]]; then
            port=$(cat "$dir/port")
        else
            port=$(free_port)
            auto_port=1
        fi
        if port_in_use "$port"; then
            ((auto_port)) || die "port $port (of $dir) is in use by another process"
            continue
        fi
        write_config "$dir" "$port"
        printf '%s\n' "$port" >"$dir/port"
        # 9>&-: the server and the watchdog must not inherit the start lock.
        if as_pg pg_ctl -D "$dir/data" -l "$dir/log" -w -t 60 -s start >"$dir/pg_ctl.out" 2>&1 9>&-; then
            start_watchdog "test -f '$dir/data/postmaster.pid'" "'$SCRIPT_DIR/pg.sh' stop '$dir'" 9>&-
            return 0
        fi
        if ((auto_port)) && tail -n 20 "$dir/log" | grep -q 'could not bind'; then
            # Another process took the freshly chosen port meanwhile.
            rm -f "$dir/port"
            continue
        fi
        cat "$dir/pg_ctl.out" >&2 || true
        printf -- '--- last lines of %s/log ---\n' "$dir" >&2
        tail -n 30 "$dir/log" >&2 || true
        die "PostgreSQL in $dir did not start"
    done
    die "could not find a free port for PostgreSQL in $dir"
}

cmd_stop() {
    local dir
    dir=$(abs_path "$1")
    if is_running "$dir"; then
        as_pg pg_ctl -D "$dir/data" -m fast -w -t 60 -s stop >/dev/null
    fi
}

cmd_status() {
    local dir
    dir=$(abs_path "$1")
    if is_running "$dir"; then
        printf 'running %s\n' "$(cat "$dir/port")"
    else
        printf 'stopped\n'
        return 3
    fi
}

cmd_conf() {
    local dir kv key value keys=() lines=() restart
    dir=$(abs_path "$1")
    shift
    [[ -f "$dir/data/PG_VERSION" ]] || die "no cluster in $dir (run: pg.sh start $dir)"
    for kv in "$@"; do
        [[ "$kv" == *=* ]] || die "setting '$kv' is not KEY=VALUE"
        key=${kv%%=*}
        value=${kv#*=}
        [[ "$key" =~ ^[a-z_.]+$ ]] || die "setting name '$key' is not a PostgreSQL parameter name"
        if [[ "$value" != \'*\' ]]; then
            value="'${value//\'/\'\'}'"
        fi
        keys+=("'$key'")
        lines+=("$key = $value")
    done
    printf '%s\n' "${lines[@]}" | as_pg_append "$dir/data/walrelay-extra.conf"
    is_running "$dir" || return 0
    # Settings of context 'postmaster' only take effect after a restart.
    restart=$(IFS=,; psql_in "$dir" -Atc \
        "select count(*) from pg_settings where context = 'postmaster' and name in (${keys[*]})")
    if [[ "$restart" != 0 ]]; then
        cmd_stop "$dir"
        cmd_start "$dir"
    else
        # The reload is asynchronous: return once new sessions see it.
        local before i
        before=$(psql_in "$dir" -Atc 'select pg_conf_load_time()')
        psql_in "$dir" -Atc 'select pg_reload_conf()' >/dev/null
        for ((i = 0; i < 50; i++)); do
            [[ $(psql_in "$dir" -Atc "select pg_conf_load_time() > '$before'") == t ]] && return 0
            sleep 0.1
        done
        die "PostgreSQL in $dir did not reload its configuration within 5 s"
    fi
}

cmd_ssl() {
    local dir certs=$2 hba=$3 f
    dir=$(abs_path "$1")
    [[ -f "$dir/data/PG_VERSION" ]] || die "no cluster in $dir (run: pg.sh start $dir)"
    for f in server.crt server.key ca.crt; do
        [[ -f "$certs/$f" ]] || die "$certs/$f not found (scripts/certs.sh makes it)"
    done
    [[ -f "$hba" ]] || die "pg_hba file $hba not found"
    # The server refuses a key that others can read, and must own it.
    for f in server.crt server.key ca.crt; do
        as_pg_write "$dir/data/walrelay-$f" <"$certs/$f"
        chmod 0600 "$dir/data/walrelay-$f"
    done
    cp "$hba" "$dir/hba.conf"
    if is_running "$dir"; then
        write_config "$dir" "$(port_of "$dir")"
    fi
    cmd_conf "$dir" ssl=on ssl_cert_file=walrelay-server.crt ssl_key_file=walrelay-server.key \
        ssl_ca_file=walrelay-ca.crt
}

as_pg_append() {
    local file=$1
    cat >>"$file"
    if [[ $(id -u) -eq 0 ]]; then
        chown postgres: "$file"
    fi
}

main() {
    local cmd=${1:-}
    [[ -n "$cmd" ]] || usage
    shift
    case "$cmd" in
        start)
            (($# >= 1 && $# <= 2)) || usage
            cmd_start "$@"
            ;;
        stop | restart | rm | url | status)
            (($# == 1)) || usage
            case "$cmd" in
                stop) cmd_stop "$1" ;;
                restart)
                    cmd_stop "$1"
                    cmd_start "$1"
                    ;;
                rm)
                    cmd_stop "$1"
                    rm -rf "$(abs_path "$1")"
                    ;;
                url)
                    local port
                    port=$(port_of "$1")
                    printf 'host=127.0.0.1 port=%s user=postgres dbname=postgres\n' "$port"
                    ;;
                status) cmd_status "$1" ;;
            esac
            ;;
        conf)
            (($# >= 2)) || usage
            cmd_conf "$@"
            ;;
        ssl)
            (($# == 3)) || usage
            cmd_ssl "$@"
            ;;
        psql)
            (($# >= 1)) || usage
            local dir=$1
            shift
            psql_in "$dir" "$@"
            ;;
        *) usage ;;
    esac
}

main "$@"
