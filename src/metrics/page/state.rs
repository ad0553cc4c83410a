//! The JSON of `GET /api/state`: every pipeline of the process now, with
//! its history, as typed structs that the listener writes ([`State::of`])
//! and `walrelay status` reads back (serde both ways: a field renamed on
//! one side is renamed on the other, so the two cannot drift).
//!
//! Owns the shape and the reading of a pipeline's [`Metrics`] into it.
//! Field names are a contract with the operator's page (`page.html`) and
//! `benches/bench.py`: fields are added, never renamed or removed. It
//! must never carry a configuration value or a payload: only what
//! `/metrics` and `/readyz` already show. A figure that belongs to one
//! source is `null` for the other (the slot for polling, the backlog for
//! the WAL), so a reader never mistakes an unused gauge's 0 for a value.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use walrelay_proto::Lsn;

use super::super::history::{self, series, History, Reading, SampleView};
use super::super::{Metrics, PipelineState, Process, ResultLabel};

/// The answer of `GET /api/state`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// walrelay's version.
    pub version: String,
    /// Every pipeline ready (`/readyz` would answer 200).
    pub(crate) ready: bool,
    /// Seconds between two history samples.
    pub(crate) sample_interval_seconds: f64,
    /// Seconds of history kept.
    pub(crate) window_seconds: f64,
    /// The pipelines, in the order the configuration gives them.
    pub pipelines: Vec<PipelineView>,
    /// The distributed group this worker belongs to
    /// (`connect-distributed` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<GroupView>,
}

/// A `connect-distributed` worker's group: who is in it and what each
/// runs, as the status topic says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupView {
    /// `group.id`.
    pub group_id: String,
    /// This worker's id (`host:port`).
    pub worker_id: String,
    /// The group generation of its current assignment.
    pub generation: i32,
    /// Whether this worker leads the group.
    pub leader: bool,
    /// Every worker that reported a status, with the connectors it runs.
    pub workers: Vec<WorkerView>,
}

/// One worker of a group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerView {
    /// Its id (`host:port` of its REST listener).
    pub worker_id: String,
    /// The connectors it reports running or paused.
    pub connectors: Vec<String>,
}

/// Where a pipeline is in its life ([`PipelineState`] without the error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lifecycle {
    /// Connecting, waiting for its slot or lock, or reconnecting.
    Starting,
    /// Streaming (WAL) or holding a shard (polling).
    Running,
    /// Stopped on a fatal error (`walrelay_pipeline_up` 0).
    Failed,
    /// Stopped at shutdown.
    Stopped,
}

/// Which source a pipeline reads (`walrelay_source_info`'s `kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum SourceKind {
    /// A replication slot.
    Wal,
    /// The polling source.
    Poll,
}

