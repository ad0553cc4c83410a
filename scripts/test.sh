#!/usr/bin/env bash
# The project's single test command: format check, clippy, then the whole
# workspace's tests against a real PostgreSQL, a real Kafka broker and real
# NATS, Redis and RabbitMQ servers (scripts/env.sh), the real Debezium
# (scripts/debezium.sh) and Debezium Server (scripts/debezium-server.sh), then
# the core delivery tests once more on each other supported PostgreSQL major
# (the version matrix, MATRIX_MAJORS below; the whole suite runs on the
# shared cluster's major, Debian's 15).
#
# Usage: scripts/test.sh [ARGS...]   (ARGS go to `cargo test --workspace`;
#        with ARGS the matrix is skipped: ARGS usually select a few tests)
#
# The environment (scripts/env.sh) is stopped on exit unless it was already
# running before this script started; its data stays for the next run.
#
# Without ARGS it also builds and checks what is shipped: the dependency
# policy (scripts/deny.sh), and the static binary and the image
# (scripts/image.sh all), whose demo runs against the test environment's
# PostgreSQL and Kafka. The static release build starts in the background
# at the lowest CPU priority once the build tools are there, so it takes
# the time the checks and the tests leave idle while they wait on servers;
# the image phase waits for it.
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

# `cargo test --workspace ARGS`; when it fails, the failing tests' panic
# messages are printed again at the end. With backtraces on, a failure's
# message sits far above the end of a long run's output, where a reader of
# only its tail (CI's excerpt) never sees it.
cargo_test() {
    local log rc=0
    log=$(mktemp)
    cargo test --workspace "$@" 2>&1 | tee "$log" || rc=${PIPESTATUS[0]}
    if ((rc != 0)); then
        printf '\n==> why the failing tests failed\n' >&2
        # From each "panicked at" to its backtrace or its note, 40 lines
        # at most each.
        awk '/^thread .* panicked at /{on=1; n=0}
             on && (/^stack backtrace:/ || /^note: /){on=0}
             on && n++ < 40' "$log" >&2
    fi
    rm -f "$log"
    return "$rc"
}

env_up() {
    local fetch rc=0
    # Debezium Server, the reference of the side-by-side suite
    # (tests/integration/compatibility_server.rs), unpacked once from ~/.m2
    # into .cache/debezium-server/ with its Java runtime, while the servers
    # start (a no-op once there).
    "$SCRIPT_DIR/debezium-server.sh" fetch &
    fetch=$!
    # A watchdog stops the servers even if this script is SIGKILLed.
    WALRELAY_OWNER_PID=$$ "$SCRIPT_DIR/env.sh" up || rc=$?
    wait "$fetch" || rc=$?
    return "$rc"
}

# PostgreSQL majors the core tests run on besides the shared cluster's.
MATRIX_MAJORS=(14 16 17 18)
# The core tests (libtest paths in the integration binary): every one must
# exist, or the matrix fails.
MATRIX_TESTS=(
    environment::shared_cluster_is_the_announced_major
    environment::pgoutput_from_real_postgres_decodes
    delivery::one_insert_gives_one_record
    delivery::insert_delete_and_rollback
    delivery::per_key_order_on_java_partition
    delivery::sigkill_mid_stream_loses_nothing
    delivery::kafka_down_freezes_the_slot
    large_transactions::interleaved_streamed_transactions
    large_transactions::streamed_then_aborted_delivers_nothing
    large_transactions::subtransaction_rollback_inside_a_streamed_transaction
    messages::one_record_per_committed_message
    faults::postgres_restart_mid_load
    operations::stops_and_takeover::hot_standby_takes_over_after_sigkill
    cli::check_passes_on_a_good_setup_and_changes_nothing
    poll::rows_become_records_and_are_marked_published
    poll::kill_between_publish_and_mark_publishes_again
    poll::standby_takes_over_after_sigkill_and_keeps_per_aggregate_order
)

