"""End-to-end benchmark driver for walrelay; run it through benches/run.sh
(`python -m walbench` in benches/).

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

--brokers nats,redis,rabbitmq,http,sqs,kinesis,pubsub,pulsar publishes W1 and W2 to
those brokers instead of Kafka (no Kafka is started): walrelay reading Debezium
Server's application.properties against Debezium Server 3.6.1 (dbz_server) on
the same file, both on every broker in the same run, with the walsender
reader's rate beside them (broker_drains.py, dbz_server.py, brokers.py;
the clock stops at the broker's time of the last record it stored, or for
RabbitMQ at the poll that saw it, for Pulsar at the last entry's publish
time; HTTP goes to benches/http_receiver.rs; SQS and Kinesis to moto, the
local AWS endpoint; pubsub to pstest, Google's in-memory Pub/Sub fake;
pulsar to a Pulsar standalone).

Variants measure one lever at a time, before and after in the same run
(drains, interleaved with the other systems' rounds, and W3):
walrelay@LABEL is the binary of --walrelay-binary LABEL=PATH (benches/run.sh
--baseline-rev REV builds a git revision); walrelay:KEY=VALUE[:KEY=VALUE]
overrides dotted keys of the configuration the bench writes (TOML scalars;
under kafka.producer the rest of the path is the librdkafka key), e.g.
walrelay@base:replication.read_coalesce_us=0; walsender:publication=bench_iu
gives a baseline another pgoutput option. The publication bench_iu publishes
the outbox's inserts and updates only. W3 also reports walrelay's latency by
stage: its stage histograms, read from its /api/state (JSON, over HTTP)
before and after each level, percentiles interpolated inside the bucket. --pin on puts the
walsender of the system measured alone on CPU 0 and everything else on CPU 1;
--pin both measures every system both ways from the same backlogs.

Libraries (benches/venv.sh's virtualenv, pinned): psycopg for PostgreSQL,
confluent-kafka for topics, end offsets, last stable offsets and reading
records back (read_committed for the exactly-once system), matplotlib for
the plots, urllib for walrelay's /api/state. One Kafka reader stays
hand-made: the COMMIT markers of transactional topics, whose LogAppendTime is
when a read_committed consumer can see a record, are control records that
every client library hides, so walbench.kafka_markers reads the record-batch
headers (Fetch v4) itself.
"""

import argparse
import json
import os
import platform
import re
import shlex
import signal
import sys

from . import REPO, BenchError, log, machine, net
from .broker_drains import BROKER_DRAINS, BROKER_SYSTEMS, PUBLISHERS, warm_up, workload_broker_drain
from .brokers import BROKERS
from .dbz_server import DEFAULT_JAVA_OPTS
from .drains import warm_broker, workload_drain
from .env import BENCH_DIR, OTHERS_CPU, PIN_MODES, WALSENDER_CPU, Env
from .report import broker_report, report, update_broker_docs, update_docs
from .selfcheck import self_check
from .steady import workload_w3
from .systems import BASELINES, SYSTEMS, Variant, base_system, message_options, pgoutput_options
from .writer import writer_cost


