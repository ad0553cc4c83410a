"""What the Python benchmark drivers (benches/poll.py, benches/pipelines.py)
share: logging, running a command, a process's CPU and scheduling from /proc,
and writing a block of results between two markers of docs/benchmarks.md."""

import os
import re
import subprocess
import sys
import time
from collections import namedtuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICK = os.sysconf("SC_CLK_TCK")


class BenchError(Exception):
    """A step of the benchmark failed; the message says which."""


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(cmd, **kw):
    kw.setdefault("check", True)
    return subprocess.run(cmd, **kw)


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


def update_docs(block, begin, end, heading):
    """Puts `block` between the markers `begin` and `end` of
    docs/benchmarks.md, or appends `heading` and the markers with it."""
    path = os.path.join(REPO, "docs", "benchmarks.md")
    with open(path) as f:
        text = f.read()
    if begin in text and end in text:
        pre, rest = text.split(begin, 1)
        _, post = rest.split(end, 1)
        text = pre + begin + "\n" + block + end + post
    else:
        text = text.rstrip("\n") + f"\n\n{heading}\n\n{begin}\n{block}{end}\n"
    with open(path, "w") as f:
        f.write(text)
