#!/usr/bin/env bash
# walrelay's end-to-end benchmark, one command: builds the release
# binary and the walsender baseline (benches/walsender_drain.rs), resolves
# Debezium once (scripts/debezium.sh fetch), makes the Python virtualenv once
# (benches/venv.sh: .cache/bench-venv with psycopg, confluent-kafka and
# matplotlib, pinned), then runs the driver, the package benches/walbench
# (python -m walbench; benches/walbench/__init__.py lists its modules), which
# starts its own PostgreSQL and Kafka under .walrelay-env/bench and measures
# W1-W5 for pg_recvlogical (the ceiling), the minimal walsender reader,
# walrelay, tuned Debezium and default Debezium on the same backlogs (W5: the
# message outbox, after the writer's cost of both outbox styles).
# With --brokers nats,redis it publishes W1 and W2 to those brokers instead
# (scripts/brokers.sh; no Kafka): walrelay reading Debezium Server's
# application.properties against Debezium Server 3.6.1 on the same file
# (scripts/debezium-server.sh fetch resolves it once).
#
# Usage: benches/run.sh [--quick] [--docs] [--baseline-rev REV]... [walbench options...]
#   --quick             smoke sizes (20,000 events, W3 15 s per level): checks the tooling
#   --docs              write the table and the plot into docs/benchmarks.md and .svg
#   --baseline-rev REV  also build walrelay at git revision REV (a throwaway
#                       worktree under .walrelay-env/bench, target/bench-rev
#                       seeded from target/release so dependencies are
#                       reused) and pass it as --walrelay-binary REV=PATH:
#                       measure it as the system walrelay@REV, e.g.
#                       --systems walrelay@HEAD~1,walrelay (repeatable)
#   --brokers LIST      W1 and W2 to these brokers (nats, redis, rabbitmq,
#                       rabbitmqstream, http, sqs, kinesis, pubsub, pulsar;
#                       sqs and kinesis on moto, a local AWS endpoint; pubsub
#                       on pstest, Google's in-memory fake; pulsar a
#                       standalone) instead of Kafka: walrelay
#                       against Debezium Server, e.g.
#                       benches/run.sh --brokers nats,redis --w1 200000 --w2 500000 --rounds 3
#   --net COND          the network between PostgreSQL, Kafka and the systems
#                       under test (benches/net.sh): loopback (default: the
#                       host's, no namespaces), lan (0.2 ms round trip) or
#                       zone (1 ms), in network namespaces this run makes
#                       and removes (also when killed); needs root
#   --cc ALG            the TCP congestion control in those namespaces (cubic,
#                       bbr); with --net loopback, one namespace whose own
#                       loopback everything uses (default: the host's)
#   --net-rate RATE     a bandwidth cap on every link of lan or zone (10gbit)
#   --help              every option (workload sizes, --only W1,W3, --systems, --pin ...)
#   --http-ceiling      measure the HTTP receiver of --brokers http alone with
#                       wrk (Debian's), then exit
#   --self-check        check the driver's pieces that need no server, then exit
#                       (nothing is built or started)
# Cargo builds into $CARGO_TARGET_DIR when set (else target/), and the
# driver takes walrelay from there.
# Results: .walrelay-env/bench/results/<UTC time>/results.{json,md} and
# benchmarks.svg; the table is also printed on stdout. Nothing else on the
# machine should be busy while it runs.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$REPO_ROOT/scripts/lib.sh"

for tool in python3 pgbench pg_recvlogical java; do
    command -v "$tool" >/dev/null 2>&1 ||
        die "$tool not found (Debian: postgresql-client, openjdk-17-jre-headless, python3)"
done
# shellcheck source=benches/venv.sh
. "$SCRIPT_DIR/venv.sh"
# The driver is the package benches/walbench.
export PYTHONPATH="$SCRIPT_DIR${PYTHONPATH:+:$PYTHONPATH}"
case " $* " in
    *" --help "* | *" -h "*)
        sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
        echo
        exec "$VENV/bin/python" -m walbench --help
        ;;
    *" --self-check "*) exec "$VENV/bin/python" -m walbench --self-check ;;
