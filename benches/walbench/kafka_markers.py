"""What a read_committed consumer of a transactional topic gets, and when:
the count of committed data records, and each committed transaction's
COMMIT marker (its offset and LogAppendTime), the moment its records became
visible.

Every client library hides control records, markers included, so this is
the one Kafka reader that stays hand-made: it sends Fetch v4 at
isolation_level read_committed itself (nothing past the last stable offset)
and walks the record-batch headers, never decompressing a batch. Data
batches wait, per partition and producer, for their producer's next
marker: COMMIT counts them, ABORT drops them. End offsets would count the
markers (one per partition per transaction) and records not committed
yet. The last stable offsets, which say when a new fetch is worth it, come
from confluent-kafka's AdminClient.list_offsets at read_committed.
"""

import bisect
import socket
import struct

from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from . import BenchError
from .kafka import PARTITIONS

FETCH, FETCH_VERSION = 1, 4
# Record batch (magic 2) attributes.
TRANSACTIONAL, CONTROL, LOG_APPEND_TIME = 0x10, 0x20, 0x08
# The control record's type: 0 ABORT, 1 COMMIT.
COMMIT = 1
# A batch header: base offset (8), length (4), then 49 more bytes to the record count.
BATCH_HEADER = 61


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
    """The read_committed view of one transactional topic, kept up to date
    by count() and scan()."""

    def __init__(self, bootstrap, admin, topic, partitions=PARTITIONS):
        self.bootstrap = bootstrap
        self.sock = self.rf = None  # connected by the first request
        self.admin = admin
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
        if self.sock is None:
            host, port = self.bootstrap.rsplit(":", 1)
            self.sock = socket.create_connection((host, int(port)), timeout=60)
            self.rf = self.sock.makefile("rb")
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
        """Sum of the partitions' last stable offsets: an upper bound of
        the committed records."""
        futures = self.admin.list_offsets(
            {TopicPartition(self.topic, p): OffsetSpec.latest() for p in range(self.partitions)},
            isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=60)
        try:
            return sum(f.result().offset for f in futures.values())
        except KafkaException as e:
            raise BenchError(f"last stable offsets of {self.topic}: {e}") from e

    def scan(self):
        """Reads every batch up to the last stable offset not read yet."""
        name = self.topic.encode()
        while True:
            # replica -1, max wait 0 ms, min bytes 0, max bytes, read_committed; one topic
            body = struct.pack(">iiiib", -1, 0, 0, 64 << 20, 1) + struct.pack(">ih", 1, len(name)) + name
            body += struct.pack(">i", self.partitions)
            for p in range(self.partitions):
                body += struct.pack(">iqi", p, self.next[p], 16 << 20)
            data = self._request(FETCH, FETCH_VERSION, body)
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
        while pos + BATCH_HEADER <= end:
            base, length = struct.unpack_from(">qi", data, pos)
            if pos + 12 + length > end:
                break  # a partial batch at the end of the response
            attrs, last_delta, _base_ts, max_ts, pid = struct.unpack_from(">hiqqq", data, pos + 21)
            (count,) = struct.unpack_from(">i", data, pos + 57)
            nxt = base + last_delta + 1
            if nxt > self.next[part]:
                self.next[part] = nxt
                progressed = True
                if attrs & CONTROL:
                    self._marker(part, data, pos + BATCH_HEADER, base, attrs, max_ts, pid)
                elif attrs & TRANSACTIONAL:
                    self.pending.setdefault((part, pid), []).append((count, max_ts))
                else:
                    self.committed += count
            pos += 12 + length
        return progressed

    def _marker(self, part, data, r, base, attrs, max_ts, pid):
        """A control batch's one uncompressed record: COMMIT or ABORT of
        the producer's waiting batches."""
        _len, r = zigzag(data, r)
        r += 1  # attributes
        _ts, r = zigzag(data, r)
        _off, r = zigzag(data, r)
        _klen, r = zigzag(data, r)
        _version, kind = struct.unpack_from(">hh", data, r)
        waiting = self.pending.pop((part, pid), [])
        if kind == COMMIT:
            self.committed += sum(c for c, _ in waiting)
            for _, ts in waiting:
                self.first_ts = ts if self.first_ts is None else min(self.first_ts, ts)
            self.markers[part].append((base, max_ts, pid))
            self.marker_ts_types.add("LogAppendTime" if attrs & LOG_APPEND_TIME else "CreateTime")
        else:
            self.aborted += sum(c for c, _ in waiting)

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
        if self.sock is not None:
            self.sock.close()
