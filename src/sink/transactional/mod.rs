//! Exactly-once mode: the sink's transactional path.
//!
//! ```text
//!  batches ─▶ route ─▶ produce ─┐  (one Kafka transaction open at a time)
//!                               ├─▶ + progress record ─▶ commit_transaction
//!  heartbeats (queued) ─────────┘          │ committed
//!                                          ▼
//!            tracker.ack(every record of it) · durable = progress.lsn
//!                                          ▼
//!            the source confirms the slot only up to `durable`
//! ```
//!
//! Owns the Kafka transaction boundaries and the progress records:
//!
//! - a Kafka transaction closes at a source-transaction boundary once it
//!   holds `max_events` events or `max_bytes` bytes or has been open
//!   `interval_ms`, so a `read_committed` consumer sees each PostgreSQL
//!   transaction at once; a source transaction that alone exceeds the
//!   limits (or keeps the Kafka transaction open half its timeout) is
//!   split, and the progress record then names the position inside it
//!   (its commit LSN and the count of its events already committed);
//! - the progress record ([`super::progress`]) is written inside the same
//!   Kafka transaction, so Kafka's records and walrelay's position commit
//!   or abort together;
//! - the tracker hears of a record only once its Kafka transaction
//!   committed, so its confirmed position is a committed one; the slot is
//!   confirmed only up to the last committed progress record's position
//!   ([`EosFrontier`]), which a progress-only transaction moves forward
//!   when the outbox is idle;
//! - on restart, events the last committed progress covers are skipped;
//! - a failed transaction is aborted and the session ends (transient), so
//!   the next one resumes from the last committed progress; a fenced
//!   producer (another instance took the transactional id) stops for good.
//!
//! Everything the sink produces in this mode (events, dead letters,
//! heartbeats, the snapshot's rows) goes through the transaction.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{Producer, ThreadedProducer};
use tokio::sync::{mpsc, Notify};
use tracing::{debug, error, info, warn};
use walrelay_proto::Lsn;

use super::broker::WireRecord;
use super::dlq::{DeadLetter, Letter};
use super::kafka::DeliveryContext;
use super::progress::{self, Phase, Progress};
use super::publish::{self, RecordContext, Refused, Routing, Step, Stop, UNTRACKED};
use super::{transactional_config, KafkaSink, SinkError};
use crate::checkpoint::{SharedTracker, TxnSeq};
use crate::metrics::{observe_micros, ResultLabel};
use crate::router::{KafkaRecord, Router};
use crate::sink::config::TransactionsConfig;

use crate::txn::OutboxEvent;

mod store;

pub(crate) use self::store::KafkaProgress;

/// How long the sink waits between looks at an open transaction's age
/// and at queued heartbeats.
const TICK: Duration = Duration::from_millis(20);
/// Bound on reading the progress topic at start.
const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// A record produced outside the event stream (a heartbeat), queued for
/// the next transaction.
struct Queued(KafkaRecord);

/// The exactly-once state of a sink: identity, the last committed progress
/// and the durable position it gives the slot.
pub(crate) struct Eos {
    config: TransactionsConfig,
    pipeline: String,
    transactional_id: String,
    slot: String,
    /// `system_id/timeline` of the current session's server.
    origin: Mutex<(String, u32)>,
    /// The last committed progress record, if any.
    committed: Mutex<Option<Progress>>,
    /// The position the slot may be confirmed to.
    durable: Arc<AtomicU64>,
    queued: Mutex<Vec<Queued>>,
    wake: Notify,
    /// The next transaction ends an initial snapshot: never split it.
    snapshot: AtomicBool,
    /// `init_transactions` succeeded.
    ready: AtomicBool,
    /// The producer is unusable (its transaction outlived the broker's
    /// timeout, and librdkafka reports that as fatal): make a new one and
    /// initialise it before the next session.
    reinit: AtomicBool,
    /// A Kafka transaction is open on the producer (begun, not yet
    /// committed or aborted): a sink task cancelled mid-transaction leaves
    /// one, which the next run aborts first.
    in_txn: AtomicBool,
}

/// Heartbeats kept while no transaction takes them (between sessions).
const MAX_QUEUED: usize = 64;

impl std::fmt::Debug for Eos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Eos")
            .field("pipeline", &self.pipeline)
            .field("transactional_id", &self.transactional_id)
            .finish_non_exhaustive()
    }
}

impl Eos {
    /// The state for `config`, the pipeline reading `slot`.
    pub(crate) fn new(config: &TransactionsConfig, slot: &str) -> Eos {
        Eos {
            pipeline: config.pipeline_name(slot).to_owned(),
            transactional_id: config.transactional_id_for(slot),
            slot: slot.to_owned(),
            config: config.clone(),
            origin: Mutex::new((String::new(), 0)),
            committed: Mutex::new(None),
            durable: Arc::new(AtomicU64::new(0)),
            queued: Mutex::new(Vec::new()),
            wake: Notify::new(),
            snapshot: AtomicBool::new(false),
            ready: AtomicBool::new(false),
            reinit: AtomicBool::new(false),
            in_txn: AtomicBool::new(false),
        }
    }

    /// The producer's `transactional.id`.
    pub(crate) fn transactional_id(&self) -> &str {
        &self.transactional_id
    }

