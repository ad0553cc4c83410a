"""Debezium Server 3.6.1.Final (Quarkus, no Kafka Connect;
scripts/debezium-server.sh) as the broker drains run it, and the one
application.properties a broker drain gives both systems: Debezium Server
reads it from its directory, walrelay reads the same file
(`walrelay run --config application.properties`).

What the file says: the PostgreSQL connector on the drain's slot (pgoutput,
the bench publication, no snapshot) and the outbox EventRouter at its
defaults but the topic (route.topic.replacement: the drain's own subject or
stream key), and the broker's sink keys (brokers.py). Everything else is at
Debezium Server's defaults: json key, value and header formats with
schemas, max.batch.size 2048, max.queue.size 8192, poll.interval.ms 500,
the nats-jetstream sink's async publishing (the whole batch in flight),
the redis sink's batch.size 500. A variant's KEY=VALUE settings
(`dbz_server:debezium.source.max.batch.size=8192`,
`walrelay:debezium.sink.redis.batch.size=2000`) are lines of that system's
copy of the file.

Debezium Server's JVM is started as the distribution's run.sh starts it:
no heap, collector or JIT flags, so the JVM's ergonomics (here G1, a
heap of 1/64 of the memory to start and 1/4 at most, C2), written as
`-XX:+UseG1GC` because the script needs some option to replace its own
test defaults (C1 only, 512 MB, SerialGC); --dbzs-java-opts replaces it.
The offsets flush every 60 s (Debezium's default; the script's tests use
1 s). The script's ahead-of-time cache only shortens the start, which is
not in the drain's time.
"""

import os
import signal
import subprocess
import time

from . import BenchError, net
from .procs import stat_fields
from .servers import SCRIPTS

SHORT_VERSION = "3.6.1"
DEFAULT_JAVA_OPTS = "-XX:+UseG1GC"
SCRIPT = os.path.join(SCRIPTS, "debezium-server.sh")


def application_properties(pg_port, broker, slot, dest, overrides=()):
    """The drain's application.properties, as (key, value) pairs in order."""
    props = dict(broker.sink_properties(dest))
    props.update({
        "debezium.source.connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "debezium.source.database.hostname": net.pg_host(),
        "debezium.source.database.port": str(pg_port),
        "debezium.source.database.user": "postgres",
        "debezium.source.database.password": "unused",
        "debezium.source.database.dbname": "bench",
        "debezium.source.topic.prefix": "bench",
        "debezium.source.plugin.name": "pgoutput",
        "debezium.source.slot.name": slot,
        "debezium.source.publication.name": "bench",
        "debezium.source.publication.autocreate.mode": "filtered",
        "debezium.source.table.include.list": "public.outbox",
        "debezium.source.snapshot.mode": "no_data",
        "debezium.transforms": "outbox",
        "debezium.transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
        "debezium.transforms.outbox.route.topic.replacement": dest,
    })
    for k, v in overrides:
        props[k] = v
    return list(props.items())


def write_properties(path, pairs):
    with open(path, "w") as f:
        f.write("# Written by benches/walbench (a broker drain); read by Debezium Server and walrelay alike.\n")
        f.writelines(f"{k}={v}\n" for k, v in pairs)


def properties_overrides(system):
    """The raw KEY=VALUE settings of a variant (`BASE[@LABEL]:K=V:K=V`),
    as properties lines: values as written."""
    _, *kvs = system.split(":")
    out = []
    for kv in kvs:
        k, eq, v = kv.partition("=")
        if not k or not eq:
            raise BenchError(f"{system}: settings are KEY=VALUE, got {kv!r}")
        out.append((k, v))
    return out


def _alive(pid):
    fields = stat_fields(pid)
    return fields is not None and fields[0] != "Z"


class Server:
    """One Debezium Server started on DIR/application.properties: its JVM's
    pid, alive(), stop()."""

    def __init__(self, run_dir, java_opts, extra_env=None):
        self.dir = run_dir
        env = dict(os.environ, **(extra_env or {}))
        env.update(WALRELAY_DBZS_JAVA_OPTS=java_opts, WALRELAY_DBZS_START_TIMEOUT="300",
                   WALRELAY_DBZS_STOP_TIMEOUT="120", WALRELAY_DBZ_OFFSET_FLUSH_MS="60000",
                   # A watchdog stops the server if the bench dies.
                   WALRELAY_OWNER_PID=str(os.getpid()))
        self.log = os.path.join(run_dir, "log")
        # `run` returns once the connector streams; the drain's clock starts
        # earlier, when the slot turns active, so it runs in the background
        # and the JVM's pid is read from DIR/pid as soon as it is written.
        self.script = subprocess.Popen([SCRIPT, "run", run_dir], env=env, stdin=subprocess.DEVNULL,
                                       stdout=open(os.path.join(run_dir, "run.out"), "w"), stderr=subprocess.STDOUT)
        self.pid = None
        deadline = time.time() + 120
        pid_file = os.path.join(run_dir, "pid")
        while self.pid is None:
            try:
                with open(pid_file) as f:
                    self.pid = int(f.read().strip())
            except (OSError, ValueError):
                if self.script.poll() is not None:
                    raise BenchError(f"debezium-server.sh run failed:\n{self.tail()}") from None
                if time.time() > deadline:
                    self.script.kill()
                    raise BenchError("debezium-server.sh run wrote no pid within 120 s") from None
                time.sleep(0.01)

    def alive(self):
        return _alive(self.pid) and self.script.poll() in (None, 0)

    def stop(self):
        subprocess.run([SCRIPT, "stop", self.dir], check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env=dict(os.environ, WALRELAY_DBZS_STOP_TIMEOUT="120"))
        if self.script.poll() is None:
            self.script.send_signal(signal.SIGTERM)
        try:
            self.script.wait(30)
        except subprocess.TimeoutExpired:
            self.script.kill()
            self.script.wait(10)

    def tail(self, n=20):
        out = []
        for name in ("run.out", "log"):
            try:
                with open(os.path.join(self.dir, name), errors="replace") as f:
                    out.append("".join(f.readlines()[-n:]))
            except OSError:
                pass
        return "\n".join(out)
