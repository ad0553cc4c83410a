#!/usr/bin/env bash
# Failover of a distributed group: walrelay connect-distributed against Kafka
# Connect 4.1.1 + Debezium 3.6.1 distributed workers, in one run (issue 32).
# Builds the release binary, fetches Debezium's jars once, makes the Python
# virtualenv once (benches/venv.sh), starts the shared test environment
# (scripts/env.sh up) and runs benches/failover.py: per system, two workers,
# one connector, SIGKILL the one running it, seconds until the task runs on
# the other and until a consumer reads the first event written after the
# kill, and whether any event was lost.
#
# Usage: benches/failover.sh [failover.py options...]   (--help for them)
# Connect's defaults hold a departed worker's connectors for
# scheduled.rebalance.max.delay.ms (5 minutes): its one default round takes
# that long.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$REPO_ROOT/scripts/lib.sh"
# shellcheck source=benches/venv.sh
. "$SCRIPT_DIR/venv.sh"

case " $* " in
    *" --help "* | *" -h "*) exec "$VENV/bin/python" "$SCRIPT_DIR/failover.py" --help ;;
esac
need_build_tools
(cd "$REPO_ROOT" && cargo build --release --bin walrelay >&2)
"$REPO_ROOT/scripts/debezium.sh" fetch
"$REPO_ROOT/scripts/env.sh" up >&2
exec "$VENV/bin/python" "$SCRIPT_DIR/failover.py" "$@"
