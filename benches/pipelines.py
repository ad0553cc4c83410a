#!/usr/bin/env python3
"""Several pipelines (issue 18); run it through benches/pipelines.sh.

Starts its own PostgreSQL (wal_level=logical) and Kafka under
.walrelay-env/bench-pipelines (scripts/pg.sh, scripts/kafka.sh) and drains
the same backlogs with walrelay laid out three ways:

  one-process   one walrelay, four pipelines ([[pipelines]] in one TOML)
  four-procs    four walrelays, one pipeline each, the same four outboxes
  one-pipeline  one walrelay, one pipeline (the first outbox only): the
                baseline for what a pipeline costs on its own

Variants (`--variants`) run one-process with other [runtime] keys, e.g.
`one-process:worker_threads=2`.

Four databases (bench_0..bench_3, one outbox table each, like four
services) get --rows rows each, one row per transaction, written by four
writers at once (interleaved in the WAL), after every slot of every run was
created: every run reads the very same WAL from the very same position.
Runs are interleaved (round 1: A B C, round 2: C B A, ...).

Per run: the clock runs from launching the walrelay process(es) to the
latest LogAppendTime of its topics' last records (each run routes to topics
of its own; every record is counted through the topics' end offsets).
CPU is utime+stime of the walrelay process(es) at the end of the run
(/proc/<pid>/stat); memory is the peak resident set (VmHWM), summed over
the processes of four-procs.

psycopg (v3) and confluent-kafka, in the virtualenv benches/pipelines.sh
makes (the same as benches/poll.sh's).
"""

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import threading
import time

import psycopg
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from walbench import REPO, BenchError, config, log, machine
from walbench.kafka import EndOffsets, create_topics
from walbench.procs import cpu_of, status_kb, thread_ids
from walbench.report import replace_block
from walbench.servers import Servers

BENCH_DIR = os.path.join(REPO, ".walrelay-env", "bench-pipelines")
PIPELINES = 4
SYSTEMS = ("one-process", "four-procs", "one-pipeline")
LABELS = {
    "one-process": "1 process, 4 pipelines",
    "four-procs": "4 processes, 1 pipeline each",
    "one-pipeline": "1 process, 1 pipeline (1 outbox)",
}
PRODUCER = {"compression.type": "lz4"}
BEGIN = "<!-- pipelines-bench:begin -->"
END = "<!-- pipelines-bench:end -->"
HEADING = "## Several pipelines in one process (issue 18)"

SCHEMA_SQL = """
CREATE TABLE outbox (
    id uuid PRIMARY KEY,
    aggregatetype text NOT NULL,
    aggregateid text NOT NULL,
    type text NOT NULL,
    payload jsonb
);
CREATE PUBLICATION bench FOR TABLE outbox WITH (publish = 'insert');
CREATE PROCEDURE bench_backlog(first bigint, last bigint) LANGUAGE plpgsql AS $$
DECLARE i bigint := first;
BEGIN
  WHILE i <= last LOOP
    INSERT INTO outbox VALUES (md5('bench-' || i)::uuid, 'Order', 'order-' || (i % 1000), 'OrderCreated',
      jsonb_build_object('orderId', i, 'customer', 'customer-' || (i % 1000), 'currency', 'EUR',
        'total', i % 100000, 'note', repeat('x', 100)));
    COMMIT;
    i := i + 1;
  END LOOP;
END $$;
"""


