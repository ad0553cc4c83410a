"""Backlog drains (W1, W2, W4, W5) and the broker's warm-up.

For each workload one logical slot per system and round is made at the
same position, the backlog is written once, and every system drains it in
turn. The clock starts when the system's slot turns active (its
START_REPLICATION accepted) and stops at the Kafka LogAppendTime of the
last record (for a transactional topic, of the last COMMIT marker; for the
two baselines, when they exit at the end LSN). Every record is read back
and counted. The fast systems drain each backlog --rounds times,
interleaved, and the median round is reported.
"""

import os
import re
import time

from . import BenchError, log
from .cpu_profile import Profile, finish_profile
from .env import PIN_MODES
from .procs import cpu_of, hwm_kb, tree_cpu, tree_hwm_kb, tree_rss_split_kb, tree_threads
from .systems import BASELINES, REPEATED, TRANSACTIONAL, base_system, slug, start_system, tail, wait_active
from .walrelay import transaction_counters
from .walsender import WalsenderTrace

DRAINS = ("W1", "W2", "W4", "W5")
# Backlogs written as logical decoding messages (no outbox rows): their
# systems read the empty publication, with messages on.
MESSAGE_WORKLOADS = ("W5",)


def drain(env, system, slot, topic, n, end_lsn, run_dir, timeout, workload=None):
    """One drain of the backlog on `slot` by `system`: its result row."""
    t_launch = time.time()
    r = start_system(env, system, slot, topic, run_dir, end_lsn, workload in MESSAGE_WORKLOADS)
    t_active, ws_pid = wait_active(env, r, slot, 300)
    cpu0 = tree_cpu(r.pid)
    ws = WalsenderTrace(ws_pid)
    br0 = cpu_of(env.broker_pid)
    res = {"system": system, "events": n, "startup_s": t_active - t_launch}
    prof = Profile(os.path.join(run_dir, "perf.data")) if env.args.profile else None
    # Threads of the system, for the profile (a baseline is gone by its end).
    sut_threads = tree_threads([r.pid]) if prof else set()
    base = base_system(system)
    if base in BASELINES:
        t_end, cpu, rss_kb, parts = _until_exit(env, r, ws, t_active + timeout, end_lsn, timeout, prof,
                                                sut_threads, run_dir, res, workload)
        br1 = cpu_of(env.broker_pid)
    else:
        split = _until_in_kafka(env, r, topic, n, ws, t_active + timeout, timeout, prof, sut_threads)
        # Peak RSS split into anonymous memory (sampled every 0.2 s, its
        # highest) and the file-backed pages (code and libraries).
        res["peak_anon_mb"], res["file_mb"] = (kb / 1024 for kb in split)
        parts = finish_profile(prof, env.broker_pid, sut_threads, ws_pid, run_dir,
                               {system: r.pid, "the walsender": ws_pid})
        if base in TRANSACTIONAL:
            res["txn_metrics"] = transaction_counters(r.endpoints.pipeline())
        cpu = tree_cpu(r.pid) - cpu0
        rss_kb = tree_hwm_kb(r.pid)
        br1 = cpu_of(env.broker_pid)
        r.stop()
        first, t_end = _read_back(env, system, topic, n, run_dir, t_active, res)
        res["first_record_s"] = first - t_launch
    secs = t_end - t_active
    ws_cpu = ws.cpu_s()
    res.update({
        "seconds": secs,
        "events_per_s": n / secs if secs > 0 else None,
        "cpu_s": cpu,
        "cpu_s_per_m": cpu / n * 1e6,
        "walsender_cpu_s_per_m": ws_cpu / n * 1e6 if ws_cpu is not None else None,
        "walsender_sched": ws.summary(t_end, n),
        "broker_cpu_s_per_m": (br1 - br0) / n * 1e6 if base not in BASELINES else None,
        "peak_rss_mb": rss_kb / 1024,
    })
    if parts:
        res["cpu_share"] = parts
    return res