esac

COMMAND="benches/run.sh${*:+ $*}"
# --baseline-rev is run.sh's: taken out of the arguments walbench sees.
ARGS=()
REVS=()
BROKERS=""
NET=loopback
CC=""
NET_RATE=""
while (($#)); do
    case "$1" in
        --net | --cc | --net-rate)
            (($# >= 2)) || die "$1 needs a value"
            case "$1" in
                --net) NET=$2 ;;
                --cc) CC=$2 ;;
                --net-rate) NET_RATE=$2 ;;
            esac
            shift 2
            ;;
        --brokers)
            (($# >= 2)) || die "--brokers needs a list of brokers"
            BROKERS=$2
            ARGS+=("$1" "$2")
            shift 2
            ;;
        --brokers=*)
            BROKERS=${1#*=}
            ARGS+=("$1")
            shift
            ;;
        --baseline-rev)
            (($# >= 2)) || die "--baseline-rev needs a git revision"
            REVS+=("$2")
            shift 2
            ;;
        --baseline-rev=*)
            REVS+=("${1#*=}")
            shift
            ;;
        *)
            ARGS+=("$1")
            shift
            ;;
    esac
done

# Builds walrelay at revision $1 once (kept as .walrelay-env/bench/rev-<sha>.walrelay)
# and prints the binary's path. Its target directory is target/bench-rev,
# not target/: the revision's crates have the same names and hashes as the
# current tree's, so in one target directory each build would take the
# other's place and cargo could call the wrong one fresh. The first time,
# target/bench-rev starts as a copy of target/release, so only walrelay's
# own crates compile; later revisions reuse it too.
build_rev() {
    local rev=$1 sha dir bin target=$REPO_ROOT/target/bench-rev
    sha=$(git -C "$REPO_ROOT" rev-parse --verify --quiet "$rev^{commit}") || die "--baseline-rev $rev: no such commit"
    sha=${sha:0:12}
    dir=$REPO_ROOT/.walrelay-env/bench/rev-$sha
    bin=$dir.walrelay
    if [[ ! -x "$bin" ]]; then
        note "building walrelay at $rev ($sha) in $dir"
        mkdir -p "$REPO_ROOT/.walrelay-env/bench"
        if [[ ! -d "$target/release" && -d "$REPO_ROOT/target/release" ]]; then
            mkdir -p "$target"
            cp -a "$REPO_ROOT/target/release" "$target/release.tmp" && mv "$target/release.tmp" "$target/release"
        fi
        git -C "$REPO_ROOT" worktree remove --force "$dir" >/dev/null 2>&1 || rm -rf "$dir"
        git -C "$REPO_ROOT" worktree prune
        git -C "$REPO_ROOT" worktree add --detach --quiet "$dir" "$sha" >&2
        (cd "$dir" && CARGO_TARGET_DIR=$target cargo build --release --bin walrelay >&2)
        cp "$target/release/walrelay" "$bin.tmp" && mv "$bin.tmp" "$bin"
        git -C "$REPO_ROOT" worktree remove --force "$dir"
    fi
    printf '%s\n' "$bin"
}
# protoc, which the build needs (a fresh machine lacks it), before any build.
need_build_tools
# walrelay's build script watches .git/index (for `git describe --dirty`),
# and the first git command after a commit or a checkout rewrites the
# index: run it here, or the build script's own would, and every build
# below would build walrelay again (scripts/test.sh does the same).
git -C "$REPO_ROOT" status --porcelain >/dev/null 2>&1 || true
BINARIES=()
for rev in "${REVS[@]}"; do
    bin=$(build_rev "$rev") || exit 1
    BINARIES+=(--walrelay-binary "$rev=$bin")
done

# A bench target's binary has a hashed name under target/release/deps: the
# path of bench target $1, taken from cargo's own artifact report. This build
# also builds walrelay with the dev-dependencies' features (tokio's
# test-util) and puts that binary at target/release/walrelay, so walrelay
# itself is built after the bench targets.
bench_binary() {
    local path
    path=$(cd "$REPO_ROOT" && cargo build --release --bench "$1" \
        --message-format=json-render-diagnostics | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == sys.argv[1] and m.get("executable"):
        print(m["executable"])
' "$1")
    [ -x "$path" ] || die "cargo did not report the $1 binary"
    printf '%s\n' "$path"
}
WALSENDER_DRAIN=$(bench_binary walsender_drain)
# The links' delay element (benches/net.sh), another bench target: built
# here, beside the other bench targets, so that walrelay, built next without
# the dev-dependencies' features, is built once.
if [[ $NET == lan || $NET == zone ]]; then
    LINK_DELAY=$(bench_binary link_delay)
    export LINK_DELAY
fi
HTTP_RECEIVER=()
if [[ ",$BROKERS," == *",http,"* || " ${ARGS[*]} " == *" --http-ceiling "* ]]; then
    # The receiver of --brokers http, a bench target like walsender_drain.
    receiver=$(bench_binary http_receiver)
    HTTP_RECEIVER=(--http-receiver "$receiver")
fi
case " ${ARGS[*]} " in
    # The receiver alone: no server, nothing else to fetch.
    *" --http-ceiling "*) exec "$VENV/bin/python" -m walbench --http-ceiling "${HTTP_RECEIVER[@]}" ;;
esac
(cd "$REPO_ROOT" && cargo build --release --bin walrelay >&2)
if [[ -n "$BROKERS" ]]; then
    # The broker drains run Debezium Server and the brokers, no Kafka.
    "$REPO_ROOT/scripts/debezium-server.sh" fetch
    for broker in ${BROKERS//,/ }; do
        case "$broker" in
            http) ;; # the bench's own receiver, built above
            rabbitmqstream) "$REPO_ROOT/scripts/brokers.sh" fetch rabbitmq ;;
            sqs | kinesis) "$REPO_ROOT/scripts/brokers.sh" fetch moto ;;
            # pubsub: scripts/pubsub-emulator built (again when its sources
            # change); pulsar: the standalone's jars from Maven Central.
            *) "$REPO_ROOT/scripts/brokers.sh" fetch "$broker" ;;
        esac
    done
