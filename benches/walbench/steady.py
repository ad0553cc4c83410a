"""W3: open-loop steady load (pgbench -R) at fractions of the W1 ceiling,
one event per transaction, each system on a slot and topic of its own.

Latency is the record's LogAppendTime (for a transactional topic: its
transaction's COMMIT marker, when a read_committed consumer sees it) minus
pg_xact_commit_timestamp of the transaction whose xid the event id
carries; one clock, the same machine. walrelay's latency by stage comes
from its stage histograms in /api/state, read before and after each level
and subtracted. The slot's lag is sampled every 0.5 s.
"""

import os
import threading
import time

from . import BenchError, log
from .cpu_profile import Profile, finish_profile
from .env import PIN_MODES, generator_tps, processed
from .postgres import Pg
from .procs import tree_cpu, tree_hwm_kb, tree_threads
from .stats import percentile
from .systems import BASELINES, TRANSACTIONAL, base_system, slug, start_system, tail, wait_active
from .walrelay import stage_breakdown, stage_histograms, transaction_counters


class LagSampler(threading.Thread):
    """Samples the slot's lag (bytes behind the current WAL end) every 0.5 s."""

    def __init__(self, env, slot):
        super().__init__(daemon=True)
        self.pg = Pg(env.pg_port, "bench")
        self.slot = slot
        self.samples = []
        self.stopped = threading.Event()

    def run(self):
        while not self.stopped.is_set():
            v = self.pg.value(f"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn) "
                              f"FROM pg_replication_slots WHERE slot_name = '{self.slot}'")
            if v is not None:
                self.samples.append((time.time(), int(float(v))))
            self.stopped.wait(0.5)
        self.pg.close()


def workload_w3(env, ceiling_rate, levels, seconds, systems, out, clients, warmup):
    script = os.path.join(out, "w3.sql")
    with open(script, "w") as f:
        f.write("SELECT bench_emit();\n")
    results = []
    # What PostgreSQL here commits at most with nobody decoding: the load
    # levels are fractions of the W1 ceiling, which may be above it.
    pb = env.pgbench(clients, script, 10)
    tps = generator_tps(pb)
    env.args.w3_generator_max = tps
    log(f"W3: pgbench alone commits {tps or 0:,.0f} events/s at most here")
    env.db.query("TRUNCATE outbox")
    # Every system in each CPU mode (--pin both: all unpinned, then all
    # pinned), at the same rates.
    for pinned, s in [(p, s) for p in PIN_MODES[env.args.pin] for s in systems]:
        if base_system(s) in BASELINES:
            continue
        env.set_pinned(pinned)
        results.extend(_system(env, s, pinned, ceiling_rate, levels, seconds, out, clients, warmup, script))
    return results


def _system(env, s, pinned, ceiling_rate, levels, seconds, out, clients, warmup, script):
    """Every level for one system: its result rows."""
    slot = f"bench_w3_{slug(s)}{'_pin' if pinned else ''}"
    topic = f"bench.{env.stamp}.w3.{slug(s)}{'.pin' if pinned else ''}"
    env.create_slot(slot)
    env.create_topic(topic)
    run_dir = os.path.join(out, "runs", f"W3-{slug(s)}{'-pinned' if pinned else ''}")
    log(f"W3: starting {s}" + (", pinned" if pinned else ""))
    try:
        t_launch = time.time()
        r = start_system(env, s, slot, topic, run_dir)
        t_active, ws_pid = wait_active(env, r, slot, 300)
    except BenchError as e:
        log(f"W3: {s} FAILED: {e}")
        env.drop_slots(slot)
        return [{"workload": "W3", "system": s, "pinned": pinned, "error": str(e).splitlines()[0]}]
    expected = 0
    if warmup:
        # JIT, connections and caches warm up at the lowest level's rate;
        # these events count for completion but not for latency.
        rate = max(1, int(ceiling_rate * min(levels) / 100))
        log(f"W3: warming {s} up: {rate:,} events/s for {warmup} s")
        expected += processed(env.pgbench(clients, script, warmup, rate)) or 0
    time.sleep(2)
    sampler = LagSampler(env, slot)
    sampler.start()
    levels_done = []
    try:
        for level in levels:
            row = _level(env, s, r, topic, ws_pid, sampler, level, ceiling_rate, seconds, clients, script, run_dir,
                         expected)
            row.update({"workload": "W3", "system": s, "pinned": pinned, "startup_s": t_active - t_launch})
            expected += row["events"]
            levels_done.append(_in_order(row))
            time.sleep(3)
        rss = tree_hwm_kb(r.pid) / 1024
        if base_system(s) in TRANSACTIONAL and levels_done:
            levels_done[-1]["txn_metrics"] = transaction_counters(r.endpoints.pipeline())
    except BenchError as e:
        log(f"W3: {s} FAILED: {e}")
        levels_done.append({"workload": "W3", "system": s, "pinned": pinned, "error": str(e).splitlines()[0]})
        rss = None
    finally:
        sampler.stopped.set()
        sampler.join()
        r.stop()
    if expected:
        _latencies(env, s, topic, expected, levels_done, rss)
    env.forget(topic)
    env.drop_slots(slot)
    return levels_done


