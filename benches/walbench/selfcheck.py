"""--self-check: the pieces that need no server, on synthetic input. The
stage histograms of a /api/state document served over real HTTP and read
back through Endpoints, the percentiles, the TOML writer and its overrides,
the variants, the walsender's summaries, the COMMIT-marker walk over
hand-built record batches, and the tables that format them. Exits non-zero
(an AssertionError) on the first wrong answer."""

import http.server
import json
import os
import struct
import tempfile
import threading
import tomllib

from . import config
from .kafka_markers import KafkaCommitted
from .procs import Sched
from .broker_drains import slot_name
from .brokers import (BROKERS, Broker, Consumed, Http, Kinesis, Nats, PolledTimes, PubSub, Pulsar, RabbitMQ,
                      RabbitMQStream, Redis, Sqs, make, parse_rfc3339, redis_id_seconds, server_dir, sqs_queue_name)
from .dbz_server import application_properties, properties_overrides
from .report import _extra_java_opts, broker_goals, broker_table, walsender_table
from .stats import histogram_delta, histogram_quantile, percentile
from .systems import Variant, eos_settings
from .walrelay import Endpoints, counters, stage_breakdown, stage_histograms, transaction_counters
from .walsender import bytes_per_segment, sched_summary

INF = float("inf")

# A pipeline of /api/state with the stage histograms (cumulative counts per
# finite upper bound; +Inf is the count), and fields the bench does not read.
STATE = {
    "version": "0.1.0", "ready": True, "sample_interval_seconds": 5.0, "window_seconds": 600.0,
    "pipelines": [{
        "name": "default", "state": "running", "error": None, "ready": True, "source": "wal",
        "events_total": 110, "events_per_second": 10.0, "in_flight": 0,
        "stage_seconds": {"produce_to_ack": {"count": 110, "sum_seconds": 1.5, "buckets": [
            {"le": 0.001, "count": 20}, {"le": 0.002, "count": 60}, {"le": 0.004, "count": 100}]}},
        "commit_to_ack": {"count": 4, "sum_seconds": 0.02, "buckets": [{"le": 0.01, "count": 4}]},
        "exactly_once": {"committed_lsn": "0/16B3748", "committed_events": 0, "transactions_committed": 3,
                         "transactions_aborted": 0, "producer_fenced": False},
        "poll": None,
        "history": [{"age_seconds": 1.0}],
    }],
}


def check_histograms():
    h = stage_histograms(STATE["pipelines"][0])[("stage_seconds", "produce_to_ack")]
    assert h["buckets"] == [(0.001, 20.0), (0.002, 60.0), (0.004, 100.0), (INF, 110.0)], h
    assert h["count"] == 110 and h["sum"] == 1.5, h
    # rank 55 of 110: 35 of the 40 in (1 ms, 2 ms]
    assert abs(histogram_quantile(h, 0.5) - (0.001 + 0.001 * 35 / 40)) < 1e-12
    assert abs(histogram_quantile(h, 0.1) - 0.001 * 11 / 20) < 1e-12
    assert histogram_quantile(h, 0.99) == 0.004  # in +Inf: the last finite bound
    before = {"buckets": [(0.001, 20.0), (0.002, 20.0), (0.004, 20.0), (INF, 20.0)], "count": 20, "sum": 0.5}
    d = histogram_delta(h, before)
    assert d["count"] == 90 and abs(histogram_quantile(d, 0.5) - 0.00225) < 1e-12, d
    assert histogram_quantile({"buckets": [(0.001, 0.0), (INF, 0.0)]}, 0.5) is None
    rows = stage_breakdown({}, stage_histograms(STATE["pipelines"][0]))
    assert rows["produce_to_ack"]["count"] == 110 and rows["walrelay_commit_to_ack_seconds"]["p50_ms"] == 5.0, rows
    # A binary whose state has no stage histograms (commit_to_ack without
    # buckets, or nothing): no breakdown.
    old = {k: v for k, v in STATE["pipelines"][0].items() if k not in ("stage_seconds", "commit_to_ack")}
    assert stage_histograms(old) == {} and stage_breakdown({}, stage_histograms(old)) is None
    old["commit_to_ack"] = {"count": 4, "sum_seconds": 0.02}
    assert stage_histograms(old) == {} and stage_breakdown({}, stage_histograms(old)) is None
    assert stage_histograms(None) is None and transaction_counters(None) is None
    assert transaction_counters(STATE["pipelines"][0])["transactions_committed"] == 3
    assert transaction_counters(old | {"exactly_once": None}) == {}
    assert "history" not in counters(STATE["pipelines"][0])


