//! The ordered acknowledgement tracker: which LSN may be confirmed to PostgreSQL.
//!
//! ```text
//!  replication task                 Kafka delivery-report thread
//!   begin(commit_time) -> seq        ack(seq, n) / fail(seq)
//!   add_events(seq, n)                        │
//!   commit(seq, end_lsn)                      │
//!   aborted(lsn), keepalive(wal_end)          │
//!          └────────────► Tracker ◄───────────┘
//!                            │ confirmed()
//!                            ▼
//!                 standby status update (flush = apply = confirmed)
//! ```
//!
//! Owns the progress rules of the acknowledgement contract
//! (`docs/architecture.md`):
//!
//! 1. every transaction gets an entry at the back, in commit order;
//! 2. an entry is complete when it is committed and every record it sent has a
//!    successful delivery report; one with no records is complete on commit;
//! 3. the confirmed LSN is the commit end LSN of the longest prefix of
//!    complete entries: it never moves backwards and never passes an
//!    incomplete entry (a complete one still waits behind earlier ones);
//! 4. with nothing registered at all, a keepalive's `wal_end` may be confirmed;
//! 5. a permanent delivery failure pins the confirmed LSN below that
//!    transaction for the rest of this tracker's life.
//!
//! As a second line of defence the tracker also refuses to confirm past the
//! end LSN of any registered transaction that committed *earlier in the WAL*
//! than the prefix's last one. That cannot happen when callers register in
//! commit order, but it keeps the LSN safe if a streamed transaction was
//! registered at its first chunk and another one committed before it.
//!
//! It must never do I/O, block, log or panic: it is a pure data structure,
//! shared between threads only through [`SharedTracker`]'s short lock.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use walrelay_proto::Lsn;

/// Identifies one registered transaction; unique for the tracker's whole life
/// (also across a reset), so late reports for old entries are recognised
/// and ignored.
pub type TxnSeq = u64;

/// One registered transaction.
#[derive(Debug, Clone)]
struct Entry {
    commit_time_us: i64,
    /// Commit end LSN; `None` while the transaction is open.
    end: Option<Lsn>,
    /// Records sent to Kafka for this transaction.
    sent: u64,
    /// Delivery reports received (successes and failures).
    settled: u64,
    /// A record of this transaction was permanently lost.
    failed: bool,
    /// Aborted (streamed) transaction: contributes no LSN, only waits for
    /// its outstanding reports so `in_flight_events` stays truthful.
    discarded: bool,
}

impl Entry {
    fn outstanding(&self) -> u64 {
        self.sent.saturating_sub(self.settled)
    }

    /// May leave the front of the queue.
    fn removable(&self) -> bool {
        if self.discarded {
            self.outstanding() == 0
        } else {
            self.end.is_some() && !self.failed && self.outstanding() == 0
        }
    }
}

/// The ordered acknowledgement tracker. See the module documentation for the rules.
///
/// Every method is O(1) amortised: entries live in a `VecDeque` indexed by
/// `seq - front_seq`, and complete entries are popped from the front as soon
/// as everything before them is complete.
#[derive(Debug, Clone)]
pub(crate) struct Tracker {
    confirmed: Lsn,
    /// Highest end LSN of the entries popped as complete; normally equal to
    /// `confirmed`, ahead of it only while held back by an out-of-order commit.
    frontier: Lsn,
    entries: VecDeque<Entry>,
    /// Sequence number of `entries[0]`; the next `begin` gets
    /// `front_seq + entries.len()`.
    front_seq: TxnSeq,
    /// `(seq, end)` of committed entries in `commit` call order, which is WAL
    /// order, so the first live one has the smallest end LSN still
    /// registered. Entries already popped are dropped lazily from the front.
    commit_order: VecDeque<(TxnSeq, Lsn)>,
    last_commit_end: Option<Lsn>,
    in_flight: u64,
    failed: bool,
    misordered: bool,
}

impl Tracker {
    /// A tracker whose confirmed LSN starts at `start`, the slot's
    /// `confirmed_flush_lsn`.
    pub(crate) fn new(start: Lsn) -> Self {
        Tracker {
            confirmed: start,
            frontier: start,
            entries: VecDeque::new(),
            front_seq: 0,
            commit_order: VecDeque::new(),
            last_commit_end: None,
            in_flight: 0,
            failed: false,
            misordered: false,
        }
    }

    /// Forgets every registered transaction (after the replication
    /// connection was re-established and the server replays from its
    /// confirmed position) and clears the failure state. Sequence numbers
    /// keep counting, so reports for the forgotten entries are ignored; the
    /// confirmed LSN becomes the later of the current one and `start`.
    #[cfg(test)]
    pub(crate) fn reset(&mut self, start: Lsn) {
        self.front_seq = self.next_seq();
        self.entries.clear();
        self.commit_order.clear();
        self.last_commit_end = None;
        self.in_flight = 0;
        self.failed = false;
        self.misordered = false;
        self.confirmed = self.confirmed.max(start);
        self.frontier = self.confirmed;
    }

    fn next_seq(&self) -> TxnSeq {
        // usize -> u64 cannot truncate on any supported target.
        self.front_seq + self.entries.len() as u64
    }

