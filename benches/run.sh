#!/usr/bin/env bash
# walrelay's end-to-end benchmark, one command: builds the release
# binary and the walsender baseline (benches/walsender_drain.rs), resolves
# Debezium once (scripts/debezium.sh fetch), then runs benches/bench.py, which
# starts its own PostgreSQL and Kafka under .walrelay-env/bench and measures
# W1-W5 for pg_recvlogical (the ceiling), the minimal walsender reader,
# walrelay, tuned Debezium and default Debezium on the same backlogs (W5:
# the message outbox, after the writer's cost of both outbox styles).
#
# Usage: benches/run.sh [--quick] [--docs] [bench.py options...]
#   --quick   smoke sizes (20,000 events, W3 15 s per level): checks the tooling
#   --docs    write the table and the plot into docs/benchmarks.md and .svg
#   --help    every option (workload sizes, --only W1,W3, --systems ...)
# Results: .walrelay-env/bench/results/<UTC time>/results.{json,md} and
# benchmarks.svg; the table is also printed on stdout. Nothing else on the
# machine should be busy while it runs.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$REPO_ROOT/scripts/lib.sh"

for tool in python3 pgbench pg_recvlogical java; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found (Debian: postgresql-client, openjdk-17-jre-headless, python3)"
done
case " $* " in
    *" --help "* | *" -h "*) exec python3 "$SCRIPT_DIR/bench.py" --help ;;
esac
(cd "$REPO_ROOT" && cargo build --release --bin walrelay >&2)
# A bench target's binary has a hashed name under target/release/deps: take
# its path from cargo's own artifact report.
WALSENDER_DRAIN=$(cd "$REPO_ROOT" && cargo build --release --bench walsender_drain \
    --message-format=json-render-diagnostics | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "walsender_drain" and m.get("executable"):
        print(m["executable"])
')
[ -x "$WALSENDER_DRAIN" ] || die "cargo did not report the walsender_drain binary"
"$REPO_ROOT/scripts/debezium.sh" fetch
"$REPO_ROOT/scripts/kafka.sh" fetch
exec python3 "$SCRIPT_DIR/bench.py" --command "benches/run.sh${*:+ $*}" --walsender-drain "$WALSENDER_DRAIN" "$@"
