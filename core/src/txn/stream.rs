//! Streamed transactions (pgoutput protocol 2 and 4): each in-progress
//! transaction's changes go to its own spill file as they arrive; a Stream
//! Abort drops the file or cuts a subtransaction off it, a Stream Commit
//! registers the transaction with the tracker and turns the file into a
//! reader that [`Assembler::replay`] drains in batches. Nothing here holds
//! a whole transaction in memory, and nothing routes or produces.

use std::sync::Arc;

use tracing::{debug, warn};
use walrelay_proto::pgoutput::{LogicalMessage, StreamAbort, StreamCommit, StreamStart, TupleData};
use walrelay_proto::{pg_micros_to_unix_micros, Lsn};

use super::spill::{ChangeKind, SpillError, SpillFile, SpillReader};
use super::{Assembler, EventBody, MessageEvent, OutboxEvent, TxnError};
use crate::checkpoint::{SharedTracker, TxnSeq};
use crate::router::{BoundRelation, EventMeta};

/// A streamed transaction between its first Stream Start and its Stream
/// Commit or Stream Abort.
#[derive(Debug)]
pub(super) struct StreamedTxn {
    pub(super) spill: SpillFile,
    /// Outbox bindings the spilled records refer to by index: a row is
    /// routed with the binding current when it was received.
    pub(super) bindings: Vec<Arc<BoundRelation>>,
}

/// A committed streamed transaction being read back from its spill file.
#[derive(Debug)]
pub(super) struct Replay {
    pub(super) seq: TxnSeq,
    pub(super) xid: u32,
    pub(super) commit_lsn: Lsn,
    pub(super) end_lsn: Lsn,
    pub(super) commit_time_us: i64,
    /// Debezium's `lastCommitLsn` when the transaction's commit arrived.
    pub(super) last_commit_lsn: Option<Lsn>,
    pub(super) reader: SpillReader,
    pub(super) bindings: Vec<Arc<BoundRelation>>,
    /// Events handed out but not yet registered with the tracker.
    pub(super) unregistered: u32,
    pub(super) events: u64,
}

/// Where a change inside a stream block belongs: its streamed
/// transaction `top`, its position, and the (sub)transaction that made it
/// (`top` when the change names none).
#[derive(Debug, Clone, Copy)]
struct At {
    top: u32,
    lsn: Lsn,
    subxid: u32,
}

impl StreamedTxn {
    /// Appends one change to the spill file, returning the bytes written;
    /// a row of an outbox table records the binding it arrived under
    /// (`bound`), so it is routed with that binding at commit.
    #[inline]
    fn append(
        &mut self,
        at: At,
        kind: ChangeKind,
        bound: Option<&Arc<BoundRelation>>,
        row: &TupleData,
    ) -> Result<u64, TxnError> {
        let binding = bound.map_or(0, |b| binding_index(&mut self.bindings, b));
        self.spill
            .append(kind, at.lsn, at.subxid, binding, row)
            .map_err(|source| TxnError::Spill {
                xid: at.top,
                lsn: at.lsn,
                source,
            })
    }
}

impl Replay {
    /// Where a change of this transaction at `lsn` comes from.
    pub(super) fn meta(&self, lsn: Lsn) -> EventMeta {
        EventMeta {
            lsn,
            commit_lsn: self.commit_lsn,
            xid: self.xid,
            commit_time_us: self.commit_time_us,
            received_us: 0,
            last_commit_lsn: self.last_commit_lsn,
        }
    }
}