    fn entry_mut(&mut self, seq: TxnSeq) -> Option<&mut Entry> {
        let idx = seq.checked_sub(self.front_seq)?;
        let idx = usize::try_from(idx).ok()?;
        self.entries.get_mut(idx)
    }

    /// What is registered of transaction `seq`: its commit end LSN once
    /// committed, and the records added so far. `None` once it left the
    /// tracker (complete) or when unknown or discarded. The transactional
    /// sink asks this to know whether it has seen a transaction whole.
    pub(crate) fn registered(&self, seq: TxnSeq) -> Option<(Option<Lsn>, u64)> {
        let idx = usize::try_from(seq.checked_sub(self.front_seq)?).ok()?;
        let e = self.entries.get(idx)?;
        (!e.discarded).then_some((e.end, e.sent))
    }

    /// Opens an entry at the back for a transaction that commits after every
    /// transaction registered so far. Records may be added while it is open.
    pub(crate) fn begin(&mut self, commit_time_us: i64) -> TxnSeq {
        let seq = self.next_seq();
        self.entries.push_back(Entry {
            commit_time_us,
            end: None,
            sent: 0,
            settled: 0,
            failed: false,
            discarded: false,
        });
        seq
    }

    /// Records that `n` more records of transaction `seq` were handed to
    /// Kafka. Must happen before the reports for them and before
    /// `commit(seq)` (an entry may leave the tracker as soon as it is
    /// committed and settled, after which this is ignored).
    pub(crate) fn add_events(&mut self, seq: TxnSeq, n: u32) {
        if let Some(e) = self.entry_mut(seq) {
            // Counted for a discarded entry too: its records are real
            // deliveries in flight.
            e.sent = e.sent.saturating_add(u64::from(n));
            self.in_flight = self.in_flight.saturating_add(u64::from(n));
        }
    }

    /// Closes entry `seq` with its commit end LSN. Calls must come in WAL
    /// order (each `end_lsn` at least the previous one); a second commit of
    /// the same entry, or one for an unknown or discarded entry, is ignored.
    pub(crate) fn commit(&mut self, seq: TxnSeq, end_lsn: Lsn) {
        let Some(e) = self.entry_mut(seq) else { return };
        if e.end.is_some() || e.discarded {
            return;
        }
        e.end = Some(end_lsn);
        if self.last_commit_end.is_some_and(|last| end_lsn < last) {
            // Commits out of WAL order break the reasoning behind the
            // commit-order bound; refuse to confirm anything until reset.
            self.misordered = true;
        }
        self.last_commit_end = Some(self.last_commit_end.map_or(end_lsn, |l| l.max(end_lsn)));
        self.commit_order.push_back((seq, end_lsn));
        self.advance();
    }

    /// `add_events(seq, n)` then `commit(seq, end_lsn)`: the records handed
    /// out since the last registration plus the commit, in one step.
    pub(crate) fn add_and_commit(&mut self, seq: TxnSeq, n: u32, end_lsn: Lsn) {
        self.add_events(seq, n);
        self.commit(seq, end_lsn);
    }

    /// Drops an open transaction that aborted (a streamed transaction's
    /// StreamAbort). The entry leaves once its outstanding reports have
    /// arrived; it never moves the confirmed LSN, and reports for it (before
    /// or after it left) move nothing either, failures included.
    #[cfg(test)]
    pub(crate) fn discard(&mut self, seq: TxnSeq) {
        if let Some(e) = self.entry_mut(seq) {
            e.discarded = true;
            self.advance();
        }
    }

    /// `n` successful delivery reports for transaction `seq`. Reports for
    /// unknown or already-settled entries (for example from before a reset)
    /// are ignored, as are reports beyond the number of records added.
    /// Returns the transaction's commit time (µs since the Unix epoch) when
    /// the report was for a known entry, for latency metrics.
    pub(crate) fn ack(&mut self, seq: TxnSeq, n: u32) -> Option<i64> {
        let e = self.entry_mut(seq)?;
        let accepted = u64::from(n).min(e.outstanding());
        let commit_time_us = e.commit_time_us;
        e.settled += accepted;
        self.in_flight = self.in_flight.saturating_sub(accepted);
        self.advance();
        Some(commit_time_us)
    }

    /// One permanent delivery failure for transaction `seq`: the confirmed
    /// LSN will never pass this transaction in this tracker (until
    /// [`Tracker::reset`]). Settles one record. Ignored for unknown entries;
    /// for a discarded entry it only settles the record.
    pub(crate) fn fail(&mut self, seq: TxnSeq) {
        let Some(e) = self.entry_mut(seq) else { return };
        let accepted = e.outstanding().min(1);
        e.settled += accepted;
        let discarded = e.discarded;
        if !discarded {
            e.failed = true;
        }
        self.in_flight = self.in_flight.saturating_sub(accepted);
        if discarded {
            self.advance();
        } else {
            self.failed = true;
        }
    }

