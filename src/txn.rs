//! Transaction assembly: pgoutput messages in, outbox events out.
//!
//! Owns the relation cache of one replication session, recognises the
//! outbox table by schema and table name, turns its INSERTs into events,
//! drops its DELETEs (the insert-and-delete outbox pattern yields exactly one
//! event), applies Debezium's `table.op.invalid.behavior` to its UPDATEs and
//! ignores TRUNCATE and every other table. It registers each transaction with
//! the checkpoint tracker *before* its events leave this stage, so the
//! tracker always knows at least as much as the sink. It never routes,
//! produces or confirms anything.

use std::collections::HashMap;
use std::sync::Arc;

use tracing::{error, warn};
use walrelay_proto::pgoutput::{LogicalMessage, TupleData};
use walrelay_proto::{pg_micros_to_unix_micros, Lsn, RelationCache};

use crate::checkpoint::{SharedTracker, TxnSeq};
use crate::config::OpInvalidBehavior;
use crate::connect::pg::TableMeta;
use crate::router::{BoundRelation, EventMeta, RouteError, Router};

/// One outbox row on its way to Kafka.
#[derive(Debug, Clone)]
pub struct OutboxEvent {
    /// The transaction's entry in the checkpoint tracker.
    pub seq: TxnSeq,
    /// Where it came from.
    pub meta: EventMeta,
    /// The outbox relation with the router's columns resolved.
    pub bound: Arc<BoundRelation>,
    /// The inserted row.
    pub row: TupleData,
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
        /// The relation id.
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
    /// The outbox table's columns no longer fit the routing configuration.
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
        /// Table.
        table: String,
        /// Position.
        lsn: Lsn,
        /// Transaction.
        xid: u32,
    },
    /// A message this pipeline never asks for (streaming, two-phase).
    #[error("unexpected {what} message at lsn {lsn}: walrelay did not request it")]
    Unexpected {
        /// Message kind.
        what: &'static str,
        /// Position.
        lsn: Lsn,
    },
}

#[derive(Debug)]
struct OpenTxn {
    seq: TxnSeq,
    xid: u32,
    final_lsn: Lsn,
    commit_time_us: i64,
    /// Events handed out but not yet registered with the tracker.
    unregistered: u32,
    /// Events of this transaction so far.
    events: u32,
}

/// Counters the assembler keeps for metrics.
#[derive(Debug, Default, Clone, Copy)]
pub struct AssemblyStats {
    /// Outbox inserts turned into events.
    pub events: u64,
    /// Committed transactions.
    pub transactions: u64,
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
}

/// Per-session transaction assembler.
pub struct Assembler {
    schema: String,
    table: String,
    router: Router,
    /// Catalog facts about the outbox columns, read at session start.
    table_meta: TableMeta,
    op_invalid: OpInvalidBehavior,
    relations: RelationCache,
    /// Outbox relations (by relation id) with the router's columns bound.
    outbox: HashMap<u32, Arc<BoundRelation>>,
    current: Option<OpenTxn>,
    stats: AssemblyStats,
}