impl Assembler {
    /// STREAM START: the first segment opens the transaction's spill file
    /// (a second first segment starts it afresh); later segments must
    /// continue one this session saw start.
    pub(super) fn stream_start(&mut self, s: &StreamStart, lsn: Lsn) -> Result<(), TxnError> {
        if self.current.is_some() {
            return Err(TxnError::Protocol {
                what: "STREAM START inside BEGIN .. COMMIT",
                lsn,
            });
        }
        if s.first_segment {
            let spill = SpillFile::new(s.xid, self.spill_dir.as_deref()).map_err(|source| {
                TxnError::Spill {
                    xid: s.xid,
                    lsn,
                    source,
                }
            })?;
            let fresh = StreamedTxn {
                spill,
                bindings: Vec::new(),
            };
            if self.streams.insert(s.xid, fresh).is_some() {
                warn!(xid = s.xid, %lsn, "streamed transaction started again; its earlier changes are dropped");
            }
            debug!(xid = s.xid, %lsn, open = self.streams.len(), "streamed transaction started");
        } else if !self.streams.contains_key(&s.xid) {
            return Err(TxnError::UnknownStream {
                what: "STREAM START",
                xid: s.xid,
                lsn,
            });
        }
        self.stream_xid = Some(s.xid);
        Ok(())
    }

    /// STREAM COMMIT: the transaction is registered with the tracker now,
    /// in commit order, and its spill file becomes the reader that
    /// [`Assembler::replay`] drains.
    pub(super) fn stream_commit(
        &mut self,
        c: &StreamCommit,
        lsn: Lsn,
        tracker: &SharedTracker,
    ) -> Result<(), TxnError> {
        if self.current.is_some() {
            return Err(TxnError::Protocol {
                what: "STREAM COMMIT inside BEGIN .. COMMIT",
                lsn,
            });
        }
        let streamed = self.streams.remove(&c.xid).ok_or(TxnError::UnknownStream {
            what: "STREAM COMMIT",
            xid: c.xid,
            lsn,
        })?;
        let commit_time_us = pg_micros_to_unix_micros(c.commit_time);
        let records = streamed.spill.records();
        let bytes = streamed.spill.len();
        let reader = streamed
            .spill
            .into_reader()
            .map_err(|source| TxnError::Spill {
                xid: c.xid,
                lsn,
                source,
            })?;
        // Registered now, at its commit, so the tracker sees
        // transactions in commit order.
        let seq = tracker.begin(commit_time_us);
        debug!(xid = c.xid, commit_lsn = %c.commit_lsn, records, bytes, "streamed transaction committed; reading back its spill file");
        self.replay = Some(Replay {
            seq,
            xid: c.xid,
            commit_lsn: c.commit_lsn,
            end_lsn: c.end_lsn,
            commit_time_us,
            last_commit_lsn: self.last_commit_lsn,
            reader,
            bindings: streamed.bindings,
            unregistered: 0,
            events: 0,
        });
        Ok(())
    }