def check_endpoints():
    """Endpoints finds the address in a coloured log and reads the state
    and /readyz over HTTP."""
    body = json.dumps(STATE).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            status, out = {"/api/state": (200, body), "/readyz": (503, b"not ready\n")}.get(self.path, (404, b""))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *_):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as d:
        logf = os.path.join(d, "walrelay.log")
        e = Endpoints(logf)
        assert e.address() is None  # no log yet
        with open(logf, "w") as f:
            f.write(f"\x1b[2m2026-01-01T00:00:00Z\x1b[0m \x1b[32m INFO\x1b[0m metrics and health endpoints "
                    f"\x1b[3mlisten\x1b[0m\x1b[2m=\x1b[0m127.0.0.1:{server.server_port}\n")
        assert e.address() == f"127.0.0.1:{server.server_port}", e.address()
        assert e.pipeline()["events_total"] == 110
        assert not e.ready()  # 503
    server.shutdown()


def check_config():
    cfg = {"a": {"b": 1, "c": {"d": "x"}}, "kafka": {"producer": {"linger.ms": "5"}}, "e": ["y", "z"],
           "pipelines": [{"name": "p0", "postgres": {"dbname": "b0"}}, {"name": "p1", "postgres": {"dbname": "b1"}}]}
    assert tomllib.loads(config.dump(cfg)) == cfg
    cfg = {"kafka": {"producer": {}}}
    config.set_dotted(cfg, "kafka.producer.linger.ms", 1)
    config.set_dotted(cfg, "replication.read_coalesce_us", 0)
    assert cfg == {"kafka": {"producer": {"linger.ms": "1"}}, "replication": {"read_coalesce_us": 0}}, cfg
    config.merge(cfg, "read_coalesce_us = 1000\\nstreaming = false", "replication")
    config.merge(cfg, '[runtime]\\nworker_threads = 2\\n[kafka.producer]\\n"batch.size" = "1000"')
    assert cfg == {"kafka": {"producer": {"linger.ms": "1", "batch.size": "1000"}}, "runtime": {"worker_threads": 2},
                   "replication": {"read_coalesce_us": 1000, "streaming": False}}, cfg
    assert config.scalar("0") == 0 and config.scalar("true") is True and config.scalar("bench_iu") == "bench_iu"
    assert config.scalar('"x"') == "x"


def check_variants():
    assert Variant("walrelay@base:replication.publication=bench_iu").overrides == [("replication.publication",
                                                                                    "bench_iu")]
    assert eos_settings("walrelay-eos:max_events=5") == {"max_events": 5}


def check_percentiles():
    vals = list(range(1, 1001))
    assert percentile(vals, 0.5) == 500 and percentile(vals, 0.99) == 990 and percentile(vals, 0.999) == 999
    assert percentile(vals, 1.0) == 1000 and percentile([7], 0.5) == 7 and percentile([], 0.5) is None


def check_walsender():
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


def batch(base, count, attrs, max_ts, pid, records=b""):
    """A record batch (magic 2) of `count` records: its header, then
    `records` (a data batch's records are never read)."""
    rest = struct.pack(">ibihiqqqhii", 0, 2, 0, attrs, count - 1, max_ts, max_ts, pid, 0, 0, count) + records
    return struct.pack(">qi", base, len(rest)) + rest


