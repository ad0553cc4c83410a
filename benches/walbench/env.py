"""One run's environment: its PostgreSQL and Kafka (servers.py), or with
--brokers its PostgreSQL and those brokers instead of Kafka (brokers.py),
the bench database (schema.py), the slots and topics of each drain, the
Kafka clients that count and read records back, pgbench, the processes to
stop on the way out, and CPU pinning (--pin).

Owns the run's objects and their cleanup. It decides no clock and keeps
no result: the workloads (drains.py, steady.py, writer.py) do, with what
it hands them.
"""

import os
import re
import time
import tomllib

from confluent_kafka.admin import AdminClient

from . import REPO, BenchError, brokers, debezium, log, net, run
from .kafka import EndOffsets, create_topics, read_records
from .kafka_markers import KafkaCommitted
from .postgres import Pg
from .procs import cluster_cpu, set_affinity, tree
from .schema import EMIT_SQL, LOAD_MESSAGES_SQL, SCHEMA_SQL
from .servers import Servers, kafka_version
from .systems import TRANSACTIONAL, base_system

BENCH_DIR = os.path.join(REPO, ".walrelay-env", "bench")
# --pin: the walsender of the system measured alone on one CPU, everything
# else on the other.
WALSENDER_CPU, OTHERS_CPU = 0, 1
PIN_MODES = {"off": (False,), "on": (True,), "both": (False, True)}


def processed(pb):
    """The transactions a pgbench run reports it processed, or None."""
    m = re.search(r"number of transactions actually processed: (\d+)", pb.stdout)
    return int(m.group(1)) if m else None


def generator_tps(pb):
    """The transactions per second a pgbench run reports, or None."""
    m = re.search(r"tps = ([\d.]+)", pb.stdout)
    return float(m.group(1)) if m else None


