"""The walsender while a system drains: its CPU and scheduler counters read when
the drain starts and every 10 ms after (and its socket's sent bytes and
segments every 0.5 s), cut at the drain's end, and summed up as shares of
the wall time, context switches per 1,000 events and bytes per TCP
segment. Reads /proc through procs.py; never touches the walsender."""

import time

from .procs import cpu_of, sched_of, tcp_sent


class WalsenderTrace:
    """The walsender's CPU seconds and scheduler counters through a drain:
    read when the drain starts and at every poll (every 10 ms), kept, and
    cut at the drain's end once it is known (for walrelay and Debezium that
    is the last record's append time, which comes after the loop that waits
    for it)."""

    EVERY = 0.01
    # Its socket's counters (`ss`, a process to start) less often.
    TCP_EVERY = 0.5

    def __init__(self, pid):
        self.pid = pid
        self.samples = []
        self.tcp = []
        self.cpu0 = self.cpu = cpu_of(pid) if pid else None
        self.poll()

    def poll(self):
        c = cpu_of(self.pid) if self.pid else None
        if c is not None:
            self.cpu = c
        s = sched_of(self.pid) if self.pid else None
        if s is not None:
            self.samples.append(s)
        if self.pid and (not self.tcp or time.time() - self.tcp[-1][0] >= self.TCP_EVERY):
            sent = tcp_sent(self.pid)
            if sent is not None:
                self.tcp.append(sent)

    def sleep(self, seconds):
        """Sleeps `seconds`, polling every EVERY."""
        until = time.time() + seconds
        while True:
            self.poll()
            left = until - time.time()
            if left <= 0:
                return
            time.sleep(min(self.EVERY, left))

    def cpu_s(self):
        """Its CPU seconds from the start to the last poll; None without a pid."""
        return self.cpu - self.cpu0 if self.cpu0 is not None else None

    def summary(self, t_end, n):
        out = sched_summary(self.samples, t_end, n)
        if out is not None:
            out["bytes_per_segment"] = bytes_per_segment(self.tcp, t_end)
        return out


def bytes_per_segment(samples, t_end):
    """The mean payload of the TCP segments the walsender sent between the
    first and the last (time, bytes, segments) sample taken by `t_end`: about
    one pgoutput message when every send() leaves as a segment of its own,
    many when the kernel coalesces them. None without two samples."""
    inside = [s for s in samples if s[0] <= t_end]
    if len(inside) < 2 or inside[-1][2] <= inside[0][2]:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][2] - inside[0][2])


def sched_summary(samples, t_end, n):
    """The walsender's time from the first sample to the last one taken by
    `t_end`, as percent of that wall time: on a CPU, waiting for one
    (runnable on a run queue) and blocked (the rest: sleeping on the socket,
    a latch, I/O); and its voluntary and involuntary context switches per
    1,000 of the drain's `n` events. The shares are None without
    /proc/<pid>/schedstat; None altogether without two samples."""
    inside = [s for s in samples if s.t <= t_end]
    if len(inside) < 2 or inside[-1].t <= inside[0].t:
        return None
    a, b = inside[0], inside[-1]
    wall_ns = (b.t - a.t) * 1e9
    out = {"seconds": b.t - a.t, "on_cpu_pct": None, "wait_pct": None, "blocked_pct": None,
           "vol_cs_per_k": (b.voluntary - a.voluntary) / n * 1000,
           "invol_cs_per_k": (b.involuntary - a.involuntary) / n * 1000}
    if a.on_cpu_ns is not None and b.on_cpu_ns is not None:
        on, wait = b.on_cpu_ns - a.on_cpu_ns, b.wait_ns - a.wait_ns
        out.update(on_cpu_pct=100 * on / wall_ns, wait_pct=100 * wait / wall_ns,
                   blocked_pct=100 * max(0.0, wall_ns - on - wait) / wall_ns)
    return out
