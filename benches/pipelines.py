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
import datetime
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
from confluent_kafka.admin import AdminClient, NewTopic

import benchlib
from benchlib import BenchError, cpu_of, log, run

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(REPO, "scripts")
BENCH_DIR = os.path.join(REPO, ".walrelay-env", "bench-pipelines")
TICK = os.sysconf("SC_CLK_TCK")
PARTITIONS = 6
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


def proc_status(pid, key):
    """A kB field of /proc/<pid>/status (VmHWM, VmRSS), or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def threads_of(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return None


class Env:
    def __init__(self, args):
        self.args = args
        self.pg_dir = os.path.join(BENCH_DIR, "pg")
        self.kafka_dir = os.path.join(BENCH_DIR, "kafka")
        self.procs = []

    def start(self):
        os.makedirs(BENCH_DIR, exist_ok=True)
        for d in (os.path.join(REPO, ".walrelay-env"), BENCH_DIR):
            os.chmod(d, 0o755)
        log("starting PostgreSQL (wal_level=logical) and Kafka under " + BENCH_DIR)
        envv = dict(os.environ, WALRELAY_PG_WAL_LEVEL="logical")
        run([f"{SCRIPTS}/pg.sh", "start", self.pg_dir], env=envv)
        run([f"{SCRIPTS}/pg.sh", "conf", self.pg_dir, "max_wal_size=16GB", "checkpoint_timeout=30min",
             "shared_buffers=256MB", "wal_sender_timeout=0", "max_replication_slots=64",
             "max_wal_senders=32"], stdout=subprocess.DEVNULL)
        run([f"{SCRIPTS}/kafka.sh", "start", self.kafka_dir])
        with open(os.path.join(self.pg_dir, "port")) as f:
            self.pg_port = int(f.read().strip())
        self.bootstrap = run([f"{SCRIPTS}/kafka.sh", "bootstrap", self.kafka_dir],
                             capture_output=True, text=True).stdout.strip()
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
        self.consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "walrelay-bench-pipelines",
                                  "enable.auto.commit": False})

    def dsn(self, dbname):
        return f"host=127.0.0.1 port={self.pg_port} dbname={dbname} user=postgres application_name=bench-driver"

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        try:
            self.consumer.close()
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass
        self.admin = None
        if self.args.keep_servers:
            return
        run([f"{SCRIPTS}/kafka.sh", "stop", self.kafka_dir], check=False,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        run([f"{SCRIPTS}/pg.sh", "stop", self.pg_dir], check=False,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def create_slot(self, db, slot):
        with psycopg.connect(self.dsn(db), autocommit=True) as c:
            c.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))

    def create_topics(self, topics):
        new = [NewTopic(t, num_partitions=PARTITIONS, replication_factor=1,
                        config={"message.timestamp.type": "LogAppendTime"}) for t in topics]
        for t, fut in self.admin.create_topics(new).items():
            fut.result(30)

    def end_offsets(self, topic):
        return [self.consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
                for p in range(PARTITIONS)]

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


def pipeline_toml(env, i, slot, topic):
    return (f'[pipelines.postgres]\ndbname = "bench_{i}"\n'
            f'[pipelines.replication]\nslot = "{slot}"\npublication = "bench"\n'
            f'[pipelines.router]\nroute_topic_replacement = "{topic}"\n')


def shared_toml(env, runtime):
    lines = [f'[postgres]\nhost = "127.0.0.1"\nport = {env.pg_port}\nuser = "postgres"\n'
             f'dbname = "postgres"\napplication_name = "walrelay"',
             '[outbox]\ntable = "public.outbox"',
             f'[kafka]\nbootstrap_servers = "{env.bootstrap}"\n[kafka.producer]\n' +
             "\n".join(f'"{k}" = "{v}"' for k, v in PRODUCER.items()),
             '[metrics]\nlisten = ""']
    if runtime:
        lines.append("[runtime]\n" + "\n".join(f"{k} = {v}" for k, v in runtime.items()))
    return "\n".join(lines) + "\n"


def one_pipeline_toml(env, i, slot, topic):
    return (f'[postgres]\nhost = "127.0.0.1"\nport = {env.pg_port}\nuser = "postgres"\n'
            f'dbname = "bench_{i}"\napplication_name = "walrelay"\n'
            f'[replication]\nslot = "{slot}"\npublication = "bench"\n'
            f'[outbox]\ntable = "public.outbox"\n'
            f'[router]\nroute_topic_replacement = "{topic}"\n'
            f'[kafka]\nbootstrap_servers = "{env.bootstrap}"\n[kafka.producer]\n' +
            "\n".join(f'"{k}" = "{v}"' for k, v in PRODUCER.items()) +
            '\n[metrics]\nlisten = ""\n')


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
            text = shared_toml(env, self.runtime) + "".join(
                f'\n[[pipelines]]\nname = "p{i}"\n' + pipeline_toml(env, i, slot, topic)
                for (i, slot), topic in zip(self.slots, self.topics))
            return [text]
        return [one_pipeline_toml(env, i, slot, topic) for (i, slot), topic in zip(self.slots, self.topics)]

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
            peak_threads = max(peak_threads, sum(threads_of(p.pid) or 0 for p in procs))
            ends = {t: self.env.end_offsets(t) for t in self.topics}
            got = sum(sum(e) for e in ends.values())
            if got >= want:
                break
            if time.time() > deadline:
                raise BenchError(f"{self.tag}: {got} of {want} records after {self.env.args.timeout} s")
            time.sleep(0.25)
        cpu = sum(cpu_of(p.pid) or 0.0 for p in procs)
        rss = sum(proc_status(p.pid, "VmHWM") or 0 for p in procs)
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
    benchlib.update_docs(block, BEGIN, END, HEADING)


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
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
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
    commit = run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                 check=False).stdout.strip()
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
