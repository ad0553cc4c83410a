#!/usr/bin/env python3
"""The polling source's benchmark (issue 17); run it through benches/poll.sh.

Starts its own PostgreSQL and Kafka under .walrelay-env/bench-poll
(scripts/pg.sh, scripts/kafka.sh) and measures three systems on the same
rows of one outbox table:

  p-listen    [source] kind = "poll", LISTEN/NOTIFY on (the statement
              trigger of deploy/postgresql/outbox_notify.sql), poll's
              defaults otherwise (interval_ms 500, batch_size 1000)
  p-interval  the same without the trigger and the channel, interval
              polling only, poll.interval_ms = 100
  wal         the WAL source (a logical slot, pgoutput), configured as
              the end-to-end benchmark (benches/walbench) configures it

One wal_level=logical cluster serves all three, so they meet the same
server: the polling tests run on wal_level=replica, and the difference for
a polling writer is a few bytes of WAL per transaction (the logical level
logs the top-level xid of subtransactions and the catalog's command ids).

What it measures:

1. Backlog drains: N rows (default 200,000) inserted, one row per
   transaction, while walrelay is stopped (for wal: after its slot was
   created), then walrelay started; the clock runs from the launch to the
   later of the last record's LogAppendTime and (polling) the last row's
   mark (published_at, clock_timestamp() of the marking statement). Every
   record is read back with confluent-kafka and its id header counted
   (distinct and duplicated). Variants (`--variants`) run p-listen or
   p-interval with other poll keys or producer properties, or on a table
   without statistics (stats=none). Before each drain and steady run the
   table holds --prefill published rows and is ANALYZEd (a table in
   service).
2. Steady load: paced single-row transactions (autocommit INSERTs from
   writer processes, psycopg, open loop) at each rate of `--rates`; the
   first `--warmup` seconds of every rate are not measured. Latency is the
   record's LogAppendTime (the topic is created with
   message.timestamp.type=LogAppendTime) minus the writer's clock read
   right after its COMMIT returned; the same machine's clock, millisecond
   resolution.
3. The database's cost: CPU seconds of the whole cluster (postmaster, its
   reaped children and every live child, /proc/<pid>/stat utime+stime;
   the walsender is one of them) over each drain and over each rate's
   measured window, less the writer's own backends during steady load; the
   statements walrelay ran (pg_stat_statements, shared_preload_libraries,
   summed over the entries of the role walrelay alone connects as); the
   VACUUM each run leaves behind (autovacuum is off for the table, so every
   run leaves what it really leaves, and the VACUUM after it is timed).

psycopg (v3) and confluent-kafka, in the virtualenv benches/poll.sh makes.
"""

import argparse
import json
import math
import multiprocessing
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import time
import uuid

import psycopg
from confluent_kafka.admin import AdminClient

from walbench import REPO, BenchError, config, log, machine, run
from walbench.kafka import PARTITIONS, EndOffsets, create_topics, range_reader, read_range
from walbench.procs import cluster_cpu, cpu_of
from walbench.report import fmt, replace_block
from walbench.servers import SCRIPTS, Servers
from walbench.stats import percentile
from walbench.systems import tail
from walbench.walrelay import Endpoints, counters

BENCH_DIR = os.path.join(REPO, ".walrelay-env", "bench-poll")
NOTIFY_SQL = os.path.join(REPO, "deploy", "postgresql", "outbox_notify.sql")
CHANNEL = "walrelay_outbox"
SLOT = "bench_poll_wal"
# walrelay connects as this role and nothing else does, so its statements
# are pg_stat_statements' entries of this userid; the writers connect as
# WRITER_ROLE, the driver as postgres.
RELAY_ROLE = "walrelay_bench"
WRITER_ROLE = "bench_writer"
SYSTEMS = ("p-listen", "p-interval", "wal")
LABELS = {
    "p-listen": "polling, LISTEN/NOTIFY",
    "p-interval": "polling, interval 100 ms",
    "wal": "WAL source",
}
# poll keys per system (p-listen keeps poll's default interval, 500 ms).
POLL_BASE = {
    "p-listen": {"listen_channel": CHANNEL},
    "p-interval": {"interval_ms": 100},
}
# Variant keys for the driver itself, not walrelay: stats=none leaves the
# table without statistics (no published rows, no ANALYZE, the column
# statistics deleted: a table just created, or one autovacuum never
# analysed), where the planner guesses under 1 % of the rows unpublished.
DRIVER_KEYS = ("stats",)
# walrelay's producer in every system: the end-to-end benchmark's (lz4;
# librdkafka's default is none).
PRODUCER = {"compression.type": "lz4"}

SCHEMA_SQL = """
CREATE TABLE outbox (
    seq bigint GENERATED ALWAYS AS IDENTITY,
    id uuid PRIMARY KEY,
    aggregatetype text NOT NULL,
    aggregateid text NOT NULL,
    type text NOT NULL,
    payload jsonb,
    published_at timestamptz
) WITH (autovacuum_enabled = false);
CREATE INDEX outbox_unpublished ON outbox (seq) WHERE published_at IS NULL;
CREATE PUBLICATION bench FOR TABLE outbox WITH (publish = 'insert');
-- About 200 bytes of JSON text.
CREATE FUNCTION bench_payload(i bigint) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object('orderId', i, 'customer', 'customer-' || (i % 1000), 'currency', 'EUR',
    'total', i % 100000, 'note', repeat('x', 100))
$$;
-- The backlog: rows first..last, per_txn rows per transaction; the same
-- rows (ids from the row number) for every system.
CREATE PROCEDURE bench_backlog(first bigint, last bigint, per_txn int) LANGUAGE plpgsql AS $$
DECLARE i bigint := first;
BEGIN
  WHILE i <= last LOOP
    INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)
      SELECT md5('bench-' || g)::uuid, 'Order', 'order-' || (g % 1000), 'OrderCreated', bench_payload(g)
      FROM generate_series(i, least(i + per_txn - 1, last)) g;
    COMMIT;
    i := i + per_txn;
  END LOOP;
END $$;
"""

