//! The publish step: one produce step for every delivery path — the
//! at-least-once loop, the exactly-once loop and the dead-letter records —
//! and for every broker behind [`super::broker::Broker`].
//!
//! ```text
//!  OutboxEvent ─▶ Step::route ─┬─ record ──▶ Step::count (first sight of a
//!                              │                destination: its limits)
//!                              │           ──▶ send (backpressure: a full
//!                              │                broker queue waits)
//!                              ├─ dead letter (errors.tolerance = all)
//!                              └─ route error (stops the pipeline)
//!  broker's acknowledgement ──▶ Shared::settle ─▶ tracker.ack / fail,
//!                                 dead letter of a refused record
//! ```
//!
//! Owns the state a sink shares with its brokers' callbacks ([`Shared`]:
//! the current session's tracker, the first failure, limits read per
//! destination), the per-record ticket ([`RecordContext`]), settling an
//! acknowledgement, and the routing, counting and waiting every path does
//! alike. What differs between paths (what a failure stops: the sink, or
//! the open Kafka transaction) stays with the path; what differs between
//! brokers stays behind the trait. It never confirms an LSN itself: it
//! reports deliveries to the tracker, tagged with the session generation,
//! so reports from an earlier session are ignored.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Notify;
use tracing::error;
use walrelay_proto::Lsn;

use super::broker::{Broker, Delivery, FailureClass, Refusal, WireRecord};
use super::dlq::{DeadLetter, Letter, Stage};
use super::limits::fits_alone;
use super::SinkError;
use crate::checkpoint::SharedTracker;
use crate::metrics::{observe_micros, CodeLabel, Metrics, ReasonLabel, TopicLabel};
use crate::router::{KafkaRecord, RouteError, Router};
use crate::txn::OutboxEvent;

/// Bits of the delivery tag that carry the transaction sequence; the
/// bits above carry the session generation.
pub(super) const SEQ_BITS: u32 = 48;
pub(super) const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;
/// Delivery tag of records outside any transaction (heartbeats, and every
/// record of exactly-once mode, which the commit settles): generation 0,
/// which no session has (sessions are numbered from 1), so the tracker
/// never sees their reports.
pub(super) const UNTRACKED: u64 = 0;
/// How long a send waits for acknowledgements to make room in a full
/// broker queue before it tries again.
const FULL_PAUSE: Duration = Duration::from_millis(10);
/// A send waiting on a full queue is woken when 1/ROOM_RUN of the records
/// in flight at its refusal have been acknowledged.
const ROOM_RUN: usize = 8;

/// State shared by a sink, its brokers' delivery callbacks and the
/// dead-letter producer's.
#[derive(Default)]
pub(crate) struct Shared {
    /// Where delivery reports are counted.
    pub(crate) metrics: Arc<Metrics>,
    /// The current session's generation and tracker.
    pub(super) tracker: Mutex<Option<(u64, SharedTracker)>>,
    failure: Mutex<Option<SinkError>>,
    /// Woken by every acknowledgement (a drain waits on it).
    pub(super) wake: Notify,
    /// Woken once a send refused by a full queue has room for a run of
    /// records: at `room_at` acknowledgements (0: no send waits). Waking
    /// it at every acknowledgement instead cost a task wake-up per record
    /// while the queue stayed full (3.29 against 2.71 CPU s per million
    /// events in W2 across `zone`, docs/benchmarks.md).
    room: Notify,
    room_at: AtomicU64,
    /// Acknowledgements settled so far (delivered or refused).
    settled: AtomicU64,
    /// Signalled once per recorded failure, so an idle sink stops at once
    /// without being woken by every delivery report.
    pub(super) failed: Notify,
    pub(super) delivered: AtomicU64,
    /// `max.message.bytes` of the topics produced to, as read when the
    /// sink first met them.
    pub(super) limits: Mutex<HashMap<String, u64>>,
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
    pub(crate) commit_lsn: Lsn,
    pub(crate) lsn: Lsn,
    /// The kind of problem (metric label).
    pub(crate) kind: &'static str,
    pub(crate) topic: String,
    /// The broker's error, for the dead-letter record.
    pub(crate) message: String,
}