    /// Reads the committed streamed transaction back from its spill file,
    /// appending events to `out` until it holds `max` or the file ends. At
    /// the end the transaction is committed in the tracker with its commit
    /// end LSN and [`Assembler::replaying`] turns false. Only one record is
    /// in memory at a time besides `out`.
    pub fn replay(
        &mut self,
        tracker: &SharedTracker,
        out: &mut Vec<OutboxEvent>,
        max: usize,
    ) -> Result<(), TxnError> {
        while out.len() < max {
            let Some(r) = self.replay.as_mut() else {
                return Ok(());
            };
            let (xid, commit_lsn) = (r.xid, r.commit_lsn);
            let spill_err = |source| TxnError::Spill {
                xid,
                lsn: commit_lsn,
                source,
            };
            let Some(change) = r.reader.next_change().map_err(spill_err)? else {
                let r = self.replay.take().expect("replay is Some: checked above");
                tracker.add_and_commit(r.seq, r.unregistered, r.end_lsn);
                self.stats.transactions += 1;
                self.stats.streamed_transactions += 1;
                if r.events > 0 {
                    self.stats.relayed_transactions += 1;
                }
                debug!(xid, events = r.events, end_lsn = %r.end_lsn, "streamed transaction read back");
                return Ok(());
            };
            match change.kind {
                ChangeKind::Insert => {
                    let bound = r.bindings.get(change.binding as usize).ok_or_else(|| {
                        spill_err(SpillError::Corrupt {
                            offset: 0,
                            reason: "record names a relation binding that was never recorded",
                        })
                    })?;
                    out.push(OutboxEvent::row(
                        r.seq,
                        r.meta(change.lsn),
                        Arc::clone(bound),
                        change.row,
                    ));
                    r.unregistered += 1;
                    r.events += 1;
                    self.stats.events += 1;
                }
                ChangeKind::Message => {
                    let Some(body) = MessageEvent::from_spilled(&change.row) else {
                        return Err(spill_err(SpillError::Corrupt {
                            offset: 0,
                            reason: "message record without prefix and content",
                        }));
                    };
                    out.push(OutboxEvent {
                        seq: r.seq,
                        meta: r.meta(change.lsn),
                        body: EventBody::Message(body),
                    });
                    r.unregistered += 1;
                    r.events += 1;
                    self.stats.events += 1;
                    self.stats.messages += 1;
                }
                ChangeKind::Update => {
                    let table = r
                        .bindings
                        .get(change.binding as usize)
                        .map_or_else(|| "an outbox table".to_owned(), |b| b.table_name());
                    self.outbox_update(change.lsn, xid, table)?;
                }
            }
        }
        Ok(())
    }

