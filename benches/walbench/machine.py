"""Facts about the machine and the tree a run measured, for the reports'
headers: the CPU model, memory, load, the walrelay commit and whether the
tree had uncommitted changes. Read-only; a fact that cannot be read is
"?" or empty, never an error."""

import datetime
import re
import subprocess

from . import REPO


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def utc_stamp():
    """The name of a run's results directory."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def load_average():
    """The 1, 5 and 15 minute load averages, as /proc/loadavg writes them."""
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"model name\s*:\s*(.*)", f.read())
            return m.group(1) if m else ""
    except OSError:
        return ""


def memory():
    try:
        with open("/proc/meminfo") as f:
            m = re.search(r"MemTotal:\s*(\d+)", f.read())
            return f"{int(m.group(1)) / 2**20:.1f} GiB"
    except (OSError, AttributeError):
        return ""


def first_line(path):
    try:
        with open(path) as f:
            return f.readline().strip()
    except OSError:
        return "?"


def command_line(cmd, stderr=False):
    """The first line a command prints (on stderr: `java -version`), or "?"."""
    try:
        res = subprocess.run(cmd, capture_output=True, text=True)
        return (res.stderr if stderr else res.stdout).strip().splitlines()[0]
    except (OSError, IndexError):
        return "?"


def walrelay_commit():
    return command_line(["git", "-C", REPO, "rev-parse", "--short", "HEAD"])


def worktree_dirty():
    return bool(subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip())
