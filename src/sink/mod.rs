//! The Kafka sink: routed records into an idempotent librdkafka producer,
//! delivery reports into the checkpoint tracker, bad events into the error
//! policy.
//!
//! Owns the producer, its configuration (`enable.idempotence=true`,
//! `acks=all`, `partitioner=murmur2_random` so a key lands on the partition
//! the Java client would pick), backpressure (a full local queue makes the
//! sink wait, never fail and never buffer more) and the error policy: with
//! `errors.tolerance = none` a bad event (one the router refuses, or one
//! Kafka refuses permanently) stops the sink and nothing from its
//! transaction on is confirmed; with `all` it goes to the dead-letter topic
//! ([`dlq`]) and counts as delivered once that record is acknowledged.
//! Failures of the cluster itself (authorisation, fatal idempotence errors)
//! stop the sink under either policy. It never confirms an LSN itself: it
//! only reports deliveries to the tracker, tagged with the session
//! generation so reports from an earlier session are ignored.

pub mod config;
pub mod dlq;
pub mod limits;
pub mod progress;
pub mod progress_topic;
pub mod transactional;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::Bytes;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::producer::{
    BaseRecord, DeliveryResult, Producer, ProducerContext, PurgeConfig, ThreadedProducer,
};
use rdkafka::{ClientContext, Message};
use tokio::sync::{mpsc, Notify};
use tracing::{debug, error, warn};
use walrelay_proto::Lsn;

use self::dlq::{DeadLetter, Letter, Stage};
use self::limits::fits_alone;
use crate::chain::DisplayChain;
use crate::checkpoint::SharedTracker;
use crate::metrics::{observe_micros, CodeLabel, Metrics, TopicLabel};
use crate::router::{KafkaRecord, RouteError, Router};
use crate::secret::is_secret_key;
use crate::sink::config::{ErrorsConfig, KafkaConfig};
use crate::txn::OutboxEvent;

use self::transactional::Eos;

/// Producer settings walrelay insists on or defaults.
const FORCED: &[(&str, &str)] = &[("enable.idempotence", "true"), ("acks", "all")];
/// Defaults the user may override.
const DEFAULTS: &[(&str, &str)] = &[
    ("partitioner", "murmur2_random"),
    ("linger.ms", "5"),
    // Infinite local timeout: a broker outage is backpressure, not data loss.
    ("message.timeout.ms", "0"),
    // Bound librdkafka's own buffer: 32 MiB (the Java producer's
    // buffer.memory) or 32k messages. It is walrelay's largest memory term
    // when the broker is slower than the slot (64 MiB gave a 67 MB peak RSS
    // in W1; 16 MiB drained W1 and W2 as fast as 64 MiB, docs/benchmarks.md).
    ("queue.buffering.max.kbytes", "32768"),
    ("queue.buffering.max.messages", "32768"),
];
/// How often an idle sink looks for a permanent delivery failure.
const FAILURE_CHECK: Duration = Duration::from_millis(100);
/// How long a stopping sink waits for records already handed to
/// librdkafka (those before the bad event) to be reported.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Bits of the delivery tag that carry the transaction sequence; the
/// bits above carry the session generation.
const SEQ_BITS: u32 = 48;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;
/// Delivery tag of records outside any transaction (heartbeats):
/// generation 0, which no session has ([`KafkaSink::begin_session`] numbers
/// them from 1), so the tracker never sees their reports.
const UNTRACKED: u64 = 0;