    /// A streamed transaction that aborted at `abort_lsn` (the end of its
    /// abort record). It carried no events, so like a committed transaction
    /// without records it is complete at once: the confirmed LSN reaches
    /// `abort_lsn` as soon as everything registered before it is complete
    /// (rule 2), and the aborted transaction's WAL is released without
    /// waiting for a keepalive that finds nothing registered. Every commit
    /// before the abort in the WAL was registered before it, and every one
    /// after it comes later, so this keeps commit order; an `abort_lsn` not
    /// past the last commit or the confirmed LSN is ignored rather than
    /// misordering the queue, and so is an abort while a registered
    /// transaction is still open (aborts come between transactions, never
    /// inside one).
    pub(crate) fn aborted(&mut self, abort_lsn: Lsn, abort_time_us: i64) {
        let behind = abort_lsn <= self.confirmed.max(self.frontier)
            || self.last_commit_end.is_some_and(|last| abort_lsn <= last);
        // Rare (one per aborted large transaction): a scan is fine.
        let inside = self.entries.iter().any(|e| e.end.is_none() && !e.discarded);
        if behind || inside || self.misordered {
            return;
        }
        let seq = self.begin(abort_time_us);
        self.commit(seq, abort_lsn);
    }

    /// A primary keepalive (or any other proof that the server has sent
    /// everything up to `wal_end`): when no transaction is registered at
    /// all, the confirmed LSN may advance to `wal_end`, so an idle outbox
    /// does not pin WAL. The caller must register a transaction at its
    /// Begin, or a keepalive in the middle of it would confirm past it.
    pub(crate) fn keepalive(&mut self, wal_end: Lsn) {
        if self.entries.is_empty() && !self.misordered {
            self.commit_order.clear();
            self.frontier = self.frontier.max(wal_end);
            self.confirmed = self.confirmed.max(self.frontier);
        }
    }

    /// Pops the complete prefix and moves the confirmed LSN as far as the
    /// rules allow.
    fn advance(&mut self) {
        while let Some(front) = self.entries.front() {
            if !front.removable() {
                break;
            }
            if !front.discarded {
                if let Some(end) = front.end {
                    self.frontier = self.frontier.max(end);
                }
            }
            self.entries.pop_front();
            self.front_seq += 1;
        }
        while self
            .commit_order
            .front()
            .is_some_and(|&(seq, _)| seq < self.front_seq)
        {
            self.commit_order.pop_front();
        }
        if self.misordered {
            return;
        }
        // A transaction still registered that committed earlier in the WAL
        // than the prefix's end would be skipped on restart if we confirmed
        // past its end LSN: hold until it leaves too.
        let bounded = self
            .commit_order
            .front()
            .is_some_and(|&(_, end)| self.frontier >= end);
        if !bounded {
            self.confirmed = self.confirmed.max(self.frontier);
        }
    }

    /// The LSN that may be reported as flushed and applied. Never moves backwards.
    pub(crate) fn confirmed(&self) -> Lsn {
        self.confirmed
    }

    /// Records handed to Kafka that have no delivery report yet.
    pub(crate) fn in_flight_events(&self) -> u64 {
        self.in_flight
    }

    /// Registered transactions not yet behind the confirmed LSN (open,
    /// waiting for reports, or complete but waiting behind an earlier one).
    #[cfg(test)]
    pub(crate) fn open_transactions(&self) -> usize {
        self.entries.len()
    }

    /// Commit time (Unix µs, as given to `begin`) of the oldest registered
    /// transaction: the one holding the confirmed LSN back.
    pub(crate) fn oldest_pending_commit_time_us(&self) -> Option<i64> {
        self.entries.front().map(|e| e.commit_time_us)
    }

    /// A permanent delivery failure was reported since creation or the last reset.
    pub(crate) fn failed(&self) -> bool {
        self.failed
    }

    /// The caller committed transactions out of WAL order; the confirmed
    /// LSN is frozen until [`Tracker::reset`]. Always a bug in the caller.
    #[cfg(test)]
    pub(crate) fn misordered(&self) -> bool {
        self.misordered
    }

    /// All counters at once.
    #[cfg(test)]
    pub(crate) fn stats(&self) -> TrackerStats {
        TrackerStats {
            confirmed: self.confirmed,
            in_flight_events: self.in_flight,
            open_transactions: self.entries.len(),
            oldest_pending_commit_time_us: self.oldest_pending_commit_time_us(),
            failed: self.failed,
            misordered: self.misordered,
        }
    }
}

/// A consistent snapshot of a tracker's counters, for status updates and metrics.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TrackerStats {
    /// See [`Tracker::confirmed`].
    pub(crate) confirmed: Lsn,
    /// See [`Tracker::in_flight_events`].
    pub(crate) in_flight_events: u64,
    /// See [`Tracker::open_transactions`].
    pub(crate) open_transactions: usize,
    /// See [`Tracker::oldest_pending_commit_time_us`].
    pub(crate) oldest_pending_commit_time_us: Option<i64>,
    /// See [`Tracker::failed`].
    pub(crate) failed: bool,
    /// See [`Tracker::misordered`].
    pub(crate) misordered: bool,
}