def control(base, kind, max_ts, pid):
    """A control batch: COMMIT (1) or ABORT (0), LogAppendTime."""
    # length, attributes, timestamp delta 0, offset delta 0, key length 4
    # (zigzag varints), the key: version 0, type; no value, no headers.
    record = bytes([2 * 10, 0, 0, 0, 2 * 4]) + struct.pack(">hh", 0, kind) + bytes([1, 0])
    return batch(base, 1, 0x20 | 0x10 | 0x08, max_ts, pid, record)


def check_markers():
    view = KafkaCommitted("127.0.0.1:9", None, "t", partitions=1)  # never connects
    data = (batch(0, 3, 0x10, 1000, 7) + control(3, 1, 1005, 7)     # 3 records, committed at 1005
            + batch(4, 2, 0x10, 1010, 7) + control(6, 0, 1011, 7)   # 2 records, aborted
            + batch(7, 4, 0, 1020, -1))                             # 4 not transactional
    assert view._batches(0, data, 0, len(data))
    assert view.committed == 7 and view.aborted == 2 and view.next[0] == 11, vars(view)
    assert view.markers[0] == [(3, 1005, 7)] and view.marker_ts_types == {"LogAppendTime"}
    assert view.visible_ms(0, 1) == 1005 and view.visible_ms(0, 8) is None and view.last_commit_ms() == 1005
    assert not view._batches(0, data, 0, len(data))  # read already


class FakeBroker(Broker):
    kind = "fake"

    def sink_properties(self, dest):
        return {"debezium.sink.type": "fake", "debezium.sink.fake.url": "x/" + dest}


