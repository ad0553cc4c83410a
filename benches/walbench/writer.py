"""The writer's cost of the two outbox styles (before W5): what writing
each costs the service, with nothing decoding the WAL. pgbench without a
rate limit, one single-event transaction per call: a table outbox (insert
and delete of a row, W1's transaction) against a message outbox
(outbox_emit(), W5's transaction), rounds interleaved; PostgreSQL's CPU
and WAL per transaction, and the VACUUM each run leaves behind."""

import os
import re
import time

from . import BenchError, log
from .env import processed

# style -> (what its transaction does, the pgbench statement); each style
# is a function call so both pay one round trip.
WRITERS = {
    "table": ("insert + delete of an outbox row (W1's transaction)", "SELECT bench_write_table(:i);"),
    "message": ("outbox_emit(), one pg_logical_emit_message (W5's transaction)", "SELECT bench_write_message(:i);"),
}


def writer_cost(env, clients, seconds, rounds, out):
    """What each outbox style costs the service writing it: pgbench, no
    rate limit, `clients` clients, one single-event transaction per call,
    with nothing decoding the WAL. Rounds interleave the styles (the first
    style alternates). Autovacuum is off for the outbox table meanwhile and
    a VACUUM after each run measures what the run left to clean up (the
    table style's dead tuples; the message style leaves none)."""
    scripts = {}
    for style, (_, stmt) in WRITERS.items():
        scripts[style] = os.path.join(out, f"writer-{style}.sql")
        with open(scripts[style], "w") as f:
            f.write(f"\\set i random(1, 1000000)\n{stmt}\n")
    env.db.query("ALTER TABLE outbox SET (autovacuum_enabled = false)")
    done = {style: [] for style in WRITERS}
    try:
        for k in range(rounds):
            order = list(WRITERS) if k % 2 == 0 else list(reversed(WRITERS))
            for style in order:
                log(f"writer: {style} outbox, {clients} clients, {seconds} s (round {k + 1} of {rounds})")
                done[style].append(_one_run(env, style, clients, seconds, scripts[style]))
                log(f"writer: {style}: {done[style][-1]['tps']:,.0f} transactions/s, "
                    f"{done[style][-1]['wal_bytes_per_txn']:.0f} WAL bytes each, "
                    f"VACUUM {done[style][-1]['vacuum_s']:.2f} s")
    finally:
        env.db.query("ALTER TABLE outbox RESET (autovacuum_enabled)")
        env.db.query("TRUNCATE outbox")
        env.db.query("CHECKPOINT")
    results = []
    for style, runs in done.items():
        if not runs:
            continue
        med = dict(sorted(runs, key=lambda x: x["tps"])[(len(runs) - 1) // 2])
        med.update({"workload": "writer", "system": style, "pinned": env.pinned, "clients": clients, "seconds": seconds,
                    "rounds": [x["tps"] for x in runs]})
        results.append(med)
    return results


def _one_run(env, style, clients, seconds, script):
    env.db.query("TRUNCATE outbox")
    env.db.query("CHECKPOINT")
    lsn0 = env.db.value("SELECT pg_current_wal_lsn()")
    cpu0 = env.cluster_cpu()
    pb = env.pgbench(clients, script, seconds)
    n = processed(pb)
    tps = re.search(r"tps = ([\d.]+) \(without initial connection time\)", pb.stdout)
    failed = re.search(r"number of failed transactions: (\d+)", pb.stdout)
    if pb.returncode != 0 or n is None or not tps or (failed and int(failed.group(1))):
        raise BenchError(f"pgbench ({style}) failed: {pb.stdout[-500:]} {pb.stderr[-500:]}")
    # The backends of the finished run exit: give the postmaster a moment
    # to reap them, so their CPU is in its cutime.
    time.sleep(0.5)
    cpu1 = env.cluster_cpu()
    wal = float(env.db.value(f"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '{lsn0}')"))
    t0, v0 = time.time(), env.cluster_cpu()
    env.db.query("VACUUM outbox")
    vac_s, vac_cpu = time.time() - t0, env.cluster_cpu() - v0
    return {"tps": float(tps.group(1)), "transactions": n,
            "pg_cpu_us_per_txn": (cpu1 - cpu0) / n * 1e6 if n else None,
            "wal_bytes_per_txn": wal / n if n else None,
            "vacuum_s": vac_s, "vacuum_cpu_s": vac_cpu}
