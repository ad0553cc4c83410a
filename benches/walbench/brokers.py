"""The message brokers other than Kafka that the broker drains publish to
(`--brokers`): each a real server started with scripts/brokers.sh in a
directory of the run's own, on loopback, and a client that makes a fresh
destination per drain, counts what it stores, tells when the first and
last records were stored (the broker's own clock, as Kafka's
LogAppendTime is for the Kafka drains) and drops the destination again.

  nats   nats-server with JetStream (scripts/brokers.sh builds the pinned
         version); one memory-storage stream per drain capturing exactly
         the drain's subject, created by the bench (Debezium Server's
         `create-stream` makes one fixed stream, DebeziumStream, for every
         run); counts and times from the JetStream API (`$JS.API.STREAM.INFO`:
         state.messages, first_ts, last_ts) through nats-py.
  redis  redis-server (Debian's) without persistence; one stream key per
         drain; XLEN, and the millisecond part of the first and last entry
         ids (Redis's clock when it stored them) through redis-py.
  rabbitmq
         rabbitmq-server (Debian's, scripts/brokers.sh, the stream plugin
         on) through AMQP 0-9-1 (Debezium Server's `rabbitmq` sink: the
         exchange is the topic, routing key "", persistent delivery,
         publisher confirms); per drain a durable fanout exchange named
         after the drain's topic, bound to a durable classic queue of the
         same name, created by the bench (neither system declares one);
         counts by a passive queue.declare (message_count) through pika.
         RabbitMQ keeps no time of storage per message, so the first and
         last times are the bench's: the midpoint between the poll that
         last saw fewer and the one that first saw as many (polls every
         0.02 s, about 0.2 ms each).
  rabbitmqstream
         the same RabbitMQ node through its stream protocol (Debezium
         Server's `rabbitmqstream` sink, port DIR/stream_port): per drain
         a stream named after the topic, created by the bench through AMQP
         (`x-queue-type: stream`; Debezium Server would create it); counted
         by reading the last chunk over AMQP (`x-stream-offset: last`: the
         highest offset + 1), polled every 0.2 s, times as for rabbitmq.
         walrelay has no such sink yet (another change brings it): until
         then run it with --broker-systems walsender,dbz_server.
  http   benches/http_receiver.rs (built by run.sh, --http-receiver): a
         hyper server answering 200 to every POST and counting per URL
         path, one path per drain (the URL of `debezium.sink.http.url`);
         counts and the first and last request's arrival (the receiver's
         clock, ns) from its /_walbench/stats; the count is of distinct
         event ids (X-DEBEZIUM-ID), a request sent twice is reported as a
         duplicate (results.json), not counted as an event.
  sqs    moto (scripts/brokers.sh's local AWS endpoint, PyPI's moto[server],
         one server for sqs and kinesis); per drain a standard queue named
         after the topic, created by the bench; both systems get its
         `debezium.sink.sqs.queue.url`. moto's SendMessage computes every
         queue attribute, each a scan of the queue, for every message sent,
         so a queue holding a backlog makes each send slower (a batch of 10
         took 3 s at 4,600 messages deep): the bench consumes as it polls,
         like a consumer of the queue (ReceiveMessage of 10, then
         DeleteMessageBatch), counts distinct bodies (a body received twice
         is a duplicate, results.json), and takes the first and last
         SentTimestamp (moto's clock, ms) of what it received.
  kinesis
         the same moto; per drain a stream named after the topic (the
         EventRouter's route.topic.replacement), 4 shards, created by the
         bench; counted by reading every shard from TRIM_HORIZON on, each
         poll going on from where the last one stopped (GetRecords), and
         timed by the records' ApproximateArrivalTimestamp. Debezium
         Server's JVM gets -Daws.cborEnabled=false (its SDK sends CBOR,
         which moto cannot read): `dbzs_java_opts` below.
  pubsub pstest, the in-memory Pub/Sub fake of Google's Go client library,
         behind scripts/pubsub-emulator (scripts/brokers.sh builds it; gRPC
         in plain text, any project: "walbench"); both systems get its
         `debezium.sink.pubsub.address`. Per drain a topic named after the
         drain's topic and an unordered subscription on it, created by the
         bench through the emulator's admin mode (-admin -topic
         -subscription); the publishers still send ordering keys
         (Debezium Server's default ordering.enabled=true, walrelay's
         translation of it), but an ordered subscription would hand the
         bench one message per key until acknowledged. pstest keeps every
         message ever published in memory (its Messages() accessor), so the
         emulator is restarted before each drain: every drain starts on an
         empty process. It rescans a subscription's unacknowledged messages
         every 10 ms, so the bench consumes as it polls (-admin -drain: Pull
         of 1,000, then Acknowledge, until a pull returns nothing), counts
         distinct messages (a digest of data, ordering key and attributes:
         one read twice is a duplicate, results.json) and takes the first
         and last publish_time (pstest's clock when Publish stored it).
  pulsar Apache Pulsar standalone (scripts/brokers.sh: broker and one
         bookie in one JVM, the journal not fsynced, on loopback); per drain
         a non-partitioned topic persistent://public/default/<topic>,
         created by the bench through the admin REST API (DIR/web_port) and
         deleted after it; the server's directory goes at the end of the
         run. Counted by the topic's stats (msgInCounter: messages, not
         batches; a message sent twice counts twice, so a duplicate shows
         as more than the events written); first and last
         times are the publish times of the first and last entry
         (examinemessage, X-Pulsar-publish-time): the producer's clock
         (the same machine's) when the batch was made, not the broker's
         when it stored it. Debezium Server's `timeout` is 10000: at its
         default 0 every producer close fails.

A broker is one class in BROKERS: what Debezium Server's
application.properties says to reach it (`sink_properties`), what both
systems need in their environment (`publisher_env`: the AWS keys) and
Debezium Server's JVM besides --dbzs-java-opts (`dbzs_java_opts`), and the
client side above. Adding one is a class and a line there; the drains, the
systems and the tables take the list as it is. Kinds that share a server
(rabbitmq, rabbitmqstream) name the same `server_kind`: the run starts it
once (rabbitmq and rabbitmqstream; sqs and kinesis).
"""