/// Errors of the sink.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The producer could not be created (bad librdkafka property).
    #[error("cannot create the kafka producer")]
    Create(#[source] KafkaError),
    /// Routing an event failed (`errors.tolerance = none`).
    #[error(transparent)]
    Route(#[from] RouteError),
    /// librdkafka refused a record outright.
    #[error("cannot produce event {event_id} at lsn {lsn} to topic {topic}")]
    Produce {
        /// Source position.
        lsn: Lsn,
        /// The event id column's text.
        event_id: String,
        /// Intended topic.
        topic: String,
        /// librdkafka's error.
        #[source]
        source: Box<KafkaError>,
    },
    /// Kafka reported a permanent delivery failure.
    #[error("kafka could not deliver a record to {topic}: {error} (event {event_id} at lsn {lsn}); nothing after it is confirmed")]
    Delivery {
        /// Topic.
        topic: String,
        /// librdkafka's error text.
        error: String,
        /// The event id column's text (`heartbeat` for a heartbeat record).
        event_id: String,
        /// LSN of the event's INSERT (0/0 for a heartbeat record).
        lsn: Lsn,
    },
    /// The dead-letter record of a bad event could not be produced.
    #[error("cannot produce the dead-letter record of event {event_id} at lsn {lsn} to {topic}; nothing after it is confirmed")]
    DeadLetterProduce {
        /// The event id column's text.
        event_id: String,
        /// LSN of the event's INSERT.
        lsn: Lsn,
        /// The dead-letter topic.
        topic: String,
        /// librdkafka's error.
        #[source]
        source: Box<KafkaError>,
    },
    /// Kafka refused a dead-letter record.
    #[error(
        "kafka could not deliver a dead-letter record: {error}; nothing after it is confirmed"
    )]
    DeadLetter {
        /// librdkafka's error text.
        error: String,
    },
    /// A topic refused a batch as too large although this record fits its
    /// limit alone: its `max.message.bytes` was lowered after walrelay
    /// sized its batches for it. Not the record's fault, so it is never
    /// dead-lettered.
    #[error("topic {topic} refused a batch larger than its max.message.bytes ({limit}), although event {event_id} at lsn {lsn} fits it alone: the limit was lowered while walrelay ran; restart walrelay, which sizes its batches for each topic's limit (nothing after it is confirmed)")]
    BatchTooLarge {
        /// Topic.
        topic: String,
        /// The topic's limit as read when walrelay first produced to it.
        limit: u64,
        /// The event id column's text.
        event_id: String,
        /// LSN of the event's INSERT.
        lsn: Lsn,
    },
    /// Another instance with the same transactional id took over
    /// (exactly-once): this one never commits again.
    #[error("fenced: another walrelay with transactional.id {transactional_id} took over this pipeline; this instance stops without committing anything more")]
    Fenced {
        /// The transactional id.
        transactional_id: String,
    },
    /// A Kafka transaction failed and was aborted (exactly-once): nothing
    /// of it is visible to read_committed consumers; the pipeline resumes
    /// from the last committed progress.
    #[error("kafka transaction aborted: {reason}")]
    TransactionAborted {
        /// What failed.
        reason: String,
    },
    /// The initial snapshot (one Kafka transaction) took longer than the
    /// transaction timeout, so the broker aborted it (exactly-once).
    #[error("the initial snapshot took longer than kafka.transactions.timeout_ms ({timeout_ms} ms), so the broker aborted its Kafka transaction and nothing of it is visible; raise timeout_ms (up to the broker's transaction.max.timeout.ms, 15 minutes by default), or start with replication.snapshot_mode = \"no_data\"")]
    SnapshotTooLong {
        /// The timeout.
        timeout_ms: u64,
    },
    /// `init_transactions` failed (exactly-once).
    #[error("cannot initialise the transactional producer (transactional.id {transactional_id}): {reason}; exactly-once needs brokers with transactions (Kafka 0.11+, transaction.state.log.replication.factor met) and the IdempotentWrite/transactional-id ACLs")]
    TransactionInit {
        /// The transactional id.
        transactional_id: String,
        /// librdkafka's error.
        reason: String,
    },
    /// The progress topic could not be created or is unusable.
    #[error("progress topic {topic}: {reason}")]
    ProgressTopic {
        /// The topic.
        topic: String,
        /// What is wrong, with the fix.
        reason: String,
        /// The brokers did not answer (retried at start).
        transient: bool,
    },
    /// The last committed progress could not be read.
    #[error(transparent)]
    Progress(#[from] progress::ProgressError),
    /// The cluster refused walrelay itself (authentication, a fatal
    /// producer error): retrying would only hide it.
    #[error("kafka refused walrelay's producer: {error}; fix the credentials or the cluster and restart (nothing unsent is confirmed)")]
    Cluster {
        /// librdkafka's error and reason.
        error: String,
    },
}

impl SinkError {
    /// Whether a new session can help: an aborted Kafka transaction (the
    /// session resumes from the last committed progress). Every other sink
    /// error stops the pipeline.
    pub fn is_transient(&self) -> bool {
        matches!(self, SinkError::TransactionAborted { .. })
    }

    /// Whether exactly-once's start may be tried again: the brokers did
    /// not answer (init or reading the progress timed out or failed to
    /// connect). A fenced, refused or malformed start is not retried.
    pub fn is_start_transient(&self) -> bool {
        match self {
            // Fatal init errors (fenced, unauthorised) are Fenced/Cluster.
            SinkError::TransactionInit { .. }
            | SinkError::Progress(progress::ProgressError::Timeout { .. })
            | SinkError::Progress(progress::ProgressError::Consumer { .. }) => true,
            SinkError::ProgressTopic { transient, .. } => *transient,
            _ => false,
        }
    }
}

/// Kind names of the delivery failures that are about one record (its
/// size, its topic, a broker policy) rather than the cluster; under
/// `errors.tolerance = all` those records are dead-lettered.
pub fn per_record_failure(code: RDKafkaErrorCode) -> Option<&'static str> {
    Some(match code {
        RDKafkaErrorCode::MessageSizeTooLarge | RDKafkaErrorCode::InvalidMessageSize => {
            "message_too_large"
        }
        RDKafkaErrorCode::MessageBatchTooLarge => "record_list_too_large",
        RDKafkaErrorCode::InvalidTopic => "invalid_topic",
        RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic => {
            "unknown_topic"
        }
        RDKafkaErrorCode::PolicyViolation => "policy_violation",
        RDKafkaErrorCode::InvalidRecord => "invalid_record",
        RDKafkaErrorCode::InvalidTimestamp => "invalid_timestamp",
        RDKafkaErrorCode::InvalidMessage => "corrupt_message",
        _ => return None,
    })
}

fn is_size_failure(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::MessageSizeTooLarge
            | RDKafkaErrorCode::InvalidMessageSize
            | RDKafkaErrorCode::MessageBatchTooLarge
    )
}

/// State shared by the sink, its delivery callback and the dead-letter
/// producer's.
#[derive(Default)]
pub(crate) struct Shared {
    /// Where delivery reports are counted.
    pub(crate) metrics: Arc<Metrics>,
    tracker: Mutex<Option<(u64, SharedTracker)>>,
    failure: Mutex<Option<SinkError>>,
    wake: Notify,
    /// Signalled once per recorded failure, so an idle sink stops at once
    /// without being woken by every delivery report.
    failed: Notify,
    delivered: AtomicU64,
    /// `max.message.bytes` of the topics produced to, as read when the
    /// sink first met them.
    limits: Mutex<HashMap<String, u64>>,
    /// Exactly-once: events whose record Kafka refused for itself (its
    /// size, its topic, a policy), by commit LSN and change LSN. Their
    /// transaction was aborted; under `errors.tolerance = all` the retry
    /// sends their dead-letter records instead.
    pub(crate) refused: Mutex<Vec<Refused>>,
}

