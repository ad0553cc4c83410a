"""Backlog drains to the brokers other than Kafka (`--brokers nats,redis,rabbitmq,http`):
W1 and W2 published to each broker by walrelay and by Debezium Server
3.6.1, both reading the same application.properties (dbz_server.py), in
the same run, from the same backlog.

For each workload one logical slot per system, broker and round is made at
the same position, the backlog is written once, and then the rounds run
interleaved: round k drains with every system on every broker (the system
order reversed every other round), each on a fresh destination (a NATS
stream of its own, a Redis stream key of its own) on a broker server
started once for the whole run (brokers.py). The walsender reader
(`walsender`), which publishes nothing, drains once per round: what the
slot gives, whatever the broker.

The clock of a drain starts when the system's slot turns active (its
START_REPLICATION accepted; the start-up before it is reported apart, as
for the Kafka drains) and stops at the broker's own time of the last record
it stored (NATS: the stream's last_ts; Redis: the last entry id's
milliseconds; HTTP: the receiver's arrival time of the last request;
SQS: the largest SentTimestamp the bench received; Kinesis: the largest
ApproximateArrivalTimestamp; Pub/Sub: the largest publish_time the bench
pulled; Pulsar: the last entry's publish time, the producer's clock;
RabbitMQ, which keeps no such time: the poll that first saw the last
record, brokers.py). The bench polls the count every 0.2 s (NATS: the
stream's message count; Redis: XLEN; RabbitMQ every 0.02 s) until it reaches the backlog's events; the
system is stopped and the count read again, which must be exactly the
events written. CPU is utime + stime of the system's process (walrelay, or
Debezium Server's JVM) from the slot's activation to that moment; memory
the process's peak RSS (VmHWM, its whole life); the broker's CPU over the
same interval. Every system drains --rounds times and the median round is
reported, with every round's rate and the worst round's memory.
"""

import hashlib
import os
import signal
import subprocess
import time

from . import BenchError, log
from .brokers import wait_count
from .cpu_profile import Profile, finish_profile
from .dbz_server import Server, application_properties, properties_overrides, write_properties
from .drains import _median_round, drain
from .procs import cpu_of, tree_cpu, tree_hwm_kb, tree_threads
from .systems import BASELINES, Running, base_system, slug, tail, wait_active, walrelay_binary
from .walrelay import Endpoints
from .walsender import WalsenderTrace

BROKER_DRAINS = ("W1", "W2")
# The systems of a broker drain: the walsender reader (once per round,
# publishes nothing), walrelay reading Debezium Server's file, and Debezium
# Server.
BROKER_SYSTEMS = ("walsender", "walrelay", "dbz_server")
PUBLISHERS = ("walrelay", "dbz_server")


def slot_name(*parts):
    """bench_<parts>, at most 63 bytes (a long one keeps its head and a hash)."""
    name = "bench_" + "_".join(parts)
    if len(name) > 63:
        name = name[:54] + "_" + hashlib.sha1(name.encode()).hexdigest()[:8]
    return name


def destination(env, workload, broker, system, k):
    """The drain's topic after the EventRouter: a NATS subject, a Redis key."""
    return f"bench.{env.stamp}.{workload.lower()}.{broker}.{slug(system)}.r{k + 1}"


def dbzs_java_opts(env, broker):
    """Debezium Server's JVM options for `broker`: --dbzs-java-opts, then
    what the broker needs (Kinesis on moto: -Daws.cborEnabled=false)."""
    return " ".join(o for o in (env.args.dbzs_java_opts, broker.dbzs_java_opts) if o)


def start_publisher(env, system, props, run_dir, broker):
    """Starts walrelay or Debezium Server on `props` (an application.properties)
    for `broker` (its environment, and Debezium Server's JVM options)."""
    base = base_system(system)
    extra_env = broker.publisher_env()
    if base == "dbz_server":
        server = Server(run_dir, dbzs_java_opts(env, broker), extra_env)
        env.procs.append(("dbzs", server))
        return Running(system, server.pid, server.stop, server.alive, server.log)
    logf = os.path.join(run_dir, "walrelay.log")
    p = subprocess.Popen([walrelay_binary(env, system), "run", "--config", props, "--metrics-addr", "127.0.0.1:0"],
                         stdout=subprocess.DEVNULL, stderr=open(logf, "w"), env=dict(os.environ, **extra_env))
    env.procs.append(("popen", p))

    def stop():
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
    return Running(system, p.pid, stop, lambda: p.poll() is None, logf, p, Endpoints(logf))