class Env:
    def __init__(self, args):
        self.args = args
        self.servers = Servers(BENCH_DIR, ("max_replication_slots=64", "max_wal_senders=32"), wal_level="logical")
        self.procs = []
        self.offsets = None
        self.consumer = None

    def start(self):
        self.servers.start()
        self.pg_port, self.bootstrap = self.servers.pg_port, self.servers.bootstrap
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as admin:
            self.server_version = admin.execute("SHOW server_version").fetchone()[0]
            admin.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                          "WHERE slot_name LIKE 'bench\\_%' AND NOT active")
            for i in range(PIPELINES):
                admin.execute(f"DROP DATABASE IF EXISTS bench_{i} WITH (FORCE)")
                admin.execute(f"CREATE DATABASE bench_{i}")
        for i in range(PIPELINES):
            with psycopg.connect(self.dsn(f"bench_{i}"), autocommit=True) as db:
                db.execute(SCHEMA_SQL)
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})
        self.offsets = EndOffsets(self.bootstrap, "walrelay-bench-pipelines")
        self.consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "walrelay-bench-pipelines",
                                  "enable.auto.commit": False})

    def dsn(self, dbname):
        return f"host=127.0.0.1 port={self.pg_port} dbname={dbname} user=postgres application_name=bench-driver"

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        for c in (self.consumer, self.offsets):
            try:
                if c is not None:
                    c.close()
            except Exception:  # noqa: BLE001 - best effort on the way out
                pass
        self.admin = None
        if not self.args.keep_servers:
            self.servers.stop()

    def create_slot(self, db, slot):
        with psycopg.connect(self.dsn(db), autocommit=True) as c:
            c.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))

    def create_topics(self, topics):
        create_topics(self.admin, topics)

    def end_offsets(self, topic):
        return self.offsets.of(topic)

    def last_append_ms(self, topic, ends):
        """The latest LogAppendTime among the partitions' last records."""
        latest = 0
        for p, end in enumerate(ends):
            if end == 0:
                continue
            self.consumer.assign([TopicPartition(topic, p, end - 1)])
            deadline = time.time() + 30
            while time.time() < deadline:
                m = self.consumer.poll(1.0)
                if m is None or m.error():
                    continue
                latest = max(latest, m.timestamp()[1])
                break
            self.consumer.unassign()
        return latest

    def backlog(self, rows):
        """rows rows in every database, one per transaction, four writers at once."""
        errors = []

        def write(i):
            try:
                with psycopg.connect(self.dsn(f"bench_{i}"), autocommit=True) as c:
                    c.execute("CALL bench_backlog(1, %s)", (rows,))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)
        threads = [threading.Thread(target=write, args=(i,)) for i in range(PIPELINES)]
        t0 = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise BenchError(f"writing the backlog: {errors[0]}")
        return time.time() - t0


def shared_config(env, runtime):
    """What every pipeline of a process shares; `runtime`: [runtime] keys."""
    cfg = {"postgres": {"host": "127.0.0.1", "port": env.pg_port, "user": "postgres", "dbname": "postgres",
                        "application_name": "walrelay"},
           "outbox": {"table": "public.outbox"},
           "kafka": {"bootstrap_servers": env.bootstrap, "producer": dict(PRODUCER)},
           "metrics": {"listen": ""}}
    if runtime:
        cfg["runtime"] = {k: config.scalar(v) for k, v in runtime.items()}
    return cfg


def pipeline_config(i, slot, topic):
    """What pipeline `i` has of its own: its database, slot and topic."""
    return {"postgres": {"dbname": f"bench_{i}"}, "replication": {"slot": slot, "publication": "bench"},
            "router": {"route_topic_replacement": topic}}


def one_pipeline_config(env, i, slot, topic):
    """A process of one pipeline: the shared part, then pipeline `i`'s."""
    cfg = shared_config(env, {})
    config.merge_tables(cfg, pipeline_config(i, slot, topic))
    return cfg


