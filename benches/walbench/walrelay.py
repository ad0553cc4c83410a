"""walrelay's own endpoints, read as a client reads them: the address its
metrics listener took (the drivers ask for port 0 and walrelay logs the
one it got), `/readyz`, and the typed JSON of `/api/state`
(src/metrics/page.rs) through urllib. Never the Prometheus text of
`/metrics`: the project has one exposition, and no second parser of it.

The drivers run one pipeline per walrelay process and read that pipeline
(`pipelines[0]`) of the state:

- W3's latency by stage: `stage_seconds` (stage name -> latency) and
  `commit_to_ack` (a latency), walrelay_stage_seconds and
  walrelay_commit_to_ack_seconds. A latency is `{"count": n,
  "sum_seconds": s}` and, to be a histogram the breakdown can use,
  `"buckets": [{"le": bound, "count": c}, ...]`: cumulative counts per
  finite upper bound in seconds, the +Inf bucket being `count`. A state
  without the stages' buckets (a binary that does not serve them) gives
  W3 "no breakdown", as a binary without the histograms did.
- walrelay-eos's Kafka transactions: the pipeline's `exactly_once`
  object, kept as it comes (results.json's `txn_metrics`).
- benches/poll.py: the pipeline's fields but its history (its results'
  `metrics`).
"""

import json
import re
import urllib.request

from . import log, stats

LISTEN = re.compile(r"metrics and health endpoints listen=(\S+)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")

# W3's rows by stage: (field of the pipeline's state, its stage or None,
# what the row says).
STAGES = (
    ("stage_seconds", "commit_to_receive",
     "commit → read off the socket (server commit timestamp; per transaction)"),
    ("stage_seconds", "receive_to_produce", "read → handed to the producer (per event)"),
    ("stage_seconds", "produce_to_ack", "handed to the producer → Kafka delivery report (per event)"),
    ("stage_seconds", "ack_to_confirm",
     "transaction acknowledged → standby status update confirming it (per status update)"),
    ("commit_to_ack", None, "commit → Kafka delivery report (walrelay's own histogram)"),
)


def row_key(field, stage):
    """A stage's key in results.json: the stage, or the metric's name."""
    return stage or f"walrelay_{field}_seconds"


class Endpoints:
    """The HTTP endpoints of one walrelay process, found through its log."""

    def __init__(self, logfile):
        self.logfile = logfile
        self._address = None

    def address(self):
        """host:port of the metrics listener, once walrelay has logged it."""
        if self._address is None:
            try:
                with open(self.logfile, errors="replace") as f:
                    # The log is coloured: the escapes go first.
                    m = LISTEN.search(ANSI.sub("", f.read()))
            except OSError:
                return None
            self._address = m.group(1) if m else None
        return self._address

    def get(self, path, timeout=5):
        """(status, body) of GET `path`; OSError if nothing answers, and
        for an error status (urllib's HTTPError)."""
        address = self.address()
        if address is None:
            raise OSError(f"no metrics listener in {self.logfile} yet")
        with urllib.request.urlopen(f"http://{address}{path}", timeout=timeout) as resp:
            return resp.status, resp.read()

    def ready(self):
        """`/readyz` answers 200: every pipeline is streaming."""
        try:
            return self.get("/readyz", timeout=2)[0] == 200
        except OSError:
            return False

    def state(self):
        """The JSON of `/api/state`, or None (logged) if unreachable."""
        try:
            return json.loads(self.get("/api/state")[1])
        except (OSError, ValueError) as e:
            log(f"no state from walrelay: {e}")
            return None

    def pipeline(self):
        """The state of the process's one pipeline, or None."""
        state = self.state()
        pipelines = (state or {}).get("pipelines") or []
        return pipelines[0] if pipelines else None


def counters(pipeline):
    """A pipeline's state without its history (poll.py's `metrics`)."""
    return {k: v for k, v in (pipeline or {}).items() if k != "history"}


def transaction_counters(pipeline):
    """The pipeline's `exactly_once` object ({} if the state has none);
    None if unreachable."""
    if pipeline is None:
        return None
    return pipeline.get("exactly_once") or {}


def stage_histograms(pipeline):
    """{(field, stage): histogram} of STAGES now, of those the state gives
    with buckets; {} if none; None if unreachable."""
    if pipeline is None:
        return None
    out = {}
    for field, stage, _ in STAGES:
        h = pipeline.get(field)
        if stage is not None:
            h = (h or {}).get(stage)
        if not h or "buckets" not in h:
            continue
        try:
            out[(field, stage)] = stats.histogram(((b["le"], b["count"]) for b in h["buckets"]), h["count"],
                                                  h["sum_seconds"])
        except (KeyError, TypeError) as e:
            log(f"/api/state: {field} {stage or ''} is not a histogram ({e!r}): no breakdown")
            return {}
    return out


def stage_breakdown(before, after):
    """Per stage of STAGES: the observations between two readings and
    their percentiles in ms; None when walrelay serves no stage_seconds
    ("no breakdown")."""
    if not after or not any(f == "stage_seconds" for f, _ in after):
        return None
    rows = {}
    for field, stage, _ in STAGES:
        a = after.get((field, stage))
        if a is None:
            continue
        h = stats.histogram_delta(a, (before or {}).get((field, stage)))
        row = {"count": h["count"], "mean_ms": h["sum"] / h["count"] * 1000 if h["count"] else None}
        for name, q in stats.QUANTILES:
            v = stats.histogram_quantile(h, q)
            row[f"{name}_ms"] = v * 1000 if v is not None else None
        rows[row_key(field, stage)] = row
    return rows