impl Assembler {
    /// A fresh assembler for one replication session; `router` is only used
    /// to bind columns.
    pub fn new(
        schema: String,
        table: String,
        router: Router,
        table_meta: TableMeta,
        op_invalid: OpInvalidBehavior,
    ) -> Self {
        Assembler {
            schema,
            table,
            router,
            table_meta,
            op_invalid,
            relations: RelationCache::new(),
            outbox: HashMap::new(),
            current: None,
            stats: AssemblyStats::default(),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> AssemblyStats {
        self.stats
    }

    /// Whether a transaction is open (BEGIN seen, COMMIT not yet).
    pub fn in_transaction(&self) -> bool {
        self.current.is_some()
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
        match msg {
            LogicalMessage::Begin(b) => {
                let commit_time_us = pg_micros_to_unix_micros(b.commit_time);
                let seq = tracker.begin(commit_time_us);
                self.current = Some(OpenTxn {
                    seq,
                    xid: b.xid,
                    final_lsn: b.final_lsn,
                    commit_time_us,
                    unregistered: 0,
                    events: 0,
                });
            }
            LogicalMessage::Commit(c) => {
                let txn = self.current.take().ok_or(TxnError::OutsideTransaction {
                    what: "COMMIT",
                    lsn,
                })?;
                tracker.add_and_commit(txn.seq, txn.unregistered, c.end_lsn);
                self.stats.transactions += 1;
                if txn.events > 0 {
                    self.stats.relayed_transactions += 1;
                }
            }
            LogicalMessage::Relation(rel) => {
                let info = self.relations.apply(&rel);
                if info.namespace == self.schema && info.name == self.table {
                    let bound = self
                        .router
                        .bind(&info, &self.table_meta)
                        .map_err(|source| TxnError::Layout { lsn, source })?;
                    self.outbox.insert(info.id, Arc::new(bound));
                } else {
                    self.outbox.remove(&info.id);
                }
            }
            LogicalMessage::Insert(ins) => {
                let txn = self.current.as_mut().ok_or(TxnError::OutsideTransaction {
                    what: "INSERT",
                    lsn,
                })?;
                match self.outbox.get(&ins.relation_id) {
                    Some(bound) => {
                        out.push(OutboxEvent {
                            seq: txn.seq,
                            meta: EventMeta {
                                lsn,
                                commit_lsn: txn.final_lsn,
                                xid: txn.xid,
                                commit_time_us: txn.commit_time_us,
                            },
                            bound: Arc::clone(bound),
                            row: ins.new,
                        });
                        txn.unregistered += 1;
                        txn.events += 1;
                        self.stats.events += 1;
                    }
                    None => self.ignore_other(ins.relation_id, lsn)?,
                }
            }
            LogicalMessage::Update(upd) => {
                if self.outbox.contains_key(&upd.relation_id) {
                    let xid = self.current.as_ref().map(|t| t.xid).unwrap_or_default();
                    let table = format!("{}.{}", self.schema, self.table);
                    match self.op_invalid {
                        OpInvalidBehavior::Warn => {
                            warn!(%lsn, xid, table, "unexpected update of an outbox row, dropped (outbox.op_invalid_behavior = warn)")
                        }
                        OpInvalidBehavior::Error => {
                            error!(%lsn, xid, table, "unexpected update of an outbox row, dropped (outbox.op_invalid_behavior = error)")
                        }
                        OpInvalidBehavior::Fatal => {
                            return Err(TxnError::UnexpectedUpdate { table, lsn, xid })
                        }
                    }
                    self.stats.updates_dropped += 1;
                } else {
                    self.ignore_other(upd.relation_id, lsn)?;
                }
            }
            LogicalMessage::Delete(del) => {
                if self.outbox.contains_key(&del.relation_id) {
                    self.stats.deletes_dropped += 1;
                } else {
                    self.ignore_other(del.relation_id, lsn)?;
                }
            }
            LogicalMessage::Truncate(_) => self.stats.truncates_ignored += 1,
            // Logical decoding messages, origins and types carry no outbox events.
            LogicalMessage::Message(_) | LogicalMessage::Origin(_) | LogicalMessage::Type(_) => {}
            LogicalMessage::StreamStart(_)
            | LogicalMessage::StreamStop
            | LogicalMessage::StreamCommit(_)
            | LogicalMessage::StreamAbort(_) => {
                return Err(TxnError::Unexpected {
                    what: "streaming",
                    lsn,
                })
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

    /// Registers events handed out since the last call with the tracker;
    /// call before the events leave this stage.
    pub fn register_pending(&mut self, tracker: &SharedTracker) {
        if let Some(txn) = self.current.as_mut() {
            if txn.unregistered > 0 {
                tracker.add_events(txn.seq, txn.unregistered);
                txn.unregistered = 0;
            }
        }
    }

    fn ignore_other(&mut self, relation_id: u32, lsn: Lsn) -> Result<(), TxnError> {
        if self.relations.get(relation_id).is_none() {
            return Err(TxnError::UnknownRelation { lsn, relation_id });
        }
        self.stats.other_ignored += 1;
        Ok(())
    }
}
