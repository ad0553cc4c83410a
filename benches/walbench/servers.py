"""PostgreSQL and Kafka for one driver, under a directory of .walrelay-env
of its own (never the test environment's): started with scripts/pg.sh and
scripts/kafka.sh, stopped at the end unless kept. A driver that publishes
to no Kafka (the broker drains) starts PostgreSQL alone.

Owns where the servers live and how to reach them (the port, the bootstrap
address, the postmaster's and the broker's pids). It creates no database
object and no topic: the drivers do.
"""

import os
import re
import subprocess

from . import REPO, log, net, run

SCRIPTS = os.path.join(REPO, "scripts")
# Every driver's PostgreSQL settings: a 1M-row transaction and a
# 1M-transaction backlog without a checkpoint storm in the middle of a
# drain, decoding memory at its default, no walsender timeout.
PG_SETTINGS = ("max_wal_size=16GB", "checkpoint_timeout=30min", "shared_buffers=256MB", "wal_sender_timeout=0")


class Servers:
    """One PostgreSQL cluster and one Kafka broker (unless `kafka` is
    false) under `bench_dir`."""

    def __init__(self, bench_dir, settings=(), wal_level=None, kafka=True):
        self.dir = bench_dir
        self.pg_dir = os.path.join(bench_dir, "pg")
        self.kafka_dir = os.path.join(bench_dir, "kafka")
        self.settings = PG_SETTINGS + tuple(settings)
        self.wal_level = wal_level
        self.kafka = kafka
        self.pg_port = None
        self.bootstrap = None

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        for d in (os.path.join(REPO, ".walrelay-env"), self.dir):
            os.chmod(d, 0o755)
        level = f" (wal_level={self.wal_level})" if self.wal_level else ""
        log(f"starting PostgreSQL{level}{' and Kafka' if self.kafka else ''} under {self.dir}")
        # In the network's namespaces (benches/net.sh), each server starts in
        # its own and listens on its address there.
        where = net.CURRENT
        env = dict(os.environ, **where.server_env())
        if self.wal_level:
            env["WALRELAY_PG_WAL_LEVEL"] = self.wal_level
        run(where.wrap("pg", [f"{SCRIPTS}/pg.sh", "start", self.pg_dir]), env=env)
        run(where.wrap("pg", [f"{SCRIPTS}/pg.sh", "conf", self.pg_dir, *self.settings]), stdout=subprocess.DEVNULL)
        with open(os.path.join(self.pg_dir, "port")) as f:
            self.pg_port = int(f.read().strip())
        if not self.kafka:
            return
        run(where.wrap("kafka", [f"{SCRIPTS}/kafka.sh", "start", self.kafka_dir]), env=env)
        self.bootstrap = run([f"{SCRIPTS}/kafka.sh", "bootstrap", self.kafka_dir],
                             capture_output=True, text=True).stdout.strip()

    def stop(self):
        """Stops both, quietly (also after a failed start)."""
        quiet = {"check": False, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        if self.kafka:
            run(net.CURRENT.wrap("kafka", [f"{SCRIPTS}/kafka.sh", "stop", self.kafka_dir]), **quiet)
        run(net.CURRENT.wrap("pg", [f"{SCRIPTS}/pg.sh", "stop", self.pg_dir]), **quiet)

    def broker_pid(self):
        if not self.kafka:
            return None
        with open(os.path.join(self.kafka_dir, "pid")) as f:
            return int(f.read().strip())

    def postmaster_pid(self):
        with open(os.path.join(self.pg_dir, "data", "postmaster.pid")) as f:
            return int(f.readline())


def kafka_version():
    """The broker's version, as scripts/kafka.sh pins it."""
    with open(os.path.join(SCRIPTS, "kafka.sh")) as f:
        return re.search(r"^KAFKA_VERSION=(\S+)", f.read(), re.M).group(1)
