"""Kafka through confluent-kafka: topics stamped on append, end offsets,
and records read back from the beginning or between offsets.

Every topic the drivers make has PARTITIONS partitions and
`message.timestamp.type=LogAppendTime`, so a record's timestamp is when the
broker appended it: the clock the drains stop and the latencies end at.
What a read_committed consumer cannot tell (when a transaction's COMMIT
marker was appended) is kafka_markers' business.
"""

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic

from . import BenchError

PARTITIONS = 6


def create_topics(admin, topics, partitions=PARTITIONS):
    """Topics of `partitions` partitions whose records the broker stamps on
    append; one that exists already is kept. Returns once the broker's
    metadata has each with a leader for every partition."""
    new = [NewTopic(t, partitions, 1, config={"message.timestamp.type": "LogAppendTime"}) for t in topics]
    for topic, fut in admin.create_topics(new).items():
        try:
            fut.result(timeout=60)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise BenchError(f"creating {topic}: {e}") from e
    for topic in topics:
        deadline = time.time() + 30
        while True:
            md = admin.list_topics(topic, timeout=10).topics.get(topic)
            if md and not md.error and len(md.partitions) == partitions and \
                    all(p.leader >= 0 for p in md.partitions.values()):
                break
            if time.time() > deadline:
                raise BenchError(f"topic {topic} has no leaders in the broker's metadata 30 s after its creation")
            time.sleep(0.1)


class EndOffsets:
    """Topics' end offsets (high watermarks) on the single local broker."""

    def __init__(self, bootstrap, group):
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})

    def of(self, topic, partitions=PARTITIONS):
        """The end offset of every partition, in partition order."""
        out = []
        for p in range(partitions):
            try:
                _, high = self.consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)
            except KafkaException as e:
                raise BenchError(f"end offsets of {topic}[{p}]: {e}") from e
            out.append(high)
        return out

    def count(self, topic, partitions=PARTITIONS):
        """Sum of the end offsets of the topic's partitions."""
        return sum(self.of(topic, partitions))

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
                hid = id_header(m) if headers else None
                out.append((m.timestamp()[1], hid, m.partition(), m.offset()))
            if msgs:
                idle_since = time.time()
        return out[:expect]
    finally:
        c.close()


def id_header(message):
    """The record's `id` header as text, without JSON quotes; None without one."""
    for k, v in message.headers() or ():
        if k == "id":
            return v.decode().strip('"') if v else None
    return None


def range_reader(bootstrap, group):
    """A consumer for read_range: reports partition ends, big fetches."""
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                     "enable.partition.eof": True, "fetch.max.bytes": 64 << 20,
                     "max.partition.fetch.bytes": 16 << 20})


def read_range(consumer, topic, start, end, timeout=120):
    """(LogAppendTime ms, id header or None) of every record between the
    offsets `start` and `end` (one per partition), with a range_reader."""
    want = {p: (s, e) for p, (s, e) in enumerate(zip(start, end)) if e > s}
    out = []
    if not want:
        return out
    consumer.assign([TopicPartition(topic, p, s) for p, (s, _) in want.items()])
    left = set(want)
    deadline = time.time() + timeout
    while left and time.time() < deadline:
        for m in consumer.consume(num_messages=10000, timeout=1.0):
            p = m.partition()
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    if m.offset() >= want[p][1]:
                        left.discard(p)
                    continue
                raise BenchError(f"reading {topic}[{p}]: {m.error()}")
            if m.offset() >= want[p][1]:
                left.discard(p)
                continue
            out.append((m.timestamp()[1], id_header(m)))
            if m.offset() + 1 >= want[p][1]:
                left.discard(p)
    consumer.unassign()
    if left:
        raise BenchError(f"reading {topic}: partitions {sorted(left)} not read to their end in {timeout} s")
    return out
