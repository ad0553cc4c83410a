//! Brokers with asynchronous clients (NATS JetStream, Redis Streams, ...)
//! behind the broker seam: a bounded queue the publish step sends into,
//! and one worker task per pipeline that publishes what the queue holds,
//! in order, and settles every acknowledgement.
//!
//! ```text
//!  publish::Step::send ─▶ Queue (Broker: try_send, Full = backpressure)
//!                           │ bounded by records and bytes
//!                           ▼
//!                         worker ─▶ Publisher::publish(batch) ─▶ the broker
//!                           │         one outcome per record, in order
//!                           ▼
//!              Acked  ─▶ Shared::settle ─▶ tracker
//!              Retry  ─▶ the same records again after a pause (an outage
//!                        is backpressure: the queue fills, the source waits)
//!              Failed ─▶ dead letter on the same broker, or stop
//! ```
//!
//! Owns the queue, the worker's retry loop, dead-lettering a record the
//! broker refused for itself (to the dead-letter destination on the same
//! broker), and the at-least-once loop of these brokers ([`QueuedSink::run`]).
//! What a record looks like on a broker's wire, and which of its errors
//! are transient, is the [`Publisher`]'s. Records leave in the order the
//! pipeline sent them and a retry resends from the first record not
//! acknowledged, so per-key order holds unless the broker itself takes a
//! later record and drops an earlier one (see each publisher).

use std::future::Future;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::mpsc;
use tracing::{error, info, warn};

use super::broker::{Broker, Delivery, FailureClass, Guarantees, Refusal, WireRecord};
use super::dlq::{Letter, LetterFormat};
use super::publish::{RecordContext, Routing, Shared, Step, Stop, SEQ_BITS, SEQ_MASK};
use super::SinkError;
use crate::metrics::{BrokerLabel, Metrics};
use crate::router::{KafkaRecord, RecordHeader, Router};
use crate::txn::OutboxEvent;

/// Most records the queue holds (besides the byte bound).
const QUEUE_RECORDS: usize = 8192;
/// Most bytes of keys, values and headers the queue holds: the Java
/// producer's `buffer.memory`, as for Kafka.
const QUEUE_BYTES: usize = 32 << 20;
/// Most records one `publish` call is handed.
const BATCH: usize = 512;
/// First pause before a retry; doubled up to [`RETRY_MAX`].
const RETRY_MIN: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(5);
/// How often an idle sink looks for a permanent delivery failure.
const FAILURE_CHECK: Duration = Duration::from_millis(100);
/// How long a stopping sink waits for records already queued.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// One record as the worker hands it to a [`Publisher`]: owned, because
/// it outlives the routed record it was copied from.
#[derive(Debug, Clone)]
pub(crate) struct Outgoing {
    /// Topic name as the router gave it; the publisher maps it onto its
    /// subject, stream or URL.
    pub(crate) destination: Arc<str>,
    pub(crate) key: Option<Bytes>,
    /// `None`: a tombstone.
    pub(crate) value: Option<Bytes>,
    pub(crate) headers: Vec<RecordHeader>,
    /// The event id, for brokers that drop a record whose id they saw
    /// (`Nats-Msg-Id`, `Idempotency-Key`); `None` for heartbeats.
    pub(crate) dedup_id: Option<String>,
}

impl Outgoing {
    fn of(record: &WireRecord<'_>, dedup_id: Option<String>) -> Outgoing {
        Outgoing {
            destination: Arc::from(record.destination),
            key: record.key.map(Bytes::copy_from_slice),
            value: record.value.map(Bytes::copy_from_slice),
            headers: record.headers.to_vec(),
            dedup_id,
        }
    }

    fn bytes(&self) -> usize {
        self.key.as_ref().map_or(0, Bytes::len)
            + self.value.as_ref().map_or(0, Bytes::len)
            + self
                .headers
                .iter()
                .map(|h| h.name.len() + h.value.as_ref().map_or(0, Bytes::len))
                .sum::<usize>()
    }
}

