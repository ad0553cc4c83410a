"""The systems under test: their names and variants, the options and
configuration each is given, and starting one on a slot.

  ceiling      pg_recvlogical, output discarded, same pgoutput options as walrelay
  walsender    benches/walsender_drain.rs: the same slot options, a client that
               only reads frames (the walsender's own rate)
  walrelay     target/release/walrelay (acks=all, idempotence, lz4)
  walrelay-eos the same in exactly-once mode ([kafka] exactly_once = true, a
               progress topic of its own per drain)
  dbz_tuned    Debezium on Kafka Connect standalone, tuned (debezium.py)
  dbz_default  the same with Debezium's and Kafka Connect's defaults
  dbz_server   Debezium Server 3.6.1 (Quarkus), for the broker drains to
               NATS JetStream and Redis Streams (broker_drains.py, dbz_server.py)

A system starts on a slot the bench made and stops when told (the
baselines stop by themselves at the end LSN); what is measured while it
runs is the workloads' business.
"""

import hashlib
import os
import re
import signal
import subprocess
import time

from . import REPO, BenchError, config, debezium, net
from .procs import cpu_of
from .schema import MESSAGE_PREFIX, MESSAGES_PUBLICATION
from .walrelay import Endpoints

SYSTEMS = ["ceiling", "walsender", "walrelay", "walrelay-eos", "dbz_tuned", "dbz_default"]
# Systems of the broker drains only (--brokers).
BROKER_ONLY_SYSTEMS = ["dbz_server"]
WALRELAYS = ("walrelay", "walrelay-eos")
# Baselines drain the slot to the end LSN and exit; they write no Kafka topic.
BASELINES = ("ceiling", "walsender")
# Drained --rounds times (median reported): seconds per round.
REPEATED = BASELINES + ("walrelay", "walrelay-eos")
# Systems whose records are transactional: counted as committed records
# (what a read_committed consumer reads), not by end offsets, which also
# count transaction markers and records not committed yet.
TRANSACTIONAL = ("walrelay-eos",)
LABELS = {
    "ceiling": "pg_recvlogical (ceiling)",
    "walsender": "walsender, minimal Rust reader",
    "walrelay": "walrelay",
    "walrelay-eos": "walrelay exactly-once",
    "dbz_tuned": f"Debezium {debezium.SHORT_VERSION} tuned",
    "dbz_default": f"Debezium {debezium.SHORT_VERSION} default",
    "dbz_server": f"Debezium Server {debezium.SHORT_VERSION}",
}
WALRELAY_PRODUCER = {"compression.type": "lz4"}
# [kafka.transactions] keys a walrelay-eos variant may set.
EOS_KEYS = ("max_events", "max_bytes", "interval_ms", "timeout_ms")
EOS_TABLE = "kafka.transactions."


class Variant:
    """A system name and its variant: `BASE[@BINARY][:KEY=VALUE...]`.

    walrelay@base                  walrelay run with the binary --walrelay-binary base=PATH
    walrelay:replication.read_coalesce_us=0
                                   a TOML override of a dotted key of the configuration
                                   the bench writes; values are TOML scalars where they
                                   parse as one ('"x"' for a string), strings otherwise
    walrelay@base:kafka.producer.linger.ms=1
                                   both (a librdkafka key is the rest of the path under
                                   [kafka.producer])
    walrelay-eos:max_events=50000  a bare key of walrelay-eos: [kafka.transactions]
    walsender:publication=bench_iu a pgoutput option of a baseline (publication is
                                   publication_names)
    dbz_server:debezium.source.max.batch.size=8192
                                   in a broker drain, a line of that system's copy of
                                   application.properties (walrelay's too)
    """

    def __init__(self, system):
        head, *kvs = system.split(":")
        self.base, _, self.binary = head.partition("@")
        self.overrides = []  # (dotted key, value)
        for kv in kvs:
            k, eq, v = kv.partition("=")
            if not k or not eq:
                raise ValueError(f"{system}: settings are KEY=VALUE, got {kv!r}")
            if self.base == "walrelay-eos" and "." not in k:
                if k not in EOS_KEYS or not v.isdigit():
                    raise ValueError(f"{system}: walrelay-eos's bare keys are {', '.join(EOS_KEYS)}=<integer>, "
                                     f"got {kv!r}")
                k = EOS_TABLE + k
            self.overrides.append((k, config.scalar(v)))
        if self.base not in SYSTEMS + BROKER_ONLY_SYSTEMS:
            raise ValueError(f"unknown system {system}; known: {', '.join(SYSTEMS + BROKER_ONLY_SYSTEMS)}")
        if self.binary and self.base not in WALRELAYS:
            raise ValueError(f"{system}: only {' and '.join(WALRELAYS)} take another binary (@LABEL)")
        if self.overrides and self.base not in WALRELAYS + BASELINES + ("dbz_server",):
            raise ValueError(f"{system}: Debezium takes no settings here")


