#!/usr/bin/env python3
"""Failover of a distributed group, walrelay against Kafka Connect + Debezium
in the same run (issue 32).

Per system and round: two workers in a fresh group (storage topics of their
own), one Debezium PostgreSQL connector with the outbox EventRouter, a writer
inserting one event every 20 ms; SIGKILL the worker that runs the connector,
then measure from the kill

  status   until the survivor's REST API reports the task RUNNING on itself;
  resumed  until a consumer reads the first event inserted after the kill;

and check that every event written reached the topic (at-least-once: none
lost). Systems: walrelay (connect-distributed), connect-nodelay (Connect
4.1.1 with scheduled.rebalance.max.delay.ms=0: the like-for-like baseline)
and connect (Connect's defaults: a departed worker's connectors wait for
that delay, 5 minutes). Every system uses the same session.timeout.ms and
heartbeat.interval.ms (Connect's defaults unless given).

Needs the shared test environment (scripts/env.sh up) and Debezium's jars
(scripts/debezium.sh fetch); run by benches/failover.sh.
"""

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid

import psycopg
from confluent_kafka import Consumer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def env():
    vals = {}
    with open(os.path.join(REPO, ".walrelay-env/env")) as f:
        for line in f:
            line = line.strip()
            if line.startswith("export "):
                k, _, v = line[len("export "):].partition("=")
                vals[k] = v
    return vals


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rest(port, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read().decode()
            return r.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return None, None


class Worker:
    """One worker of either system."""

    def __init__(self, system, work, group, kafka, extra):
        self.system = system
        self.port = free_port()
        self.dir = os.path.join(work, f"{system}-{self.port}")
        os.makedirs(self.dir)
        props = (
            f"bootstrap.servers={kafka}\ngroup.id={group}\n"
            f"config.storage.topic={group}-configs\noffset.storage.topic={group}-offsets\n"
            f"status.storage.topic={group}-status\nconfig.storage.replication.factor=1\n"
            "offset.storage.replication.factor=1\nstatus.storage.replication.factor=1\n"
            "key.converter=org.apache.kafka.connect.storage.StringConverter\n"
            "value.converter=org.apache.kafka.connect.storage.StringConverter\n" + extra
        )
        # Beside DIR: debezium.sh writes DIR/worker.properties itself.
        self.file = os.path.join(work, f"{system}-{self.port}.properties")
        if system == "walrelay":
            props += f"listeners=http://127.0.0.1:{self.port}\n"
        with open(self.file, "w") as f:
            f.write(props)
        if system == "walrelay":
            log = open(os.path.join(self.dir, "log"), "w")
            self.proc = subprocess.Popen(
                [os.path.join(REPO, "target/release/walrelay"), "connect-distributed", self.file],
                stdout=log, stderr=log)
        else:
            subprocess.run([os.path.join(REPO, "scripts/debezium.sh"), "distributed", self.dir, self.file],
                           check=True, stdout=subprocess.DEVNULL)
            with open(os.path.join(self.dir, "rest_port")) as f:
                self.port = int(f.read().strip())
        self.id = f"127.0.0.1:{self.port}"
        deadline = time.time() + 120
        while rest(self.port, "GET", "/")[0] != 200:
            if time.time() > deadline:
                raise RuntimeError(f"{system} worker {self.dir} never answered")
            time.sleep(0.2)

    def kill(self):
        if self.system == "walrelay":
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        else:
            subprocess.run([os.path.join(REPO, "scripts/debezium.sh"), "kill", self.dir], check=True)

    def stop(self):
        if self.system == "walrelay":
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(30)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
        else:
            subprocess.run([os.path.join(REPO, "scripts/debezium.sh"), "stop", self.dir],
                           stdout=subprocess.DEVNULL)


def connector(name, pg_port):
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "plugin.name": "pgoutput", "database.hostname": "127.0.0.1", "database.port": str(pg_port),
        "database.user": "postgres", "database.dbname": "postgres", "topic.prefix": name,
        "table.include.list": f"public.{name}", "slot.name": name, "publication.name": name,
        "publication.autocreate.mode": "filtered", "transforms": "outbox",
        "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
        "transforms.outbox.route.topic.replacement": f"{name}.events",
    }


def owner(port, name):
    code, body = rest(port, "GET", f"/connectors/{name}/status")
    if code != 200 or not isinstance(body, dict):
        return None
    tasks = body.get("tasks") or []
    if tasks and tasks[0].get("state") == "RUNNING":
        return tasks[0].get("worker_id")
    return None