class Run:
    """One system's drain of the backlog: its slots, topics and configs."""

    def __init__(self, env, system, runtime, tag, out_dir, stamp):
        self.env, self.system, self.runtime, self.tag = env, system, runtime, tag
        self.dir = os.path.join(out_dir, tag)
        os.makedirs(self.dir, exist_ok=True)
        n = 1 if system == "one-pipeline" else PIPELINES
        self.slots = [(i, f"bench_{tag}_{i}".replace("-", "_")) for i in range(n)]
        # Topics of their own per benchmark run: the broker outlives runs.
        self.topics = [f"bench.{stamp.lower()}.{tag}.{i}" for i in range(n)]

    def prepare(self):
        for i, slot in self.slots:
            self.env.create_slot(f"bench_{i}", slot)
        self.env.create_topics(self.topics)

    def configs(self):
        env = self.env
        if self.system == "one-process":
            cfg = shared_config(env, self.runtime)
            cfg["pipelines"] = [{"name": f"p{i}", **pipeline_config(i, slot, topic)}
                                for (i, slot), topic in zip(self.slots, self.topics)]
            return [config.dump(cfg)]
        return [config.dump(one_pipeline_config(env, i, slot, topic))
                for (i, slot), topic in zip(self.slots, self.topics)]

    def drain(self, rows):
        paths = []
        for k, text in enumerate(self.configs()):
            path = os.path.join(self.dir, f"walrelay-{k}.toml")
            with open(path, "w") as f:
                f.write(text)
            paths.append(path)
        want = rows * len(self.topics)
        t0 = time.time()
        procs = [subprocess.Popen([self.env.args.walrelay, "run", "--config", p], stdout=subprocess.DEVNULL,
                                  stderr=open(p.replace(".toml", ".log"), "w")) for p in paths]
        self.env.procs.extend(procs)
        deadline = t0 + self.env.args.timeout
        peak_threads = 0
        while True:
            for p in procs:
                if p.poll() is not None:
                    raise BenchError(f"{self.tag}: walrelay exited {p.returncode}; see {self.dir}")
            peak_threads = max(peak_threads, sum(len(thread_ids(p.pid)) for p in procs))
            ends = {t: self.env.end_offsets(t) for t in self.topics}
            got = sum(sum(e) for e in ends.values())
            if got >= want:
                break
            if time.time() > deadline:
                raise BenchError(f"{self.tag}: {got} of {want} records after {self.env.args.timeout} s")
            time.sleep(0.25)
        cpu = sum(cpu_of(p.pid) or 0.0 for p in procs)
        rss = sum(status_kb(p.pid, "VmHWM") or 0 for p in procs)
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        last = max(self.env.last_append_ms(t, ends[t]) for t in self.topics) / 1000.0
        elapsed = last - t0
        return {"system": self.system, "runtime": self.runtime, "tag": self.tag, "records": got,
                "events": want, "seconds": elapsed, "events_per_s": want / elapsed, "cpu_s": cpu,
                "cpu_s_per_m": cpu / want * 1e6, "peak_rss_kb": rss, "processes": len(procs),
                "threads": peak_threads}


def parse_variant(text):
    system, _, rest = text.partition(":")
    if system not in SYSTEMS:
        raise BenchError(f"--variants: unknown system {system!r} (one of {', '.join(SYSTEMS)})")
    runtime = {}
    for kv in filter(None, rest.split(",")):
        k, _, v = kv.partition("=")
        runtime[k] = v
    return system, runtime


def label(system, runtime):
    extra = ", ".join(f"{k} = {v}" for k, v in runtime.items())
    return LABELS[system] + (f", runtime.{extra}" if extra else "")


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def table(results, rows):
    by = {}
    for r in results:
        by.setdefault(label(r["system"], r["runtime"]), []).append(r)
    base = by.get(LABELS["four-procs"])
    base_eps = median([r["events_per_s"] for r in base]) if base else None
    base_cpu = median([r["cpu_s_per_m"] for r in base]) if base else None
    base_rss = median([r["peak_rss_kb"] for r in base]) if base else None
    out = ["| layout | events/s (median; every round) | vs 4 processes | CPU s per 1M events | vs 4 processes "
           "| peak RSS, MB (sum) | vs 4 processes | threads |",
           "|---|--:|--:|--:|--:|--:|--:|--:|"]
    for name, rs in by.items():
        eps = median([r["events_per_s"] for r in rs])
        cpu = median([r["cpu_s_per_m"] for r in rs])
        rss = median([r["peak_rss_kb"] for r in rs])
        thr = max(r["threads"] for r in rs)
        every = ", ".join(f"{r['events_per_s']:,.0f}" for r in rs)

        def vs(a, b):
            return f"{a / b:.2f}" if b else "–"
        out.append(f"| {name} | {eps:,.0f} ({every}) | {vs(eps, base_eps)} | {cpu:.2f} | {vs(cpu, base_cpu)} "
                   f"| {rss / 1024:.1f} | {vs(rss, base_rss)} | {thr} |")
    return "\n".join(out) + "\n"