def _until_exit(env, r, ws, deadline, end_lsn, timeout, prof, sut_threads, run_dir, res, workload):
    """A baseline's drain: slot active to its exit at the end LSN (the same
    clock for both). Returns (end, CPU seconds, peak RSS KiB, the profile's
    breakdown); what the walsender reader printed goes into `res`."""
    prog = "pg_recvlogical" if base_system(r.system) == "ceiling" else "walsender_drain"
    hwm = 0
    while True:
        pid, status, ru = os.wait4(r.pid, os.WNOHANG)
        if pid:
            t_end = time.time()
            break
        ws.poll()
        hwm = max(hwm, hwm_kb(r.pid))
        if time.time() > deadline:
            raise BenchError(f"{prog} did not reach {end_lsn} in {timeout} s")
        time.sleep(0.01)
    parts = finish_profile(prof, env.broker_pid, sut_threads, ws.pid, run_dir, {prog: r.pid, "the walsender": ws.pid})
    r.popen.returncode = os.waitstatus_to_exitcode(status)
    if r.popen.returncode != 0:
        raise BenchError(f"{prog} failed:\n{tail(r.log)}")
    if prog == "walsender_drain":
        summary = tail(os.path.join(os.path.dirname(r.log), "walsender_drain.out"), 1)
        res["reader"] = dict((k, float(v)) for k, v in re.findall(r"(\w+)=([\d.]+)", summary))
        # What the walsender sent per event (pgoutput messages).
        res["walsender_messages_per_event"] = res["reader"].get("messages", 0) / res["events"]
        if workload in MESSAGE_WORKLOADS and res["reader"].get("logical_messages") != res["events"]:
            raise BenchError(f"walsender_drain received {res['reader'].get('logical_messages')} logical "
                             f"decoding messages, {res['events']} were written")
    # The last VmHWM seen while it ran: its peak up to 10 ms before exit.
    return t_end, ru.ru_utime + ru.ru_stime, hwm or ru.ru_maxrss, parts


def _until_in_kafka(env, r, topic, n, ws, deadline, timeout, prof, sut_threads):
    """Waits until `n` records of `topic` can be read (committed ones for a
    transactional system), polling every 0.2 s. Returns the highest
    RssAnon seen and the highest RssFile, KiB."""
    anon = file = 0
    while True:
        a, f = tree_rss_split_kb(r.pid)
        anon, file = max(anon, a), max(file, f)
        count = env.count(r.system, topic)
        if count >= n:
            return anon, file
        if not r.alive():
            raise BenchError(f"{r.system} exited with {count}/{n} records in kafka:\n{tail(r.log)}")
        if time.time() > deadline:
            r.stop()
            raise BenchError(f"{r.system}: only {count}/{n} records in kafka after {timeout} s")
        ws.sleep(0.2)
        if prof:
            sut_threads |= tree_threads([r.pid])


def _read_back(env, system, topic, n, run_dir, t_active, res):
    """Reads every record back; returns the first append and the drain's
    end (the last append, or for a transactional topic the last COMMIT
    marker), and puts the transactions' facts into `res`."""
    txn = base_system(system) in TRANSACTIONAL
    recs = env.read_topic(topic, n, committed=txn)
    if len(recs) != n:
        raise BenchError(f"{system}: read {len(recs)} records back from {topic}"
                         f"{' (read_committed)' if txn else ''}, expected {n}")
    first = min(t for t, *_ in recs) / 1000
    t_end = max(t for t, *_ in recs) / 1000
    if txn:
        # The last record is readable once its transaction committed:
        # the clock stops at the last COMMIT marker's append time.
        view = env.committed(topic)
        view.scan()
        res["last_append_s"] = t_end - t_active
        t_end = max(t_end, (view.last_commit_ms() or 0) / 1000)
        res["commit_markers"] = sum(len(m) for m in view.markers.values())
        res["marker_timestamps"] = sorted(view.marker_ts_types)
        res["aborted_records"] = view.aborted
        env.forget(topic)
        # One progress record per Kafka transaction: their count.
        progress = env.committed_progress(system, run_dir)
        if progress is not None:
            res["kafka_transactions"] = progress
            res["events_per_transaction"] = n / progress if progress else None
    return first, t_end


