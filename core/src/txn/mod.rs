//! Transaction assembly: pgoutput messages in, outbox events out.
//!
//! Owns the relation cache of one replication session, recognises the
//! outbox tables (one or several, [`OutboxTable`]) by schema and table
//! name, binds each one's relation with its own columns, turns their
//! INSERTs into events in WAL order whatever table they come from, drops
//! their DELETEs (the insert-and-delete outbox pattern yields exactly one
//! event), applies Debezium's `table.op.invalid.behavior` to their UPDATEs
//! and ignores TRUNCATE and every other table. It registers each transaction with
//! the checkpoint tracker *before* its events leave this stage, so the
//! tracker always knows at least as much as the sink. It never routes,
//! produces or confirms anything.
//!
//! Streamed transactions (pgoutput protocol version 2, or 4 from
//! PostgreSQL 16): the changes of each in-progress transaction go to its own
//! spill file ([`spill`]) as they arrive, several may be open and
//! interleaved; a Stream Abort drops the file (or cuts an aborted
//! subtransaction off it) and hands the abort LSN to the tracker, so an
//! aborted transaction never pins WAL; a Stream Commit
//! registers the transaction with the tracker (commit order is the order of
//! Commit and Stream Commit messages) and the caller then reads it back in
//! batches with [`Assembler::replay`]. A streamed transaction is never held
//! in memory as a whole, and while one is open [`Assembler::in_transaction`]
//! says so, so that keepalives do not confirm past it.

pub mod config;
mod event;
pub mod metadata;
pub mod spill;
mod stream;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use tracing::{error, warn};
use walrelay_proto::pgoutput::{
    Begin, Commit, Delete, Insert, LogicalMessage, Message, OldTuple, Update,
};
use walrelay_proto::{pg_micros_to_unix_micros, Lsn, RelationCache};

use self::config::{MessageSelection, NonTransactional, OpInvalidBehavior};
pub(crate) use self::event::EventBody;
pub use self::event::OutboxEvent;
use self::metadata::{Counts, Metadata};
use self::spill::SpillError;
use self::stream::{Replay, StreamedTxn};
use crate::checkpoint::{SharedTracker, TxnSeq};
use crate::connect::pg::TableMeta;
use crate::connect::transaction::{Marker, TransactionTopic};
pub use crate::router::MessageEvent;
use crate::router::{BoundRelation, ColumnMapping, EventMeta, RouteError, Router};

/// One outbox table of a session: its name, the columns the router reads
/// from it, and the catalog facts about them read at session start.
#[derive(Debug, Clone)]
pub struct OutboxTable {
    /// The outbox table's schema, as configured.
    pub schema: String,
    /// The outbox table's name within `schema`, as configured.
    pub table: String,
    /// The columns the router reads (a table's own, or `[router]`'s).
    pub columns: Arc<ColumnMapping>,
    /// NOT NULL, types and defaults of its columns.
    pub meta: TableMeta,
}

impl OutboxTable {
    /// `schema.table`, Debezium's data collection name.
    pub(crate) fn qualified(&self) -> String {
        format!("{}.{}", self.schema, self.table)
    }
}

/// An outbox table's relation as the session knows it.
#[derive(Debug, Clone)]
struct OutboxRelation {
    /// The relation with the table's columns bound.
    bound: Arc<BoundRelation>,
    /// Debezium's data collection (`schema.table`), for transaction
    /// metadata's counts.
    collection: Arc<str>,
}

/// Errors of transaction assembly; all of them stop the pipeline without
/// confirming past the offending message.
#[derive(Debug, thiserror::Error)]
pub enum TxnError {
    /// A change refers to a relation the server never described.
    #[error("change at lsn {lsn} refers to unknown relation id {relation_id}")]
    UnknownRelation {
        /// Position of the change.
        lsn: Lsn,
        /// The pgoutput relation id no Relation message announced.
        relation_id: u32,
    },
    /// A row change arrived outside BEGIN .. COMMIT.
    #[error("{what} at lsn {lsn} arrived outside a transaction")]
    OutsideTransaction {
        /// Message kind.
        what: &'static str,
        /// Position.
        lsn: Lsn,
    },
    /// An outbox table's columns no longer fit the routing configuration.
    #[error("outbox table layout at lsn {lsn} does not fit the routing configuration")]
    Layout {
        /// Position of the Relation message.
        lsn: Lsn,
        /// What the router said.
        #[source]
        source: RouteError,
    },
    /// An UPDATE of an outbox row with `op_invalid_behavior = "fatal"`.
    #[error("unexpected update of outbox table {table} at lsn {lsn} (xid {xid}); outbox.op_invalid_behavior is fatal")]
    UnexpectedUpdate {
        /// `schema.table` of the outbox table updated.
        table: String,
        /// Position.
        lsn: Lsn,
        /// Transaction.
        xid: u32,
    },
    /// A message this pipeline never asks for (two-phase).
    #[error("unexpected {what} message at lsn {lsn}: walrelay did not request it")]
    Unexpected {
        /// Message kind.
        what: &'static str,
        /// Position.
        lsn: Lsn,
    },
    /// A message out of the protocol's order (e.g. BEGIN inside a stream block).
    #[error("protocol violation at lsn {lsn}: {what}")]
    Protocol {
        /// What was out of order.
        what: &'static str,
        /// Position.
        lsn: Lsn,
    },
    /// A stream message for a streamed transaction this session never saw start.
    #[error(
        "{what} at lsn {lsn} for streamed transaction {xid}, which this session never saw start"
    )]
    UnknownStream {
        /// Message kind.
        what: &'static str,
        /// Top-level transaction id.
        xid: u32,
        /// Position.
        lsn: Lsn,
    },
    /// The spill file of a streamed transaction failed (disk full, I/O).
    #[error("spill file of streamed transaction {xid} failed at lsn {lsn}")]
    Spill {
        /// Top-level transaction id.
        xid: u32,
        /// Position of the change (or of the commit while reading back).
        lsn: Lsn,
        /// What failed.
        #[source]
        source: SpillError,
    },
}

#[derive(Debug)]
struct OpenTxn {
    seq: TxnSeq,
    xid: u32,
    final_lsn: Lsn,
    commit_time_us: i64,
    /// Debezium's `lastCommitLsn` at BEGIN.
    last_commit_lsn: Option<Lsn>,
    /// Events handed out but not yet registered with the tracker.
    unregistered: u32,
    /// Events of this transaction so far.
    events: u32,
    /// Transaction metadata's counters, when it is on.
    counts: Option<Counts>,
}

impl OpenTxn {
    /// Hands out a transaction metadata marker as an event of this
    /// transaction.
    fn push_marker(
        &mut self,
        topic: &Arc<TransactionTopic>,
        marker: Marker,
        lsn: Lsn,
        out: &mut Vec<OutboxEvent>,
    ) {
        out.push(OutboxEvent {
            seq: self.seq,
            meta: self.meta(lsn),
            body: EventBody::Transaction {
                topic: Arc::clone(topic),
                marker,
            },
        });
        self.unregistered += 1;
    }

    /// A change of Debezium's stream at `lsn` (anything but walrelay's
    /// heartbeat): the BEGIN marker goes out first if it has not.
    fn changed(&mut self, metadata: Option<&Metadata>, out: &mut Vec<OutboxEvent>) {
        let (Some(md), Some(c)) = (metadata, self.counts.as_mut()) else {
            return;
        };
        if let Some(m) = c.begin() {
            let at = c.begin_lsn();
            self.push_marker(&md.topic, m, at, out);
        }
    }