/// `headers` as Debezium Server's sinks hand them to a broker: through a
/// `java.util.HashMap` of name to value (`BaseChangeConsumer.convertHeaders`),
/// so a repeated name keeps its first place and its last value, and the
/// order is the map's ([`crate::connect::java::java_hash_map_order`]).
pub(crate) fn debezium_header_order(headers: &[RecordHeader]) -> Vec<(&str, Option<&Bytes>)> {
    let mut unique: Vec<(&str, Option<&Bytes>)> = Vec::with_capacity(headers.len());
    for h in headers {
        match unique.iter_mut().find(|(n, _)| *n == &*h.name) {
            Some(slot) => slot.1 = h.value.as_ref(),
            None => unique.push((&h.name, h.value.as_ref())),
        }
    }
    crate::connect::java::java_hash_map_order(unique)
}

/// What became of one published record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The broker has it (stored, or dropped as a duplicate of one it has).
    Acked,
    /// Not taken for a reason that passes (the broker is down, a timeout,
    /// a full memory): published again, with this and every later record
    /// of the batch, after a pause.
    Retry(String),
    /// Refused for good.
    Failed {
        /// About this record, or about the broker.
        class: FailureClass,
        /// The broker's error code, a metric label.
        code: String,
        /// The broker's error, for people.
        error: String,
    },
}

/// A broker's asynchronous client, driven by the worker alone.
pub(crate) trait Publisher: Send + Sized + 'static {
    /// The broker's name (`nats-jetstream`, `redis`, ...).
    const NAME: &'static str;
    /// What the broker promises.
    const GUARANTEES: Guarantees;
    /// The error class named in dead-letter records of its refusals.
    const ERROR_CLASS: &'static str;
    /// What it connects with.
    type Config: Clone + Send + Sync + 'static;

    /// Connects; an error is retried (the broker may not be up yet).
    fn connect(config: &Self::Config) -> impl Future<Output = Result<Self, String>> + Send;

    /// Whether heartbeat records are left out (Debezium Server's redis
    /// sink skips them unless told otherwise).
    fn skips_heartbeats(_config: &Self::Config) -> bool {
        false
    }

    /// Told, right after a connection that is not the worker's first,
    /// when the broker came back: the first connection made since the
    /// last one was lost without a healthy publish in between. The
    /// instant stays the same across the reconnections of one outage, so
    /// a publisher that is lenient for a while after a broker restart
    /// (RabbitMQ routes nothing until it has restored its bindings) is
    /// lenient for a bounded time.
    fn reconnected(&mut self, _back_since: Instant) {}

    /// Publishes `batch` in order and waits for the broker's answers: one
    /// outcome per record, in order. After a [`Outcome::Retry`] the
    /// remaining outcomes are not looked at (everything from it is sent
    /// again).
    fn publish(&mut self, batch: &[Outgoing]) -> impl Future<Output = Vec<Outcome>> + Send;
}

/// What travels with a queued record.
pub(crate) enum Ticket {
    /// An event's record (or a heartbeat's, untracked).
    Record(Box<RecordContext>),
    /// The dead-letter record of an event the router refused.
    Letter {
        /// The event's delivery tag.
        tag: u64,
        /// Kind of problem (metric label).
        kind: &'static str,
        /// The event id, for messages.
        event_id: String,
    },
}

struct Job {
    record: Outgoing,
    ticket: Ticket,
}

impl Job {
    /// A record that settles nothing (a heartbeat).
    fn is_heartbeat(&self) -> bool {
        matches!(&self.ticket, Ticket::Record(ctx) if !ctx.is_tracked())
    }
}

/// State the queue and its worker share.
#[derive(Default)]
struct QueueState {
    /// Queued or being published, not yet settled.
    in_flight: AtomicUsize,
    bytes: AtomicUsize,
    /// A failure stopped the sink: what is still queued is dropped
    /// unsent (it is not confirmed either way).
    purge: AtomicBool,
    /// The worker's last connect or publish reached the broker.
    connected: AtomicBool,
}

/// The sending side: a [`Broker`] the publish step sends into.
pub(crate) struct Queue<P> {
    tx: mpsc::Sender<Job>,
    state: Arc<QueueState>,
    publisher: PhantomData<fn() -> P>,
}