class Env:
    def __init__(self, args, out_dir):
        self.args = args
        self.out = out_dir
        # --brokers: the drains publish to those brokers, and no Kafka runs.
        self.broker_kinds = list(getattr(args, "brokers", None) or [])
        # Servers in the network's namespaces have directories of their own,
        # one per condition: each keeps the address it first listened on.
        where = net.CURRENT
        server_dir = os.path.join(BENCH_DIR, f"netns-{where.cond}") if where.isolated else BENCH_DIR
        self.servers = Servers(server_dir, kafka=not self.broker_kinds)
        # The brokers too: a broker's directory keeps its first address.
        self.broker_dir = os.path.join(server_dir, "brokers")
        self.brokers = {}  # kind -> brokers.Broker, started
        self.broker_pid = None
        self.pg_dir = self.servers.pg_dir
        self.procs = []  # (kind, handle) to stop on exit
        self.txn_views = {}  # topic -> KafkaCommitted
        self.offsets = None
        self.admin = None
        self.pinned = False  # --pin: the current mode (set_pinned)
        self.all_cpus = os.sched_getaffinity(0)
        # Topics are named after the run: a kept broker may hold older ones.
        self.stamp = os.path.basename(out_dir).lower()

    # -- servers
    def start(self):
        self.servers.start()
        self.pg_port = self.servers.pg_port
        self.bootstrap = self.servers.bootstrap
        if self.servers.kafka:
            self.broker_pid = self.servers.broker_pid()
            self.kafka_version = kafka_version()
            self.admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for kind in self.broker_kinds:
            b = brokers.make(kind, brokers.server_dir(self.broker_dir, kind), self.args)
            # Stopped on the way out even if its start fails halfway.
            self.brokers[kind] = b
            b.start()
        admin = Pg(self.pg_port, "postgres")
        self.server_version_num = int(admin.value("SHOW server_version_num"))
        admin.query("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                    "WHERE slot_name LIKE 'bench\\_%' AND NOT active")
        admin.query("DROP DATABASE IF EXISTS bench WITH (FORCE)")
        admin.query("CREATE DATABASE bench")
        admin.close()
        self.db = Pg(self.pg_port, "bench")
        self.db.query(SCHEMA_SQL.replace("@NOTE@", str(self.args.note_len)))
        with open(EMIT_SQL) as f:
            self.db.query(f.read())
        self.db.query(LOAD_MESSAGES_SQL)
        if self.servers.kafka:
            self.offsets = EndOffsets(self.bootstrap, "walrelay-bench-offsets")

    def stop(self):
        if self.args.keep_servers and self.pinned:
            try:
                self.set_pinned(False)
            except OSError:
                pass
        # Kafka clients first: they would reconnect to a stopped broker.
        for c in list(self.txn_views.values()) + [self.offsets]:
            if c is not None:
                c.close()
        self.txn_views, self.offsets, self.admin = {}, None, None
        for kind, h in reversed(self.procs):
            try:
                if kind == "popen" and h.poll() is None:
                    h.kill()
                    h.wait(10)
                elif kind == "dbz":
                    debezium.stop(h)
                elif kind == "dbzs":
                    h.stop()
            except Exception:  # noqa: BLE001 - best effort on the way out
                pass
        for b in self.brokers.values():
            b.stop()
        if not self.args.keep_servers:
            self.servers.stop()

    def pgbench(self, clients, script, seconds, rate=None, check=False):
        """pgbench on the bench database: `clients` clients running
        `script` for `seconds`, open loop at `rate` per second if given."""
        cmd = ["pgbench", "-n", "-h", net.pg_host(), "-p", str(self.pg_port), "-U", "postgres",
               "-c", str(clients), "-j", str(min(clients, os.cpu_count() or 1))]
        if rate is not None:
            cmd += ["-R", str(rate)]
        return run(cmd + ["-T", str(seconds), "-f", script, "bench"], capture_output=True, text=True, check=check)

    def cluster_cpu(self):
        """CPU seconds of the whole PostgreSQL cluster so far."""
        return cluster_cpu(self.servers.postmaster_pid())

    # -- CPU pinning (--pin)
    def set_pinned(self, pinned):
        """Pinned: PostgreSQL (the postmaster, whose forked backends inherit
        it, and every process it has now), the broker's JVM (every thread,
        as `taskset -a -p` does) and the bench itself (so everything it
        starts from now: the system under test, pgbench, perf) on CPU 1;
        the walsender of the system measured moves to CPU 0 as soon as it
        shows (pin_walsender). Unpinned: every CPU for all of them."""
        if pinned == self.pinned:
            return
        cpus = {OTHERS_CPU} if pinned else self.all_cpus
        for pid in tree(self.servers.postmaster_pid()) + tree(self.broker_pid) + [os.getpid()]:
            set_affinity(pid, cpus)
        self.pinned = pinned
        log("pinned: walsender alone on CPU 0, everything else on CPU 1" if pinned else "unpinned: every CPU")

    def pin_walsender(self, ws_pid):
        if self.pinned and ws_pid:
            set_affinity(ws_pid, {WALSENDER_CPU})

    # -- objects
    def create_topic(self, topic):
        """A topic of the drivers' shape (kafka.create_topics)."""
        create_topics(self.admin, [topic])

    def create_slot(self, slot):
        self.db.query("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))

    def drop_slots(self, prefix):
        for _ in range(100):
            rows = self.db.query("SELECT slot_name, active FROM pg_replication_slots WHERE slot_name LIKE %s",
                                 (prefix.replace("_", "\\_") + "%",))
            if not rows:
                return
            for name, active in rows:
                if not active:
                    self.db.query("SELECT pg_drop_replication_slot(%s)", (name,))
            time.sleep(0.1)
        raise BenchError(f"slots {prefix}* still active after 10 s")

    def slot_state(self, slot):
        rows = self.db.query("SELECT active, active_pid FROM pg_replication_slots WHERE slot_name = %s", (slot,))
        if not rows:
            raise BenchError(f"slot {slot} is gone")
        return rows[0][0], rows[0][1]

    # -- reading records back
    def read_topic(self, topic, expect, headers=False, committed=False):
        """(LogAppendTime ms, id header or None, partition, offset) of every
        record of the topic; `committed`: as a read_committed consumer reads
        it (records of transactions not committed are not read)."""
        return read_records(self.bootstrap, topic, expect, headers, committed)

    def committed(self, topic):
        """The read_committed view of a transactional topic, kept between looks."""
        c = self.txn_views.get(topic)
        if c is None:
            c = self.txn_views[topic] = KafkaCommitted(self.bootstrap, self.admin, topic)
        return c

    def count(self, system, topic):
        """Records of `topic` a consumer can read: committed ones for a
        transactional system, end offsets otherwise."""
        if base_system(system) in TRANSACTIONAL:
            return self.committed(topic).count()
        return self.offsets.count(topic)

    def committed_progress(self, system, run_dir):
        """Committed records of the progress topic a walrelay-eos run wrote
        (named in its configuration): one per Kafka transaction."""
        try:
            with open(os.path.join(run_dir, "walrelay.toml"), "rb") as f:
                topic = tomllib.load(f)["kafka"]["transactions"]["progress_topic"]
            view = KafkaCommitted(self.bootstrap, self.admin, topic, partitions=1)
            view.scan()
            view.close()
            return view.committed
        except (OSError, KeyError, tomllib.TOMLDecodeError, BenchError) as e:
            log(f"{system}: progress topic not read: {e!r}")
            return None

    def forget(self, topic):
        c = self.txn_views.pop(topic, None)
        if c:
            c.close()

    def commit_times_us(self, lo, hi):
        """xid -> commit time (Unix µs) for xids lo..hi (COPY)."""
        sql = (f"COPY (SELECT x, (extract(epoch FROM pg_xact_commit_timestamp((x % 4294967296)::text::xid))"
               f" * 1000000)::bigint FROM generate_series({int(lo)}::bigint, {int(hi)}::bigint) x"
               f" WHERE pg_xact_commit_timestamp((x % 4294967296)::text::xid) IS NOT NULL) TO STDOUT")
        return {int(x): int(t) for x, t in self.db.copy_rows(sql)}
