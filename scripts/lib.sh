# shellcheck shell=bash
# Shared shell functions for the walrelay test-environment scripts.
# Sourced, never executed. Owns: messages, loopback port choice, the
# owner watchdog, Debian packages and the build's tools. Must never start or
# stop a server by itself.

# Prints a message prefixed by the calling script's name and exits 1.
die() {
    printf '%s: error: %s\n' "${0##*/}" "$*" >&2
    exit 1
}

# Prints a message on stderr prefixed by the calling script's name.
note() {
    printf '%s: %s\n' "${0##*/}" "$*" >&2
}

# Absolute path of DIR (which may not exist yet).
abs_path() {
    local d=$1
    case "$d" in
        /*) printf '%s\n' "$d" ;;
        *) printf '%s/%s\n' "$PWD" "$d" ;;
    esac
}

# True if something listens on 127.0.0.1:PORT (or on the wildcard address).
port_in_use() {
    local port=$1
    ss -ltnH "( sport = :$port )" 2>/dev/null | grep -q .
}

# Prints a loopback TCP port nobody listens on. The range sits below the
# kernel's ephemeral range so outgoing connections do not take it meanwhile;
# callers still retry on a bind failure because two callers may race.
free_port() {
    local port i
    for ((i = 0; i < 200; i++)); do
        port=$((20000 + RANDOM % 12000))
        if ! port_in_use "$port"; then
            printf '%s\n' "$port"
            return 0
        fi
    done
    die "no free loopback port found in 20000-31999"
}

# When WALRELAY_OWNER_PID is set, starts a detached watchdog that runs STOP_CMD
# once that process is gone, so a killed test run leaves no server behind.
# The watchdog also exits when ALIVE_CMD fails (the server was stopped normally).
# Usage: start_watchdog ALIVE_CMD STOP_CMD (each a string run by bash -c).
start_watchdog() {
    local alive_cmd=$1 stop_cmd=$2
    local owner=${WALRELAY_OWNER_PID:-}
    [[ -n "$owner" ]] || return 0
    [[ "$owner" =~ ^[0-9]+$ ]] || die "WALRELAY_OWNER_PID must be a process id, got '$owner'"
    # setsid: a terminal's Ctrl-C must not kill the watchdog before it acts.
    # shellcheck disable=SC2016 # the inner script expands its own arguments
    setsid bash -c '
        owner=$1 alive=$2 stop=$3
        while kill -0 "$owner" 2>/dev/null; do
            bash -c "$alive" || exit 0
            sleep 1
        done
        bash -c "$stop"
    ' walrelay-watchdog "$owner" "$alive_cmd" "$stop_cmd" </dev/null >/dev/null 2>&1 &
}

# Installs the Debian PACKAGES unless COMMAND exists; `apt-get update` only
# when the install fails without it. Parallel runs take turns.
apt_install() {
    local command=$1 log
    [[ -n "${REPO_ROOT:-}" ]] || die "apt_install needs REPO_ROOT (its lock is under .cache/)"
    shift
    command -v "$command" >/dev/null 2>&1 && return 0
    if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
        die "$command not found: install the Debian package(s) $* (apt-get install $*)"
    fi
    mkdir -p "$REPO_ROOT/.cache"
    exec 8>"$REPO_ROOT/.cache/apt.lock"
    flock 8
    if command -v "$command" >/dev/null 2>&1; then
        exec 8>&-
        return 0
    fi
    note "installing the Debian package(s) $* (first run only)"
    log=$(mktemp)
    local apt=(apt-get -q -y -o DPkg::Lock::Timeout=300)
    if ! DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "$@" >"$log" 2>&1; then
        note "apt-get install $* failed; running apt-get update first"
        if ! { "${apt[@]}" update && DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "$@"; } >>"$log" 2>&1; then
            tail -n 30 "$log" >&2
            rm -f "$log"
            die "apt-get install $* failed (log above)"
        fi
    fi
    rm -f "$log"
    command -v "$command" >/dev/null 2>&1 || die "apt-get installed $* but $command is still missing"
    exec 8>&-
}

# What building walrelay needs besides cargo: protoc (the Pulsar client's
# build generates its protocol code with it), from Debian's
# protobuf-compiler when missing; PROTOC set to another one is kept.
need_build_tools() {
    [[ -n "${PROTOC:-}" ]] && return 0
    apt_install protoc protobuf-compiler
}