def broker_drain(env, broker, system, slot, dest, n, run_dir, timeout):
    """One drain of the backlog on `slot` by `system` into `dest` on `broker`:
    its result row. The destination is dropped afterwards, also on failure."""
    os.makedirs(run_dir, exist_ok=True)
    broker.prepare(dest)
    try:
        return _broker_drain(env, broker, system, slot, dest, n, run_dir, timeout)
    finally:
        try:
            broker.drop(dest)
        except Exception as e:  # noqa: BLE001 - the drain's own outcome matters more
            log(f"{broker.kind}: could not drop {dest}: {e!r}")


def _broker_drain(env, broker, system, slot, dest, n, run_dir, timeout):
    props = os.path.join(run_dir, "application.properties")
    write_properties(props, application_properties(env.pg_port, broker, slot, dest, properties_overrides(system)))
    t_launch = time.time()
    r = start_publisher(env, system, props, run_dir, broker)
    prof = None
    try:
        t_active, ws_pid = wait_active(env, r, slot, 300)
        cpu0 = tree_cpu(r.pid)
        ws = WalsenderTrace(ws_pid)
        br0 = cpu_of(broker.pid)
        prof = Profile(os.path.join(run_dir, "perf.data")) if env.args.profile else None
        sut_threads = tree_threads([r.pid]) if prof else set()

        def sleep(s):
            ws.sleep(s)
            if prof:
                sut_threads.update(tree_threads([r.pid]))
        try:
            wait_count(broker, dest, n, r.alive, t_active + timeout, sleep)
        except BenchError as e:
            raise BenchError(f"{system} on {broker.kind}: {e}:\n{tail(r.log)}") from None
        cpu = tree_cpu(r.pid) - cpu0
        rss_kb = tree_hwm_kb(r.pid)
        br1 = cpu_of(broker.pid)
        parts = finish_profile(prof, broker.pid, sut_threads, ws_pid, run_dir,
                               {system: r.pid, "the walsender": ws_pid, broker.kind: broker.pid})
        prof = None
    finally:
        if prof:
            prof.stop()
        r.stop()
    count, first, last, size = broker.stored(dest)
    if count != n:
        raise BenchError(f"{system} on {broker.kind}: {count:,} records stored, {n:,} written")
    secs = last - t_active
    ws_cpu = ws.cpu_s()
    res = {
        "system": system, "broker": broker.kind, "events": n, "startup_s": t_active - t_launch,
        "first_record_s": first - t_launch if first else None,
        "seconds": secs,
        "events_per_s": n / secs if secs > 0 else None,
        "cpu_s": cpu,
        "cpu_s_per_m": cpu / n * 1e6,
        "walsender_cpu_s_per_m": ws_cpu / n * 1e6 if ws_cpu is not None else None,
        "walsender_sched": ws.summary(last, n),
        "broker_cpu_s_per_m": (br1 - br0) / n * 1e6 if br0 is not None and br1 is not None else None,
        "peak_rss_mb": rss_kb / 1024,
        "bytes_per_record": size,
    }
    if parts:
        res["cpu_share"] = parts
    res.update(broker.notes(dest))
    if base_system(system) == "dbz_server":
        res["dbzs_java_opts"] = dbzs_java_opts(env, broker)
    if res.get("duplicates"):
        log(f"{system} on {broker.kind}: {res['duplicates']:,} record(s) or request(s) received more than once")
    return res