def check_brokers():
    assert parse_rfc3339("2026-12-04T23:10:00.123456789Z") == 1796425800.123456789
    assert parse_rfc3339("2026-12-04T23:10:00Z") == 1796425800
    assert parse_rfc3339("2026-12-05T01:10:00.5+02:00") == 1796425800.5
    assert parse_rfc3339("0001-01-01T00:00:00Z") is None and parse_rfc3339(None) is None
    assert redis_id_seconds(b"1796424081762-2") == 1796424081.762
    assert len(slot_name("w2", "redis", "walrelay_" + "x" * 80, "0")) == 63
    assert slot_name("w1", "nats", "walrelay", "0") == "bench_w1_nats_walrelay_0"
    props = dict(application_properties(5432, FakeBroker("/nowhere"), "s1", "bench.t.w1", properties_overrides(
        "dbz_server:debezium.source.max.batch.size=8192")))
    assert props["debezium.sink.type"] == "fake" and props["debezium.source.slot.name"] == "s1", props
    assert props["debezium.transforms.outbox.route.topic.replacement"] == "bench.t.w1", props
    assert props["debezium.source.max.batch.size"] == "8192", props
    assert properties_overrides("walrelay@base") == []
    # RabbitMQ's times: midpoints between the polls around each change.
    t = PolledTimes()
    for at, n in ((10.0, 0), (10.2, 0), (10.4, 5), (10.6, 9), (10.8, 10), (11.0, 10)):
        t.saw(n, at)
    assert (t.first, t.last, t.last_n) == (10.3, 10.7, 10), (t.first, t.last)
    # Every kind of the drains, the sink type Debezium Server reads; the
    # two RabbitMQ kinds share one node.
    assert {k: c.sink_type for k, c in BROKERS.items()} == {
        "nats": "nats-jetstream", "redis": "redis", "rabbitmq": "rabbitmq", "rabbitmqstream": "rabbitmqstream",
        "http": "http", "sqs": "sqs", "kinesis": "kinesis", "pubsub": "pubsub", "pulsar": "pulsar"}
    assert server_dir("/b", "rabbitmqstream") == server_dir("/b", "rabbitmq") == "/b/rabbitmq"
    assert server_dir("/b", "sqs") == server_dir("/b", "kinesis") == "/b/moto"
    # moto: one queue per drain (a name SQS takes), the stream is the
    # topic; both systems get the test keys, Debezium Server's JVM JSON
    # instead of CBOR for Kinesis.
    assert sqs_queue_name("bench.20261206t1400z.w1.sqs.walrelay.r1") == "bench-20261206t1400z-w1-sqs-walrelay-r1"
    long_name = sqs_queue_name("bench." + "x" * 100)
    assert len(long_name) == 80 and long_name != sqs_queue_name("bench." + "x" * 101), long_name
    sqs = Sqs("/nowhere")
    sqs.port = 4566
    sp = dict(application_properties(5432, sqs, "s1", "bench.t.w1.sqs", ()))
    assert sp["debezium.sink.type"] == "sqs" and sp["debezium.sink.sqs.endpoint"] == "http://127.0.0.1:4566", sp
    assert sp["debezium.sink.sqs.queue.url"] == "http://127.0.0.1:4566/123456789012/bench-t-w1-sqs", sp
    assert sp["debezium.transforms.outbox.route.topic.replacement"] == "bench.t.w1.sqs", sp
    kin = Kinesis("/nowhere")
    kin.port = 4566
    kp = dict(application_properties(5432, kin, "s1", "bench.t.w1.kinesis", ()))
    assert kp["debezium.sink.kinesis.region"] == "us-east-1" and "debezium.sink.kinesis.stream.name" not in kp, kp
    assert kin.dbzs_java_opts == "-Daws.cborEnabled=false" and sqs.dbzs_java_opts == ""
    assert kin.publisher_env()["AWS_ACCESS_KEY_ID"] == "test" and sqs.publisher_env()["AWS_EC2_METADATA_DISABLED"] == "true"
    assert RabbitMQ("/nowhere").publisher_env() == {}
    assert _extra_java_opts([{"broker": "kinesis", "dbzs_java_opts": "-XX:+UseG1GC -Daws.cborEnabled=false"},
                             {"broker": "sqs", "dbzs_java_opts": "-XX:+UseG1GC"}], "-XX:+UseG1GC") == \
        ", on kinesis `-XX:+UseG1GC -Daws.cborEnabled=false`"
    # What the bench read: distinct bodies, a repeat is a duplicate; times
    # of the distinct ones.
    c = Consumed()
    for body, at in ((b"a", 5.0), (b"b", 3.0), (b"a", 9.0), (b"c", 7.5)):
        c.add(body, at)
    assert c.stored() == (3, 3.0, 7.5, 1.0) and c.notes() == {"read": 4, "duplicates": 1}, (c.stored(), c.notes())
    # A digest read with the size of what it names (Pub/Sub's drain mode).
    c.add(bytes.fromhex("00" * 16), 8.0, 400)
    assert c.stored() == (4, 3.0, 8.0, 100.75), c.stored()
    # Pub/Sub: the emulator's address and a project, ordering at its
    # default (on); the topic is the drain's, its own server directory.
    ps = PubSub("/nowhere")
    ps.port = 8085
    pp = dict(application_properties(5432, ps, "s1", "bench.t.w1.pubsub", ()))
    assert pp["debezium.sink.type"] == "pubsub" and pp["debezium.sink.pubsub.address"] == "127.0.0.1:8085", pp
    assert pp["debezium.sink.pubsub.project.id"] == "walbench" and "debezium.sink.pubsub.ordering.enabled" not in pp
    assert pp["debezium.transforms.outbox.route.topic.replacement"] == "bench.t.w1.pubsub", pp
    assert ps.topic("bench.t.w1") == "projects/walbench/topics/bench.t.w1"
    assert ps.subscription("bench.t.w1") == "projects/walbench/subscriptions/bench.t.w1"
    assert server_dir("/b", "pubsub") == "/b/pubsub" and ps.publisher_env() == {}
    # Pulsar: the binary protocol's URL and a close timeout (at Debezium
    # Server's default 0 every producer close fails); the topic in
    # public/default, named after the drain's.
    pu = Pulsar("/nowhere")
    pu.port = 6650
    pl = dict(application_properties(5432, pu, "s1", "bench.t.w1.pulsar", ()))
    assert pl["debezium.sink.type"] == "pulsar" and pl["debezium.sink.pulsar.timeout"] == "10000", pl
    assert pl["debezium.sink.pulsar.client.serviceUrl"] == "pulsar://127.0.0.1:6650", pl
    assert "debezium.sink.pulsar.tenant" not in pl and "debezium.sink.pulsar.namespace" not in pl, pl
    assert pu.path("bench.t.w1.pulsar") == "/admin/v2/persistent/public/default/bench.t.w1.pulsar"
    assert server_dir("/b", "pulsar") == "/b/pulsar" and pu.dbzs_java_opts == ""
    # examinemessage's X-Pulsar-publish-time: milliseconds, UTC.
    assert parse_rfc3339("2026-12-06T17:21:15.528Z") == 1796577675.528
    assert server_dir("/b", "http") == "/b/http"
    # Across a network (--net lan|zone) NATS and Redis listen on the broker
    # host's address, and both systems are given it; the others cannot.
    assert {k for k, c in BROKERS.items() if c.networked} == {"nats", "redis"}
    na, rd = Nats("/nowhere"), Redis("/nowhere")
    na.port, rd.port = 4222, 6379
    assert na.host == rd.host == "127.0.0.1"
    na.host = rd.host = "10.231.0.3"
    assert na.sink_properties("x")["debezium.sink.nats-jetstream.url"] == "nats://10.231.0.3:4222"
    assert rd.sink_properties("x")["debezium.sink.redis.address"] == "10.231.0.3:6379"
    # Every kind is made as a run makes it (a constructor that does not
    # take the run's arguments crashed --brokers nats at start).
    for kind in BROKERS:
        assert make(kind, "/nowhere", None).kind == kind
    rmq = RabbitMQ("/nowhere")
    rmq.port = 5672
    assert rmq.sink_properties("bench.t.w1") == {"debezium.sink.type": "rabbitmq",
                                                 "debezium.sink.rabbitmq.connection.host": "127.0.0.1",
                                                 "debezium.sink.rabbitmq.connection.port": "5672"}
    rms = RabbitMQStream("/nowhere")
    rms.stream_port = 5552
    assert rms.sink_properties("x")["debezium.sink.rabbitmqstream.port"] == "5552"
    h = Http("/nowhere")
    h.port = 8080
    hp = dict(application_properties(5432, h, "s1", "bench.t.w1.http", ()))
    assert hp["debezium.sink.http.url"] == "http://127.0.0.1:8080/bench.t.w1.http", hp
    assert hp["debezium.format.value"] == "json" and hp["debezium.sink.type"] == "http", hp
    rows = [{"workload": "W1", "broker": "nats", "system": s, "events_per_s": rate, "rounds": [rate],
             "cpu_s_per_m": cpu, "peak_rss_mb": rss, "startup_s": 0.1, "first_record_s": 0.2}
            for s, rate, cpu, rss in (("walrelay", 30000.0, 10.0, 20.0), ("dbz_server", 5000.0, 80.0, 400.0))]
    rows.append({"workload": "W1", "broker": None, "system": "walsender", "events_per_s": 60000.0,
                 "cpu_s_per_m": 2.0, "peak_rss_mb": 50.0})
    table = broker_table(rows)
    assert "| nats | W1 | walrelay | 30,000 | 30,000 | 6.00 | 10.0 | 0.12 | 20.0 | 0.050 |" in table, table
    goals = broker_goals(rows)
    assert "| nats | W1 | walrelay | 6.00 | met | 0.050 | met |" in goals, goals


def self_check():
    check_brokers()
    check_histograms()
    check_endpoints()
    check_config()
    check_variants()
    check_percentiles()
    check_walsender()
    check_markers()
    print("self check passed")