def base_system(system):
    """`walrelay-eos@base:max_events=50000` -> `walrelay-eos`."""
    return Variant(system).base


def eos_settings(system):
    """The [kafka.transactions] settings of a walrelay-eos variant."""
    return {k[len(EOS_TABLE):]: v for k, v in Variant(system).overrides if k.startswith(EOS_TABLE)}


def label(system):
    """How tables name a system: its label, the binary and the overrides."""
    v = Variant(system)
    name = LABELS[v.base] + (f" @{v.binary}" if v.binary else "")
    if not v.overrides:
        return name
    # "pg_recvlogical (ceiling)" + settings: one parenthesis.
    if name.endswith(")"):
        name, close = name[:-1] + "; ", ")"
    else:
        name, close = name + " (", ")"

    def show(k, x):
        if v.base == "walrelay-eos" and k.startswith(EOS_TABLE) and k[len(EOS_TABLE):] in EOS_KEYS:
            return f"{k[len(EOS_TABLE):]} {x:,}"  # as before: max_events 50,000
        return f"{k}={x if isinstance(x, str) else config.value(x)}"
    return f"{name}{', '.join(show(k, x) for k, x in v.overrides)}{close}"


def slug(system):
    """A system's name as slot and topic names allow it; a long one keeps
    its head and a hash (slot names are at most 63 bytes)."""
    out = re.sub(r"[^a-z0-9]+", "_", system.lower()).strip("_")
    if len(out) > 50:
        out = out[:41] + "_" + hashlib.sha1(system.encode()).hexdigest()[:8]
    return out


# --------------------------------------------------------------------------
# What each system asks the walsender for.


def _source(*path):
    try:
        with open(os.path.join(REPO, *path)) as f:
            return f.read()
    except OSError:
        return ""


def pgoutput_options(streaming, server_version_num, publication="bench", messages=False):
    """The START_REPLICATION options walrelay sends to a server of this version
    (src/pipeline/session.rs, src/postgres/wal.rs), so the baselines decode exactly
    what walrelay asks for: protocol 1, 2 with streaming 'on' (14, 15) or 4 with
    streaming 'parallel' (16+). `messages`: logical decoding messages asked
    for whatever walrelay's source says (a message workload)."""
    def const(text, name):
        m = re.search(rf"pub const {name}: u32 = ([\d_]+);", text)
        return int(m.group(1).replace("_", "")) if m else None

    relay, source = _source("src", "pipeline", "session.rs"), _source("src", "postgres", "wal.rs")
    opts = {"proto_version": str(const(relay, "PROTO_VERSION") or 1), "publication_names": publication}
    if messages or '("messages", "true"' in relay:
        opts["messages"] = "true"
    if streaming == "off" or "streaming_option(proto_version)" not in relay:
        return opts
    for proto, since, mode in (("PARALLEL_STREAMING_PROTO_VERSION", "PARALLEL_STREAMING_MIN_SERVER_VERSION", "parallel"),
                               ("STREAMING_PROTO_VERSION", "STREAMING_MIN_SERVER_VERSION", "on")):
        version, first = const(source, proto), const(source, since)
        if version and first and server_version_num >= first:
            opts["proto_version"], opts["streaming"] = str(version), mode
            break
    return opts