def workload_broker_drain(env, name, n, load, systems, out):
    """Drains one backlog to every broker of the run with every system,
    --rounds times interleaved; one row per (broker, system), the
    walsender's with broker None."""
    brokers = env.brokers
    baselines = [s for s in systems if base_system(s) in BASELINES]
    publishers = [s for s in systems if base_system(s) not in BASELINES]
    runs = []
    for k in range(env.args.rounds):
        order = publishers if k % 2 == 0 else publishers[::-1]
        runs += [(k, None, s) for s in baselines]
        runs += [(k, b, s) for b in brokers for s in order]
    w = name.lower()
    slots = {(k, b, s): slot_name(w, b or "base", slug(s), str(k)) for k, b, s in runs}
    for slot in slots.values():
        env.create_slot(slot)
    log(f"{name}: loading {n:,} events")
    t0 = time.time()
    load()
    end_lsn = env.db.value("SELECT pg_current_wal_lsn()")
    first_slot = slots[runs[0]]
    backlog = env.db.value(f"SELECT pg_wal_lsn_diff('{end_lsn}', confirmed_flush_lsn) FROM pg_replication_slots "
                           f"WHERE slot_name = '{first_slot}'")
    env.db.query("CHECKPOINT")
    log(f"{name}: loaded in {time.time() - t0:.1f} s, {int(float(backlog)) / 2**20:.1f} MiB of WAL up to {end_lsn}")
    timeout = max(120, n / 500)
    done = {}
    for k, b, s in runs:
        where = f" to {b}" if b else ""
        label = f"{s}{where} (round {k + 1} of {env.args.rounds})"
        log(f"{name}: draining with {label}; load average {_load()}")
        run_dir = os.path.join(out, "runs", f"{name}-{b or 'base'}-{slug(s)}-r{k + 1}")
        try:
            if b is None:
                res = drain(env, s, slots[(k, b, s)], None, n, end_lsn, run_dir, timeout, name)
            else:
                res = broker_drain(env, brokers[b], s, slots[(k, b, s)], destination(env, name, b, s, k), n,
                                   run_dir, timeout)
            log(f"{name}: {label}: {res['events_per_s']:,.0f} events/s, {res['cpu_s_per_m']:.1f} CPU s/M, "
                f"{res['peak_rss_mb']:.0f} MB, streaming after {res['startup_s']:.1f} s")
        except Exception as e:  # noqa: BLE001 - a broker client's error fails this drain, not the run
            log(f"{name}: {label} FAILED: {e!r}" if not isinstance(e, BenchError) else f"{name}: {label} FAILED: {e}")
            res = {"system": s, "events": n, "error": (str(e) or repr(e)).splitlines()[0]}
        res["broker"] = b
        res["round"] = k + 1
        res["load_average"] = _load()
        done.setdefault((b, s), []).append(res)
        # What the slot kept for this run is not needed again (a slot still
        # held goes at the workload's end).
        try:
            env.drop_slots(slots[(k, b, s)])
        except BenchError as e:
            log(f"{name}: {e}")
    results = []
    for (b, s), rounds in done.items():
        row = _median_round(rounds, name, False, backlog)
        row["broker"] = b
        row["load_averages"] = [r.get("load_average") for r in rounds]
        results.append(row)
    env.drop_slots(f"bench_{w}_")
    env.db.query("TRUNCATE outbox")
    env.db.query("CHECKPOINT")
    return results


def warm_up(env, out, n, systems=PUBLISHERS):
    """Debezium Server's first start with a set of JVM options is a
    training run for its ahead-of-time cache, slower and with a long stop
    (docs/debezium-server-sinks.md): one unmeasured drain of `n` W1 events to
    the first broker makes that cache before anything is measured (and
    pages the binaries and the brokers in). A broker that gives Debezium
    Server other JVM options (Kinesis on moto) gets a warm-up drain of
    Debezium Server of its own, for that cache."""
    bases = [p for p in PUBLISHERS if any(base_system(s) == p for s in systems)]
    plan = []  # (broker kind, publishers): the first broker for everyone,
    opts_seen = set()  # then one per other set of Debezium Server's options
    for b, broker in env.brokers.items():
        opts = dbzs_java_opts(env, broker)
        if opts in opts_seen:
            continue
        opts_seen.add(opts)
        who = bases if not plan else [p for p in bases if p == "dbz_server"]
        if who:
            plan.append((b, who))
    for b, who in plan:
        broker = env.brokers[b]
        slots = {s: slot_name("warmup", b, slug(s)) for s in who}
        for slot in slots.values():
            env.create_slot(slot)
        why = (f" (and Debezium Server's ahead-of-time cache for `{dbzs_java_opts(env, broker)}`)"
               if "dbz_server" in who else "")
        log(f"warm-up (not measured): {n:,} events to {b} by {' and '.join(who)}{why}")
        env.db.query(f"CALL load_single({n})")
        for s, slot in slots.items():
            run_dir = os.path.join(out, "runs", f"warmup-{b}-{slug(s)}")
            try:
                broker_drain(env, broker, s, slot, destination(env, "warmup", b, s, 0), n, run_dir, 300)
            except BenchError as e:
                log(f"warm-up with {s} failed (the run goes on): {e}")
        env.drop_slots("bench_warmup_")
        env.db.query("TRUNCATE outbox")
        env.db.query("CHECKPOINT")


def _load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])