def parser():
    ap = argparse.ArgumentParser(prog="python -m walbench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
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
    ap.add_argument("--brokers", default="",
                    help=f"publish W1 and W2 to these brokers instead of Kafka, comma-separated "
                    f"({', '.join(BROKERS)}): walrelay reading Debezium Server's application.properties "
                    "against Debezium Server on the same file, every broker in the same run; no Kafka is started")
    ap.add_argument("--broker-systems", default=",".join(BROKER_SYSTEMS),
                    help="the systems of the broker drains, comma-separated: walsender (the reader, once per "
                    "round), walrelay, walrelay@LABEL, dbz_server; KEY=VALUE settings of a variant are lines of "
                    "its application.properties, e.g. dbz_server:debezium.source.max.batch.size=8192")
    ap.add_argument("--dbzs-java-opts", default=DEFAULT_JAVA_OPTS,
                    help="Debezium Server's JVM options in the broker drains (default: the JVM's own "
                    "ergonomics, as the distribution's run.sh starts it)")
    ap.add_argument("--broker-warmup", type=int, help="events of the unmeasured warm-up drain before the broker "
                    "drains (default 20,000, --quick 5,000)")
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
                    help="TOML lines merged into walrelay's [replication] section, for A/B runs, "
                    "e.g. 'read_coalesce_us = 0'")
    ap.add_argument("--walrelay-extra", default="",
                    help="TOML merged into walrelay's configuration, for A/B runs of one setting "
                    "(\\n separates lines), e.g. '[runtime]\\nworker_threads = 2'")
    ap.add_argument("--walrelay-producer", default="",
                    help="librdkafka settings for walrelay's producer, for A/B runs: key=value,key=value")
    ap.add_argument("--walrelay", default=os.path.join(os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target"),
                                                       "release", "walrelay"),
                    help="the walrelay binary (default: target/release/walrelay, or $CARGO_TARGET_DIR/release/"
                    "walrelay when set, where benches/run.sh's cargo builds it)")
    ap.add_argument("--walrelay-binary", action="append", default=[], metavar="LABEL=PATH",
                    help="another walrelay binary, measured as the system walrelay@LABEL (repeatable; "
                    "benches/run.sh --baseline-rev REV builds one)")
    ap.add_argument("--streaming", choices=["auto", "on", "off"], default="auto",
                    help="walrelay's replication.streaming (auto: its default) and the ceiling's matching "
                    "pgoutput options")
    ap.add_argument("--walsender-drain", default=None,
                    help="the walsender baseline's binary (benches/run.sh builds it and passes it)")
    ap.add_argument("--http-receiver", default=None,
                    help="the HTTP receiver of --brokers http (benches/http_receiver.rs; benches/run.sh builds "
                    "it and passes it)")
    ap.add_argument("--http-ceiling", action="store_true",
                    help="measure the HTTP receiver alone with wrk (1, 4, 16 connections, 10 s each), then exit")
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
    ap.add_argument("--netns", default=None, metavar="NAME",
                    help="run across the network benches/net.sh made as NAME, this driver in its relay "
                         "namespace (benches/run.sh --net lan|zone or --cc sets it up)")
    ap.add_argument("--self-check", action="store_true",
                    help="check the pieces that need no server (the /api/state reader, the statistics, the "
                    "configuration writer, the COMMIT-marker walk) on synthetic input, then exit")
    ap.add_argument("--command", default=None, help=argparse.SUPPRESS)
    return ap


def settle(args):
    """The sizes --quick or the full run implies where none was given, and
    the systems' lists; exits with a message on a bad one."""
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
    args.walrelay_binaries = {}
    for spec in args.walrelay_binary:
        name, eq, path = spec.partition("=")
        if not eq or not re.fullmatch(r"[^\s:=,@]+", name) or not os.access(path, os.X_OK):
            sys.exit(f"--walrelay-binary {spec}: LABEL=PATH of an executable (LABEL without : = , @ or spaces)")
        args.walrelay_binaries[name] = os.path.abspath(path)
    args.brokers = [b for b in args.brokers.split(",") if b]
    if args.brokers:
        return settle_brokers(args)
    systems = [s for s in args.systems.split(",") if s]
    w3_systems = [s for s in (args.w3_systems or args.systems).split(",") if s]
    for s in systems + w3_systems:
        try:
            v = Variant(s)
        except ValueError as e:
            sys.exit(str(e))
        if v.binary and v.binary not in args.walrelay_binaries:
            sys.exit(f"{s}: no --walrelay-binary {v.binary}=PATH")
    # Drained in the order given (the default lists the ceiling first).
    return list(dict.fromkeys(systems)), list(dict.fromkeys(w3_systems))