def workload_drain(env, name, n, load, systems, out):
    """Drains one backlog with every system. The fast systems (the
    baselines and walrelay, seconds each) drain it `--rounds` times,
    interleaved, and report the median round: on a shared machine one
    round can be half as fast as the next. Debezium drains it once."""
    prefix = f"bench_{name.lower()}_"
    modes = PIN_MODES[env.args.pin]
    rounds = {s: (env.args.rounds if base_system(s) in REPEATED else 1) for s in systems}
    # Each round drains with every system in each CPU mode (--pin both:
    # unpinned, then pinned), all from the same backlog.
    runs = [(k, s, p) for k in range(max(rounds.values())) for p in modes for s in systems if k < rounds[s]]
    slots = {(k, s, p): f"{prefix}{slug(s)}{'_pin' if p else ''}_{k}" for k, s, p in runs}
    topics = {(k, s, p): f"bench.{env.stamp}.{name.lower()}.{slug(s)}{'.pin' if p else ''}.{k}"
              for k, s, p in runs if base_system(s) not in BASELINES}
    for slot in slots.values():
        env.create_slot(slot)
    for t in topics.values():
        env.create_topic(t)
    log(f"{name}: loading {n:,} events")
    t0 = time.time()
    load()
    end_lsn = env.db.value("SELECT pg_current_wal_lsn()")
    backlog = env.db.value(f"SELECT pg_wal_lsn_diff('{end_lsn}', confirmed_flush_lsn) FROM pg_replication_slots "
                           f"WHERE slot_name = '{slots[runs[0]]}'")
    env.db.query("CHECKPOINT")
    log(f"{name}: loaded in {time.time() - t0:.1f} s, {int(float(backlog)) / 2**20:.1f} MiB of WAL up to {end_lsn}")
    timeout = max(120, n / 500)
    done = {(s, p): [] for s in systems for p in modes}
    for k, s, p in runs:
        env.set_pinned(p)
        label = (f"{s} (round {k + 1} of {rounds[s]})" if rounds[s] > 1 else s) + (", pinned" if p else "")
        log(f"{name}: draining with {label}")
        run_dir = os.path.join(out, "runs", f"{name}-{slug(s)}" + ("-pinned" if p else "")
                               + (f"-r{k + 1}" if rounds[s] > 1 else ""))
        try:
            res = drain(env, s, slots[(k, s, p)], topics.get((k, s, p)), n, end_lsn, run_dir, timeout, name)
            split = (f" (anonymous {res['peak_anon_mb']:.1f}, file-backed {res['file_mb']:.1f})"
                     if "peak_anon_mb" in res else "")
            log(f"{name}: {label}: {res['events_per_s']:,.0f} events/s, {res['cpu_s_per_m']:.1f} CPU s/M, "
                f"{res['peak_rss_mb']:.0f} MB{split}")
        except BenchError as e:
            log(f"{name}: {label} FAILED: {e}")
            res = {"system": s, "events": n, "error": str(e).splitlines()[0]}
        res["round"] = k + 1
        done[(s, p)].append(res)
    results = [_median_round(done[(s, p)], name, p, backlog) for p in modes for s in systems]
    env.set_pinned(modes[0])
    env.drop_slots(prefix)
    env.db.query("TRUNCATE outbox")
    env.db.query("CHECKPOINT")
    return results


def _median_round(rounds, workload, pinned, backlog):
    """A system's row: its median round by events/s (of an even count, the
    lower middle), with every round's rate and the worst round's memory."""
    ok = sorted((r for r in rounds if "error" not in r), key=lambda r: r["events_per_s"])
    res = dict(ok[(len(ok) - 1) // 2]) if ok else rounds[0]
    if len(rounds) > 1:
        res["rounds"] = [r.get("events_per_s") for r in rounds]
        # Memory is a bound, not a rate: the worst round counts.
        res["peak_rss_mb"] = max(r["peak_rss_mb"] for r in ok) if ok else None
        res["rss_rounds"] = [r.get("peak_rss_mb") for r in rounds]
        if ok and all("peak_anon_mb" in r for r in ok):
            res["peak_anon_mb"] = max(r["peak_anon_mb"] for r in ok)
            res["file_mb"] = max(r["file_mb"] for r in ok)
    res["workload"] = workload
    res["pinned"] = pinned
    res["backlog_mib"] = int(float(backlog)) / 2**20
    return res


def warm_broker(env, n, out):
    """A freshly started broker compiles its hot paths (JIT) during its
    first minute of load: its C2 compiler threads took 16 % of the machine
    while the first system drained, and a 5 s drain of 500,000 batched rows
    beforehand did not finish that. So the broker first gets about a minute
    of steady load, unmeasured: walrelay relays W1-shaped transactions as
    they are written."""
    slot, topic = "bench_warmup", f"bench.{env.stamp}.warmup"
    env.create_slot(slot)
    env.create_topic(topic)
    log(f"warming the broker up: walrelay relays {n:,} events as they are written (not measured)")
    run_dir = os.path.join(out, "runs", "warmup")
    r = start_system(env, "walrelay", slot, topic, run_dir)
    try:
        wait_active(env, r, slot, 60)
        t0 = time.time()
        env.db.query(f"CALL load_single({n})")
        deadline = time.time() + 120
        while env.offsets.count(topic) < n and time.time() < deadline and r.alive():
            time.sleep(0.2)
        log(f"broker warmed for {time.time() - t0:.0f} s")
    except BenchError as e:
        log(f"warm-up failed (the run goes on): {e}")
    finally:
        r.stop()
    env.drop_slots(slot)
    env.db.query("TRUNCATE outbox")
    env.db.query("CHECKPOINT")