import asyncio
import base64
import hashlib
import calendar
import json
import os
import re
import socket
import subprocess
import time

from . import BenchError, log, net, run
from .servers import SCRIPTS


def _brokers_sh(*args, env=None, **kw):
    """scripts/brokers.sh on the broker's host: across a network (net.py)
    in the namespace of Kafka's host, else here."""
    return run(net.CURRENT.wrap("kafka", [os.path.join(SCRIPTS, "brokers.sh"), *args]), env=env, **kw)


def parse_rfc3339(text):
    """Unix seconds of an RFC 3339 time with up to nanoseconds, as
    nats-server writes them (`2026-12-04T23:10:00.123456789Z`); None for
    Go's zero time (an empty stream)."""
    m = re.fullmatch(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", text or "")
    if not m or m.group(1) == "0001":
        return None
    y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
    secs = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0))
    frac = m.group(7) or ""
    secs += int(frac) / 10 ** len(frac) if frac else 0
    tz = m.group(8)
    if tz != "Z":
        sign = 1 if tz[0] == "+" else -1
        secs -= sign * (int(tz[1:3]) * 3600 + int(tz[4:6]) * 60)
    return secs


def redis_id_seconds(entry_id):
    """Unix seconds of a Redis stream entry id (`<ms>-<seq>`)."""
    if isinstance(entry_id, bytes):
        entry_id = entry_id.decode()
    return int(entry_id.split("-", 1)[0]) / 1000


