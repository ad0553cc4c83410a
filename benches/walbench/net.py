"""The network a run measures across. By default none: every process on
this machine's loopback, as before. With --netns NAME (benches/run.sh --net
lan|zone, or --cc), the namespaces benches/net.sh made: PostgreSQL in one,
Kafka in another, and this driver with the systems under test in a third
(run.sh starts the driver there), with a delay on every link.

Owns where PostgreSQL and Kafka are reached, how their scripts are started
(inside their namespaces) and the run header's facts about the network:
the condition, the round trip measured, the congestion control and the
qdisc of each host."""

import os
import socket
import statistics
import subprocess
import time

from . import REPO, BenchError, log, machine
from .procs import cpu_of

STATE_DIR = os.path.join(REPO, ".walrelay-env", "bench", "net")
NET_SH = os.path.join(REPO, "benches", "net.sh")


class Net:
    def __init__(self, name=None, values=None):
        v = values or {}
        self.name = name
        self.cond = v.get("COND", "loopback")
        self.rtt_us = int(v.get("RTT_US", "0"))
        # benches/net.sh's calibration: the round trip with no delay (the
        # delay elements' own), the delay it then gave each host, and the
        # round trip it measured with it.
        self.base_rtt_us = v.get("BASE_RTT_US")
        self.delay_us = v.get("DELAY_US")
        self.setup_rtt_us = v.get("MEASURED_RTT_US")
        self.cc = v.get("CC") or machine.first_line("/proc/sys/net/ipv4/tcp_congestion_control")
        self.rate = v.get("RATE", "")
        self.pg_ns = v.get("PG_NS")
        self.kafka_ns = v.get("KAFKA_NS")
        self.relay_ns = v.get("RELAY_NS")
        self.pg_host = v.get("PG_HOST", "127.0.0.1")
        self.kafka_host = v.get("KAFKA_HOST", "127.0.0.1")

    @classmethod
    def load(cls, name):
        """The network benches/net.sh made as NAME; the driver must run in
        its relay namespace."""
        path = os.path.join(STATE_DIR, f"{name}.env")
        try:
            with open(path) as f:
                values = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
        except OSError as e:
            raise BenchError(f"--netns {name}: {path}: {e} (benches/net.sh up {name} COND makes it)") from e
        net = cls(name, values)
        mine = os.stat("/proc/self/ns/net").st_ino
        theirs = os.stat(f"/run/netns/{net.relay_ns}").st_ino
        if mine != theirs:
            raise BenchError(f"--netns {name}: the driver must run in namespace {net.relay_ns} "
                             f"(ip netns exec {net.relay_ns} ...; benches/run.sh does it)")
        return net

    @property
    def isolated(self):
        return self.name is not None

    def wrap(self, role, cmd):
        """CMD run in the namespace of ROLE (pg or kafka), with the address
        it listens on in its environment's form (scripts/pg.sh, kafka.sh)."""
        ns = {"pg": self.pg_ns, "kafka": self.kafka_ns}[role]
        if not ns or ns == self.relay_ns:
            return cmd
        return ["ip", "netns", "exec", ns, *cmd]

    def server_env(self):
        """What scripts/pg.sh and kafka.sh take to listen beyond loopback."""
        env = {}
        if self.pg_host != "127.0.0.1":
            env["WALRELAY_PG_LISTEN"] = self.pg_host
        if self.kafka_host != "127.0.0.1":
            env["WALRELAY_KAFKA_HOST"] = self.kafka_host
        return env

    def measured_rtt_us(self, port):
        """The median of 21 TCP handshakes to PostgreSQL's port: one round
        trip each (a SYN, its SYN-ACK)."""
        times = []
        for _ in range(21):
            t = time.perf_counter()
            with socket.create_connection((self.pg_host, port), timeout=5):
                times.append(time.perf_counter() - t)
        return statistics.median(times) * 1e6

    def facts(self, pg_port):
        """The header's facts: condition, measured round trip, and per host
        the congestion control, qdisc and delay (benches/net.sh describe)."""
        f = {"condition": self.cond, "rtt_us": self.rtt_us, "tcp_congestion_control": self.cc,
             "rate": self.rate or None}
        try:
            f["measured_rtt_us"] = round(self.measured_rtt_us(pg_port))
        except OSError as e:
            log(f"round trip not measured: {e}")
        if self.isolated:
            f["hosts"] = subprocess.run([NET_SH, "describe", self.name], capture_output=True,
                                        text=True).stdout.strip().splitlines()
        else:
            qdisc = subprocess.run(["tc", "qdisc", "show", "dev", "lo"], capture_output=True, text=True).stdout
            f["hosts"] = [f"host: cc {self.cc}; lo qdisc {qdisc.strip() or '?'}; delay none"]
        return f

    def link_cpu_s(self):
        """CPU seconds the delay elements (link_delay, in the servers'
        namespaces; benches/net.sh keeps their pids) have used so far: the
        links' cost, which the machine's two cores pay beside what is
        measured. None without delays."""
        if not self.isolated or self.cond == "loopback":
            return None
        total = 0.0
        for ns in (self.pg_ns, self.kafka_ns):
            try:
                with open(os.path.join(STATE_DIR, f"{ns}.link.pid")) as f:
                    total += cpu_of(int(f.read())) or 0.0
            except (OSError, ValueError):
                continue
        return round(total, 1)

    def describe(self):
        """One line for the header."""
        if not self.isolated:
            return "loopback on the host (no namespaces, no delay)"
        if self.cond == "loopback":
            return f"loopback inside namespace {self.relay_ns} (no delay)"
        return (f"{self.cond}: PostgreSQL, Kafka and the systems under test in three namespaces, "
                f"{self.rtt_us / 1000:g} ms round trip between any two asked "
                f"({self.setup_rtt_us} us measured at setup: {self.base_rtt_us} us through the delay elements "
                f"alone, plus {self.delay_us} us for which PostgreSQL's and Kafka's hosts hold what they send; "
                f"the relay's host sends without delay)"
                + (f", {self.rate} per link" if self.rate else ""))


# The run's network; replaced by use() when --netns is given.
CURRENT = Net()


def use(name):
    global CURRENT
    CURRENT = Net.load(name) if name else Net()
    return CURRENT


def pg_host():
    return CURRENT.pg_host