# Runs MATRIX_TESTS against a cluster of each of MATRIX_MAJORS, two majors
# at a time (the tests mostly wait on servers, but four at once start four
# private Kafka brokers together, which a 2-core machine does not do within
# kafka.sh's start timeout). Each major has its own cluster; the Kafka broker
# is shared, as in the main run. Logs: .walrelay-env/matrix/.
MATRIX_PARALLEL=2
matrix() {
    local listed name major rc=0 logdir=$REPO_ROOT/.walrelay-env/matrix
    local -A pid_major=()
    listed=$(cargo test --test integration -- --list --format terse 2>/dev/null | sed -n 's/: test$//p')
    for name in "${MATRIX_TESTS[@]}"; do
        grep -qxF "$name" <<<"$listed" || {
            printf 'matrix: no integration test %s (renamed? update MATRIX_TESTS in %s)\n' "$name" "$0" >&2
            return 1
        }
    done
    rm -rf "$logdir"
    mkdir -p "$logdir"
    for major in "${MATRIX_MAJORS[@]}"; do
        WALRELAY_OWNER_PID=$$ "$SCRIPT_DIR/env.sh" pg "$major" >"$logdir/pg-$major.env" ||
            return 1
    done
    for major in "${MATRIX_MAJORS[@]}"; do
        while ((${#pid_major[@]} >= MATRIX_PARALLEL)); do
            matrix_reap pid_major || rc=1
        done
        (
            # shellcheck source=/dev/null
            . "$logdir/pg-$major.env"
            # Private clusters of these tests are of the same major.
            export WALRELAY_PG_MAJOR=$major
            exec cargo test --test integration -- --exact "${MATRIX_TESTS[@]}"
        ) >"$logdir/pg-$major.log" 2>&1 &
        pid_major[$!]=$major
    done
    while ((${#pid_major[@]} > 0)); do
        matrix_reap pid_major || rc=1
    done
    return "$rc"
}

# Waits for one run of the matrix to end and reports it; fails if it failed.
matrix_reap() {
    local -n runs=$1
    local pid major rc=0 log
    wait -n -p pid "${!runs[@]}" || rc=$?
    major=${runs[$pid]}
    unset "runs[$pid]"
    log=$REPO_ROOT/.walrelay-env/matrix/pg-$major.log
    if ((rc == 0)); then
        printf '  PostgreSQL %s: %s\n' "$major" "$(grep -E '^test result:' "$log" | tail -n 1)" >&2
        return 0
    fi
    printf '  PostgreSQL %s: FAILED (exit %s); its log:\n' "$major" "$rc" >&2
    cat "$log" >&2
    return 1
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [[ -n $STATIC_BUILD_PID ]] && kill -0 "$STATIC_BUILD_PID" 2>/dev/null; then
        kill -TERM -- "-$STATIC_BUILD_PID" 2>/dev/null || true
    fi
    if ((STOP_ENV)); then
        "$SCRIPT_DIR/env.sh" down || rc=1
    fi
    exit "$rc"
}

# The static binary, built at nice 19 in the background (its output in
# .walrelay-env/static-build.log); image_phase waits for it.
STATIC_BUILD_PID=
start_static_build() {
    mkdir -p "$REPO_ROOT/.walrelay-env"
    # walrelay's build script watches .git/index (for `--dirty`), and the
    # first `git describe --dirty` after a clone rewrites it (the test
    # build's, image.sh's): refreshed once here, the index no longer moves
    # under this build, so image.sh finds it fresh instead of rebuilding
    # (ci51: 301 s in the image phase for that alone).
    git -C "$REPO_ROOT" status --porcelain >/dev/null 2>&1 || true
    # Its own process group (setsid), which cleanup stops on an early exit.
    setsid nice -n 19 "$SCRIPT_DIR/build-static.sh" >"$REPO_ROOT/.walrelay-env/static-build.log" 2>&1 &
    STATIC_BUILD_PID=$!
}

image_phase() {
    if ! wait "$STATIC_BUILD_PID"; then
        tail -n 40 "$REPO_ROOT/.walrelay-env/static-build.log" >&2
        printf 'the static build failed (its log above)\n' >&2
        return 1
    fi
    "$SCRIPT_DIR/image.sh" all
}

# The build cache: cargo's target directories outside the clone, kept
# between runs on this machine as cargo's registry and Maven's ~/.m2 are, so
# that a run on a fresh clone compiles only walrelay's own crates (a cold
# cache costs the whole build once: about 7 minutes more on this machine).
# Under WALRELAY_BUILD_CACHE (default ~/.cache/walrelay/build): target/ for
# clippy and the tests, static/ for the static release build. Every run
# holds a shared lock on it; a run that finds no other starts by removing
# the earlier clones' walrelay artifacts (`cargo clean -p`, which takes every
# hash of a package: each clone's path gives its crates hashes of their
# own), and the whole cache once it outgrows WALRELAY_BUILD_CACHE_MAX_GB
# (default 24; old dependency versions pile up as Cargo.lock moves on).
# CARGO_TARGET_DIR set, or WALRELAY_BUILD_CACHE=off: the clone's target/.
WORKSPACE_PACKAGES=(-p walrelay -p walrelay-core -p walrelay-proto)
use_build_cache() {
    local cache=${WALRELAY_BUILD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/walrelay/build}
    if [[ -n ${CARGO_TARGET_DIR:-} || $cache == off ]]; then
        return 0
    fi
    mkdir -p "$cache"
    (
        flock -n -x 9 || exit 0
        prune_build_cache "$cache"
    ) 9>"$cache/lock"
    # The shared lock is held by a process of its own, which ends with this
    # script: the servers this script starts must not inherit it.
    # shellcheck disable=SC2016 # $1 is for sh
    flock -s "$cache/lock" sh -c 'while kill -0 "$1" 2>/dev/null; do sleep 2; done' sh "$$" &
    note "build cache: $cache"
    export CARGO_TARGET_DIR=$cache/target
    export WALRELAY_STATIC_TARGET_DIR=$cache/static
}

# Removes the earlier clones' walrelay artifacts from the build cache CACHE,
# or all of it once it outgrows WALRELAY_BUILD_CACHE_MAX_GB. Only while no
# other run holds the lock.
prune_build_cache() {
    local cache=$1 max_gb=${WALRELAY_BUILD_CACHE_MAX_GB:-24} used_kb
    used_kb=$(du -sk "$cache" | cut -f1)
    if ((used_kb > max_gb * 1024 * 1024)); then
        note "build cache $cache: $((used_kb / 1024 / 1024)) GiB, over ${max_gb}: emptied"
        rm -rf "$cache/target" "$cache/static"
    fi
    if [[ -d $cache/target ]]; then
        cargo clean -q "${WORKSPACE_PACKAGES[@]}" --target-dir "$cache/target"
    fi
    if [[ -d $cache/static ]]; then
        cargo clean -q "${WORKSPACE_PACKAGES[@]}" --target-dir "$cache/static" \
            --target x86_64-unknown-linux-musl --profile dist
    fi
}

cd "$REPO_ROOT"
STOP_ENV=0
use_build_cache
# Each crate of the workspace is compiled once per run: incremental
# compilation's caches would only cost time and space.
export CARGO_INCREMENTAL=0
# Backtraces keep their file and line; the test binaries leave out the rest
# of the debug information: building walrelay's crates for the tests took
# 128 CPU seconds instead of 158 (measured once on this machine).
# Dependencies have none anyway ([profile.dev.package."*"] in Cargo.toml).
export CARGO_PROFILE_DEV_DEBUG=line-tables-only CARGO_PROFILE_TEST_DEBUG=line-tables-only
# protoc for the Pulsar client's build (Debian's package when missing).
phase tools need_build_tools

if ! "$SCRIPT_DIR/env.sh" status >/dev/null 2>&1; then
    STOP_ENV=1
fi
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
if (($# == 0)); then
    start_static_build
fi
phase fmt cargo fmt --all --check
phase clippy cargo clippy --workspace --all-targets -- -D warnings
# walrelay-core on its own, with only its own dependencies' features: in the
# workspace build tokio has `net` through walrelay, so this build is the one
# that proves the I/O-free layers cannot reach the network.
phase core cargo clippy -p walrelay-core --all-targets -- -D warnings
phase deploy "$SCRIPT_DIR/check-deploy.sh"
phase deny "$SCRIPT_DIR/deny.sh"
# The operator page's browser test needs chromium (installed when missing).
phase browser "$SCRIPT_DIR/browser.sh"
phase env-up env_up
# shellcheck source=/dev/null
. "$REPO_ROOT/.walrelay-env/env"
# Three tests at a time on this 2-core machine (libtest's default is the
# core count): most integration tests wait on servers (PostgreSQL, Kafka,
# the brokers, Debezium's JVMs), and the suite must stay within CI's
# 30 minutes. WALRELAY_TEST_THREADS overrides it.
RUST_TEST_THREADS=${WALRELAY_TEST_THREADS:-3} phase test cargo_test "$@"
if (($# == 0)); then
    phase matrix matrix
    phase image image_phase
fi
summary
