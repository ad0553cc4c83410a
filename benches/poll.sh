#!/usr/bin/env bash
# The polling source's benchmark (issue 17), one command: builds the release
# binary, resolves Kafka once (scripts/kafka.sh fetch), makes the Python
# virtualenv once (.cache/bench-venv: psycopg and confluent-kafka, pinned
# below), then runs benches/poll.py, which starts its own PostgreSQL
# (wal_level=logical, pg_stat_statements) and Kafka under
# .walrelay-env/bench-poll and measures polling with LISTEN/NOTIFY, polling
# every 100 ms and the WAL source on the same rows: backlog drains, latency
# under steady load, and what each costs the database.
#
# Usage: benches/poll.sh [--quick] [--docs] [poll.py options...]
#   --quick   smoke sizes (20,000 rows, 8 s per rate): checks the tooling
#   --docs    write the results into docs/benchmarks.md ("The polling source")
#   --help    every option (--rows, --rates, --variants, --rounds, ...)
# Results: .walrelay-env/bench-poll/results/<UTC time>/results.{json,md}; the
# tables are also printed on stdout. Nothing else on the machine should be
# busy while it runs.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$REPO_ROOT/scripts/lib.sh"

# shellcheck source=benches/venv.sh
. "$SCRIPT_DIR/venv.sh"
case " $* " in
    *" --help "* | *" -h "*) exec "$VENV/bin/python" "$SCRIPT_DIR/poll.py" --help ;;
esac
need_build_tools
(cd "$REPO_ROOT" && cargo build --release --bin walrelay >&2)
"$REPO_ROOT/scripts/kafka.sh" fetch
exec "$VENV/bin/python" "$SCRIPT_DIR/poll.py" --command "benches/poll.sh${*:+ $*}" "$@"
