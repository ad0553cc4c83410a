"""What the Python benchmark drivers (benches/poll.py, benches/pipelines.py)
share: logging, running a command, a process's CPU from /proc, and writing a
block of results between two markers of docs/benchmarks.md."""

import os
import subprocess
import sys
import time

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
