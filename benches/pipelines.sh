#!/usr/bin/env bash
# Several pipelines in one process against one process per pipeline
# (issue 18), one command: builds the release binary, resolves Kafka once,
# makes the Python virtualenv once (benches/venv.sh), then runs
# benches/pipelines.py, which starts its own PostgreSQL and Kafka under
# .walrelay-env/bench-pipelines and drains the same four backlogs with one
# walrelay of four pipelines, four walrelays of one pipeline, and one
# walrelay of one pipeline: events/s, CPU seconds per million events, peak
# RSS.
#
# Usage: benches/pipelines.sh [--quick] [--docs] [pipelines.py options...]
#   --quick   5,000 rows per outbox, one round: checks the tooling
#   --docs    write the table into docs/benchmarks.md
#   --help    every option (--rows, --rounds, --variants, ...)
# Results: .walrelay-env/bench-pipelines/results/<UTC time>/results.{json,md}.
# Nothing else on the machine should be busy while it runs.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$REPO_ROOT/scripts/lib.sh"
# shellcheck source=benches/venv.sh
. "$SCRIPT_DIR/venv.sh"

case " $* " in
    *" --help "* | *" -h "*) exec "$VENV/bin/python" "$SCRIPT_DIR/pipelines.py" --help ;;
esac
need_build_tools
(cd "$REPO_ROOT" && cargo build --release --bin walrelay >&2)
"$REPO_ROOT/scripts/kafka.sh" fetch
exec "$VENV/bin/python" "$SCRIPT_DIR/pipelines.py" --command "benches/pipelines.sh${*:+ $*}" "$@"