    /// The replication slot the pipeline reads.
    pub(crate) fn slot(&self) -> &str {
        &self.slot
    }

    /// Whether the producer must be (re)initialised before the next
    /// session: never initialised yet, or made unusable.
    pub(crate) fn needs_init(&self) -> bool {
        !self.ready.load(Ordering::Acquire) || self.reinit.load(Ordering::Acquire)
    }

    /// A fatal transaction error of a transaction open longer than the
    /// timeout: the broker aborted it and bumped the producer's epoch,
    /// which librdkafka reports as fencing. Not another instance: the
    /// producer is made again before the next session (which reads the
    /// committed progress anew). Returns the error to end the session with.
    fn timed_out(&self, age: Option<Duration>, err: SinkError) -> SinkError {
        let outlived = age.is_some_and(|a| a >= Duration::from_millis(self.config.timeout_ms));
        if !outlived {
            return err;
        }
        if self.snapshot.load(Ordering::Acquire) {
            // The snapshot is one transaction: doing it again would time
            // out again. Stop, naming the key.
            self.reinit.store(true, Ordering::Release);
            return SinkError::SnapshotTooLong {
                timeout_ms: self.config.timeout_ms,
            };
        }
        self.reinit.store(true, Ordering::Release);
        self.in_txn.store(false, Ordering::Release);
        warn!(
            error = %crate::chain::DisplayChain(&err),
            timeout_ms = self.config.timeout_ms,
            "the kafka transaction outlived kafka.transactions.timeout_ms (the broker aborted it); \
             making a new producer and resuming from the last committed progress"
        );
        SinkError::TransactionAborted {
            reason: format!(
                "the transaction was open longer than kafka.transactions.timeout_ms ({} ms) and the broker aborted it: {}",
                self.config.timeout_ms,
                crate::chain::DisplayChain(&err)
            ),
        }
    }

    /// The last committed progress record.
    pub(crate) fn committed(&self) -> Option<Progress> {
        self.committed.lock().expect("progress lock").clone()
    }

    fn set_committed(&self, p: Progress) {
        self.durable.fetch_max(p.lsn.0, Ordering::AcqRel);
        *self.committed.lock().expect("progress lock") = Some(p);
    }

    /// Queues a record for the next transaction (heartbeats).
    pub(super) fn queue(&self, record: &KafkaRecord) {
        let mut queued = self.queued.lock().expect("queue lock");
        if queued.len() >= MAX_QUEUED {
            queued.remove(0);
        }
        queued.push(Queued(record.clone()));
        drop(queued);
        self.wake.notify_one();
    }

    fn progress(&self, lsn: Lsn, commit_lsn: Lsn, events: u64, phase: Phase) -> Progress {
        let (system_id, timeline) = self.origin.lock().expect("origin lock").clone();
        // Never behind a position already committed (an idle progress
        // record may have moved past the session's start): progress only
        // moves forward.
        let lsn = if phase == Phase::Stream {
            lsn.max(Lsn(self.durable.load(Ordering::Acquire)))
        } else {
            lsn
        };
        Progress {
            pipeline: self.pipeline.clone(),
            system_id,
            timeline,
            slot: self.slot.clone(),
            lsn,
            commit_lsn,
            events,
            phase,
            snapshot_rows: None,
            ts_ms: crate::clock::unix_now_micros() / 1000,
        }
    }
}

/// The source transaction the sink is in.
#[derive(Debug, Clone, Copy)]
struct Current {
    seq: TxnSeq,
    commit_lsn: Lsn,
    /// Events of it seen so far (skipped ones included).
    index: u64,
    /// Of them, produced in the open Kafka transaction.
    in_txn: u64,
}

/// Whether the sink has seen source transaction `c` whole (its commit is
/// registered and every event it registered has come): `Some` with its
/// commit end LSN, or `Some(None)` once it left the tracker complete;
/// `None` while more of it may come.
fn seen_whole(tracker: &SharedTracker, c: &Current) -> Option<Option<Lsn>> {
    match tracker.registered(c.seq) {
        Some((Some(end), sent)) if sent <= c.index => Some(Some(end)),
        None => Some(None),
        _ => None,
    }
}

/// The open Kafka transaction.
#[derive(Debug, Default)]
struct Open {
    since: Option<Instant>,
    records: u64,
    bytes: u64,
    /// Records per source transaction, acknowledged to the tracker on commit.
    acks: Vec<(TxnSeq, u32)>,
}

impl Open {
    fn is_open(&self) -> bool {
        self.since.is_some()
    }

    fn ack(&mut self, seq: TxnSeq) {
        match self.acks.last_mut() {
            Some((s, n)) if *s == seq && *n < u32::MAX => *n += 1,
            _ => self.acks.push((seq, 1)),
        }
    }
}

/// One transactional run's state: the open Kafka transaction, the source
/// transaction being read, and how far whole source transactions reach.
struct Run {
    tracker: SharedTracker,
    cfg: TransactionsConfig,
    /// `interval_ms`: a Kafka transaction is due at the next boundary.
    interval: Duration,
    /// Half the transaction timeout: a source transaction open this long
    /// is committed inside.
    split_after: Duration,
    /// How often an idle outbox commits a progress-only transaction.
    idle_progress: Duration,
    /// The initial snapshot: one Kafka transaction, never split.
    snapshot: bool,
    /// The last committed progress, whose events are skipped.
    resume: Option<Progress>,
    open: Open,
    current: Option<Current>,
    /// End LSN of the last source transaction seen whole.
    last_whole: Lsn,
    last_progress: Instant,
}