impl Shared {
    /// Nothing recorded yet; samples go to `metrics`.
    pub(super) fn new(metrics: Arc<Metrics>) -> Shared {
        Shared {
            metrics,
            ..Shared::default()
        }
    }

    /// The tracker of the session `tag` belongs to, if it is the current one.
    pub(super) fn tracker_for(&self, tag: u64) -> Option<SharedTracker> {
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
    pub(super) fn record_failure(&self, err: SinkError) {
        let mut failure = self.failure.lock().expect("failure slot lock poisoned");
        if failure.is_none() {
            *failure = Some(err);
        }
        self.failed.notify_one();
        self.room.notify_waiters();
    }

    /// Takes the recorded failure, if any.
    pub(super) fn take_failure(&self) -> Option<SinkError> {
        self.failure
            .lock()
            .expect("failure slot lock poisoned")
            .take()
    }

    /// Settles one acknowledgement (a broker's callback calls this for
    /// every record it was handed): a delivered record counts in its
    /// transaction; a refused one is dead-lettered when it is the record's
    /// own fault and a dead-letter topic is configured, and otherwise
    /// fails its transaction and stops the sink.
    pub(super) fn settle(
        &self,
        ctx: &RecordContext,
        dead_letter: Option<&DeadLetter>,
        outcome: Result<(), Delivery>,
    ) {
        match outcome {
            Ok(()) => self.delivered(ctx),
            Err(failure) => self.refused(ctx, dead_letter, failure),
        }
        self.wake.notify_waiters();
        let n = self.settled.fetch_add(1, Ordering::Relaxed) + 1;
        let at = self.room_at.load(Ordering::Relaxed);
        if at != 0 && n >= at {
            self.room_at.store(0, Ordering::Relaxed);
            self.room.notify_waiters();
        }
    }

    /// Asks for the room notification after `run` more acknowledgements.
    fn want_room(&self, run: usize) {
        let run = u64::try_from(run.max(1)).unwrap_or(u64::MAX);
        let at = self.settled.load(Ordering::Relaxed).saturating_add(run);
        self.room_at.store(at, Ordering::Relaxed);
    }

    /// Settles an event a transform dropped: nothing was sent, so it is
    /// delivered now (in order with the others: the tracker confirms a
    /// position only once every event before it is settled).
    pub(super) fn settle_dropped(&self, tag: u64) {
        self.metrics
            .filtered
            .get_or_create(&ReasonLabel {
                reason: "transform",
            })
            .inc();
        if let Some(t) = self.tracker_for(tag) {
            t.ack(tag & SEQ_MASK, 1);
        }
        self.wake.notify_waiters();
    }

    /// Settles the acknowledgement of a dead-letter record that took the
    /// place of the event tagged `tag`: delivered, the event counts as
    /// delivered; refused, its transaction fails and the sink stops.
    pub(super) fn settle_letter(
        &self,
        tag: u64,
        kind: &'static str,
        outcome: Result<(), Delivery>,
    ) {
        let tracker = self.tracker_for(tag);
        match outcome {
            Ok(()) => {
                self.metrics
                    .dead_lettered
                    .get_or_create(&ReasonLabel { reason: kind })
                    .inc();
                if let Some(t) = tracker {
                    t.ack(tag & SEQ_MASK, 1);
                }
            }
            Err(failure) => {
                if let Some(t) = tracker {
                    t.fail(tag & SEQ_MASK);
                }
                if failure.class != FailureClass::Purged {
                    error!(broker = failure.broker, error = %failure.error, "the broker could not deliver a dead-letter record");
                }
                self.record_failure(SinkError::DeadLetter {
                    broker: failure.broker,
                    error: failure.error,
                });
            }
        }
        self.wake.notify_waiters();
    }

    fn delivered(&self, ctx: &RecordContext) {
        self.delivered.fetch_add(1, Ordering::Relaxed);
        let now_us = crate::clock::unix_now_micros();
        if ctx.produced_us > 0 {
            observe_micros(
                &self.metrics.stages.produce_to_ack,
                now_us - ctx.produced_us,
            );
        }
        let tracker = self.tracker_for(ctx.tag);
        if let Some(commit_us) = tracker.and_then(|t| t.ack(ctx.tag & SEQ_MASK, 1)) {
            observe_micros(&self.metrics.commit_to_ack, now_us - commit_us);
        }
    }

    fn refused(&self, ctx: &RecordContext, dead_letter: Option<&DeadLetter>, failure: Delivery) {
        let tracker = self.tracker_for(ctx.tag);
        let seq = ctx.tag & SEQ_MASK;
        let fail = || {
            if let Some(t) = &tracker {
                t.fail(seq);
            }
        };
        self.metrics
            .delivery_errors
            .get_or_create(&CodeLabel {
                code: failure.code.clone(),
            })
            .inc();
        let event_id = ctx.event_id_or_placeholder();
        let Delivery {
            broker,
            destination: topic,
            class,
            error: err,
            record_bytes,
            ..
        } = failure;
        // A batch refused for its size although this record fits the
        // topic's limit alone: not the record's fault.
        let too_large = matches!(
            class,
            FailureClass::Record {
                too_large: true,
                ..
            }
        );
        if let Some(limit) = self
            .limit_of(&topic)
            .filter(|&l| too_large && fits_alone(record_bytes, l))
        {
            fail();
            error!(pipeline = self.metrics.name(), topic, event_id, lsn = %ctx.lsn, limit, error = %err, "kafka refused a batch that this record fits alone");
            self.record_failure(SinkError::BatchTooLarge {
                topic,
                limit,
                event_id: event_id.to_owned(),
                lsn: ctx.lsn,
            });
            return;
        }
        let kind = match class {
            FailureClass::Record { kind, .. } => Some(kind),
            _ => None,
        };
        let message = format!("{broker} could not deliver the record to {topic}: {err}");
        // Exactly-once: the transaction aborts; remember the event so the
        // retry dead-letters it (or the sink stops on it).
        if let (Some(kind), UNTRACKED) = (kind, ctx.tag) {
            self.refused
                .lock()
                .expect("refused lock poisoned")
                .push(Refused {
                    event: ctx.event_id.is_some(),
                    commit_lsn: ctx.commit_lsn,
                    lsn: ctx.lsn,
                    kind,
                    topic: topic.clone(),
                    message: message.clone(),
                });
        }
        // A per-record failure under `errors.tolerance = all`: the
        // dead-letter record replaces this one in the transaction's count,
        // so the tracker hears nothing now.
        if let (Some(dl), Some(original), Some(kind), Some(_)) =
            (dead_letter, &ctx.original, kind, &tracker)
        {
            let letter = ctx.letter(original, topic, kind, super::kafka::ERROR_CLASS, message);
            if let Err(source) = dl.send(&letter) {
                fail();
                self.record_failure(SinkError::DeadLetterProduce {
                    event_id: event_id.to_owned(),
                    lsn: ctx.lsn,
                    topic: dl.topic().to_owned(),
                    source: Box::new(source),
                });
            }
            return;
        }
        fail();
        // Records purged after the first failure only echo it.
        if class != FailureClass::Purged {
            error!(broker, topic, event_id, lsn = %ctx.lsn, error = %err, "delivery failed permanently");
        }
        self.record_failure(SinkError::Delivery {
            broker,
            topic,
            error: err,
            event_id: event_id.to_owned(),
            lsn: ctx.lsn,
        });
    }
}

/// What an acknowledgement needs to know about its record: which
/// transaction to settle, and enough of the event to name it in an error
/// or dead-letter it. The ticket every broker carries.
pub(crate) struct RecordContext {
    tag: u64,
    /// LSN of the event's change (0/0 for a record of no event).
    pub(super) lsn: Lsn,
    commit_lsn: Lsn,
    xid: u32,
    /// The event's id as routed (moved here from the routed record: no
    /// copy).
    pub(super) event_id: Option<String>,
    /// The event's original bytes; kept only where a refused record can
    /// be dead-lettered from its acknowledgement. Boxed: a ticket lives
    /// as long as its record is in flight, and most carry none.
    original: Option<Box<Original>>,
    /// When it was handed to the broker, Unix µs (0: not measured).
    produced_us: i64,
}

impl RecordContext {
    /// The context of a record that settles nothing in the tracker.
    pub(super) fn untracked() -> Box<RecordContext> {
        Box::new(RecordContext {
            tag: UNTRACKED,
            lsn: Lsn::ZERO,
            commit_lsn: Lsn::ZERO,
            xid: 0,
            event_id: None,
            original: None,
            produced_us: 0,
        })
    }

