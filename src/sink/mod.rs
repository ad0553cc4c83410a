//! The sink: routed records to the broker through one publish step,
//! acknowledgements into the checkpoint tracker, bad events into the error
//! policy.
//!
//! ```text
//!  events ─▶ run: at-least-once (this file) │ exactly-once (transactional)
//!               └──────────┬───────────────┘
//!                   publish::Step  route or dead-letter, counts, limits,
//!                          │       backpressure            (written once)
//!                   broker::Broker  kafka (librdkafka) │ the next broker
//!                          │
//!              acknowledgement ─▶ publish::Shared::settle ─▶ tracker
//! ```
//!
//! Owns the Kafka producer's configuration (`enable.idempotence=true`,
//! `acks=all`, `partitioner=murmur2_random` so a key lands on the partition
//! the Java client would pick), the at-least-once loop and the error
//! policy: with `errors.tolerance = none` a bad event (one the router
//! refuses, or one the broker refuses permanently) stops the sink and
//! nothing from its transaction on is confirmed; with `all` it goes to the
//! dead-letter topic ([`dlq`]) and counts as delivered once that record is
//! acknowledged. Failures of the cluster itself (authorisation, fatal
//! idempotence errors) stop the sink under either policy. It never confirms
//! an LSN itself: it only reports deliveries to the tracker, tagged with
//! the session generation so reports from an earlier session are ignored.
//! Exactly-once mode is [`transactional`]; where a broker plugs in is
//! [`broker`] (docs/architecture.md).

pub(crate) mod aws;
pub mod broker;
pub(crate) mod choice;
pub mod config;
pub(crate) mod dlq;
pub(crate) mod http;
pub mod kafka;
pub(crate) mod limits;
pub(crate) mod nats;
pub(crate) mod progress;
pub mod progress_topic;
pub(crate) mod publish;
pub(crate) mod pubsub;
pub(crate) mod pulsar;
pub(crate) mod queued;
pub(crate) mod rabbitmq;
pub(crate) mod rabbitmq_stream;
pub(crate) mod redis;
pub(crate) mod tls;
pub(crate) mod transactional;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{Producer, PurgeConfig, ThreadedProducer};
use tokio::sync::mpsc;
use tracing::{debug, warn};
use walrelay_proto::Lsn;

use self::broker::{Broker, FailureClass, Refusal, Wanted, WireRecord};
use self::dlq::{DeadLetter, Letter, Stage};
use self::kafka::DeliveryContext;
use self::publish::{RecordContext, Routing, Shared, Step, Stop, SEQ_BITS, SEQ_MASK};
use self::transactional::Eos;
use crate::chain::DisplayChain;
use crate::checkpoint::SharedTracker;
use crate::metrics::Metrics;
use crate::retry::Retry;
use crate::router::{KafkaRecord, RouteError, Router};
use crate::secret::is_secret_key;
use crate::sink::config::{ErrorsConfig, KafkaConfig};
use crate::txn::OutboxEvent;