/// An event Kafka refused for itself, in exactly-once mode.
#[derive(Debug, Clone)]
pub(crate) struct Refused {
    /// An outbox event's record (else a dead letter, heartbeat or progress
    /// record, which no retry can replace).
    pub(crate) event: bool,
    /// Its transaction's commit record.
    pub(crate) commit_lsn: Lsn,
    /// Its change.
    pub(crate) lsn: Lsn,
    /// The kind of problem (metric label).
    pub(crate) kind: &'static str,
    /// The topic that refused it.
    pub(crate) topic: String,
    /// Kafka's error.
    pub(crate) message: String,
}

impl Shared {
    /// The tracker of the session `tag` belongs to, if it is the current one.
    fn tracker_for(&self, tag: u64) -> Option<SharedTracker> {
        let generation = tag >> SEQ_BITS;
        let guard = self.tracker.lock().expect("tracker slot lock poisoned");
        match guard.as_ref() {
            Some((g, t)) if *g == generation => Some(t.clone()),
            _ => None,
        }
    }

    /// The batch limit read for `topic`, if any.
    fn limit_of(&self, topic: &str) -> Option<u64> {
        self.limits
            .lock()
            .expect("limits lock poisoned")
            .get(topic)
            .copied()
    }

    /// Keeps the first failure; later ones follow from it.
    fn record_failure(&self, err: SinkError) {
        let mut failure = self.failure.lock().expect("failure slot lock poisoned");
        if failure.is_none() {
            *failure = Some(err);
        }
        self.failed.notify_one();
    }
}

/// What a delivery report needs to know about its record: which
/// transaction to settle, and enough of the event to name it in an error
/// or dead-letter it.
pub struct RecordContext {
    tag: u64,
    lsn: Lsn,
    commit_lsn: Lsn,
    xid: u32,
    /// The event's id as routed (a `String`, moved here: no copy).
    event_id: Option<String>,
    /// The row's original bytes; kept only when a dead-letter topic is
    /// configured.
    original: Option<Original>,
    /// When it was handed to the producer, Unix µs (0: not measured).
    produced_us: i64,
}

impl RecordContext {
    /// The context of a record that settles nothing in the tracker.
    fn untracked() -> RecordContext {
        RecordContext {
            tag: UNTRACKED,
            lsn: Lsn::ZERO,
            commit_lsn: Lsn::ZERO,
            xid: 0,
            event_id: None,
            original: None,
            produced_us: 0,
        }
    }

    /// The context of `event`'s record, about to be handed to the producer:
    /// observes the event's `receive_to_produce` stage.
    fn for_event(
        tag: u64,
        event: &OutboxEvent,
        event_id: Option<String>,
        original: Option<Original>,
        stages: &crate::metrics::Stages,
    ) -> Box<RecordContext> {
        let now = crate::clock::unix_now_micros();
        if event.meta.received_us > 0 {
            observe_micros(&stages.receive_to_produce, now - event.meta.received_us);
        }
        Box::new(RecordContext {
            tag,
            lsn: event.meta.lsn,
            commit_lsn: event.meta.commit_lsn,
            xid: event.meta.xid,
            event_id,
            original,
            produced_us: now,
        })
    }
}

/// An event's original bytes, for its dead-letter record.
struct Original {
    /// `schema.table` or `message prefix <prefix>`.
    origin: String,
    key: Option<Bytes>,
    value: Option<Bytes>,
}

/// The main producer's context: delivery reports into the tracker.
pub struct DeliveryContext {
    shared: Arc<Shared>,
    dead_letter: Option<Arc<DeadLetter>>,
}

impl ClientContext for DeliveryContext {
    /// librdkafka's client-level errors. Most are transient (a broker
    /// down is backpressure); a refused authentication or a fatal producer
    /// error never heals by retrying, so it stops the pipeline clearly
    /// instead of waiting forever. The reason text carries no secrets.
    fn error(&self, error: KafkaError, reason: &str) {
        let fatal = matches!(
            error.rdkafka_error_code(),
            Some(
                RDKafkaErrorCode::Authentication
                    | RDKafkaErrorCode::SaslAuthenticationFailed
                    | RDKafkaErrorCode::Fatal
            )
        );
        if fatal {
            // librdkafka's own thread calls this, outside the pipeline's
            // span: name the pipeline here.
            error!(pipeline = self.shared.metrics.name(), error = %error, reason, "kafka refused the producer");
            self.shared.record_failure(SinkError::Cluster {
                error: format!("{error}: {reason}"),
            });
            self.shared.wake.notify_waiters();
        } else {
            warn!(pipeline = self.shared.metrics.name(), error = %error, reason, "kafka client error");
        }
    }
}

impl ProducerContext for DeliveryContext {
    type DeliveryOpaque = Box<RecordContext>;

