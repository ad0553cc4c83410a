#!/usr/bin/env python3
"""End-to-end benchmark driver for walrelay; run it through benches/run.sh.

Starts its own PostgreSQL and Kafka under .walrelay-env/bench (scripts/pg.sh,
scripts/kafka.sh), then for each workload creates one logical slot per system
at the same position, writes the backlog once and drains it with every system
in turn:

  ceiling      pg_recvlogical, output discarded, same pgoutput options as walrelay
  walsender    benches/walsender_drain.rs: the same slot options, a client that
               only reads frames (the walsender's own rate; pg_recvlogical's
               client side slows its walsender, see docs/benchmarks.md)
  walrelay     target/release/walrelay (acks=all, idempotence, lz4)
  walrelay-eos the same in exactly-once mode ([kafka] exactly_once = true, a
               progress topic of its own per drain); its records count once
               committed, as a read_committed consumer sees them. Variants:
               walrelay-eos:max_events=50000:interval_ms=200 sets those
               [kafka.transactions] keys (A/B runs of the batching)
  dbz_tuned    Debezium 3.6.1.Final on Kafka Connect standalone, tuned
  dbz_default  the same with Debezium's and Kafka Connect's defaults

W5 is W1's backlog written as logical decoding messages instead of outbox
rows: each transaction is one outbox_emit() (deploy/postgresql/outbox_emit.sql,
pg_logical_emit_message(true, 'outbox', <the event as a JSON object>)), on an
empty publication; walrelay reads it with [outbox] source = "messages",
Debezium with its decode chain (DecodeLogicalDecodingMessageContent, then the
EventRouter), the baselines with pgoutput's messages 'true'. Before its
backlog, the writer's cost of the two styles: pgbench transactions per second
(same clients) writing single-event transactions as a table outbox (insert +
delete) and as a message outbox, interleaved rounds, with PostgreSQL's CPU
and WAL per transaction and the VACUUM the table style leaves behind.

W1/W2/W4/W5 are backlog drains: the clock starts when the system's slot turns
active (START_REPLICATION accepted) and stops at the Kafka LogAppendTime of the
last record (for the two baselines: when they exit at the end LSN). W3 is an
open-loop load (pgbench -R) at fractions of the W1 ceiling; latency is the
record's LogAppendTime minus pg_xact_commit_timestamp of the transaction whose
xid is encoded in the event id (one clock: the same machine).

Variants measure one lever at a time, before and after in the same run
(drains, interleaved with the other systems' rounds, and W3):
walrelay@LABEL is the binary of --walrelay-binary LABEL=PATH (benches/run.sh
--baseline-rev REV builds a git revision); walrelay:KEY=VALUE[:KEY=VALUE]
overrides dotted keys of the configuration the bench writes (TOML scalars;
under kafka.producer the rest of the path is the librdkafka key), e.g.
walrelay@base:replication.read_coalesce_us=0; walsender:publication=bench_iu
gives a baseline another pgoutput option. The publication bench_iu publishes
the outbox's inserts and updates only. W3 also reports walrelay's latency by
stage: its walrelay_stage_seconds histograms scraped before and after each
level, percentiles interpolated inside the bucket. --pin on puts the
walsender of the system measured alone on CPU 0 and everything else on CPU 1;
--pin both measures every system both ways from the same backlogs.

Libraries (benches/venv.sh's virtualenv, pinned): psycopg for PostgreSQL,
confluent-kafka for topics, end offsets and reading records back
(read_committed for the exactly-once system), matplotlib for the plots. One
Kafka reader stays hand-made: the COMMIT markers of transactional topics,
whose LogAppendTime is when a read_committed consumer can see a record, are
control records that every client library hides, so KafkaCommitted reads the
record-batch headers (Fetch v4, ListOffsets v2) itself.
"""

import argparse
import bisect
import datetime
import hashlib
import io
import json
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import tomllib
import urllib.request

import psycopg
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import benchlib
from benchlib import BenchError, Sched, cpu_of, log, run, sched_of, tcp_sent

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(REPO, "scripts")
BENCH_DIR = os.path.join(REPO, ".walrelay-env", "bench")
TICK = os.sysconf("SC_CLK_TCK")
PARTITIONS = 6
SYSTEMS = ["ceiling", "walsender", "walrelay", "walrelay-eos", "dbz_tuned", "dbz_default"]
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
    "dbz_tuned": "Debezium 3.6.1 tuned",
    "dbz_default": "Debezium 3.6.1 default",
}
# Tuned Debezium's JVM: a fixed 1 GiB heap and the throughput collector.
# Default Debezium's JVM: what kafka-run-class.sh gives connect-standalone.sh.
DBZ_HEAP = {
    "dbz_tuned": "-Xms1g -Xmx1g -XX:+UseParallelGC",
    "dbz_default": "-Xms256m -Xmx2g -XX:+UseG1GC -XX:MaxGCPauseMillis=20 "
    "-XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent",
}
# Producer settings on tuned Debezium's worker: walrelay's (acks=all,
# idempotence, lz4, linger.ms=5) and librdkafka's default batch.size.
DBZ_TUNED_WORKER = {
    "producer.acks": "all",
    "producer.enable.idempotence": "true",
    "producer.max.in.flight.requests.per.connection": "5",
    "producer.compression.type": "lz4",
    "producer.linger.ms": "5",
    "producer.batch.size": "1000000",
}
DBZ_TUNED_CONNECTOR = {
    "max.batch.size": "16384",
    "max.queue.size": "65536",
    "poll.interval.ms": "10",
    # Debezium's own outbox example: a delete needs no tombstone.
    "tombstones.on.delete": "false",
}
WALRELAY_PRODUCER = {"compression.type": "lz4"}
# --pin: the walsender of the system measured alone on one CPU, everything
# else on the other.
WALSENDER_CPU, OTHERS_CPU = 0, 1
PIN_MODES = {"off": (False,), "on": (True,), "both": (False, True)}
# [kafka.transactions] keys a walrelay-eos variant may set.
EOS_KEYS = ("max_events", "max_bytes", "interval_ms", "timeout_ms")
# Backlog drains, and those written as logical decoding messages (no outbox
# rows): their systems read the empty publication, with messages on.
DRAINS = ("W1", "W2", "W4", "W5")
MESSAGE_WORKLOADS = ("W5",)
MESSAGES_PUBLICATION = "bench_messages"
MESSAGE_PREFIX = "outbox"
# The users' helper, installed into the bench database as it is shipped.
EMIT_SQL = os.path.join(REPO, "deploy", "postgresql", "outbox_emit.sql")
# The writer's cost (before W5): one single-event transaction per pgbench
# transaction, each style as a function call so both pay one round trip.
WRITERS = {
    "table": ("insert + delete of an outbox row (W1's transaction)", "SELECT bench_write_table(:i);"),
    "message": ("outbox_emit(), one pg_logical_emit_message (W5's transaction)", "SELECT bench_write_message(:i);"),
}


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
                k, v = f"kafka.transactions.{k}", v
            self.overrides.append((k, toml_scalar(v)))
        if self.base not in SYSTEMS:
            raise ValueError(f"unknown system {system}; known: {', '.join(SYSTEMS)}")
        if self.binary and self.base not in WALRELAYS:
            raise ValueError(f"{system}: only {' and '.join(WALRELAYS)} take another binary (@LABEL)")
        if self.overrides and self.base not in WALRELAYS + BASELINES:
            raise ValueError(f"{system}: Debezium takes no settings here")


def base_system(system):
    """`walrelay-eos@base:max_events=50000` -> `walrelay-eos`."""
    return Variant(system).base


def eos_settings(system):
    """The [kafka.transactions] settings of a walrelay-eos variant."""
    pre = "kafka.transactions."
    return {k[len(pre):]: v for k, v in Variant(system).overrides if k.startswith(pre)}


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
    eos = "kafka.transactions."

    def show(k, x):
        if v.base == "walrelay-eos" and k.startswith(eos) and k[len(eos):] in EOS_KEYS:
            return f"{k[len(eos):]} {x:,}"  # as before: max_events 50,000
        return f"{k}={x if isinstance(x, str) else toml_value(x)}"
    return f"{name}{', '.join(show(k, x) for k, x in v.overrides)}{close}"


def slug(system):
    """A system's name as slot and topic names allow it; a long one keeps
    its head and a hash (slot names are at most 63 bytes)."""
    out = re.sub(r"[^a-z0-9]+", "_", system.lower()).strip("_")
    if len(out) > 50:
        out = out[:41] + "_" + hashlib.sha1(system.encode()).hexdigest()[:8]
    return out


# --------------------------------------------------------------------------
# walrelay's configuration: a dict written as TOML, so that a variant can
# override any dotted key.

# Tables whose keys are free-form dotted names (librdkafka's), string-valued.
FREE_FORM_TABLES = ("kafka.producer",)


def toml_scalar(text):
    """`0` -> 0, `true` -> True, `"x"` -> "x", anything else -> the text."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return json.dumps(str(v))  # a TOML basic string is a JSON string here


def toml_key(k):
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def set_dotted(cfg, key, value):
    """cfg[a][b][c] = value for key a.b.c; under a free-form table the rest
    of the path is one key (kafka.producer.linger.ms -> "linger.ms")."""
    parts, path, t = key.split("."), [], cfg
    while len(parts) > 1 and ".".join(path) not in FREE_FORM_TABLES:
        path.append(parts.pop(0))
        t = t.setdefault(path[-1], {})
        if not isinstance(t, dict):
            raise BenchError(f"{key}: {'.'.join(path)} is a value, not a table")
    t[".".join(parts)] = str(value) if ".".join(path) in FREE_FORM_TABLES and not isinstance(value, str) else value


def toml_dump(cfg, raw=None):
    """TOML text of `cfg` (nested dicts: tables); `raw` maps a table's
    dotted name to TOML lines appended to it (the --walrelay-* options)."""
    out = []

    def table(name, t):
        out.append(f"[{name}]" if name else "")
        out.extend(f"{toml_key(k)} = {toml_value(v)}" for k, v in t.items() if not isinstance(v, dict))
        if raw and raw.get(name):
            out.append(raw[name])
        for k, v in t.items():
            if isinstance(v, dict):
                table(f"{name}.{toml_key(k)}" if name else toml_key(k), v)
    table("", cfg)
    return "\n".join(out).lstrip("\n") + "\n" + ((raw or {}).get(None) or "") + "\n"


# --------------------------------------------------------------------------
# PostgreSQL: psycopg, autocommit (the load procedures COMMIT inside).


class Pg:
    """One PostgreSQL session (trust auth on loopback), autocommit."""

    def __init__(self, port, dbname, user="postgres"):
        try:
            self.conn = psycopg.connect(host="127.0.0.1", port=port, dbname=dbname, user=user, autocommit=True,
                                        application_name="walrelay-bench")
        except psycopg.Error as e:
            raise BenchError(f"postgres connect: {e}") from e

    def query(self, sql, params=None):
        """Runs SQL (several statements when there are no parameters);
        returns the rows of the last result, as Python values."""
        try:
            cur = self.conn.execute(sql, params)
            return cur.fetchall() if cur.description else []
        except psycopg.Error as e:
            raise BenchError(f"{str(e).strip()} (in: {sql[:200]})") from e

    def value(self, sql, params=None):
        rows = self.query(sql, params)
        return rows[0][0] if rows else None

    def copy_rows(self, sql):
        """The rows of `COPY (...) TO STDOUT`, as tuples of text."""
        with self.conn.cursor() as cur, cur.copy(sql) as copy:
            yield from copy.rows()

    def close(self):
        self.conn.close()


# --------------------------------------------------------------------------
# Kafka: confluent-kafka for end offsets and reading records back; the
# COMMIT markers of transactional topics from the record-batch headers
# (KafkaCommitted: client libraries hide control records).


class KafkaOffsets:
    """A topic's end offsets (high watermarks) on the single local broker."""

    def __init__(self, bootstrap):
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "walrelay-bench-offsets",
                                  "enable.auto.commit": False})

    def count(self, topic, partitions=PARTITIONS):
        """Sum of the end offsets of the topic's partitions."""
        total = 0
        for p in range(partitions):
            try:
                _, high = self.consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)
            except KafkaException as e:
                raise BenchError(f"end offsets of {topic}[{p}]: {e}") from e
            total += high
        return total

    def close(self):
        self.consumer.close()