WRITE_SQL = ("INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) "
             "VALUES (%s, 'Order', %s, 'OrderCreated', bench_payload(%s))")


def claim_plan(env, batch_size):
    """The plan of walrelay's claim as walrelay runs it (sorting off for the
    claim: src/postgres/poll/sql.rs, PollSql::claim)."""
    env.db.execute("SET enable_sort = off")
    try:
        return "\n".join(r[0] for r in env.q(
            "EXPLAIN SELECT ctid::text, xmin::text, * FROM outbox WHERE published_at IS NULL "
            f"ORDER BY seq LIMIT {batch_size} FOR UPDATE SKIP LOCKED"))
    finally:
        env.db.execute("RESET enable_sort")


# --------------------------------------------------------------------------
# The environment.


class Env:
    def __init__(self, args, out_dir):
        self.args = args
        self.out = out_dir
        # The end-to-end benchmark's settings, plus pg_stat_statements (a restart).
        self.servers = Servers(BENCH_DIR, ("shared_preload_libraries=pg_stat_statements",
                                           "pg_stat_statements.track_utility=on"), wal_level="logical")
        self.pg_dir = self.servers.pg_dir
        self.stamp = os.path.basename(out_dir).lower()
        self.procs = []
        self.admin = None
        self.offsets = None
        self.consumer = None

    def start(self):
        self.servers.start()
        self.pg_port, self.bootstrap = self.servers.pg_port, self.servers.bootstrap
        with psycopg.connect(self.dsn("postgres", "postgres"), autocommit=True) as admin:
            self.server_version = admin.execute("SHOW server_version").fetchone()[0]
            self.wal_level = admin.execute("SHOW wal_level").fetchone()[0]
            admin.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                          "WHERE slot_name = %s AND NOT active", (SLOT,))
            admin.execute("DROP DATABASE IF EXISTS bench WITH (FORCE)")
            admin.execute("CREATE DATABASE bench")
            for role in (RELAY_ROLE, WRITER_ROLE):
                if not admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
                    admin.execute(f"CREATE ROLE {role} LOGIN SUPERUSER REPLICATION")
        if self.wal_level != "logical":
            raise BenchError(f"{self.pg_dir} runs with wal_level={self.wal_level}; remove it (pg.sh rm)")
        self.db = psycopg.connect(self.dsn("bench", "postgres"), autocommit=True)
        self.db.execute("CREATE EXTENSION pg_stat_statements")
        self.db.execute(SCHEMA_SQL)
        self.relay_role_oid = self.db.execute("SELECT oid FROM pg_roles WHERE rolname = %s",
                                              (RELAY_ROLE,)).fetchone()[0]
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})
        self.offsets = EndOffsets(self.bootstrap, "walrelay-bench-poll")
        self.consumer = range_reader(self.bootstrap, "walrelay-bench-poll")

    def dsn(self, dbname, user):
        return f"host=127.0.0.1 port={self.pg_port} dbname={dbname} user={user} application_name=bench-driver"

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
        # The admin client's handle goes with its last reference: before the
        # broker stops, or librdkafka logs its reconnection attempts.
        self.admin = None
        if not self.args.keep_servers:
            self.servers.stop()

    # -- PostgreSQL
    def q(self, sql, params=None):
        return self.db.execute(sql, params).fetchall()

    def v(self, sql, params=None):
        rows = self.q(sql, params)
        return rows[0][0] if rows else None

    def cluster_cpu(self):
        """CPU seconds of the whole cluster so far: the postmaster, the
        children it reaped and those alive now."""
        return cluster_cpu(self.servers.postmaster_pid())

    def relay_backends(self):
        """pids of the backends (and walsender) walrelay has open."""
        return [r[0] for r in self.q("SELECT pid FROM pg_stat_activity WHERE usename = %s", (RELAY_ROLE,))]

    def statements(self):
        """walrelay's statements so far: calls and execution ms, and the
        entries (query text -> calls) for results.json."""
        rows = self.q("SELECT query, calls, total_exec_time FROM pg_stat_statements WHERE userid = %s",
                      (self.relay_role_oid,))
        by_query = {}
        for text, calls, _ in rows:
            by_query[text[:160]] = by_query.get(text[:160], 0) + calls
        return {"calls": sum(r[1] for r in rows), "exec_ms": sum(r[2] for r in rows), "by_query": by_query}

    def reset_table(self, trigger, stats=True):
        """An empty outbox, or with `stats` one in service: --prefill rows
        published already and ANALYZEd, so the planner's statistics say
        what they say in service (next to no row unpublished)."""
        self.db.execute("TRUNCATE outbox RESTART IDENTITY")
        if not stats:
            # TRUNCATE resets the table's size but keeps its column
            # statistics: drop them too, as for a table never analysed.
            self.db.execute("DELETE FROM pg_statistic WHERE starelid = 'outbox'::regclass")
        if stats and self.args.prefill:
            self.db.execute(
                "INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, published_at) "
                "SELECT md5('prefill-' || g)::uuid, 'Order', 'order-' || (g %% 1000), 'OrderCreated', "
                "bench_payload(g), now() FROM generate_series(1, %s) g", (self.args.prefill,))
            self.db.execute("VACUUM ANALYZE outbox")
        if trigger:
            # The users' snippet, as shipped.
            run([f"{SCRIPTS}/pg.sh", "psql", self.pg_dir, "-d", "bench", "-v", "table=public.outbox",
                 "-v", f"channel={CHANNEL}", "-f", NOTIFY_SQL], stdout=subprocess.DEVNULL,
                env=dict(os.environ, PGOPTIONS="-c client_min_messages=warning"))
        else:
            self.db.execute("DROP TRIGGER IF EXISTS walrelay_outbox_notify ON outbox")
        self.db.execute("CHECKPOINT")

    def create_slot(self):
        self.drop_slot()
        self.db.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (SLOT,))

    def drop_slot(self):
        for _ in range(200):
            rows = self.q("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (SLOT,))
            if not rows:
                return
            if not rows[0][0]:
                self.db.execute("SELECT pg_drop_replication_slot(%s)", (SLOT,))
                return
            time.sleep(0.1)
        raise BenchError(f"slot {SLOT} still active after 20 s")

    def vacuum(self):
        """VACUUM of the outbox: seconds and the cluster's CPU seconds."""
        t0, c0 = time.time(), self.cluster_cpu()
        self.db.execute("VACUUM outbox")
        return time.time() - t0, self.cluster_cpu() - c0

    # -- Kafka
    def create_topic(self, topic):
        create_topics(self.admin, [topic])

    def end_offsets(self, topic):
        return self.offsets.of(topic)

    def read(self, topic, start, end):
        """(LogAppendTime ms, id) of every record between the offsets."""
        return read_range(self.consumer, topic, start, end)


# --------------------------------------------------------------------------
# walrelay.


class Relay:
    def __init__(self, env, system, topic, run_dir, settings):
        self.system = system
        os.makedirs(run_dir, exist_ok=True)
        self.cfg = os.path.join(run_dir, "walrelay.toml")
        self.logf = os.path.join(run_dir, "walrelay.log")
        with open(self.cfg, "w") as f:
            f.write(config.dump(relay_config(env, system, topic, settings)))
        self.p = None
        self.endpoints = Endpoints(self.logf)
        self.env = env

    def start(self):
        self.t_launch = time.time()
        self.p = subprocess.Popen([self.env.args.walrelay, "run", "--config", self.cfg],
                                  stdout=subprocess.DEVNULL, stderr=open(self.logf, "w"))
        self.env.procs.append(self.p)
        return self.t_launch

    def alive(self):
        return self.p.poll() is None

    def tail(self, n=15):
        return tail(self.logf, n)

    def wait_ready(self, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if not self.alive():
                raise BenchError(f"walrelay ({self.system}) exited:\n{self.tail()}")
            if self.endpoints.ready():
                return
            time.sleep(0.1)
        raise BenchError(f"walrelay ({self.system}) not ready within {timeout} s:\n{self.tail()}")

    def metrics(self):
        """Its pipeline's counters in /api/state (no history), for results.json."""
        return counters(self.endpoints.pipeline())

    def cpu(self):
        return cpu_of(self.p.pid) if self.p else None

    def stop(self):
        if self.p and self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(10)


def relay_config(env, system, topic, settings):
    """walrelay's configuration for `system` with a variant's `settings`:
    keys with a dot are producer properties (strings), the others [poll]
    keys (integers where they are digits), DRIVER_KEYS the driver's."""
    poll = dict(POLL_BASE.get(system, {}))
    producer = dict(PRODUCER)
    for k, val in settings.items():
        if k in DRIVER_KEYS:
            continue
        if "." in k:
            producer[k] = str(val)
        else:
            poll[k] = int(val) if isinstance(val, str) and val.isdigit() else val
    cfg = {"postgres": {"host": "127.0.0.1", "port": env.pg_port, "user": RELAY_ROLE, "dbname": "bench",
                        "application_name": "walrelay"}}
    if system == "wal":
        cfg["replication"] = {"slot": SLOT, "publication": "bench", "create_slot": False,
                              "create_publication": False}
    else:
        cfg["source"] = {"kind": "poll"}
        cfg["poll"] = {"order_by": ["seq"], **poll}
    cfg["outbox"] = {"table": "public.outbox"}
    cfg["router"] = {"route_topic_replacement": topic}
    cfg["kafka"] = {"bootstrap_servers": env.bootstrap, "producer": producer}
    cfg["metrics"] = {"listen": "127.0.0.1:0"}
    return cfg


def parse_variant(text):
    """`p-listen:batch_size=5000:linger.ms=20` -> (system, {key: value})."""
    parts = text.split(":")
    system = parts[0]
    if system not in ("p-listen", "p-interval"):
        raise ValueError(f"variant {text}: the system is p-listen or p-interval")
    settings = {}
    for kv in parts[1:]:
        k, _, val = kv.partition("=")
        if not k or not val:
            raise ValueError(f"variant {text}: {kv!r} is not key=value")
        settings[k] = val
    return system, settings


def tag_of(settings):
    return "-".join(f"{a}{b}" for a, b in settings.items()).replace(".", "_")


def variant_label(system, settings):
    if not settings:
        return LABELS[system]
    return f"{LABELS[system]}, " + ", ".join(
        "no statistics" if (k, v) == ("stats", "none") else f"{k} {int(v):,}" if v.isdigit() else f"{k} {v}"
        for k, v in settings.items())


def effective(system, settings):
    """batch_size and linger.ms the run used (defaults spelled out)."""
    if system == "wal":
        return {"batch_size": None, "linger_ms": int(settings.get("linger.ms", 5))}
    return {"batch_size": int(settings.get("batch_size", 1000)), "linger_ms": int(settings.get("linger.ms", 5))}


# --------------------------------------------------------------------------
# Backlog drains.


def drain(env, system, settings, n, tag, out):
    run_dir = os.path.join(out, "runs", f"drain-{tag}")
    topic = f"bench.{env.stamp}.drain.{tag}"
    env.create_topic(topic)
    with_stats = settings.get("stats") != "none"
    env.reset_table(trigger=(system == "p-listen"), stats=with_stats)
    prefill = env.args.prefill if with_stats else 0
    if system == "wal":
        env.create_slot()
    t0, c0 = time.time(), env.cluster_cpu()
    env.db.execute("CALL bench_backlog(1, %s, %s)", (n, env.args.txn_rows))
    insert_s, insert_cpu = time.time() - t0, env.cluster_cpu() - c0
    plan = claim_plan(env, int(settings.get("batch_size", 1000)))
    env.db.execute("CHECKPOINT")
    relay = Relay(env, system, topic, run_dir, settings)
    env.db.execute("SELECT pg_stat_statements_reset()")
    cpu0 = env.cluster_cpu()
    t_launch = relay.start()
    timeout = max(120, n / 1000)
    seen = 0
    try:
        while True:
            if not relay.alive():
                raise BenchError(f"walrelay ({system}) exited:\n{relay.tail()}")
            seen = sum(env.end_offsets(topic))
            if seen >= n:
                break
            if time.time() - t_launch > timeout:
                raise BenchError(f"{system}: {seen:,} of {n:,} records after {timeout:.0f} s:\n{relay.tail()}")
            time.sleep(0.05)
        if system != "wal":
            while env.v("SELECT count(*) FROM outbox WHERE published_at IS NULL") > 0:
                if time.time() - t_launch > timeout:
                    raise BenchError(f"{system}: rows left unpublished after {timeout:.0f} s")
                time.sleep(0.02)
        t_seen = time.time()
        pids = env.relay_backends()
        backend_cpu = sum(c for c in map(cpu_of, pids) if c is not None)
        cpu1 = env.cluster_cpu()
        stmts = env.statements()
        metrics = relay.metrics()
        relay_cpu = relay.cpu()
    finally:
        relay.stop()
    if system == "wal":
        env.drop_slot()
    end = env.end_offsets(topic)
    recs = env.read(topic, [0] * PARTITIONS, end)
    ids = [h for _, h in recs]
    distinct = len(set(ids) - {None})
    last_append = max(ts for ts, _ in recs) / 1000
    first_append = min(ts for ts, _ in recs) / 1000
    last_mark = None
    if system != "wal":
        last_mark = env.v("SELECT extract(epoch FROM max(published_at))::float8 FROM outbox")
        marked = env.v("SELECT count(*) FROM outbox WHERE published_at IS NOT NULL") - prefill
        if marked != n:
            raise BenchError(f"{system}: {marked:,} of {n:,} rows marked")
    t_end = max(last_append, last_mark or 0)
    upd = env.q("SELECT n_tup_upd, n_tup_hot_upd, n_dead_tup FROM pg_stat_user_tables WHERE relname = 'outbox'")
    vac_s, vac_cpu = env.vacuum()
    if distinct != n:
        raise BenchError(f"{system}: {distinct:,} distinct ids of {n:,} in Kafka ({len(recs):,} records)")
    seconds = t_end - t_launch
    res = {
        "kind": "drain", "system": system, "settings": settings, "label": variant_label(system, settings),
        **effective(system, settings),
        "rows": n, "records": len(recs), "duplicates": len(recs) - distinct, "seconds": seconds,
        "rows_per_s": n / seconds, "startup_s": first_append - t_launch,
        "end_by": "mark" if last_mark and last_mark > last_append else "kafka",
        "pg_cpu_s": cpu1 - cpu0, "pg_cpu_s_per_k": (cpu1 - cpu0) / n * 1000,
        "relay_backends_cpu_s": backend_cpu, "relay_backends_cpu_s_per_k": backend_cpu / n * 1000,
        "walrelay_cpu_s_per_k": (relay_cpu or 0) / n * 1000,
        "statements": stmts["calls"], "statements_per_k": stmts["calls"] / n * 1000,
        "statement_ms_per_k": stmts["exec_ms"] / n * 1000, "statements_by_query": stmts["by_query"],
        "vacuum_s": vac_s, "vacuum_cpu_s": vac_cpu, "insert_s": insert_s, "insert_cpu_s": insert_cpu,
        "observed_after_s": t_seen - t_end, "metrics": metrics, "claim_plan": plan,
        "n_tup_upd": upd[0][0] if upd else None, "n_tup_hot_upd": upd[0][1] if upd else None,
        "n_dead_tup": upd[0][2] if upd else None,
    }
    log(f"drain {res['label']}: {res['rows_per_s']:,.0f} rows/s ({seconds:.2f} s), "
        f"PG {res['pg_cpu_s_per_k']:.3f} CPU s/1k, {res['statements_per_k']:.1f} statements/1k, "
        f"VACUUM {vac_s:.2f} s")
    return res


# --------------------------------------------------------------------------
# Steady load.


def writer_main(dsn, rate, k, w, t0, seconds, first, results, pids):
    """Writer w of k: single-row autocommit INSERTs at rate/k per second,
    open loop (late transactions are sent at once, never skipped)."""
    conn = psycopg.connect(dsn, autocommit=True)
    pids.put(conn.info.backend_pid)
    cur = conn.cursor()
    out = []
    j = 0
    end = t0 + seconds
    while True:
        ts = t0 + (j * k + w) / rate
        if ts >= end:
            break
        now = time.time()
        if ts > now:
            time.sleep(ts - now)
        u = uuid.uuid4()
        g = first + j * k + w
        cur.execute(WRITE_SQL, (u, f"order-{g % 1000}", g), prepare=True)
        out.append((str(u), ts, time.time()))
        j += 1
    # The backend stays until after the driver's last CPU snapshot.
    time.sleep(max(0.0, end + 1.0 - time.time()))
    conn.close()
    results.put(out)


def steady(env, system, settings, tag, rates, seconds, warmup, out):
    run_dir = os.path.join(out, "runs", f"steady-{tag}")
    topic = f"bench.{env.stamp}.steady.{tag}"
    env.create_topic(topic)
    env.reset_table(trigger=(system == "p-listen"))
    if system == "wal":
        env.create_slot()
    relay = Relay(env, system, topic, run_dir, settings)
    relay.start()
    label = variant_label(system, settings)
    results = []
    ctx = multiprocessing.get_context("spawn")
    first = 1
    try:
        relay.wait_ready()
        time.sleep(1.0)
        for rate in rates:
            if not relay.alive():
                raise BenchError(f"walrelay ({system}) exited:\n{relay.tail()}")
            k = max(1, math.ceil(rate / 1000))
            start = env.end_offsets(topic)
            resq, pidq = ctx.Queue(), ctx.Queue()
            t0 = time.time() + 1.5  # the writers connect meanwhile
            total = warmup + seconds
            procs = [ctx.Process(target=writer_main, name=f"writer-{w}",
                                 args=(env.dsn("bench", WRITER_ROLE), rate, k, w, t0, total, first, resq, pidq))
                     for w in range(k)]
            for p in procs:
                p.start()
            wpids = [pidq.get(timeout=30) for _ in procs]
            log(f"steady {label} {rate:,}/s: {k} writer(s), {warmup} s warm-up + {seconds} s")

            def snap():
                bpids = env.relay_backends()
                return {"t": time.time(), "cluster": env.cluster_cpu(),
                        "writers": sum(c for c in map(cpu_of, wpids) if c is not None),
                        "relay_backends": sum(c for c in map(cpu_of, bpids) if c is not None),
                        "relay_pids": set(bpids), "stmts": env.statements(), "walrelay": relay.cpu() or 0.0}
            time.sleep(max(0.0, t0 + warmup - time.time()))
            s0 = snap()
            time.sleep(max(0.0, t0 + total - time.time()))
            s1 = snap()
            writes = []
            for _ in procs:
                writes += resq.get(timeout=120)
            for p in procs:
                p.join(30)
            first += len(writes) + 1000
            window = [x for x in writes if x[1] >= t0 + warmup]
            # Every write in Kafka (10 s at most after the writers stopped).
            want = sum(start) + len(writes)
            deadline = time.time() + 30
            while sum(env.end_offsets(topic)) < want and time.time() < deadline:
                time.sleep(0.05)
            end = env.end_offsets(topic)
            catch_up = time.time() - (t0 + total)
            recs = env.read(topic, start, end)
            append = {}
            for ts, hid in recs:
                if hid is not None and hid not in append:
                    append[hid] = ts
            lat = sorted(append[i] - tc * 1000 for i, _, tc in window if i in append)
            missing = sum(1 for i, _, _ in window if i not in append)
            behind = sorted((tc - ts) * 1000 for _, ts, tc in window)
            n = len(window)
            events = n or 1
            cluster = s1["cluster"] - s0["cluster"]
            writers = s1["writers"] - s0["writers"]
            same = s0["relay_pids"] & s1["relay_pids"]
            backends = s1["relay_backends"] - s0["relay_backends"] if same == s1["relay_pids"] else None
            stm = s1["stmts"]["calls"] - s0["stmts"]["calls"]
            by_query = {qt: c - s0["stmts"]["by_query"].get(qt, 0) for qt, c in s1["stmts"]["by_query"].items()
                        if c != s0["stmts"]["by_query"].get(qt, 0)}
            plan = claim_plan(env, 1000)
            dead = env.v("SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'outbox'")
            vac_s, vac_cpu = env.vacuum()
            res = {
                "kind": "steady", "system": system, "settings": settings, "label": label, "rate": rate,
                "writers": k, "claim_plan_after": plan, "dead_tuples_before_vacuum": dead,
                "seconds": seconds, "warmup": warmup, "events": n,
                "achieved_per_s": n / (s1["t"] - s0["t"]),
                "p50_ms": percentile(lat, 0.50), "p99_ms": percentile(lat, 0.99), "p999_ms": percentile(lat, 0.999),
                "max_ms": lat[-1] if lat else None, "latencies": len(lat), "missing": missing,
                "records_in_level": len(recs), "catch_up_s": catch_up,
                "writer_behind_p99_ms": percentile(behind, 0.99), "writer_behind_max_ms": behind[-1] if behind else None,
                "pg_cpu_s_per_k": (cluster - writers) / events * 1000, "pg_cpu_total_s_per_k": cluster / events * 1000,
                "writer_backends_cpu_s_per_k": writers / events * 1000,
                "relay_backends_cpu_s_per_k": None if backends is None else backends / events * 1000,
                "walrelay_cpu_s_per_k": (s1["walrelay"] - s0["walrelay"]) / events * 1000,
                "statements_per_k": stm / events * 1000,
                "statement_ms_per_k": (s1["stmts"]["exec_ms"] - s0["stmts"]["exec_ms"]) / events * 1000,
                "vacuum_s": vac_s, "vacuum_cpu_s_per_k": vac_cpu / events * 1000,
                "statements_by_query": by_query,
            }
            results.append(res)
            log(f"steady {label} {rate:,}/s: achieved {res['achieved_per_s']:,.0f}/s, p50 {fmt(res['p50_ms'], '.1f')} "
                f"p99 {fmt(res['p99_ms'], '.1f')} p99.9 {fmt(res['p999_ms'], '.1f')} ms, missing {missing}, "
                f"PG {res['pg_cpu_s_per_k']:.3f} CPU s/1k, {res['statements_per_k']:.1f} statements/1k")
        results[-1]["metrics"] = relay.metrics()
    finally:
        relay.stop()
        if system == "wal":
            env.drop_slot()
    return results


# --------------------------------------------------------------------------
# Report.


def ratio(a, b):
    return None if a is None or not b else a / b


def drain_table(results):
    drains = drain_summary([r for r in results if r["kind"] == "drain" and "error" not in r])
    wal = next((r["rows_per_s"] for r in drains if r["system"] == "wal" and not r["settings"]), None)
    lines = ["| system | poll.batch_size | linger.ms | rows | rows/s (median) | vs WAL | every round rows/s | "
             "start-up s | PostgreSQL CPU s / 1k rows | of it walrelay's backends | statements / 1k rows | "
             "statement ms / 1k rows | VACUUM after: s / CPU s | backlog insert s |",
             "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in drains:
        lines.append(
            f"| {r['label']} | {fmt(r['batch_size'])} | {r['linger_ms']} | {r['rows']:,} | "
            f"{r['rows_per_s']:,.0f} | {fmt(ratio(r['rows_per_s'], wal), '.2f')} | "
            f"{' / '.join(f'{x:,.0f}' for x in r['rounds'])} | {r['startup_s']:.2f} | "
            f"{r['pg_cpu_s_per_k']:.3f} | {r['relay_backends_cpu_s_per_k']:.3f} | {r['statements_per_k']:.1f} | "
            f"{r['statement_ms_per_k']:.1f} | {r['vacuum_s']:.2f} / {r['vacuum_cpu_s']:.2f} | {r['insert_s']:.1f} |")
    failed = [r for r in results if r["kind"] == "drain" and "error" in r]
    for r in failed:
        lines.append(f"| {r['label']} | | | | failed: {r['error'][:120]} | | | | | | | | | |")
    return "\n".join(lines)


def drain_summary(drains):
    """One row per configuration: the median round (by rows/s)."""
    groups = {}
    for r in drains:
        groups.setdefault(r["label"], []).append(r)
    out = []
    for rs in groups.values():
        # rows/s is the median over the rounds (of two: their mean); the
        # other columns are the round nearest to it.
        mid = statistics.median(r["rows_per_s"] for r in rs)
        m = dict(min(rs, key=lambda r: abs(r["rows_per_s"] - mid)))
        m["rows_per_s"] = mid
        m["rounds"] = [r["rows_per_s"] for r in rs]
        out.append(m)
    return out


def steady_table(results):
    st = [r for r in results if r["kind"] == "steady" and "error" not in r]
    wal = {r["rate"]: r for r in st if r["system"] == "wal" and not r.get("settings")}
    lines = ["| system | offered events/s | achieved events/s | latencies | p50 ms | p99 ms | p99.9 ms | max ms | "
             "p50 / p99 vs WAL | missing | writer late p99 ms |",
             "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in sorted(st, key=lambda r: (r["rate"], SYSTEMS.index(r["system"]), bool(r.get("settings")))):
        w = wal.get(r["rate"])
        vs = "–" if not w else f"{fmt(ratio(r['p50_ms'], w['p50_ms']), '.1f')} / {fmt(ratio(r['p99_ms'], w['p99_ms']), '.1f')}"
        lines.append(f"| {r['label']} | {r['rate']:,} | {r['achieved_per_s']:,.0f} | {r['latencies']:,} | "
                     f"{fmt(r['p50_ms'], '.1f')} | {fmt(r['p99_ms'], '.1f')} | {fmt(r['p999_ms'], '.1f')} | "
                     f"{fmt(r['max_ms'], '.1f')} | {vs} | {r['missing']:,} | {fmt(r['writer_behind_p99_ms'], '.1f')} |")
    for r in results:
        if r["kind"] == "steady" and "error" in r:
            lines.append(f"| {r['label']} | | failed: {r['error'][:120]} | | | | | | | | |")
    return "\n".join(lines)


def cost_table(results, cost_rate):
    drains = drain_summary([r for r in results if r["kind"] == "drain" and "error" not in r
                            and not r["settings"]])
    st = [r for r in results if r["kind"] == "steady" and "error" not in r and r["rate"] == cost_rate]
    dw = next((r for r in drains if r["system"] == "wal"), None)
    sw = next((r for r in st if r["system"] == "wal" and not r.get("settings")), None)
    lines = ["| system | phase | PostgreSQL CPU s / 1k events | vs WAL | of it walrelay's backends | "
             "writers' backends CPU s / 1k | statements / 1k events | VACUUM after: CPU s / 1k |",
             "|---|---|--:|--:|--:|--:|--:|--:|"]
    for r in sorted(drains, key=lambda r: SYSTEMS.index(r["system"])):
        lines.append(f"| {r['label']} | drain of {r['rows']:,} | {r['pg_cpu_s_per_k']:.3f} | "
                     f"{fmt(ratio(r['pg_cpu_s_per_k'], dw and dw['pg_cpu_s_per_k']), '.1f')} | "
                     f"{r['relay_backends_cpu_s_per_k']:.3f} | – | {r['statements_per_k']:.1f} | "
                     f"{r['vacuum_cpu_s'] / r['rows'] * 1000:.3f} |")
    for r in sorted(st, key=lambda r: (SYSTEMS.index(r["system"]), bool(r.get("settings")))):
        lines.append(f"| {r['label']} | {r['rate']:,} events/s, {r['seconds']} s | {r['pg_cpu_s_per_k']:.3f} | "
                     f"{fmt(ratio(r['pg_cpu_s_per_k'], sw and sw['pg_cpu_s_per_k']), '.1f')} | "
                     f"{fmt(r['relay_backends_cpu_s_per_k'], '.3f')} | {r['writer_backends_cpu_s_per_k']:.3f} | "
                     f"{r['statements_per_k']:.1f} | {r['vacuum_cpu_s_per_k']:.3f} |")
    return "\n".join(lines)


def goals(results, cost_rate):
    out = []
    drains = drain_summary([r for r in results if r["kind"] == "drain" and "error" not in r])
    defaults = [r for r in drains if r["system"] in ("p-listen", "p-interval") and not r["settings"]]
    best = max((r for r in drains if r["system"] != "wal" and "stats" not in r["settings"]),
               key=lambda r: r["rows_per_s"], default=None)
    for r in defaults:
        ok = r["rows_per_s"] >= 20000
        out.append(f"- **Drain of at least 20,000 rows/s** ({r['label']}, poll's defaults): "
                   f"{r['rows_per_s']:,.0f} rows/s: **{'met' if ok else 'not met'}**.")
    if best and best["settings"]:
        ok = best["rows_per_s"] >= 20000
        out.append(f"- The fastest polling configuration measured ({best['label']}): {best['rows_per_s']:,.0f} "
                   f"rows/s: the goal is {'met' if ok else 'not met'} with it.")
    lis = next((r for r in results if r["kind"] == "steady" and "error" not in r and r["system"] == "p-listen"
                and r["rate"] == 1000 and not r.get("settings")), None)
    if lis:
        ok = lis["p99_ms"] is not None and lis["p99_ms"] <= 50 and lis["missing"] == 0
        out.append(f"- **p99 at most 50 ms at 1,000 events/s with LISTEN**: p99 {fmt(lis['p99_ms'], '.1f')} ms "
                   f"(achieved {lis['achieved_per_s']:,.0f} events/s, {lis['latencies']:,} latencies): "
                   f"**{'met' if ok else 'not met'}**.")
    else:
        out.append("- p99 at 1,000 events/s with LISTEN: not measured in this run.")
    return "\n".join(out)


def machine_facts(env, load_at_start, load_at_end):
    return {
        "date_utc": machine.utc_now(),
        "nproc": os.cpu_count(), "cpu": machine.cpu_model(), "kernel": platform.release(),
        "load_average_at_start": load_at_start, "load_average_at_end": load_at_end,
        "postgres": getattr(env, "server_version", "?"), "wal_level": getattr(env, "wal_level", "?"),
        "walrelay_commit": machine.walrelay_commit(), "worktree_dirty": machine.worktree_dirty(),
        "psycopg": psycopg.__version__, "confluent_kafka": __import__("confluent_kafka").__version__,
    }


def report(args, facts, results, command, loads):
    head = []
    if args.quick:
        head.append("> **Smoke run (`--quick`, small sizes): it checks that the tooling works; "
                    "these numbers are not the result.**\n")
    head.append(
        f"Command: `{command}`  \n"
        f"Date: {facts['date_utc']}, walrelay {facts['walrelay_commit']}"
        f"{' (uncommitted changes in the tree)' if facts['worktree_dirty'] else ''}  \n"
        f"Machine: {facts['nproc']} CPUs ({facts['cpu']}), Linux {facts['kernel']}, shared and noisy; "
        f"load average {facts['load_average_at_start']} at start, {facts['load_average_at_end']} at the end"
        f" (1/5/15 min); during the phases: {', '.join(f'{k} {v}' for k, v in loads.items())}  \n"
        f"PostgreSQL {facts['postgres']} (wal_level={facts['wal_level']}, one cluster for all three systems), "
        f"Kafka 4.1.1 (single KRaft node), psycopg {facts['psycopg']}, confluent-kafka "
        f"{facts['confluent_kafka']}; everything co-located on this machine.\n")
    sizes = (f"The outbox holds {args.prefill:,} published rows, ANALYZEd, before each drain and each steady run "
             f"(a table in service; `no statistics`: without them). "
             f"Drains: {args.rows:,} rows, {args.txn_rows} row(s) per inserting transaction; the three systems "
             f"drained {args.rounds} time(s) each, the variants {args.variant_rounds} time(s), interleaved (rows/s "
             f"is the median, every round listed; the other columns are the round nearest the median). Steady load: {', '.join(f'{x:,}' for x in args.rates)} events/s, "
             f"{args.warmup} s warm-up then {args.seconds} s measured per rate, single-row autocommit INSERTs from "
             f"one paced writer process per 1,000 events/s. Payload about 200 bytes of JSON (jsonb), 1,000 "
             f"aggregates, 6 partitions.\n")
    return ("\n".join(head) + "\n" + sizes +
            "\n### Backlog drains\n\n" + drain_table(results) +
            "\n\n### Latency, commit to Kafka append\n\n" + steady_table(results) +
            "\n\n### The database's cost\n\n" + cost_table(results, args.cost_rate) +
            "\n\n### Goals\n\n" + goals(results, args.cost_rate) + "\n")


BEGIN = "<!-- poll-results:begin (written by benches/poll.sh --docs) -->"
END = "<!-- poll-results:end -->"
HEADING = "## The polling source (issue 17)"


def update_docs(block):
    replace_block(block, BEGIN, END, HEADING)


# --------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke sizes: 20,000 rows, 8 s per rate")
    ap.add_argument("--rows", type=int, help="backlog rows per drain (default 200,000; --quick 20,000)")
    ap.add_argument("--txn-rows", type=int, default=1, help="rows per inserting transaction of the backlog")
    ap.add_argument("--rounds", type=int, help="drains of each of the three systems, interleaved (default 3, "
                    "--quick 1)")
    ap.add_argument("--systems", default=",".join(SYSTEMS), help="systems, comma-separated")
    ap.add_argument("--variants", default=None,
                    help="extra drains, ';'-separated, each system:key=value:...; keys with a dot are "
                    "[kafka.producer] properties, stats=none the driver's (a table without statistics), the "
                    "others [poll] keys (default: p-listen with batch_size 5000 and 10000, linger.ms 0 and 20, "
                    "batch_size 5000 with linger.ms 0 and with stats=none, shards 2; '' for none)")
    ap.add_argument("--variant-rounds", type=int, help="drains of each variant (default 2, --quick 1)")
    ap.add_argument("--steady-variants", default=None,
                    help="extra steady-load runs, as --variants (default: p-listen with linger.ms 0; '' for none)")
    ap.add_argument("--rates", default=None, help="steady rates, events/s (default 250,1000,4000)")
    ap.add_argument("--seconds", type=int, help="measured seconds per rate (default 20, --quick 8)")
    ap.add_argument("--warmup", type=int, help="warm-up seconds per rate, not measured (default 5, --quick 2)")
    ap.add_argument("--cost-rate", type=int, default=1000, help="the rate whose DB cost the cost table shows")
    ap.add_argument("--warm-rows", type=int, help="rows drained by the WAL source before anything is measured, "
                    "so the broker's JIT has compiled (default 100,000, --quick 10,000)")
    ap.add_argument("--prefill", type=int, default=10_000,
                    help="published rows the outbox holds, ANALYZEd, before each drain and steady run "
                    "(a table in service); 0: none, and no ANALYZE")
    ap.add_argument("--skip-drains", action="store_true", help="no backlog drains")
    ap.add_argument("--skip-steady", action="store_true", help="no steady load")
    ap.add_argument("--walrelay", default=os.path.join(REPO, "target", "release", "walrelay"),
                    help="the walrelay binary (default: target/release/walrelay)")
    ap.add_argument("--docs", action="store_true", help="write the results into docs/benchmarks.md")
    ap.add_argument("--keep-servers", action="store_true", help="leave PostgreSQL and Kafka running")
    ap.add_argument("--command", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    q = args.quick
    args.rows = args.rows or (20_000 if q else 200_000)
    args.rounds = max(1, args.rounds or (1 if q else 3))
    args.variant_rounds = max(1, args.variant_rounds or (1 if q else 2))
    args.seconds = args.seconds or (8 if q else 20)
    args.warmup = args.warmup if args.warmup is not None else (2 if q else 5)
    args.warm_rows = args.warm_rows if args.warm_rows is not None else (10_000 if q else 100_000)
    args.rates = [int(x) for x in (args.rates or "250,1000,4000").split(",") if x]
    if args.variants is None:
        args.variants = ("p-listen:batch_size=5000;p-listen:batch_size=10000;"
                         "p-listen:linger.ms=0;p-listen:linger.ms=20;p-listen:batch_size=5000:linger.ms=0;"
                         "p-listen:batch_size=5000:stats=none;p-listen:shards=2")
    if args.steady_variants is None:
        args.steady_variants = "p-listen:linger.ms=0"
    try:
        variants = [parse_variant(v) for v in args.variants.split(";") if v.strip()]
        steady_variants = [parse_variant(v) for v in args.steady_variants.split(";") if v.strip()]
    except ValueError as e:
        sys.exit(str(e))
    systems = [s for s in args.systems.split(",") if s]
    for s in systems:
        if s not in SYSTEMS:
            sys.exit(f"unknown system {s}; known: {', '.join(SYSTEMS)}")

    load_at_start = machine.load_average()
    stamp = machine.utc_stamp()
    out = os.path.join(BENCH_DIR, "results", stamp)
    os.makedirs(out, exist_ok=True)
    command = args.command or " ".join(shlex.quote(a) for a in sys.argv)
    env = Env(args, out)
    results, loads = [], {}

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_signal)
    return_code = 0
    try:
        env.start()
        size = env.v("SELECT length(bench_payload(123456)::text)")
        log(f"payload: {size} bytes of JSON; results in {out}")
        if args.warm_rows:
            log(f"warming the broker: the WAL source drains {args.warm_rows:,} rows (not measured)")
            drain(env, "wal", {}, args.warm_rows, "warmup", out)
        if not args.skip_drains:
            # Rounds interleave the systems (the order alternates) and the
            # variants, so that a slow minute of the machine does not land
            # on one configuration only.
            runs = []
            for k in range(max(args.rounds, args.variant_rounds if variants else 0)):
                if k < args.rounds:
                    order = systems if k % 2 == 0 else list(reversed(systems))
                    runs += [(s, {}, f"{s}-r{k + 1}") for s in order]
                if k < args.variant_rounds:
                    runs += [(s, st, f"{s}-{tag_of(st)}-r{k + 1}") for s, st in variants]
            for i, (system, settings, tag) in enumerate(runs):
                log(f"drain {i + 1} of {len(runs)}: {variant_label(system, settings)} ({tag})")
                try:
                    results.append(drain(env, system, settings, args.rows, tag, out))
                except BenchError as e:
                    log(f"drain {tag} FAILED: {e}")
                    results.append({"kind": "drain", "system": system, "settings": settings,
                                    "label": variant_label(system, settings), "error": str(e).splitlines()[0]})
            loads["after the drains"] = open("/proc/loadavg").read().split()[0]
        if not args.skip_steady:
            for s, st in [(s, {}) for s in systems] + steady_variants:
                label = variant_label(s, st)
                try:
                    results += steady(env, s, st, f"{s}-{tag_of(st)}" if st else s, args.rates, args.seconds,
                                      args.warmup, out)
                except BenchError as e:
                    log(f"steady {label} FAILED: {e}")
                    results.append({"kind": "steady", "system": s, "settings": st, "label": label, "rate": 0,
                                    "error": str(e).splitlines()[0]})
                loads[f"after steady ({label})"] = open("/proc/loadavg").read().split()[0]
    except (BenchError, KeyboardInterrupt) as e:
        log(f"stopped: {e}")
        return_code = 1
    finally:
        env.stop()
    load_at_end = machine.load_average()
    facts = machine_facts(env, load_at_start, load_at_end)
    block = report(args, facts, results, command, loads)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"command": command, "machine": facts, "loads": loads, "quick": args.quick,
                   "results": results}, f, indent=1, default=str)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(block)
    print(block)
    log(f"results: {out}/results.json, results.md")
    if args.docs and return_code == 0:
        update_docs(block)
        log("docs/benchmarks.md updated")
    return return_code


if __name__ == "__main__":
    sys.exit(main())