    fn delivery(&self, result: &DeliveryResult<'_>, ctx: Box<RecordContext>) {
        let tracker = self.shared.tracker_for(ctx.tag);
        let seq = ctx.tag & SEQ_MASK;
        match result {
            Ok(_) => {
                self.shared.delivered.fetch_add(1, Ordering::Relaxed);
                let now_us = crate::clock::unix_now_micros();
                if ctx.produced_us > 0 {
                    observe_micros(
                        &self.shared.metrics.stages.produce_to_ack,
                        now_us - ctx.produced_us,
                    );
                }
                if let Some(commit_us) = tracker.and_then(|t| t.ack(seq, 1)) {
                    observe_micros(&self.shared.metrics.commit_to_ack, now_us - commit_us);
                }
            }
            Err((err, msg)) => {
                let code = err.rdkafka_error_code();
                self.shared
                    .metrics
                    .delivery_errors
                    .get_or_create(&CodeLabel {
                        code: code.map_or_else(|| "unknown".to_owned(), |c| format!("{c:?}")),
                    })
                    .inc();
                let topic = msg.topic().to_owned();
                let event_id = ctx.event_id.as_deref().unwrap_or(if ctx.tag == UNTRACKED {
                    "heartbeat"
                } else {
                    "null"
                });
                // A batch refused for its size although this record fits
                // the topic's limit alone: not the record's fault.
                let limit = self.shared.limit_of(&topic);
                if let Some(limit) = limit.filter(|&l| {
                    code.is_some_and(is_size_failure)
                        && fits_alone(msg.payload_len() + msg.key_len() + header_bytes(msg), l)
                }) {
                    if let Some(t) = &tracker {
                        t.fail(seq);
                    }
                    error!(pipeline = self.shared.metrics.name(), topic, event_id, lsn = %ctx.lsn, limit, error = %err, "kafka refused a batch that this record fits alone");
                    self.shared.record_failure(SinkError::BatchTooLarge {
                        topic,
                        limit,
                        event_id: event_id.to_owned(),
                        lsn: ctx.lsn,
                    });
                    self.shared.wake.notify_waiters();
                    return;
                }
                // A per-record failure under `errors.tolerance = all`: the
                // dead-letter record replaces this one in the transaction's
                // count, so the tracker hears nothing now.
                let kind = code.and_then(per_record_failure);
                // Exactly-once: the transaction aborts; remember the event
                // so the retry dead-letters it (or the sink stops on it).
                if let Some(kind) = kind {
                    if ctx.tag == UNTRACKED {
                        self.shared
                            .refused
                            .lock()
                            .expect("refused lock poisoned")
                            .push(Refused {
                                event: ctx.event_id.is_some(),
                                commit_lsn: ctx.commit_lsn,
                                lsn: ctx.lsn,
                                kind,
                                topic: topic.clone(),
                                message: format!(
                                    "kafka could not deliver the record to {topic}: {err}"
                                ),
                            });
                    }
                }
                if let (Some(dl), Some(original), Some(kind), Some(t)) =
                    (&self.dead_letter, &ctx.original, kind, &tracker)
                {
                    let letter = Letter {
                        tag: ctx.tag,
                        lsn: ctx.lsn,
                        commit_lsn: ctx.commit_lsn,
                        xid: ctx.xid,
                        event_id: ctx.event_id.as_deref().map(str::to_owned),
                        table: original.origin.clone(),
                        key: original.key.clone(),
                        value: original.value.clone(),
                        topic: Some(topic.clone()),
                        kind,
                        class: "rdkafka::error::KafkaError",
                        message: format!("kafka could not deliver the record to {topic}: {err}"),
                        stage: Stage::Produce,
                        // The broker's limit is not the producer's: the
                        // original bytes go out unless they exceed the
                        // producer's own `message.max.bytes` (records that
                        // only shared a rejected batch keep their value).
                        too_large: false,
                    };
                    match dl.send(&letter) {
                        Ok(()) => {}
                        Err(source) => {
                            t.fail(seq);
                            self.shared.record_failure(SinkError::DeadLetterProduce {
                                event_id: event_id.to_owned(),
                                lsn: ctx.lsn,
                                topic: dl.topic().to_owned(),
                                source: Box::new(source),
                            });
                        }
                    }
                } else {
                    if let Some(t) = tracker {
                        t.fail(seq);
                    }
                    // Records purged after the first failure only echo it.
                    let purged = matches!(
                        code,
                        Some(RDKafkaErrorCode::PurgeQueue | RDKafkaErrorCode::PurgeInflight)
                    );
                    if !purged {
                        error!(topic, event_id, lsn = %ctx.lsn, error = %err, "kafka delivery failed permanently");
                    }
                    self.shared.record_failure(SinkError::Delivery {
                        topic,
                        error: err.to_string(),
                        event_id: event_id.to_owned(),
                        lsn: ctx.lsn,
                    });
                }
            }
        }
        self.shared.wake.notify_waiters();
    }
}

/// Bytes of a delivered record's header names and values.
fn header_bytes(msg: &rdkafka::message::BorrowedMessage<'_>) -> usize {
    msg.headers().map_or(0, |h| {
        h.iter()
            .map(|header| header.key.len() + header.value.map_or(0, <[u8]>::len))
            .sum()
    })
}

/// The librdkafka record for a routed event: topic, headers, key, value,
/// and the partition and timestamp the router chose, if any.
pub fn base_record<'a, O: rdkafka::util::IntoOpaque>(
    record: &'a KafkaRecord,
    opaque: O,
) -> BaseRecord<'a, [u8], [u8], O> {
    let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
    for h in &record.headers {
        headers = headers.insert(Header {
            key: &h.name,
            value: h.value.as_deref(),
        });
    }
    let mut base = BaseRecord::with_opaque_to(&record.topic, opaque).headers(headers);
    if let Some(key) = record.key.as_deref() {
        base = base.key(key);
    }
    if let Some(value) = record.value.as_deref() {
        base = base.payload(value);
    }
    if let Some(p) = record.partition {
        base = base.partition(p);
    }
    if let Some(ts) = record.timestamp_ms {
        base = base.timestamp(ts);
    }
    base
}