    /// The dead-letter record that takes the place of this record, which
    /// `destination` refused for itself (`kind`, `class`, `message`), or
    /// `None` when its original bytes were not kept (no dead-letter
    /// destination, or a record of no event).
    pub(super) fn dead_letter(
        &self,
        destination: String,
        kind: &'static str,
        class: &'static str,
        message: String,
    ) -> Option<Letter> {
        let original = self.original.as_ref()?;
        Some(self.letter(original, destination, kind, class, message))
    }

    fn letter(
        &self,
        original: &Original,
        destination: String,
        kind: &'static str,
        class: &'static str,
        message: String,
    ) -> Letter {
        Letter {
            tag: self.tag,
            lsn: self.lsn,
            commit_lsn: self.commit_lsn,
            xid: self.xid,
            event_id: self.event_id.clone(),
            table: original.origin.clone(),
            key: original.key.clone(),
            value: original.value.clone(),
            topic: Some(destination),
            kind,
            class,
            message,
            stage: Stage::Produce,
            // The broker's limit is not the producer's: the original
            // bytes go out unless they exceed the producer's own
            // `message.max.bytes` (records that only shared a rejected
            // batch keep their value).
            too_large: false,
        }
    }

    /// Whether the record settles a transaction in the tracker.
    pub(super) fn is_tracked(&self) -> bool {
        self.tag != UNTRACKED
    }

