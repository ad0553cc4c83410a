#!/usr/bin/env bash
# The project's single test command: format check, clippy, then the whole
# workspace's tests against a real PostgreSQL and a real Kafka broker.
#
# Usage: scripts/test.sh [ARGS...]   (ARGS go to `cargo test --workspace`)
#
# The environment (scripts/env.sh) is stopped on exit unless it was already
# running before this script started; its data stays for the next run.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

TOTAL_START=$SECONDS
PHASE_NAMES=()
PHASE_TIMES=()

# Runs a named phase and records its duration; a failing phase ends the run.
phase() {
    local name=$1 start=$SECONDS rc=0
    shift
    printf '\n==> %s\n' "$name" >&2
    "$@" || rc=$?
    PHASE_NAMES+=("$name")
    PHASE_TIMES+=("$((SECONDS - start))s$( ((rc == 0)) || printf ' FAILED (exit %s)' "$rc")")
    if ((rc != 0)); then
        summary
        exit "$rc"
    fi
}

summary() {
    local i
    printf '\n==> timings\n' >&2
    for i in "${!PHASE_NAMES[@]}"; do
        printf '  %-12s %s\n' "${PHASE_NAMES[$i]}" "${PHASE_TIMES[$i]}" >&2
    done
    printf '  %-12s %ss\n' total "$((SECONDS - TOTAL_START))" >&2
}

env_up() {
    # A watchdog stops the servers even if this script is SIGKILLed.
    WALRELAY_OWNER_PID=$$ "$SCRIPT_DIR/env.sh" up
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if ((STOP_ENV)); then
        "$SCRIPT_DIR/env.sh" down || rc=1
    fi
    exit "$rc"
}

cd "$REPO_ROOT"
STOP_ENV=0
phase fmt cargo fmt --all --check
phase clippy cargo clippy --workspace --all-targets -- -D warnings
phase deploy "$SCRIPT_DIR/check-deploy.sh"

if ! "$SCRIPT_DIR/env.sh" status >/dev/null 2>&1; then
    STOP_ENV=1
fi
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
phase env-up env_up
# shellcheck source=/dev/null
. "$REPO_ROOT/.walrelay-env/env"
phase test cargo test --workspace "$@"
summary