/// One pipeline now, and its history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PipelineView {
    /// Its name (user data: the page writes it as text).
    pub name: String,
    /// `starting`, `running`, `failed` or `stopped`.
    pub state: Lifecycle,
    /// The error chain that stopped it, when `failed`.
    pub(crate) error: Option<String>,
    /// Streaming (or holding a shard), Kafka reachable, lag below critical.
    pub ready: bool,
    /// `wal` or `poll`; `null` until the pipeline said.
    pub(crate) source: Option<SourceKind>,
    /// Events produced, over every topic.
    pub events_total: u64,
    /// Events per second over the last sample interval; `null` before two
    /// samples.
    pub(crate) events_per_second: Option<f64>,
    /// Events handed to Kafka and not yet acknowledged.
    pub in_flight: i64,
    /// The highest WAL position received, `X/Y`; `null` for polling.
    #[serde(with = "lsn_text::option")]
    pub(crate) received_lsn: Option<Lsn>,
    /// The position confirmed to the slot, `X/Y`; `null` for polling.
    #[serde(with = "lsn_text::option")]
    pub confirmed_lsn: Option<Lsn>,
    /// `pg_current_wal_lsn() - confirmed_flush_lsn`; `null` for polling.
    pub confirmed_lag_bytes: Option<i64>,
    /// `pg_current_wal_lsn() - restart_lsn`; `null` for polling.
    pub(crate) retained_wal_bytes: Option<i64>,
    /// Now minus the commit time of the oldest unconfirmed event; `null`
    /// for polling.
    pub replication_lag_seconds: Option<f64>,
    /// Unpublished rows in the outbox table; `null` for the WAL.
    pub unpublished_rows: Option<i64>,
    /// Age of the oldest unpublished row; `null` for the WAL.
    pub oldest_unpublished_age_seconds: Option<f64>,
    /// Why it is not ready, as `/readyz` words it (`failed: <error>`,
    /// `stopped`, or the conditions that do not hold); `null` when ready.
    pub(crate) not_ready_reason: Option<String>,
    /// Events produced, by topic.
    pub events_by_topic: BTreeMap<String, u64>,
    /// Source transactions relayed.
    pub(crate) transactions_total: u64,
    /// Seconds since the commit of the oldest unacknowledged event.
    pub oldest_unacked_age_seconds: f64,
    /// Source commit to Kafka acknowledgement.
    pub(crate) commit_to_ack: Latency,
    /// Where that time goes, by stage; absent from older processes.
    #[serde(default)]
    pub(crate) stage_seconds: Option<StageLatencies>,
    /// Permanent Kafka delivery failures, over every error code.
    pub(crate) delivery_errors_total: u64,
    /// Sessions re-established after a transient failure.
    pub reconnects_total: u64,
    /// Changes and messages not relayed, over every reason.
    pub(crate) filtered_total: u64,
    /// The transactional producer's progress; `null` at-least-once.
    pub exactly_once: Option<ExactlyOnceView>,
    /// The replication slot as the lag monitor last read it; `null` for
    /// polling.
    pub slot: Option<SlotView>,
    /// The pgoutput session and its streamed transactions; `null` for
    /// polling.
    pub protocol: Option<ProtocolView>,
    /// The polling source's shards, rows and claims; `null` for the WAL.
    pub poll: Option<PollView>,
    /// The broker it publishes to; absent from older processes.
    #[serde(default)]
    pub broker: Option<BrokerView>,
    /// Samples, oldest first, over the last window.
    pub history: Vec<SampleView>,
}

/// The broker a pipeline publishes to, and what a broker other than Kafka
/// acknowledged, refused and made walrelay retry (Kafka's own figures are
/// `events_total` and `delivery_errors_total`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BrokerView {
    /// `kafka`, `nats-jetstream`, `redis`, ...
    pub name: String,
    /// Records it acknowledged (dead-letter records included).
    pub acked_total: u64,
    /// Records it refused for good.
    pub(crate) refused_total: u64,
    /// Times it could not be reached or did not take records.
    pub(crate) retries_total: u64,
}

/// A latency histogram: count, sum and cumulative buckets
/// (`walrelay_commit_to_ack_seconds`, each stage of
/// `walrelay_stage_seconds`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Latency {
    /// Observations.
    pub(crate) count: u64,
    /// Their sum, seconds.
    pub(crate) sum_seconds: f64,
    /// Cumulative counts at each finite upper bound, ascending; the
    /// `+Inf` bucket is `count`. Empty from a process that serves none.
    #[serde(default)]
    pub(crate) buckets: Vec<Bucket>,
}

/// One cumulative bucket of a [`Latency`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct Bucket {
    /// Upper bound, seconds.
    pub(crate) le: f64,
    /// Observations at or below it.
    pub(crate) count: u64,
}

