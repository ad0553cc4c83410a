"""Debezium's PostgreSQL connector with the outbox EventRouter on Kafka
Connect standalone (scripts/debezium.sh), as the bench runs it: tuned
(walrelay's producer settings, bigger batches, a fixed heap) or with
Debezium's and Kafka Connect's defaults. Writes the worker and connector
properties of one drain and starts or stops that Connect process."""

import os
import subprocess

from . import net, run
from .schema import MESSAGE_PREFIX, MESSAGES_PUBLICATION
from .servers import SCRIPTS

# The version scripts/debezium.sh resolves, as the tables name it.
SHORT_VERSION = "3.6.1"

# Tuned Debezium's JVM: a fixed 1 GiB heap and the throughput collector.
# Default Debezium's JVM: what kafka-run-class.sh gives connect-standalone.sh.
HEAP = {
    "dbz_tuned": "-Xms1g -Xmx1g -XX:+UseParallelGC",
    "dbz_default": "-Xms256m -Xmx2g -XX:+UseG1GC -XX:MaxGCPauseMillis=20 "
    "-XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent",
}
# Producer settings on tuned Debezium's worker: walrelay's (acks=all,
# idempotence, lz4, linger.ms=5) and librdkafka's default batch.size.
TUNED_WORKER = {
    "producer.acks": "all",
    "producer.enable.idempotence": "true",
    "producer.max.in.flight.requests.per.connection": "5",
    "producer.compression.type": "lz4",
    "producer.linger.ms": "5",
    "producer.batch.size": "1000000",
}
TUNED_CONNECTOR = {
    "max.batch.size": "16384",
    "max.queue.size": "65536",
    "poll.interval.ms": "10",
    # Debezium's own outbox example: a delete needs no tombstone.
    "tombstones.on.delete": "false",
}


def worker_properties(bootstrap, system):
    props = {
        "bootstrap.servers": bootstrap,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
    }
    if system == "dbz_tuned":
        props.update(TUNED_WORKER)
    return props


def connector_properties(pg_port, system, slot, topic, messages):
    props = {
        "name": "bench",
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": "1",
        "database.hostname": net.pg_host(),
        "database.port": str(pg_port),
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
        del props["table.include.list"]
        props.update({
            "publication.name": MESSAGES_PUBLICATION,
            "publication.autocreate.mode": "no_tables",
            "message.prefix.include.list": MESSAGE_PREFIX,
            "transforms": "decode,outbox",
            "transforms.decode.type": "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent",
        })
    if system == "dbz_tuned":
        props.update(TUNED_CONNECTOR)
    return props


def start(bootstrap, pg_port, system, slot, topic, run_dir, messages):
    """Starts Connect standalone for one drain; returns its directory
    (its pid and log are in it)."""
    worker = os.path.join(run_dir, "worker.in.properties")
    conn = os.path.join(run_dir, "connector.properties")
    for path, props in ((worker, worker_properties(bootstrap, system)),
                        (conn, connector_properties(pg_port, system, slot, topic, messages))):
        with open(path, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in props.items())
    dbz_dir = os.path.join(run_dir, "connect")
    env = dict(os.environ, WALRELAY_DBZ_HEAP_OPTS=HEAP[system], WALRELAY_DBZ_START_TIMEOUT="300")
    run([f"{SCRIPTS}/debezium.sh", "standalone", dbz_dir, worker, conn], env=env)
    return dbz_dir


def stop(dbz_dir):
    run([f"{SCRIPTS}/debezium.sh", "stop", dbz_dir], check=False,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