/// The worker is gone (the pipeline is shutting down).
#[derive(Debug, thiserror::Error)]
#[error("the {0} publisher has stopped")]
pub(crate) struct Closed(&'static str);

impl<P: Publisher> Broker for Queue<P> {
    type Ticket = Ticket;
    type Error = Closed;

    const NAME: &'static str = P::NAME;
    const GUARANTEES: Guarantees = P::GUARANTEES;

    fn send(&self, record: &WireRecord<'_>, ticket: Ticket) -> Result<(), Refusal<Ticket, Closed>> {
        if self.state.bytes.load(Ordering::Relaxed) >= QUEUE_BYTES {
            return Err(Refusal::Full(ticket));
        }
        let dedup_id = match &ticket {
            Ticket::Record(ctx) => ctx.event_id.clone(),
            Ticket::Letter { event_id, .. } => Some(format!("dead-letter:{event_id}")),
        };
        let record = Outgoing::of(record, dedup_id);
        let bytes = record.bytes();
        match self.tx.try_send(Job { record, ticket }) {
            Ok(()) => {
                self.state.in_flight.fetch_add(1, Ordering::Relaxed);
                self.state.bytes.fetch_add(bytes, Ordering::Relaxed);
                Ok(())
            }
            Err(mpsc::error::TrySendError::Full(job)) => Err(Refusal::Full(job.ticket)),
            Err(mpsc::error::TrySendError::Closed(job)) => {
                Err(Refusal::Refused(job.ticket, Closed(P::NAME)))
            }
        }
    }

    fn classify(_: &Closed) -> FailureClass {
        FailureClass::Broker
    }

    fn in_flight(&self) -> usize {
        self.state.in_flight.load(Ordering::Relaxed)
    }
}

/// The pipeline's sink for a [`Publisher`]'s broker, at least once.
pub(crate) struct QueuedSink<P: Publisher> {
    queue: Queue<P>,
    shared: Arc<Shared>,
    letters: Option<LetterFormat>,
    generation: AtomicU64,
    stop_grace: Duration,
    /// Heartbeat records are not sent ([`Publisher::skips_heartbeats`]).
    skip_heartbeats: bool,
}

impl<P: Publisher> QueuedSink<P> {
    /// Starts the worker (which connects in the background, retrying) on
    /// the current runtime. `letters`: where bad events go, on the same
    /// broker; `None` stops the pipeline on one.
    pub(crate) fn start(
        config: P::Config,
        letters: Option<LetterFormat>,
        status_interval: Duration,
        metrics: Arc<Metrics>,
    ) -> QueuedSink<P> {
        metrics
            .broker_info
            .get_or_create(&BrokerLabel { broker: P::NAME })
            .set(1);
        let skip_heartbeats = P::skips_heartbeats(&config);
        let shared = Arc::new(Shared::new(metrics));
        let state = Arc::new(QueueState::default());
        let (tx, rx) = mpsc::channel(QUEUE_RECORDS);
        let worker = Worker::<P> {
            config,
            publisher: None,
            shared: Arc::clone(&shared),
            state: Arc::clone(&state),
            letters: letters.clone(),
            retry: RETRY_MIN,
            ever_connected: false,
            back_since: None,
        };
        tokio::spawn(worker.run(rx));
        QueuedSink {
            queue: Queue {
                tx,
                state,
                publisher: PhantomData,
            },
            shared,
            letters,
            generation: AtomicU64::new(0),
            stop_grace: status_interval + FAILURE_CHECK,
            skip_heartbeats,
        }
    }

    /// Starts a new replication session: later acknowledgements go to
    /// `tracker`; those of earlier sessions are ignored.
    pub(crate) fn begin_session(&self, tracker: crate::checkpoint::SharedTracker) -> u64 {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        *self
            .shared
            .tracker
            .lock()
            .expect("tracker slot lock poisoned") = Some((generation, tracker));
        generation
    }

    /// Takes a recorded permanent failure.
    pub(crate) fn take_failure(&self) -> Option<SinkError> {
        self.shared.take_failure()
    }

    /// Records queued or being published, not yet acknowledged.
    pub(crate) fn in_flight(&self) -> i32 {
        i32::try_from(Broker::in_flight(&self.queue)).unwrap_or(i32::MAX)
    }

    /// Whether the worker's last attempt reached the broker.
    pub(crate) fn probe(&self) -> bool {
        self.queue.state.connected.load(Ordering::Relaxed)
    }

    /// Waits up to `timeout` for every queued record to be acknowledged
    /// (blocking: call from a blocking thread).
    pub(crate) fn flush(&self, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        while self.in_flight() > 0 {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    /// Queues a record that settles nothing (a heartbeat). Never waits: a
    /// full queue is an error the caller may skip.
    pub(crate) fn produce_untracked(&self, record: &KafkaRecord) -> Result<(), String> {
        if self.skip_heartbeats {
            return Ok(());
        }
        // Only Kafka takes an explicit partition.
        let record = WireRecord {
            partition: None,
            ..WireRecord::of(record)
        };
        match Broker::send(
            &self.queue,
            &record,
            Ticket::Record(RecordContext::untracked()),
        ) {
            Ok(()) => Ok(()),
            Err(Refusal::Full(_)) => Err(format!("the {} queue is full", P::NAME)),
            Err(Refusal::Refused(_, e)) => Err(e.to_string()),
        }
    }

    /// Routes and publishes batches until the channel closes or a failure
    /// stops the sink: a bad event under `errors.tolerance = none`, a
    /// record the broker refused for good that is not dead-lettered, or a
    /// dead-letter record the broker refused. Waits (backpressure) while
    /// the queue is full.
    pub(crate) async fn run(
        &self,
        router: &mut Router,
        mut rx: mpsc::Receiver<Vec<OutboxEvent>>,
    ) -> Result<(), SinkError> {
        let generation = self.generation.load(Ordering::Relaxed) << SEQ_BITS;
        let mut step = Step::new(&self.shared, self.letters.is_some());
        loop {
            let batch = tokio::select! {
                biased;
                batch = rx.recv() => match batch {
                    Some(batch) => batch,
                    None => break,
                },
                _ = self.shared.failed.notified() => Vec::new(),
                _ = tokio::time::sleep(FAILURE_CHECK) => Vec::new(),
            };
            if let Some(err) = self.take_failure() {
                return Err(self.stop(err).await);
            }
            for event in &batch {
                let tag = generation | (event.seq & SEQ_MASK);
                self.publish(&mut step, router, event, tag).await?;
            }
            step.flush_counts();
        }
        match self.take_failure() {
            Some(err) => Err(self.stop(err).await),
            None => Ok(()),
        }
    }

    /// One event: routed (or dead-lettered), counted and queued.
    async fn publish(
        &self,
        step: &mut Step<'_>,
        router: &mut Router,
        event: &OutboxEvent,
        tag: u64,
    ) -> Result<(), SinkError> {
        let (record, event_id) = match step.route(event, router, tag) {
            Routing::Record(record, event_id) => (record, event_id),
            Routing::Dropped => {
                self.shared.settle_dropped(tag);
                return Ok(());
            }
            Routing::Letter(letter) => return self.queue_letter(&letter).await,
            Routing::Failed(e) => {
                self.drain().await;
                return Err(e.into());
            }
        };
        step.count(&record.topic);
        let ticket = Ticket::Record(step.ticket(tag, event, event_id));
        let wire = WireRecord::of(&record);
        self.send(&wire, ticket).await
    }

    /// Queues the dead-letter record of an event the router refused.
    async fn queue_letter(&self, letter: &Letter) -> Result<(), SinkError> {
        let format = self
            .letters
            .as_ref()
            .expect("a letter needs a dead-letter destination");
        let (key, value, headers) = format.record_parts(letter);
        let wire = WireRecord {
            headers: &headers,
            ..WireRecord::plain(&format.topic, key.as_deref(), value.as_deref())
        };
        let ticket = Ticket::Letter {
            tag: letter.tag,
            kind: letter.kind,
            event_id: letter.event_id.clone().unwrap_or_else(|| "null".to_owned()),
        };
        self.send(&wire, ticket).await
    }

    async fn send(&self, wire: &WireRecord<'_>, ticket: Ticket) -> Result<(), SinkError> {
        match super::publish::send(&self.shared, &self.queue, wire, ticket).await {
            Ok(()) => Ok(()),
            Err(Stop::Failed(err)) => Err(self.stop(err).await),
            Err(Stop::Refused(_, closed)) => Err(SinkError::Delivery {
                broker: P::NAME,
                topic: wire.destination.to_owned(),
                error: closed.to_string(),
                event_id: "-".to_owned(),
                lsn: walrelay_proto::Lsn::ZERO,
            }),
        }
    }

    /// Stops after a failure: what is still queued is dropped unsent (it
    /// is not confirmed either way), what is being published is waited
    /// for (bounded), then one status interval so the source confirms
    /// what was acknowledged before the failure.
    async fn stop(&self, err: SinkError) -> SinkError {
        self.queue.state.purge.store(true, Ordering::Relaxed);
        self.drain().await;
        err
    }

    async fn drain(&self) {
        let deadline = tokio::time::Instant::now() + DRAIN_TIMEOUT;
        while self.in_flight() > 0 && tokio::time::Instant::now() < deadline {
            let _ =
                tokio::time::timeout(Duration::from_millis(50), self.shared.wake.notified()).await;
        }
        tokio::time::sleep(self.stop_grace).await;
    }
}

impl<P: Publisher> Drop for QueuedSink<P> {
    /// The worker ends once the queue is empty and closed; records it
    /// still retries are given up.
    fn drop(&mut self) {
        self.queue.state.purge.store(true, Ordering::Relaxed);
    }
}

/// The task that owns the broker's client.
struct Worker<P: Publisher> {
    config: P::Config,
    publisher: Option<P>,
    shared: Arc<Shared>,
    state: Arc<QueueState>,
    letters: Option<LetterFormat>,
    retry: Duration,
    /// A connection was made before (the next one is a reconnection).
    ever_connected: bool,
    /// When the broker came back after the connection was last lost;
    /// `None` once a publish went through on the new connection.
    back_since: Option<Instant>,
}

impl<P: Publisher> Worker<P> {
    async fn run(mut self, mut rx: mpsc::Receiver<Job>) {
        let mut batch = Vec::with_capacity(BATCH);
        // Connect at once, so the first event does not wait for it and
        // /readyz tells whether the broker answers.
        self.connected().await;
        while rx.recv_many(&mut batch, BATCH).await > 0 {
            self.deliver(&mut batch).await;
            batch.clear();
        }
    }

    /// The client, connecting (retrying with a pause) when there is none.
    /// `None` when the sink stopped meanwhile.
    async fn connected(&mut self) -> Option<&mut P> {
        while self.publisher.is_none() {
            if self.state.purge.load(Ordering::Relaxed) {
                return None;
            }
            match P::connect(&self.config).await {
                Ok(mut p) => {
                    info!(broker = P::NAME, "connected");
                    if self.ever_connected {
                        p.reconnected(*self.back_since.get_or_insert_with(Instant::now));
                    }
                    self.ever_connected = true;
                    self.state.connected.store(true, Ordering::Relaxed);
                    self.retry = RETRY_MIN;
                    self.publisher = Some(p);
                }
                Err(why) => self.pause(&why).await,
            }
        }
        self.publisher.as_mut()
    }

    async fn pause(&mut self, why: &str) {
        self.state.connected.store(false, Ordering::Relaxed);
        self.shared
            .metrics
            .broker_retries
            .get_or_create(&BrokerLabel { broker: P::NAME })
            .inc();
        warn!(broker = P::NAME, error = why, retry_in = ?self.retry, "the broker did not take the records; retrying");
        tokio::time::sleep(self.retry).await;
        self.retry = (self.retry * 2).min(RETRY_MAX);
    }

    /// Publishes `jobs` until each is settled: acknowledged, refused for
    /// good (dead-lettered or failed), or dropped after the sink stopped.
    async fn deliver(&mut self, jobs: &mut [Job]) {
        let mut start = 0;
        let records: Vec<Outgoing> = jobs.iter().map(|j| j.record.clone()).collect();
        while start < jobs.len() {
            if self.state.purge.load(Ordering::Relaxed) {
                for job in &jobs[start..] {
                    self.settle_purged(job);
                }
                return;
            }
            let Some(publisher) = self.connected().await else {
                continue;
            };
            let outcomes = publisher.publish(&records[start..]).await;
            let mut retry = None;
            for (job, outcome) in jobs[start..].iter().zip(outcomes) {
                match outcome {
                    // A heartbeat is never waited for: the next one
                    // replaces it (and a subject no stream captures
                    // must not hold the events behind it).
                    Outcome::Retry(why) if job.is_heartbeat() => {
                        warn!(broker = P::NAME, destination = %job.record.destination, error = why, "heartbeat record not taken; the next interval sends another");
                        self.done(job);
                        start += 1;
                    }
                    Outcome::Retry(why) => {
                        retry = Some(why);
                        break;
                    }
                    outcome => {
                        self.settle(job, outcome).await;
                        start += 1;
                    }
                }
            }
            match retry {
                Some(why) => {
                    // The connection may be broken: a new one next time.
                    self.publisher = None;
                    self.pause(&why).await;
                }
                None => {
                    self.state.connected.store(true, Ordering::Relaxed);
                    self.retry = RETRY_MIN;
                    self.back_since = None;
                }
            }
        }
    }

    fn done(&self, job: &Job) {
        self.state.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.state
            .bytes
            .fetch_sub(job.record.bytes(), Ordering::Relaxed);
    }

    fn settle_purged(&self, job: &Job) {
        let delivery = Delivery {
            broker: P::NAME,
            destination: job.record.destination.to_string(),
            class: FailureClass::Purged,
            error: "dropped unsent after an earlier failure".to_owned(),
            code: "purged".to_owned(),
            record_bytes: job.record.bytes(),
        };
        match &job.ticket {
            Ticket::Record(ctx) => self.shared.settle(ctx, None, Err(delivery)),
            Ticket::Letter { tag, kind, .. } => {
                self.shared.settle_letter(*tag, kind, Err(delivery));
            }
        }
        self.done(job);
    }

    async fn settle(&mut self, job: &Job, outcome: Outcome) {
        let label = BrokerLabel { broker: P::NAME };
        let delivery = match outcome {
            Outcome::Acked => {
                self.shared.metrics.broker_acked.get_or_create(&label).inc();
                None
            }
            Outcome::Retry(_) => unreachable!("a retry is never settled"),
            Outcome::Failed { class, code, error } => {
                self.shared
                    .metrics
                    .broker_refused
                    .get_or_create(&label)
                    .inc();
                Some(Delivery {
                    broker: P::NAME,
                    destination: job.record.destination.to_string(),
                    class,
                    error,
                    code,
                    record_bytes: job.record.bytes(),
                })
            }
        };
        match (&job.ticket, delivery) {
            (Ticket::Record(ctx), None) => self.shared.settle(ctx, None, Ok(())),
            (Ticket::Letter { tag, kind, .. }, None) => {
                self.shared.settle_letter(*tag, kind, Ok(()));
            }
            (Ticket::Record(ctx), Some(delivery)) => self.refused(ctx, delivery).await,
            (
                Ticket::Letter {
                    tag,
                    kind,
                    event_id,
                },
                Some(delivery),
            ) => {
                error!(broker = P::NAME, event_id, error = %delivery.error, "the broker refused a dead-letter record");
                self.shared.settle_letter(*tag, kind, Err(delivery));
            }
        }
        self.done(job);
    }

    /// A record the broker refused for good: its dead-letter record on the
    /// same broker when it is the record's own fault and a dead-letter
    /// destination is configured, else a failure that stops the sink.
    async fn refused(&mut self, ctx: &RecordContext, delivery: Delivery) {
        let letter = match (&self.letters, delivery.class) {
            (Some(_), FailureClass::Record { kind, .. }) if ctx.is_tracked() => ctx.dead_letter(
                delivery.destination.clone(),
                kind,
                P::ERROR_CLASS,
                format!(
                    "{} could not deliver the record to {}: {}",
                    P::NAME,
                    delivery.destination,
                    delivery.error
                ),
            ),
            _ => None,
        };
        let Some(letter) = letter else {
            self.shared.settle(ctx, None, Err(delivery));
            // The failure stops the sink: nothing queued after this record
            // may reach the broker before it (a key's later record would
            // land first when the pipeline resumes).
            if ctx.is_tracked() {
                self.state.purge.store(true, Ordering::Relaxed);
            }
            return;
        };
        let format = self.letters.as_ref().expect("checked above");
        let (key, value, headers) = format.record_parts(&letter);
        let record = Outgoing {
            destination: Arc::from(format.topic.as_str()),
            key,
            value,
            headers,
            dedup_id: ctx.event_id.as_ref().map(|id| format!("dead-letter:{id}")),
        };
        let letters = record.destination.to_string();
        let outcome = loop {
            if self.state.purge.load(Ordering::Relaxed) {
                break Outcome::Retry("the sink stopped".to_owned());
            }
            let Some(publisher) = self.connected().await else {
                continue;
            };
            match publisher.publish(std::slice::from_ref(&record)).await.pop() {
                Some(Outcome::Retry(why)) => {
                    self.publisher = None;
                    self.pause(&why).await;
                }
                Some(outcome) => break outcome,
                None => break Outcome::Retry("no answer".to_owned()),
            }
        };
        let result = match outcome {
            Outcome::Acked => Ok(()),
            Outcome::Retry(error) | Outcome::Failed { error, .. } => Err(Delivery {
                broker: P::NAME,
                destination: letters,
                class: FailureClass::Broker,
                error,
                code: "dead_letter".to_owned(),
                record_bytes: record.bytes(),
            }),
        };
        self.shared.settle_letter(ctx.tag(), letter.kind, result);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;

    use super::*;

    /// A broker that answers as scripted and remembers what it was handed
    /// (fault injection; the real brokers are in tests/integration/brokers.rs).
    struct Scripted {
        shared: Arc<Script>,
    }

    #[derive(Default)]
    struct Script {
        answers: Mutex<VecDeque<Vec<Outcome>>>,
        batches: Mutex<Vec<Vec<String>>>,
        /// Connections made, and what each reconnection was told.
        connects: AtomicUsize,
        reconnections: Mutex<Vec<Instant>>,
    }

    impl Publisher for Scripted {
        const NAME: &'static str = "scripted";
        const GUARANTEES: Guarantees = Guarantees {
            idempotent: false,
            transactional: false,
            dedup_by_id: false,
            per_key_order: true,
        };
        const ERROR_CLASS: &'static str = "scripted";
        type Config = Arc<Script>;

        async fn connect(config: &Arc<Script>) -> Result<Scripted, String> {
            config.connects.fetch_add(1, Ordering::Relaxed);
            Ok(Scripted {
                shared: Arc::clone(config),
            })
        }

        async fn publish(&mut self, batch: &[Outgoing]) -> Vec<Outcome> {
            let names: Vec<String> = batch.iter().map(|r| r.destination.to_string()).collect();
            self.shared.batches.lock().unwrap().push(names);
            let mut answer = self
                .shared
                .answers
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or_default();
            answer.resize(batch.len(), Outcome::Acked);
            answer
        }

        fn reconnected(&mut self, back_since: Instant) {
            self.shared.reconnections.lock().unwrap().push(back_since);
        }
    }

    fn letter(n: u64) -> Ticket {
        Ticket::Letter {
            tag: n,
            kind: "test",
            event_id: n.to_string(),
        }
    }

    async fn drained(sink: &QueuedSink<Scripted>) {
        for _ in 0..500 {
            if sink.in_flight() == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{} records still in flight", sink.in_flight());
    }

    #[tokio::test]
    async fn a_retry_publishes_again_from_the_first_record_not_acknowledged() {
        let script = Arc::new(Script::default());
        script.answers.lock().unwrap().push_back(vec![
            Outcome::Acked,
            Outcome::Retry("broker away".into()),
            Outcome::Acked,
        ]);
        let metrics = Arc::new(Metrics::default());
        let sink = QueuedSink::<Scripted>::start(
            Arc::clone(&script),
            None,
            Duration::ZERO,
            Arc::clone(&metrics),
        );
        for (n, dest) in ["a", "b", "c"].into_iter().enumerate() {
            let wire = WireRecord::plain(dest, None, Some(b"v"));
            assert!(sink.send(&wire, letter(n as u64 + 1)).await.is_ok());
        }
        drained(&sink).await;
        let batches = script.batches.lock().unwrap().clone();
        // The first publish may have taken fewer records; what matters: the
        // record after the acknowledged one is published again, with the
        // rest, in order, and nothing twice after its acknowledgement.
        let flat: Vec<String> = batches.concat();
        assert!(
            flat == ["a", "b", "c", "b", "c"] || flat == ["a", "b", "b", "c"],
            "{batches:?}"
        );
        let retries = metrics
            .broker_retries
            .get_or_create(&BrokerLabel { broker: "scripted" })
            .get();
        assert_eq!(retries, 1);
        let acked = metrics
            .broker_acked
            .get_or_create(&BrokerLabel { broker: "scripted" })
            .get();
        assert_eq!(acked, 3, "each record acknowledged once");
    }

    #[tokio::test]
    async fn a_heartbeat_is_not_waited_for_and_a_refusal_stops_the_sink() {
        let script = Arc::new(Script::default());
        script
            .answers
            .lock()
            .unwrap()
            .push_back(vec![Outcome::Retry("no stream".into())]);
        script
            .answers
            .lock()
            .unwrap()
            .push_back(vec![Outcome::Failed {
                class: FailureClass::Broker,
                code: "auth".into(),
                error: "not allowed".into(),
            }]);
        let sink = QueuedSink::<Scripted>::start(
            Arc::clone(&script),
            None,
            Duration::ZERO,
            Arc::new(Metrics::default()),
        );
        sink.produce_untracked(&KafkaRecord {
            topic: Arc::from("hb"),
            key: None,
            value: Some(bytes::Bytes::from_static(b"beat")),
            headers: Vec::new(),
            partition: None,
            timestamp_ms: None,
        })
        .unwrap();
        drained(&sink).await;
        let wire = WireRecord::plain("events", None, Some(b"v"));
        sink.send(&wire, letter(9)).await.unwrap();
        drained(&sink).await;
        // The heartbeat was published once and dropped on its retry.
        assert_eq!(script.batches.lock().unwrap().concat(), ["hb", "events"]);
        let failure = sink.take_failure().expect("the refusal stops the sink");
        assert!(
            failure.to_string().contains("scripted could not deliver"),
            "{failure}"
        );
    }

    #[tokio::test]
    async fn a_reconnection_is_told_when_the_broker_came_back_once_per_outage() {
        let script = Arc::new(Script::default());
        {
            let mut answers = script.answers.lock().unwrap();
            answers.push_back(vec![Outcome::Retry("away".into())]);
            answers.push_back(vec![Outcome::Retry("still away".into())]);
        }
        let sink = QueuedSink::<Scripted>::start(
            Arc::clone(&script),
            None,
            Duration::ZERO,
            Arc::new(Metrics::default()),
        );
        sink.send(&WireRecord::plain("a", None, Some(b"v")), letter(1))
            .await
            .unwrap();
        drained(&sink).await;
        // The first connection is not a reconnection; the two after it
        // belong to one outage and are told the same instant.
        assert_eq!(script.connects.load(Ordering::Relaxed), 3);
        let first = script.reconnections.lock().unwrap().clone();
        assert_eq!(first.len(), 2, "{first:?}");
        assert_eq!(first[0], first[1]);

        // A healthy publish ended that outage: the next one starts anew.
        script
            .answers
            .lock()
            .unwrap()
            .push_back(vec![Outcome::Retry("away again".into())]);
        sink.send(&WireRecord::plain("b", None, Some(b"v")), letter(2))
            .await
            .unwrap();
        drained(&sink).await;
        let all = script.reconnections.lock().unwrap().clone();
        assert_eq!(all.len(), 3, "{all:?}");
        assert!(all[2] > all[0], "{all:?}");
        assert_eq!(
            script.batches.lock().unwrap().concat(),
            ["a", "a", "a", "b", "b"]
        );
    }
}