class Broker:
    """A broker server of the run: started once, in `dir`, until the run ends."""

    kind = None
    # scripts/brokers.sh's kind of server (kinds sharing one share it).
    server_kind = None
    # Debezium Server's debezium.sink.type for it.
    sink_type = None
    # Seconds between two counts while a drain runs.
    poll_s = 0.2
    # Debezium Server's JVM options for this broker, after --dbzs-java-opts
    # (its ahead-of-time cache is made per set of options: warm_up).
    dbzs_java_opts = ""

    def publisher_env(self):
        """Environment variables both systems need for this broker."""
        return {}

    # Whether scripts/brokers.sh can start it on another address than
    # 127.0.0.1 (WALRELAY_BROKER_HOST): what a run across benches/net.sh's
    # links (--net lan|zone) needs of a broker.
    networked = False

    def __init__(self, dir_, args=None):
        self.dir = dir_
        self.args = args
        self.pid = None
        self.port = None
        # Where the systems reach it: the broker host's address across a
        # network (net.py: the host Kafka has otherwise), else loopback.
        self.host = "127.0.0.1"

    def start(self):
        # The server stops by itself if the bench dies (a watchdog of
        # brokers.sh); env.stop stops it otherwise. Across a network it
        # runs in the broker host's namespace, listening on its address.
        env = dict(os.environ, WALRELAY_OWNER_PID=str(os.getpid()))
        where = net.CURRENT
        if where.kafka_host != "127.0.0.1":
            if not self.networked:
                raise BenchError(f"{self.kind}: listens on 127.0.0.1 only (scripts/brokers.sh), "
                                 f"so it cannot run across --net {where.cond}")
            self.host = env["WALRELAY_BROKER_HOST"] = where.kafka_host
        _brokers_sh("start", self.server_kind or self.kind, self.dir, env=env, stdout=subprocess.DEVNULL)
        with open(os.path.join(self.dir, "pid")) as f:
            self.pid = int(f.read().strip())
        with open(os.path.join(self.dir, "port")) as f:
            self.port = int(f.read().strip())
        self.connect()
        log(f"{self.kind}: {self.version()}, at {self.host}:{self.port} (pid {self.pid}) in {self.dir}")

    def stop(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass
        _brokers_sh("stop", self.dir, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    # What each broker says.
    def connect(self):
        raise NotImplementedError

    def close(self):
        raise NotImplementedError

    def version(self):
        raise NotImplementedError

    def sink_properties(self, dest):
        """The `debezium.sink.*` lines of Debezium Server's
        application.properties that publish to this server (walrelay reads
        the same file); `dest` is the drain's destination (HTTP's URL
        names it; the others route by the topic)."""
        raise NotImplementedError

    def prepare(self, dest):
        """A fresh, empty destination named `dest` (the record's topic after
        the EventRouter: a NATS subject, a Redis stream key)."""
        raise NotImplementedError

    def count(self, dest):
        raise NotImplementedError

    def stored(self, dest):
        """(records, first stored, last stored (Unix s, the broker's clock),
        bytes per record as the broker holds them or None)."""
        raise NotImplementedError

    def drop(self, dest):
        raise NotImplementedError

    def notes(self, dest):
        """More of the drain's facts the broker knows (results.json), e.g.
        HTTP's requests sent more than once."""
        return {}


class Nats(Broker):
    kind = "nats"
    sink_type = "nats-jetstream"
    label = "NATS JetStream"
    networked = True

    def __init__(self, dir_, args=None):
        super().__init__(dir_, args)
        self.loop = None
        self.nc = None
        self.js = None
        self.streams = {}  # subject -> stream name

    def _run(self, coro):
        return self.loop.run_until_complete(coro)

    def connect(self):
        import nats
        self.loop = asyncio.new_event_loop()
        self.nc = self._run(nats.connect(f"nats://{self.host}:{self.port}", name="walbench",
                                         allow_reconnect=False, connect_timeout=5))
        self.js = self.nc.jetstream()

    def close(self):
        if self.nc is not None:
            self._run(self.nc.close())
            self.nc = None
        if self.loop is not None:
            self.loop.close()
            self.loop = None

    def version(self):
        v = self.nc.connected_server_version
        return f"nats-server {v.major}.{v.minor}.{v.patch}, JetStream on"

    def sink_properties(self, dest):
        # The stream exists before the system starts (prepare): no
        # create-stream, as in production.
        return {"debezium.sink.type": self.sink_type,
                "debezium.sink.nats-jetstream.url": f"nats://{self.host}:{self.port}"}

    @staticmethod
    def stream_name(dest):
        return re.sub(r"[^A-Za-z0-9_-]", "_", dest).upper()

    def prepare(self, dest):
        from nats.js.api import StorageType, StreamConfig
        name = self.stream_name(dest)
        self.drop(dest)
        # Debezium Server's create-stream settings but the subjects: memory
        # storage, limits retention, one replica, the 2-minute duplicate
        # window.
        self._run(self.js.add_stream(StreamConfig(name=name, subjects=[dest], storage=StorageType.MEMORY)))
        self.streams[dest] = name

    def _info(self, dest):
        name = self.streams.get(dest) or self.stream_name(dest)
        msg = self._run(self.nc.request(f"$JS.API.STREAM.INFO.{name}", b"", timeout=10))
        info = json.loads(msg.data)
        if "error" in info:
            raise BenchError(f"nats: stream {name}: {info['error']}")
        return info["state"]

    def count(self, dest):
        return self._info(dest)["messages"]

    def stored(self, dest):
        st = self._info(dest)
        n = st["messages"]
        return (n, parse_rfc3339(st.get("first_ts")), parse_rfc3339(st.get("last_ts")),
                st["bytes"] / n if n else None)

    def drop(self, dest):
        from nats.js.errors import NotFoundError
        name = self.streams.pop(dest, None) or self.stream_name(dest)
        try:
            self._run(self.js.delete_stream(name))
        except NotFoundError:
            pass


class Redis(Broker):
    kind = "redis"
    sink_type = "redis"
    label = "Redis Streams"
    networked = True

    def __init__(self, dir_, args=None):
        super().__init__(dir_, args)
        self.r = None

    def connect(self):
        import redis
        self.r = redis.Redis(host=self.host, port=self.port, socket_timeout=30)
        self.r.ping()

    def close(self):
        if self.r is not None:
            self.r.close()
            self.r = None

    def version(self):
        return f"redis-server {self.r.info('server')['redis_version']}"

    def sink_properties(self, dest):
        return {"debezium.sink.type": self.sink_type,
                "debezium.sink.redis.address": f"{self.host}:{self.port}"}

    def prepare(self, dest):
        self.r.delete(dest)

    def count(self, dest):
        return self.r.xlen(dest)

    def stored(self, dest):
        n = self.r.xlen(dest)
        if not n:
            return 0, None, None, None
        first = self.r.xrange(dest, count=1)[0]
        last = self.r.xrevrange(dest, count=1)[0]
        # The fields and values of the last entry, as bytes: what one
        # record is (Redis keeps ids and listpack overhead besides).
        size = sum(len(k) + len(v) for k, v in last[1].items())
        return n, redis_id_seconds(first[0]), redis_id_seconds(last[0]), size

    def drop(self, dest):
        # Freed in the background: a 500,000-entry stream takes a while.
        self.r.unlink(dest)


class PolledTimes:
    """First and last storage times of a broker that keeps none per record
    (RabbitMQ): from the counts the drain polls, the midpoint between the
    poll that last saw fewer and the poll that first saw as many."""

    def __init__(self):
        self.prev_t = None
        self.prev_n = 0
        self.first = None
        self.last = None
        self.last_n = 0

    def saw(self, n, t=None):
        t = time.time() if t is None else t
        mid = t if self.prev_t is None else (self.prev_t + t) / 2
        if n > 0 and self.first is None:
            self.first = mid
        if n > self.last_n:
            self.last, self.last_n = mid, n
        self.prev_t, self.prev_n = t, n


class RabbitMQ(Broker):
    kind = "rabbitmq"
    server_kind = "rabbitmq"
    sink_type = "rabbitmq"
    label = "RabbitMQ (AMQP 0-9-1)"
    poll_s = 0.02

    def __init__(self, dir_, args=None):
        super().__init__(dir_, args)
        self.conn = None
        self.ch = None
        self.times = {}  # dest -> PolledTimes

    def connect(self):
        import pika
        self.conn = pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", self.port, credentials=pika.PlainCredentials("guest", "guest"), heartbeat=0,
            blocked_connection_timeout=300))
        self.ch = self.conn.channel()

    def close(self):
        if self.conn is not None and self.conn.is_open:
            self.conn.close()
        self.conn = self.ch = None

    def version(self):
        v = self.conn._impl.server_properties.get("version", b"?")
        v = v.decode() if isinstance(v, bytes) else v
        stream = " (stream plugin on)" if os.path.exists(os.path.join(self.dir, "stream_port")) else ""
        return f"rabbitmq-server {v}{stream}"

    def sink_properties(self, dest):
        # The exchange is the topic (`exchange` unset), routing key "" (the
        # fanout exchange ignores it); delivery mode 2, ackTimeout 30 s.
        return {"debezium.sink.type": self.sink_type,
                "debezium.sink.rabbitmq.connection.host": "127.0.0.1",
                "debezium.sink.rabbitmq.connection.port": str(self.port)}

    def prepare(self, dest):
        self.drop(dest)
        self.ch.exchange_declare(dest, exchange_type="fanout", durable=True)
        self.ch.queue_declare(dest, durable=True)
        self.ch.queue_bind(dest, dest)
        self.times[dest] = PolledTimes()

    def _count(self, dest):
        return self.ch.queue_declare(dest, passive=True).method.message_count

    def count(self, dest):
        n = self._count(dest)
        self.times.setdefault(dest, PolledTimes()).saw(n)
        return n

    def stored(self, dest):
        n = self._count(dest)
        t = self.times.get(dest) or PolledTimes()
        return n, t.first, t.last, self.body_bytes(dest, n)

    def body_bytes(self, dest, n):
        """Bytes per record as the queue holds its bodies (`message_bytes`;
        headers and properties not counted), through rabbitmqctl."""
        if not n:
            return None
        out = _brokers_sh("rabbitmqctl", self.dir, "-q", "list_queues", "--no-table-headers", "name",
                          "message_bytes", capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            name, _, size = line.rpartition("\t")
            if name == dest and size.strip().isdigit():
                return int(size) / n
        return None

    def drop(self, dest):
        self.times.pop(dest, None)
        self.ch.queue_delete(dest)
        self.ch.exchange_delete(dest)


class RabbitMQStream(RabbitMQ):
    """RabbitMQ's stream protocol (the rabbitmq_stream plugin): Debezium
    Server's `rabbitmqstream` sink, and walrelay's of the same name reading
    the same file."""

    kind = "rabbitmqstream"
    sink_type = "rabbitmqstream"
    label = "RabbitMQ Streams"
    poll_s = 0.2

    def start(self):
        super().start()
        try:
            with open(os.path.join(self.dir, "stream_port")) as f:
                self.stream_port = int(f.read().strip())
        except OSError:
            raise BenchError(f"rabbitmqstream: the RabbitMQ in {self.dir} has no stream plugin") from None

    def sink_properties(self, dest):
        # The stream is the topic (`stream` unset); it exists (prepare).
        return {"debezium.sink.type": self.sink_type,
                "debezium.sink.rabbitmqstream.host": "127.0.0.1",
                "debezium.sink.rabbitmqstream.port": str(self.stream_port)}

    def prepare(self, dest):
        self.drop(dest)
        self.ch.queue_declare(dest, durable=True, arguments={"x-queue-type": "stream"})
        self.times[dest] = PolledTimes()

    def _count(self, dest):
        # A stream's queue.declare-ok says 0 messages: read the last chunk
        # and take its highest offset (a fresh stream's offsets start at 0).
        # A stream takes neither automatic acks nor the nack pika sends for
        # what it buffered when a consumer is cancelled (either closes the
        # connection), so each count reads on a connection of its own and
        # drops its socket afterwards, which releases the deliveries.
        import pika
        conn = pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", self.port, credentials=pika.PlainCredentials("guest", "guest"), heartbeat=0))
        best = -1
        got = 0

        def on_message(_chan, _method, props, _body):
            nonlocal best, got
            best = max(best, int((props.headers or {}).get("x-stream-offset", -1)))
            got += 1
        try:
            ch = conn.channel()
            ch.basic_qos(prefetch_count=5000)
            ch.basic_consume(dest, on_message, arguments={"x-stream-offset": "last"})
            seen = -1
            while got != seen:
                seen = got
                conn.process_data_events(time_limit=0.05)
            return best + 1
        finally:
            try:
                conn._impl._transport._sock.shutdown(socket.SHUT_RDWR)  # noqa: SLF001 - no public abort
            except Exception:  # noqa: BLE001 - already gone
                pass
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - the socket is shut: pika says so
                pass

    def body_bytes(self, dest, n):
        return None

    def drop(self, dest):
        self.times.pop(dest, None)
        self.ch.queue_delete(dest)


class Http(Broker):
    """Not a broker: benches/http_receiver.rs, one URL path per drain."""

    kind = "http"
    sink_type = "http"
    label = "HTTP"

    def __init__(self, dir_, args=None):
        super().__init__(dir_, args)
        self.proc = None
        self.conn = None

    def start(self):
        binary = getattr(self.args, "http_receiver", None)
        if not binary:
            raise BenchError("no http_receiver binary: run through benches/run.sh or pass --http-receiver")
        os.makedirs(self.dir, exist_ok=True)
        # It exits when its standard input closes: never outlives the bench.
        self.proc = subprocess.Popen([binary, "0"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(os.path.join(self.dir, "log"), "w"), text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("port="):
            raise BenchError(f"http_receiver did not start (said {line!r})")
        self.port = int(line.strip().split("=", 1)[1])
        self.pid = self.proc.pid
        self.connect()
        log(f"http: {self.version()}, at 127.0.0.1:{self.port} (pid {self.pid})")

    def stop(self):
        self.close()
        if self.proc is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(10)
            except Exception:  # noqa: BLE001 - best effort on the way out
                self.proc.kill()
            self.proc = None

    def connect(self):
        import http.client
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def version(self):
        return "http_receiver (benches/http_receiver.rs: hyper 1, HTTP/1.1, one tokio thread)"

    @staticmethod
    def path(dest):
        return "/" + dest

    def sink_properties(self, dest):
        # debezium.format.value is required by Debezium Server's http sink
        # (json is every sink's default: the same records as the others).
        return {"debezium.sink.type": self.sink_type,
                "debezium.sink.http.url": f"http://127.0.0.1:{self.port}{self.path(dest)}",
                "debezium.format.value": "json"}

    def _stats(self, method, dest):
        self.conn.request(method, f"/_walbench/stats?path={self.path(dest)}")
        r = self.conn.getresponse()
        body = r.read()
        if r.status != 200:
            raise BenchError(f"http_receiver: {method} stats answered {r.status}")
        return json.loads(body) if method == "GET" else None

    def prepare(self, dest):
        self.drop(dest)

    def count(self, dest):
        # Distinct events (X-DEBEZIUM-ID): a request sent twice is not another event.
        return self._stats("GET", dest)["distinct"]

    def stored(self, dest):
        st = self._stats("GET", dest)
        n = st["distinct"]
        if not n:
            return 0, None, None, None
        return n, st["first_ns"] / 1e9, st["last_ns"] / 1e9, st["body_bytes"] / st["requests"]

    def notes(self, dest):
        st = self._stats("GET", dest)
        return {"requests": st["requests"], "duplicates": st["requests"] - st["distinct"]}

    def drop(self, dest):
        self._stats("DELETE", dest)


class AwsJson:
    """One AWS service of moto through its JSON protocol (SQS's and
    Kinesis's), on one keep-alive connection. moto checks no signature but
    picks the service from the Authorization header's credential scope, so
    the header names the service and signs nothing."""

    def __init__(self, port, service, target_prefix, content_type):
        import http.client
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.service, self.prefix, self.content_type = service, target_prefix, content_type

    def call(self, op, body):
        data = json.dumps(body).encode()
        now = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        self.conn.request("POST", "/", data, {
            "Content-Type": self.content_type, "X-Amz-Target": f"{self.prefix}.{op}", "X-Amz-Date": now,
            "Authorization": f"AWS4-HMAC-SHA256 Credential=test/{now[:8]}/{Moto.region}/{self.service}/aws4_request, "
                             f"SignedHeaders=host;x-amz-date, Signature={'0' * 64}"})
        r = self.conn.getresponse()
        out = r.read()
        if r.status != 200:
            raise BenchError(f"moto {self.service} {op}: HTTP {r.status}: {out[:300]!r}")
        return json.loads(out) if out else {}

    def close(self):
        self.conn.close()


class Moto(Broker):
    """moto_server (scripts/brokers.sh start moto): SQS and Kinesis on one
    local endpoint, state in memory. Both systems read the AWS keys from
    the environment (the SDKs' default chains), never an instance's
    metadata."""

    server_kind = "moto"
    region = "us-east-1"

    def publisher_env(self):
        return {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": self.region,
                "AWS_EC2_METADATA_DISABLED": "true"}

    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def version(self):
        # The venv's path names the version (.cache/moto/<version>/venv).
        try:
            with open(f"/proc/{self.pid}/cmdline", "rb") as f:
                cmd = f.read().decode(errors="replace")
            m = re.search(r"/moto/([^/]+)/", cmd)
        except OSError:
            m = None
        return f"moto_server {m.group(1) if m else '?'} (Python; SQS and Kinesis)"


def sqs_queue_name(dest):
    """An SQS queue name for `dest`: letters, digits, - and _, at most 80
    (a longer one keeps its head and a hash)."""
    name = re.sub(r"[^A-Za-z0-9_-]", "-", dest)
    if len(name) > 80:
        name = name[:71] + "-" + hashlib.sha1(name.encode()).hexdigest()[:8]
    return name


class Consumed:
    """What the bench has read of one drain's destination: distinct bodies
    (a record read twice is a duplicate), the first and last storage time
    (Unix s, moto's clock) and the bytes of the bodies."""

    def __init__(self):
        self.seen = set()
        self.read = 0
        self.first = None
        self.last = None
        self.bytes = 0

    def add(self, body, at, size=None):
        """One record read: its body (or a digest of it, with the body's
        `size`) stored at `at`."""
        self.read += 1
        h = hashlib.blake2b(body, digest_size=16).digest()
        if h in self.seen:
            return
        self.seen.add(h)
        self.bytes += len(body) if size is None else size
        self.first = at if self.first is None else min(self.first, at)
        self.last = at if self.last is None else max(self.last, at)

    def stored(self):
        n = len(self.seen)
        return n, self.first, self.last, self.bytes / n if n else None

    def notes(self):
        return {"read": self.read, "duplicates": self.read - len(self.seen)}


class Sqs(Moto):
    kind = "sqs"
    sink_type = "sqs"
    label = "Amazon SQS (moto)"
    # The bench is the queue's consumer: it reads whenever it polls.
    poll_s = 0.05
    # Receives per count(), so that a poll returns to look at the system.
    max_receives = 200

    def __init__(self, dir_, args=None):
        super().__init__(dir_, args)
        self.api = None
        self.queues = {}  # dest -> queue URL
        self.read = {}  # dest -> Consumed

    def connect(self):
        self.api = AwsJson(self.port, "sqs", "AmazonSQS", "application/x-amz-json-1.0")

    def close(self):
        if self.api is not None:
            self.api.close()
            self.api = None

    def queue_url(self, dest):
        return self.queues.get(dest) or f"{self.endpoint()}/123456789012/{sqs_queue_name(dest)}"

    def sink_properties(self, dest):
        return {"debezium.sink.type": self.sink_type,
                "debezium.sink.sqs.region": self.region,
                "debezium.sink.sqs.endpoint": self.endpoint(),
                "debezium.sink.sqs.queue.url": self.queue_url(dest)}

    def prepare(self, dest):
        self.drop(dest)
        self.queues[dest] = self.api.call("CreateQueue", {"QueueName": sqs_queue_name(dest)})["QueueUrl"]
        self.read[dest] = Consumed()

    def count(self, dest):
        url, got = self.queue_url(dest), self.read.setdefault(dest, Consumed())
        for _ in range(self.max_receives):
            msgs = self.api.call("ReceiveMessage", {
                "QueueUrl": url, "MaxNumberOfMessages": 10, "VisibilityTimeout": 3600, "WaitTimeSeconds": 0,
                "AttributeNames": ["SentTimestamp"], "MessageSystemAttributeNames": ["SentTimestamp"]}).get("Messages")
            if not msgs:
                break
            for m in msgs:
                got.add(m.get("Body", "").encode(), int(m["Attributes"]["SentTimestamp"]) / 1000)
            self.api.call("DeleteMessageBatch", {"QueueUrl": url, "Entries": [
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs)]})
        return len(got.seen)

    def stored(self, dest):
        self.count(dest)
        return self.read[dest].stored()

    def notes(self, dest):
        return self.read[dest].notes() if dest in self.read else {}

    def drop(self, dest):
        self.read.pop(dest, None)
        url = self.queues.pop(dest, None)
        if url:
            self.api.call("DeleteQueue", {"QueueUrl": url})


class Kinesis(Moto):
    kind = "kinesis"
    sink_type = "kinesis"
    label = "Amazon Kinesis Data Streams (moto)"
    # Debezium Server's SDK (2.17) sends CBOR unless told otherwise; moto
    # answers it with HTTP 500.
    dbzs_java_opts = "-Daws.cborEnabled=false"
    shards = 4

    def __init__(self, dir_, args=None):
        super().__init__(dir_, args)
        self.api = None
        self.iterators = {}  # dest -> {shard id: iterator}
        self.read = {}  # dest -> Consumed

    def connect(self):
        self.api = AwsJson(self.port, "kinesis", "Kinesis_20131202", "application/x-amz-json-1.1")

    def close(self):
        if self.api is not None:
            self.api.close()
            self.api = None

    def sink_properties(self, dest):
        # The stream is the topic (route.topic.replacement); it exists.
        return {"debezium.sink.type": self.sink_type,
                "debezium.sink.kinesis.region": self.region,
                "debezium.sink.kinesis.endpoint": self.endpoint()}

    def prepare(self, dest):
        self.drop(dest)
        self.api.call("CreateStream", {"StreamName": dest, "ShardCount": self.shards})
        deadline = time.time() + 30
        while self.api.call("DescribeStreamSummary", {"StreamName": dest})[
                "StreamDescriptionSummary"]["StreamStatus"] != "ACTIVE":
            if time.time() > deadline:
                raise BenchError(f"kinesis: stream {dest} not ACTIVE after 30 s")
            time.sleep(0.1)
        shards = self.api.call("ListShards", {"StreamName": dest})["Shards"]
        self.iterators[dest] = {s["ShardId"]: self.api.call("GetShardIterator", {
            "StreamName": dest, "ShardId": s["ShardId"], "ShardIteratorType": "TRIM_HORIZON"})["ShardIterator"]
            for s in shards}
        self.read[dest] = Consumed()

    def count(self, dest):
        its, got = self.iterators[dest], self.read[dest]
        for shard, it in its.items():
            while True:
                r = self.api.call("GetRecords", {"ShardIterator": it, "Limit": 10000})
                recs = r.get("Records") or []
                for rec in recs:
                    got.add(base64.b64decode(rec["Data"]) + rec["PartitionKey"].encode(),
                            float(rec["ApproximateArrivalTimestamp"]))
                it = r.get("NextShardIterator") or it
                if not recs or not r.get("MillisBehindLatest"):
                    break
            its[shard] = it
        return len(got.seen)

    def stored(self, dest):
        self.count(dest)
        return self.read[dest].stored()

    def notes(self, dest):
        return self.read[dest].notes() if dest in self.read else {}

    def drop(self, dest):
        self.read.pop(dest, None)
        if self.iterators.pop(dest, None) is not None:
            self.api.call("DeleteStream", {"StreamName": dest, "EnforceConsumerDeletion": True})


class PubSub(Broker):
    """pstest behind scripts/pubsub-emulator; its own binary is the bench's
    client (-admin: create a topic and subscription, pull and acknowledge)."""

    kind = "pubsub"
    sink_type = "pubsub"
    label = "Google Cloud Pub/Sub (pstest)"
    project = "walbench"
    # The bench is the subscription's consumer: it reads whenever it polls.
    poll_s = 0.1

    def __init__(self, dir_, args=None):
        super().__init__(dir_, args)
        self.binary = None
        self.read = {}  # dest -> Consumed

    def connect(self):
        # The program brokers.sh started (its build in .cache/pubsub/; a
        # rebuild since replaced the file at the same path).
        self.binary = os.readlink(f"/proc/{self.pid}/exe").removesuffix(" (deleted)")

    def close(self):
        pass

    def version(self):
        out = run([self.binary, "-version"], capture_output=True, text=True).stdout.split()
        return f"pstest of {' '.join(out) or '?'} (scripts/pubsub-emulator, state in memory)"

    def sink_properties(self, dest):
        # Ordering at its default (on): the ordering key is the record's key.
        return {"debezium.sink.type": self.sink_type,
                "debezium.sink.pubsub.project.id": self.project,
                "debezium.sink.pubsub.address": f"127.0.0.1:{self.port}"}

    def topic(self, dest):
        return f"projects/{self.project}/topics/{dest}"

    def subscription(self, dest):
        return f"projects/{self.project}/subscriptions/{dest}"

    def _admin(self, *args):
        r = run([self.binary, "-admin", f"127.0.0.1:{self.port}", *args], capture_output=True, text=True,
                check=False)
        if r.returncode != 0:
            raise BenchError(f"pubsub-emulator -admin {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def prepare(self, dest):
        # A fresh emulator: pstest never forgets a published message.
        self.read.clear()
        env = dict(os.environ, WALRELAY_OWNER_PID=str(os.getpid()))
        _brokers_sh("restart", self.dir, env=env, stdout=subprocess.DEVNULL)
        with open(os.path.join(self.dir, "pid")) as f:
            self.pid = int(f.read().strip())
        self.connect()
        self._admin("-topic", self.topic(dest), "-subscription", self.subscription(dest))
        self.read[dest] = Consumed()

    def count(self, dest):
        got = self.read.setdefault(dest, Consumed())
        while True:
            out = json.loads(self._admin("-drain", self.subscription(dest)))
            for digest, at, size in out["messages"]:
                got.add(bytes.fromhex(digest), at, size)
            # A full answer (the program's 100 pulls of 1,000, maxPulls in
            # main.go): more may be there.
            if out["count"] < 100_000:
                return len(got.seen)

    def stored(self, dest):
        self.count(dest)
        return self.read[dest].stored()

    def notes(self, dest):
        return self.read[dest].notes() if dest in self.read else {}

    def drop(self, dest):
        # The next prepare restarts the emulator, which forgets the topic.
        self.read.pop(dest, None)


class Pulsar(Broker):
    """A Pulsar standalone; the bench speaks its admin REST API."""

    kind = "pulsar"
    sink_type = "pulsar"
    label = "Apache Pulsar (standalone)"
    tenant, namespace = "public", "default"

    def __init__(self, dir_, args=None):
        super().__init__(dir_, args)
        self.web_port = None
        self.conn = None

    def stop(self):
        # Its directory goes too: the bookie frees a deleted topic's entry
        # logs only by its own garbage collection, so a full run leaves
        # gigabytes of journal and entry logs (5 GB after Run L).
        try:
            self.close()
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass
        _brokers_sh("rm", self.dir, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def connect(self):
        import http.client
        with open(os.path.join(self.dir, "web_port")) as f:
            self.web_port = int(f.read().strip())
        self.conn = http.client.HTTPConnection("127.0.0.1", self.web_port, timeout=60)

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _call(self, method, path, ok=(200, 204)):
        """(status, headers, body) of an admin call; a status not in `ok` raises.
        Jetty closes a keep-alive connection idle for 30 s (Debezium
        Server's start is longer): a call on a closed one is made again on
        a new connection, once."""
        import http.client
        try:
            self.conn.request(method, path)
            r = self.conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionError):
            self.conn.close()
            self.conn.request(method, path)
            r = self.conn.getresponse()
        body = r.read()
        if r.status not in ok:
            raise BenchError(f"pulsar: {method} {path}: HTTP {r.status}: {body[:300]!r}")
        return r.status, r.headers, body

    def version(self):
        _, _, body = self._call("GET", "/admin/v2/brokers/version")
        return f"Apache Pulsar {body.decode().strip()} standalone (one bookie)"

    def sink_properties(self, dest):
        # The topic is persistent://public/default/<topic>; it exists.
        return {"debezium.sink.type": self.sink_type,
                "debezium.sink.pulsar.client.serviceUrl": f"pulsar://127.0.0.1:{self.port}",
                "debezium.sink.pulsar.timeout": "10000"}

    def path(self, dest):
        return f"/admin/v2/persistent/{self.tenant}/{self.namespace}/{dest}"

    def prepare(self, dest):
        self.drop(dest)
        self._call("PUT", self.path(dest))

    def _stats(self, dest):
        return json.loads(self._call("GET", self.path(dest) + "/stats")[2])

    def count(self, dest):
        return self._stats(dest)["msgInCounter"]

    def _publish_time(self, dest, position):
        _, headers, _ = self._call("GET", f"{self.path(dest)}/examinemessage?initialPosition={position}"
                                          "&messagePosition=1")
        return parse_rfc3339(headers.get("X-Pulsar-publish-time"))

    def stored(self, dest):
        st = self._stats(dest)
        n = st["msgInCounter"]
        if not n:
            return 0, None, None, None
        return (n, self._publish_time(dest, "earliest"), self._publish_time(dest, "latest"),
                st["storageSize"] / n)

    def drop(self, dest):
        self._call("DELETE", self.path(dest) + "?force=true", ok=(200, 204, 404))


BROKERS = {cls.kind: cls for cls in (Nats, Redis, RabbitMQ, RabbitMQStream, Http, Sqs, Kinesis, PubSub, Pulsar)}


def make(kind, dir_, args=None):
    try:
        return BROKERS[kind](dir_, args)
    except KeyError:
        raise BenchError(f"unknown broker {kind!r}; known: {', '.join(BROKERS)}") from None


def server_dir(base, kind):
    """The directory of `kind`'s server under `base`: kinds of one server
    (rabbitmq, rabbitmqstream; sqs, kinesis) share it."""
    cls = BROKERS[kind]
    return os.path.join(base, cls.server_kind or cls.kind)


def wait_count(broker, dest, n, alive, deadline, sleep):
    """Polls `broker` until `dest` holds `n` records; raises when the
    system (`alive()`) exits first or at `deadline`. Returns the count."""
    while True:
        count = broker.count(dest)
        if count >= n:
            return count
        if not alive():
            raise BenchError(f"exited with {count:,}/{n:,} records in {broker.kind}")
        if time.time() > deadline:
            raise BenchError(f"only {count:,}/{n:,} records in {broker.kind} by the deadline")
        sleep(broker.poll_s)