/// A record that belongs to no transaction (a heartbeat): `partition`
/// `None` lets the partitioner hash the key.
fn untracked_record<'a>(
    topic: &'a str,
    partition: Option<i32>,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
) -> BaseRecord<'a, [u8], [u8], Box<RecordContext>> {
    let mut base = BaseRecord::with_opaque_to(topic, Box::new(RecordContext::untracked()));
    if let Some(key) = key {
        base = base.key(key);
    }
    if let Some(value) = value {
        base = base.payload(value);
    }
    if let Some(p) = partition {
        base = base.partition(p);
    }
    base
}

/// The producer, shared by every replication session of the process.
pub struct KafkaSink {
    /// Replaced (only by [`KafkaSink::run`], after every record handed to
    /// it was reported) when a topic needs smaller batches.
    producer: RwLock<Arc<ThreadedProducer<DeliveryContext>>>,
    /// What the producer was created from (secrets included: never shown).
    client_config: ClientConfig,
    /// The current producer's `batch.size`.
    batch_size: AtomicU64,
    shared: Arc<Shared>,
    dead_letter: Option<Arc<DeadLetter>>,
    generation: AtomicU64,
    /// Exactly-once mode's state; `None` at-least-once.
    eos: Option<Arc<Eos>>,
    /// How long a stopping sink stays alive after its last delivery report,
    /// so the source's next standby status update confirms the events
    /// delivered before the bad one (one status interval).
    stop_grace: Duration,
}

impl KafkaSink {
    /// Creates the producer, and the dead-letter producer when `errors`
    /// sends bad events to a dead-letter topic. `status_interval` is the
    /// standby status interval: a sink stopping on a bad event waits that
    /// long, so what it delivered before is confirmed to PostgreSQL.
    ///
    /// With `kafka.exactly_once` the producer is transactional (its
    /// `transactional.id` derived from the pipeline reading `slot`); call
    /// [`KafkaSink::start_exactly_once`] before the first session.
    pub fn with_errors(
        config: &KafkaConfig,
        errors: &ErrorsConfig,
        status_interval: Duration,
        metrics: Arc<Metrics>,
        slot: &str,
    ) -> Result<Self, SinkError> {
        let mut props: BTreeMap<&str, &str> = DEFAULTS.iter().copied().collect();
        for (k, v) in config.properties() {
            props.insert(k, v);
        }
        props.extend(FORCED.iter().copied());
        props.insert("bootstrap.servers", &config.bootstrap_servers);
        let mut cc = ClientConfig::new();
        for (k, v) in &props {
            cc.set(*k, *v);
        }
        let shown: Vec<String> = props
            .iter()
            .map(|(k, v)| format!("{k}={}", if is_secret_key(k) { "<redacted>" } else { v }))
            .collect();
        debug!(config = ?shown, "kafka producer");
        let shared = Arc::new(Shared {
            metrics,
            ..Shared::default()
        });
        let dead_letter = match errors.dead_letter() {
            Some(topic) => Some(Arc::new(DeadLetter::new(
                &cc,
                topic,
                errors.dead_letter_context_headers,
                Arc::clone(&shared),
            )?)),
            None => None,
        };
        let context = DeliveryContext {
            shared: Arc::clone(&shared),
            dead_letter: dead_letter.clone(),
        };
        let eos = config
            .exactly_once
            .then(|| Arc::new(Eos::new(&config.transactions, slot)));
        let producer = match &eos {
            Some(eos) => transactional_config(&cc, eos, &config.transactions)
                .create_with_context(context)
                .map_err(SinkError::Create)?,
            None => cc.create_with_context(context).map_err(SinkError::Create)?,
        };
        Ok(KafkaSink {
            eos,
            producer: RwLock::new(Arc::new(producer)),
            batch_size: AtomicU64::new(limits::configured_batch_size(
                props.get("batch.size").copied(),
            )),
            client_config: cc,
            shared,
            dead_letter,
            generation: AtomicU64::new(0),
            stop_grace: status_interval + FAILURE_CHECK,
        })
    }

    /// Exactly-once mode's state, if on.
    pub fn exactly_once(&self) -> Option<&Arc<Eos>> {
        self.eos.as_ref()
    }

    /// Starts a new replication session: later delivery reports go to
    /// `tracker`; reports for earlier sessions are ignored.
    pub fn begin_session(&self, tracker: SharedTracker) -> u64 {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        *self
            .shared
            .tracker
            .lock()
            .expect("tracker slot lock poisoned") = Some((generation, tracker));
        generation
    }

    /// Takes a recorded permanent delivery failure.
    pub fn take_failure(&self) -> Option<SinkError> {
        self.shared
            .failure
            .lock()
            .expect("failure slot lock poisoned")
            .take()
    }

    /// Records handed to librdkafka (dead-letter records included) and not
    /// yet reported.
    pub fn in_flight(&self) -> i32 {
        self.producer().in_flight_count() + self.dead_letter.as_ref().map_or(0, |d| d.in_flight())
    }

    /// The current producer.
    fn producer(&self) -> Arc<ThreadedProducer<DeliveryContext>> {
        Arc::clone(&self.producer.read().expect("producer lock poisoned"))
    }

    /// Successful deliveries since start.
    pub fn delivered(&self) -> u64 {
        self.shared.delivered.load(Ordering::Relaxed)
    }