def settle_brokers(args):
    """The broker drains' systems (and checks of what they take)."""
    unknown = [b for b in args.brokers if b not in BROKERS]
    if unknown:
        sys.exit(f"--brokers: unknown {', '.join(unknown)}; known: {', '.join(BROKERS)}")
    only = args.only.upper().split(",") if args.only != parser().get_default("only") else list(BROKER_DRAINS)
    if not set(only) <= set(BROKER_DRAINS):
        sys.exit(f"--brokers drains {', '.join(BROKER_DRAINS)} only, not {', '.join(sorted(set(only) - set(BROKER_DRAINS)))}")
    args.only = ",".join(only)
    if args.pin != "off":
        sys.exit("--brokers does not pin (--pin off)")
    args.broker_warmup = args.broker_warmup or (5_000 if args.quick else 20_000)
    systems = [s for s in args.broker_systems.split(",") if s]
    for s in systems:
        try:
            v = Variant(s)
        except ValueError as e:
            sys.exit(str(e))
        if v.base not in BROKER_SYSTEMS + BASELINES:
            sys.exit(f"{s}: the broker drains run {', '.join(BROKER_SYSTEMS)} and the baselines")
        if v.binary and v.binary not in args.walrelay_binaries:
            sys.exit(f"{s}: no --walrelay-binary {v.binary}=PATH")
    return list(dict.fromkeys(systems)), []


def broker_workloads(env, args, only, systems, out, results):
    """The broker drains of --only, after the unmeasured warm-up."""
    db = env.db
    args.payload_bytes = len(db.value("SELECT bench_payload(123456, 1234567)::text"))
    log(f"payload: {args.payload_bytes} bytes of JSON; results in {out}")
    if any(base_system(s) in PUBLISHERS for s in systems):
        warm_up(env, out, args.broker_warmup, systems)
    if "W1" in only:
        results += workload_broker_drain(env, "W1", args.w1, lambda: db.query(f"CALL load_single({args.w1})"),
                                         systems, out)
    if "W2" in only:
        results += workload_broker_drain(
            env, "W2", args.w2, lambda: db.query(f"CALL load_batched({args.w2}, {args.w2_batch})"), systems, out)


def workloads(env, args, only, systems, w3_systems, out, results):
    """Every workload of --only, in the bench's order; their rows go into
    `results` as each workload ends (a run stopped midway keeps them)."""
    q, db = args.quick, env.db
    args.payload_bytes = len(db.value("SELECT bench_payload(123456, 1234567)::text"))
    log(f"payload: {args.payload_bytes} bytes of JSON; results in {out}")
    warm_broker(env, 20_000 if q else 400_000, out)
    env.set_pinned(PIN_MODES[args.pin][0])
    if "W1" in only:
        results += workload_drain(env, "W1", args.w1, lambda: db.query(f"CALL load_single({args.w1})"), systems, out)
    if "W2" in only:
        results += workload_drain(env, "W2", args.w2,
                                  lambda: db.query(f"CALL load_batched({args.w2}, {args.w2_batch})"), systems, out)
    if "W4" in only:
        results += workload_drain(
            env, "W4", args.w4,
            lambda: db.query("INSERT INTO outbox SELECT gen_random_uuid(), 'Order', 'order-' || (g % 1000), "
                             f"'OrderCreated', bench_payload(g, 0) FROM generate_series(1, {args.w4}) g"),
            systems, out)
    if "W5" in only:
        try:
            results += writer_cost(env, args.clients, args.writer_seconds, args.writer_rounds, out)
        except BenchError as e:
            log(f"writer's cost FAILED: {e}")
            results.append({"workload": "writer", "system": "table", "error": str(e).splitlines()[0]})
        results += workload_drain(env, "W5", args.w5, lambda: db.query(f"CALL load_messages({args.w5})"), systems,
                                  out)
    if "W3" in only:
        ceiling = args.ceiling_rate or next((r["events_per_s"] for r in results
                                             if r["workload"] == "W1" and r["system"] == "ceiling"
                                             and "error" not in r), None)
        if not ceiling:
            raise BenchError("W3 needs the W1 ceiling: run W1 too or pass --ceiling-rate")
        results += workload_w3(env, ceiling, args.levels, args.w3_seconds, w3_systems, out, args.clients,
                               args.w3_warmup)


def machine_facts(load_at_start):
    java = machine.command_line(["java", "-version"], stderr=True)
    return {
        "date_utc": machine.utc_now(),
        "nproc": os.cpu_count(),
        "cpu": machine.cpu_model(),
        "memory": machine.memory(),
        "kernel": platform.release(),
        "load_average_at_start": load_at_start,
        # The walsender's socket paces and coalesces its sends by it (BBR
        # coalesces on loopback, CUBIC does not): docs/benchmarks.md.
        "tcp_congestion_control": machine.first_line("/proc/sys/net/ipv4/tcp_congestion_control"),
        "postgres": machine.command_line(["pg_config", "--version"]),
        "java": java,
        "walrelay_commit": machine.walrelay_commit(),
        "worktree_dirty": machine.worktree_dirty(),
    }