    /// The delivery tag: session generation and transaction sequence.
    pub(super) fn tag(&self) -> u64 {
        self.tag
    }

    /// The id to name the record by in errors.
    pub(super) fn event_id_or_placeholder(&self) -> &str {
        self.event_id
            .as_deref()
            .unwrap_or(if self.tag == UNTRACKED {
                "heartbeat"
            } else {
                "null"
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

/// What routing made of an event.
pub(super) enum Routing {
    /// Its record and the event id it carries.
    Record(KafkaRecord, Option<String>),
    /// A transform after the router dropped it (`Filter`): nothing is
    /// sent, and the event counts as delivered.
    Dropped,
    /// The router refused it and a dead-letter topic takes it.
    Letter(Letter),
    /// The router refused it and nothing takes it: the pipeline stops.
    Failed(RouteError),
}

/// Why a send ended without handing the record over.
pub(super) enum Stop<T, E> {
    /// A failure was reported while the send waited for room.
    Failed(SinkError),
    /// The broker refused the record outright.
    Refused(T, E),
}

/// One delivery path's produce step, for the length of one run: routes,
/// counts per destination and sends with backpressure.
pub(super) struct Step<'s> {
    shared: &'s Shared,
    /// Whether bad events go to a dead-letter destination.
    dead_letters: bool,
    /// Records per destination since the last flush (once per batch into
    /// the metrics, never per event).
    counts: Vec<(Arc<str>, u64)>,
    /// Destinations met by this run, whose limits were looked at.
    seen: Vec<Arc<str>>,
}

impl<'s> Step<'s> {
    pub(super) fn new(shared: &'s Shared, dead_letters: bool) -> Step<'s> {
        Step {
            shared,
            dead_letters,
            counts: Vec::new(),
            seen: Vec::new(),
        }
    }

    /// Routes `event`, or builds the dead-letter record that takes its
    /// place (tagged `tag`) when the router refuses it.
    pub(super) fn route(&self, event: &OutboxEvent, router: &mut Router, tag: u64) -> Routing {
        match event.route(router) {
            Ok((Some(record), event_id)) => Routing::Record(record, event_id),
            Ok((None, _)) => Routing::Dropped,
            Err(e) if self.dead_letters => {
                let topic = event.intended_topic(router);
                Routing::Letter(Letter::route_error(event, tag, &e, topic))
            }
            Err(e) => Routing::Failed(e),
        }
    }

    /// Counts one record to `destination`; true the first time this run
    /// meets the destination (its limits are to be looked at).
    pub(super) fn count(&mut self, destination: &Arc<str>) -> bool {
        match self
            .counts
            .iter_mut()
            .find(|(t, _)| Arc::ptr_eq(t, destination) || **t == **destination)
        {
            Some((_, n)) => {
                *n += 1;
                false
            }
            None => {
                self.counts.push((Arc::clone(destination), 1));
                if self.seen.iter().any(|t| **t == **destination) {
                    return false;
                }
                self.seen.push(Arc::clone(destination));
                true
            }
        }
    }

    /// Adds the counts since the last flush to the metrics.
    pub(super) fn flush_counts(&mut self) {
        for (topic, n) in self.counts.drain(..) {
            self.shared
                .metrics
                .events
                .get_or_create(&TopicLabel {
                    topic: topic.to_string(),
                })
                .inc_by(n);
        }
    }

    /// The ticket of `event`'s record, about to be handed to the broker:
    /// observes the event's `receive_to_produce` stage. The original bytes
    /// are kept only for a tracked record with a dead-letter topic (its
    /// acknowledgement may dead-letter it).
    pub(super) fn ticket(
        &self,
        tag: u64,
        event: &OutboxEvent,
        event_id: Option<String>,
    ) -> Box<RecordContext> {
        let now = crate::clock::unix_now_micros();
        if event.meta.received_us > 0 {
            observe_micros(
                &self.shared.metrics.stages.receive_to_produce,
                now - event.meta.received_us,
            );
        }
        let original = (tag != UNTRACKED && self.dead_letters).then(|| {
            let (key, value) = event.original();
            Box::new(Original {
                origin: event.origin(),
                key,
                value,
            })
        });
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

    /// Sends one record; see [`send`].
    pub(super) async fn send<B: Broker>(
        &self,
        broker: &B,
        record: &WireRecord<'_>,
        ticket: B::Ticket,
    ) -> Result<(), Stop<B::Ticket, B::Error>> {
        send(self.shared, broker, record, ticket).await
    }
}

/// Hands `record` to `broker`, waiting while the broker's queue is full
/// (backpressure: acknowledgements make room, never a bigger buffer). A
/// failure reported meanwhile ends the wait.
///
/// A refused send asks to be woken once an eighth of what is in flight
/// has been acknowledged (room for a run of records, not one), registers,
/// and tries once more before it waits: room made between the refusal and
/// the registration would otherwise be missed, and the send would sleep
/// the whole pause with room in the queue. The pause bounds every wait.
pub(super) async fn send<B: Broker>(
    shared: &Shared,
    broker: &B,
    record: &WireRecord<'_>,
    mut ticket: B::Ticket,
) -> Result<(), Stop<B::Ticket, B::Error>> {
    let mut waiter = None;
    loop {
        match broker.send(record, ticket) {
            Ok(()) => return Ok(()),
            Err(Refusal::Full(back)) => {
                ticket = back;
                // A `Notified` hears every notify_waiters() from its
                // creation on, polled or not.
                let Some(notified) = waiter.take() else {
                    waiter = Some(shared.room.notified());
                    shared.want_room(broker.in_flight() / ROOM_RUN);
                    continue;
                };
                let _ = tokio::time::timeout(FULL_PAUSE, notified).await;
                if let Some(err) = shared.take_failure() {
                    return Err(Stop::Failed(err));
                }
            }
            Err(Refusal::Refused(back, e)) => return Err(Stop::Refused(back, e)),
        }
    }
}

/// [`send`] for a thread that may block (a broker's delivery callback,
/// which dead-letters a refused record): waits by sleeping.
pub(super) fn send_blocking<B: Broker>(
    broker: &B,
    record: &WireRecord<'_>,
    mut ticket: B::Ticket,
) -> Result<(), B::Error> {
    loop {
        match broker.send(record, ticket) {
            Ok(()) => return Ok(()),
            Err(Refusal::Full(back)) => {
                ticket = back;
                std::thread::sleep(FULL_PAUSE);
            }
            Err(Refusal::Refused(_, e)) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};

    use super::super::broker::{Guarantees, WireRecord};
    use super::*;

    /// A broker that takes `room` records, then is full until `drain`.
    struct Queue {
        room: Cell<usize>,
        sent: RefCell<Vec<String>>,
        refuse: Option<&'static str>,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("refused: {0}")]
    struct Refuse(&'static str);

    /// What the test brokers promise: order per key, nothing more.
    const ORDERED_ONLY: Guarantees = Guarantees {
        idempotent: false,
        transactional: false,
        dedup_by_id: false,
        per_key_order: true,
    };

    impl Broker for Queue {
        type Ticket = u32;
        type Error = Refuse;
        const NAME: &'static str = "queue";
        const GUARANTEES: Guarantees = ORDERED_ONLY;

        fn send(&self, record: &WireRecord<'_>, ticket: u32) -> Result<(), Refusal<u32, Refuse>> {
            if let Some(why) = self.refuse {
                return Err(Refusal::Refused(ticket, Refuse(why)));
            }
            if self.room.get() == 0 {
                return Err(Refusal::Full(ticket));
            }
            self.room.set(self.room.get() - 1);
            self.sent
                .borrow_mut()
                .push(format!("{}#{ticket}", record.destination));
            Ok(())
        }

        fn classify(_: &Refuse) -> FailureClass {
            FailureClass::Record {
                kind: "invalid_record",
                too_large: false,
            }
        }

        fn in_flight(&self) -> usize {
            self.sent.borrow().len()
        }
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
        shared.record_failure(SinkError::DeadLetter {
            broker: "kafka",
            error: "a".into(),
        });
        shared.record_failure(SinkError::DeadLetter {
            broker: "kafka",
            error: "b".into(),
        });
        let kept = shared.take_failure().unwrap();
        assert_eq!(
            kept.to_string(),
            "kafka could not deliver a dead-letter record: a; nothing after it is confirmed"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_broker_is_waited_for_and_a_failure_ends_the_wait() {
        let shared = Shared::default();
        let queue = Queue {
            room: Cell::new(1),
            sent: RefCell::new(Vec::new()),
            refuse: None,
        };
        let record = WireRecord::plain("t", None, Some(b"v"));
        assert!(send(&shared, &queue, &record, 1).await.is_ok());
        // Full: the send waits; a failure reported meanwhile ends it, and
        // nothing more was handed over.
        shared.record_failure(SinkError::DeadLetter {
            broker: "kafka",
            error: "x".into(),
        });
        match send(&shared, &queue, &record, 2).await {
            Err(Stop::Failed(SinkError::DeadLetter { error, .. })) => assert_eq!(error, "x"),
            _ => panic!("the recorded failure must end the wait"),
        }
        assert_eq!(*queue.sent.borrow(), ["t#1"]);
        // Room again: the same record goes out.
        queue.room.set(1);
        assert!(send(&shared, &queue, &record, 3).await.is_ok());
        assert_eq!(*queue.sent.borrow(), ["t#1", "t#3"]);
    }

    /// A broker whose queue is full when asked, while an acknowledgement
    /// makes room at that very moment (as librdkafka's delivery thread
    /// can, between the refusal and the wait).
    struct AckRacing {
        tries: Cell<u32>,
    }

    impl Broker for AckRacing {
        type Ticket = u32;
        type Error = Refuse;
        const NAME: &'static str = "racing";
        const GUARANTEES: Guarantees = ORDERED_ONLY;

        fn send(&self, _: &WireRecord<'_>, ticket: u32) -> Result<(), Refusal<u32, Refuse>> {
            self.tries.set(self.tries.get() + 1);
            if self.tries.get() == 1 {
                return Err(Refusal::Full(ticket));
            }
            Ok(())
        }

        fn classify(_: &Refuse) -> FailureClass {
            FailureClass::Purged
        }

        fn in_flight(&self) -> usize {
            0
        }
    }

    #[tokio::test(start_paused = true)]
    async fn room_made_as_the_queue_refused_is_used_at_once() {
        let shared = Shared::default();
        let broker = AckRacing {
            tries: Cell::new(0),
        };
        let record = WireRecord::plain("t", None, Some(b"v"));
        let t0 = tokio::time::Instant::now();
        assert!(send(&shared, &broker, &record, 1).await.is_ok());
        assert_eq!(broker.tries.get(), 2);
        // No pause: the room came before anyone waited for it, and the
        // second try found it.
        assert_eq!(t0.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_send_is_woken_by_a_run_of_acknowledgements_not_each() {
        let shared = Shared::default();
        let ctx = RecordContext::untracked();
        let room = shared.room.notified();
        tokio::pin!(room);
        shared.want_room(3);
        shared.settle(&ctx, None, Ok(()));
        shared.settle(&ctx, None, Ok(()));
        let wait = Duration::from_millis(1);
        assert!(
            tokio::time::timeout(wait, room.as_mut()).await.is_err(),
            "two acknowledgements of three must not wake the send"
        );
        shared.settle(&ctx, None, Ok(()));
        assert!(tokio::time::timeout(wait, room.as_mut()).await.is_ok());
        // Asked for once: later acknowledgements wake nobody.
        assert_eq!(shared.room_at.load(Ordering::Relaxed), 0);
        // A failure ends a wait at once, whatever the run.
        let again = shared.room.notified();
        tokio::pin!(again);
        shared.want_room(1000);
        shared.record_failure(SinkError::DeadLetter {
            broker: "kafka",
            error: "x".into(),
        });
        assert!(tokio::time::timeout(wait, again.as_mut()).await.is_ok());
    }

    #[tokio::test]
    async fn a_refusal_hands_the_ticket_back() {
        let shared = Shared::default();
        let queue = Queue {
            room: Cell::new(5),
            sent: RefCell::new(Vec::new()),
            refuse: Some("policy"),
        };
        let record = WireRecord::plain("t", None, None);
        match send(&shared, &queue, &record, 9).await {
            Err(Stop::Refused(ticket, e)) => {
                assert_eq!(ticket, 9);
                assert_eq!(
                    Queue::classify(&e),
                    FailureClass::Record {
                        kind: "invalid_record",
                        too_large: false
                    }
                );
            }
            _ => panic!("the refusal must come back with its ticket"),
        }
        assert!(send_blocking(&queue, &record, 1).is_err());
    }

    #[test]
    fn counts_name_each_destination_once() {
        let shared = Shared::default();
        let mut step = Step::new(&shared, false);
        let a: Arc<str> = "a".into();
        let a2: Arc<str> = "a".into();
        let b: Arc<str> = "b".into();
        assert!(step.count(&a));
        assert!(!step.count(&a2));
        assert!(step.count(&b));
        step.flush_counts();
        // Met before the flush: not new again.
        assert!(!step.count(&a));
        step.flush_counts();
        let text = shared.metrics.render();
        assert!(
            text.contains("walrelay_events_total{pipeline=\"default\",topic=\"a\"} 3"),
            "{text}"
        );
    }
}