    /// Whether a broker answers a metadata request within `timeout`
    /// (blocking; call from a blocking thread).
    pub fn probe(&self, timeout: Duration) -> bool {
        self.producer()
            .client()
            .fetch_metadata(None, timeout)
            .is_ok()
    }

    /// Waits up to `timeout` for every record to be reported (blocking).
    pub fn flush(&self, timeout: Duration) -> bool {
        let main = self.producer().flush(timeout).is_ok();
        // A failed delivery may have produced a dead-letter record just now.
        let dead = self.dead_letter.as_ref().is_none_or(|d| d.flush(timeout));
        main && dead
    }

    /// Produces one record that belongs to no transaction (a heartbeat): its
    /// delivery confirms nothing. `partition` `None` lets the partitioner
    /// hash the key. A permanent delivery failure still stops
    /// the sink, as it stops Debezium's task. Never waits: a full local
    /// queue is an error the caller may skip.
    pub fn produce_untracked(
        &self,
        topic: &str,
        partition: Option<i32>,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Result<(), KafkaError> {
        if let Some(eos) = &self.eos {
            // Exactly-once: inside the next Kafka transaction.
            eos.queue(topic, partition, key, value);
            return Ok(());
        }
        let base = untracked_record(topic, partition, key, value);
        self.producer().send(base).map_err(|(e, _)| e)
    }

    /// Stops after a failure: drops what librdkafka has not sent yet (so
    /// records after the failed one mostly never reach Kafka; they are not
    /// confirmed either way), waits for what is already on the wire, and
    /// returns the failure.
    async fn stop(&self, err: SinkError) -> SinkError {
        self.producer().purge(PurgeConfig::default().queue());
        self.drain().await;
        err
    }

    /// Waits (bounded) until every record handed to librdkafka is reported,
    /// so the events before a bad one are in Kafka before walrelay exits,
    /// then one status interval more, so the source (which stops when the
    /// sink does) confirms them to PostgreSQL; the tracker never confirms
    /// the failed transaction or anything after it.
    async fn drain(&self) {
        let deadline = tokio::time::Instant::now() + DRAIN_TIMEOUT;
        while self.in_flight() > 0 && tokio::time::Instant::now() < deadline {
            let _ =
                tokio::time::timeout(Duration::from_millis(50), self.shared.wake.notified()).await;
        }
        tokio::time::sleep(self.stop_grace).await;
    }

    /// Routes and produces batches until the channel closes or a failure
    /// stops the sink: a bad event under `errors.tolerance = none`, a
    /// permanent delivery failure that is not dead-lettered, or a
    /// dead-letter record that cannot be delivered. Waits (backpressure)
    /// while librdkafka's queue is full.
    pub async fn run(
        &self,
        router: &mut Router,
        rx: mpsc::Receiver<Vec<OutboxEvent>>,
    ) -> Result<(), SinkError> {
        if let Some(eos) = &self.eos {
            return self.run_transactional(eos, router, rx).await;
        }
        self.run_idempotent(router, rx).await
    }

    /// The at-least-once `run`: every delivery report settles its record
    /// in the tracker at once.
    async fn run_idempotent(
        &self,
        router: &mut Router,
        mut rx: mpsc::Receiver<Vec<OutboxEvent>>,
    ) -> Result<(), SinkError> {
        let generation = self.generation.load(Ordering::Relaxed) << SEQ_BITS;
        // Per-batch topic counts, flushed to the metrics once per batch.
        let mut per_topic: Vec<(Arc<str>, u64)> = Vec::new();
        let mut producer = self.producer();
        // Topics whose batch limit was looked at (by this sink, ever).
        let mut sized: Vec<Arc<str>> = Vec::new();
        loop {
            let batch = tokio::select! {
                biased;
                batch = rx.recv() => match batch {
                    Some(batch) => batch,
                    None => break,
                },
                // A failure of the last records sent must stop the pipeline
                // even when no further batch arrives; a delivery report
                // wakes the sink at once, the timer is the fallback.
                _ = self.shared.failed.notified() => {
                    match self.take_failure() {
                        Some(err) => return Err(self.stop(err).await),
                        None => continue,
                    }
                }
                _ = tokio::time::sleep(FAILURE_CHECK) => {
                    match self.take_failure() {
                        Some(err) => return Err(self.stop(err).await),
                        None => continue,
                    }
                }
            };
            if let Some(err) = self.take_failure() {
                return Err(self.stop(err).await);
            }
            for event in &batch {
                let tag = generation | (event.seq & SEQ_MASK);
                let (record, event_id) = match event.route(router) {
                    Ok(routed) => routed,
                    Err(e) => match &self.dead_letter {
                        Some(dl) => {
                            let topic = event.intended_topic(router);
                            self.dead_letter_route(dl, event, tag, &e, topic)?;
                            continue;
                        }
                        None => {
                            // The events before it are with librdkafka:
                            // let them land before walrelay stops.
                            self.drain().await;
                            return Err(e.into());
                        }
                    },
                };
                match per_topic
                    .iter_mut()
                    .find(|(t, _)| Arc::ptr_eq(t, &record.topic) || **t == *record.topic)
                {
                    Some((_, n)) => *n += 1,
                    // First in this batch: maybe the first ever.
                    None => {
                        per_topic.push((Arc::clone(&record.topic), 1));
                        if !sized.iter().any(|t| **t == *record.topic) {
                            sized.push(Arc::clone(&record.topic));
                            producer = self.fit_batches(&record.topic, producer).await?;
                        }
                    }
                }
                let original = self.dead_letter.as_ref().map(|_| {
                    let (key, value) = event.original();
                    Original {
                        origin: event.origin(),
                        key,
                        value,
                    }
                });
                let ctx = RecordContext::for_event(
                    tag,
                    event,
                    event_id,
                    original,
                    &self.shared.metrics.stages,
                );
                let mut base = base_record(&record, ctx);
                loop {
                    match producer.send(base) {
                        Ok(()) => break,
                        Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                            base = back;
                            // Backpressure: wait for deliveries to make room.
                            let _ = tokio::time::timeout(
                                Duration::from_millis(10),
                                self.shared.wake.notified(),
                            )
                            .await;
                            if let Some(err) = self.take_failure() {
                                return Err(self.stop(err).await);
                            }
                        }
                        Err((source, back)) => {
                            // The id went into the record's context.
                            let event_id = back.delivery_opaque.event_id.clone();
                            let kind = source.rdkafka_error_code().and_then(per_record_failure);
                            match (&self.dead_letter, kind) {
                                (Some(dl), Some(kind)) => {
                                    let letter = Letter {
                                        // Refused locally for its size: the
                                        // producer's limit, which the
                                        // dead-letter record has too.
                                        too_large: source
                                            .rdkafka_error_code()
                                            .is_some_and(is_size_failure),
                                        kind,
                                        class: "rdkafka::error::KafkaError",
                                        message: format!(
                                            "cannot produce the record to {}: {}",
                                            record.topic,
                                            DisplayChain(&source)
                                        ),
                                        stage: Stage::Produce,
                                        topic: Some(record.topic.to_string()),
                                        event_id: event_id.clone(),
                                        ..letter_for(event, tag)
                                    };
                                    send_letter(dl, &letter)?;
                                }
                                _ => {
                                    self.drain().await;
                                    return Err(SinkError::Produce {
                                        lsn: event.meta.lsn,
                                        event_id: event_id
                                            .clone()
                                            .unwrap_or_else(|| "null".to_owned()),
                                        topic: record.topic.to_string(),
                                        source: Box::new(source),
                                    });
                                }
                            }
                            break;
                        }
                    }
                }
            }
            for (topic, n) in per_topic.drain(..) {
                self.shared
                    .metrics
                    .events
                    .get_or_create(&TopicLabel {
                        topic: topic.to_string(),
                    })
                    .inc_by(n);
            }
        }
        match self.take_failure() {
            Some(err) => Err(self.stop(err).await),
            None => Ok(()),
        }
    }