else
    "$REPO_ROOT/scripts/debezium.sh" fetch
    "$REPO_ROOT/scripts/kafka.sh" fetch
fi
# The network (benches/net.sh): namespaces named after this process, which
# the driver replaces (exec keeps the pid), so the watchdog removes them
# when the driver ends, however it ends.
IN_NET=()
case "$NET" in
    loopback | lan | zone) ;;
    *) die "--net must be loopback, lan or zone, got '$NET'" ;;
esac
if [[ $NET != loopback || -n $CC ]]; then
    [[ $(id -u) -eq 0 ]] || die "--net $NET${CC:+ --cc $CC} needs root (network namespaces)"
    NETNS=wb$$
    "$SCRIPT_DIR/net.sh" watch "$NETNS" $$
    "$SCRIPT_DIR/net.sh" up "$NETNS" "$NET" "$CC" "$NET_RATE"
    # shellcheck source=/dev/null
    RELAY_NS=$(. "$REPO_ROOT/.walrelay-env/bench/net/$NETNS.env" && printf '%s' "$RELAY_NS")
    IN_NET=(ip netns exec "$RELAY_NS")
    ARGS+=(--netns "$NETNS")
fi
exec "${IN_NET[@]}" "$VENV/bin/python" -m walbench --command "$COMMAND" \
    --walsender-drain "$WALSENDER_DRAIN" "${HTTP_RECEIVER[@]}" "${BINARIES[@]}" "${ARGS[@]}"
