"""Where the CPU goes: `perf record -a` (software clock, so it works on
virtual machines without hardware counters) while a system drains or a W3
level runs, then each sample is charged to a part of the pipeline (the
system under test, the walsender, the load, the broker, the rest, idle),
and each process's hottest symbols are written next to the run's logs.
Without perf there is no profile, and the run goes on."""

import os
import re
import shutil
import signal
import subprocess
import time

from . import log
from .procs import tree_threads

PARTS = ("system", "walsender", "load", "broker", "other", "idle")
PART_LABELS = {"system": "system under test", "walsender": "walsender", "load": "load (pgbench + its backends)",
               "broker": "Kafka broker", "other": "other", "idle": "idle"}


class Profile:
    """A system-wide sampling profile of one measured interval."""

    HZ = 499

    def __init__(self, path):
        self.path = path
        self.proc = None
        if shutil.which("perf") is None:
            log("perf not found: no CPU profile")
            return
        self.proc = subprocess.Popen(["perf", "record", "-a", "-e", "cpu-clock", "-F", str(self.HZ), "-q",
                                      "-o", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.t0 = time.time()
        self.seconds = None

    def stop(self):
        if self.proc is None:
            return False
        self.seconds = time.time() - self.t0
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return False
        return os.path.exists(self.path)

    def report(self, *sort, pid=None):
        """`perf report` rows (percent of the samples, key columns...) and
        the CPU time the samples stand for, in seconds."""
        cmd = ["perf", "report", "-i", self.path, "--stdio", "--no-children", "--sort", ",".join(sort)]
        if pid is not None:
            cmd += ["--pid", str(pid)]
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
        rows, busy_ns = [], 0
        for line in res.stdout.splitlines():
            m = re.match(r"# Event count \(approx\.\): (\d+)", line)
            if m:
                busy_ns = int(m.group(1))
            cols = line.split(None, len(sort))
            if len(cols) == len(sort) + 1 and cols[0].endswith("%") and not line.startswith("#"):
                rows.append((float(cols[0][:-1]), *cols[1:]))
        return rows, busy_ns / 1e9

    def breakdown(self, threads):
        """Share of the machine (percent of all CPUs over the interval) per
        part; `threads` maps a thread id to its part (the rest goes by
        name). An idle CPU takes no cpu-clock samples, so idle is the rest."""
        parts = dict.fromkeys(PARTS, 0.0)
        rows, busy = self.report("pid")
        capacity = self.seconds * (os.cpu_count() or 1)
        for pct, tid_comm in rows:
            tid, _, comm = tid_comm.strip().partition(":")
            comm = comm.strip()
            tid = int(tid) if tid.isdigit() else -1
            if tid in threads:
                part = threads[tid]
            elif tid == 0 or comm == "swapper":
                part = "idle"
            elif comm in ("pgbench", "postgres"):
                part = "load"
            else:
                part = "other"
            parts[part] += pct * busy / capacity
        parts["idle"] = max(0.0, 100.0 - sum(v for k, v in parts.items() if k != "idle"))
        return parts

    def top(self, pid, n=12):
        """The hottest symbols of process `pid`, percent of that process's samples."""
        rows, _ = self.report("dso", "sym", pid=pid)
        total = sum(r[0] for r in rows) or 1.0
        return [(100 * r[0] / total, r[1], r[2]) for r in rows[:n]]


def finish_profile(prof, broker_pid, sut_threads, ws_pid, run_dir, pids):
    """Stops `prof`, writes its breakdown (the system under test is
    `sut_threads`, the walsender `ws_pid`) and the hottest symbols of `pids`
    (name -> pid) next to the run's logs, returns the breakdown."""
    if not prof or not prof.stop():
        return None
    threads = {t: "broker" for t in tree_threads([broker_pid])}
    threads.update((t, "system") for t in sut_threads)
    if ws_pid:
        threads[ws_pid] = "walsender"
    parts = prof.breakdown(threads)
    with open(os.path.join(run_dir, "profile.txt"), "w") as f:
        f.write("share of the machine's CPUs (perf record -a, cpu-clock)\n")
        for k in PARTS:
            f.write(f"  {PART_LABELS[k]:<32} {parts[k]:5.1f} %\n")
        for name, pid in pids.items():
            if pid is None:
                continue
            f.write(f"\nhottest symbols of {name} (pid {pid}), % of its samples\n")
            for pct, dso, sym in prof.top(pid):
                f.write(f"  {pct:5.1f} %  {dso:<28} {sym}\n")
    return parts
