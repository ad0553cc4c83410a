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

# What the driver needs, pinned: the versions the results were measured with.
REQUIREMENTS=("psycopg[binary]==3.3.9" "confluent-kafka==2.16.1")
VENV=$REPO_ROOT/.cache/bench-venv

for tool in python3 java; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found (Debian: python3 python3-venv, openjdk-17-jre-headless)"
done

# The virtualenv, once per set of requirements (the stamp names them).
if [[ ! -x "$VENV/bin/python" || "$(cat "$VENV/requirements.stamp" 2>/dev/null)" != "${REQUIREMENTS[*]}" ]]; then
    note "making the Python virtualenv $VENV (${REQUIREMENTS[*]})"
    rm -rf "$VENV"
    python3 -m venv "$VENV" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "${REQUIREMENTS[@]}"
    printf '%s\n' "${REQUIREMENTS[*]}" >"$VENV/requirements.stamp"
fi
case " $* " in
    *" --help "* | *" -h "*) exec "$VENV/bin/python" "$SCRIPT_DIR/poll.py" --help ;;
esac
(cd "$REPO_ROOT" && cargo build --release --bin walrelay >&2)
"$REPO_ROOT/scripts/kafka.sh" fetch
exec "$VENV/bin/python" "$SCRIPT_DIR/poll.py" --command "benches/poll.sh${*:+ $*}" "$@"