# A level's row, in the order results.json has always had it.
LEVEL_KEYS = ("workload", "system", "pinned", "level_pct", "target_rate", "events", "achieved_rate", "xid_lo",
              "xid_hi", "cpu_s_per_m", "max_lag_mib", "lag_bounded", "catch_up_s", "startup_s", "stages",
              "cpu_share")


def _in_order(row):
    return {k: row[k] for k in LEVEL_KEYS if k in row}


def _level(env, s, r, topic, ws_pid, sampler, level, ceiling_rate, seconds, clients, script, run_dir, expected):
    """One load level: pgbench at `level` % of the ceiling, then until every
    event is in Kafka; its row (without the latencies, read afterwards)."""
    rate = max(1, int(ceiling_rate * level / 100))
    lo = int(env.db.value("SELECT txid_current()"))
    # walrelay's stage histograms before and after the level.
    stages0 = stage_histograms(r.endpoints.pipeline()) if r.endpoints else None
    cpu0 = tree_cpu(r.pid)
    t0 = time.time()
    log(f"W3: {s} at {level} % of the ceiling: {rate:,} events/s for {seconds} s")
    level_dir = os.path.join(run_dir, f"level-{level}")
    os.makedirs(level_dir, exist_ok=True)
    prof = Profile(os.path.join(level_dir, "perf.data")) if env.args.profile else None
    pb = env.pgbench(clients, script, seconds, rate)
    t1 = time.time()
    parts = finish_profile(prof, env.broker_pid, tree_threads([r.pid]) if prof else set(), ws_pid, level_dir,
                           {s: r.pid, "the walsender": ws_pid})
    done = processed(pb)
    if done is None:
        raise BenchError(f"pgbench failed: {pb.stdout[-500:]} {pb.stderr[-500:]}")
    hi = int(env.db.value("SELECT txid_current()"))
    catch = time.time() + 120
    while env.count(s, topic) < expected + done:
        if not r.alive():
            raise BenchError(f"{s} exited during W3:\n{tail(r.log)}")
        if time.time() > catch:
            raise BenchError(f"{s}: W3 records missing 120 s after the load stopped")
        time.sleep(0.2)
    t_caught = time.time()
    cpu = tree_cpu(r.pid) - cpu0
    stages = stage_breakdown(stages0, stage_histograms(r.endpoints.pipeline())) if r.endpoints else None
    lag = [b for t, b in sampler.samples if t0 <= t <= t1]
    third = len(lag) // 3
    first_third, last_third = max(lag[:third] or [0]), max(lag[-third:] or [0]) if third else 0
    row = {
        "level_pct": level, "target_rate": rate,
        "events": done, "achieved_rate": done / (t1 - t0), "xid_lo": lo, "xid_hi": hi,
        "cpu_s_per_m": cpu / done * 1e6 if done else None,
        "max_lag_mib": max(lag or [0]) / 2**20,
        # Bounded: the lag did not grow from the first third of the level
        # to the last (the confirmed position moves once per status
        # interval, a second of WAL, hence the slack), and everything was
        # in Kafka within 10 s of the load stopping.
        "lag_bounded": last_third <= 2 * first_third + 8 * 2**20 and t_caught - t1 < 10,
        "catch_up_s": t_caught - t1,
        "stages": stages,
    }
    if parts:
        row["cpu_share"] = parts
    return row


def _latencies(env, s, topic, expected, levels_done, rss):
    """Reads every record back and adds each level's latencies to its row."""
    txn = base_system(s) in TRANSACTIONAL
    log(f"W3: {s}: reading {expected:,} records back" + (" (read_committed)" if txn else ""))
    recs = env.read_topic(topic, expected, headers=True, committed=txn)
    view = None
    if txn:
        view = env.committed(topic)
        view.scan()
    # xid -> (append ms, visible ms): a record of a transactional topic
    # becomes visible to read_committed consumers at its transaction's
    # COMMIT marker, any other at its append.
    xids = {}
    for ts, hid, part, off in recs:
        if hid:
            vis = view.visible_ms(part, off) if view else ts
            xids[int(hid[-12:], 16)] = (ts, vis if vis is not None else ts)
    commits = env.commit_times_us(min(xids), max(xids)) if xids else {}
    for lv in levels_done:
        if "error" in lv:
            continue
        mine = [(commits[x], a, v) for x, (a, v) in xids.items()
                if lv["xid_lo"] <= x <= lv["xid_hi"] and x in commits]
        lat = sorted((v * 1000 - c) / 1000 for c, a, v in mine)
        lv.update({
            "latency_n": len(lat),
            "visibility": "read_committed (COMMIT marker)" if txn else "append",
            "p50_ms": percentile(lat, 0.50), "p90_ms": percentile(lat, 0.90), "p99_ms": percentile(lat, 0.99),
            "p999_ms": percentile(lat, 0.999), "max_ms": lat[-1] if lat else None,
            "peak_rss_mb": rss,
        })
        if txn:
            app = sorted((a * 1000 - c) / 1000 for c, a, v in mine)
            lv.update({"append_p50_ms": percentile(app, 0.50), "append_p99_ms": percentile(app, 0.99),
                       "append_p999_ms": percentile(app, 0.999)})
        log(f"W3: {s} {lv['level_pct']} %: {lv['achieved_rate']:,.0f}/s p50 {lv['p50_ms']} ms "
            f"p99 {lv['p99_ms']} ms p99.9 {lv['p999_ms']} ms, max lag {lv['max_lag_mib']:.1f} MiB")