/// The latency of an event by stage (`walrelay_stage_seconds`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StageLatencies {
    /// Commit timestamp to reading the commit off the socket.
    pub(crate) commit_to_receive: Latency,
    /// Read off the socket to handed to the broker.
    pub(crate) receive_to_produce: Latency,
    /// Handed to the broker to its acknowledgement.
    pub(crate) produce_to_ack: Latency,
    /// Fully acknowledged to confirmed to the server.
    pub(crate) ack_to_confirm: Latency,
}

/// Exactly-once delivery: the last committed progress record and the
/// Kafka transactions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExactlyOnceView {
    /// The source position of the last committed progress record, `X/Y`
    /// (`0/0` before the first).
    #[serde(with = "lsn_text")]
    pub committed_lsn: Lsn,
    /// Events of a split source transaction committed at that record; 0
    /// at a transaction boundary.
    pub(crate) committed_events: i64,
    /// Kafka transactions committed.
    pub transactions_committed: u64,
    /// Kafka transactions aborted.
    pub transactions_aborted: u64,
    /// Another instance with the same transactional id fenced this one.
    pub(crate) producer_fenced: bool,
    /// How long committing a Kafka transaction took
    /// (`walrelay_kafka_transaction_commit_seconds`).
    #[serde(default)]
    pub(crate) commit_seconds: Option<Latency>,
}

/// The replication slot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlotView {
    /// A walsender holds it.
    pub active: bool,
    /// Its `wal_status` (`reserved`, `extended`, `unreserved`, `lost`);
    /// `null` before the lag monitor read it.
    pub(crate) wal_status: Option<String>,
    /// Bytes of WAL before it is invalidated; 0 when unlimited.
    pub(crate) safe_wal_size_bytes: i64,
    /// Lag alert level by kind (`retained_wal`, `lag_seconds`): 0 ok, 1
    /// warning, 2 critical.
    pub alert_levels: BTreeMap<String, i64>,
}

/// The pgoutput session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProtocolView {
    /// The protocol version of the current session (1, 2 or 4); 0 before
    /// the first session.
    pub pgoutput_version: i64,
    /// Streamed transactions committed and relayed.
    pub streamed_transactions: u64,
    /// Streamed transactions aborted as a whole.
    pub stream_aborts: u64,
    /// Subtransactions of streamed transactions rolled back.
    pub subtransaction_aborts: u64,
    /// The abort LSN of the last Stream Abort that carried one, `X/Y`.
    #[serde(with = "lsn_text")]
    pub stream_abort_lsn: Lsn,
    /// Bytes in spill files right now.
    pub spill_bytes: i64,
}

/// The polling source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PollView {
    /// Shard locks this process holds (0 on a hot standby).
    pub shards_held: i64,
    /// Rows published and marked (or deleted).
    pub published_rows: u64,
    /// Published rows deleted by retention.
    pub retention_deleted_rows: u64,
    /// `LISTEN` notifications received.
    pub(crate) notifications: u64,
    /// Claims by result (`published`, `empty`, `rolled_back`).
    pub batches: BTreeMap<String, u64>,
    /// Errors by kind.
    pub(crate) errors: BTreeMap<String, u64>,
}

impl State {
    /// The state of `process` with `history`, as of `now`.
    pub(crate) fn of(process: &Process, history: &History, now: Instant) -> State {
        State {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            ready: process.not_ready().is_none(),
            sample_interval_seconds: history.interval().as_secs_f64(),
            window_seconds: history.window().as_secs_f64(),
            pipelines: process
                .pipelines()
                .iter()
                .map(|m| PipelineView::of(m, &history.samples(m.name()), now))
                .collect(),
            group: process.group_view(),
        }
    }

    /// The pipeline `name`.
    pub fn pipeline(&self, name: &str) -> Option<&PipelineView> {
        self.pipelines.iter().find(|p| p.name == name)
    }
}