    /// Before the first record to `topic`: reads the topic's batch limit
    /// and, when the producer's batches could exceed it, waits until every
    /// record handed to `current` is reported (so nothing overtakes them)
    /// and replaces it with a producer whose `batch.size` fits. Returns the
    /// producer to use from now on. A limit that cannot be read leaves the
    /// producer as it is (a refused batch then stops walrelay, naming the
    /// topic).
    async fn fit_batches(
        &self,
        topic: &str,
        current: Arc<ThreadedProducer<DeliveryContext>>,
    ) -> Result<Arc<ThreadedProducer<DeliveryContext>>, SinkError> {
        let Some((limit, wanted, batch_size)) = self.read_limit(topic).await else {
            return Ok(current);
        };
        if wanted >= batch_size {
            return Ok(current);
        }
        warn!(
            topic,
            max_message_bytes = limit,
            from = batch_size,
            to = wanted,
            "the topic accepts smaller batches than the producer builds: lowering batch.size \
             (librdkafka does not split a batch the broker refused as too large)"
        );
        while current.in_flight_count() > 0 {
            let _ =
                tokio::time::timeout(Duration::from_millis(50), self.shared.wake.notified()).await;
            if let Some(err) = self.take_failure() {
                return Err(self.stop(err).await);
            }
        }
        let mut cc = self.client_config.clone();
        cc.set("batch.size", wanted.to_string());
        let context = DeliveryContext {
            shared: Arc::clone(&self.shared),
            dead_letter: self.dead_letter.clone(),
        };
        let replacement = Arc::new(cc.create_with_context(context).map_err(SinkError::Create)?);
        *self.producer.write().expect("producer lock poisoned") = Arc::clone(&replacement);
        self.batch_size.store(wanted, Ordering::Relaxed);
        // Dropping a producer joins its threads: not on a runtime thread.
        tokio::task::spawn_blocking(move || drop(current));
        Ok(replacement)
    }

    /// Exactly-once: before the first record to `topic`, reads its batch
    /// limit. The transactional producer is never replaced mid-transaction
    /// (a new one would fence it); a topic that needs smaller batches than
    /// the producer builds is reported, and `batch.size` is the fix.
    async fn note_limit(&self, topic: &str) {
        if let Some((limit, wanted, batch_size)) = self.read_limit(topic).await {
            if wanted < batch_size {
                warn!(
                    topic,
                    max_message_bytes = limit,
                    batch_size,
                    wanted,
                    "the topic accepts smaller batches than the transactional producer builds; \
                     set kafka.producer.\"batch.size\" to at most {wanted} (a refused batch \
                     aborts the Kafka transaction)"
                );
            }
        }
    }