    /// A message inside the Stream Start .. Stream Stop block of `top`.
    pub(super) fn handle_streamed(
        &mut self,
        top: u32,
        msg: LogicalMessage,
        lsn: Lsn,
    ) -> Result<(), TxnError> {
        let subxid = change_xid(&msg);
        let selected = matches!(&msg, LogicalMessage::Message(m) if self.selects(m));
        let streamed = self.streams.get_mut(&top).ok_or(TxnError::UnknownStream {
            what: msg.kind(),
            xid: top,
            lsn,
        })?;
        if let Some(subxid) = subxid {
            streamed.spill.note_subxact(subxid);
        }
        let at = At {
            top,
            lsn,
            subxid: subxid.unwrap_or(top),
        };
        match msg {
            LogicalMessage::StreamStop => self.stream_xid = None,
            // Relations apply at once: a later row is routed with the
            // binding current when it arrived (recorded per record), and
            // pgoutput announces the relation again before it is used
            // outside this transaction.
            LogicalMessage::Relation(rel) => self.apply_relation(&rel, lsn)?,
            LogicalMessage::Insert(ins) => match self.outbox.get(&ins.relation_id) {
                Some(rel) => {
                    let bound = Some(&rel.bound);
                    self.stats.spilled_bytes +=
                        streamed.append(at, ChangeKind::Insert, bound, &ins.new)?;
                }
                None => self.ignore_other(ins.relation_id, lsn)?,
            },
            LogicalMessage::Update(upd) => match self.outbox.get(&upd.relation_id) {
                // The policy applies at commit: an update in a transaction
                // that aborts must not stop anything.
                Some(rel) => {
                    let (bound, row) = (Some(&rel.bound), &TupleData::default());
                    self.stats.spilled_bytes +=
                        streamed.append(at, ChangeKind::Update, bound, row)?;
                }
                None => self.ignore_other(upd.relation_id, lsn)?,
            },
            LogicalMessage::Delete(del) => {
                if self.outbox.contains_key(&del.relation_id) {
                    self.stats.deletes_dropped += 1;
                } else {
                    self.ignore_other(del.relation_id, lsn)?;
                }
            }
            LogicalMessage::Truncate(_) => self.stats.truncates_ignored += 1,
            LogicalMessage::Message(m) => {
                if !selected {
                    return Ok(());
                }
                if !m.transactional {
                    // Not part of the streamed transaction: it is
                    // published at once (and never streamed, but be safe).
                    return Err(TxnError::Protocol {
                        what: "non-transactional message inside a stream block",
                        lsn,
                    });
                }
                let row = MessageEvent::spill_row(&m);
                self.stats.spilled_bytes += streamed.append(at, ChangeKind::Message, None, &row)?;
            }
            LogicalMessage::Type(_) | LogicalMessage::Origin(_) => {}
            other => {
                debug!(xid = top, %lsn, kind = other.kind(), "message not allowed inside a stream block");
                return Err(TxnError::Protocol {
                    what: "transaction control message inside a stream block",
                    lsn,
                });
            }
        }
        Ok(())
    }
    /// A Stream Abort found at `lsn` (its XLogData start). The abort LSN is
    /// the message's own on protocol 4 with `streaming 'parallel'`
    /// (PostgreSQL 16+); before, the XLogData start is that same position
    /// (logical.c writes a Stream Abort at the abort LSN). A whole
    /// transaction's abort hands that position to the tracker, so the
    /// aborted transaction never holds the confirmed position back: it is
    /// confirmable as soon as everything before it is, as the end of a
    /// transaction without events would be. A subtransaction's abort is no
    /// position to release (its top-level transaction is still open).
    pub(super) fn stream_abort(
        &mut self,
        a: &StreamAbort,
        lsn: Lsn,
        tracker: &SharedTracker,
    ) -> Result<(), TxnError> {
        let (xid, subxid) = (a.xid, a.subxid);
        let abort_lsn = a.abort_lsn.unwrap_or(lsn);
        if let Some(sent) = a.abort_lsn {
            self.stats.sent_abort_lsn = sent.0;
        }
        if subxid == xid {
            match self.streams.remove(&xid) {
                Some(streamed) => {
                    self.stats.stream_aborts += 1;
                    debug!(xid, %abort_lsn, sent = a.abort_lsn.is_some(), records = streamed.spill.records(), bytes = streamed.spill.len(), "streamed transaction aborted; spill file dropped");
                }
                None => {
                    debug!(xid, %abort_lsn, "abort of a streamed transaction never started here");
                }
            }
            let abort_time_us = a
                .abort_time
                .map(pg_micros_to_unix_micros)
                .unwrap_or_else(crate::clock::unix_now_micros);
            tracker.aborted(abort_lsn, abort_time_us);
            return Ok(());
        }
        let Some(streamed) = self.streams.get_mut(&xid) else {
            debug!(xid, subxid, %abort_lsn, "subtransaction abort of a streamed transaction never started here");
            return Ok(());
        };
        let cut = streamed
            .spill
            .abort_subxact(subxid)
            .map_err(|source| TxnError::Spill { xid, lsn, source })?;
        if let Some(bytes) = cut {
            self.stats.subxact_aborts += 1;
            debug!(xid, subxid, %abort_lsn, bytes, "subtransaction of a streamed transaction aborted; its changes dropped");
        }
        Ok(())
    }
}

/// The index of `bound` in `bindings`, appending it when new.
fn binding_index(bindings: &mut Vec<Arc<BoundRelation>>, bound: &Arc<BoundRelation>) -> u32 {
    if let Some(i) = bindings.iter().rposition(|b| Arc::ptr_eq(b, bound)) {
        return i as u32;
    }
    bindings.push(Arc::clone(bound));
    (bindings.len() - 1) as u32
}

/// The xid a change carries inside a stream block: the (sub)transaction
/// that made it; `None` for messages that carry none.
#[inline]
fn change_xid(msg: &LogicalMessage) -> Option<u32> {
    match msg {
        LogicalMessage::Relation(m) => m.xid,
        LogicalMessage::Type(m) => m.xid,
        LogicalMessage::Insert(m) => m.xid,
        LogicalMessage::Update(m) => m.xid,
        LogicalMessage::Delete(m) => m.xid,
        LogicalMessage::Truncate(m) => m.xid,
        LogicalMessage::Message(m) => m.xid,
        _ => None,
    }
}