impl PipelineView {
    /// Pipeline `m` now, with its `samples` as seen at `now`.
    pub(crate) fn of(m: &Metrics, samples: &[history::Sample], now: Instant) -> PipelineView {
        let reading = Reading::of(m);
        let source = history::source_kind(m).map(|kind| match kind {
            "poll" => SourceKind::Poll,
            _ => SourceKind::Wal,
        });
        let poll = source == Some(SourceKind::Poll);
        let wal = !poll;
        let (state, error) = match m.state() {
            PipelineState::Starting => (Lifecycle::Starting, None),
            PipelineState::Running => (Lifecycle::Running, None),
            PipelineState::Failed(e) => (Lifecycle::Failed, Some(e)),
            PipelineState::Stopped => (Lifecycle::Stopped, None),
        };
        PipelineView {
            name: m.name().to_owned(),
            state,
            error,
            ready: m.is_ready(),
            source,
            events_total: reading.events_total,
            events_per_second: samples.last().and_then(|s| s.events_per_second),
            in_flight: reading.in_flight,
            received_lsn: wal.then_some(reading.received_lsn),
            confirmed_lsn: wal.then_some(reading.confirmed_lsn),
            confirmed_lag_bytes: wal.then_some(reading.confirmed_lag_bytes),
            retained_wal_bytes: wal.then_some(reading.retained_wal_bytes),
            replication_lag_seconds: wal.then_some(reading.replication_lag_seconds),
            unpublished_rows: poll.then_some(reading.unpublished_rows),
            oldest_unpublished_age_seconds: poll.then_some(reading.oldest_unpublished_age_seconds),
            not_ready_reason: m.not_ready_reason(),
            events_by_topic: by_label(series(m.events.clone())),
            transactions_total: m.transactions.get(),
            oldest_unacked_age_seconds: m.oldest_unacked_age.get(),
            commit_to_ack: latency(&m.commit_to_ack),
            stage_seconds: Some(stage_latencies(m)),
            delivery_errors_total: total(series(m.delivery_errors.clone())),
            reconnects_total: m.reconnects.get(),
            filtered_total: total(series(m.filtered.clone())),
            exactly_once: (m.exactly_once.get() == 1).then(|| exactly_once(m)),
            slot: wal.then(|| slot(m)),
            protocol: wal.then(|| protocol(m)),
            poll: poll.then(|| poll_view(m)),
            broker: broker(m),
            history: samples.iter().map(|s| s.view(now)).collect(),
        }
    }
}

/// The broker `m` publishes to, once its sink started.
fn broker(m: &Metrics) -> Option<BrokerView> {
    let name = series(m.broker_info.clone())
        .into_iter()
        .find(|s| s.value > 0.0)?
        .label?;
    Some(BrokerView {
        name,
        acked_total: total(series(m.broker_acked.clone())),
        refused_total: total(series(m.broker_refused.clone())),
        retries_total: total(series(m.broker_retries.clone())),
    })
}

/// Label value to count, for a family of one label.
fn by_label(series: Vec<history::Series>) -> BTreeMap<String, u64> {
    series
        .into_iter()
        .map(|s| (s.label.unwrap_or_default(), s.value as u64))
        .collect()
}

/// The sum over a family's series.
fn total(series: Vec<history::Series>) -> u64 {
    series.iter().map(|s| s.value as u64).sum()
}

/// A histogram's count, sum and finite buckets.
fn latency(histogram: &prometheus_client::metrics::histogram::Histogram) -> Latency {
    let mut latency = Latency {
        count: 0,
        sum_seconds: 0.0,
        buckets: Vec::new(),
    };
    for s in series(histogram.clone()) {
        match (s.suffix.as_str(), s.label.as_deref().map(str::parse::<f64>)) {
            ("_count", _) => latency.count = s.value as u64,
            ("_sum", _) => latency.sum_seconds = s.value,
            ("_bucket", Some(Ok(le))) if le.is_finite() => latency.buckets.push(Bucket {
                le,
                count: s.value as u64,
            }),
            _ => {}
        }
    }
    latency
}