def one_round(system, args, e):
    kafka, pg_port = e["WALRELAY_TEST_KAFKA"], int(e["WALRELAY_TEST_PG_PORT"])
    name = f"fo_{system.replace('-', '_')}_{uuid.uuid4().hex[:8]}"
    extra = f"session.timeout.ms={args.session_ms}\nheartbeat.interval.ms={args.heartbeat_ms}\n"
    if system == "connect-nodelay":
        extra += "scheduled.rebalance.max.delay.ms=0\n"
    dsn = f"host=127.0.0.1 port={pg_port} user=postgres dbname=postgres"
    db = psycopg.connect(dsn, autocommit=True)
    db.execute(f"CREATE TABLE {name} (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, "
               "aggregateid varchar(255), type varchar(255) NOT NULL, payload jsonb)")
    work = tempfile.mkdtemp(prefix="failover-")
    kind = "walrelay" if system == "walrelay" else "connect"
    workers = [Worker(kind, work, name, kafka, extra) for _ in range(2)]
    stop = threading.Event()
    done = threading.Event()
    written = []  # (n, time inserted)
    try:
        code, body = rest(workers[0].port, "POST", "/connectors",
                          {"name": name, "config": connector(name, pg_port)})
        assert code == 201, (code, body)
        deadline = time.time() + 120
        while (run_on := owner(workers[0].port, name)) is None:
            assert time.time() < deadline, "the connector never ran"
            time.sleep(0.1)

        def write():
            w = psycopg.connect(dsn, autocommit=True)
            n = 0
            while not stop.is_set():
                n += 1
                w.execute(f"INSERT INTO {name} VALUES (%s, 'agg', 'k', 'E', '{{}}')",
                          (str(uuid.UUID(int=n)),))
                written.append((n, time.time()))
                time.sleep(0.02)
            w.close()

        seen = {}  # event number -> when the consumer first read it

        def read():
            consumer = Consumer({"bootstrap.servers": kafka, "group.id": name + "-reader",
                                 "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                 "topic.metadata.refresh.interval.ms": 1000})
            consumer.subscribe([f"{name}.events"])
            while not done.is_set():
                msg = consumer.poll(0.1)
                if msg is None or msg.error():
                    continue
                for k, v in (msg.headers() or []):
                    if k == "id":
                        seen.setdefault(uuid.UUID(v.decode()).int, time.time())
            consumer.close()

        reader = threading.Thread(target=read)
        reader.start()
        writer = threading.Thread(target=write)
        writer.start()
        time.sleep(3)
        victim = next(w for w in workers if w.id == run_on)
        survivor = next(w for w in workers if w.id != run_on)
        victim.kill()
        killed = time.time()
        status_at = None
        while status_at is None and time.time() - killed < args.max_wait:
            if owner(survivor.port, name) == survivor.id:
                status_at = time.time()
            else:
                time.sleep(0.05)
        first_after = next(n for n, t in written if t > killed)
        resumed_at = None
        while resumed_at is None and time.time() - killed < args.max_wait:
            after = [t for n, t in list(seen.items()) if n >= first_after]
            if after:
                resumed_at = min(after)
            else:
                time.sleep(0.1)
        time.sleep(2)
        stop.set()
        writer.join()
        # Every event written reaches the topic.
        total = len(written)
        deadline = time.time() + 60
        while sum(1 for n in range(1, total + 1) if n in seen) < total and time.time() < deadline:
            time.sleep(0.2)
        done.set()
        reader.join()
        lost = total - sum(1 for n in range(1, total + 1) if n in seen)
        return {
            "system": system,
            "status_s": None if status_at is None else status_at - killed,
            # The first event after the kill as a consumer reads it.
            "resumed_s": None if resumed_at is None else resumed_at - killed,
            "events": total,
            "lost": lost,
        }
    finally:
        stop.set()
        done.set()
        for w in workers:
            w.stop()
        deadline = time.time() + 60
        while time.time() < deadline:
            active = db.execute("SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s AND active",
                                (name,)).fetchone()[0]
            if active == 0:
                break
            time.sleep(0.2)
        db.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = %s",
                   (name,))
        db.execute(f"DROP PUBLICATION IF EXISTS {name}; DROP TABLE IF EXISTS {name}")
        db.close()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--systems", default="walrelay,connect-nodelay,connect")
    p.add_argument("--default-rounds", type=int, default=1,
                   help="rounds of 'connect' (Connect's defaults wait 5 minutes per round)")
    p.add_argument("--session-ms", type=int, default=10000)
    p.add_argument("--heartbeat-ms", type=int, default=3000)
    p.add_argument("--max-wait", type=float, default=420.0)
    args = p.parse_args()
    e = env()
    results = []
    systems = args.systems.split(",")
    rounds = max(args.rounds, args.default_rounds)
    for r in range(rounds):
        for s in systems:
            if s == "connect" and r >= args.default_rounds:
                continue
            if s != "connect" and r >= args.rounds:
                continue
            res = one_round(s, args, e)
            print(json.dumps(res), flush=True)
            results.append(res)
    print()
    print(f"session.timeout.ms={args.session_ms} heartbeat.interval.ms={args.heartbeat_ms}; "
          "seconds from SIGKILL, median over rounds")
    print("| system | rounds | task RUNNING elsewhere | first new event read | events lost |")
    print("|---|---|---|---|---|")
    med = {}
    for s in systems:
        rs = [x for x in results if x["system"] == s]
        if not rs:
            continue
        st = [x["status_s"] for x in rs if x["status_s"] is not None]
        rz = [x["resumed_s"] for x in rs if x["resumed_s"] is not None]
        med[s] = (statistics.median(st) if st else None, statistics.median(rz) if rz else None)
        fmt = lambda v: "never" if v is None else f"{v:.2f}"
        print(f"| {s} | {len(rs)} | {fmt(med[s][0])} | {fmt(med[s][1])} | {sum(x['lost'] for x in rs)} |")
    if "walrelay" in med:
        for base in ("connect-nodelay", "connect"):
            if base in med and med[base][1] and med["walrelay"][1]:
                print(f"walrelay / {base}, first new event read: {med['walrelay'][1] / med[base][1]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