/// Producer settings walrelay insists on or defaults.
const FORCED: &[(&str, &str)] = &[("enable.idempotence", "true"), ("acks", "all")];
/// Defaults the user may override.
const DEFAULTS: &[(&str, &str)] = &[
    ("partitioner", "murmur2_random"),
    ("linger.ms", "5"),
    // Infinite local timeout: a broker outage is backpressure, not data loss.
    ("message.timeout.ms", "0"),
    // Bound librdkafka's own buffer: 32 MiB of payloads (the Java
    // producer's buffer.memory) or 8,192 messages. It is walrelay's largest
    // memory term when the broker is slower than the slot: a queued record
    // costs its payload and about 500 bytes besides (librdkafka's message
    // and header, walrelay's delivery context), which the kbytes bound does
    // not count. 32,768 messages peaked at 58-64 MB in W2 across `lan`,
    // 8,192 at 46.6-48.8 MB, with W2's rate 0.92-1.01 and W1's 0.97-1.12 of
    // 32,768's in four runs; across `zone`, W2 at 0.94 in two runs and 0.98
    // in a third (docs/benchmarks.md, "Memory across `lan`" and "The channel
    // between the source and the sink").
    ("queue.buffering.max.kbytes", "32768"),
    ("queue.buffering.max.messages", "8192"),
];
/// How often an idle sink looks for a permanent delivery failure.
const FAILURE_CHECK: Duration = Duration::from_millis(100);
/// How long a stopping sink waits for records already handed to
/// librdkafka (those before the bad event) to be reported.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Errors of the sink.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SinkError {
    /// The configuration asks for a guarantee the broker cannot give.
    #[error(transparent)]
    Unmet(#[from] broker::Unmet),
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
    /// The broker reported a permanent delivery failure.
    #[error("{broker} could not deliver a record to {topic}: {error} (event {event_id} at lsn {lsn}); nothing after it is confirmed")]
    Delivery {
        /// The broker's name.
        broker: &'static str,
        /// Topic, subject, stream or URL.
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
        /// The broker client's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The broker refused a dead-letter record.
    #[error(
        "{broker} could not deliver a dead-letter record: {error}; nothing after it is confirmed"
    )]
    DeadLetter {
        /// The broker's name.
        broker: &'static str,
        /// The broker's error text.
        error: String,
    },
    /// A topic refused a batch as too large although this record fits its
    /// limit alone: its `max.message.bytes` was lowered after walrelay
    /// sized its batches for it. Not the record's fault, so it is never
    /// dead-lettered.
    #[error("topic {topic} refused a batch larger than its max.message.bytes ({limit}), although event {event_id} at lsn {lsn} fits it alone: the limit was lowered while walrelay ran; restart walrelay, which sizes its batches for each topic's limit (nothing after it is confirmed)")]
    BatchTooLarge {
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
    Fenced { transactional_id: String },
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
    SnapshotTooLong { timeout_ms: u64 },
    /// `init_transactions` failed (exactly-once).
    #[error("cannot initialise the transactional producer (transactional.id {transactional_id}): {reason}; exactly-once needs brokers with transactions (Kafka 0.11+, transaction.state.log.replication.factor met) and the IdempotentWrite/transactional-id ACLs")]
    TransactionInit {
        transactional_id: String,
        /// librdkafka's error.
        reason: String,
    },
    /// The progress topic could not be created or is unusable.
    #[error("progress topic {topic}: {reason}")]
    ProgressTopic {
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

/// What each sink error allows. Transient: an aborted Kafka transaction
/// (a new session resumes from the last committed progress), and, at
/// exactly-once's start, brokers that did not answer (init, or reading the
/// progress, timed out or failed to connect; a progress topic not usable
/// yet). Everything else stops the pipeline: a bad event under
/// `errors.tolerance = none`, a refused dead-letter record, the cluster
/// refusing walrelay, fencing (fatal init errors are `Fenced` or
/// `Cluster`), a malformed progress record.
impl From<SinkError> for Retry<SinkError> {
    fn from(e: SinkError) -> Self {
        use progress::ProgressError;
        match e {
            e @ (SinkError::TransactionAborted { .. }
            | SinkError::TransactionInit { .. }
            | SinkError::Progress(
                ProgressError::Timeout { .. } | ProgressError::Consumer { .. },
            )
            | SinkError::ProgressTopic {
                transient: true, ..
            }) => Retry::Transient(e),
            e @ (SinkError::Unmet(_)
            | SinkError::Create(_)
            | SinkError::Route(_)
            | SinkError::Produce { .. }
            | SinkError::Delivery { .. }
            | SinkError::DeadLetterProduce { .. }
            | SinkError::DeadLetter { .. }
            | SinkError::BatchTooLarge { .. }
            | SinkError::Fenced { .. }
            | SinkError::SnapshotTooLong { .. }
            | SinkError::ProgressTopic {
                transient: false, ..
            }
            | SinkError::Progress(ProgressError::Malformed { .. })
            | SinkError::Cluster { .. }) => Retry::Definite(e),
        }
    }
}

/// The producer, shared by every replication session of the process.
pub(crate) struct KafkaSink {
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
    pub(crate) fn with_errors(
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
        let shared = Arc::new(Shared::new(metrics));
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
        let wanted = Wanted {
            transactional: config.exactly_once.then_some("kafka.exactly_once"),
            idempotent: Some("kafka.producer.\"enable.idempotence\""),
            per_key_order: None,
        };
        type Kafka = ThreadedProducer<DeliveryContext>;
        <Kafka as Broker>::GUARANTEES.check(<Kafka as Broker>::NAME, &wanted)?;
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
    pub(crate) fn exactly_once(&self) -> Option<&Arc<Eos>> {
        self.eos.as_ref()
    }

    /// Starts a new replication session: later delivery reports go to
    /// `tracker`; reports for earlier sessions are ignored.
    pub(crate) fn begin_session(&self, tracker: SharedTracker) -> u64 {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        *self
            .shared
            .tracker
            .lock()
            .expect("tracker slot lock poisoned") = Some((generation, tracker));
        generation
    }

    /// Takes a recorded permanent delivery failure.
    pub(crate) fn take_failure(&self) -> Option<SinkError> {
        self.shared.take_failure()
    }

    /// Records handed to librdkafka (dead-letter records included) and not
    /// yet reported.
    pub(crate) fn in_flight(&self) -> i32 {
        let main = Broker::in_flight(&*self.producer());
        i32::try_from(main).unwrap_or(i32::MAX)
            + self.dead_letter.as_ref().map_or(0, |d| d.in_flight())
    }

    /// The current producer.
    fn producer(&self) -> Arc<ThreadedProducer<DeliveryContext>> {
        Arc::clone(&self.producer.read().expect("producer lock poisoned"))
    }

    /// Whether a broker answers a metadata request within `timeout`
    /// (blocking; call from a blocking thread).
    pub(crate) fn probe(&self, timeout: Duration) -> bool {
        self.producer()
            .client()
            .fetch_metadata(None, timeout)
            .is_ok()
    }

    /// Waits up to `timeout` for every record to be reported (blocking).
    pub(crate) fn flush(&self, timeout: Duration) -> bool {
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
    pub(crate) fn produce_untracked(&self, record: &KafkaRecord) -> Result<(), KafkaError> {
        if let Some(eos) = &self.eos {
            // Exactly-once: inside the next Kafka transaction.
            eos.queue(record);
            return Ok(());
        }
        let record = WireRecord::of(record);
        match Broker::send(&*self.producer(), &record, RecordContext::untracked()) {
            Ok(()) => Ok(()),
            Err(Refusal::Full(_)) => {
                Err(KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull))
            }
            Err(Refusal::Refused(_, e)) => Err(e),
        }
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
    pub(crate) async fn run(
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
        let mut step = Step::new(&self.shared, self.dead_letter.is_some());
        let mut producer = self.producer();
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
                _ = self.shared.failed.notified() => Vec::new(),
                _ = tokio::time::sleep(FAILURE_CHECK) => Vec::new(),
            };
            if let Some(err) = self.take_failure() {
                return Err(self.stop(err).await);
            }
            for event in &batch {
                let tag = generation | (event.seq & SEQ_MASK);
                producer = self
                    .publish(&mut step, producer, router, event, tag)
                    .await?;
            }
            step.flush_counts();
        }
        match self.take_failure() {
            Some(err) => Err(self.stop(err).await),
            None => Ok(()),
        }
    }

    /// The at-least-once produce step of one event: routed (or
    /// dead-lettered), counted, and handed to `producer`, or to the
    /// producer that replaces it when the event's topic needs smaller
    /// batches; returns the producer to use from now on.
    async fn publish(
        &self,
        step: &mut Step<'_>,
        mut producer: Arc<ThreadedProducer<DeliveryContext>>,
        router: &mut Router,
        event: &OutboxEvent,
        tag: u64,
    ) -> Result<Arc<ThreadedProducer<DeliveryContext>>, SinkError> {
        let (record, event_id) = match step.route(event, router, tag) {
            Routing::Record(record, event_id) => (record, event_id),
            Routing::Dropped => {
                self.shared.settle_dropped(tag);
                return Ok(producer);
            }
            Routing::Letter(letter) => {
                let dl = self
                    .dead_letter
                    .as_deref()
                    .expect("a letter needs a dead-letter topic");
                send_letter(dl, &letter)?;
                return Ok(producer);
            }
            Routing::Failed(e) => {
                // The events before it are with librdkafka: let them land
                // before walrelay stops.
                self.drain().await;
                return Err(e.into());
            }
        };
        if step.count(&record.topic) {
            producer = self.fit_batches(&record.topic, producer).await?;
        }
        let ticket = step.ticket(tag, event, event_id);
        let wire = WireRecord::of(&record);
        match step.send(&*producer, &wire, ticket).await {
            Ok(()) => Ok(producer),
            Err(Stop::Failed(err)) => Err(self.stop(err).await),
            Err(Stop::Refused(ticket, source)) => {
                let class = <ThreadedProducer<DeliveryContext> as Broker>::classify(&source);
                match (&self.dead_letter, class) {
                    (Some(dl), FailureClass::Record { kind, too_large }) => {
                        let letter = Letter {
                            // Refused locally for its size: the producer's
                            // limit, which the dead-letter record has too.
                            too_large,
                            kind,
                            class: kafka::ERROR_CLASS,
                            message: format!(
                                "cannot produce the record to {}: {}",
                                record.topic,
                                DisplayChain(&source)
                            ),
                            stage: Stage::Produce,
                            topic: Some(record.topic.to_string()),
                            event_id: ticket.event_id.clone(),
                            ..Letter::for_event(event, tag)
                        };
                        send_letter(dl, &letter)?;
                        Ok(producer)
                    }
                    _ => {
                        self.drain().await;
                        Err(SinkError::Produce {
                            lsn: event.meta.lsn,
                            event_id: ticket.event_id.clone().unwrap_or_else(|| "null".to_owned()),
                            topic: record.topic.to_string(),
                            source: Box::new(source),
                        })
                    }
                }
            }
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

fn send_letter(dl: &DeadLetter, letter: &Letter) -> Result<(), SinkError> {
    dl.send(letter)
        .map_err(|source| SinkError::DeadLetterProduce {
            event_id: letter.event_id.clone().unwrap_or_else(|| "null".to_owned()),
            lsn: letter.lsn,
            topic: dl.topic().to_owned(),
            source: Box::new(source),
        })
}