fn stage_latencies(m: &Metrics) -> StageLatencies {
    StageLatencies {
        commit_to_receive: latency(&m.stages.commit_to_receive),
        receive_to_produce: latency(&m.stages.receive_to_produce),
        produce_to_ack: latency(&m.stages.produce_to_ack),
        ack_to_confirm: latency(&m.stages.ack_to_confirm),
    }
}

fn exactly_once(m: &Metrics) -> ExactlyOnceView {
    let transactions = |result| {
        m.kafka_transactions
            .get(&ResultLabel { result })
            .map_or(0, |c| c.get())
    };
    ExactlyOnceView {
        committed_lsn: Lsn(m.progress_committed_lsn.get() as u64),
        committed_events: m.progress_committed_events.get(),
        transactions_committed: transactions("committed"),
        transactions_aborted: transactions("aborted"),
        producer_fenced: m.producer_fenced.get() != 0,
        commit_seconds: Some(latency(&m.kafka_transaction_commit)),
    }
}

fn slot(m: &Metrics) -> SlotView {
    SlotView {
        active: m.slot_active.get() != 0,
        wal_status: series(m.slot_wal_status.clone())
            .into_iter()
            .find(|s| s.value == 1.0)
            .and_then(|s| s.label),
        safe_wal_size_bytes: m.slot_safe_wal_size.get(),
        alert_levels: series(m.slot_alert_level.clone())
            .into_iter()
            .map(|s| (s.label.unwrap_or_default(), s.value as i64))
            .collect(),
    }
}

fn protocol(m: &Metrics) -> ProtocolView {
    ProtocolView {
        pgoutput_version: m.proto_version.get(),
        streamed_transactions: m.streamed_transactions.get(),
        stream_aborts: m.stream_aborts.get(),
        subtransaction_aborts: m.subxact_aborts.get(),
        stream_abort_lsn: Lsn(m.stream_abort_lsn.get() as u64),
        spill_bytes: m.spill_bytes.get(),
    }
}

fn poll_view(m: &Metrics) -> PollView {
    PollView {
        shards_held: m.poll_shards_held.get(),
        published_rows: m.poll_published.get(),
        retention_deleted_rows: m.poll_retention_deleted.get(),
        notifications: m.poll_notifications.get(),
        batches: by_label(series(m.poll_batches.clone())),
        errors: by_label(series(m.poll_errors.clone())),
    }
}