    /// Reads `topic`'s batch limit and keeps it for the delivery reports;
    /// returns it with the `batch.size` it needs and the producer's
    /// current one. `None` when the topic does not exist yet or the limit
    /// cannot be read (logged).
    async fn read_limit(&self, topic: &str) -> Option<(u64, u64, u64)> {
        let limit = match limits::topic_limit(&self.client_config, topic).await {
            Ok(Some(limit)) => limit,
            Ok(None) => return None,
            Err(why) => {
                warn!(
                    topic,
                    why, "cannot read the topic's max.message.bytes; batches are not sized for it"
                );
                return None;
            }
        };
        self.shared
            .limits
            .lock()
            .expect("limits lock poisoned")
            .insert(topic.to_owned(), limit);
        let batch_size = self.batch_size.load(Ordering::Relaxed);
        Some((limit, limits::batch_size_for(limit), batch_size))
    }

    /// Sends the dead-letter record of an event the router refused.
    fn dead_letter_route(
        &self,
        dl: &DeadLetter,
        event: &OutboxEvent,
        tag: u64,
        err: &RouteError,
        topic: Option<Arc<str>>,
    ) -> Result<(), SinkError> {
        let letter = Letter {
            kind: err.kind(),
            class: "walrelay::router::RouteError",
            message: DisplayChain(err).to_string(),
            stage: Stage::Transformation,
            topic: err
                .topic()
                .map(str::to_owned)
                .or_else(|| topic.map(|t| t.to_string())),
            ..letter_for(event, tag)
        };
        send_letter(dl, &letter)
    }
}

/// The transactional producer's configuration: the shared one plus the
/// transactional id and timeouts. Other clients built from the shared
/// configuration (admin, dead-letter, the progress reader) stay plain.
fn transactional_config(
    cc: &ClientConfig,
    eos: &Eos,
    t: &crate::sink::config::TransactionsConfig,
) -> ClientConfig {
    let mut cc = cc.clone();
    cc.set("transactional.id", eos.transactional_id())
        .set("transaction.timeout.ms", t.timeout_ms.to_string());
    // librdkafka requires message.timeout.ms <= transaction.timeout.ms; a
    // record that times out aborts its transaction, which is retried.
    let message_timeout = cc
        .get("message.timeout.ms")
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&v| v > 0 && v <= t.timeout_ms)
        .unwrap_or(t.timeout_ms);
    cc.set("message.timeout.ms", message_timeout.to_string());
    cc
}

/// The parts of a dead-letter record that come from the event itself.
fn letter_for(event: &OutboxEvent, tag: u64) -> Letter {
    let (key, value) = event.original();
    Letter {
        tag,
        lsn: event.meta.lsn,
        commit_lsn: event.meta.commit_lsn,
        xid: event.meta.xid,
        event_id: event.event_id(),
        table: event.origin(),
        key,
        value,
        topic: None,
        kind: "unknown",
        class: "",
        message: String::new(),
        stage: Stage::Transformation,
        too_large: false,
    }
}

fn send_letter(dl: &DeadLetter, letter: &Letter) -> Result<(), SinkError> {
    dl.send(letter)
        .map_err(|source| SinkError::DeadLetterProduce {
            event_id: letter.event_id.clone().unwrap_or_else(|| "null".to_owned()),
            lsn: letter.lsn,
            topic: dl.topic().to_owned(),
            source: Box::new(source),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_failures_are_told_from_cluster_failures() {
        for (code, kind) in [
            (RDKafkaErrorCode::MessageSizeTooLarge, "message_too_large"),
            (
                RDKafkaErrorCode::MessageBatchTooLarge,
                "record_list_too_large",
            ),
            (RDKafkaErrorCode::InvalidTopic, "invalid_topic"),
            (RDKafkaErrorCode::UnknownTopicOrPartition, "unknown_topic"),
            (RDKafkaErrorCode::PolicyViolation, "policy_violation"),
            (RDKafkaErrorCode::InvalidRecord, "invalid_record"),
        ] {
            assert_eq!(per_record_failure(code), Some(kind), "{code:?}");
        }
        // The cluster, not the record: these stop walrelay under any policy.
        for code in [
            RDKafkaErrorCode::TopicAuthorizationFailed,
            RDKafkaErrorCode::ClusterAuthorizationFailed,
            RDKafkaErrorCode::SaslAuthenticationFailed,
            RDKafkaErrorCode::OutOfOrderSequenceNumber,
            RDKafkaErrorCode::InvalidProducerEpoch,
            RDKafkaErrorCode::Fatal,
            RDKafkaErrorCode::PurgeQueue,
            RDKafkaErrorCode::MessageTimedOut,
        ] {
            assert_eq!(per_record_failure(code), None, "{code:?}");
        }
        assert!(is_size_failure(RDKafkaErrorCode::MessageSizeTooLarge));
        assert!(!is_size_failure(RDKafkaErrorCode::InvalidTopic));
    }

    #[test]
    fn delivery_tags_carry_generation_and_sequence() {
        let shared = Shared::default();
        let tracker = SharedTracker::new(Lsn(100));
        *shared.tracker.lock().unwrap() = Some((3, tracker));
        let seq = 7u64;
        assert!(shared.tracker_for((3 << SEQ_BITS) | seq).is_some());
        assert!(shared.tracker_for((2 << SEQ_BITS) | seq).is_none());
        assert!(shared.tracker_for(UNTRACKED).is_none());
        // The first failure is kept; later ones follow from it.
        shared.record_failure(SinkError::DeadLetter { error: "a".into() });
        shared.record_failure(SinkError::DeadLetter { error: "b".into() });
        let kept = shared.failure.lock().unwrap().take().unwrap();
        assert_eq!(
            kept.to_string(),
            "kafka could not deliver a dead-letter record: a; nothing after it is confirmed"
        );
    }
}