def read_records(bootstrap, topic, expect, headers=False, committed=False, timeout=15):
    """(LogAppendTime ms, id header or None, partition, offset) of the
    first `expect` records of `topic` from the beginning, with a consumer
    of no group; `committed`: read_committed. Stops after `timeout` s
    without a new record."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "walrelay-bench-read", "enable.auto.commit": False,
                  "isolation.level": "read_committed" if committed else "read_uncommitted",
                  "fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": 16 << 20})
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        out, idle_since = [], time.time()
        while len(out) < expect and time.time() - idle_since < timeout:
            msgs = c.consume(num_messages=10000, timeout=1.0)
            for m in msgs:
                if m.error():
                    raise BenchError(f"reading {topic}: {m.error()}")
                hid = None
                if headers:
                    hid = next((v.decode() for k, v in (m.headers() or []) if k == "id" and v), None)
                out.append((m.timestamp()[1], hid, m.partition(), m.offset()))
            if msgs:
                idle_since = time.time()
        return out[:expect]
    finally:
        c.close()


def zigzag(data, pos):
    """A Kafka varint (zigzag-encoded) at `pos`: (value, next position)."""
    shift = value = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7


class KafkaCommitted:
    """What a read_committed consumer of a transactional topic gets, from the
    record-batch headers alone (Fetch v4, isolation_level read_committed, so
    nothing past the last stable offset; batches are never decompressed):
    the count of committed data records, and each committed transaction's
    marker (its offset and LogAppendTime), the moment its records became
    visible. Data batches wait, per partition and producer, for their
    producer's next marker: COMMIT counts them, ABORT drops them. End
    offsets would count the markers (one per partition per transaction) and
    records not committed yet."""

    def __init__(self, bootstrap, topic, partitions=PARTITIONS):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        self.rf = self.sock.makefile("rb")
        self.corr = 0
        self.topic = topic
        self.partitions = partitions
        self.next = dict.fromkeys(range(partitions), 0)
        self.pending = {}  # (partition, producer id) -> [(count, first ts ms)]
        self.committed = 0
        self.aborted = 0
        self.first_ts = None
        # partition -> [(marker offset, marker ts ms, producer id)], ascending
        self.markers = {p: [] for p in range(partitions)}
        self.marker_ts_types = set()

    def _request(self, api_key, version, body):
        self.corr += 1
        client = b"walrelay-bench"
        head = struct.pack(">hhih", api_key, version, self.corr, len(client)) + client
        self.sock.sendall(struct.pack(">i", len(head) + len(body)) + head + body)
        size = struct.unpack(">i", self.rf.read(4))[0]
        data = self.rf.read(size)
        if struct.unpack_from(">i", data, 0)[0] != self.corr:
            raise BenchError("kafka: response out of order")
        return data

    def stable_offsets(self):
        """Sum of the partitions' last stable offsets (ListOffsets v2,
        read_committed): an upper bound of the committed records."""
        name = self.topic.encode()
        body = struct.pack(">ibi", -1, 1, 1) + struct.pack(">h", len(name)) + name
        body += struct.pack(">i", self.partitions)
        for p in range(self.partitions):
            body += struct.pack(">iq", p, -1)
        data = self._request(2, 2, body)
        pos = 8  # correlation id, throttle time
        total = 0
        (ntopics,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(ntopics):
            (nlen,) = struct.unpack_from(">h", data, pos)
            pos += 2 + nlen
            (nparts,) = struct.unpack_from(">i", data, pos)
            pos += 4
            for _ in range(nparts):
                part, err, _ts, off = struct.unpack_from(">ihqq", data, pos)
                pos += 22
                if err:
                    raise BenchError(f"ListOffsets {self.topic}[{part}]: kafka error code {err}")
                total += off
        return total

    def scan(self):
        """Reads every batch up to the last stable offset not read yet."""
        name = self.topic.encode()
        while True:
            body = struct.pack(">iiiib", -1, 0, 0, 64 << 20, 1) + struct.pack(">ih", 1, len(name)) + name
            body += struct.pack(">i", self.partitions)
            for p in range(self.partitions):
                body += struct.pack(">iqi", p, self.next[p], 16 << 20)
            data = self._request(1, 4, body)
            pos = 8  # correlation id, throttle time
            progressed = False
            (ntopics,) = struct.unpack_from(">i", data, pos)
            pos += 4
            for _ in range(ntopics):
                (nlen,) = struct.unpack_from(">h", data, pos)
                pos += 2 + nlen
                (nparts,) = struct.unpack_from(">i", data, pos)
                pos += 4
                for _ in range(nparts):
                    part, err, _hw, _lso = struct.unpack_from(">ihqq", data, pos)
                    pos += 22
                    if err:
                        raise BenchError(f"Fetch {self.topic}[{part}]: kafka error code {err}")
                    (naborted,) = struct.unpack_from(">i", data, pos)
                    pos += 4 + max(0, naborted) * 16
                    (size,) = struct.unpack_from(">i", data, pos)
                    pos += 4
                    if size > 0:
                        progressed |= self._batches(part, data, pos, pos + size)
                        pos += size
            if not progressed:
                return

    def _batches(self, part, data, pos, end):
        progressed = False
        while pos + 61 <= end:
            base, length = struct.unpack_from(">qi", data, pos)
            if pos + 12 + length > end:
                break  # a partial batch at the end of the response
            attrs, last_delta, _base_ts, max_ts, pid = struct.unpack_from(">hiqqq", data, pos + 21)
            (count,) = struct.unpack_from(">i", data, pos + 57)
            nxt = base + last_delta + 1
            if nxt > self.next[part]:
                self.next[part] = nxt
                progressed = True
                if attrs & 0x20:  # a control batch: one uncompressed record
                    r = pos + 61
                    _len, r = zigzag(data, r)
                    r += 1  # attributes
                    _ts, r = zigzag(data, r)
                    _off, r = zigzag(data, r)
                    _klen, r = zigzag(data, r)
                    _version, kind = struct.unpack_from(">hh", data, r)
                    waiting = self.pending.pop((part, pid), [])
                    if kind == 1:
                        self.committed += sum(c for c, _ in waiting)
                        for _, ts in waiting:
                            self.first_ts = ts if self.first_ts is None else min(self.first_ts, ts)
                        self.markers[part].append((base, max_ts, pid))
                        self.marker_ts_types.add("LogAppendTime" if attrs & 0x08 else "CreateTime")
                    else:
                        self.aborted += sum(c for c, _ in waiting)
                elif attrs & 0x10:
                    self.pending.setdefault((part, pid), []).append((count, max_ts))
                else:
                    self.committed += count
            pos += 12 + length
        return progressed

    def count(self):
        """Committed data records; fetches only once the stable offsets say
        there can be enough of them since the last look."""
        if self.stable_offsets() > sum(self.next.values()):
            self.scan()
        return self.committed

    def last_commit_ms(self):
        """LogAppendTime of the last COMMIT marker (the last record visible)."""
        ts = [m[1] for ms in self.markers.values() for m in ms]
        return max(ts) if ts else None

    def visible_ms(self, part, offset):
        """When the record at `offset` of `part` became visible to a
        read_committed consumer: its transaction's COMMIT marker."""
        ms = self.markers.get(part, [])
        i = bisect.bisect_right(ms, (offset, float("inf")))
        return ms[i][1] if i < len(ms) else None

    def close(self):
        self.sock.close()


# --------------------------------------------------------------------------
# Processes: CPU seconds and peak RSS from /proc.


def children_of():
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    return kids


def tree(pid):
    kids, out, todo = children_of(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def set_affinity(pid, cpus):
    """Every thread of `pid` on `cpus` (`taskset -a -p`); a thread or
    process that is gone is skipped."""
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cpus)
        except ProcessLookupError:
            pass


def tree_cpu(pid):
    return sum(c for c in (cpu_of(p) for p in tree(pid)) if c is not None)


def hwm_kb(pid):
    """VmHWM of one process, KiB (0 if gone). Unlike getrusage's
    ru_maxrss, which keeps the high-water mark of the forked Python from
    before the exec, VmHWM belongs to the running program."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_hwm_kb(pid):
    """Sum of VmHWM over the process tree, KiB."""
    total = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


class SchedTrace:
    """The walsender's scheduler counters through a drain: read when the
    drain starts and at every poll (every 10 ms), kept, and cut at the
    drain's end once it is known (for walrelay and Debezium that is the last
    record's append time, which comes after the loop that waits for it)."""

    EVERY = 0.01
    # Its socket's counters (`ss`, a process to start) less often.
    TCP_EVERY = 0.5

    def __init__(self, pid):
        self.pid = pid
        self.samples = []
        self.tcp = []
        self.poll()

    def poll(self):
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


# --------------------------------------------------------------------------
# Where the CPU goes: `perf record -a` (software clock, so it works on
# virtual machines without hardware counters) while a system drains or a W3
# level runs, then each sample is charged to a part of the pipeline.

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


def threads_of(pids):
    """Thread ids of `pids` (and their children), as they are now."""
    out = set()
    for pid in pids:
        for p in tree(pid):
            try:
                out.update(int(t) for t in os.listdir(f"/proc/{p}/task"))
            except OSError:
                pass
    return out


def finish_profile(prof, env, sut_threads, ws_pid, run_dir, pids):
    """Stops `prof`, writes its breakdown (the system under test is
    `sut_threads`, the walsender `ws_pid`) and the hottest symbols of `pids`
    (name -> pid) next to the run's logs, returns the breakdown."""
    if not prof or not prof.stop():
        return None
    threads = {t: "broker" for t in threads_of([env.broker_pid])}
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


# --------------------------------------------------------------------------
# The environment.