/// An [`Lsn`] as `pg_lsn` writes it (`16/B374D848`), both ways.
mod lsn_text {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};
    use walrelay_proto::Lsn;

    pub(super) fn serialize<S: Serializer>(lsn: &Lsn, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(lsn)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Lsn, D::Error> {
        String::deserialize(d)?.parse().map_err(D::Error::custom)
    }

    /// An optional [`Lsn`]: `null` or `X/Y`.
    pub(super) mod option {
        use serde::de::Error as _;
        use serde::{Deserialize, Deserializer, Serializer};
        use walrelay_proto::Lsn;

        pub(crate) fn serialize<S: Serializer>(lsn: &Option<Lsn>, s: S) -> Result<S::Ok, S::Error> {
            match lsn {
                Some(lsn) => s.collect_str(lsn),
                None => s.serialize_none(),
            }
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<Lsn>, D::Error> {
            Option::<String>::deserialize(d)?
                .map(|t| t.parse().map_err(D::Error::custom))
                .transpose()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{CodeLabel, KindLabel, ReasonLabel, StatusLabel, TopicLabel};
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    #[test]
    fn the_state_has_every_pipeline_its_values_and_its_history() {
        let p = Process::new();
        let wal = p.add_pipeline("orders");
        let poll = p.add_pipeline("billing <i>&</i>");
        wal.source_info
            .get_or_create(&KindLabel { kind: "wal" })
            .set(1);
        poll.source_info
            .get_or_create(&KindLabel { kind: "poll" })
            .set(1);
        for m in [&wal, &poll] {
            m.streaming.store(true, Ordering::Relaxed);
            m.kafka_reachable.store(true, Ordering::Relaxed);
        }
        let h = History::new(Duration::from_secs(5), Duration::from_secs(600));
        let t0 = Instant::now();
        h.sample(&p, t0, 1_000);
        wal.events
            .get_or_create(&TopicLabel { topic: "a".into() })
            .inc_by(30);
        wal.events
            .get_or_create(&TopicLabel { topic: "b".into() })
            .inc_by(20);
        wal.received_lsn.set(0x16B_3748);
        wal.confirmed_lsn.set(0x16B_3700);
        wal.slot_confirmed_lag.set(72);
        wal.slot_retained_wal.set(4096);
        wal.replication_lag.set(0.25);
        poll.poll_unpublished.set(17);
        poll.poll_oldest_unpublished_age.set(3.5);
        h.sample(&p, t0 + Duration::from_secs(5), 6_000);
        poll.set_ended(Some("the outbox table \"public.outbox\" is gone".into()));

        let state = State::of(&p, &h, t0 + Duration::from_secs(7));
        let v = serde_json::to_value(&state).unwrap();
        assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(v["ready"], false);
        assert_eq!(v["sample_interval_seconds"], 5.0);
        assert_eq!(v["window_seconds"], 600.0);
        let pipelines = v["pipelines"].as_array().unwrap();
        assert_eq!(pipelines.len(), 2);

        let o = &pipelines[0];
        assert_eq!(o["name"], "orders");
        assert_eq!(o["state"], "running");
        assert_eq!(o["error"], serde_json::Value::Null);
        assert_eq!(o["ready"], true);
        assert_eq!(o["source"], "wal");
        assert_eq!(o["events_total"], 50);
        assert_eq!(o["events_per_second"], 10.0);
        assert_eq!(o["received_lsn"], "0/16B3748");
        assert_eq!(o["confirmed_lsn"], "0/16B3700");
        assert_eq!(o["confirmed_lag_bytes"], 72);
        assert_eq!(o["retained_wal_bytes"], 4096);
        assert_eq!(o["replication_lag_seconds"], 0.25);
        assert_eq!(o["unpublished_rows"], serde_json::Value::Null);
        let hist = o["history"].as_array().unwrap();
        assert_eq!(hist.len(), 2);
        assert_eq!(hist[0]["age_seconds"], 7.0);
        assert_eq!(hist[0]["unix_ms"], 1_000);
        assert_eq!(hist[0]["events_per_second"], serde_json::Value::Null);
        assert_eq!(hist[1]["age_seconds"], 2.0);
        assert_eq!(hist[1]["events_total"], 50);
        assert_eq!(hist[1]["events_per_second"], 10.0);
        assert_eq!(hist[1]["confirmed_lag_bytes"], 72);
        assert_eq!(hist[1]["retained_wal_bytes"], 4096);
        assert_eq!(hist[1]["replication_lag_seconds"], 0.25);
        assert_eq!(hist[1]["received_lsn"], "0/16B3748");
        assert_eq!(hist[1]["confirmed_lsn"], "0/16B3700");

        let b = &pipelines[1];
        assert_eq!(b["name"], "billing <i>&</i>");
        assert_eq!(b["state"], "failed");
        assert_eq!(b["error"], "the outbox table \"public.outbox\" is gone");
        assert_eq!(b["ready"], false);
        assert_eq!(b["source"], "poll");
        assert_eq!(b["received_lsn"], serde_json::Value::Null);
        assert_eq!(b["confirmed_lag_bytes"], serde_json::Value::Null);
        assert_eq!(b["unpublished_rows"], 17);
        assert_eq!(b["oldest_unpublished_age_seconds"], 3.5);
        assert_eq!(b["history"][1]["unpublished_rows"], 17);
        assert_eq!(b["events_per_second"], 0.0);
        // Figures added for `walrelay status`.
        assert_eq!(o["not_ready_reason"], serde_json::Value::Null);
        assert_eq!(o["events_by_topic"], serde_json::json!({"a": 30, "b": 20}));
        assert_eq!(o["commit_to_ack"]["count"], 0);
        assert_eq!(o["exactly_once"], serde_json::Value::Null);
        assert_eq!(o["slot"]["active"], false);
        assert_eq!(o["slot"]["wal_status"], serde_json::Value::Null);
        assert_eq!(o["protocol"]["pgoutput_version"], 0);
        assert_eq!(o["protocol"]["stream_abort_lsn"], "0/0");
        assert_eq!(o["poll"], serde_json::Value::Null);
        assert_eq!(
            b["not_ready_reason"],
            "failed: the outbox table \"public.outbox\" is gone"
        );
        assert_eq!(b["slot"], serde_json::Value::Null);
        assert_eq!(b["protocol"], serde_json::Value::Null);
        assert_eq!(b["poll"]["shards_held"], 0);
        assert_eq!(b["poll"]["batches"], serde_json::json!({}));
    }

    #[test]
    fn every_figure_reads_back_as_it_was_set() {
        let p = Process::new();
        let m = p.add_pipeline("orders");
        m.source_info
            .get_or_create(&KindLabel { kind: "wal" })
            .set(1);
        for (topic, n) in [("t1", 3), ("t2", 40)] {
            m.events
                .get_or_create(&TopicLabel {
                    topic: topic.into(),
                })
                .inc_by(n);
        }
        m.transactions.inc_by(7);
        m.oldest_unacked_age.set(1.5);
        m.commit_to_ack.observe(0.25);
        m.commit_to_ack.observe(0.75);
        for code in ["A", "B"] {
            m.delivery_errors
                .get_or_create(&CodeLabel { code: code.into() })
                .inc_by(2);
        }
        m.reconnects.inc();
        m.filtered
            .get_or_create(&ReasonLabel { reason: "r" })
            .inc_by(5);
        m.exactly_once.set(1);
        m.kafka_transactions
            .get_or_create(&ResultLabel {
                result: "committed",
            })
            .inc_by(9);
        m.progress_committed_lsn.set(0x1_0000_0010);
        m.progress_committed_events.set(4);
        m.producer_fenced.set(1);
        m.slot_active.set(1);
        for (status, on) in [("reserved", 0), ("extended", 1)] {
            m.slot_wal_status
                .get_or_create(&StatusLabel {
                    status: status.into(),
                })
                .set(on);
        }
        m.slot_safe_wal_size.set(1 << 30);
        m.slot_alert_level
            .get_or_create(&KindLabel {
                kind: "lag_seconds",
            })
            .set(1);
        m.proto_version.set(4);
        m.streamed_transactions.inc_by(3);
        m.stream_aborts.inc();
        m.subxact_aborts.inc_by(2);
        m.stream_abort_lsn.set(0x2_0000_0020);
        m.spill_bytes.set(8192);
        let h = History::new(Duration::from_secs(5), Duration::from_secs(600));
        let state = State::of(&p, &h, Instant::now());
        let json = serde_json::to_string(&state).unwrap();
        let back: State = serde_json::from_str(&json).unwrap();
        assert_eq!(back, state, "{json}");
        let v = &back.pipelines[0];
        assert_eq!(v.state, Lifecycle::Starting);
        assert_eq!(
            v.not_ready_reason.as_deref(),
            Some("streaming=false kafka_reachable=false lag_critical=false")
        );
        assert_eq!(v.source, Some(SourceKind::Wal));
        assert_eq!(v.events_total, 43);
        assert_eq!(
            v.events_by_topic,
            BTreeMap::from([("t1".to_owned(), 3), ("t2".to_owned(), 40)])
        );
        assert_eq!(v.transactions_total, 7);
        assert_eq!(v.oldest_unacked_age_seconds, 1.5);
        let latency = &v.commit_to_ack;
        assert_eq!((latency.count, latency.sum_seconds), (2, 1.0));
        // Cumulative buckets, ascending: 0 below 0.25 s, 1 up to 0.75 s, 2
        // from there on.
        let at = |le: f64| latency.buckets.iter().find(|b| b.le >= le).map(|b| b.count);
        assert!(latency.buckets.windows(2).all(|w| w[0].le < w[1].le));
        assert_eq!(at(0.0), Some(0));
        assert_eq!(at(0.25), Some(1));
        assert_eq!(at(0.75), Some(2));
        let stages = v.stage_seconds.as_ref().unwrap();
        assert_eq!(stages.produce_to_ack.count, 0);
        assert!(!stages.produce_to_ack.buckets.is_empty());
        assert_eq!(
            (
                v.delivery_errors_total,
                v.reconnects_total,
                v.filtered_total
            ),
            (4, 1, 5)
        );
        assert_eq!(
            v.exactly_once,
            Some(ExactlyOnceView {
                committed_lsn: Lsn(0x1_0000_0010),
                committed_events: 4,
                transactions_committed: 9,
                transactions_aborted: 0,
                producer_fenced: true,
                commit_seconds: v
                    .exactly_once
                    .as_ref()
                    .and_then(|e| e.commit_seconds.clone()),
            })
        );
        let commit = v
            .exactly_once
            .as_ref()
            .and_then(|e| e.commit_seconds.as_ref());
        assert_eq!(commit.map(|c| c.count), Some(0));
        assert!(json.contains("\"committed_lsn\":\"1/10\""), "{json}");
        let slot = v.slot.as_ref().unwrap();
        assert!(slot.active);
        assert_eq!(slot.wal_status.as_deref(), Some("extended"));
        assert_eq!(slot.safe_wal_size_bytes, 1 << 30);
        assert_eq!(
            slot.alert_levels,
            BTreeMap::from([("lag_seconds".to_owned(), 1)])
        );
        assert_eq!(
            v.protocol,
            Some(ProtocolView {
                pgoutput_version: 4,
                streamed_transactions: 3,
                stream_aborts: 1,
                subtransaction_aborts: 2,
                stream_abort_lsn: Lsn(0x2_0000_0020),
                spill_bytes: 8192,
            })
        );
        assert_eq!(v.poll, None);
    }

    #[test]
    fn the_polling_source_reads_back() {
        let p = Process::new();
        let m = p.add_pipeline("billing");
        m.source_info
            .get_or_create(&KindLabel { kind: "poll" })
            .set(1);
        m.poll_shards_held.set(2);
        m.poll_published.inc_by(50);
        m.poll_retention_deleted.inc_by(5);
        m.poll_notifications.inc_by(6);
        for (result, n) in [("published", 4), ("empty", 10)] {
            m.poll_batches
                .get_or_create(&ResultLabel { result })
                .inc_by(n);
        }
        m.poll_errors
            .get_or_create(&KindLabel { kind: "claim" })
            .inc();
        let h = History::new(Duration::from_secs(5), Duration::from_secs(600));
        let json = serde_json::to_string(&State::of(&p, &h, Instant::now())).unwrap();
        let state: State = serde_json::from_str(&json).unwrap();
        let v = state.pipeline("billing").unwrap();
        assert_eq!(v.received_lsn, None);
        assert_eq!(v.slot, None);
        assert_eq!(
            v.poll,
            Some(PollView {
                shards_held: 2,
                published_rows: 50,
                retention_deleted_rows: 5,
                notifications: 6,
                batches: BTreeMap::from([("empty".to_owned(), 10), ("published".to_owned(), 4)]),
                errors: BTreeMap::from([("claim".to_owned(), 1)]),
            })
        );
        assert!(state.pipeline("nobody").is_none());
    }
}