    /// Counts `n` events of the table collection `collection` at `lsn`.
    fn count(&mut self, collection: &Arc<str>, lsn: Lsn, n: u32) {
        if let Some(c) = self.counts.as_mut() {
            for _ in 0..n {
                c.event(collection, lsn);
            }
        }
    }

    /// Where a change of this transaction at `lsn` comes from.
    fn meta(&self, lsn: Lsn) -> EventMeta {
        EventMeta {
            lsn,
            commit_lsn: self.final_lsn,
            xid: self.xid,
            commit_time_us: self.commit_time_us,
            received_us: 0,
            last_commit_lsn: self.last_commit_lsn,
        }
    }
}

/// Counters the assembler keeps for metrics.
#[derive(Debug, Default, Clone, Copy)]
pub struct AssemblyStats {
    /// Outbox inserts turned into events.
    pub(crate) events: u64,
    /// Committed transactions.
    pub(crate) transactions: u64,
    /// Committed transactions that carried at least one event.
    pub relayed_transactions: u64,
    /// Outbox deletes dropped.
    pub deletes_dropped: u64,
    /// Outbox updates dropped (warn/error behaviour).
    pub updates_dropped: u64,
    /// Changes to other tables ignored.
    pub other_ignored: u64,
    /// TRUNCATEs ignored.
    pub truncates_ignored: u64,
    /// Logical decoding messages turned into events (counted in `events`
    /// too).
    pub(crate) messages: u64,
    /// Logical decoding messages whose prefix is not selected.
    pub messages_ignored: u64,
    /// Selected non-transactional messages dropped
    /// (`outbox.non_transactional = "skip"`).
    pub non_transactional_skipped: u64,
    /// Streamed transactions committed (counted in `transactions` too).
    pub streamed_transactions: u64,
    /// Streamed transactions aborted as a whole.
    pub stream_aborts: u64,
    /// Subtransaction aborts that cut changes off a spill file.
    pub subxact_aborts: u64,
    /// The abort LSN of the last Stream Abort that carried one (protocol 4,
    /// `streaming 'parallel'`); 0 until one did.
    pub sent_abort_lsn: u64,
    /// Bytes written to spill files, ever.
    pub spilled_bytes: u64,
    /// Bytes in spill files right now (open streams and the one being read back).
    pub spill_bytes: u64,
}

/// Per-session transaction assembler.
pub struct Assembler {
    /// The outbox tables, each with its columns and catalog facts.
    tables: Vec<OutboxTable>,
    router: Router,
    op_invalid: OpInvalidBehavior,
    relations: RelationCache,
    /// Outbox relations (by relation id) with their table's columns bound.
    outbox: HashMap<u32, OutboxRelation>,
    current: Option<OpenTxn>,
    /// Open streamed transactions by top-level xid.
    streams: HashMap<u32, StreamedTxn>,
    /// The top-level xid of the Stream Start .. Stream Stop block we are in.
    stream_xid: Option<u32>,
    /// A committed streamed transaction not yet read back completely.
    replay: Option<Replay>,
    stats: AssemblyStats,
    /// Where spill files go; `None`: the system temporary directory.
    spill_dir: Option<PathBuf>,
    /// Which logical decoding messages are events; `None`: none.
    messages: Option<MessageSelection>,
    /// The prefix of the last selected message, shared between its events.
    last_prefix: Option<Arc<str>>,
    /// Debezium's `lastCommitLsn` (see [`MessageEvent::last_commit_lsn`]).
    last_commit_lsn: Option<Lsn>,
    /// The last transaction's commit time seen (Unix µs); the session
    /// start before any.
    last_commit_time_us: i64,
    /// Transaction metadata, when it is on.
    metadata: Option<Metadata>,
}