class Env:
    def __init__(self, args, out_dir):
        self.args = args
        self.out = out_dir
        self.pg_dir = os.path.join(BENCH_DIR, "pg")
        self.kafka_dir = os.path.join(BENCH_DIR, "kafka")
        self.procs = []  # (kind, handle) to stop on exit
        self.txn_views = {}  # topic -> KafkaCommitted
        self.pinned = False  # --pin: the current mode (set_pinned)
        self.all_cpus = os.sched_getaffinity(0)
        # Topics are named after the run: a kept broker may hold older ones.
        self.stamp = os.path.basename(out_dir).lower()

    # -- servers
    def start(self):
        os.makedirs(BENCH_DIR, exist_ok=True)
        for d in (os.path.join(REPO, ".walrelay-env"), BENCH_DIR):
            os.chmod(d, 0o755)
        log("starting PostgreSQL and Kafka under " + BENCH_DIR)
        run([f"{SCRIPTS}/pg.sh", "start", self.pg_dir])
        # A 1M-row transaction and a 1M-transaction backlog: no checkpoint
        # storm in the middle of a drain, decoding memory at its default.
        run([f"{SCRIPTS}/pg.sh", "conf", self.pg_dir, "max_wal_size=16GB", "checkpoint_timeout=30min",
             "shared_buffers=256MB", "wal_sender_timeout=0"], stdout=subprocess.DEVNULL)
        run([f"{SCRIPTS}/kafka.sh", "start", self.kafka_dir])
        with open(os.path.join(self.pg_dir, "port")) as f:
            self.pg_port = int(f.read().strip())
        self.bootstrap = run([f"{SCRIPTS}/kafka.sh", "bootstrap", self.kafka_dir],
                             capture_output=True, text=True).stdout.strip()
        with open(os.path.join(self.kafka_dir, "pid")) as f:
            self.broker_pid = int(f.read().strip())
        with open(os.path.join(SCRIPTS, "kafka.sh")) as f:
            version = re.search(r"^KAFKA_VERSION=(\S+)", f.read(), re.M).group(1)
        self.kafka_version = version
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin = Pg(self.pg_port, "postgres")
        self.server_version_num = int(admin.value("SHOW server_version_num"))
        admin.query("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                    "WHERE slot_name LIKE 'bench\\_%' AND NOT active")
        admin.query("DROP DATABASE IF EXISTS bench WITH (FORCE)")
        admin.query("CREATE DATABASE bench")
        admin.close()
        self.db = Pg(self.pg_port, "bench")
        self.db.query(SCHEMA_SQL.replace("@NOTE@", str(self.args.note_len)))
        with open(EMIT_SQL) as f:
            self.db.query(f.read())
        self.db.query(LOAD_MESSAGES_SQL)
        self.offsets = KafkaOffsets(self.bootstrap)

    # -- CPU pinning (--pin)
    def set_pinned(self, pinned):
        """Pinned: PostgreSQL (the postmaster, whose forked backends inherit
        it, and every process it has now), the broker's JVM (every thread,
        as `taskset -a -p` does) and the bench itself (so everything it
        starts from now: the system under test, pgbench, perf) on CPU 1;
        the walsender of the system measured moves to CPU 0 as soon as it
        shows (pin_walsender). Unpinned: every CPU for all of them."""
        if pinned == self.pinned:
            return
        cpus = {OTHERS_CPU} if pinned else self.all_cpus
        with open(os.path.join(self.pg_dir, "data", "postmaster.pid")) as f:
            pm = int(f.readline())
        for pid in tree(pm) + tree(self.broker_pid) + [os.getpid()]:
            set_affinity(pid, cpus)
        self.pinned = pinned
        log("pinned: walsender alone on CPU 0, everything else on CPU 1" if pinned else "unpinned: every CPU")

    def pin_walsender(self, ws_pid):
        if self.pinned and ws_pid:
            set_affinity(ws_pid, {WALSENDER_CPU})

    def stop(self):
        if self.args.keep_servers and self.pinned:
            try:
                self.set_pinned(False)
            except OSError:
                pass
        # Kafka clients first: they would reconnect to a stopped broker.
        for c in list(self.txn_views.values()) + [getattr(self, "offsets", None)]:
            if c is not None:
                c.close()
        self.txn_views, self.offsets, self.admin = {}, None, None
        for kind, h in reversed(self.procs):
            try:
                if kind == "popen" and h.poll() is None:
                    h.kill()
                    h.wait(10)
                elif kind == "dbz":
                    run([f"{SCRIPTS}/debezium.sh", "stop", h], check=False,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            except Exception:  # noqa: BLE001 - best effort on the way out
                pass
        if self.args.keep_servers:
            return
        run([f"{SCRIPTS}/kafka.sh", "stop", self.kafka_dir], check=False,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        run([f"{SCRIPTS}/pg.sh", "stop", self.pg_dir], check=False,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    # -- objects
    def create_topic(self, topic):
        """A topic of PARTITIONS partitions whose records the broker stamps
        on append (LogAppendTime); waits until the broker's metadata has it."""
        fut = self.admin.create_topics([NewTopic(topic, PARTITIONS, 1,
                                                 config={"message.timestamp.type": "LogAppendTime"})])[topic]
        try:
            fut.result(timeout=60)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise BenchError(f"creating {topic}: {e}") from e
        deadline = time.time() + 30
        while time.time() < deadline:
            md = self.admin.list_topics(topic, timeout=10).topics.get(topic)
            if md and not md.error and len(md.partitions) == PARTITIONS:
                return
            time.sleep(0.1)
        raise BenchError(f"topic {topic} not in the broker's metadata 30 s after its creation")

    def create_slot(self, slot):
        self.db.query("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))

    def drop_slots(self, prefix):
        for _ in range(100):
            rows = self.db.query("SELECT slot_name, active FROM pg_replication_slots WHERE slot_name LIKE %s",
                                 (prefix.replace("_", "\\_") + "%",))
            if not rows:
                return
            for name, active in rows:
                if not active:
                    self.db.query("SELECT pg_drop_replication_slot(%s)", (name,))
            time.sleep(0.1)
        raise BenchError(f"slots {prefix}* still active after 10 s")

    def slot_state(self, slot):
        rows = self.db.query("SELECT active, active_pid FROM pg_replication_slots WHERE slot_name = %s", (slot,))
        if not rows:
            raise BenchError(f"slot {slot} is gone")
        return rows[0][0], rows[0][1]

    # -- reading records back
    def read_topic(self, topic, expect, headers=False, committed=False):
        """(LogAppendTime ms, id header or None, partition, offset) of every
        record of the topic; `committed`: as a read_committed consumer reads
        it (records of transactions not committed are not read)."""
        return read_records(self.bootstrap, topic, expect, headers, committed)

    def committed(self, topic):
        """The read_committed view of a transactional topic, kept between looks."""
        c = self.txn_views.get(topic)
        if c is None:
            c = self.txn_views[topic] = KafkaCommitted(self.bootstrap, topic)
        return c

    def count(self, system, topic):
        """Records of `topic` a consumer can read: committed ones for a
        transactional system, end offsets otherwise."""
        if base_system(system) in TRANSACTIONAL:
            return self.committed(topic).count()
        return self.offsets.count(topic)

    def committed_progress(self, system, run_dir):
        """Committed records of the progress topic a walrelay-eos run wrote
        (named in its configuration): one per Kafka transaction."""
        try:
            with open(os.path.join(run_dir, "walrelay.toml")) as f:
                topic = re.search(r'progress_topic = "([^"]+)"', f.read()).group(1)
            view = KafkaCommitted(self.bootstrap, topic, partitions=1)
            view.scan()
            view.close()
            return view.committed
        except (OSError, AttributeError, BenchError) as e:
            log(f"{system}: progress topic not read: {e}")
            return None

    def forget(self, topic):
        c = self.txn_views.pop(topic, None)
        if c:
            c.close()

    def commit_times_us(self, lo, hi):
        """xid -> commit time (Unix µs) for xids lo..hi (COPY)."""
        sql = (f"COPY (SELECT x, (extract(epoch FROM pg_xact_commit_timestamp((x % 4294967296)::text::xid))"
               f" * 1000000)::bigint FROM generate_series({int(lo)}::bigint, {int(hi)}::bigint) x"
               f" WHERE pg_xact_commit_timestamp((x % 4294967296)::text::xid) IS NOT NULL) TO STDOUT")
        return {int(x): int(t) for x, t in self.db.copy_rows(sql)}


SCHEMA_SQL = r"""
CREATE TABLE outbox (
    id uuid PRIMARY KEY,
    aggregatetype varchar(255) NOT NULL,
    aggregateid varchar(255) NOT NULL,
    type varchar(255) NOT NULL,
    payload jsonb
);
CREATE PUBLICATION bench FOR TABLE outbox;
-- The same table without deletes (and truncates): the walsender sends no
-- message for the outbox DELETE of W1/W3/W5-style transactions. For
-- variants: walrelay:replication.publication=bench_iu, walsender:publication=bench_iu.
CREATE PUBLICATION bench_iu FOR TABLE outbox WITH (publish = 'insert, update');
-- About 300 bytes of JSON text, as jsonb_out writes it.
CREATE FUNCTION bench_payload(i bigint, x bigint) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object('orderId', i, 'customer', 'customer-' || (i % 1000), 'currency', 'EUR',
    'total', i % 100000, 'xid', x, 'note', repeat('x', @NOTE@))
$$;
-- W1: single-event transactions, each inserting and deleting its outbox row.
CREATE PROCEDURE load_single(n int) LANGUAGE plpgsql AS $$
DECLARE i int; u uuid;
BEGIN
  FOR i IN 1..n LOOP
    u := gen_random_uuid();
    INSERT INTO outbox VALUES (u, 'Order', 'order-' || (i % 1000), 'OrderCreated', bench_payload(i, 0));
    DELETE FROM outbox WHERE id = u;
    COMMIT;
  END LOOP;
END $$;
-- W2: insert-only transactions of per_txn rows.
CREATE PROCEDURE load_batched(n int, per_txn int) LANGUAGE plpgsql AS $$
DECLARE i int := 0;
BEGIN
  WHILE i < n LOOP
    INSERT INTO outbox SELECT gen_random_uuid(), 'Order', 'order-' || (g % 1000), 'OrderCreated',
      bench_payload(g, 0) FROM generate_series(i + 1, least(i + per_txn, n)) g;
    COMMIT;
    i := i + per_txn;
  END LOOP;
END $$;
-- W3: one event per call; the event id carries the transaction id, so a
-- consumer can look up the commit timestamp.
CREATE FUNCTION bench_emit() RETURNS void LANGUAGE plpgsql AS $$
DECLARE x bigint := txid_current(); u uuid;
BEGIN
  u := ('00000000-0000-4000-8000-' || lpad(to_hex(x), 12, '0'))::uuid;
  INSERT INTO outbox VALUES (u, 'Order', 'order-' || (x % 1000), 'OrderCreated', bench_payload(x, x));
  DELETE FROM outbox WHERE id = u;
END $$;
-- W5 publishes no table: only logical decoding messages reach its slots.
CREATE PUBLICATION bench_messages;
-- The writer's cost, table style: W1's transaction for one pgbench call.
CREATE FUNCTION bench_write_table(i bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE u uuid := gen_random_uuid();
BEGIN
  INSERT INTO outbox VALUES (u, 'Order', 'order-' || (i % 1000), 'OrderCreated', bench_payload(i, 0));
  DELETE FROM outbox WHERE id = u;
END $$;
"""

# After outbox_emit.sql is installed (it is the users' helper, not a copy).
LOAD_MESSAGES_SQL = r"""
-- W5: W1's events, each one transactional logical decoding message whose
-- content is the event as a JSON object (id, aggregatetype, aggregateid,
-- type, payload).
CREATE PROCEDURE load_messages(n int) LANGUAGE plpgsql AS $$
DECLARE i int;
BEGIN
  FOR i IN 1..n LOOP
    PERFORM outbox_emit('Order', 'order-' || (i % 1000), 'OrderCreated', bench_payload(i, 0));
    COMMIT;
  END LOOP;
END $$;
-- The writer's cost, message style: W5's transaction for one pgbench call.
CREATE FUNCTION bench_write_message(i bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM outbox_emit('Order', 'order-' || (i % 1000), 'OrderCreated', bench_payload(i, 0));
END $$;
"""


# --------------------------------------------------------------------------
# The systems under test.


def pgoutput_options(streaming, server_version_num, publication="bench", messages=False):
    """The START_REPLICATION options walrelay sends to a server of this version
    (src/pipeline/session.rs, src/postgres/wal.rs), so the baselines decode exactly
    what walrelay asks for: protocol 1, 2 with streaming 'on' (14, 15) or 4 with
    streaming 'parallel' (16+). `messages`: logical decoding messages asked
    for whatever walrelay's source says (a message workload)."""
    def read(*path):
        try:
            with open(os.path.join(REPO, *path)) as f:
                return f.read()
        except OSError:
            return ""

    def const(text, name):
        m = re.search(rf"pub const {name}: u32 = ([\d_]+);", text)
        return int(m.group(1).replace("_", "")) if m else None

    relay, source = read("src", "pipeline", "session.rs"), read("src", "postgres", "wal.rs")
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


def walrelay_config(env, system, slot, topic, messages):
    """The configuration the bench gives walrelay (docs/benchmarks.md,
    Configurations), then the variant's overrides and the --walrelay-*
    options' lines."""
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
        "postgres": {"host": "127.0.0.1", "port": env.pg_port, "user": "postgres", "dbname": "bench"},
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
        cfg["kafka"]["transactions"] = {"progress_topic": f"bench.{env.stamp}.progress.{slot}"}
    cfg["kafka"]["producer"] = producer
    cfg["metrics"] = {"listen": "127.0.0.1:0"}
    for k, v in Variant(system).overrides:
        set_dotted(cfg, k, v)
    unescape = lambda text: text.replace("\\n", "\n")  # noqa: E731 - \n in an option is a new line
    return toml_dump(cfg, {"replication": unescape(env.args.walrelay_replication),
                           None: unescape(env.args.walrelay_extra)})


def walrelay_binary(env, system):
    """The binary of a walrelay system: --walrelay, or --walrelay-binary's
    for walrelay@LABEL."""
    label_ = Variant(system).binary
    if not label_:
        return env.args.walrelay
    if label_ not in env.args.walrelay_binaries:
        raise BenchError(f"{system}: no --walrelay-binary {label_}=PATH")
    return env.args.walrelay_binaries[label_]


class Running:
    """A started system: its process and how to stop it."""

    def __init__(self, system, pid, stop, alive, logfile, popen=None):
        self.system, self.pid, self.stop, self.alive, self.log = system, pid, stop, alive, logfile
        self.popen = popen


def message_options(streaming, server_version_num):
    """The options walrelay sends when messages are events: the empty
    publication, messages on, and no streaming when walrelay turns it off
    for messages (src/pipeline/session.rs: a streamed message carries its
    top-level transaction's xid)."""
    try:
        with open(os.path.join(REPO, "src", "pipeline", "session.rs")) as f:
            if "plan.messages().is_none()" in f.read():
                streaming = "off"
    except OSError:
        pass
    return pgoutput_options(streaming, server_version_num, MESSAGES_PUBLICATION, messages=True)


def slot_options(env, workload, system=None):
    """pgoutput options of the baselines for `workload`, then the variant's
    (walsender:publication=bench_iu: publication_names)."""
    if workload in MESSAGE_WORKLOADS:
        opts = message_options(env.args.streaming, env.server_version_num)
    else:
        opts = pgoutput_options(env.args.streaming, env.server_version_num)
    for k, v in Variant(system).overrides if system else ():
        opts["publication_names" if k == "publication" else k] = toml_value(v).strip('"')
    return opts


def start_system(env, system, slot, topic, run_dir, end_lsn=None, workload=None):
    os.makedirs(run_dir, exist_ok=True)
    messages = workload in MESSAGE_WORKLOADS
    if base_system(system) == "ceiling":
        cmd = ["pg_recvlogical", "-h", "127.0.0.1", "-p", str(env.pg_port), "-U", "postgres", "-d", "bench",
               "--slot", slot, "--start", "-f", "/dev/null", "-E", end_lsn, "--no-loop"]
        for k, v in slot_options(env, workload, system).items():
            cmd += ["-o", f"{k}={v}"]
        logf = os.path.join(run_dir, "pg_recvlogical.log")
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(logf, "w"))
        env.procs.append(("popen", p))
        return Running(system, p.pid, lambda: None, lambda: p.poll() is None, logf, p)
    if base_system(system) == "walsender":
        if not env.args.walsender_drain:
            raise BenchError("no walsender_drain binary: run through benches/run.sh or pass --walsender-drain")
        cmd = [env.args.walsender_drain, "127.0.0.1", str(env.pg_port), "postgres", "bench", slot, end_lsn]
        cmd += [f"{k}={v}" for k, v in slot_options(env, workload, system).items()]
        logf = os.path.join(run_dir, "walsender_drain.log")
        # Its one summary line (messages, bytes, seconds) goes to stdout.
        p = subprocess.Popen(cmd, stdout=open(os.path.join(run_dir, "walsender_drain.out"), "w"),
                             stderr=open(logf, "w"))
        env.procs.append(("popen", p))
        return Running(system, p.pid, lambda: None, lambda: p.poll() is None, logf, p)
    if base_system(system) in WALRELAYS:
        cfg = os.path.join(run_dir, "walrelay.toml")
        with open(cfg, "w") as f:
            f.write(walrelay_config(env, system, slot, topic, messages))
        binary = walrelay_binary(env, system)
        logf = os.path.join(run_dir, "walrelay.log")
        p = subprocess.Popen([binary, "run", "--config", cfg],
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
        return Running(system, p.pid, stop, lambda: p.poll() is None, logf, p)
    # Debezium on Kafka Connect standalone.
    worker = os.path.join(run_dir, "worker.in.properties")
    conn = os.path.join(run_dir, "connector.properties")
    wprops = {
        "bootstrap.servers": env.bootstrap,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
    }
    cprops = {
        "name": "bench",
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": "1",
        "database.hostname": "127.0.0.1",
        "database.port": str(env.pg_port),
        "database.user": "postgres",
        "database.password": "unused",
        "database.dbname": "bench",
        "plugin.name": "pgoutput",
        "slot.name": slot,
        "publication.name": "bench",
        "publication.autocreate.mode": "filtered",
        "table.include.list": "public.outbox",
        "topic.prefix": "bench",
        "snapshot.mode": "no_data",
        "transforms": "outbox",
        "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
        "transforms.outbox.route.topic.replacement": topic,
    }
    if messages:
        # Debezium's message outbox (docs/debezium-compat section 7): no
        # table, messages of the prefix decoded into an `after` the
        # EventRouter routes.
        del cprops["table.include.list"]
        cprops.update({
            "publication.name": MESSAGES_PUBLICATION,
            "publication.autocreate.mode": "no_tables",
            "message.prefix.include.list": MESSAGE_PREFIX,
            "transforms": "decode,outbox",
            "transforms.decode.type": "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent",
        })
    if system == "dbz_tuned":
        wprops.update(DBZ_TUNED_WORKER)
        cprops.update(DBZ_TUNED_CONNECTOR)
    for path, props in ((worker, wprops), (conn, cprops)):
        with open(path, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in props.items())
    dbz_dir = os.path.join(run_dir, "connect")
    envv = dict(os.environ, WALRELAY_DBZ_HEAP_OPTS=DBZ_HEAP[system], WALRELAY_DBZ_START_TIMEOUT="300")
    run([f"{SCRIPTS}/debezium.sh", "standalone", dbz_dir, worker, conn], env=envv)
    env.procs.append(("dbz", dbz_dir))
    with open(os.path.join(dbz_dir, "pid")) as f:
        pid = int(f.read().strip())

    def stop():
        run([f"{SCRIPTS}/debezium.sh", "stop", dbz_dir], check=False,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return Running(system, pid, stop, lambda: cpu_of(pid) is not None, os.path.join(dbz_dir, "log"))


def metrics_text(logfile):
    """walrelay's /metrics now (the address is in its log), or None."""
    try:
        with open(logfile, errors="replace") as f:
            text = re.sub(r"\x1b\[[0-9;]*m", "", f.read())
        addr = re.search(r"metrics and health endpoints listen=(\S+)", text).group(1)
        with urllib.request.urlopen(f"http://{addr}/metrics", timeout=5) as resp:
            return resp.read().decode()
    except (OSError, AttributeError) as e:
        log(f"no metrics from walrelay: {e}")
        return None


def eos_metrics(logfile):
    """walrelay's transaction metrics now (from its /metrics endpoint, whose
    address its log names): Kafka transactions by result, the records per
    transaction and the seconds spent in commit_transaction (sum, count)."""
    body = metrics_text(logfile)
    if body is None:
        return None
    out = {}
    for line in body.splitlines():
        m = re.match(r"(walrelay_kafka_transaction\w*?(?:_sum|_count|_total))(\{[^}]*\})? (\S+)", line)
        if m:
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


# --------------------------------------------------------------------------
# W3's latency by stage, from walrelay's histograms: scraped before and
# after each level, subtracted, percentiles interpolated inside the bucket.

# (histogram family, its `stage` label or None, what the row says)
STAGES = (
    ("walrelay_stage_seconds", "commit_to_receive",
     "commit → read off the socket (server commit timestamp; per transaction)"),
    ("walrelay_stage_seconds", "receive_to_produce", "read → handed to the producer (per event)"),
    ("walrelay_stage_seconds", "produce_to_ack", "handed to the producer → Kafka delivery report (per event)"),
    ("walrelay_stage_seconds", "ack_to_confirm",
     "transaction acknowledged → standby status update confirming it (per status update)"),
    ("walrelay_commit_to_ack_seconds", None, "commit → Kafka delivery report (walrelay's own histogram)"),
)
QUANTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("p999", 0.999))


def parse_histograms(text, family):
    """Histograms of `family` in a Prometheus/OpenMetrics text exposition,
    summed over every label but `stage` and `le`: {stage or None:
    {"buckets": [(upper bound, cumulative count)], "count": n, "sum": s}}."""
    out = {}
    pat = re.compile(rf"^{re.escape(family)}_(bucket|count|sum)(?:\{{(.*)\}})? (\S+)")
    for line in text.splitlines():
        m = pat.match(line)
        if not m:
            continue
        kind, value = m.group(1), float(m.group(3))
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        h = out.setdefault(labels.get("stage"), {"buckets": {}, "count": 0.0, "sum": 0.0})
        if kind == "bucket":
            le = float("inf") if labels.get("le") in ("+Inf", "Inf") else float(labels["le"])
            h["buckets"][le] = h["buckets"].get(le, 0.0) + value
        else:
            h[kind] += value
    for h in out.values():
        h["buckets"] = sorted(h["buckets"].items())
    return out


def histogram_delta(after, before):
    """`after` minus `before` (cumulative buckets with the same bounds)."""
    if not before:
        return after
    prev = dict(before["buckets"])
    return {"buckets": [(le, c - prev.get(le, 0.0)) for le, c in after["buckets"]],
            "count": after["count"] - before["count"], "sum": after["sum"] - before["sum"]}


def histogram_quantile(h, q):
    """The q-quantile of a histogram, by linear interpolation inside the
    bucket it falls in (the lower bound of the first bucket is 0): exact
    only to the bucket's width. In the +Inf bucket: the last finite bound.
    None without observations."""
    total = h["buckets"][-1][1] if h["buckets"] else 0
    if total <= 0:
        return None
    rank, lo, below = q * total, 0.0, 0.0
    for le, cum in h["buckets"]:
        if cum >= rank:
            if le == float("inf"):
                return lo
            inside = cum - below
            return lo + (le - lo) * ((rank - below) / inside if inside > 0 else 1.0)
        lo, below = le, cum
    return lo


def scrape_stages(logfile):
    """{(family, stage): histogram} now; {} if walrelay exposes none of
    them (a binary from before the breakdown); None if unreachable."""
    text = metrics_text(logfile)
    if text is None:
        return None
    out = {}
    for family in dict.fromkeys(f for f, _, _ in STAGES):
        for stage, h in parse_histograms(text, family).items():
            out[(family, stage)] = h
    return out


def stage_breakdown(before, after):
    """Per stage of STAGES: the observations between two scrapes and their
    percentiles in ms; None when walrelay exposes no walrelay_stage_seconds
    ("no breakdown")."""
    if not after or not any(f == "walrelay_stage_seconds" for f, _ in after):
        return None
    rows = {}
    for family, stage, _ in STAGES:
        a = after.get((family, stage))
        if a is None:
            continue
        h = histogram_delta(a, (before or {}).get((family, stage)))
        row = {"count": h["count"], "mean_ms": h["sum"] / h["count"] * 1000 if h["count"] else None}
        for name, q in QUANTILES:
            v = histogram_quantile(h, q)
            row[f"{name}_ms"] = v * 1000 if v is not None else None
        rows[stage or family] = row
    return rows


def self_check():
    """The histogram parser and interpolation on a synthetic exposition."""
    text = "\n".join([
        "# HELP walrelay_stage_seconds Seconds per stage.",
        "# TYPE walrelay_stage_seconds histogram",
        'walrelay_stage_seconds_sum{pipeline="default",stage="produce_to_ack"} 1.5',
        'walrelay_stage_seconds_count{pipeline="default",stage="produce_to_ack"} 100',
        'walrelay_stage_seconds_bucket{le="0.001",pipeline="default",stage="produce_to_ack"} 10',
        'walrelay_stage_seconds_bucket{le="0.002",pipeline="default",stage="produce_to_ack"} 50',
        'walrelay_stage_seconds_bucket{le="0.004",pipeline="default",stage="produce_to_ack"} 90',
        'walrelay_stage_seconds_bucket{le="+Inf",pipeline="default",stage="produce_to_ack"} 100',
        'walrelay_stage_seconds_bucket{pipeline="other",stage="produce_to_ack",le="0.001"} 10',
        'walrelay_stage_seconds_bucket{pipeline="other",stage="produce_to_ack",le="0.002"} 10',
        'walrelay_stage_seconds_bucket{pipeline="other",stage="produce_to_ack",le="0.004"} 10',
        'walrelay_stage_seconds_bucket{pipeline="other",stage="produce_to_ack",le="+Inf"} 10',
        'walrelay_stage_seconds_count{pipeline="other",stage="produce_to_ack"} 10',
        'walrelay_commit_to_ack_seconds_bucket{pipeline="default",le="0.01"} 4',
        'walrelay_commit_to_ack_seconds_bucket{pipeline="default",le="+Inf"} 4',
        'walrelay_commit_to_ack_seconds_count{pipeline="default"} 4',
        "# EOF", ""])
    h = parse_histograms(text, "walrelay_stage_seconds")["produce_to_ack"]
    assert h["buckets"] == [(0.001, 20.0), (0.002, 60.0), (0.004, 100.0), (float("inf"), 110.0)], h
    assert h["count"] == 110 and h["sum"] == 1.5, h
    # rank 55 of 110: 35 of the 40 in (1 ms, 2 ms]
    assert abs(histogram_quantile(h, 0.5) - (0.001 + 0.001 * 35 / 40)) < 1e-12
    assert abs(histogram_quantile(h, 0.1) - 0.001 * 11 / 20) < 1e-12
    assert histogram_quantile(h, 0.99) == 0.004  # in +Inf: the last finite bound
    before = {"buckets": [(0.001, 20.0), (0.002, 20.0), (0.004, 20.0), (float("inf"), 20.0)], "count": 20, "sum": 0.5}
    d = histogram_delta(h, before)
    assert d["count"] == 90 and abs(histogram_quantile(d, 0.5) - 0.00225) < 1e-12, d
    assert histogram_quantile({"buckets": [(0.001, 0.0), (float("inf"), 0.0)]}, 0.5) is None
    rows = stage_breakdown({}, {("walrelay_stage_seconds", "produce_to_ack"): h,
                                ("walrelay_commit_to_ack_seconds", None):
                                parse_histograms(text, "walrelay_commit_to_ack_seconds")[None]})
    assert rows["produce_to_ack"]["count"] == 110 and rows["walrelay_commit_to_ack_seconds"]["p50_ms"] == 5.0, rows
    assert stage_breakdown({}, {("walrelay_commit_to_ack_seconds", None): h}) is None  # an old binary
    assert tomllib.loads(toml_dump({"a": {"b": 1, "c": {"d": "x"}}, "kafka": {"producer": {}}}))["a"]["c"]["d"] == "x"
    cfg = {"kafka": {"producer": {}}}
    set_dotted(cfg, "kafka.producer.linger.ms", 1)
    set_dotted(cfg, "replication.read_coalesce_us", 0)
    assert cfg == {"kafka": {"producer": {"linger.ms": "1"}}, "replication": {"read_coalesce_us": 0}}, cfg
    assert Variant("walrelay@base:replication.publication=bench_iu").overrides == [("replication.publication",
                                                                                    "bench_iu")]
    assert eos_settings("walrelay-eos:max_events=5") == {"max_events": 5}
    # 2 s of drain: 1.5 s on a CPU, 0.2 s waiting, the rest blocked; the
    # sample after the end does not count.
    samples = [Sched(10.0, 5_000_000_000, 1_000_000_000, 100, 10), Sched(11.0, 5_900_000_000, 1_100_000_000, 150, 12),
               Sched(12.0, 6_500_000_000, 1_200_000_000, 300, 30), Sched(12.5, 6_500_000_000, 1_200_000_000, 301, 30)]
    ws = sched_summary(samples, 12.2, 10_000)
    assert ws["seconds"] == 2.0 and abs(ws["on_cpu_pct"] - 75) < 1e-9 and abs(ws["wait_pct"] - 10) < 1e-9, ws
    assert abs(ws["blocked_pct"] - 15) < 1e-9 and ws["vol_cs_per_k"] == 20 and ws["invol_cs_per_k"] == 2, ws
    no_schedstat = sched_summary([x._replace(on_cpu_ns=None, wait_ns=None) for x in samples], 12.2, 10_000)
    assert no_schedstat["on_cpu_pct"] is None and no_schedstat["vol_cs_per_k"] == 20, no_schedstat
    assert sched_summary(samples[:1], 12.2, 10_000) is None
    assert walsender_table([{"workload": "W1", "system": "walsender", "events_per_s": 1000.0,
                             "walsender_sched": no_schedstat}]).endswith("| – | – | – | 20.0 / 2.0 | – |")
    # 12,000 bytes in 100 segments by the end; the sample after it does not count.
    assert bytes_per_segment([(10.0, 1000, 10), (11.0, 7000, 60), (12.0, 13000, 110), (12.5, 99000, 120)],
                             12.2) == 120.0
    assert bytes_per_segment([(10.0, 1000, 10)], 12.2) is None
    print("self check passed")


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


# --------------------------------------------------------------------------
# Backlog drains: W1, W2, W4, W5.


def drain(env, system, slot, topic, n, end_lsn, run_dir, timeout, workload=None):
    t_launch = time.time()
    r = start_system(env, system, slot, topic, run_dir, end_lsn, workload)
    t_active, ws_pid = wait_active(env, r, slot, 300)
    cpu0 = tree_cpu(r.pid)
    ws0 = cpu_of(ws_pid) if ws_pid else None
    ws_last = ws0
    ws_sched = SchedTrace(ws_pid)
    br0 = cpu_of(env.broker_pid)
    deadline = t_active + timeout
    res = {"system": system, "events": n, "startup_s": t_active - t_launch}
    prof = Profile(os.path.join(run_dir, "perf.data")) if env.args.profile else None
    # Threads of the system, for the profile (a baseline is gone by its end).
    sut_threads = threads_of([r.pid]) if prof else set()
    base = base_system(system)
    if base in BASELINES:
        # Same clock for both baselines: slot active to process exit.
        prog = "pg_recvlogical" if base == "ceiling" else "walsender_drain"
        hwm = 0
        while True:
            pid, status, ru = os.wait4(r.pid, os.WNOHANG)
            if pid:
                t_end = time.time()
                break
            c = cpu_of(ws_pid)
            ws_last = c if c is not None else ws_last
            ws_sched.poll()
            hwm = max(hwm, hwm_kb(r.pid))
            if time.time() > deadline:
                raise BenchError(f"{prog} did not reach {end_lsn} in {timeout} s")
            time.sleep(0.01)
        parts = finish_profile(prof, env, sut_threads, ws_pid, run_dir,
                               {prog: r.pid, "the walsender": ws_pid})
        r.popen.returncode = os.waitstatus_to_exitcode(status)
        if r.popen.returncode != 0:
            raise BenchError(f"{prog} failed:\n{tail(r.log)}")
        if base == "walsender":
            summary = tail(os.path.join(os.path.dirname(r.log), "walsender_drain.out"), 1)
            res["reader"] = dict((k, float(v)) for k, v in re.findall(r"(\w+)=([\d.]+)", summary))
            # What the walsender sent per event (pgoutput messages).
            res["walsender_messages_per_event"] = res["reader"].get("messages", 0) / n
            if workload in MESSAGE_WORKLOADS and res["reader"].get("logical_messages") != n:
                raise BenchError(f"walsender_drain received {res['reader'].get('logical_messages')} logical "
                                 f"decoding messages, {n} were written")
        cpu = ru.ru_utime + ru.ru_stime
        # The last VmHWM seen while it ran: its peak up to 10 ms before exit.
        rss_kb = hwm or ru.ru_maxrss
        br1 = cpu_of(env.broker_pid)
    else:
        while True:
            c = cpu_of(ws_pid)
            ws_last = c if c is not None else ws_last
            count = env.count(system, topic)
            if count >= n:
                break
            if not r.alive():
                raise BenchError(f"{system} exited with {count}/{n} records in kafka:\n{tail(r.log)}")
            if time.time() > deadline:
                r.stop()
                raise BenchError(f"{system}: only {count}/{n} records in kafka after {timeout} s")
            ws_sched.sleep(0.2)
            if prof:
                sut_threads |= threads_of([r.pid])
        parts = finish_profile(prof, env, sut_threads, ws_pid, run_dir,
                               {system: r.pid, "the walsender": ws_pid})
        if base_system(system) in TRANSACTIONAL:
            res["txn_metrics"] = eos_metrics(r.log)
        cpu = tree_cpu(r.pid) - cpu0
        rss_kb = tree_hwm_kb(r.pid)
        br1 = cpu_of(env.broker_pid)
        r.stop()
        txn = base_system(system) in TRANSACTIONAL
        recs = env.read_topic(topic, n, committed=txn)
        if len(recs) != n:
            raise BenchError(f"{system}: read {len(recs)} records back from {topic}"
                             f"{' (read_committed)' if txn else ''}, expected {n}")
        first = min(t for t, *_ in recs) / 1000
        t_end = max(t for t, *_ in recs) / 1000
        if txn:
            # The last record is readable once its transaction committed:
            # the clock stops at the last COMMIT marker's append time.
            view = env.committed(topic)
            view.scan()
            res["last_append_s"] = t_end - t_active
            t_end = max(t_end, (view.last_commit_ms() or 0) / 1000)
            res["commit_markers"] = sum(len(m) for m in view.markers.values())
            res["marker_timestamps"] = sorted(view.marker_ts_types)
            res["aborted_records"] = view.aborted
            env.forget(topic)
            # One progress record per Kafka transaction: their count.
            progress = env.committed_progress(system, run_dir)
            if progress is not None:
                res["kafka_transactions"] = progress
                res["events_per_transaction"] = n / progress if progress else None
        res["first_record_s"] = first - t_launch
    secs = t_end - t_active
    res.update({
        "seconds": secs,
        "events_per_s": n / secs if secs > 0 else None,
        "cpu_s": cpu,
        "cpu_s_per_m": cpu / n * 1e6,
        "walsender_cpu_s_per_m": (ws_last - ws0) / n * 1e6 if ws0 is not None else None,
        "walsender_sched": ws_sched.summary(t_end, n),
        "broker_cpu_s_per_m": (br1 - br0) / n * 1e6 if base not in BASELINES else None,
        "peak_rss_mb": rss_kb / 1024,
    })
    if parts:
        res["cpu_share"] = parts
    return res


def workload_drain(env, name, n, load, systems, out):
    """Drains one backlog with every system. The fast systems (the
    baselines and walrelay, seconds each) drain it `--rounds` times,
    interleaved, and report the median round: on a shared machine one
    round can be half as fast as the next. Debezium drains it once."""
    prefix = f"bench_{name.lower()}_"
    modes = PIN_MODES[env.args.pin]
    rounds = {s: (env.args.rounds if base_system(s) in REPEATED else 1) for s in systems}
    # Each round drains with every system in each CPU mode (--pin both:
    # unpinned, then pinned), all from the same backlog.
    runs = [(k, s, p) for k in range(max(rounds.values())) for p in modes for s in systems if k < rounds[s]]
    slots = {(k, s, p): f"{prefix}{slug(s)}{'_pin' if p else ''}_{k}" for k, s, p in runs}
    topics = {(k, s, p): f"bench.{env.stamp}.{name.lower()}.{slug(s)}{'.pin' if p else ''}.{k}"
              for k, s, p in runs if base_system(s) not in BASELINES}
    for slot in slots.values():
        env.create_slot(slot)
    for t in topics.values():
        env.create_topic(t)
    log(f"{name}: loading {n:,} events")
    t0 = time.time()
    load()
    end_lsn = env.db.value("SELECT pg_current_wal_lsn()")
    backlog = env.db.value(f"SELECT pg_wal_lsn_diff('{end_lsn}', confirmed_flush_lsn) FROM pg_replication_slots "
                           f"WHERE slot_name = '{slots[runs[0]]}'")
    env.db.query("CHECKPOINT")
    log(f"{name}: loaded in {time.time() - t0:.1f} s, {int(float(backlog)) / 2**20:.1f} MiB of WAL up to {end_lsn}")
    timeout = max(120, n / 500)
    done = {(s, p): [] for s in systems for p in modes}
    for k, s, p in runs:
        env.set_pinned(p)
        label = (f"{s} (round {k + 1} of {rounds[s]})" if rounds[s] > 1 else s) + (", pinned" if p else "")
        log(f"{name}: draining with {label}")
        run_dir = os.path.join(out, "runs", f"{name}-{slug(s)}" + ("-pinned" if p else "")
                               + (f"-r{k + 1}" if rounds[s] > 1 else ""))
        try:
            res = drain(env, s, slots[(k, s, p)], topics.get((k, s, p)), n, end_lsn, run_dir, timeout, name)
            log(f"{name}: {label}: {res['events_per_s']:,.0f} events/s, {res['cpu_s_per_m']:.1f} CPU s/M, "
                f"{res['peak_rss_mb']:.0f} MB")
        except BenchError as e:
            log(f"{name}: {label} FAILED: {e}")
            res = {"system": s, "events": n, "error": str(e).splitlines()[0]}
        res["round"] = k + 1
        done[(s, p)].append(res)
    results = []
    for p in modes:
        for s in systems:
            runs_sp = done[(s, p)]
            ok = sorted((r for r in runs_sp if "error" not in r), key=lambda r: r["events_per_s"])
            res = dict(ok[(len(ok) - 1) // 2]) if ok else runs_sp[0]
            if len(runs_sp) > 1:
                res["rounds"] = [r.get("events_per_s") for r in runs_sp]
                # Memory is a bound, not a rate: the worst round counts.
                res["peak_rss_mb"] = max(r["peak_rss_mb"] for r in ok) if ok else None
            res["workload"] = name
            res["pinned"] = p
            res["backlog_mib"] = int(float(backlog)) / 2**20
            results.append(res)
    env.set_pinned(modes[0])
    env.drop_slots(prefix)
    env.db.query("TRUNCATE outbox")
    env.db.query("CHECKPOINT")
    return results


def warm_broker(env, n, out):
    """A freshly started broker compiles its hot paths (JIT) during its
    first minute of load: its C2 compiler threads took 16 % of the machine
    while the first system drained, and a 5 s drain of 500,000 batched rows
    beforehand did not finish that. So the broker first gets about a minute
    of steady load, unmeasured: walrelay relays W1-shaped transactions as
    they are written."""
    slot, topic = "bench_warmup", f"bench.{env.stamp}.warmup"
    env.create_slot(slot)
    env.create_topic(topic)
    log(f"warming the broker up: walrelay relays {n:,} events as they are written (not measured)")
    run_dir = os.path.join(out, "runs", "warmup")
    r = start_system(env, "walrelay", slot, topic, run_dir)
    try:
        wait_active(env, r, slot, 60)
        t0 = time.time()
        env.db.query(f"CALL load_single({n})")
        deadline = time.time() + 120
        while env.offsets.count(topic) < n and time.time() < deadline and r.alive():
            time.sleep(0.2)
        log(f"broker warmed for {time.time() - t0:.0f} s")
    except BenchError as e:
        log(f"warm-up failed (the run goes on): {e}")
    finally:
        r.stop()
    env.drop_slots(slot)
    env.db.query("TRUNCATE outbox")
    env.db.query("CHECKPOINT")


def cluster_cpu(env):
    """CPU seconds of the whole PostgreSQL cluster so far: the postmaster,
    the children it has reaped (backends of finished connections,
    autovacuum workers) and those alive now."""
    with open(os.path.join(env.pg_dir, "data", "postmaster.pid")) as f:
        pm = int(f.readline())
    with open(f"/proc/{pm}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2 :].split()
    own = sum(int(x) for x in fields[11:15]) / TICK  # utime stime cutime cstime
    return own + sum(c for c in (cpu_of(p) for p in tree(pm) if p != pm) if c is not None)


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
                env.db.query("TRUNCATE outbox")
                env.db.query("CHECKPOINT")
                lsn0 = env.db.value("SELECT pg_current_wal_lsn()")
                cpu0 = cluster_cpu(env)
                log(f"writer: {style} outbox, {clients} clients, {seconds} s (round {k + 1} of {rounds})")
                pb = run(["pgbench", "-n", "-h", "127.0.0.1", "-p", str(env.pg_port), "-U", "postgres",
                          "-c", str(clients), "-j", str(min(clients, os.cpu_count() or 1)),
                          "-T", str(seconds), "-f", scripts[style], "bench"], capture_output=True, text=True,
                         check=False)
                m = re.search(r"number of transactions actually processed: (\d+)", pb.stdout)
                tps = re.search(r"tps = ([\d.]+) \(without initial connection time\)", pb.stdout)
                failed = re.search(r"number of failed transactions: (\d+)", pb.stdout)
                if pb.returncode != 0 or not m or not tps or (failed and int(failed.group(1))):
                    raise BenchError(f"pgbench ({style}) failed: {pb.stdout[-500:]} {pb.stderr[-500:]}")
                n = int(m.group(1))
                # The backends of the finished run exit: give the postmaster a
                # moment to reap them, so their CPU is in its cutime.
                time.sleep(0.5)
                cpu1 = cluster_cpu(env)
                wal = float(env.db.value(f"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '{lsn0}')"))
                t0, v0 = time.time(), cluster_cpu(env)
                env.db.query("VACUUM outbox")
                vac_s, vac_cpu = time.time() - t0, cluster_cpu(env) - v0
                done[style].append({"tps": float(tps.group(1)), "transactions": n,
                                    "pg_cpu_us_per_txn": (cpu1 - cpu0) / n * 1e6 if n else None,
                                    "wal_bytes_per_txn": wal / n if n else None,
                                    "vacuum_s": vac_s, "vacuum_cpu_s": vac_cpu})
                log(f"writer: {style}: {done[style][-1]['tps']:,.0f} transactions/s, "
                    f"{done[style][-1]['wal_bytes_per_txn']:.0f} WAL bytes each, VACUUM {vac_s:.2f} s")
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


# --------------------------------------------------------------------------
# W3: open-loop load.


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


def percentile(sorted_vals, q):
    if not sorted_vals:
        return None
    i = min(len(sorted_vals) - 1, max(0, int(round(q * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[i]


def workload_w3(env, ceiling_rate, levels, seconds, systems, out, clients, warmup):
    script = os.path.join(out, "w3.sql")
    with open(script, "w") as f:
        f.write("SELECT bench_emit();\n")
    results = []
    # What PostgreSQL here commits at most with nobody decoding: the load
    # levels are fractions of the W1 ceiling, which may be above it.
    pb = run(["pgbench", "-n", "-h", "127.0.0.1", "-p", str(env.pg_port), "-U", "postgres",
              "-c", str(clients), "-j", str(min(clients, os.cpu_count() or 1)),
              "-T", "10", "-f", script, "bench"], capture_output=True, text=True, check=False)
    m = re.search(r"tps = ([\d.]+)", pb.stdout)
    env.args.w3_generator_max = float(m.group(1)) if m else None
    log(f"W3: pgbench alone commits {env.args.w3_generator_max or 0:,.0f} events/s at most here")
    env.db.query("TRUNCATE outbox")
    # Every system in each CPU mode (--pin both: all unpinned, then all
    # pinned), at the same rates.
    for pinned, s in [(p, s) for p in PIN_MODES[env.args.pin] for s in systems]:
        if base_system(s) in BASELINES:
            continue
        env.set_pinned(pinned)
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
            results.append({"workload": "W3", "system": s, "pinned": pinned, "error": str(e).splitlines()[0]})
            env.drop_slots(slot)
            continue
        expected = 0
        if warmup:
            # JIT, connections and caches warm up at the lowest level's rate;
            # these events count for completion but not for latency.
            rate = max(1, int(ceiling_rate * min(levels) / 100))
            log(f"W3: warming {s} up: {rate:,} events/s for {warmup} s")
            pb = run(["pgbench", "-n", "-h", "127.0.0.1", "-p", str(env.pg_port), "-U", "postgres",
                      "-c", str(clients), "-j", str(min(clients, os.cpu_count() or 1)), "-R", str(rate),
                      "-T", str(warmup), "-f", script, "bench"], capture_output=True, text=True, check=False)
            m = re.search(r"number of transactions actually processed: (\d+)", pb.stdout)
            expected += int(m.group(1)) if m else 0
        time.sleep(2)
        sampler = LagSampler(env, slot)
        sampler.start()
        levels_done = []
        try:
            for level in levels:
                rate = max(1, int(ceiling_rate * level / 100))
                lo = int(env.db.value("SELECT txid_current()"))
                # walrelay's stage histograms before and after the level.
                scrape = base_system(s) in WALRELAYS
                stages0 = scrape_stages(r.log) if scrape else None
                cpu0 = tree_cpu(r.pid)
                t0 = time.time()
                log(f"W3: {s} at {level} % of the ceiling: {rate:,} events/s for {seconds} s")
                level_dir = os.path.join(run_dir, f"level-{level}")
                os.makedirs(level_dir, exist_ok=True)
                prof = Profile(os.path.join(level_dir, "perf.data")) if env.args.profile else None
                pb = run(["pgbench", "-n", "-h", "127.0.0.1", "-p", str(env.pg_port), "-U", "postgres",
                          "-c", str(clients), "-j", str(min(clients, os.cpu_count() or 1)), "-R", str(rate),
                          "-T", str(seconds), "-f", script, "bench"], capture_output=True, text=True)
                t1 = time.time()
                parts = finish_profile(prof, env, threads_of([r.pid]) if prof else set(), ws_pid, level_dir,
                                       {s: r.pid, "the walsender": ws_pid})
                m = re.search(r"number of transactions actually processed: (\d+)", pb.stdout)
                if not m:
                    raise BenchError(f"pgbench failed: {pb.stdout[-500:]} {pb.stderr[-500:]}")
                done = int(m.group(1))
                expected += done
                hi = int(env.db.value("SELECT txid_current()"))
                catch = time.time() + 120
                while env.count(s, topic) < expected:
                    if not r.alive():
                        raise BenchError(f"{s} exited during W3:\n{tail(r.log)}")
                    if time.time() > catch:
                        raise BenchError(f"{s}: W3 records missing 120 s after the load stopped")
                    time.sleep(0.2)
                t_caught = time.time()
                cpu = tree_cpu(r.pid) - cpu0
                stages = stage_breakdown(stages0, scrape_stages(r.log)) if scrape else None
                lag = [b for t, b in sampler.samples if t0 <= t <= t1]
                third = len(lag) // 3
                first_third, last_third = max(lag[:third] or [0]), max(lag[-third:] or [0]) if third else 0
                levels_done.append({
                    "workload": "W3", "system": s, "pinned": pinned, "level_pct": level, "target_rate": rate,
                    "events": done, "achieved_rate": done / (t1 - t0), "xid_lo": lo, "xid_hi": hi,
                    "cpu_s_per_m": cpu / done * 1e6 if done else None,
                    "max_lag_mib": max(lag or [0]) / 2**20,
                    # Bounded: the lag did not grow from the first third of the
                    # level to the last (the confirmed position moves once per
                    # status interval, a second of WAL, hence the slack), and
                    # everything was in Kafka within 10 s of the load stopping.
                    "lag_bounded": last_third <= 2 * first_third + 8 * 2**20 and t_caught - t1 < 10,
                    "catch_up_s": t_caught - t1,
                    "startup_s": t_active - t_launch,
                    "stages": stages,
                })
                if parts:
                    levels_done[-1]["cpu_share"] = parts
                time.sleep(3)
            rss = tree_hwm_kb(r.pid) / 1024
            if base_system(s) in TRANSACTIONAL and levels_done:
                levels_done[-1]["txn_metrics"] = eos_metrics(r.log)
        except BenchError as e:
            log(f"W3: {s} FAILED: {e}")
            levels_done.append({"workload": "W3", "system": s, "pinned": pinned, "error": str(e).splitlines()[0]})
            rss = None
        finally:
            sampler.stopped.set()
            sampler.join()
            r.stop()
        if expected:
            txn = base_system(s) in TRANSACTIONAL
            log(f"W3: {s}: reading {expected:,} records back" + (" (read_committed)" if txn else ""))
            recs = env.read_topic(topic, expected, headers=True, committed=txn)
            view = None
            if txn:
                view = env.committed(topic)
                view.scan()
            # xid -> (append ms, visible ms): a record of a transactional
            # topic becomes visible to read_committed consumers at its
            # transaction's COMMIT marker, any other at its append.
            xids = {}
            for ts, hid, part, off in recs:
                if hid:
                    vis = view.visible_ms(part, off) if view else ts
                    xids[int(hid[-12:], 16)] = (ts, vis if vis is not None else ts)
            if xids:
                commits = env.commit_times_us(min(xids), max(xids))
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
        results.extend(levels_done)
        env.forget(topic)
        env.drop_slots(slot)
    return results


# --------------------------------------------------------------------------
# Report.


def fmt(v, spec=",.0f", none="–"):
    if v is None:
        return none
    if isinstance(v, bool):
        return "yes" if v else "**no**"
    return format(v, spec)


def drain_table(results):
    # With an exactly-once system or a walrelay variant in the run: its rate
    # against plain walrelay's (at-least-once, --walrelay) of the same run.
    eos = any(base_system(r["system"]) in WALRELAYS and r["system"] != "walrelay" for r in results)
    lines = ["| workload | system | events | seconds | events/s | every round, events/s | vs ceiling | vs walsender | "
             + ("vs walrelay | " if eos else "") +
             "vs Debezium tuned | CPU s / 1M events | walsender CPU s / 1M | broker CPU s / 1M | peak RSS MB | "
             "start-up s: streaming / first record |",
             "|---|---|--:|--:|--:|--:|--:|--:|" + ("--:|" if eos else "") + "--:|--:|--:|--:|--:|--:|"]
    by = {}
    for r in results:
        by[(r["workload"], r["system"])] = r
    for r in results:
        if r["workload"] not in DRAINS:
            continue
        if "error" in r:
            lines.append(f"| {r['workload']} | {label(r['system'])} | {r['events']:,} | failed: {r['error']} |"
                         " | | | | | | | | | |" + (" |" if eos else ""))
            continue
        ceil = by.get((r["workload"], "ceiling"), {}).get("events_per_s")
        wals = by.get((r["workload"], "walsender"), {}).get("events_per_s")
        dbz = by.get((r["workload"], "dbz_tuned"), {}).get("events_per_s")
        alo = by.get((r["workload"], "walrelay"), {}).get("events_per_s")
        rate = r["events_per_s"]
        vs_alo = f"{fmt(rate / alo if alo else None, '.2f')} | " if eos else ""
        lines.append(
            f"| {r['workload']} | {label(r['system'])} | {r['events']:,} | {r['seconds']:.2f} | {fmt(rate)} | "
            f"{' / '.join(fmt(x) for x in r.get('rounds', [])) or '1 round'} | "
            f"{fmt(rate / ceil if ceil else None, '.2f')} | {fmt(rate / wals if wals else None, '.2f')} | {vs_alo}"
            f"{fmt(rate / dbz if dbz else None, '.2f')} | "
            f"{fmt(r['cpu_s_per_m'], '.1f')} | {fmt(r.get('walsender_cpu_s_per_m'), '.1f')} | "
            f"{fmt(r.get('broker_cpu_s_per_m'), '.1f')} | {fmt(r['peak_rss_mb'], '.1f')} | "
            f"{fmt(r.get('startup_s'), '.2f')} / {fmt(r.get('first_record_s'), '.2f')} |")
    return "\n".join(lines)


def walsender_table(results):
    """The walsender's time while each system drained: on a CPU, waiting
    for one, blocked; its context switches per 1,000 events."""
    lines = ["| workload | system | events/s | walsender CPU s / 1M | on CPU % | waiting for a CPU % | blocked % | "
             "switches per 1,000 events: voluntary / involuntary | bytes per TCP segment it sent |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|"]
    for r in results:
        if r["workload"] not in DRAINS or "error" in r:
            continue
        ws = r.get("walsender_sched") or {}
        lines.append(
            f"| {r['workload']} | {label(r['system'])} | {fmt(r['events_per_s'])} | "
            f"{fmt(r.get('walsender_cpu_s_per_m'), '.1f')} | {fmt(ws.get('on_cpu_pct'), '.0f')} | "
            f"{fmt(ws.get('wait_pct'), '.0f')} | {fmt(ws.get('blocked_pct'), '.0f')} | "
            f"{fmt(ws.get('vol_cs_per_k'), ',.1f')} / {fmt(ws.get('invol_cs_per_k'), ',.1f')} | "
            f"{fmt(ws.get('bytes_per_segment'), ',.0f')} |")
    return "\n".join(lines)


WALSENDER_NOTE = ("The walsender (the slot's `active_pid`) from the drain's start to its end: its time on a CPU and "
                  "waiting on a run queue from `/proc/<pid>/schedstat`, blocked the rest (asleep on its socket, a "
                  "latch or I/O), as shares of that wall time; its context switches from `/proc/<pid>/status` "
                  "(voluntary: it blocked; involuntary: it was preempted). –: the kernel keeps no schedstat. "
                  "Bytes per TCP segment: what its socket sent over the segments it sent (`ss -tie`, every "
                  "0.5 s), about one pgoutput message when each send() leaves on its own.")


def w3_table(results):
    # With an exactly-once system: its latencies are to visibility for a
    # read_committed consumer (the COMMIT marker); its append latencies
    # (what a read_uncommitted consumer sees) go in a column of their own.
    eos = any(base_system(r["system"]) in TRANSACTIONAL for r in results if r["workload"] == "W3")
    lines = ["| system | load | target events/s | achieved events/s | p50 ms | p99 ms | p99.9 ms | max ms | "
             + ("append p50 / p99 / p99.9 ms | " if eos else "") +
             "latencies | max slot lag MiB | lag bounded | catch-up s | CPU s / 1M events | peak RSS MB |",
             "|---|--:|--:|--:|--:|--:|--:|--:|" + ("--:|" if eos else "") + "--:|--:|--:|--:|--:|--:|"]
    for r in results:
        if r["workload"] != "W3":
            continue
        if "error" in r:
            lines.append(f"| {label(r['system'])} | failed: {r['error']} | | | | | | | | | | | | |"
                         + (" |" if eos else ""))
            continue
        append = ""
        if eos:
            append = (" / ".join(fmt(r.get(k), ".1f") for k in ("append_p50_ms", "append_p99_ms", "append_p999_ms"))
                      if "append_p50_ms" in r else "same") + " | "
        lines.append(
            f"| {label(r['system'])} | {r['level_pct']} % | {fmt(r['target_rate'])} | {fmt(r['achieved_rate'])} | "
            f"{fmt(r.get('p50_ms'), '.1f')} | {fmt(r.get('p99_ms'), '.1f')} | {fmt(r.get('p999_ms'), '.1f')} | "
            f"{fmt(r.get('max_ms'), '.1f')} | {append}{fmt(r.get('latency_n'))} | {fmt(r['max_lag_mib'], '.1f')} | "
            f"{fmt(r['lag_bounded'])} | {fmt(r['catch_up_s'], '.1f')} | {fmt(r.get('cpu_s_per_m'), '.1f')} | "
            f"{fmt(r.get('peak_rss_mb'), '.1f')} |")
    return "\n".join(lines)


def stages_table(results):
    """W3's latency by stage of walrelay next to the exact end-to-end
    percentiles, per system and level."""
    rows = [r for r in results if r["workload"] == "W3" and "error" not in r and base_system(r["system"]) in WALRELAYS]
    if not rows:
        return "No walrelay in W3."
    lines = ["| system | load | stage | observations | p50 ms | p90 ms | p99 ms | p99.9 ms |",
             "|---|--:|---|--:|--:|--:|--:|--:|"]
    what = {stage or family: text for family, stage, text in STAGES}
    for r in rows:
        head = f"| {label(r['system'])} | {r['level_pct']} % |"
        end = ("visible to read_committed (COMMIT marker's LogAppendTime)" if r.get("visibility", "").startswith(
            "read_committed") else "LogAppendTime")
        lines.append(f"{head} **commit → {end}, exact (end to end)** | {fmt(r.get('latency_n'))} | "
                     + " | ".join(f"**{fmt(r.get(f'{q}_ms'), '.1f')}**" for q, _ in QUANTILES) + " |")
        if not r.get("stages"):
            lines.append(f"{head} no breakdown (this binary exposes no walrelay_stage_seconds) | | | | | |")
            continue
        for stage, st in r["stages"].items():
            lines.append(f"{head} {what.get(stage, stage)} | {fmt(st['count'])} | "
                         + " | ".join(fmt(st.get(f'{q}_ms'), '.2f') for q, _ in QUANTILES) + " |")
    return "\n".join(lines)


STAGES_NOTE = ("The stages are walrelay's histograms (`walrelay_stage_seconds`, `walrelay_commit_to_ack_seconds`), "
               "scraped before and after each level (until every event of the level was in Kafka) and subtracted; "
               "their percentiles are interpolated linearly inside a bucket, so they are approximate to the bucket's "
               "width (walrelay's bounds grow geometrically: × √2 per bucket for the stages, × 2 for "
               "commit_to_ack). The end-to-end row is exact (to LogAppendTime's 1 ms). Stages "
               "do not add up to the end to end: each has its own unit (transaction, event, status update).")


def targets(results):
    """The performance targets (issue 19; docs/benchmarks.md), each with the
    measured value, from the unpinned results of plain `walrelay`."""
    by = {(r["workload"], r["system"], r.get("level_pct")): r for r in results
          if "error" not in r and not r.get("pinned")}
    rows = []

    def add(name, ok, detail):
        rows.append(f"| {name} | {'met' if ok else '**not met**' if ok is not None else 'not measured'} | {detail} |")

    for w in ("W1", "W2"):
        wr, ws, d = (by.get((w, s, None)) for s in ("walrelay", "walsender", "dbz_tuned"))
        if wr and ws:
            ratio = wr["events_per_s"] / ws["events_per_s"]
            add(f"{w} >= 0.9 of the walsender reader", ratio >= 0.9, f"{ratio:.2f}")
            a, b = wr.get("walsender_cpu_s_per_m"), ws.get("walsender_cpu_s_per_m")
            if a and b:
                add(f"{w} walsender CPU per event with walrelay <= 1.1x with the reader", a / b <= 1.1,
                    f"{a / b:.2f}x ({a:.1f} vs {b:.1f} s / 1M)")
        else:
            add(f"{w} >= 0.9 of the walsender reader", None, "")
        if wr and d:
            x = wr["events_per_s"] / d["events_per_s"]
            add(f"{w} >= 3.5x tuned Debezium events/s", x >= 3.5, f"{x:.2f}x")
        else:
            add(f"{w} >= 3.5x tuned Debezium events/s", None, "")
    w3 = [r for (wl, sy, lvl), r in by.items() if wl == "W3" and sy == "walrelay" and lvl is not None
          and lvl <= 10 and r.get("p99_ms") is not None]
    if w3:
        r = max(w3, key=lambda r: r["level_pct"])
        add(f"W3 at {r['level_pct']} % of the ceiling: p99 <= 20 ms", r["p99_ms"] <= 20, f"{r['p99_ms']:.1f} ms")
        add(f"W3 at {r['level_pct']} % of the ceiling: p99.9 <= 50 ms", r["p999_ms"] <= 50, f"{r['p999_ms']:.1f} ms")
    else:
        add("W3 at 10 % of the ceiling: p99 <= 20 ms, p99.9 <= 50 ms", None, "")
    rss = [r.get("peak_rss_mb") for r in results if r["system"] == "walrelay" and r["workload"] in ("W1", "W2", "W3")
           and r.get("peak_rss_mb") is not None]
    add("peak RSS <= 48 MB in W1-W3", (max(rss) <= 48) if rss else None, f"{max(rss):.1f} MB" if rss else "")
    w4 = by.get(("W4", "walrelay", None))
    add("peak RSS <= 256 MB in W4", (w4["peak_rss_mb"] <= 256) if w4 else None,
        f"{w4['peak_rss_mb']:.1f} MB" if w4 else "")
    st = [r["startup_s"] for r in results if r["system"] == "walrelay" and r.get("startup_s") is not None]
    add("start-up to streaming < 0.2 s", (max(st) < 0.2) if st else None, f"max {max(st):.2f} s" if st else "")
    return "| target | status | measured |\n|---|---|---|\n" + "\n".join(rows)


COLORS = {"ceiling": "#888888", "walsender": "#2ca02c", "walrelay": "#1f77b4", "walrelay-eos": "#9467bd",
          "dbz_tuned": "#d62728", "dbz_default": "#ff9896"}


def figure(results):
    """The plots, one matplotlib figure: drain throughput per workload with
    every round as a point, W3 latency percentiles per stage of walrelay,
    and CPU s per 1M events per process (system, walsender, broker)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "walrelay-bench", "font.size": 8})

    drains = [r for r in results if r["workload"] in DRAINS and "error" not in r]
    w3 = [r for r in results if r["workload"] == "W3" and "error" not in r and r.get("p50_ms") is not None
          and base_system(r["system"]) in WALRELAYS]
    pinned = len({r.get("pinned", False) for r in drains + w3}) > 1

    def name(r):
        return label(r["system"]) + (" [pinned]" if pinned and r.get("pinned") else "")

    # A plain system has its colour; each variant one of its own.
    extra = iter(plt.get_cmap("Dark2").colors * 4)
    variant_colors = {s: COLORS[s] if s in COLORS else next(extra)
                      for s in dict.fromkeys(r["system"] for r in drains)}

    def color(r):
        return variant_colors.get(r["system"], COLORS.get(base_system(r["system"]), "#555555"))

    fig, axes = plt.subplots(3, 1, figsize=(13, 13), layout="constrained")
    # 1. Throughput: a bar per system (median round), the rounds as points.
    ax = axes[0]
    workloads = list(dict.fromkeys(r["workload"] for r in drains))
    series = list(dict.fromkeys(name(r) for r in drains))
    width = 0.8 / max(1, len(series))
    for i, sname in enumerate(series):
        for j, w in enumerate(workloads):
            r = next((x for x in drains if x["workload"] == w and name(x) == sname), None)
            if r is None:
                continue
            x = j - 0.4 + width * (i + 0.5)
            # Pinned: lighter, with a dashed outline (hatches would make the SVG large).
            ax.bar(x, r["events_per_s"], width * 0.9, color=color(r), alpha=0.5 if r.get("pinned") else 1.0,
                   linestyle="--" if r.get("pinned") else "-", edgecolor="black",
                   linewidth=0.9 if r.get("pinned") else 0.3,
                   label=sname if j == workloads.index(next(x["workload"] for x in drains if name(x) == sname))
                   else None)
            pts = [v for v in r.get("rounds", [r["events_per_s"]]) if v is not None]
            ax.plot([x] * len(pts), pts, "o", color="black", markersize=2.5)
    ax.set_xticks(range(len(workloads)), workloads)
    ax.set_ylabel("events/s")
    ax.set_title("Backlog drain throughput (bar: median round; points: every round; dashed: pinned; "
                 "higher is better)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", alpha=0.3)

    # 2. W3 latency: per walrelay system and level, p50/p90/p99/p99.9 of the
    # exact end to end and of each stage (interpolated), log scale.
    ax = axes[1]
    groups = []
    for r in w3:
        rows = [("commit → LogAppendTime (exact)", {f"{q}_ms": r.get(f"{q}_ms") for q, _ in QUANTILES})]
        rows += [(stage, st) for stage, st in (r.get("stages") or {}).items()]
        groups.append((f"{name(r)}\n{r['level_pct']} %", rows))
    stage_names = list(dict.fromkeys(st for _, rows in groups for st, _ in rows))
    markers = dict(zip([q for q, _ in QUANTILES], ("o", "s", "^", "v")))
    cmap = plt.get_cmap("tab10")
    for gi, (_, rows) in enumerate(groups):
        for stage, st in rows:
            si = stage_names.index(stage)
            x = gi - 0.4 + 0.8 * (si + 0.5) / max(1, len(stage_names))
            vals = [st.get(f"{q}_ms") for q, _ in QUANTILES if (st.get(f"{q}_ms") or 0) > 0]
            if vals:
                ax.plot([x, x], [min(vals), max(vals)], "-", color=cmap(si % 10), linewidth=0.8)
            for q, _ in QUANTILES:
                v = st.get(f"{q}_ms")
                if v is not None and v > 0:
                    ax.plot(x, v, markers[q], color=cmap(si % 10), markersize=4,
                            label=f"{stage}" if (gi, q) == (0, "p50") else None)
    for q, m in markers.items():
        ax.plot([], [], m, color="black", label=q.replace("p999", "p99.9"), markersize=4)
    if groups:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xticks(range(len(groups)), [g for g, _ in groups], fontsize=7)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        ax.text(0.5, 0.5, "W3 not run with walrelay", ha="center", transform=ax.transAxes)
    ax.set_ylabel("ms (log)")
    ax.set_title("W3 latency per stage: p50 / p90 / p99 / p99.9 (stages from walrelay's histograms, approximate "
                 "to the bucket; lower is better)")
    ax.grid(axis="y", alpha=0.3, which="both")

    # 3. CPU per event per process, stacked: system, walsender, broker.
    ax = axes[2]
    parts = (("cpu_s_per_m", "system under test", 1.0), ("walsender_cpu_s_per_m", "walsender", 0.55),
             ("broker_cpu_s_per_m", "Kafka broker", 0.25))
    bars = [(f"{r['workload']}\n{name(r)}", r) for r in drains]
    for i, (_, r) in enumerate(bars):
        bottom = 0.0
        for key, what, alpha in parts:
            v = r.get(key)
            if v is None:
                continue
            ax.bar(i, v, 0.7, bottom=bottom, color=color(r), alpha=alpha, edgecolor="black", linewidth=0.3)
            bottom += v
    for key, what, alpha in parts:
        ax.bar(0, 0, color="dimgray", alpha=alpha, edgecolor="black", linewidth=0.3, label=what)
    ax.set_xticks(range(len(bars)), [b for b, _ in bars], rotation=60, ha="right", fontsize=6)
    ax.set_ylabel("CPU s per 1M events")
    ax.set_title("CPU per event, per process, stacked: system under test, walsender (lighter), broker "
                 "(lightest) (drains; lower is better)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", alpha=0.3)

    return fig


def svg_plot(results):
    """figure(results) as SVG text."""
    import matplotlib.pyplot as plt
    fig = figure(results)
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    return buf.getvalue()


def read_first_line(path):
    try:
        with open(path) as f:
            return f.readline().strip()
    except OSError:
        return "?"


def machine_facts(args, load_at_start):
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"model name\s*:\s*(.*)", f.read())
            cpu = m.group(1) if m else ""
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            m = re.search(r"MemTotal:\s*(\d+)", f.read())
            mem = f"{int(m.group(1)) / 2**20:.1f} GiB"
    except OSError:
        pass

    def version(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True).stdout.strip().splitlines()[0]
        except (OSError, IndexError):
            return "?"
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    return {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory": mem,
        "kernel": platform.release(),
        "load_average_at_start": load_at_start,
        # The walsender's socket paces and coalesces its sends by it (BBR
        # coalesces on loopback, CUBIC does not): docs/benchmarks.md.
        "tcp_congestion_control": read_first_line("/proc/sys/net/ipv4/tcp_congestion_control"),
        "postgres": version(["pg_config", "--version"]),
        "java": java[0] if java else "?",
        "walrelay_commit": version(["git", "-C", REPO, "rev-parse", "--short", "HEAD"]),
        "worktree_dirty": bool(subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                                              capture_output=True, text=True).stdout.strip()),
    }


def report(args, facts, results, command):
    smoke = args.quick
    head = []
    if smoke:
        head.append("> **Smoke run (`--quick`, small sizes): it checks that the tooling works; "
                    "these numbers are not the result.**\n")
    head.append(f"Command: `{command}`  \n"
                f"Date: {facts['date_utc']}, walrelay {facts['walrelay_commit']}"
                f"{' (uncommitted changes)' if facts['worktree_dirty'] else ''}  \n"
                f"Machine: {facts['nproc']} CPUs ({facts['cpu']}), {facts['memory']}, Linux {facts['kernel']}, "
                f"load average at start {facts['load_average_at_start']}, "
                f"TCP congestion control {facts.get('tcp_congestion_control', '?')}  \n"
                f"{facts['postgres']}, Kafka 4.1.1 (single KRaft node), {facts['java']}; "
                f"everything co-located on this machine.  \n"
                f"pgoutput options (walrelay's, and the baselines'): "
                f"{', '.join(f'{k}={v}' for k, v in facts['pgoutput_options'].items())}"
                + (f"; W5: {', '.join(f'{k}={v}' for k, v in facts['pgoutput_options_w5'].items())}"
                   if "W5" in args.only.upper().split(",") else "") + "\n")
    only = args.only.upper().split(",")
    parts = {
        "W1": f"W1 {args.w1:,} single-event transactions (insert + delete)",
        "W2": f"W2 {args.w2:,} rows in {args.w2_batch}-row insert-only transactions",
        "W3": f"W3 {', '.join(f'{x} %' for x in args.levels)} of the W1 ceiling for {args.w3_seconds} s each "
              f"after a {args.w3_warmup} s warm-up (pgbench -R, {args.clients} clients, one event per transaction)",
        "W4": f"W4 one transaction of {args.w4:,} rows",
        "W5": f"W5 {args.w5:,} single-event transactions, each one outbox_emit() "
              f"(pg_logical_emit_message(true, '{MESSAGE_PREFIX}', <the event as JSON>)), after the writer's cost "
              f"of both styles ({args.writer_rounds} x {args.writer_seconds} s each, {args.clients} pgbench clients)",
    }
    sizes = ("Sizes: " + "; ".join(v for k, v in parts.items() if k in only) +
             f". Payload: about {args.payload_bytes} bytes of JSON (jsonb).\n")
    gen = getattr(args, "w3_generator_max", None)
    if gen:
        sizes += (f"\nW3's generator, pgbench with {args.clients} clients and no rate limit, committed "
                  f"{gen:,.0f} events/s at most in this run with nothing decoding the WAL: levels above "
                  f"that cannot be offered on this machine.\n")
    pin = {"off": "none, every process on every CPU",
           "on": f"the walsender of the system measured alone on CPU {WALSENDER_CPU}, everything else on "
                 f"CPU {OTHERS_CPU}",
           "both": f"both modes from the same backlogs: unpinned, and the walsender alone on CPU {WALSENDER_CPU} "
                   f"with everything else on CPU {OTHERS_CPU}"}[args.pin]
    sizes += f"\nCPU pinning (`--pin {args.pin}`): {pin}.\n"
    # The targets are stated for the unpinned machine (or the only mode run).
    first = [r for r in results if r.get("pinned", False) == PIN_MODES[args.pin][0]]
    return "\n".join(head) + "\n" + sizes + "\n### Backlog drains (W1, W2, W4, W5)\n\n" + \
        per_mode(results, drain_table) + \
        "\n\n### The walsender while it drained\n\n" + WALSENDER_NOTE + "\n\n" + per_mode(results, walsender_table) + \
        "\n\n### Two outbox styles: table (W1) and messages (W5)\n\n" + styles_table(first) + \
        "\n\n### Steady load (W3)\n\n" + per_mode(results, w3_table) + \
        "\n\n### W3 latency by stage\n\n" + STAGES_NOTE + "\n\n" + per_mode(results, stages_table) + \
        "\n\n### Where the CPU went\n\n" + per_mode(results, cpu_table) + \
        "\n\n### Targets\n\n" + targets(first) + \
        "\n\n![throughput and latency](benchmarks.svg)\n"


def per_mode(results, table):
    """`table` of the results, once per CPU mode when the run had both."""
    modes = sorted({r.get("pinned", False) for r in results})
    if len(modes) < 2:
        return table(results)
    titles = {False: "Unpinned (every process on every CPU):",
              True: f"Pinned (the walsender of the system measured alone on CPU {WALSENDER_CPU}, everything else "
                    f"on CPU {OTHERS_CPU}):"}
    return "\n\n".join(f"{titles[m]}\n\n{table([r for r in results if r.get('pinned', False) == m])}" for m in modes)


def styles_table(results):
    """The writer's cost of each outbox style, and W5's drains next to W1's."""
    writers = {r["system"]: r for r in results if r["workload"] == "writer"}
    w1 = {r["system"]: r for r in results if r["workload"] == "W1" and "error" not in r}
    w5 = {r["system"]: r for r in results if r["workload"] == "W5" and "error" not in r}
    if not writers and not w5:
        return "Not run (W5 not in `--only`)."
    out = []
    ok = {k: v for k, v in writers.items() if "error" not in v}
    if writers:
        base = ok.get("table", {}).get("tps")
        lines = ["| outbox style | each transaction | transactions/s (median) | every round | vs table | "
                 "PostgreSQL CPU µs / transaction | WAL bytes / transaction | VACUUM after the run: s / CPU s |",
                 "|---|---|--:|--:|--:|--:|--:|--:|"]
        for style, (what, _) in WRITERS.items():
            w = writers.get(style)
            if not w:
                continue
            if "error" in w:
                lines.append(f"| {style} | {what} | failed: {w['error']} | | | | | |")
                continue
            lines.append(f"| {style} | {what} | {fmt(w['tps'])} | {' / '.join(fmt(x) for x in w['rounds'])} | "
                         f"{fmt(w['tps'] / base if base else None, '.2f')} | {fmt(w['pg_cpu_us_per_txn'], '.0f')} | "
                         f"{fmt(w['wal_bytes_per_txn'], ',.0f')} | {w['vacuum_s']:.2f} / {w['vacuum_cpu_s']:.2f} |")
        any_w = next(iter(ok.values()), None)
        head = (f"The writer's cost: pgbench without a rate limit, {any_w['clients']} clients, {any_w['seconds']} s "
                f"per run, styles interleaved, nothing decoding the WAL; PostgreSQL's CPU is the whole cluster's "
                f"(backends, WAL writer, checkpointer), autovacuum off for the outbox meanwhile, then one VACUUM "
                f"of the outbox measured on its own.\n\n") if any_w else ""
        out.append(head + "\n".join(lines))
    if w5:
        def per_event(r, key):
            return r.get(key) if r else None

        lines = ["| system | W1 events/s (table) | W5 events/s (messages) | W5 / W1 | CPU s / 1M events: W1 / W5 | "
                 "walsender CPU s / 1M: W1 / W5 | broker CPU s / 1M: W1 / W5 | peak RSS MB: W1 / W5 |",
                 "|---|--:|--:|--:|--:|--:|--:|--:|"]
        for system, b in w5.items():
            a = w1.get(system)
            ra, rb = per_event(a, "events_per_s"), b["events_per_s"]

            def pair(key, spec=".1f"):
                return f"{fmt(per_event(a, key), spec)} / {fmt(b.get(key), spec)}"
            lines.append(f"| {label(system)} | {fmt(ra)} | {fmt(rb)} | {fmt(rb / ra if ra else None, '.2f')} | "
                         f"{pair('cpu_s_per_m')} | {pair('walsender_cpu_s_per_m')} | {pair('broker_cpu_s_per_m')} | "
                         f"{pair('peak_rss_mb')} |")
        facts = []
        any1, any5 = next(iter(w1.values()), None), next(iter(w5.values()))
        if any1:
            facts.append(f"WAL per event in the backlog: W1 {any1['backlog_mib'] * 2**20 / any1['events']:,.0f} bytes, "
                         f"W5 {any5['backlog_mib'] * 2**20 / any5['events']:,.0f} bytes")
        ws1, ws5 = w1.get("walsender", {}), w5.get("walsender", {})
        if ws5.get("walsender_messages_per_event") is not None:
            facts.append(f"pgoutput messages the walsender sent per event (walsender reader): W1 "
                         f"{fmt(ws1.get('walsender_messages_per_event'), '.2f')}, W5 "
                         f"{fmt(ws5.get('walsender_messages_per_event'), '.2f')}; pgoutput bytes per event: W1 "
                         f"{fmt(ws1.get('reader', {}).get('bytes', 0) / ws1['events'] if ws1 else None, ',.0f')}, W5 "
                         f"{fmt(ws5['reader'].get('bytes', 0) / ws5['events'], ',.0f')}")
        out.append("Drains of the two backlogs by the same systems (each row's W1 and W5 from this run; "
                   "W1 and W5 may differ in size, the rates are per event).\n\n" + "\n".join(lines)
                   + ("\n\n" + ".  \n".join(facts) + "." if facts else ""))
    return "\n\n".join(out)


def cpu_table(results):
    rows = [r for r in results if r.get("cpu_share")]
    if not rows:
        return "Not profiled (run with `--profile`)."
    lines = ["| workload | system | " + " | ".join(PART_LABELS[k] for k in PARTS) + " |",
             "|---|---|" + "--:|" * len(PARTS)]
    for r in rows:
        w = r["workload"] + (f" {r['level_pct']} %" if r["workload"] == "W3" else "")
        lines.append(f"| {w} | {label(r['system'])} | " +
                     " | ".join(f"{r['cpu_share'][k]:.0f} %" for k in PARTS) + " |")
    return ("Share of the machine's CPUs (all cores = 100 %) while each system drained or each W3 level ran, "
            "from `perf record -a`; each process's hottest symbols are in `runs/*/profile.txt`.\n\n" +
            "\n".join(lines))


def update_docs(block, svg):
    """The results block of docs/benchmarks.md and docs/benchmarks.svg."""
    path = os.path.join(REPO, "docs", "benchmarks.md")
    begin, end = "<!-- results:begin (written by benches/run.sh) -->", "<!-- results:end -->"
    with open(path) as f:
        text = f.read()
    if begin not in text or end not in text:
        raise BenchError(f"{path} lacks the {begin} / {end} markers")
    benchlib.update_docs(block, begin, end, None)
    with open(os.path.join(REPO, "docs", "benchmarks.svg"), "w") as f:
        f.write(svg)


# --------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke sizes: 20k events, W3 15 s per level")
    ap.add_argument("--only", default="W1,W2,W3,W4,W5", help="workloads, comma-separated (W3 needs W1's ceiling "
                    "or --ceiling-rate; W5 also measures the writer's cost of both outbox styles)")
    ap.add_argument("--systems", default=",".join(SYSTEMS),
                    help="systems, comma-separated; a variant is BASE[@LABEL][:KEY=VALUE...], e.g. "
                    "walrelay@base (the binary of --walrelay-binary base=PATH), "
                    "walrelay:replication.read_coalesce_us=0 (a TOML override of a dotted key of "
                    "walrelay's configuration; strings quoted: 'walrelay:replication.publication=\"bench_iu\"' "
                    "or bare), walrelay@base:kafka.producer.linger.ms=1, walrelay-eos:max_events=50000, "
                    "walsender:publication=bench_iu (a pgoutput option of a baseline)")
    ap.add_argument("--w1", type=int)
    ap.add_argument("--w2", type=int)
    ap.add_argument("--w2-batch", type=int, default=100)
    ap.add_argument("--rounds", type=int, help="drains of each backlog by the baselines and walrelay, "
                    "interleaved; the median is reported (default 3, --quick 1)")
    ap.add_argument("--w4", type=int)
    ap.add_argument("--w5", type=int, help="W5 (message outbox) backlog, single-event transactions "
                    "(default 500,000, --quick 20,000)")
    ap.add_argument("--writer-seconds", type=int, help="seconds per writer's-cost run before W5 (default 15, "
                    "--quick 5)")
    ap.add_argument("--writer-rounds", type=int, help="writer's-cost rounds per outbox style, interleaved "
                    "(default 2, --quick 1)")
    ap.add_argument("--w3-seconds", type=int)
    ap.add_argument("--w3-warmup", type=int, help="W3 warm-up seconds at the lowest level, not measured "
                    "(default 30, --quick 5)")
    ap.add_argument("--levels", default="25,50,75", help="W3 load levels, %% of the ceiling")
    ap.add_argument("--w3-systems", default=None, help="the systems W3 measures, comma-separated "
                    "(default: those of --systems)")
    ap.add_argument("--ceiling-rate", type=float, help="W3 ceiling events/s when W1 is not run")
    ap.add_argument("--clients", type=int, default=4, help="pgbench clients for W3")
    ap.add_argument("--note-len", type=int, default=200, help="length of the payload's filler string")
    ap.add_argument("--walrelay-replication", default="",
                    help="TOML lines added to walrelay's [replication] section, for A/B runs, "
                    "e.g. 'read_coalesce_us = 0'")
    ap.add_argument("--walrelay-extra", default="",
                    help="TOML appended to walrelay's configuration, for A/B runs of one setting "
                    "(\\n separates lines), e.g. '[runtime]\\nworker_threads = 2'")
    ap.add_argument("--walrelay-producer", default="",
                    help="librdkafka settings for walrelay's producer, for A/B runs: key=value,key=value")
    ap.add_argument("--walrelay", default=os.path.join(REPO, "target", "release", "walrelay"),
                    help="the walrelay binary (default: target/release/walrelay)")
    ap.add_argument("--walrelay-binary", action="append", default=[], metavar="LABEL=PATH",
                    help="another walrelay binary, measured as the system walrelay@LABEL (repeatable; "
                    "benches/run.sh --baseline-rev REV builds one)")
    ap.add_argument("--streaming", choices=["auto", "on", "off"], default="auto",
                    help="walrelay's replication.streaming (auto: its default) and the ceiling's matching "
                    "pgoutput options")
    ap.add_argument("--walsender-drain", default=None,
                    help="the walsender baseline's binary (benches/run.sh builds it and passes it)")
    ap.add_argument("--docs", action="store_true", help="write the results into docs/benchmarks.md")
    ap.add_argument("--profile", action="store_true",
                    help="sample every CPU with perf while each system drains and each W3 level runs: "
                    "where the machine's time went, and each process's hottest symbols (runs/*/profile.txt)")
    ap.add_argument("--pin", choices=list(PIN_MODES), default="off",
                    help="on: the walsender of the system measured alone on CPU 0 (moved there as soon as its "
                    "pid shows in pg_replication_slots.active_pid), everything else on CPU 1 (PostgreSQL's other "
                    "processes, Kafka's JVM, the system under test, pgbench, the bench); both: every drain and "
                    "W3 system in both modes, unpinned then pinned, from the same backlogs, two tables each; "
                    "off (default): no pinning")
    ap.add_argument("--keep-servers", action="store_true", help="leave PostgreSQL and Kafka running")
    ap.add_argument("--self-check", action="store_true",
                    help="check the metrics parser and the configuration writer on synthetic input, then exit")
    ap.add_argument("--command", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.self_check:
        self_check()
        return 0
    q = args.quick
    args.w1 = args.w1 or (20_000 if q else 500_000)
    args.w2 = args.w2 or (20_000 if q else 1_000_000)
    args.w4 = args.w4 or (20_000 if q else 1_000_000)
    args.w5 = args.w5 or (20_000 if q else 500_000)
    args.writer_seconds = args.writer_seconds or (5 if q else 15)
    args.writer_rounds = max(1, args.writer_rounds or (1 if q else 2))
    args.w3_seconds = args.w3_seconds or (15 if q else 120)
    args.rounds = max(1, args.rounds or (1 if q else 3))
    if args.w3_warmup is None:
        args.w3_warmup = 5 if q else 30
    args.levels = [int(x) for x in args.levels.split(",")]
    if args.pin != "off" and not {WALSENDER_CPU, OTHERS_CPU} <= os.sched_getaffinity(0):
        sys.exit(f"--pin needs CPUs {WALSENDER_CPU} and {OTHERS_CPU}; this process may use "
                 f"{sorted(os.sched_getaffinity(0))}")
    only = args.only.upper().split(",")
    systems = [s for s in args.systems.split(",") if s]
    w3_systems = [s for s in (args.w3_systems or args.systems).split(",") if s]
    args.walrelay_binaries = {}
    for spec in args.walrelay_binary:
        name, eq, path = spec.partition("=")
        if not eq or not re.fullmatch(r"[^\s:=,@]+", name) or not os.access(path, os.X_OK):
            sys.exit(f"--walrelay-binary {spec}: LABEL=PATH of an executable (LABEL without : = , @ or spaces)")
        args.walrelay_binaries[name] = os.path.abspath(path)
    for s in systems + w3_systems:
        try:
            v = Variant(s)
        except ValueError as e:
            sys.exit(str(e))
        if v.binary and v.binary not in args.walrelay_binaries:
            sys.exit(f"{s}: no --walrelay-binary {v.binary}=PATH")
    # Drained in the order given (the default lists the ceiling first).
    systems = list(dict.fromkeys(systems))
    w3_systems = list(dict.fromkeys(w3_systems))

    load_at_start = " ".join(open("/proc/loadavg").read().split()[:3])
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = os.path.join(BENCH_DIR, "results", stamp)
    os.makedirs(out, exist_ok=True)
    command = args.command or " ".join(shlex.quote(a) for a in sys.argv)
    env = Env(args, out)
    results = []

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_signal)
    try:
        env.start()
        args.payload_bytes = len(env.db.value("SELECT bench_payload(123456, 1234567)::text"))
        log(f"payload: {args.payload_bytes} bytes of JSON; results in {out}")
        warm_broker(env, 20_000 if q else 400_000, out)
        env.set_pinned(PIN_MODES[args.pin][0])
        if "W1" in only:
            results += workload_drain(env, "W1", args.w1, lambda: env.db.query(f"CALL load_single({args.w1})"),
                                      systems, out)
        if "W2" in only:
            results += workload_drain(env, "W2", args.w2,
                                      lambda: env.db.query(f"CALL load_batched({args.w2}, {args.w2_batch})"),
                                      systems, out)
        if "W4" in only:
            results += workload_drain(
                env, "W4", args.w4,
                lambda: env.db.query("INSERT INTO outbox SELECT gen_random_uuid(), 'Order', 'order-' || (g % 1000), "
                                     f"'OrderCreated', bench_payload(g, 0) FROM generate_series(1, {args.w4}) g"),
                systems, out)
        if "W5" in only:
            try:
                results += writer_cost(env, args.clients, args.writer_seconds, args.writer_rounds, out)
            except BenchError as e:
                log(f"writer's cost FAILED: {e}")
                results.append({"workload": "writer", "system": "table", "error": str(e).splitlines()[0]})
            results += workload_drain(env, "W5", args.w5,
                                      lambda: env.db.query(f"CALL load_messages({args.w5})"), systems, out)
        if "W3" in only:
            ceiling = args.ceiling_rate or next((r["events_per_s"] for r in results
                                                 if r["workload"] == "W1" and r["system"] == "ceiling"
                                                 and "error" not in r), None)
            if not ceiling:
                raise BenchError("W3 needs the W1 ceiling: run W1 too or pass --ceiling-rate")
            results += workload_w3(env, ceiling, args.levels, args.w3_seconds, w3_systems, out, args.clients,
                                   args.w3_warmup)
    except (BenchError, KeyboardInterrupt) as e:
        log(f"stopped: {e}")
        results.append({"workload": "-", "system": "-", "error": str(e)})
        return_code = 1
    else:
        return_code = 0
    finally:
        env.stop()
    results = [r for r in results if r["workload"] != "-"]
    facts = machine_facts(args, load_at_start)
    facts["pgoutput_options"] = pgoutput_options(args.streaming, getattr(env, "server_version_num", 0))
    facts["pgoutput_options_w5"] = message_options(args.streaming, getattr(env, "server_version_num", 0))
    block = report(args, facts, results, command)
    svg = svg_plot(results)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"command": command, "machine": facts, "quick": args.quick, "pin": args.pin,
                   "pin_modes": {"unpinned": "every CPU for everything",
                                 "pinned": f"the walsender of the system measured alone on CPU {WALSENDER_CPU}, "
                                           f"everything else on CPU {OTHERS_CPU}"},
                   "results": results}, f, indent=1)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(block)
    with open(os.path.join(out, "benchmarks.svg"), "w") as f:
        f.write(svg)
    print(block)
    log(f"results: {out}/results.json, results.md, benchmarks.svg")
    if args.docs and return_code == 0:
        update_docs(block, svg)
        log("docs/benchmarks.md and docs/benchmarks.svg updated")
    return return_code


if __name__ == "__main__":
    sys.exit(main())
