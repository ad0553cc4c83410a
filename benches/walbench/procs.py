"""Processes as /proc shows them: CPU seconds, peak memory, process trees,
thread ids, CPU affinity, a task's scheduler counters and the bytes and
segments its TCP sockets sent.

Every reader answers None (or skips the process) once a process is gone:
the systems measured start and exit under the bench's feet. Nothing here
starts or stops a process, except `ss`, which tcp_sent runs to read the
kernel's tcp_info.
"""

import os
import re
import subprocess
import time
from collections import namedtuple

from . import BenchError

TICK = os.sysconf("SC_CLK_TCK")


def stat_fields(pid):
    """The fields of /proc/<pid>/stat after the command name; None once
    the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()


def cpu_of(pid):
    """utime + stime of one process, seconds; None once it is gone."""
    fields = stat_fields(pid)
    return None if fields is None else (int(fields[11]) + int(fields[12])) / TICK


def children_of():
    """parent pid -> [child pids], of every process now."""
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        fields = stat_fields(d)
        if fields is not None:
            kids.setdefault(int(fields[1]), []).append(int(d))
    return kids


def tree(pid):
    """`pid` and its descendants, as they are now."""
    kids, out, todo = children_of(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def tree_cpu(pid):
    """CPU seconds of the process tree under `pid`, alive processes only."""
    return sum(c for c in (cpu_of(p) for p in tree(pid)) if c is not None)


def cluster_cpu(postmaster):
    """CPU seconds of a whole PostgreSQL cluster so far: the postmaster,
    the children it has reaped (backends of finished connections,
    autovacuum workers) and those alive now."""
    fields = stat_fields(postmaster)
    if fields is None:
        raise BenchError(f"the postmaster (pid {postmaster}) is gone")
    own = sum(int(x) for x in fields[11:15]) / TICK  # utime stime cutime cstime
    return own + sum(c for c in (cpu_of(p) for p in tree(postmaster) if p != postmaster) if c is not None)


def status_kb(pid, key):
    """A kB field of /proc/<pid>/status (VmHWM, VmRSS), or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def hwm_kb(pid):
    """VmHWM of one process, KiB (0 if gone). Unlike getrusage's
    ru_maxrss, which keeps the high-water mark of the forked Python from
    before the exec, VmHWM belongs to the running program."""
    return status_kb(pid, "VmHWM") or 0


def tree_hwm_kb(pid):
    """Sum of VmHWM over the process tree, KiB."""
    return sum(hwm_kb(p) for p in tree(pid))


def tree_rss_split_kb(pid):
    """(RssAnon, RssFile) summed over the process tree now, KiB: what the
    process allocated, and the pages of its code and libraries mapped in
    (shared memory, RssShmem, is neither)."""
    procs = tree(pid)
    return (sum(status_kb(p, "RssAnon") or 0 for p in procs),
            sum(status_kb(p, "RssFile") or 0 for p in procs))


def thread_ids(pid):
    """The thread ids of one process (empty once it is gone)."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def tree_threads(pids):
    """Thread ids of `pids` and their descendants, as they are now."""
    return {t for pid in pids for p in tree(pid) for t in thread_ids(p)}


def set_affinity(pid, cpus):
    """Every thread of `pid` on `cpus` (`taskset -a -p`); a thread or
    process that is gone is skipped."""
    for tid in thread_ids(pid):
        try:
            os.sched_setaffinity(tid, cpus)
        except ProcessLookupError:
            pass


# One reading of the scheduler's counters of a task: when it was taken
# (time.time()), nanoseconds on a CPU and waiting on a run queue (None
# without /proc/<pid>/schedstat), and the context switches it made itself
# (blocking) and had forced on it (preemption).
Sched = namedtuple("Sched", "t on_cpu_ns wait_ns voluntary involuntary")


def sched_of(pid):
    """The scheduler's counters of one process now (of its main thread:
    /proc/<pid>/schedstat and the switches of /proc/<pid>/status are the
    task's own); None once it is gone."""
    t = time.time()
    on_cpu = wait = None
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            fields = f.read().split()
        # A kernel keeping no run-queue statistics writes "0 0 0".
        if len(fields) >= 2 and any(int(x) for x in fields):
            on_cpu, wait = int(fields[0]), int(fields[1])
    except (OSError, ValueError):
        pass
    switches = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
                    switches[key] = int(value)
    except OSError:
        return None
    if len(switches) < 2:
        return None
    return Sched(t, on_cpu, wait, switches["voluntary_ctxt_switches"], switches["nonvoluntary_ctxt_switches"])


def socket_inodes(pid):
    """The inodes of the sockets process `pid` holds open (empty once it
    is gone)."""
    found = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            found.add(target[len("socket:["):-1])
    return found


def tcp_sent(pid):
    """(time, bytes, data segments) the TCP sockets of process `pid` have
    sent so far, from `ss -tie` (the kernel's tcp_info); None when it holds
    no TCP socket or is gone."""
    inodes = socket_inodes(pid)
    if not inodes:
        return None
    t = time.time()
    out = subprocess.run(["ss", "-tieHn"], capture_output=True, text=True).stdout
    sent = segments = 0
    found = False
    # One socket per block: its line, then its tcp_info indented below it.
    for block in re.split(r"\n(?=\S)", out):
        ino = re.search(r"\bino:(\d+)", block)
        if not ino or ino.group(1) not in inodes:
            continue
        found = True
        for key, value in re.findall(r"\b(bytes_sent|data_segs_out):(\d+)", block):
            if key == "bytes_sent":
                sent += int(value)
            else:
                segments += int(value)
    return (t, sent, segments) if found else None
