//! The seam between the pipeline and whatever yields outbox events: a
//! [`Source`] hands over committed transactions of events, each with a
//! position, and a [`ProgressStore`] says where a session resumes and which
//! position is durable enough to release at the origin.
//!
//! ```text
//!   ProgressStore ── resume_after(origin) ──▶ pipeline ── opens ──▶ Source
//!        ▲                                                          │ Vec<OutboxEvent> (per batch)
//!        │ begin_session(tracker) ─▶ Frontier ── durable() ─▶ Source│ transactions registered
//!        │                                                          ▼ with the tracker first
//!   tracker (checkpoint) ◀── delivery reports ◀── sink ◀── bounded channel
//! ```
//!
//! Today: the WAL stream of a pgoutput slot ([`crate::postgres::wal`]) is
//! the source, and the slot's `confirmed_flush_lsn`, fed by the checkpoint
//! tracker, is the progress store ([`TrackerProgress`]). A logical-message
//! source, a polling source and a progress store kept in Kafka are further
//! implementations of these two traits (`docs/architecture.md`).
//!
//! Positions are [`Lsn`]s: a source without WAL numbers its claims with a
//! monotonic counter of its own. The traits are called per session and per
//! batch, never per event, so the hot path has no dynamic dispatch. A
//! session that fails says in its error's type whether a new session can
//! help ([`Retry`]): the source decides where the failure happens, the
//! pipeline only matches. This module never reads a socket, never routes
//! and never produces.

use std::future::Future;

use tokio::sync::{mpsc, watch};
use walrelay_proto::Lsn;

use crate::checkpoint::SharedTracker;
use crate::retry::Retry;
use crate::txn::OutboxEvent;

/// The events of committed transactions, in commit order, as one hand-off
/// to the sink. Every transaction they belong to is registered with the
/// session's tracker before the batch is sent.
pub(crate) type Batch = Vec<OutboxEvent>;

/// How a source's stream ended without an error of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamEnd {
    /// Shutdown was requested.
    Shutdown,
    /// The sink went away (its own error says why).
    SinkStopped,
}

/// The durable position, as the origin must see it: everything before it
/// is safe in Kafka, so the origin may release it (a slot's flush LSN, a
/// polling source's published marker).
pub(crate) trait Frontier: Send + Sync {
    /// The durable position now. Never moves backwards.
    fn durable(&self) -> Lsn;
}

/// At-least-once: what Kafka acknowledged is durable.
impl Frontier for SharedTracker {
    fn durable(&self) -> Lsn {
        self.confirmed()
    }
}

/// One session of an event source, opened by the pipeline.
pub(crate) trait Source: Send {
    /// What ends a session with an error; each comes as a [`Retry`]:
    /// [`Retry::Transient`] (reconnect with backoff) or
    /// [`Retry::Definite`] (stop the pipeline).
    type Error: std::error::Error + Send + Sync + 'static;

    /// Where this session's stream begins: every event before it was
    /// delivered in an earlier session.
    fn start(&self) -> Lsn;

    /// Hands batches of committed events to `out` until shutdown, the
    /// sink's departure, or an error. Each transaction is registered with
    /// `tracker` before its events leave; what the origin is told is
    /// durable comes only from `frontier`.
    fn stream<F: Frontier>(
        &mut self,
        tracker: &SharedTracker,
        frontier: &F,
        out: mpsc::Sender<Batch>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> impl Future<Output = Result<StreamEnd, Retry<Self::Error>>> + Send;

    /// After the sink has finished: tells the origin the final durable
    /// position and closes the session.
    fn finish(self, durable: Lsn) -> impl Future<Output = Result<(), Retry<Self::Error>>> + Send;
}

/// What a session must do about its slot, as the progress store sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotVerdict {
    /// Go on with the slot as it is (or create it).
    Proceed,
    /// An initial snapshot was begun and never committed: drop its slot
    /// and snapshot again.
    RedoSnapshot,
}

/// Where progress is kept between sessions.
pub(crate) trait ProgressStore: Send {
    /// The frontier a session reports from.
    type Frontier: Frontier + Clone + 'static;

    /// A position on `origin` before which this store knows every event is
    /// delivered, if it knows one. `origin` identifies the history the
    /// positions belong to (for PostgreSQL: system identifier and timeline;
    /// the same LSN on another server or timeline is other WAL).
    fn resume_after(&self, origin: &str) -> Option<Lsn>;

    /// A session on `origin` starts with `tracker`; returns the frontier
    /// its source reports from.
    fn begin_session(&mut self, origin: &str, tracker: &SharedTracker) -> Self::Frontier;

    /// Checks the slot (its confirmed position, `None` when it does not
    /// exist) against what this store knows, before a session streams: a
    /// store kept outside the origin can tell that something else consumed
    /// the slot. The error names both positions and the way out.
    fn verify(&self, _origin: &str, _slot_at: Option<Lsn>) -> Result<SlotVerdict, String> {
        Ok(SlotVerdict::Proceed)
    }
}

/// The slot as the progress store (at-least-once): the origin keeps the
/// position (`confirmed_flush_lsn`), fed by the checkpoint tracker. Across
/// sessions of one process it also remembers what Kafka acknowledged, for a
/// server that restarted and brought its slot back at an older position
/// (before PostgreSQL 17 a clean shutdown does not save it): the next
/// session then asks the server to skip what was already delivered, as
/// PostgreSQL's own apply worker does with its replication origin.
#[derive(Debug, Default)]
pub(crate) struct TrackerProgress {
    last: Option<(String, SharedTracker)>,
}

impl ProgressStore for TrackerProgress {
    type Frontier = SharedTracker;

    fn resume_after(&self, origin: &str) -> Option<Lsn> {
        self.last
            .as_ref()
            .filter(|(o, _)| o == origin)
            .map(|(_, tracker)| tracker.confirmed())
    }

    fn begin_session(&mut self, origin: &str, tracker: &SharedTracker) -> SharedTracker {
        // The previous session's tracker keeps settling the deliveries that
        // were in flight when it ended; the new one starts where it stands.
        self.last = Some((origin.to_owned(), tracker.clone()));
        tracker.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracker_progress_resumes_only_on_the_same_origin() {
        let mut store = TrackerProgress::default();
        assert_eq!(store.resume_after("sys/1"), None);
        let tracker = SharedTracker::new(Lsn(100));
        let frontier = store.begin_session("sys/1", &tracker);
        let seq = tracker.begin(0);
        tracker.add_events(seq, 1);
        tracker.commit(seq, Lsn(200));
        assert_eq!(frontier.durable(), Lsn(100));
        tracker.ack(seq, 1);
        assert_eq!(frontier.durable(), Lsn(200));
        assert_eq!(store.resume_after("sys/1"), Some(Lsn(200)));
        // Another server, or a promoted standby's new timeline.
        assert_eq!(store.resume_after("sys/2"), None);
        assert_eq!(store.resume_after("other/1"), None);
    }
}