def message_options(streaming, server_version_num):
    """The options walrelay sends when messages are events: the empty
    publication, messages on, and no streaming when walrelay turns it off
    for messages (src/pipeline/session.rs: a streamed message carries its
    top-level transaction's xid)."""
    if "plan.messages().is_none()" in _source("src", "pipeline", "session.rs"):
        streaming = "off"
    return pgoutput_options(streaming, server_version_num, MESSAGES_PUBLICATION, messages=True)


def slot_options(env, messages, system=None):
    """pgoutput options of the baselines (`messages`: for a message
    workload), then the variant's (walsender:publication=bench_iu:
    publication_names)."""
    if messages:
        opts = message_options(env.args.streaming, env.server_version_num)
    else:
        opts = pgoutput_options(env.args.streaming, env.server_version_num)
    for k, v in Variant(system).overrides if system else ():
        opts["publication_names" if k == "publication" else k] = config.value(v).strip('"')
    return opts


def walrelay_config(env, system, slot, topic, messages):
    """The configuration the bench gives walrelay (docs/benchmarks.md,
    Configurations), then the --walrelay-* options' TOML, then the
    variant's overrides."""
    producer = dict(WALRELAY_PRODUCER)
    for kv in filter(None, env.args.walrelay_producer.split(",")):
        k, _, v = kv.partition("=")
        producer[k.strip()] = v.strip()
    replication = {
        "slot": slot,
        # A message workload: walrelay reads messages only, from the empty
        # publication.
        "publication": MESSAGES_PUBLICATION if messages else "bench",
        "create_slot": False,
        "create_publication": False,
    }
    if env.args.streaming != "auto":
        replication["streaming"] = env.args.streaming == "on"
    cfg = {
        "postgres": {"host": net.pg_host(), "port": env.pg_port, "user": "postgres", "dbname": "bench"},
        "replication": replication,
    }
    if messages:
        cfg["outbox"] = {"source": "messages", "message_prefixes": [MESSAGE_PREFIX]}
    cfg["router"] = {"route_topic_replacement": topic}
    cfg["kafka"] = {"bootstrap_servers": env.bootstrap}
    if base_system(system) == "walrelay-eos":
        # Exactly-once, and a progress topic of its own per drain (the slot
        # is the pipeline, so the progress starts empty).
        cfg["kafka"]["exactly_once"] = True
        cfg["kafka"]["transactions"] = {"progress_topic": progress_topic(env, slot)}
    cfg["kafka"]["producer"] = producer
    cfg["metrics"] = {"listen": "127.0.0.1:0"}
    config.merge(cfg, env.args.walrelay_replication, "replication")
    config.merge(cfg, env.args.walrelay_extra)
    for k, v in Variant(system).overrides:
        config.set_dotted(cfg, k, v)
    return config.dump(cfg)


def progress_topic(env, slot):
    """walrelay-eos's progress topic for a drain on `slot` (walrelay makes it)."""
    return f"bench.{env.stamp}.progress.{slot}"


def walrelay_binary(env, system):
    """The binary of a walrelay system: --walrelay, or --walrelay-binary's
    for walrelay@LABEL."""
    label_ = Variant(system).binary
    if not label_:
        return env.args.walrelay
    if label_ not in env.args.walrelay_binaries:
        raise BenchError(f"{system}: no --walrelay-binary {label_}=PATH")
    return env.args.walrelay_binaries[label_]


# --------------------------------------------------------------------------
# Starting them.