def main():
    args = parser().parse_args()
    if args.self_check:
        self_check()
        return 0
    if args.http_ceiling:
        from .http_ceiling import http_ceiling
        print(json.dumps(http_ceiling(args.http_receiver), indent=1))
        return 0
    systems, w3_systems = settle(args)
    try:
        where = net.use(args.netns)
    except BenchError as e:
        sys.exit(str(e))
    if where.isolated and args.keep_servers:
        sys.exit("--keep-servers: the servers of a run in namespaces stop with them")
    if where.isolated and args.brokers:
        # Across a link a broker runs on Kafka's host, listening on its
        # address (brokers.py); the others listen on 127.0.0.1 only, which
        # would put them beside the driver, not across the link.
        local = [b for b in args.brokers if not BROKERS[b].networked]
        if local and where.cond != "loopback":
            sys.exit(f"--brokers {','.join(local)} with --net {where.cond}: only "
                     f"{', '.join(k for k, c in BROKERS.items() if c.networked)} run across a link "
                     "(scripts/brokers.sh WALRELAY_BROKER_HOST)")
    only = args.only.upper().split(",")
    load_at_start = machine.load_average()
    out = os.path.join(BENCH_DIR, "results", machine.utc_stamp())
    os.makedirs(out, exist_ok=True)
    command = args.command or " ".join(shlex.quote(a) for a in sys.argv)
    env = Env(args, out)
    results = []
    facts_brokers = {}

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_signal)
    facts_net = {"condition": where.cond, "describe": where.describe()}
    try:
        env.start()
        facts_net.update(where.facts(env.pg_port))
        log(f"network: {where.describe()}; round trip to PostgreSQL {facts_net.get('measured_rtt_us', '?')} us")
        if args.brokers:
            facts_brokers = {k: b.version() for k, b in env.brokers.items()}
            broker_workloads(env, args, only, systems, out, results)
        else:
            workloads(env, args, only, systems, w3_systems, out, results)
        return_code = 0
    except (BenchError, KeyboardInterrupt) as e:
        log(f"stopped: {e}")
        return_code = 1
    finally:
        link_cpu = where.link_cpu_s()
        if link_cpu is not None:
            facts_net["link_cpu_s"] = link_cpu
        env.stop()
    facts = machine_facts(load_at_start)
    facts["network"] = facts_net
    version = getattr(env, "server_version_num", 0)
    facts["pgoutput_options"] = pgoutput_options(args.streaming, version)
    facts["pgoutput_options_w5"] = message_options(args.streaming, version)
    if args.brokers:
        facts["load_average_at_end"] = machine.load_average()
        facts["brokers"] = facts_brokers
        facts["debezium_server_java"] = machine.command_line([os.path.join(REPO, "scripts", "debezium-server.sh"),
                                                              "java"])
        facts["debezium_server_java_version"] = machine.command_line([facts["debezium_server_java"], "-version"],
                                                                     stderr=True)
        facts["dbzs_java_opts"] = args.dbzs_java_opts
        return finish_brokers(args, facts, results, command, out, return_code)
    block = report(args, facts, results, command)
    from .plot import svg_plot  # matplotlib: only once there is something to plot
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
        network = f"{where.cond}-{where.cc}" if args.netns else None
        name = update_docs(block, svg, network)
        log(f"docs/benchmarks.md and docs/{name} updated")
    return return_code


def finish_brokers(args, facts, results, command, out, return_code):
    """results.json and results.md of a broker run, the table on stdout,
    and with --docs its block in docs/benchmarks.md."""
    block = broker_report(args, facts, results, command)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"command": command, "machine": facts, "quick": args.quick, "brokers": args.brokers,
                   "results": results}, f, indent=1)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(block)
    print(block)
    log(f"results: {out}/results.json, results.md")
    if args.docs and return_code == 0:
        where = net.CURRENT
        update_broker_docs(block, f"{where.cond}-{where.cc}" if args.netns else None)
        log("docs/benchmarks.md updated")
    return return_code
