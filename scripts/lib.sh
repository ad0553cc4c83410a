# shellcheck shell=bash
# Shared shell functions for the walrelay test-environment scripts.
# Sourced, never executed. Owns: messages, loopback port choice, the
# owner watchdog. Must never start or stop a server by itself.

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