def update_docs(block):
    replace_block(block, BEGIN, END, HEADING)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=50_000, help="rows per outbox (default 50,000; 4 outboxes)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variants", default="one-process,four-procs,one-pipeline",
                    help="comma-separated SYSTEM[:key=value;...]; systems: " + ", ".join(SYSTEMS))
    ap.add_argument("--quick", action="store_true", help="5,000 rows, 1 round: checks the tooling")
    ap.add_argument("--docs", action="store_true", help="write the table into docs/benchmarks.md")
    ap.add_argument("--keep-servers", action="store_true")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--walrelay", default=os.path.join(REPO, "target", "release", "walrelay"))
    ap.add_argument("--command", default="benches/pipelines.sh")
    args = ap.parse_args()
    if args.quick:
        args.rows, args.rounds = 5_000, 1
    # Variant keys are separated by ';' inside one variant (',' separates variants).
    variants = [parse_variant(v.replace(";", ",")) for v in args.variants.split(",") if v]
    stamp = machine.utc_stamp()
    out_dir = os.path.join(BENCH_DIR, "results", stamp)
    os.makedirs(out_dir, exist_ok=True)
    env = Env(args)

    def on_signal(signum, _frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    results = []
    try:
        env.start()
        runs = []
        for r in range(args.rounds):
            order = variants if r % 2 == 0 else list(reversed(variants))
            for k, (system, runtime) in enumerate(order):
                runs.append(Run(env, system, runtime, f"r{r + 1}v{variants.index((system, runtime))}", out_dir, stamp))
        for run_ in runs:
            run_.prepare()
        log(f"writing the backlog: {args.rows:,} rows in each of {PIPELINES} databases, one per transaction")
        took = env.backlog(args.rows)
        log(f"backlog written in {took:.1f} s; {len(runs)} runs read it")
        load_start = os.getloadavg()[0]
        for run_ in runs:
            log(f"{run_.tag}: {label(run_.system, run_.runtime)}")
            res = run_.drain(args.rows)
            log(f"  {res['events_per_s']:,.0f} events/s, {res['cpu_s_per_m']:.2f} CPU s per 1M, "
                f"peak RSS {res['peak_rss_kb'] / 1024:.1f} MB, {res['threads']} threads")
            results.append(res)
        load_end = os.getloadavg()[0]
    finally:
        env.stop()
    commit = machine.walrelay_commit()
    block = (f"Run `{stamp}`, walrelay {commit}, `{args.command}`: PostgreSQL {env.server_version}, "
             f"{PIPELINES} databases × {args.rows:,} single-row transactions, {args.rounds} interleaved "
             f"round(s); {os.cpu_count()} cores ({platform.machine()}), load average "
             f"{load_start:.2f} at the first run and {load_end:.2f} at the last.\n\n" + table(results, args.rows))
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({"results": results, "args": vars(args)}, f, indent=1)
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write(block)
    print(block)
    if args.docs:
        update_docs(block)
        log("docs/benchmarks.md updated")


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        log(f"error: {e}")
        sys.exit(1)
    except KeyboardInterrupt:
        log("interrupted")
        sys.exit(130)
