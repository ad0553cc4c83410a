# shellcheck shell=bash
# The Python virtualenv of the benchmark drivers (benches/run.sh,
# benches/poll.sh, benches/pipelines.sh): .cache/bench-venv with psycopg,
# confluent-kafka, matplotlib (walbench's plots), nats-py, redis-py and pika (the
# broker drains' counts: walbench/brokers.py), pinned below, made once per
# set of requirements (the stamp names them).
# Sourced after scripts/lib.sh; sets VENV.

# What the drivers need, pinned: the versions the results were measured with.
REQUIREMENTS=("psycopg[binary]==3.3.9" "confluent-kafka==2.16.1" "matplotlib==3.10.8" "nats-py==2.16.0"
    "redis==8.1.0" "pika==1.3.2")
VENV=$REPO_ROOT/.cache/bench-venv

for tool in python3 java; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found (Debian: python3 python3-venv, openjdk-17-jre-headless)"
done

if [[ ! -x "$VENV/bin/python" || "$(cat "$VENV/requirements.stamp" 2>/dev/null)" != "${REQUIREMENTS[*]}" ]]; then
    note "making the Python virtualenv $VENV (${REQUIREMENTS[*]})"
    rm -rf "$VENV"
    python3 -m venv "$VENV" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "${REQUIREMENTS[@]}"
    printf '%s\n' "${REQUIREMENTS[*]}" >"$VENV/requirements.stamp"
fi
