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

A broker is one class in BROKERS: what Debezium Server's
application.properties says to reach it (`sink_properties`), and the
client side above. Adding one (RabbitMQ, HTTP) is a class and a line
there; the drains, the systems and the tables take the list as it is.
"""

import asyncio
import calendar
import json
import os
import re
import subprocess
import time

from . import BenchError, log, run
from .servers import SCRIPTS


def _brokers_sh(*args, env=None, **kw):
    return run([os.path.join(SCRIPTS, "brokers.sh"), *args], env=env, **kw)


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
    # Debezium Server's debezium.sink.type for it.
    sink_type = None

    def __init__(self, dir_):
        self.dir = dir_
        self.pid = None
        self.port = None

    def start(self):
        # The server stops by itself if the bench dies (a watchdog of
        # brokers.sh); env.stop stops it otherwise.
        env = dict(os.environ, WALRELAY_OWNER_PID=str(os.getpid()))
        _brokers_sh("start", self.kind, self.dir, env=env, stdout=subprocess.DEVNULL)
        with open(os.path.join(self.dir, "pid")) as f:
            self.pid = int(f.read().strip())
        with open(os.path.join(self.dir, "port")) as f:
            self.port = int(f.read().strip())
        self.connect()
        log(f"{self.kind}: {self.version()}, at 127.0.0.1:{self.port} (pid {self.pid}) in {self.dir}")

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

    def sink_properties(self):
        """The `debezium.sink.*` lines of Debezium Server's
        application.properties that publish to this server (walrelay reads
        the same file)."""
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


class Nats(Broker):
    kind = "nats"
    sink_type = "nats-jetstream"
    label = "NATS JetStream"

    def __init__(self, dir_):
        super().__init__(dir_)
        self.loop = None
        self.nc = None
        self.js = None
        self.streams = {}  # subject -> stream name

    def _run(self, coro):
        return self.loop.run_until_complete(coro)

    def connect(self):
        import nats
        self.loop = asyncio.new_event_loop()
        self.nc = self._run(nats.connect(f"nats://127.0.0.1:{self.port}", name="walbench",
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

    def sink_properties(self):
        # The stream exists before the system starts (prepare): no
        # create-stream, as in production.
        return {"debezium.sink.type": self.sink_type,
                "debezium.sink.nats-jetstream.url": f"nats://127.0.0.1:{self.port}"}

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

    def __init__(self, dir_):
        super().__init__(dir_)
        self.r = None

    def connect(self):
        import redis
        self.r = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=30)
        self.r.ping()

    def close(self):
        if self.r is not None:
            self.r.close()
            self.r = None

    def version(self):
        return f"redis-server {self.r.info('server')['redis_version']}"

    def sink_properties(self):
        return {"debezium.sink.type": self.sink_type,
                "debezium.sink.redis.address": f"127.0.0.1:{self.port}"}

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


BROKERS = {cls.kind: cls for cls in (Nats, Redis)}


def make(kind, dir_):
    try:
        return BROKERS[kind](dir_)
    except KeyError:
        raise BenchError(f"unknown broker {kind!r}; known: {', '.join(BROKERS)}") from None


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
        sleep(0.2)