impl Run {
    fn new(eos: &Eos, tracker: SharedTracker) -> Run {
        let cfg = eos.config.clone();
        let interval = Duration::from_millis(cfg.interval_ms);
        let resume = eos.committed().filter(|p| p.phase == Phase::Stream);
        let start = tracker.confirmed();
        Run {
            split_after: Duration::from_millis(cfg.timeout_ms) / 2,
            idle_progress: interval.max(Duration::from_secs(1)),
            snapshot: eos.snapshot.load(Ordering::Acquire),
            last_whole: resume.as_ref().map_or(start, |p| p.lsn.max(start)),
            resume,
            interval,
            cfg,
            tracker,
            open: Open::default(),
            current: None,
            last_progress: Instant::now(),
        }
    }

    /// The open transaction holds enough events or bytes, or is old enough.
    fn due(&self) -> bool {
        self.open.records >= self.cfg.max_events
            || self.open.bytes >= self.cfg.max_bytes
            || self.open_longer_than(self.interval)
    }

    fn open_longer_than(&self, age: Duration) -> bool {
        self.open.since.is_some_and(|s| s.elapsed() >= age)
    }
}

/// A transaction error as a sink error: fenced and fatal errors stop the
/// pipeline, everything else is transient once the transaction is aborted.
fn classify(e: &KafkaError, transactional_id: &str) -> (bool, SinkError) {
    let code = e.rdkafka_error_code();
    let fenced = matches!(
        code,
        Some(
            RDKafkaErrorCode::Fenced
                | RDKafkaErrorCode::ProducerFenced
                | RDKafkaErrorCode::InvalidProducerEpoch
        )
    );
    if fenced {
        return (
            true,
            SinkError::Fenced {
                transactional_id: transactional_id.to_owned(),
            },
        );
    }
    let fatal = match e {
        KafkaError::Transaction(t) => t.is_fatal(),
        _ => false,
    } || matches!(
        code,
        Some(
            RDKafkaErrorCode::TransactionalIdAuthorizationFailed
                | RDKafkaErrorCode::ClusterAuthorizationFailed
                | RDKafkaErrorCode::Fatal
        )
    );
    if fatal {
        return (
            true,
            SinkError::Cluster {
                error: e.to_string(),
            },
        );
    }
    (
        false,
        SinkError::TransactionAborted {
            reason: e.to_string(),
        },
    )
}

impl KafkaSink {
    /// Exactly-once start: `init_transactions` (fencing any earlier
    /// instance with the transactional id and aborting its open
    /// transaction), the progress topic (created if missing), then the
    /// last committed progress. Blocking calls run on blocking threads.
    pub(crate) async fn start_exactly_once(&self) -> Result<(), SinkError> {
        let Some(eos) = self.eos.clone() else {
            return Ok(());
        };
        self.shared.metrics.exactly_once.set(1);
        if eos.reinit.swap(false, Ordering::AcqRel) {
            // The old producer is unusable: a new one with the same id.
            let context = DeliveryContext {
                shared: Arc::clone(&self.shared),
                dead_letter: self.dead_letter.clone(),
            };
            let mut cc = transactional_config(&self.client_config, &eos, &eos.config);
            cc.set(
                "batch.size",
                self.batch_size.load(Ordering::Relaxed).to_string(),
            );
            let fresh = Arc::new(cc.create_with_context(context).map_err(SinkError::Create)?);
            let old = std::mem::replace(
                &mut *self.producer.write().expect("producer lock poisoned"),
                fresh,
            );
            // Dropping a producer joins its threads: not on a runtime thread.
            tokio::task::spawn_blocking(move || drop(old));
            eos.ready.store(false, Ordering::Release);
            eos.in_txn.store(false, Ordering::Release);
            let _ = self.take_failure();
            info!(
                transactional_id = eos.transactional_id,
                "exactly-once: a new transactional producer"
            );
        }
        let producer = self.producer();
        let timeout = Duration::from_millis(eos.config.timeout_ms).max(Duration::from_secs(30));
        let id = eos.transactional_id.clone();
        info!(
            transactional_id = id,
            pipeline = eos.pipeline,
            "exactly-once: initialising the transactional producer"
        );
        // A retried start (the progress topic not readable yet) keeps the
        // producer initialised by the first try: librdkafka refuses a
        // second init_transactions ("Operation not valid in state Ready").
        let init = if eos.ready.load(Ordering::Acquire) {
            Ok(())
        } else {
            tokio::task::spawn_blocking(move || producer.init_transactions(timeout))
                .await
                .expect("init_transactions does not panic")
        };
        if let Err(e) = init {
            let (_, err) = classify(&e, &id);
            return Err(match err {
                SinkError::TransactionAborted { reason } => SinkError::TransactionInit {
                    transactional_id: id,
                    reason,
                },
                other => other,
            });
        }
        eos.ready.store(true, Ordering::Release);
        super::progress_topic::ensure(&self.client_config, &eos.config)
            .await
            .map_err(|e| SinkError::ProgressTopic {
                topic: eos.config.progress_topic.clone(),
                reason: crate::chain::DisplayChain(&e).to_string(),
                transient: matches!(
                    e,
                    super::progress_topic::ProgressTopicError::Timeout { .. }
                        | super::progress_topic::ProgressTopicError::Request { .. }
                        // Just created, not yet in the metadata a broker answers with.
                        | super::progress_topic::ProgressTopicError::Missing { .. }
                ),
            })?;
        let cc = self.client_config.clone();
        let topic = eos.config.progress_topic.clone();
        let pipeline = eos.pipeline.clone();
        let last = tokio::task::spawn_blocking(move || {
            progress::read_last(&cc, &topic, &pipeline, READ_TIMEOUT)
        })
        .await
        .expect("reading progress does not panic")
        .map_err(SinkError::Progress)?;
        match &last {
            Some(p) => {
                info!(
                    pipeline = eos.pipeline,
                    lsn = %p.lsn,
                    commit_lsn = %p.commit_lsn,
                    events = p.events,
                    phase = ?p.phase,
                    "exactly-once: resuming after the last committed progress"
                );
                self.shared
                    .metrics
                    .progress_committed_lsn
                    .set(p.lsn.0 as i64);
                self.shared
                    .metrics
                    .progress_committed_events
                    .set(p.events as i64);
                eos.set_committed(p.clone());
            }
            None => info!(
                pipeline = eos.pipeline,
                topic = eos.config.progress_topic,
                "exactly-once: no progress committed yet; starting at the slot"
            ),
        }
        Ok(())
    }

