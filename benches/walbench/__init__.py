"""walrelay's benchmark drivers, one package; run them through their scripts.

`python -m walbench` is the end-to-end benchmark (benches/run.sh runs it:
W1-W5 for pg_recvlogical, the minimal walsender reader, walrelay and
Debezium; with --brokers, W1 and W2 to NATS JetStream, Redis Streams,
RabbitMQ (AMQP, and the stream protocol) and HTTP for walrelay and Debezium
Server; its docstring is `walbench.cli`'s). benches/poll.py (the polling
source, benches/poll.sh) and benches/pipelines.py (several pipelines,
benches/pipelines.sh) are drivers of their own that take the shared pieces
from here.

Modules, by concern:

  cli            the command line and the run's order; results.json
  env            one run's environment: servers, slots, topics, pinning
  servers        PostgreSQL and Kafka under .walrelay-env (scripts/*.sh)
  net            the network: the host's loopback, or benches/net.sh's
                 namespaces with a delay on every link (--netns)
  postgres       a psycopg session
  schema         the bench database: outbox, publications, load procedures
  systems        the systems under test: variants, configurations, starting
  debezium       Debezium on Kafka Connect standalone, tuned and default
  dbz_server     Debezium Server: the application.properties of a broker
                 drain (walrelay reads it too), starting and stopping it
  brokers        the brokers besides Kafka (NATS, Redis, RabbitMQ, its
                 streams, HTTP): servers, a fresh destination per drain,
                 counts and the broker's times
  http_ceiling   --http-ceiling: the HTTP receiver alone under wrk
  config         TOML written from a dict (walrelay's configuration)
  kafka          confluent-kafka: topics, end offsets, reading records back
  kafka_markers  COMMIT markers of transactional topics (batch headers)
  walrelay       walrelay's endpoints: /readyz and the JSON of /api/state
  stats          histogram arithmetic and percentiles
  procs          /proc: CPU, memory, process trees, affinity, counters
  walsender      the walsender's scheduling through a drain
  cpu_profile    perf: where the machine's CPU went
  drains         W1, W2, W4, W5 and the broker's warm-up
  broker_drains  W1 and W2 to the brokers of --brokers, walrelay against
                 Debezium Server
  writer         the writer's cost of the two outbox styles (before W5)
  steady         W3: open-loop load, latency by stage, slot lag
  machine        facts about the machine and the tree
  report         the markdown tables and docs/benchmarks.md
  plot           the matplotlib figure
  selfcheck      --self-check: the pure pieces on synthetic input

Nothing here is imported by walrelay or its tests; the package only drives
processes and reads what they expose.
"""

import os
import subprocess
import sys
import time

# The repository: benches/walbench/__init__.py is two levels below it.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class BenchError(Exception):
    """A step of the benchmark failed; the message says which."""


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(cmd, **kw):
    """subprocess.run, checked unless told otherwise."""
    kw.setdefault("check", True)
    return subprocess.run(cmd, **kw)