class Running:
    """A started system: its process, how to stop it, its log, and for
    walrelay its endpoints."""

    def __init__(self, system, pid, stop, alive, logfile, popen=None, endpoints=None):
        self.system, self.pid, self.stop, self.alive, self.log = system, pid, stop, alive, logfile
        self.popen = popen
        self.endpoints = endpoints


def start_system(env, system, slot, topic, run_dir, end_lsn=None, messages=False):
    """Starts `system` on `slot` (a baseline until `end_lsn`; walrelay and
    Debezium into `topic`); its files go to `run_dir`."""
    os.makedirs(run_dir, exist_ok=True)
    base = base_system(system)
    if base == "ceiling":
        cmd = ["pg_recvlogical", "-h", net.pg_host(), "-p", str(env.pg_port), "-U", "postgres", "-d", "bench",
               "--slot", slot, "--start", "-f", "/dev/null", "-E", end_lsn, "--no-loop"]
        for k, v in slot_options(env, messages, system).items():
            cmd += ["-o", f"{k}={v}"]
        return _start_baseline(env, system, cmd, os.path.join(run_dir, "pg_recvlogical.log"), subprocess.DEVNULL)
    if base == "walsender":
        if not env.args.walsender_drain:
            raise BenchError("no walsender_drain binary: run through benches/run.sh or pass --walsender-drain")
        cmd = [env.args.walsender_drain, net.pg_host(), str(env.pg_port), "postgres", "bench", slot, end_lsn]
        cmd += [f"{k}={v}" for k, v in slot_options(env, messages, system).items()]
        # Its one summary line (messages, bytes, seconds) goes to stdout.
        return _start_baseline(env, system, cmd, os.path.join(run_dir, "walsender_drain.log"),
                               open(os.path.join(run_dir, "walsender_drain.out"), "w"))
    if base in WALRELAYS:
        return _start_walrelay(env, system, slot, topic, run_dir, messages)
    return _start_debezium(env, system, slot, topic, run_dir, messages)


def _start_baseline(env, system, cmd, logf, stdout):
    p = subprocess.Popen(cmd, stdout=stdout, stderr=open(logf, "w"))
    env.procs.append(("popen", p))
    return Running(system, p.pid, lambda: None, lambda: p.poll() is None, logf, p)


def _start_walrelay(env, system, slot, topic, run_dir, messages):
    cfg = os.path.join(run_dir, "walrelay.toml")
    with open(cfg, "w") as f:
        f.write(walrelay_config(env, system, slot, topic, messages))
    logf = os.path.join(run_dir, "walrelay.log")
    p = subprocess.Popen([walrelay_binary(env, system), "run", "--config", cfg],
                         stdout=subprocess.DEVNULL, stderr=open(logf, "w"))
    env.procs.append(("popen", p))

    def stop():
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
    return Running(system, p.pid, stop, lambda: p.poll() is None, logf, p, Endpoints(logf))


def _start_debezium(env, system, slot, topic, run_dir, messages):
    dbz_dir = debezium.start(env.bootstrap, env.pg_port, system, slot, topic, run_dir, messages)
    env.procs.append(("dbz", dbz_dir))
    with open(os.path.join(dbz_dir, "pid")) as f:
        pid = int(f.read().strip())
    return Running(system, pid, lambda: debezium.stop(dbz_dir), lambda: cpu_of(pid) is not None,
                   os.path.join(dbz_dir, "log"))


def tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def wait_active(env, r, slot, timeout):
    """Waits until `slot` is active (the system's START_REPLICATION was
    accepted): (that moment, the walsender's pid), the walsender on CPU 0
    when pinned."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        active, wpid = env.slot_state(slot)
        if active:
            t = time.time()
            env.pin_walsender(wpid)
            return t, wpid
        if not r.alive():
            raise BenchError(f"{r.system} exited before streaming:\n{tail(r.log)}")
        time.sleep(0.01)
    raise BenchError(f"{r.system}: slot {slot} not active within {timeout} s:\n{tail(r.log)}")