    /// Commits a transaction holding only a progress record that says an
    /// initial snapshot begins: until the snapshot's own transaction
    /// commits, a restart drops the slot and snapshots again.
    pub(crate) async fn mark_snapshot_started(&self) -> Result<(), SinkError> {
        let Some(eos) = self.eos.clone() else {
            return Ok(());
        };
        let mut open = Open::default();
        self.begin(&eos, &mut open)?;
        let p = eos.progress(Lsn::ZERO, Lsn::ZERO, 0, Phase::Snapshot);
        self.commit(&eos, &mut open, None, p).await?;
        eos.snapshot.store(true, Ordering::Release);
        Ok(())
    }

    fn begin(&self, eos: &Eos, open: &mut Open) -> Result<(), SinkError> {
        if open.is_open() {
            return Ok(());
        }
        self.producer()
            .begin_transaction()
            .map_err(|e| classify(&e, &eos.transactional_id).1)?;
        eos.in_txn.store(true, Ordering::Release);
        open.since = Some(Instant::now());
        Ok(())
    }

    /// Produces the progress record and commits. On success the tracker
    /// hears of every record of the transaction and the frontier moves; on
    /// failure the transaction is aborted and the error says whether the
    /// pipeline may go on.
    async fn commit(
        &self,
        eos: &Eos,
        open: &mut Open,
        tracker: Option<&SharedTracker>,
        progress: Progress,
    ) -> Result<(), SinkError> {
        let key = progress.key();
        let value = progress.value();
        let producer = self.producer();
        let record = WireRecord::plain(
            &eos.config.progress_topic,
            Some(key.as_slice()),
            Some(value.as_slice()),
        );
        self.send_in_txn(eos, open, &producer, &record, RecordContext::untracked())
            .await?;
        let started = Instant::now();
        let timeout = Duration::from_millis(eos.config.timeout_ms);
        let p = Arc::clone(&producer);
        let result = tokio::task::spawn_blocking(move || {
            // A retriable error (a timeout while the coordinator moves)
            // leaves the transaction committable: try again, a few times.
            // Within one transaction timeout in all: past it the broker
            // has aborted the transaction anyway.
            let deadline = Instant::now() + timeout;
            let mut attempt = 0;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match p.commit_transaction(left.max(Duration::from_millis(100))) {
                    Err(KafkaError::Transaction(e))
                        if e.is_retriable()
                            && !e.txn_requires_abort()
                            && attempt < 3
                            && Instant::now() < deadline =>
                    {
                        attempt += 1;
                        warn!(error = %e, attempt, "committing the kafka transaction: retrying");
                    }
                    other => return other,
                }
            }
        })
        .await
        .expect("commit_transaction does not panic");
        // A delivery that failed inside the transaction fails the commit
        // too; say which record it was.
        let failure = self.take_failure();
        match result {
            Ok(()) if failure.is_none() => {
                let m = &self.shared.metrics;
                m.kafka_transaction_commit
                    .observe(started.elapsed().as_secs_f64());
                m.kafka_transaction_records.observe(open.records as f64);
                m.kafka_transactions
                    .get_or_create(&ResultLabel {
                        result: "committed",
                    })
                    .inc();
                m.progress_committed_lsn.set(progress.lsn.0 as i64);
                m.progress_committed_events.set(progress.events as i64);
                debug!(lsn = %progress.lsn, events = progress.events, records = open.records, "kafka transaction committed");
                eos.in_txn.store(false, Ordering::Release);
                eos.set_committed(progress);
                if let Some(t) = tracker {
                    let now_us = crate::clock::unix_now_micros();
                    for &(seq, n) in &open.acks {
                        if let Some(commit_us) = t.ack(seq, n) {
                            observe_micros(&m.commit_to_ack, now_us - commit_us);
                        }
                    }
                }
                *open = Open::default();
                Ok(())
            }
            // A delivery failed although the commit went through: cannot
            // be (librdkafka fails the commit), but never confirm past it.
            Ok(()) => Err(failure.expect("checked above")),
            Err(e) => match failure {
                // The record's own error decides (and explains) the abort.
                Some(f)
                    if !matches!(
                        classify(&e, &eos.transactional_id).1,
                        SinkError::Fenced { .. }
                    ) =>
                {
                    Err(self.abort_with(eos, open, f).await)
                }
                _ => Err(self.abort(eos, open, e).await),
            },
        }
    }

    /// Aborts the open transaction after `e`; returns the error to stop
    /// the session with.
    async fn abort(&self, eos: &Eos, open: &mut Open, e: KafkaError) -> SinkError {
        let (fatal, err) = classify(&e, &eos.transactional_id);
        let age = open.since.map(|s| s.elapsed());
        *open = Open::default();
        let _ = self.take_failure();
        if fatal {
            let err = eos.timed_out(age, err);
            if matches!(err, SinkError::TransactionAborted { .. }) {
                return err;
            }
            if matches!(err, SinkError::Fenced { .. }) {
                self.shared.metrics.producer_fenced.set(1);
            }
            error!(error = %e, "kafka transaction failed fatally; nothing more is committed");
            return err;
        }
        let aborted = self.abort_open(eos).await;
        match aborted {
            Ok(()) => {
                eos.in_txn.store(false, Ordering::Release);
                warn!(error = %e, "kafka transaction aborted; resuming from the last committed progress");
                err
            }
            Err(a) => {
                let (_, abort_err) = classify(&a, &eos.transactional_id);
                let abort_err = eos.timed_out(age, abort_err);
                if matches!(abort_err, SinkError::Fenced { .. }) {
                    self.shared.metrics.producer_fenced.set(1);
                }
                if matches!(abort_err, SinkError::TransactionAborted { .. }) {
                    // The producer's state is unknown now: make a new one.
                    eos.reinit.store(true, Ordering::Release);
                }
                error!(error = %a, "aborting the kafka transaction failed");
                abort_err
            }
        }
    }

    /// The transactional `run`: see the module documentation.
    pub(super) async fn run_transactional(
        &self,
        eos: &Arc<Eos>,
        router: &mut Router,
        mut rx: mpsc::Receiver<Vec<OutboxEvent>>,
    ) -> Result<(), SinkError> {
        let tracker = self
            .shared
            .tracker
            .lock()
            .expect("tracker slot lock poisoned")
            .as_ref()
            .map(|(_, t)| t.clone());
        let Some(tracker) = tracker else {
            return Ok(());
        };
        if eos.in_txn.load(Ordering::Acquire) {
            // A run cancelled mid-transaction: nothing of it was committed.
            if let Err(e) = self.abort_open(eos).await {
                return Err(classify(&e, &eos.transactional_id).1);
            }
            eos.in_txn.store(false, Ordering::Release);
        }
        let mut run = Run::new(eos, tracker);
        let mut producer = self.producer();
        let mut step = Step::new(&self.shared, self.dead_letter.is_some());
        let mut ticker = tokio::time::interval(TICK);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let batch = tokio::select! {
                biased;
                // 1. new events; the channel closing ends the run
                b = rx.recv() => match b {
                    Some(b) => Some(b),
                    None => break,
                },
                // 2. a queued heartbeat, 3. the open transaction's age
                _ = eos.wake.notified() => None,
                _ = ticker.tick() => None,
            };
            for event in batch.iter().flatten() {
                self.take_event(eos, &mut run, &mut step, &producer, router, event)
                    .await?;
            }
            step.flush_counts();
            if let Some(err) = self.take_failure() {
                return Err(self.abort_with(eos, &mut run.open, err).await);
            }
            self.send_queued(eos, &mut run.open, &producer).await?;
            if !run.snapshot {
                self.commit_if_due(eos, &mut run).await?;
            }
            producer = self.producer();
        }
        self.finish(eos, &mut run).await
    }

    /// One event of the stream: closes the Kafka transaction at a source
    /// transaction's boundary when it is due, skips what the last committed
    /// progress covers, splits a source transaction too large for one
    /// Kafka transaction, then produces the event inside the open one.
    async fn take_event(
        &self,
        eos: &Eos,
        run: &mut Run,
        step: &mut Step<'_>,
        producer: &Arc<ThreadedProducer<DeliveryContext>>,
        router: &mut Router,
        event: &OutboxEvent,
    ) -> Result<(), SinkError> {
        // A new source transaction: the one before is whole (its commit
        // was registered before this event was handed over).
        if run.current.is_none_or(|c| c.seq != event.seq) {
            if let Some(c) = run.current {
                if let Some((Some(end), _)) = run.tracker.registered(c.seq) {
                    run.last_whole = run.last_whole.max(end);
                }
            }
            if run.open.is_open() && !run.snapshot && run.due() {
                let p = eos.progress(run.last_whole, Lsn::ZERO, 0, Phase::Stream);
                self.commit(eos, &mut run.open, Some(&run.tracker), p)
                    .await?;
                run.last_progress = Instant::now();
            }
            run.current = Some(Current {
                seq: event.seq,
                commit_lsn: event.meta.commit_lsn,
                index: 0,
                in_txn: 0,
            });
        }
        let cur = run.current.as_mut().expect("set above");
        let index = cur.index;
        cur.index += 1;
        let (commit_lsn, in_txn) = (cur.commit_lsn, cur.in_txn);
        if run
            .resume
            .as_ref()
            .is_some_and(|p| p.covers(event.meta.commit_lsn, index))
        {
            // Already in Kafka: settle it with the next commit.
            run.open.ack(event.seq);
            return Ok(());
        }
        // A source transaction too large for one Kafka transaction: commit
        // inside it.
        if run.open.is_open()
            && !run.snapshot
            && in_txn > 0
            && (in_txn >= run.cfg.max_events
                || run.open.bytes >= run.cfg.max_bytes.saturating_mul(2)
                || run.open_longer_than(run.split_after))
        {
            let p = eos.progress(run.last_whole, commit_lsn, index, Phase::Stream);
            self.commit(eos, &mut run.open, Some(&run.tracker), p)
                .await?;
            run.last_progress = Instant::now();
            run.current.as_mut().expect("set above").in_txn = 0;
        }
        self.begin(eos, &mut run.open)?;
        self.publish_in_txn(step, eos, &mut run.open, producer, router, event)
            .await?;
        run.open.ack(event.seq);
        run.current.as_mut().expect("set above").in_txn += 1;
        Ok(())
    }

    /// Heartbeats queued since the last batch join the open transaction
    /// (or open one).
    async fn send_queued(
        &self,
        eos: &Eos,
        open: &mut Open,
        producer: &Arc<ThreadedProducer<DeliveryContext>>,
    ) -> Result<(), SinkError> {
        let queued = std::mem::take(&mut *eos.queued.lock().expect("queue lock"));
        for q in &queued {
            self.begin(eos, open)?;
            let record = WireRecord::of(&q.0);
            self.send_in_txn(eos, open, producer, &record, RecordContext::untracked())
                .await?;
            open.records += 1;
        }
        Ok(())
    }

    /// After a batch (or a tick): commits the open transaction when it is
    /// due and the last source transaction came whole, or inside that
    /// transaction when it has kept the Kafka transaction open too long;
    /// when idle, commits a progress-only transaction so the slot can be
    /// confirmed past transactions without events and keepalives.
    async fn commit_if_due(&self, eos: &Eos, run: &mut Run) -> Result<(), SinkError> {
        let seen = run.current.map(|c| seen_whole(&run.tracker, &c));
        let whole = seen.is_none_or(|s| s.is_some());
        if let Some(Some(Some(end))) = seen {
            run.last_whole = run.last_whole.max(end);
        }
        let progress = if run.open.is_open() {
            match run.current {
                _ if run.due() && whole => {
                    Some(eos.progress(run.last_whole, Lsn::ZERO, 0, Phase::Stream))
                }
                // A source transaction that keeps the Kafka transaction
                // open too long: commit inside it.
                Some(c) if !whole && run.open_longer_than(run.split_after) => {
                    Some(eos.progress(run.last_whole, c.commit_lsn, c.index, Phase::Stream))
                }
                _ => None,
            }
        } else if whole && run.last_progress.elapsed() >= run.idle_progress {
            // Idle: transactions without events and keepalives moved the
            // tracker past the last progress; record that.
            let confirmed = run.tracker.confirmed();
            run.last_progress = Instant::now();
            (confirmed > Lsn(eos.durable.load(Ordering::Acquire)) && run.open.acks.is_empty())
                .then(|| eos.progress(confirmed.max(run.last_whole), Lsn::ZERO, 0, Phase::Stream))
        } else if !run.open.acks.is_empty() && whole {
            // Only skipped events so far: settle them.
            Some(eos.progress(run.last_whole, Lsn::ZERO, 0, Phase::Stream))
        } else {
            None
        };
        let Some(p) = progress else {
            return Ok(());
        };
        let inside = p.commit_lsn != Lsn::ZERO;
        self.begin(eos, &mut run.open)?;
        self.commit(eos, &mut run.open, Some(&run.tracker), p)
            .await?;
        run.last_progress = Instant::now();
        if inside {
            if let Some(c) = run.current.as_mut() {
                c.in_txn = 0;
            }
        }
        Ok(())
    }

    /// The source stopped (shutdown or its own error): commits what was
    /// produced, at a boundary when the last transaction came whole, else
    /// inside it; a snapshot's transaction records its row count.
    async fn finish(&self, eos: &Eos, run: &mut Run) -> Result<(), SinkError> {
        if let Some(err) = self.take_failure() {
            return Err(self.abort_with(eos, &mut run.open, err).await);
        }
        if run.open.is_open() || !run.open.acks.is_empty() {
            self.begin(eos, &mut run.open)?;
            let last_whole = run.last_whole;
            let p = match run.current {
                _ if run.snapshot => {
                    let mut p = eos.progress(last_whole, Lsn::ZERO, 0, Phase::Stream);
                    p.snapshot_rows = Some(run.open.records);
                    p
                }
                Some(c) => match seen_whole(&run.tracker, &c) {
                    Some(end) => eos.progress(
                        end.map_or(last_whole, |e| last_whole.max(e)),
                        Lsn::ZERO,
                        0,
                        Phase::Stream,
                    ),
                    None => eos.progress(last_whole, c.commit_lsn, c.index, Phase::Stream),
                },
                None => eos.progress(last_whole, Lsn::ZERO, 0, Phase::Stream),
            };
            self.commit(eos, &mut run.open, Some(&run.tracker), p)
                .await?;
        }
        if run.snapshot {
            eos.snapshot.store(false, Ordering::Release);
        }
        Ok(())
    }

    /// Drops what librdkafka still holds (it would fail the abort's flush)
    /// and aborts the open transaction, counting it.
    async fn abort_open(&self, eos: &Eos) -> Result<(), KafkaError> {
        let producer = self.producer();
        producer.purge(rdkafka::producer::PurgeConfig::default().queue().inflight());
        let timeout = Duration::from_millis(eos.config.timeout_ms);
        let aborted = tokio::task::spawn_blocking(move || producer.abort_transaction(timeout))
            .await
            .expect("abort_transaction does not panic");
        let _ = self.take_failure();
        self.shared
            .metrics
            .kafka_transactions
            .get_or_create(&ResultLabel { result: "aborted" })
            .inc();
        aborted
    }

    /// Aborts after a failure recorded by a delivery report. A record
    /// Kafka refused for itself stops the pipeline under
    /// `errors.tolerance = none` (retrying cannot help) and is retried as
    /// its dead-letter record under `all`.
    async fn abort_with(&self, eos: &Eos, open: &mut Open, err: SinkError) -> SinkError {
        let age = open.since.map(|s| s.elapsed());
        let (refused, unreplaceable) = {
            let r = self.shared.refused.lock().expect("refused lock poisoned");
            (!r.is_empty(), r.iter().any(|r| !r.event))
        };
        let fatal = matches!(err, SinkError::Cluster { .. } | SinkError::Fenced { .. })
            || unreplaceable
            || (refused && self.dead_letter.is_none());
        if let SinkError::Cluster { error } = &err {
            // librdkafka reports fencing (and a transaction the broker
            // timed out) as a fatal client error.
            let lower = error.to_ascii_lowercase();
            if lower.contains("fenced")
                || lower.contains("invalid_txn_state")
                || lower.contains("epoch")
            {
                *open = Open::default();
                let fenced = SinkError::Fenced {
                    transactional_id: eos.transactional_id.clone(),
                };
                let err = eos.timed_out(age, fenced);
                if !matches!(err, SinkError::TransactionAborted { .. }) {
                    self.shared.metrics.producer_fenced.set(1);
                }
                return err;
            }
        }
        if matches!(err, SinkError::Cluster { .. } | SinkError::Fenced { .. }) {
            *open = Open::default();
            return eos.timed_out(age, err);
        }
        let aborted = self.abort_open(eos).await;
        *open = Open::default();
        if let Err(a) = aborted {
            let (_, e) = classify(&a, &eos.transactional_id);
            let e = eos.timed_out(age, e);
            if matches!(e, SinkError::TransactionAborted { .. }) {
                eos.reinit.store(true, Ordering::Release);
            }
            return e;
        }
        eos.in_txn.store(false, Ordering::Release);
        if fatal {
            return err;
        }
        warn!(error = %crate::chain::DisplayChain(&err), "kafka transaction aborted after a delivery failure; resuming from the last committed progress");
        SinkError::TransactionAborted {
            reason: crate::chain::DisplayChain(&err).to_string(),
        }
    }

    /// The exactly-once produce step of one event, inside the open
    /// transaction: its record, or the dead-letter record that replaces it
    /// (the router refused it, or Kafka refused it in an aborted
    /// transaction before), counted in the open transaction. A refused
    /// event without a dead-letter topic aborts what is open and stops.
    async fn publish_in_txn(
        &self,
        step: &mut Step<'_>,
        eos: &Eos,
        open: &mut Open,
        producer: &Arc<ThreadedProducer<DeliveryContext>>,
        router: &mut Router,
        event: &OutboxEvent,
    ) -> Result<(), SinkError> {
        let routing = match self.take_refused(event) {
            // Kafka refused this record before: its dead-letter record
            // takes its place.
            Some(r) => Routing::Letter(Letter::refused(event, UNTRACKED, r)),
            None => step.route(event, router, UNTRACKED),
        };
        let (record, event_id) = match routing {
            Routing::Record(record, event_id) => (record, event_id),
            // Nothing to send; the commit settles the event with the others.
            Routing::Dropped => {
                self.shared
                    .metrics
                    .filtered
                    .get_or_create(&crate::metrics::ReasonLabel {
                        reason: "transform",
                    })
                    .inc();
                return Ok(());
            }
            Routing::Letter(letter) => {
                let dl = self
                    .dead_letter
                    .as_deref()
                    .expect("a letter needs a dead-letter topic");
                self.send_letter_in_txn(eos, open, producer, dl, &letter)
                    .await?;
                open.records += 1;
                return Ok(());
            }
            Routing::Failed(e) => {
                // What is open is aborted: nothing of this transaction or
                // after it becomes visible.
                if self.abort_open(eos).await.is_ok() {
                    eos.in_txn.store(false, Ordering::Release);
                }
                return Err(SinkError::Route(e));
            }
        };
        if step.count(&record.topic) {
            // Reads the topic's limit; never replaces the transactional
            // producer (see `fit_batches`).
            self.note_limit(&record.topic).await;
        }
        let wire = WireRecord::of(&record);
        let bytes = wire.bytes() as u64;
        let ticket = step.ticket(UNTRACKED, event, event_id);
        self.send_in_txn(eos, open, producer, &wire, ticket).await?;
        open.records += 1;
        open.bytes += bytes;
        Ok(())
    }

    /// The refusal recorded for `event`, if Kafka refused its record in an
    /// aborted transaction (snapshot rows share one LSN: never matched).
    /// Only with a dead-letter topic, which takes the event's place.
    fn take_refused(&self, event: &OutboxEvent) -> Option<Refused> {
        let mut refused = self.shared.refused.lock().expect("refused lock poisoned");
        if refused.is_empty() || event.meta.xid == 0 || self.dead_letter.is_none() {
            return None;
        }
        let i = refused
            .iter()
            .position(|r| r.commit_lsn == event.meta.commit_lsn && r.lsn == event.meta.lsn)?;
        Some(refused.swap_remove(i))
    }

    /// Sends `letter`'s dead-letter record inside the open transaction.
    async fn send_letter_in_txn(
        &self,
        eos: &Eos,
        open: &mut Open,
        producer: &Arc<ThreadedProducer<DeliveryContext>>,
        dl: &DeadLetter,
        letter: &Letter,
    ) -> Result<(), SinkError> {
        let (key, value, headers) = dl.record_parts(letter);
        let record = WireRecord {
            headers: &headers,
            ..WireRecord::plain(dl.topic(), key.as_deref(), value.as_deref())
        };
        self.send_in_txn(eos, open, producer, &record, RecordContext::untracked())
            .await?;
        self.shared
            .metrics
            .dead_lettered
            .get_or_create(&crate::metrics::ReasonLabel {
                reason: letter.kind,
            })
            .inc();
        Ok(())
    }

    /// Sends one record of the open transaction through the publish step:
    /// a failure reported while the local queue is full, or a refusal,
    /// aborts the transaction.
    async fn send_in_txn(
        &self,
        eos: &Eos,
        open: &mut Open,
        producer: &Arc<ThreadedProducer<DeliveryContext>>,
        record: &WireRecord<'_>,
        ticket: Box<RecordContext>,
    ) -> Result<(), SinkError> {
        match publish::send(&self.shared, &**producer, record, ticket).await {
            Ok(()) => Ok(()),
            Err(Stop::Failed(err)) => Err(self.abort_with(eos, open, err).await),
            Err(Stop::Refused(_, e)) => Err(self.abort(eos, open, e).await),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{ProgressStore, SlotVerdict};

    #[test]
    fn fencing_and_fatal_errors_stop_others_abort() {
        let fenced = KafkaError::MessageProduction(RDKafkaErrorCode::ProducerFenced);
        let (fatal, e) = classify(&fenced, "walrelay-orders");
        assert!(fatal);
        assert!(e.to_string().contains("walrelay-orders"), "{e}");
        let timeout = KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut);
        let (fatal, e) = classify(&timeout, "walrelay-orders");
        assert!(!fatal);
        assert!(matches!(e, SinkError::TransactionAborted { .. }));
    }

    #[test]
    fn acks_are_grouped_per_source_transaction() {
        let mut open = Open::default();
        open.ack(1);
        open.ack(1);
        open.ack(2);
        open.ack(1);
        assert_eq!(open.acks, vec![(1, 2), (2, 1), (1, 1)]);
    }

    #[test]
    fn verify_names_both_positions_when_the_slot_is_ahead() {
        let eos = Arc::new(Eos::new(&TransactionsConfig::default(), "walrelay"));
        let store = KafkaProgress {
            eos: Arc::clone(&eos),
        };
        assert_eq!(store.verify("42/1", Some(Lsn(5))), Ok(SlotVerdict::Proceed));
        let mut p = eos.progress(Lsn(0x100), Lsn::ZERO, 0, Phase::Stream);
        p.system_id = "42".into();
        eos.set_committed(p.clone());
        assert_eq!(store.resume_after("42/2"), Some(Lsn(0x100)));
        assert_eq!(store.resume_after("43/1"), None);
        assert_eq!(
            store.verify("42/1", Some(Lsn(0x80))),
            Ok(SlotVerdict::Proceed)
        );
        let err = store.verify("42/1", Some(Lsn(0x200))).unwrap_err();
        assert!(err.contains("0/200") && err.contains("0/100"), "{err}");
        assert!(err.contains("slot_ahead"), "{err}");
        let err = store.verify("43/1", Some(Lsn(0x80))).unwrap_err();
        assert!(err.contains("43") && err.contains("42"), "{err}");
        let err = store.verify("42/1", None).unwrap_err();
        assert!(err.contains("does not exist"), "{err}");
        p.phase = Phase::Snapshot;
        eos.set_committed(p);
        assert_eq!(
            store.verify("42/1", Some(Lsn(0x80))),
            Ok(SlotVerdict::RedoSnapshot)
        );
    }
}