impl Assembler {
    /// A fresh assembler for one replication session over the outbox
    /// `tables` (none: logical decoding messages only); `router` is only
    /// used to bind columns.
    pub fn new(tables: Vec<OutboxTable>, router: Router, op_invalid: OpInvalidBehavior) -> Self {
        Assembler {
            metadata: None,
            tables,
            router,
            op_invalid,
            relations: RelationCache::new(),
            outbox: HashMap::new(),
            current: None,
            streams: HashMap::new(),
            stream_xid: None,
            replay: None,
            stats: AssemblyStats::default(),
            spill_dir: None,
            messages: None,
            last_prefix: None,
            last_commit_lsn: None,
            last_commit_time_us: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as i64),
        }
    }

    /// Logical decoding messages selected by `selection` become events too
    /// (`None`: messages are ignored).
    pub fn with_messages(mut self, selection: Option<MessageSelection>) -> Self {
        self.messages = selection;
        self
    }

    /// Transaction metadata's BEGIN and END records around every
    /// transaction (`None`: off). Needs whole transactions (no streaming).
    pub fn with_transaction_metadata(mut self, metadata: Option<Metadata>) -> Self {
        self.metadata = metadata;
        self
    }

    /// Whether a message is an event (its prefix selected).
    fn selects(&self, m: &Message) -> bool {
        match &self.messages {
            None => false,
            Some(sel) => match std::str::from_utf8(&m.prefix) {
                Ok(p) => sel.selects(p),
                // A prefix that is not UTF-8 cannot be listed natively;
                // Debezium's regexes see it decoded lossily.
                Err(_) => sel.selects(&String::from_utf8_lossy(&m.prefix)),
            },
        }
    }

    /// The message as an event body, its prefix shared with the previous
    /// event of the same prefix.
    fn message_body(&mut self, m: Message, source_time_us: i64) -> MessageEvent {
        let prefix = match &self.last_prefix {
            Some(p) if p.as_bytes() == m.prefix.as_ref() => Arc::clone(p),
            _ => {
                let p: Arc<str> = Arc::from(String::from_utf8_lossy(&m.prefix).as_ref());
                self.last_prefix = Some(Arc::clone(&p));
                p
            }
        };
        MessageEvent {
            prefix,
            content: m.content,
            transactional: m.transactional,
            last_commit_lsn: self.last_commit_lsn,
            source_time_us,
            transaction: None,
        }
    }

    /// A logical decoding message outside a stream block: inside BEGIN ..
    /// COMMIT for a transactional one, on its own for a non-transactional
    /// one (PostgreSQL sends those at once, whatever becomes of their
    /// transaction).
    fn message(
        &mut self,
        m: Message,
        lsn: Lsn,
        tracker: &SharedTracker,
        out: &mut Vec<OutboxEvent>,
    ) -> Result<(), TxnError> {
        if !m.transactional {
            // Debezium moves its lastCommitLsn to every non-transactional
            // message, of any prefix.
            self.last_commit_lsn = Some(lsn);
        } else if let Some(txn) = self.current.as_mut() {
            if m.prefix.as_ref() == config::HEARTBEAT_MESSAGE_PREFIX.as_bytes() {
                if let Some(c) = txn.counts.as_mut() {
                    c.heartbeat();
                }
            } else {
                txn.changed(self.metadata.as_ref(), out);
            }
        }
        if !self.selects(&m) {
            self.stats.messages_ignored += 1;
            return Ok(());
        }
        if m.transactional {
            if self.current.is_none() {
                return Err(TxnError::OutsideTransaction {
                    what: "transactional MESSAGE",
                    lsn,
                });
            }
            let time = self.current.as_ref().map_or(0, |t| t.commit_time_us);
            let mut body = self.message_body(m, time);
            let txn = self.current.as_mut().expect("checked above");
            body.transaction = txn.counts.as_mut().map(|c| c.message_event(lsn));
            out.push(OutboxEvent {
                seq: txn.seq,
                meta: txn.meta(lsn),
                body: EventBody::Message(body),
            });
            txn.unregistered += 1;
            txn.events += 1;
            self.stats.events += 1;
            self.stats.messages += 1;
            return Ok(());
        }
        let policy = self
            .messages
            .as_ref()
            .map_or(NonTransactional::Error, |s| s.non_transactional);
        if policy == NonTransactional::Skip {
            warn!(%lsn, prefix = %String::from_utf8_lossy(&m.prefix), "non-transactional message skipped (outbox.non_transactional = \"skip\")");
            self.stats.non_transactional_skipped += 1;
            return Ok(());
        }
        if self.current.is_some() {
            return Err(TxnError::Protocol {
                what: "non-transactional message inside BEGIN .. COMMIT",
                lsn,
            });
        }
        // Its own entry in the tracker: confirmed once delivered (or
        // dead-lettered), one byte past its start so that a restart does
        // not decode it again. A refused one (policy "error") goes to the
        // router, which names it as the bad input it is.
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64);
        let seq = tracker.begin(now_us);
        let body = self.message_body(m, self.last_commit_time_us);
        out.push(OutboxEvent {
            seq,
            meta: EventMeta {
                lsn,
                commit_lsn: lsn,
                xid: 0,
                commit_time_us: now_us,
                received_us: 0,
                last_commit_lsn: body.last_commit_lsn,
            },
            body: EventBody::Message(body),
        });
        tracker.add_and_commit(seq, 1, Lsn(lsn.0 + 1));
        self.stats.events += 1;
        self.stats.messages += 1;
        self.stats.transactions += 1;
        self.stats.relayed_transactions += 1;
        Ok(())
    }

    /// Spill files of streamed transactions go to `dir` instead of the
    /// system temporary directory (`replication.spill_dir`).
    pub fn with_spill_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.spill_dir = dir;
        self
    }

    /// Counters so far.
    pub fn stats(&self) -> AssemblyStats {
        let mut stats = self.stats;
        stats.spill_bytes = self.streams.values().map(|s| s.spill.len()).sum::<u64>()
            + self.replay.as_ref().map_or(0, |r| r.reader.remaining());
        stats
    }

    /// Whether a transaction is open: BEGIN seen and COMMIT not yet, or a
    /// streamed transaction started and neither committed (and read back)
    /// nor aborted. While this holds, nothing past the transactions already
    /// registered may be confirmed.
    pub fn in_transaction(&self) -> bool {
        self.current.is_some()
            || self.stream_xid.is_some()
            || !self.streams.is_empty()
            || self.replay.is_some()
    }

    /// Streamed transactions started and not yet committed or aborted.
    #[cfg(test)]
    pub(crate) fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Whether a committed streamed transaction is being read back: call
    /// [`Assembler::replay`] until this is false before handing in more
    /// messages.
    pub fn replaying(&self) -> bool {
        self.replay.is_some()
    }

    /// Handles one decoded message found at `lsn` (the XLogData start),
    /// appending events to `out`.
    pub fn handle(
        &mut self,
        msg: LogicalMessage,
        lsn: Lsn,
        tracker: &SharedTracker,
        out: &mut Vec<OutboxEvent>,
    ) -> Result<(), TxnError> {
        if self.replay.is_some() {
            return Err(TxnError::Protocol {
                what: "message handed in while a streamed transaction is read back",
                lsn,
            });
        }
        if let Some(top) = self.stream_xid {
            return self.handle_streamed(top, msg, lsn);
        }
        match msg {
            LogicalMessage::Begin(b) => self.begin(&b, lsn, tracker),
            LogicalMessage::Commit(c) => self.commit(&c, lsn, tracker, out)?,
            LogicalMessage::Relation(rel) => self.apply_relation(&rel, lsn)?,
            LogicalMessage::Insert(ins) => self.insert(ins, lsn, out)?,
            LogicalMessage::Update(upd) => self.update(&upd, lsn, out)?,
            LogicalMessage::Delete(del) => self.delete(&del, lsn, out)?,
            LogicalMessage::Truncate(_) => self.truncate(out),
            LogicalMessage::Message(m) => self.message(m, lsn, tracker, out)?,
            // Origins and types carry no outbox events.
            LogicalMessage::Origin(_) | LogicalMessage::Type(_) => {}
            LogicalMessage::StreamStart(s) => self.stream_start(&s, lsn)?,
            LogicalMessage::StreamStop => {
                return Err(TxnError::Protocol {
                    what: "STREAM STOP outside a stream block",
                    lsn,
                })
            }
            LogicalMessage::StreamCommit(c) => self.stream_commit(&c, lsn, tracker)?,
            LogicalMessage::StreamAbort(a) => {
                if self.current.is_some() {
                    return Err(TxnError::Protocol {
                        what: "STREAM ABORT inside BEGIN .. COMMIT",
                        lsn,
                    });
                }
                self.stream_abort(&a, lsn, tracker)?;
            }
            LogicalMessage::BeginPrepare(_)
            | LogicalMessage::Prepare(_)
            | LogicalMessage::CommitPrepared(_)
            | LogicalMessage::RollbackPrepared(_)
            | LogicalMessage::StreamPrepare(_) => {
                return Err(TxnError::Unexpected {
                    what: "two-phase",
                    lsn,
                })
            }
        }
        Ok(())
    }

    /// BEGIN: the transaction gets its tracker entry now, before any of
    /// its events can leave this stage.
    #[inline]
    fn begin(&mut self, b: &Begin, lsn: Lsn, tracker: &SharedTracker) {
        let commit_time_us = pg_micros_to_unix_micros(b.commit_time);
        self.last_commit_time_us = commit_time_us;
        let seq = tracker.begin(commit_time_us);
        self.current = Some(OpenTxn {
            seq,
            xid: b.xid,
            final_lsn: b.final_lsn,
            commit_time_us,
            last_commit_lsn: self.last_commit_lsn,
            unregistered: 0,
            events: 0,
            counts: self
                .metadata
                .as_ref()
                .map(|_| Counts::new(b.xid, lsn, commit_time_us)),
        });
    }

    /// COMMIT: transaction metadata's END marker last, then the entry is
    /// committed at the commit's end LSN with every event it handed out.
    #[inline]
    fn commit(
        &mut self,
        c: &Commit,
        lsn: Lsn,
        tracker: &SharedTracker,
        out: &mut Vec<OutboxEvent>,
    ) -> Result<(), TxnError> {
        let mut txn = self.current.take().ok_or(TxnError::OutsideTransaction {
            what: "COMMIT",
            lsn,
        })?;
        if let (Some(md), Some(counts)) = (self.metadata.as_ref(), txn.counts.take()) {
            for m in counts.end(lsn) {
                txn.push_marker(&md.topic, m, lsn, out);
            }
        }
        tracker.add_and_commit(txn.seq, txn.unregistered, c.end_lsn);
        self.last_commit_lsn = Some(c.end_lsn);
        self.stats.transactions += 1;
        if txn.events > 0 {
            self.stats.relayed_transactions += 1;
        }
        Ok(())
    }

    /// INSERT: a row of an outbox table becomes an event bound to its
    /// relation (the row moves into it, uncopied); other tables' rows are
    /// counted and dropped.
    #[inline]
    fn insert(
        &mut self,
        ins: Insert,
        lsn: Lsn,
        out: &mut Vec<OutboxEvent>,
    ) -> Result<(), TxnError> {
        let txn = self.current.as_mut().ok_or(TxnError::OutsideTransaction {
            what: "INSERT",
            lsn,
        })?;
        txn.changed(self.metadata.as_ref(), out);
        match self.outbox.get(&ins.relation_id) {
            Some(rel) => {
                txn.count(&rel.collection, lsn, 1);
                out.push(OutboxEvent::row(
                    txn.seq,
                    txn.meta(lsn),
                    Arc::clone(&rel.bound),
                    ins.new,
                ));
                txn.unregistered += 1;
                txn.events += 1;
                self.stats.events += 1;
            }
            None => self.ignore_other(ins.relation_id, lsn)?,
        }
        Ok(())
    }

    /// UPDATE: counted for transaction metadata where Debezium counts it,
    /// then `outbox.op_invalid_behavior` for an outbox row.
    fn update(
        &mut self,
        upd: &Update,
        lsn: Lsn,
        out: &mut Vec<OutboxEvent>,
    ) -> Result<(), TxnError> {
        let counted = self.metadata.as_ref().is_some_and(|m| m.count_updates);
        let rel = self.outbox.get(&upd.relation_id);
        if let Some(txn) = self.current.as_mut() {
            txn.changed(self.metadata.as_ref(), out);
            if let (true, Some(rel)) = (counted, rel) {
                // A new primary key: Debezium's delete and create.
                let n = if matches!(upd.old, Some(OldTuple::Key(_))) {
                    2
                } else {
                    1
                };
                txn.count(&rel.collection, lsn, n);
            }
        }
        if let Some(rel) = rel {
            let xid = self.current.as_ref().map(|t| t.xid).unwrap_or_default();
            let table = rel.bound.table_name();
            self.outbox_update(lsn, xid, table)
        } else {
            self.ignore_other(upd.relation_id, lsn)
        }
    }

    /// DELETE: an outbox row's delete is dropped (insert-and-delete yields
    /// one event), counted for transaction metadata where Debezium counts it.
    #[inline]
    fn delete(
        &mut self,
        del: &Delete,
        lsn: Lsn,
        out: &mut Vec<OutboxEvent>,
    ) -> Result<(), TxnError> {
        let counted = self.metadata.as_ref().is_some_and(|m| m.count_deletes);
        if let Some(txn) = self.current.as_mut() {
            txn.changed(self.metadata.as_ref(), out);
            if let (true, Some(rel)) = (counted, self.outbox.get(&del.relation_id)) {
                txn.count(&rel.collection, lsn, 1);
            }
        }
        if self.outbox.contains_key(&del.relation_id) {
            self.stats.deletes_dropped += 1;
            Ok(())
        } else {
            self.ignore_other(del.relation_id, lsn)
        }
    }

    /// TRUNCATE: Debezium skips truncates (`skipped.operations` has `t` by
    /// default) but its transaction still has BEGIN/END.
    fn truncate(&mut self, out: &mut Vec<OutboxEvent>) {
        if let Some(txn) = self.current.as_mut() {
            txn.changed(self.metadata.as_ref(), out);
        }
        self.stats.truncates_ignored += 1;
    }

    /// Registers events handed out since the last call with the tracker;
    /// call before the events leave this stage.
    pub fn register_pending(&mut self, tracker: &SharedTracker) {
        if let Some(txn) = self.current.as_mut() {
            if txn.unregistered > 0 {
                tracker.add_events(txn.seq, txn.unregistered);
                txn.unregistered = 0;
            }
        }
        if let Some(r) = self.replay.as_mut() {
            if r.unregistered > 0 {
                tracker.add_events(r.seq, r.unregistered);
                r.unregistered = 0;
            }
        }
    }

    fn apply_relation(
        &mut self,
        rel: &walrelay_proto::pgoutput::Relation,
        lsn: Lsn,
    ) -> Result<(), TxnError> {
        let info = self.relations.apply(rel);
        let table = self
            .tables
            .iter()
            .find(|t| info.namespace == t.schema && info.name == t.table);
        match table {
            Some(t) => {
                let bound = self
                    .router
                    .bind_with(&info, &t.meta, &t.columns)
                    .map_err(|source| TxnError::Layout { lsn, source })?;
                let collection = match self.outbox.get(&info.id) {
                    Some(known) => Arc::clone(&known.collection),
                    None => Arc::from(t.qualified()),
                };
                self.outbox.insert(
                    info.id,
                    OutboxRelation {
                        bound: Arc::new(bound),
                        collection,
                    },
                );
            }
            None => {
                self.outbox.remove(&info.id);
            }
        }
        Ok(())
    }

    /// `outbox.op_invalid_behavior` for an UPDATE of a row of the outbox
    /// table `table`.
    fn outbox_update(&mut self, lsn: Lsn, xid: u32, table: String) -> Result<(), TxnError> {
        match self.op_invalid {
            OpInvalidBehavior::Warn => {
                warn!(%lsn, xid, table, "unexpected update of an outbox row, dropped (outbox.op_invalid_behavior = warn)");
            }
            OpInvalidBehavior::Error => {
                error!(%lsn, xid, table, "unexpected update of an outbox row, dropped (outbox.op_invalid_behavior = error)");
            }
            OpInvalidBehavior::Fatal => return Err(TxnError::UnexpectedUpdate { table, lsn, xid }),
        }
        self.stats.updates_dropped += 1;
        Ok(())
    }

    fn ignore_other(&mut self, relation_id: u32, lsn: Lsn) -> Result<(), TxnError> {
        if self.relations.get(relation_id).is_none() {
            return Err(TxnError::UnknownRelation { lsn, relation_id });
        }
        self.stats.other_ignored += 1;
        Ok(())
    }
}
#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use walrelay_proto::pgoutput::{
        Begin, ColumnValue, Commit, Insert, Relation, RelationColumn, StreamAbort, StreamCommit,
        StreamStart, TupleData, Update,
    };

    use super::*;
    use crate::connect::config::ConvertersConfig;
    use crate::connect::pg::oid;
    use crate::router::DebeziumConfig;
    use crate::router::RouterConfig;

    const OUTBOX: u32 = 16384;
    const OTHER: u32 = 16400;

    fn assembler(op_invalid: OpInvalidBehavior) -> Assembler {
        let router = Router::new(
            RouterConfig::default(),
            ConvertersConfig::default(),
            DebeziumConfig::default(),
        )
        .expect("default router config is valid");
        let columns = Arc::clone(router.columns());
        Assembler::new(
            vec![OutboxTable {
                schema: "public".into(),
                table: "outbox".into(),
                columns,
                meta: TableMeta::unknown(),
            }],
            router,
            op_invalid,
        )
    }

    /// The outbox relation; `swapped` puts aggregateid before aggregatetype.
    fn relation(xid: Option<u32>, id: u32, name: &str, swapped: bool) -> LogicalMessage {
        let col = |name: &str, type_oid: u32| RelationColumn {
            flags: u8::from(name == "id"),
            name: Bytes::copy_from_slice(name.as_bytes()),
            type_oid,
            type_modifier: -1,
        };
        let (second, third) = if swapped {
            ("aggregateid", "aggregatetype")
        } else {
            ("aggregatetype", "aggregateid")
        };
        LogicalMessage::Relation(Relation {
            xid,
            id,
            namespace: Bytes::from_static(b"public"),
            name: Bytes::copy_from_slice(name.as_bytes()),
            replica_identity: b'd',
            columns: vec![
                col("id", oid::UUID),
                col(second, oid::VARCHAR),
                col(third, oid::VARCHAR),
                col("type", oid::VARCHAR),
                col("payload", oid::JSONB),
            ],
        })
    }

    fn text(s: &str) -> ColumnValue {
        ColumnValue::Text(Bytes::copy_from_slice(s.as_bytes()))
    }

    /// An insert whose id column is `id` and whose second column is `second`.
    fn insert(xid: Option<u32>, relation_id: u32, id: &str, second: &str) -> LogicalMessage {
        LogicalMessage::Insert(Insert {
            xid,
            relation_id,
            new: TupleData {
                columns: vec![text(id), text(second), text("k"), text("E"), text("{}")],
            },
        })
    }

    fn start(xid: u32, first_segment: bool) -> LogicalMessage {
        LogicalMessage::StreamStart(StreamStart { xid, first_segment })
    }

    fn commit(xid: u32, end: u64) -> LogicalMessage {
        LogicalMessage::StreamCommit(StreamCommit {
            xid,
            flags: 0,
            commit_lsn: Lsn(end - 8),
            end_lsn: Lsn(end),
            commit_time: 0,
        })
    }

    fn abort(xid: u32, subxid: u32) -> LogicalMessage {
        LogicalMessage::StreamAbort(StreamAbort {
            xid,
            subxid,
            abort_lsn: None,
            abort_time: None,
        })
    }

    struct Harness {
        asm: Assembler,
        tracker: SharedTracker,
        lsn: u64,
        out: Vec<OutboxEvent>,
    }

    impl Harness {
        fn new() -> Self {
            Self::with(OpInvalidBehavior::Warn)
        }

        fn with(op: OpInvalidBehavior) -> Self {
            Harness {
                asm: assembler(op),
                tracker: SharedTracker::new(Lsn(1)),
                lsn: 100,
                out: Vec::new(),
            }
        }

        fn feed(&mut self, msgs: impl IntoIterator<Item = LogicalMessage>) {
            for m in msgs {
                self.try_feed(m).expect("message accepted");
            }
        }

        fn try_feed(&mut self, m: LogicalMessage) -> Result<(), TxnError> {
            self.lsn += 10;
            self.asm
                .handle(m, Lsn(self.lsn), &self.tracker, &mut self.out)?;
            // Read a committed stream back in small batches, as the source does.
            while self.asm.replaying() {
                let before = self.out.len();
                self.asm.replay(&self.tracker, &mut self.out, before + 2)?;
                self.asm.register_pending(&self.tracker);
            }
            self.asm.register_pending(&self.tracker);
            Ok(())
        }

        /// Event ids (first column) handed out so far.
        fn ids(&self) -> Vec<String> {
            self.out
                .iter()
                .map(|e| match &e.body {
                    EventBody::Row { row, .. } => match row.get(0) {
                        Some(ColumnValue::Text(b)) => String::from_utf8_lossy(b).into_owned(),
                        other => panic!("id column {other:?}"),
                    },
                    EventBody::Message(m) => String::from_utf8_lossy(&m.content).into_owned(),
                    EventBody::Transaction { marker, .. } => match marker {
                        Marker::Begin { id, .. } => format!("BEGIN {id}"),
                        Marker::End { id, .. } => format!("END {id}"),
                    },
                })
                .collect()
        }

        /// Acknowledges everything handed out.
        fn ack_all(&self) {
            for e in &self.out {
                self.tracker.ack(e.seq, 1);
            }
        }
    }

    #[test]
    fn stream_commit_replays_in_order_and_confirms_at_commit() {
        let mut h = Harness::new();
        h.feed([
            start(700, true),
            relation(Some(700), OUTBOX, "outbox", false),
            insert(Some(700), OUTBOX, "1", "A"),
            insert(Some(700), OUTBOX, "2", "A"),
            LogicalMessage::StreamStop,
        ]);
        assert!(h.out.is_empty(), "nothing leaves before the commit");
        assert!(h.asm.in_transaction());
        // The source passes keepalives to the tracker only outside
        // transactions, so one while the stream is open confirms nothing.
        if !h.asm.in_transaction() {
            h.tracker.keepalive(Lsn(5000));
        }
        assert_eq!(h.tracker.confirmed(), Lsn(1));
        h.feed([
            start(700, false),
            insert(Some(700), OUTBOX, "3", "A"),
            relation(Some(700), OTHER, "other", false),
            insert(Some(700), OTHER, "x", "x"),
            LogicalMessage::StreamStop,
        ]);
        let stats = h.asm.stats();
        assert!(stats.spill_bytes > 0);
        assert_eq!(stats.spilled_bytes, stats.spill_bytes);
        h.feed([commit(700, 9000)]);
        assert_eq!(h.ids(), vec!["1", "2", "3"]);
        assert!(!h.asm.in_transaction());
        let e = &h.out[2];
        assert_eq!(e.meta.xid, 700);
        assert_eq!(e.meta.commit_lsn, Lsn(8992));
        assert_eq!(h.tracker.confirmed(), Lsn(1), "not before the acks");
        h.ack_all();
        assert_eq!(h.tracker.confirmed(), Lsn(9000));
        let stats = h.asm.stats();
        assert_eq!(stats.streamed_transactions, 1);
        assert_eq!(stats.relayed_transactions, 1);
        assert_eq!(stats.events, 3);
        assert_eq!(stats.spill_bytes, 0);
    }

    #[test]
    fn whole_abort_drops_everything() {
        let mut h = Harness::new();
        h.feed([
            start(700, true),
            relation(Some(700), OUTBOX, "outbox", false),
            insert(Some(700), OUTBOX, "1", "A"),
            LogicalMessage::StreamStop,
            abort(700, 700),
        ]);
        assert!(h.out.is_empty());
        assert!(!h.asm.in_transaction());
        assert_eq!(h.asm.stats().stream_aborts, 1);
        assert_eq!(h.asm.stats().spill_bytes, 0);
        assert_eq!(h.tracker.open_transactions(), 0);
        // A later commit of that xid is a protocol error, not a silent skip.
        assert!(matches!(
            h.try_feed(commit(700, 9000)),
            Err(TxnError::UnknownStream { xid: 700, .. })
        ));
    }

    #[test]
    fn subxact_abort_drops_it_and_later_subxacts() {
        let mut h = Harness::new();
        h.feed([
            start(700, true),
            relation(Some(700), OUTBOX, "outbox", false),
            insert(Some(700), OUTBOX, "1", "A"),
            // SAVEPOINT a (701), SAVEPOINT b (702)
            insert(Some(701), OUTBOX, "2", "A"),
            insert(Some(702), OUTBOX, "3", "A"),
            LogicalMessage::StreamStop,
            // ROLLBACK TO b
            abort(700, 702),
            start(700, false),
            insert(Some(701), OUTBOX, "4", "A"),
            // RELEASE a; SAVEPOINT c (703)
            insert(Some(703), OUTBOX, "5", "A"),
            LogicalMessage::StreamStop,
            // A subxact with no changes here: nothing happens.
            abort(700, 799),
            // ROLLBACK TO c
            abort(700, 703),
            start(700, false),
            insert(Some(700), OUTBOX, "6", "A"),
            LogicalMessage::StreamStop,
            commit(700, 9000),
        ]);
        assert_eq!(h.ids(), vec!["1", "2", "4", "6"]);
        assert_eq!(h.asm.stats().subxact_aborts, 2);
    }

    #[test]
    fn interleaved_streams_and_plain_transactions_commit_in_order() {
        let mut h = Harness::new();
        h.feed([
            start(700, true),
            relation(Some(700), OUTBOX, "outbox", false),
            insert(Some(700), OUTBOX, "a1", "A"),
            LogicalMessage::StreamStop,
            start(800, true),
            relation(Some(800), OUTBOX, "outbox", false),
            insert(Some(800), OUTBOX, "b1", "A"),
            LogicalMessage::StreamStop,
            start(700, false),
            insert(Some(700), OUTBOX, "a2", "A"),
            LogicalMessage::StreamStop,
            // A small transaction commits in between, without streaming.
            LogicalMessage::Begin(Begin {
                final_lsn: Lsn(3000),
                commit_time: 0,
                xid: 900,
            }),
            insert(None, OUTBOX, "p1", "A"),
            LogicalMessage::Commit(Commit {
                flags: 0,
                commit_lsn: Lsn(3000),
                end_lsn: Lsn(3008),
                commit_time: 0,
            }),
        ]);
        assert_eq!(h.asm.open_streams(), 2);
        assert!(h.asm.in_transaction(), "streams still open");
        h.feed([
            start(800, false),
            insert(Some(800), OUTBOX, "b2", "A"),
            LogicalMessage::StreamStop,
            commit(800, 4000),
            abort(700, 700),
        ]);
        assert_eq!(h.ids(), vec!["p1", "b1", "b2"]);
        assert!(!h.asm.in_transaction());
        h.ack_all();
        assert_eq!(h.tracker.confirmed(), Lsn(4000));
    }

    fn message(
        xid: Option<u32>,
        transactional: bool,
        prefix: &str,
        content: &str,
    ) -> LogicalMessage {
        LogicalMessage::Message(Message {
            xid,
            transactional,
            lsn: Lsn(0),
            prefix: Bytes::copy_from_slice(prefix.as_bytes()),
            content: Bytes::copy_from_slice(content.as_bytes()),
        })
    }

    fn with_messages(non_transactional: NonTransactional) -> Harness {
        let mut h = Harness::new();
        h.asm = assembler(OpInvalidBehavior::Warn).with_messages(Some(MessageSelection {
            rule: config::PrefixRule::Exact(vec!["outbox".into()]),
            non_transactional,
        }));
        h
    }

    #[test]
    fn selected_messages_interleave_with_rows_in_order() {
        let mut h = with_messages(NonTransactional::Error);
        h.feed([
            LogicalMessage::Begin(Begin {
                final_lsn: Lsn(5000),
                commit_time: 0,
                xid: 900,
            }),
            relation(None, OUTBOX, "outbox", false),
            insert(None, OUTBOX, "r1", "A"),
            message(None, true, "outbox", "m1"),
            message(None, true, "other", "ignored"),
            // walrelay's own heartbeat is never an event.
            message(None, true, "walrelay_heartbeat", ""),
            insert(None, OUTBOX, "r2", "A"),
            message(None, true, "outbox", "m2"),
            LogicalMessage::Commit(Commit {
                flags: 0,
                commit_lsn: Lsn(5000),
                end_lsn: Lsn(5008),
                commit_time: 0,
            }),
        ]);
        assert_eq!(h.ids(), vec!["r1", "m1", "r2", "m2"]);
        assert!(
            h.out.iter().all(|e| e.seq == h.out[0].seq),
            "one transaction"
        );
        assert_eq!(h.out[1].meta.commit_lsn, Lsn(5000));
        assert_eq!(h.out[1].meta.xid, 900);
        assert_eq!(h.asm.stats().messages, 2);
        assert_eq!(h.asm.stats().messages_ignored, 2);
        h.ack_all();
        assert_eq!(h.tracker.confirmed(), Lsn(5008));
    }

    #[test]
    fn messages_are_ignored_unless_selected() {
        let mut h = Harness::new();
        h.feed([
            LogicalMessage::Begin(Begin {
                final_lsn: Lsn(5000),
                commit_time: 0,
                xid: 900,
            }),
            message(None, true, "outbox", "m1"),
            LogicalMessage::Commit(Commit {
                flags: 0,
                commit_lsn: Lsn(5000),
                end_lsn: Lsn(5008),
                commit_time: 0,
            }),
            message(None, false, "outbox", "n1"),
        ]);
        assert!(h.out.is_empty());
    }

    #[test]
    fn a_non_transactional_message_is_its_own_entry() {
        let mut h = with_messages(NonTransactional::Error);
        h.feed([message(None, false, "outbox", "n1")]);
        assert_eq!(h.ids(), vec!["n1"]);
        let EventBody::Message(m) = &h.out[0].body else {
            panic!("a message event");
        };
        assert!(!m.transactional);
        // Confirmed one byte past its start once delivered, not before.
        assert_eq!(h.tracker.confirmed(), Lsn(1));
        let at = h.out[0].meta.lsn;
        h.ack_all();
        assert_eq!(h.tracker.confirmed(), Lsn(at.0 + 1));
        // "skip" drops it.
        let mut h = with_messages(NonTransactional::Skip);
        h.feed([message(None, false, "outbox", "n1")]);
        assert!(h.out.is_empty());
        assert_eq!(h.asm.stats().non_transactional_skipped, 1);
    }

    #[test]
    fn streamed_messages_are_spilled_and_read_back() {
        let mut h = with_messages(NonTransactional::Error);
        h.feed([
            start(700, true),
            relation(Some(700), OUTBOX, "outbox", false),
            insert(Some(700), OUTBOX, "r1", "A"),
            message(Some(700), true, "outbox", "m1"),
            message(Some(700), true, "other", "x"),
            LogicalMessage::StreamStop,
            commit(700, 4000),
        ]);
        assert_eq!(h.ids(), vec!["r1", "m1"]);
        h.ack_all();
        assert_eq!(h.tracker.confirmed(), Lsn(4000));
    }

    #[test]
    fn rows_use_the_relation_binding_current_when_received() {
        let mut h = Harness::new();
        h.feed([
            start(700, true),
            relation(Some(700), OUTBOX, "outbox", false),
            insert(Some(700), OUTBOX, "1", "Old"),
            LogicalMessage::StreamStop,
            start(800, true),
            // The outbox layout changes (columns swapped) in another stream.
            relation(Some(800), OUTBOX, "outbox", true),
            insert(Some(800), OUTBOX, "2", "key2"),
            LogicalMessage::StreamStop,
            start(700, false),
            insert(Some(700), OUTBOX, "3", "key3"),
            LogicalMessage::StreamStop,
            commit(700, 5000),
            commit(800, 6000),
        ]);
        assert_eq!(h.ids(), vec!["1", "3", "2"]);
        let mut router = Router::new(
            RouterConfig::default(),
            ConvertersConfig::default(),
            DebeziumConfig::default(),
        )
        .unwrap();
        let topics: Vec<String> = h
            .out
            .iter()
            .map(|e| {
                e.route(&mut router)
                    .expect("routes")
                    .0
                    .unwrap()
                    .topic
                    .to_string()
            })
            .collect();
        // Row 1 came under the old layout (aggregatetype second); rows 3 and
        // 2 under the new one (aggregatetype third, "k").
        assert_eq!(
            topics,
            vec!["outbox.event.Old", "outbox.event.k", "outbox.event.k"]
        );
    }

    #[test]
    fn update_policy_applies_only_at_commit() {
        let mut h = Harness::with(OpInvalidBehavior::Fatal);
        let update = |xid| {
            LogicalMessage::Update(Update {
                xid: Some(xid),
                relation_id: OUTBOX,
                old: None,
                new: TupleData::default(),
            })
        };
        h.feed([
            start(700, true),
            relation(Some(700), OUTBOX, "outbox", false),
            update(700),
            LogicalMessage::StreamStop,
            abort(700, 700),
            start(800, true),
            insert(Some(800), OUTBOX, "1", "A"),
            update(800),
            LogicalMessage::StreamStop,
        ]);
        let err = h.try_feed(commit(800, 9000)).unwrap_err();
        assert!(
            matches!(err, TxnError::UnexpectedUpdate { xid: 800, .. }),
            "{err}"
        );
        assert_eq!(
            h.ids(),
            vec!["1"],
            "events before the update are handed out"
        );
        // Only as far as 700's abort (its XLogData start, fifth message):
        // never into 800, whose commit failed.
        assert_eq!(h.tracker.confirmed(), Lsn(150));
    }

    #[test]
    fn abort_lsn_releases_the_aborted_transaction_and_subxact_aborts_do_not() {
        let mut h = Harness::new();
        h.feed([
            start(700, true),
            relation(Some(700), OUTBOX, "outbox", false),
            insert(Some(700), OUTBOX, "1", "A"),
            insert(Some(701), OUTBOX, "2", "A"),
            LogicalMessage::StreamStop,
            // A subtransaction's abort (protocol 4 with its LSN): nothing to release.
            LogicalMessage::StreamAbort(StreamAbort {
                xid: 700,
                subxid: 701,
                abort_lsn: Some(Lsn(5000)),
                abort_time: Some(1),
            }),
        ]);
        assert_eq!(h.tracker.confirmed(), Lsn(1));
        assert_eq!(h.asm.stats().subxact_aborts, 1);
        // The whole transaction, at the LSN the message carries rather than
        // the XLogData start.
        h.feed([LogicalMessage::StreamAbort(StreamAbort {
            xid: 700,
            subxid: 700,
            abort_lsn: Some(Lsn(6000)),
            abort_time: Some(2),
        })]);
        assert_eq!(h.tracker.confirmed(), Lsn(6000));
        assert_eq!(h.asm.stats().stream_aborts, 1);
        assert_eq!(h.asm.stats().sent_abort_lsn, 6000);
        assert!(!h.asm.in_transaction());
        assert!(h.ids().is_empty());
    }

    #[test]
    fn abort_waits_behind_undelivered_transactions() {
        let mut h = Harness::new();
        h.feed([
            LogicalMessage::Begin(Begin {
                final_lsn: Lsn(140),
                commit_time: 0,
                xid: 10,
            }),
            relation(None, OUTBOX, "outbox", false),
            insert(None, OUTBOX, "1", "A"),
            LogicalMessage::Commit(Commit {
                flags: 0,
                commit_lsn: Lsn(140),
                end_lsn: Lsn(145),
                commit_time: 0,
            }),
            start(700, true),
            insert(Some(700), OUTBOX, "2", "A"),
            LogicalMessage::StreamStop,
            abort(700, 700),
        ]);
        // The abort's position (the XLogData start) waits for event 1.
        assert_eq!(h.tracker.confirmed(), Lsn(1));
        h.ack_all();
        assert_eq!(h.tracker.confirmed(), Lsn(h.lsn));
        assert_eq!(h.ids(), vec!["1"]);
    }

    #[test]
    fn protocol_violations_are_errors() {
        let mut h = Harness::new();
        assert!(matches!(
            h.try_feed(start(700, false)),
            Err(TxnError::UnknownStream { .. })
        ));
        assert!(matches!(
            h.try_feed(LogicalMessage::StreamStop),
            Err(TxnError::Protocol { .. })
        ));
        h.feed([start(700, true)]);
        assert!(matches!(
            h.try_feed(LogicalMessage::Begin(Begin {
                final_lsn: Lsn(1),
                commit_time: 0,
                xid: 1
            })),
            Err(TxnError::Protocol { .. })
        ));
    }
    fn with_metadata() -> Harness {
        use crate::connect::config::ConverterKind;
        use crate::connect::convert::Converter;
        let json = Converter {
            kind: ConverterKind::Json,
            schemas_enable: false,
        };
        let topic =
            TransactionTopic::new("app.transaction", json, json).expect("json writes structs");
        let mut h = Harness::new();
        h.asm = assembler(OpInvalidBehavior::Warn)
            .with_messages(Some(MessageSelection {
                rule: config::PrefixRule::Exact(vec!["outbox".into()]),
                non_transactional: NonTransactional::Deliver,
            }))
            .with_transaction_metadata(Some(Metadata {
                topic: Arc::new(topic),
                count_updates: true,
                count_deletes: true,
            }));
        h
    }

    fn begin(xid: u32) -> LogicalMessage {
        LogicalMessage::Begin(Begin {
            final_lsn: Lsn(0),
            commit_time: 0,
            xid,
        })
    }

    fn end_commit(end: u64) -> LogicalMessage {
        LogicalMessage::Commit(Commit {
            flags: 0,
            commit_lsn: Lsn(end - 8),
            end_lsn: Lsn(end),
            commit_time: 0,
        })
    }

    fn delete(relation_id: u32) -> LogicalMessage {
        LogicalMessage::Delete(walrelay_proto::pgoutput::Delete {
            xid: None,
            relation_id,
            old: OldTuple::Key(TupleData::default()),
        })
    }

    const SECOND: u32 = 16500;

    /// A second outbox table of another shape: `public.second (event_id,
    /// kind, account, body)`.
    fn second_relation() -> LogicalMessage {
        let col = |name: &str, type_oid: u32| RelationColumn {
            flags: 0,
            name: Bytes::copy_from_slice(name.as_bytes()),
            type_oid,
            type_modifier: -1,
        };
        LogicalMessage::Relation(Relation {
            xid: None,
            id: SECOND,
            namespace: Bytes::from_static(b"public"),
            name: Bytes::from_static(b"second"),
            replica_identity: b'd',
            columns: vec![
                col("event_id", oid::VARCHAR),
                col("kind", oid::VARCHAR),
                col("account", oid::VARCHAR),
                col("body", oid::TEXT),
            ],
        })
    }

    fn second_insert(id: &str, kind: &str, account: &str) -> LogicalMessage {
        LogicalMessage::Insert(Insert {
            xid: None,
            relation_id: SECOND,
            new: TupleData {
                columns: vec![text(id), text(kind), text(account), text("b")],
            },
        })
    }

    /// `public.outbox` with `[router]`'s columns and `public.second` with
    /// its own.
    fn two_tables(op_invalid: OpInvalidBehavior) -> (Harness, Router) {
        let router = Router::new(
            RouterConfig::default(),
            ConvertersConfig::default(),
            DebeziumConfig::default(),
        )
        .expect("default router config is valid");
        let own = router
            .mapping(&crate::router::ColumnOverrides {
                id_field: Some("event_id".into()),
                key_field: Some("account".into()),
                payload_field: Some("body".into()),
                route_by_field: Some("kind".into()),
                ..Default::default()
            })
            .expect("valid overrides");
        let table = |name: &str, columns| OutboxTable {
            schema: "public".into(),
            table: name.into(),
            columns,
            meta: TableMeta::unknown(),
        };
        let mut h = Harness::with(op_invalid);
        h.asm = Assembler::new(
            vec![
                table("outbox", Arc::clone(router.columns())),
                table("second", own),
            ],
            router.clone(),
            op_invalid,
        );
        (h, router)
    }

    #[test]
    fn several_tables_interleave_in_wal_order_each_with_its_columns() {
        let (mut h, mut router) = two_tables(OpInvalidBehavior::Warn);
        h.feed([
            relation(None, OUTBOX, "outbox", false),
            second_relation(),
            relation(None, OTHER, "other", false),
            begin(7),
            insert(None, OUTBOX, "1", "A"),
            second_insert("2", "B", "acct-9"),
            insert(None, OTHER, "x", "x"),
            insert(None, OUTBOX, "3", "A"),
            second_insert("4", "B", "acct-9"),
            end_commit(200),
        ]);
        let routed: Vec<(String, String, String)> = h
            .out
            .iter()
            .map(|e| {
                let (record, id) = e.route(&mut router).expect("routes");
                let record = record.expect("not dropped");
                let key = String::from_utf8(record.key.expect("a key").to_vec()).unwrap();
                (record.topic.to_string(), key, id.expect("an id"))
            })
            .collect();
        assert_eq!(
            routed,
            [
                ("outbox.event.A".into(), "k".into(), "1".into()),
                ("outbox.event.B".into(), "acct-9".into(), "2".into()),
                ("outbox.event.A".into(), "k".into(), "3".into()),
                ("outbox.event.B".into(), "acct-9".into(), "4".into()),
            ]
        );
        assert_eq!(h.out[1].origin(), "public.second");
        // One transaction, one tracker entry, confirmed once all four are.
        assert!(h.out.iter().all(|e| e.seq == h.out[0].seq));
        assert_eq!(h.asm.stats().other_ignored, 1);
        h.ack_all();
        assert_eq!(h.tracker.confirmed(), Lsn(200));
    }

    #[test]
    fn an_update_of_any_outbox_table_follows_the_policy_naming_it() {
        let (mut h, _) = two_tables(OpInvalidBehavior::Fatal);
        h.feed([second_relation(), begin(7)]);
        let update = LogicalMessage::Update(Update {
            xid: None,
            relation_id: SECOND,
            old: None,
            new: TupleData::default(),
        });
        match h.try_feed(update) {
            Err(TxnError::UnexpectedUpdate { table, .. }) => assert_eq!(table, "public.second"),
            other => panic!("expected a fatal update, got {other:?}"),
        }
    }

    #[test]
    fn transaction_metadata_counts_each_table_as_its_collection() {
        let (mut h, _) = two_tables(OpInvalidBehavior::Warn);
        let with = with_metadata();
        h.asm = h.asm.with_transaction_metadata(with.asm.metadata.clone());
        h.feed([
            relation(None, OUTBOX, "outbox", false),
            second_relation(),
            begin(7),
            insert(None, OUTBOX, "1", "A"),
            second_insert("2", "B", "a"),
            second_insert("3", "B", "a"),
            delete(SECOND),
            end_commit(200),
        ]);
        let Some(EventBody::Transaction {
            marker:
                Marker::End {
                    event_count,
                    data_collections,
                    ..
                },
            ..
        }) = h.out.last().map(|e| &e.body)
        else {
            panic!("no END: {:?}", h.ids());
        };
        assert_eq!(*event_count, 4);
        let mut per = data_collections.clone();
        per.sort();
        assert_eq!(
            per,
            vec![
                (Arc::from("public.outbox"), 1),
                (Arc::from("public.second"), 3)
            ]
        );
    }

    #[test]
    fn transaction_metadata_brackets_every_transaction_and_counts_as_debezium() {
        let mut h = with_metadata();
        // The harness's XLogData starts: each message 10 past the one
        // before, from 110.
        h.feed([
            relation(None, OUTBOX, "outbox", false),
            relation(None, OTHER, "other", false),
            // 130..170: insert and delete (2 events), another table (none).
            begin(7),
            insert(None, OUTBOX, "1", "A"),
            delete(OUTBOX),
            insert(None, OTHER, "x", "x"),
            end_commit(170),
            // 180..200: only another table: BEGIN and END, no events.
            begin(8),
            insert(None, OTHER, "y", "y"),
            end_commit(200),
            // 210..230: only walrelay's heartbeat: nothing.
            begin(9),
            message(None, true, config::HEARTBEAT_MESSAGE_PREFIX, ""),
            end_commit(230),
            // 240..270: two messages, each a collection of its own.
            begin(10),
            message(None, true, "outbox", "m1"),
            message(None, true, "outbox", "m2"),
            end_commit(270),
        ]);
        assert_eq!(
            h.ids(),
            vec![
                "BEGIN 7:130",
                "1",
                "END 7:170",
                "BEGIN 8:180",
                "END 8:200",
                "BEGIN 10:240",
                "m1",
                "m2",
                "END 10:270",
            ]
        );
        let end = |i: usize| match &h.out[i].body {
            EventBody::Transaction {
                marker:
                    Marker::End {
                        event_count,
                        data_collections,
                        ..
                    },
                ..
            } => (*event_count, data_collections.clone()),
            other => panic!("not an END: {other:?}"),
        };
        assert_eq!(end(2), (2, vec![(Arc::from("public.outbox"), 2)]));
        assert_eq!(end(4), (0, vec![]));
        let (n, per) = end(8);
        assert_eq!(n, 2);
        assert_eq!(per.len(), 2, "a collection per message: {per:?}");
        assert!(per
            .iter()
            .all(|(c, n)| *n == 1 && c.starts_with(metadata::MESSAGE_COLLECTION_CLASS)));
        let block = |i: usize| match &h.out[i].body {
            EventBody::Message(m) => m.transaction.clone().expect("a block"),
            other => panic!("not a message: {other:?}"),
        };
        assert_eq!(
            (
                block(6).id.as_str(),
                block(6).total_order,
                block(6).data_collection_order
            ),
            ("10:250", 1, 1)
        );
        assert_eq!(
            (block(7).total_order, block(7).data_collection_order),
            (2, 1)
        );
        // Every record belongs to its transaction: confirmed only once all
        // of them, BEGIN and END included, were acknowledged.
        let t7 = h.out[0].seq;
        assert!(h.out[..3].iter().all(|e| e.seq == t7));
        for e in &h.out[..2] {
            h.tracker.ack(e.seq, 1);
        }
        assert_eq!(
            h.tracker.confirmed(),
            Lsn(1),
            "END of xid 7 not acknowledged"
        );
        h.ack_all();
        assert_eq!(h.tracker.confirmed(), Lsn(270));
    }
}