/// A [`Tracker`] shared between the replication task (registers) and the
/// Kafka delivery-report thread (acks). Cheap to clone; every method holds
/// the lock only for the O(1) tracker call.
#[derive(Debug, Clone)]
pub struct SharedTracker {
    inner: Arc<Mutex<Tracker>>,
    /// Woken whenever the confirmed position moves, for a source that
    /// waits on its batch (the polling source); waking never blocks.
    advanced: Arc<tokio::sync::Notify>,
    /// How many [`SharedTracker::wait_confirmed`] calls are waiting: with
    /// none (the WAL source never waits) an acknowledgement does not touch
    /// `advanced`, whose wake-up takes a lock of its own.
    waiting: Arc<AtomicUsize>,
    /// When an acknowledgement first moved the confirmed position since
    /// [`SharedTracker::take_completed_since`] last took it, Unix µs; 0
    /// for none. Only for the latency metrics.
    completed_since: Arc<AtomicI64>,
}

/// Counts one waiter for as long as it lives (also when its future is
/// dropped).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl SharedTracker {
    /// Wraps a new tracker starting at `start` (see [`Tracker::new`]).
    pub fn new(start: Lsn) -> Self {
        SharedTracker {
            inner: Arc::new(Mutex::new(Tracker::new(start))),
            advanced: Arc::new(tokio::sync::Notify::new()),
            waiting: Arc::new(AtomicUsize::new(0)),
            completed_since: Arc::new(AtomicI64::new(0)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Tracker> {
        // No tracker method panics, so a poisoned lock can only come from a
        // closure passed to `with`; the tracker's own state is still whole.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// See [`Tracker::begin`].
    pub fn begin(&self, commit_time_us: i64) -> TxnSeq {
        self.lock().begin(commit_time_us)
    }

    /// See [`Tracker::add_events`].
    pub fn add_events(&self, seq: TxnSeq, n: u32) {
        self.lock().add_events(seq, n);
    }

    /// See [`Tracker::commit`].
    pub fn commit(&self, seq: TxnSeq, end_lsn: Lsn) {
        self.lock().commit(seq, end_lsn);
    }

    /// See [`Tracker::add_and_commit`]; one lock for both steps.
    pub fn add_and_commit(&self, seq: TxnSeq, n: u32, end_lsn: Lsn) {
        self.lock().add_and_commit(seq, n, end_lsn);
    }

    /// See [`Tracker::ack`]. Wakes [`SharedTracker::wait_confirmed`] when
    /// the confirmed position moved.
    pub fn ack(&self, seq: TxnSeq, n: u32) -> Option<i64> {
        let (result, moved) = {
            let mut t = self.lock();
            let before = t.confirmed();
            let result = t.ack(seq, n);
            (result, t.confirmed() != before)
        };
        // A waiter counts itself before it reads the position under the
        // lock, so one that read the old position is counted here.
        if moved {
            if self.completed_since.load(Ordering::Relaxed) == 0 {
                let _ = self.completed_since.compare_exchange(
                    0,
                    crate::clock::unix_now_micros(),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
            if self.waiting.load(Ordering::SeqCst) > 0 {
                self.advanced.notify_waiters();
            }
        }
        result
    }

    /// When an acknowledgement first moved the confirmed position since the
    /// last call (Unix µs), if one did: how long a fully acknowledged
    /// transaction waited for the status update that confirms it.
    pub fn take_completed_since(&self) -> Option<i64> {
        match self.completed_since.swap(0, Ordering::Relaxed) {
            0 => None,
            at => Some(at),
        }
    }

    /// See [`Tracker::fail`]. Wakes the waiters too: a failure is news
    /// for them (see [`SharedTracker::wait_confirmed`]).
    pub fn fail(&self, seq: TxnSeq) {
        self.lock().fail(seq);
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.advanced.notify_waiters();
        }
    }

    /// Waits until the confirmed position reaches `at_least` (returns
    /// `true`) or the tracker holds a permanent failure (returns `false`).
    /// Cancel-safe; callers bound it with their own timeout.
    pub async fn wait_confirmed(&self, at_least: Lsn) -> bool {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let _counted = Waiting(&self.waiting);
        loop {
            let notified = self.advanced.notified();
            tokio::pin!(notified);
            // Registered before the check, so no wake-up is lost between.
            notified.as_mut().enable();
            {
                let t = self.lock();
                if t.confirmed() >= at_least {
                    return true;
                }
                if t.failed() {
                    return false;
                }
            }
            notified.await;
        }
    }

    /// See [`Tracker::aborted`].
    pub(crate) fn aborted(&self, abort_lsn: Lsn, abort_time_us: i64) {
        self.lock().aborted(abort_lsn, abort_time_us);
    }

    /// See [`Tracker::keepalive`].
    pub fn keepalive(&self, wal_end: Lsn) {
        self.lock().keepalive(wal_end);
    }

    /// See [`Tracker::confirmed`].
    pub fn confirmed(&self) -> Lsn {
        self.lock().confirmed()
    }

    /// See [`Tracker::registered`].
    pub fn registered(&self, seq: TxnSeq) -> Option<(Option<Lsn>, u64)> {
        self.lock().registered(seq)
    }

    /// See [`Tracker::in_flight_events`].
    pub fn in_flight_events(&self) -> u64 {
        self.lock().in_flight_events()
    }

    /// See [`Tracker::open_transactions`].
    #[cfg(test)]
    pub(crate) fn open_transactions(&self) -> usize {
        self.lock().open_transactions()
    }

    /// See [`Tracker::oldest_pending_commit_time_us`].
    pub(crate) fn oldest_pending_commit_time_us(&self) -> Option<i64> {
        self.lock().oldest_pending_commit_time_us()
    }

    /// Seconds from the oldest unconfirmed event's commit to `now_us`
    /// (microseconds since the Unix epoch); 0 when nothing is pending.
    pub fn pending_age_seconds(&self, now_us: i64) -> f64 {
        self.oldest_pending_commit_time_us()
            .map_or(0.0, |oldest| (now_us - oldest).max(0) as f64 / 1e6)
    }

    /// See [`Tracker::stats`].
    #[cfg(test)]
    pub(crate) fn stats(&self) -> TrackerStats {
        self.lock().stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn lsn(n: u64) -> Lsn {
        Lsn(n)
    }

    #[tokio::test]
    async fn wait_confirmed_wakes_on_the_acknowledgement_or_a_failure() {
        let t = SharedTracker::new(lsn(0));
        let a = t.begin(0);
        t.add_and_commit(a, 2, lsn(1));
        let b = t.begin(0);
        t.add_and_commit(b, 1, lsn(2));
        let waiter = tokio::spawn({
            let t = t.clone();
            async move { t.wait_confirmed(lsn(2)).await }
        });
        tokio::task::yield_now().await;
        // b alone is not enough: a is still in flight before it.
        t.ack(b, 1);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        t.ack(a, 1);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        t.ack(a, 1);
        assert!(waiter.await.unwrap(), "confirmed past 2");
        // Already there: returns at once.
        assert!(t.wait_confirmed(lsn(1)).await);
        let c = t.begin(0);
        t.add_and_commit(c, 1, lsn(3));
        let waiter = tokio::spawn({
            let t = t.clone();
            async move { t.wait_confirmed(lsn(3)).await }
        });
        tokio::task::yield_now().await;
        t.fail(c);
        assert!(!waiter.await.unwrap(), "a failure ends the wait");
    }

    #[test]
    fn starts_at_slot_position() {
        let t = Tracker::new(lsn(100));
        assert_eq!(t.confirmed(), lsn(100));
        assert_eq!(t.open_transactions(), 0);
        assert_eq!(t.in_flight_events(), 0);
        assert_eq!(t.oldest_pending_commit_time_us(), None);
    }

    #[test]
    fn confirms_after_all_acks() {
        let mut t = Tracker::new(lsn(100));
        let a = t.begin(1);
        t.add_events(a, 2);
        t.commit(a, lsn(200));
        assert_eq!(t.confirmed(), lsn(100));
        assert_eq!(t.in_flight_events(), 2);
        t.ack(a, 1);
        assert_eq!(t.confirmed(), lsn(100));
        t.ack(a, 1);
        assert_eq!(t.confirmed(), lsn(200));
        assert_eq!(t.in_flight_events(), 0);
        assert_eq!(t.open_transactions(), 0);
    }

    #[test]
    fn acks_before_commit_wait_for_commit() {
        let mut t = Tracker::new(lsn(0));
        let a = t.begin(1);
        t.add_events(a, 1);
        t.ack(a, 1);
        assert_eq!(t.confirmed(), lsn(0));
        t.commit(a, lsn(50));
        assert_eq!(t.confirmed(), lsn(50));
    }

    #[test]
    fn abort_releases_its_wal_once_earlier_transactions_complete() {
        let mut t = Tracker::new(lsn(0));
        let a = t.begin(10);
        t.add_and_commit(a, 1, lsn(100));
        // Aborted while `a` still waits for its report: held behind it.
        t.aborted(lsn(300), 20);
        assert_eq!(t.confirmed(), lsn(0));
        t.ack(a, 1);
        assert_eq!(t.confirmed(), lsn(300));
        assert_eq!(t.open_transactions(), 0);
        // Nothing registered: at once.
        t.aborted(lsn(400), 30);
        assert_eq!(t.confirmed(), lsn(400));
    }

    #[test]
    fn abort_never_moves_back_or_misorders() {
        let mut t = Tracker::new(lsn(500));
        t.aborted(lsn(400), 1);
        t.aborted(lsn(500), 1);
        assert_eq!(t.confirmed(), lsn(500));
        assert_eq!(t.open_transactions(), 0);
        let a = t.begin(1);
        t.add_and_commit(a, 1, lsn(700));
        // Not past the last commit: ignored, so a later commit is still in order.
        t.aborted(lsn(600), 1);
        assert_eq!(t.open_transactions(), 1);
        let b = t.begin(2);
        t.add_and_commit(b, 0, lsn(800));
        t.ack(a, 1);
        assert_eq!(t.confirmed(), lsn(800));
    }

    #[test]
    fn empty_transaction_waits_behind_incomplete_one() {
        let mut t = Tracker::new(lsn(0));
        let a = t.begin(10);
        t.add_events(a, 1);
        t.commit(a, lsn(100));
        let b = t.begin(20);
        t.commit(b, lsn(200));
        assert_eq!(t.confirmed(), lsn(0));
        assert_eq!(t.open_transactions(), 2);
        assert_eq!(t.oldest_pending_commit_time_us(), Some(10));
        t.ack(a, 1);
        assert_eq!(t.confirmed(), lsn(200));
        assert_eq!(t.open_transactions(), 0);
    }

    #[test]
    fn empty_transaction_alone_confirms_on_commit() {
        let mut t = Tracker::new(lsn(0));
        let a = t.begin(1);
        t.commit(a, lsn(70));
        assert_eq!(t.confirmed(), lsn(70));
    }

    #[test]
    fn later_complete_does_not_pass_earlier_incomplete() {
        let mut t = Tracker::new(lsn(0));
        let a = t.begin(1);
        t.add_events(a, 1);
        t.commit(a, lsn(100));
        let b = t.begin(2);
        t.add_events(b, 1);
        t.commit(b, lsn(200));
        t.ack(b, 1);
        assert_eq!(t.confirmed(), lsn(0));
        t.ack(a, 1);
        assert_eq!(t.confirmed(), lsn(200));
    }

    #[test]
    fn failure_pins_the_lsn() {
        let mut t = Tracker::new(lsn(0));
        let a = t.begin(1);
        t.add_events(a, 2);
        t.commit(a, lsn(100));
        t.fail(a);
        t.ack(a, 1);
        assert!(t.failed());
        assert_eq!(t.in_flight_events(), 0);
        let b = t.begin(2);
        t.commit(b, lsn(200));
        t.keepalive(lsn(300));
        assert_eq!(t.confirmed(), lsn(0));
        t.reset(lsn(0));
        assert!(!t.failed());
        t.keepalive(lsn(300));
        assert_eq!(t.confirmed(), lsn(300));
    }

    #[test]
    fn keepalive_only_when_nothing_registered() {
        let mut t = Tracker::new(lsn(10));
        t.keepalive(lsn(20));
        assert_eq!(t.confirmed(), lsn(20));
        let a = t.begin(1);
        t.keepalive(lsn(30));
        assert_eq!(t.confirmed(), lsn(20));
        t.commit(a, lsn(40));
        assert_eq!(t.confirmed(), lsn(40));
        // never backwards
        t.keepalive(lsn(35));
        assert_eq!(t.confirmed(), lsn(40));
    }

    #[test]
    fn discarded_entry_waits_for_its_reports_then_moves_nothing() {
        let mut t = Tracker::new(lsn(0));
        let a = t.begin(1);
        t.add_events(a, 2);
        let b = t.begin(2);
        t.commit(b, lsn(100));
        t.discard(a);
        assert_eq!(t.confirmed(), lsn(0));
        assert_eq!(t.in_flight_events(), 2);
        t.ack(a, 1);
        t.fail(a);
        assert!(!t.failed());
        assert_eq!(t.confirmed(), lsn(100));
        assert_eq!(t.open_transactions(), 0);
        // late reports for the discarded entry are ignored
        t.ack(a, 5);
        t.fail(a);
        assert!(!t.failed());
        assert_eq!(t.in_flight_events(), 0);
    }

    #[test]
    fn unknown_sequences_are_ignored() {
        let mut t = Tracker::new(lsn(0));
        t.ack(7, 1);
        t.fail(7);
        t.commit(7, lsn(9));
        t.add_events(7, 1);
        t.discard(7);
        assert_eq!(t.confirmed(), lsn(0));
        assert!(!t.failed());
        let a = t.begin(1);
        t.add_events(a, 1);
        t.reset(lsn(5));
        assert_eq!(t.confirmed(), lsn(5));
        // reports from before the reset hit nothing
        let b = t.begin(2);
        assert_ne!(a, b);
        t.add_events(b, 1);
        t.ack(a, 1);
        t.commit(b, lsn(50));
        assert_eq!(t.confirmed(), lsn(5));
        assert_eq!(t.in_flight_events(), 1);
        t.ack(b, 1);
        assert_eq!(t.confirmed(), lsn(50));
    }

    #[test]
    fn excess_acks_do_not_complete_early() {
        let mut t = Tracker::new(lsn(0));
        let a = t.begin(1);
        t.add_events(a, 1);
        t.ack(a, 3);
        t.add_events(a, 1);
        t.commit(a, lsn(100));
        assert_eq!(t.confirmed(), lsn(0));
        t.ack(a, 1);
        assert_eq!(t.confirmed(), lsn(100));
    }

    #[test]
    fn out_of_begin_order_commit_does_not_skip_earlier_commit() {
        // a registered first (streamed) but commits after b.
        let mut t = Tracker::new(lsn(0));
        let a = t.begin(1);
        t.add_events(a, 1);
        let b = t.begin(2);
        t.add_events(b, 1);
        t.commit(b, lsn(100));
        t.ack(a, 1);
        t.commit(a, lsn(200));
        // a is complete and first, but b (end 100) is still undelivered
        assert_eq!(t.confirmed(), lsn(0));
        t.ack(b, 1);
        assert_eq!(t.confirmed(), lsn(200));
    }

    #[test]
    fn commits_out_of_wal_order_freeze() {
        let mut t = Tracker::new(lsn(0));
        let a = t.begin(1);
        t.commit(a, lsn(200));
        let b = t.begin(2);
        t.commit(b, lsn(100));
        assert!(t.misordered());
        let c = t.begin(3);
        t.commit(c, lsn(300));
        assert_eq!(t.confirmed(), lsn(200));
        t.reset(lsn(0));
        assert!(!t.misordered());
    }

    #[test]
    fn shared_tracker_across_threads() {
        let shared = SharedTracker::new(lsn(0));
        let seqs: Vec<_> = (0..100)
            .map(|i| {
                let s = shared.begin(i);
                shared.add_events(s, 3);
                shared.commit(s, lsn(10 * (i as u64 + 1)));
                s
            })
            .collect();
        let acker = shared.clone();
        std::thread::spawn(move || {
            for s in seqs.into_iter().rev() {
                acker.ack(s, 3);
            }
        })
        .join()
        .expect("acker thread does not panic");
        let stats = shared.stats();
        assert_eq!(stats.confirmed, lsn(1000));
        assert_eq!(stats.in_flight_events, 0);
        assert_eq!(stats.open_transactions, 0);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Begin,
        Add(usize, u32),
        Commit(usize),
        Ack(usize, u32),
        Fail(usize),
        Discard(usize),
        Keepalive(u64),
        Aborted(u64),
        BogusAck(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => Just(Op::Begin),
            4 => (any::<usize>(), 0u32..4).prop_map(|(i, n)| Op::Add(i, n)),
            3 => any::<usize>().prop_map(Op::Commit),
            6 => (any::<usize>(), 1u32..4).prop_map(|(i, n)| Op::Ack(i, n)),
            1 => any::<usize>().prop_map(Op::Fail),
            1 => any::<usize>().prop_map(Op::Discard),
            1 => (1u64..50).prop_map(Op::Keepalive),
            1 => (0u64..20).prop_map(Op::Aborted),
            1 => any::<u64>().prop_map(Op::BogusAck),
        ]
    }

    /// The test's view of one transaction.
    #[derive(Debug, Clone)]
    struct Txn {
        seq: TxnSeq,
        end: Option<Lsn>,
        sent: u64,
        acked: u64,
        settled: u64,
        failed: bool,
        discarded: bool,
    }

    impl Txn {
        fn delivered(&self) -> bool {
            !self.failed && self.acked == self.sent
        }
    }

    /// Drives a tracker with `ops`. With `in_order`, commits only go to the
    /// oldest open transaction (registration order = commit order, the
    /// normal contract) and the confirmed LSN must equal the exact prefix
    /// rule; otherwise any open transaction may commit next (a streamed
    /// transaction registered early) and only safety and liveness are checked.
    fn run(ops: Vec<Op>, in_order: bool) -> Result<(), TestCaseError> {
        let start = 1000u64;
        let mut t = Tracker::new(lsn(start));
        let mut wal = start; // last LSN the server has shown
        let mut txns: Vec<Txn> = Vec::new();
        let mut model_confirmed = lsn(start);
        let mut model_front = 0usize; // first txn not yet behind the prefix
        let mut prev = t.confirmed();

        let check =
            |t: &Tracker, txns: &[Txn], wal: u64, prev: &mut Lsn| -> Result<(), TestCaseError> {
                let c = t.confirmed();
                prop_assert!(c >= *prev, "confirmed moved backwards: {c} < {prev}");
                *prev = c;
                prop_assert!(
                    c.0 <= wal,
                    "confirmed {c} beyond anything the server sent ({wal})"
                );
                for x in txns.iter().filter(|x| !x.discarded) {
                    if let Some(end) = x.end {
                        if !x.delivered() {
                            prop_assert!(c < end, "confirmed {c} passes undelivered txn {x:?}");
                        }
                    }
                    // An open transaction commits later, beyond `wal`, which `c` never passes.
                }
                let in_flight: u64 = txns.iter().map(|x| x.sent - x.settled).sum();
                prop_assert_eq!(t.in_flight_events(), in_flight);
                Ok(())
            };

        for op in ops {
            match op {
                Op::Begin => {
                    let seq = t.begin(txns.len() as i64);
                    txns.push(Txn {
                        seq,
                        end: None,
                        sent: 0,
                        acked: 0,
                        settled: 0,
                        failed: false,
                        discarded: false,
                    });
                }
                Op::Add(i, n) => {
                    let open: Vec<usize> = (0..txns.len())
                        .filter(|&k| txns[k].end.is_none() && !txns[k].discarded)
                        .collect();
                    if let Some(&k) = open.get(i % open.len().max(1)) {
                        t.add_events(txns[k].seq, n);
                        txns[k].sent += u64::from(n);
                    }
                }
                Op::Commit(i) => {
                    let open: Vec<usize> = (0..txns.len())
                        .filter(|&k| txns[k].end.is_none() && !txns[k].discarded)
                        .collect();
                    let pick = if in_order {
                        open.first()
                    } else {
                        open.get(i % open.len().max(1))
                    };
                    if let Some(&k) = pick {
                        wal += 1 + (i % 7) as u64;
                        t.commit(txns[k].seq, lsn(wal));
                        txns[k].end = Some(lsn(wal));
                    }
                }
                Op::Ack(i, n) => {
                    let pending: Vec<usize> = (0..txns.len())
                        .filter(|&k| txns[k].settled < txns[k].sent)
                        .collect();
                    if let Some(&k) = pending.get(i % pending.len().max(1)) {
                        let n = u64::from(n).min(txns[k].sent - txns[k].settled);
                        t.ack(txns[k].seq, n as u32);
                        txns[k].settled += n;
                        txns[k].acked += n;
                    }
                }
                Op::Fail(i) => {
                    let pending: Vec<usize> = (0..txns.len())
                        .filter(|&k| txns[k].settled < txns[k].sent)
                        .collect();
                    if let Some(&k) = pending.get(i % pending.len().max(1)) {
                        t.fail(txns[k].seq);
                        txns[k].settled += 1;
                        if !txns[k].discarded {
                            txns[k].failed = true;
                        }
                    }
                }
                Op::Discard(i) => {
                    let open: Vec<usize> = (0..txns.len())
                        .filter(|&k| txns[k].end.is_none() && !txns[k].discarded)
                        .collect();
                    if let Some(&k) = open.get(i % open.len().max(1)) {
                        t.discard(txns[k].seq);
                        txns[k].discarded = true;
                    }
                }
                Op::Keepalive(d) => {
                    wal += d;
                    t.keepalive(lsn(wal));
                    if in_order && model_front == txns.len() {
                        model_confirmed = model_confirmed.max(lsn(wal));
                    }
                }
                Op::Aborted(d) => {
                    // An aborted streamed transaction: an entry without
                    // records, committed at once at its abort LSN, unless
                    // that is not past what is registered or confirmed.
                    wal += d;
                    let at = lsn(wal);
                    let registers = !t.misordered
                        && at > t.confirmed.max(t.frontier)
                        && t.last_commit_end.is_none_or(|last| at > last)
                        && t.entries.iter().all(|e| e.end.is_some() || e.discarded);
                    let seq = t.next_seq();
                    t.aborted(at, 0);
                    if registers {
                        txns.push(Txn {
                            seq,
                            end: Some(at),
                            sent: 0,
                            acked: 0,
                            settled: 0,
                            failed: false,
                            discarded: false,
                        });
                    }
                }
                Op::BogusAck(s) => {
                    // A sequence number never handed out.
                    t.ack(s | (1 << 63), 1);
                    t.fail(s | (1 << 63));
                }
            }
            if in_order {
                while let Some(x) = txns.get(model_front) {
                    let done = if x.discarded {
                        x.settled == x.sent
                    } else {
                        x.end.is_some() && x.delivered()
                    };
                    if !done {
                        break;
                    }
                    if let (false, Some(end)) = (x.discarded, x.end) {
                        model_confirmed = model_confirmed.max(end);
                    }
                    model_front += 1;
                }
                prop_assert_eq!(t.confirmed(), model_confirmed);
                prop_assert_eq!(t.open_transactions(), txns.len() - model_front);
            }
            check(&t, &txns, wal, &mut prev)?;
        }

        // Liveness: commit everything still open, deliver everything outstanding.
        for x in &mut txns {
            if x.end.is_none() && !x.discarded {
                wal += 1;
                t.commit(x.seq, lsn(wal));
                x.end = Some(lsn(wal));
            }
        }
        for x in &mut txns {
            let n = x.sent - x.settled;
            t.ack(x.seq, n as u32);
            x.settled += n;
            x.acked += n;
        }
        check(&t, &txns, wal, &mut prev)?;
        prop_assert_eq!(t.in_flight_events(), 0);
        let any_failed = txns.iter().any(|x| x.failed);
        prop_assert_eq!(t.failed(), any_failed);
        if !any_failed {
            let last_end = txns
                .iter()
                .filter(|x| !x.discarded)
                .filter_map(|x| x.end)
                .max();
            if let Some(end) = last_end {
                prop_assert!(
                    t.confirmed() >= end,
                    "confirmed {} never reached last commit {end}",
                    t.confirmed()
                );
            }
            prop_assert_eq!(t.open_transactions(), 0);
            t.keepalive(lsn(wal + 1));
            prop_assert_eq!(t.confirmed(), lsn(wal + 1));
        } else {
            let first_failed = txns.iter().filter(|x| x.failed).filter_map(|x| x.end).min();
            if let Some(end) = first_failed {
                prop_assert!(t.confirmed() < end);
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn prop_in_commit_order(ops in prop::collection::vec(op(), 0..120)) {
            run(ops, true)?;
        }

        #[test]
        fn prop_any_commit_order(ops in prop::collection::vec(op(), 0..120)) {
            run(ops, false)?;
        }
    }
}
