//! pgoutput logical replication messages, protocol versions 1 to 4.
//!
//! Owns the decoding of the `data` of an XLogData produced by the `pgoutput`
//! plugin, byte for byte as PostgreSQL 15's
//! `src/backend/replication/logical/proto.c` writes it (plus the v4 abort
//! fields of PostgreSQL 16), documented in "Logical Replication Message
//! Formats". Strings (names, prefixes, gids) and column values are zero-copy
//! slices of the input without their NUL terminator. It never performs I/O,
//! never interprets column values (that needs the relation and the type) and
//! never panics on input: every malformed message gives a [`DecodeError`]
//! with the offset counted from the message's tag byte.

use bytes::Bytes;

use crate::wire::Reader;
use crate::{DecodeError, Lsn};

/// Decoder state that must be carried across messages: the negotiated protocol
/// version and whether we are inside a Stream Start .. Stream Stop block
/// (inside one, Relation/Type/Insert/Update/Delete/Truncate/Message carry a leading xid).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecoderState {
    /// The `proto_version` given to `START_REPLICATION` (1 to 4).
    pub proto_version: u32,
    /// Whether the last Stream Start has not been closed by a Stream Stop.
    pub in_stream: bool,
}

impl DecoderState {
    /// State at the start of a replication session: outside any stream block.
    pub fn new(proto_version: u32) -> Self {
        DecoderState {
            proto_version,
            in_stream: false,
        }
    }
}

/// Decodes one pgoutput message (the `data` of an XLogData) and updates `in_stream`
/// on StreamStart/StreamStop.
pub fn decode(state: &mut DecoderState, buf: Bytes) -> Result<LogicalMessage, DecodeError> {
    let msg = decode_message(buf, state.proto_version, state.in_stream)?;
    match msg {
        LogicalMessage::StreamStart(_) => state.in_stream = true,
        LogicalMessage::StreamStop => state.in_stream = false,
        _ => {}
    }
    Ok(msg)
}

/// One pgoutput message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogicalMessage {
    /// `B`: a transaction starts.
    Begin(Begin),
    /// `C`: the transaction started by the last Begin commits.
    Commit(Commit),
    /// `O`: the transaction came from another node (replication origin).
    Origin(Origin),
    /// `R`: describes a relation before its first change in a session.
    Relation(Relation),
    /// `Y`: describes a non-built-in data type.
    Type(TypeMessage),
    /// `I`: a row was inserted.
    Insert(Insert),
    /// `U`: a row was updated.
    Update(Update),
    /// `D`: a row was deleted.
    Delete(Delete),
    /// `T`: tables were truncated.
    Truncate(Truncate),
    /// `M`: a logical decoding message (`pg_logical_emit_message`).
    Message(Message),
    /// `S`: a block of a large in-progress transaction starts (v2+).
    StreamStart(StreamStart),
    /// `E`: the current stream block ends (v2+).
    StreamStop,
    /// `c`: a streamed transaction commits (v2+).
    StreamCommit(StreamCommit),
    /// `A`: a streamed (sub)transaction aborts (v2+).
    StreamAbort(StreamAbort),
    /// `b`: a prepared transaction starts (v3+, two_phase).
    BeginPrepare(BeginPrepare),
    /// `P`: the transaction started by Begin Prepare is prepared (v3+).
    Prepare(Prepare),
    /// `K`: a prepared transaction commits (v3+).
    CommitPrepared(CommitPrepared),
    /// `r`: a prepared transaction is rolled back (v3+).
    RollbackPrepared(RollbackPrepared),
    /// `p`: a streamed transaction is prepared (v3+).
    StreamPrepare(StreamPrepare),
}

impl LogicalMessage {
    /// The message's name, as in PostgreSQL's documentation, for logs and
    /// errors ("Begin", "Stream Commit", ...).
    pub fn kind(&self) -> &'static str {
        match self {
            LogicalMessage::Begin(_) => "Begin",
            LogicalMessage::Commit(_) => "Commit",
            LogicalMessage::Origin(_) => "Origin",
            LogicalMessage::Relation(_) => "Relation",
            LogicalMessage::Type(_) => "Type",
            LogicalMessage::Insert(_) => "Insert",
            LogicalMessage::Update(_) => "Update",
            LogicalMessage::Delete(_) => "Delete",
            LogicalMessage::Truncate(_) => "Truncate",
            LogicalMessage::Message(_) => "Message",
            LogicalMessage::StreamStart(_) => "Stream Start",
            LogicalMessage::StreamStop => "Stream Stop",
            LogicalMessage::StreamCommit(_) => "Stream Commit",
            LogicalMessage::StreamAbort(_) => "Stream Abort",
            LogicalMessage::BeginPrepare(_) => "Begin Prepare",
            LogicalMessage::Prepare(_) => "Prepare",
            LogicalMessage::CommitPrepared(_) => "Commit Prepared",
            LogicalMessage::RollbackPrepared(_) => "Rollback Prepared",
            LogicalMessage::StreamPrepare(_) => "Stream Prepare",
        }
    }
}

/// `B`: Begin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Begin {
    /// The LSN of the commit record of the transaction.
    pub final_lsn: Lsn,
    /// Commit timestamp, µs since 2000-01-01 UTC.
    pub commit_time: i64,
    /// Transaction id.
    pub xid: u32,
}

/// `C`: Commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    /// Currently unused (0).
    pub flags: u8,
    /// The LSN of the commit record.
    pub commit_lsn: Lsn,
    /// The end LSN of the transaction: the position to confirm once handled.
    pub end_lsn: Lsn,
    /// Commit timestamp, µs since 2000-01-01 UTC.
    pub commit_time: i64,
}

/// `O`: Origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The LSN of the commit on the origin server.
    pub commit_lsn: Lsn,
    /// Name of the origin.
    pub name: Bytes,
}

/// `R`: Relation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    /// Transaction id, present only inside a stream block.
    pub xid: Option<u32>,
    /// Relation OID.
    pub id: u32,
    /// Namespace (schema) name; empty for `pg_catalog`.
    pub namespace: Bytes,
    /// Relation name.
    pub name: Bytes,
    /// Replica identity setting: `d` default, `n` nothing, `f` full, `i` index.
    pub replica_identity: u8,
    /// The published columns, in tuple order.
    pub columns: Vec<RelationColumn>,
}

/// One column of a [`Relation`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelationColumn {
    /// Bit 1: part of the key.
    pub flags: u8,
    /// Column name.
    pub name: Bytes,
    /// OID of the column's data type.
    pub type_oid: u32,
    /// Type modifier (`atttypmod`), -1 when none.
    pub type_modifier: i32,
}

impl RelationColumn {
    /// Whether the column is part of the replica identity key.
    pub fn is_key(&self) -> bool {
        self.flags & 1 != 0
    }
}

/// `Y`: Type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeMessage {
    /// Transaction id, present only inside a stream block.
    pub xid: Option<u32>,
    /// Type OID.
    pub id: u32,
    /// Namespace (schema) name; empty for `pg_catalog`.
    pub namespace: Bytes,
    /// Type name.
    pub name: Bytes,
}

/// `I`: Insert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insert {
    /// Transaction id, present only inside a stream block.
    pub xid: Option<u32>,
    /// OID of the relation, announced by an earlier Relation message.
    pub relation_id: u32,
    /// The new row.
    pub new: TupleData,
}

/// `U`: Update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    /// Transaction id, present only inside a stream block.
    pub xid: Option<u32>,
    /// OID of the relation.
    pub relation_id: u32,
    /// The old key (`K`, when the key changed) or the old row (`O`, replica
    /// identity full); absent otherwise.
    pub old: Option<OldTuple>,
    /// The new row.
    pub new: TupleData,
}

/// The old row of an Update or Delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OldTuple {
    /// `K`: only the replica identity key columns are set.
    Key(TupleData),
    /// `O`: the whole old row (replica identity full).
    Full(TupleData),
}

impl OldTuple {
    /// The tuple, whichever kind it is.
    pub fn tuple(&self) -> &TupleData {
        match self {
            OldTuple::Key(t) | OldTuple::Full(t) => t,
        }
    }
}

/// `D`: Delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delete {
    /// Transaction id, present only inside a stream block.
    pub xid: Option<u32>,
    /// OID of the relation.
    pub relation_id: u32,
    /// The old key or old row.
    pub old: OldTuple,
}

/// `T`: Truncate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncate {
    /// Transaction id, present only inside a stream block.
    pub xid: Option<u32>,
    /// Bit 1: `CASCADE`, bit 2: `RESTART IDENTITY`.
    pub options: u8,
    /// OIDs of the truncated relations.
    pub relation_ids: Vec<u32>,
}

impl Truncate {
    /// `TRUNCATE ... CASCADE`.
    pub fn cascade(&self) -> bool {
        self.options & 1 != 0
    }

    /// `TRUNCATE ... RESTART IDENTITY`.
    pub fn restart_identity(&self) -> bool {
        self.options & 2 != 0
    }
}

/// `M`: logical decoding message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Transaction id, present only inside a stream block.
    pub xid: Option<u32>,
    /// Emitted inside a transaction (delivered with it) rather than at once.
    pub transactional: bool,
    /// The LSN of the message.
    pub lsn: Lsn,
    /// The prefix given to `pg_logical_emit_message`.
    pub prefix: Bytes,
    /// The content.
    pub content: Bytes,
}

/// `S`: Stream Start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamStart {
    /// Transaction id of the streamed top-level transaction.
    pub xid: u32,
    /// The first block of this transaction.
    pub first_segment: bool,
}

/// `c`: Stream Commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamCommit {
    /// Transaction id.
    pub xid: u32,
    /// Currently unused (0).
    pub flags: u8,
    /// The LSN of the commit record.
    pub commit_lsn: Lsn,
    /// The end LSN of the transaction.
    pub end_lsn: Lsn,
    /// Commit timestamp, µs since 2000-01-01 UTC.
    pub commit_time: i64,
}

/// `A`: Stream Abort.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamAbort {
    /// Transaction id of the top-level transaction.
    pub xid: u32,
    /// Transaction id of the aborted subtransaction (equal to `xid` when the
    /// whole transaction aborts).
    pub subxid: u32,
    /// LSN of the abort; only protocol version 4, and only when the server
    /// writes it (PostgreSQL 16 does for `streaming = parallel`).
    pub abort_lsn: Option<Lsn>,
    /// Abort timestamp, µs since 2000-01-01 UTC; same availability as
    /// `abort_lsn`.
    pub abort_time: Option<i64>,
}

/// `b`: Begin Prepare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BeginPrepare {
    /// The LSN of the prepare record.
    pub prepare_lsn: Lsn,
    /// The end LSN of the prepared transaction.
    pub end_lsn: Lsn,
    /// Prepare timestamp, µs since 2000-01-01 UTC.
    pub prepare_time: i64,
    /// Transaction id.
    pub xid: u32,
    /// The user-defined global transaction id.
    pub gid: Bytes,
}

/// `P`: Prepare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepare {
    /// Currently unused (0).
    pub flags: u8,
    /// The LSN of the prepare record.
    pub prepare_lsn: Lsn,
    /// The end LSN of the prepared transaction.
    pub end_lsn: Lsn,
    /// Prepare timestamp, µs since 2000-01-01 UTC.
    pub prepare_time: i64,
    /// Transaction id.
    pub xid: u32,
    /// The user-defined global transaction id.
    pub gid: Bytes,
}

/// `K`: Commit Prepared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitPrepared {
    /// Currently unused (0).
    pub flags: u8,
    /// The LSN of the commit prepared record.
    pub commit_lsn: Lsn,
    /// The end LSN of the commit prepared transaction.
    pub end_lsn: Lsn,
    /// Commit timestamp, µs since 2000-01-01 UTC.
    pub commit_time: i64,
    /// Transaction id.
    pub xid: u32,
    /// The user-defined global transaction id.
    pub gid: Bytes,
}

/// `r`: Rollback Prepared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollbackPrepared {
    /// Currently unused (0).
    pub flags: u8,
    /// The end LSN of the prepared transaction.
    pub prepare_end_lsn: Lsn,
    /// The end LSN of the rollback prepared transaction.
    pub rollback_end_lsn: Lsn,
    /// Prepare timestamp, µs since 2000-01-01 UTC.
    pub prepare_time: i64,
    /// Rollback timestamp, µs since 2000-01-01 UTC.
    pub rollback_time: i64,
    /// Transaction id.
    pub xid: u32,
    /// The user-defined global transaction id.
    pub gid: Bytes,
}

/// `p`: Stream Prepare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamPrepare {
    /// Currently unused (0).
    pub flags: u8,
    /// The LSN of the prepare record.
    pub prepare_lsn: Lsn,
    /// The end LSN of the prepared transaction.
    pub end_lsn: Lsn,
    /// Prepare timestamp, µs since 2000-01-01 UTC.
    pub prepare_time: i64,
    /// Transaction id.
    pub xid: u32,
    /// The user-defined global transaction id.
    pub gid: Bytes,
}

/// The columns of one row, in the relation's column order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TupleData {
    /// One value per column.
    pub columns: Vec<ColumnValue>,
}

impl TupleData {
    /// The value of column `i`, if the tuple has that many columns.
    pub fn get(&self, i: usize) -> Option<&ColumnValue> {
        self.columns.get(i)
    }

    /// Number of columns.
    pub fn len(&self) -> usize {
        self.columns.len()
    }

    /// Whether the tuple has no columns.
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// The values in column order.
    pub fn iter(&self) -> std::slice::Iter<'_, ColumnValue> {
        self.columns.iter()
    }
}

/// One column of a [`TupleData`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnValue {
    /// `n`: SQL NULL.
    Null,
    /// `u`: an unchanged TOASTed value; the actual value is not sent.
    UnchangedToast,
    /// `t`: the value in the type's text format.
    Text(Bytes),
    /// `b`: the value in the type's binary format (`binary = true`).
    Binary(Bytes),
}

impl ColumnValue {
    /// The payload of a Text or Binary value; `None` for Null and UnchangedToast.
    pub fn as_bytes(&self) -> Option<&Bytes> {
        match self {
            ColumnValue::Text(b) | ColumnValue::Binary(b) => Some(b),
            ColumnValue::Null | ColumnValue::UnchangedToast => None,
        }
    }
}

/// Refuses a message the negotiated protocol version cannot carry: the server
/// never sends one, so seeing it means the stream or the state is wrong.
fn require_version(proto_version: u32, min: u32, what: &'static str) -> Result<(), DecodeError> {
    if proto_version < min {
        return Err(DecodeError::Invalid {
            what,
            offset: 0,
            reason: match min {
                2 => "message requires protocol version 2 or later",
                _ => "message requires protocol version 3 or later",
            },
        });
    }
    Ok(())
}

/// Pure variant with an explicit flag; does not touch state.
pub fn decode_message(
    buf: Bytes,
    proto_version: u32,
    in_stream: bool,
) -> Result<LogicalMessage, DecodeError> {
    if !(1..=4).contains(&proto_version) {
        return Err(DecodeError::UnsupportedVersion {
            version: proto_version,
        });
    }
    let mut r = Reader::new(buf);
    let tag = r.u8("pgoutput message tag")?;
    // proto.c writes the xid of these messages only while streaming.
    let stream_xid = |r: &mut Reader, what: &'static str| -> Result<Option<u32>, DecodeError> {
        if in_stream {
            r.u32(what).map(Some)
        } else {
            Ok(None)
        }
    };
    let (what, msg) = match tag {
        b'B' => (
            "begin message",
            LogicalMessage::Begin(Begin {
                final_lsn: r.lsn("begin final lsn")?,
                commit_time: r.i64("begin commit time")?,
                xid: r.u32("begin xid")?,
            }),
        ),
        b'C' => (
            "commit message",
            LogicalMessage::Commit(Commit {
                flags: r.u8("commit flags")?,
                commit_lsn: r.lsn("commit lsn")?,
                end_lsn: r.lsn("commit end lsn")?,
                commit_time: r.i64("commit time")?,
            }),
        ),
        b'O' => (
            "origin message",
            LogicalMessage::Origin(Origin {
                commit_lsn: r.lsn("origin commit lsn")?,
                name: r.cstring("origin name")?,
            }),
        ),
        b'R' => (
            "relation message",
            LogicalMessage::Relation(relation(&mut r, in_stream)?),
        ),
        b'Y' => (
            "type message",
            LogicalMessage::Type(TypeMessage {
                xid: stream_xid(&mut r, "type xid")?,
                id: r.u32("type oid")?,
                namespace: r.cstring("type namespace")?,
                name: r.cstring("type name")?,
            }),
        ),
        b'I' => {
            let xid = stream_xid(&mut r, "insert xid")?;
            let relation_id = r.u32("insert relation id")?;
            let kind_offset = r.offset();
            match r.u8("insert tuple kind")? {
                b'N' => {}
                other => {
                    return Err(DecodeError::UnknownTag {
                        what: "insert tuple kind",
                        tag: other,
                        offset: kind_offset,
                    })
                }
            }
            let new = tuple(&mut r)?;
            (
                "insert message",
                LogicalMessage::Insert(Insert {
                    xid,
                    relation_id,
                    new,
                }),
            )
        }
        b'U' => {
            let xid = stream_xid(&mut r, "update xid")?;
            let relation_id = r.u32("update relation id")?;
            let kind_offset = r.offset();
            let old = match r.u8("update tuple kind")? {
                b'K' => Some(OldTuple::Key(tuple(&mut r)?)),
                b'O' => Some(OldTuple::Full(tuple(&mut r)?)),
                b'N' => None,
                other => {
                    return Err(DecodeError::UnknownTag {
                        what: "update tuple kind",
                        tag: other,
                        offset: kind_offset,
                    })
                }
            };
            if old.is_some() {
                let new_offset = r.offset();
                match r.u8("update new tuple kind")? {
                    b'N' => {}
                    other => {
                        return Err(DecodeError::UnknownTag {
                            what: "update new tuple kind",
                            tag: other,
                            offset: new_offset,
                        })
                    }
                }
            }
            let new = tuple(&mut r)?;
            (
                "update message",
                LogicalMessage::Update(Update {
                    xid,
                    relation_id,
                    old,
                    new,
                }),
            )
        }
        b'D' => {
            let xid = stream_xid(&mut r, "delete xid")?;
            let relation_id = r.u32("delete relation id")?;
            let kind_offset = r.offset();
            let old = match r.u8("delete tuple kind")? {
                b'K' => OldTuple::Key(tuple(&mut r)?),
                b'O' => OldTuple::Full(tuple(&mut r)?),
                other => {
                    return Err(DecodeError::UnknownTag {
                        what: "delete tuple kind",
                        tag: other,
                        offset: kind_offset,
                    })
                }
            };
            (
                "delete message",
                LogicalMessage::Delete(Delete {
                    xid,
                    relation_id,
                    old,
                }),
            )
        }
        b'T' => {
            let xid = stream_xid(&mut r, "truncate xid")?;
            let count = r.len_i32("truncate relation count")?;
            let options = r.u8("truncate options")?;
            // Never trust a count for an allocation: at most one id per 4 bytes left.
            let mut relation_ids = Vec::with_capacity(count.min(r.remaining() / 4));
            for _ in 0..count {
                relation_ids.push(r.u32("truncate relation id")?);
            }
            (
                "truncate message",
                LogicalMessage::Truncate(Truncate {
                    xid,
                    options,
                    relation_ids,
                }),
            )
        }
        b'M' => {
            let xid = stream_xid(&mut r, "message xid")?;
            let flags = r.u8("message flags")?;
            let lsn = r.lsn("message lsn")?;
            let prefix = r.cstring("message prefix")?;
            let len = r.len_i32("message content length")?;
            let content = r.bytes(len, "message content")?;
            (
                "logical decoding message",
                LogicalMessage::Message(Message {
                    xid,
                    transactional: flags & 1 != 0,
                    lsn,
                    prefix,
                    content,
                }),
            )
        }
        b'S' => {
            require_version(proto_version, 2, "stream start message")?;
            (
                "stream start message",
                LogicalMessage::StreamStart(StreamStart {
                    xid: r.u32("stream start xid")?,
                    // proto.c's reader: first_segment = (byte == 1).
                    first_segment: r.u8("stream start first segment")? == 1,
                }),
            )
        }
        b'E' => {
            require_version(proto_version, 2, "stream stop message")?;
            ("stream stop message", LogicalMessage::StreamStop)
        }
        b'c' => {
            require_version(proto_version, 2, "stream commit message")?;
            (
                "stream commit message",
                LogicalMessage::StreamCommit(StreamCommit {
                    xid: r.u32("stream commit xid")?,
                    flags: r.u8("stream commit flags")?,
                    commit_lsn: r.lsn("stream commit lsn")?,
                    end_lsn: r.lsn("stream commit end lsn")?,
                    commit_time: r.i64("stream commit time")?,
                }),
            )
        }
        b'A' => {
            require_version(proto_version, 2, "stream abort message")?;
            let xid = r.u32("stream abort xid")?;
            let subxid = r.u32("stream abort subxid")?;
            // Version 4 allows the abort LSN and time, but PostgreSQL 16 writes
            // them only for `streaming = parallel`: both forms are valid.
            let (abort_lsn, abort_time) = if proto_version >= 4 && r.remaining() > 0 {
                (
                    Some(r.lsn("stream abort lsn")?),
                    Some(r.i64("stream abort time")?),
                )
            } else {
                (None, None)
            };
            (
                "stream abort message",
                LogicalMessage::StreamAbort(StreamAbort {
                    xid,
                    subxid,
                    abort_lsn,
                    abort_time,
                }),
            )
        }
        b'b' => {
            require_version(proto_version, 3, "begin prepare message")?;
            (
                "begin prepare message",
                LogicalMessage::BeginPrepare(BeginPrepare {
                    prepare_lsn: r.lsn("begin prepare lsn")?,
                    end_lsn: r.lsn("begin prepare end lsn")?,
                    prepare_time: r.i64("begin prepare time")?,
                    xid: r.u32("begin prepare xid")?,
                    gid: r.cstring("begin prepare gid")?,
                }),
            )
        }
        b'P' => {
            require_version(proto_version, 3, "prepare message")?;
            (
                "prepare message",
                LogicalMessage::Prepare(Prepare {
                    flags: r.u8("prepare flags")?,
                    prepare_lsn: r.lsn("prepare lsn")?,
                    end_lsn: r.lsn("prepare end lsn")?,
                    prepare_time: r.i64("prepare time")?,
                    xid: r.u32("prepare xid")?,
                    gid: r.cstring("prepare gid")?,
                }),
            )
        }
        b'K' => {
            require_version(proto_version, 3, "commit prepared message")?;
            (
                "commit prepared message",
                LogicalMessage::CommitPrepared(CommitPrepared {
                    flags: r.u8("commit prepared flags")?,
                    commit_lsn: r.lsn("commit prepared lsn")?,
                    end_lsn: r.lsn("commit prepared end lsn")?,
                    commit_time: r.i64("commit prepared time")?,
                    xid: r.u32("commit prepared xid")?,
                    gid: r.cstring("commit prepared gid")?,
                }),
            )
        }
        b'r' => {
            require_version(proto_version, 3, "rollback prepared message")?;
            (
                "rollback prepared message",
                LogicalMessage::RollbackPrepared(RollbackPrepared {
                    flags: r.u8("rollback prepared flags")?,
                    prepare_end_lsn: r.lsn("rollback prepared prepare end lsn")?,
                    rollback_end_lsn: r.lsn("rollback prepared rollback end lsn")?,
                    prepare_time: r.i64("rollback prepared prepare time")?,
                    rollback_time: r.i64("rollback prepared rollback time")?,
                    xid: r.u32("rollback prepared xid")?,
                    gid: r.cstring("rollback prepared gid")?,
                }),
            )
        }
        b'p' => {
            require_version(proto_version, 3, "stream prepare message")?;
            (
                "stream prepare message",
                LogicalMessage::StreamPrepare(StreamPrepare {
                    flags: r.u8("stream prepare flags")?,
                    prepare_lsn: r.lsn("stream prepare lsn")?,
                    end_lsn: r.lsn("stream prepare end lsn")?,
                    prepare_time: r.i64("stream prepare time")?,
                    xid: r.u32("stream prepare xid")?,
                    gid: r.cstring("stream prepare gid")?,
                }),
            )
        }
        other => {
            return Err(DecodeError::UnknownTag {
                what: "pgoutput message",
                tag: other,
                offset: 0,
            })
        }
    };
    r.finish(what)?;
    Ok(msg)
}

/// The body of a Relation message, after its tag.
fn relation(r: &mut Reader, in_stream: bool) -> Result<Relation, DecodeError> {
    let xid = if in_stream {
        Some(r.u32("relation xid")?)
    } else {
        None
    };
    let id = r.u32("relation oid")?;
    let namespace = r.cstring("relation namespace")?;
    let name = r.cstring("relation name")?;
    let replica_identity = r.u8("relation replica identity")?;
    let count = r.count_i16("relation column count")?;
    // A column takes at least 10 bytes (flags, NUL, oid, typmod).
    let mut columns = Vec::with_capacity(count.min(r.remaining() / 10));
    for _ in 0..count {
        columns.push(RelationColumn {
            flags: r.u8("relation column flags")?,
            name: r.cstring("relation column name")?,
            type_oid: r.u32("relation column type oid")?,
            type_modifier: r.i32("relation column type modifier")?,
        });
    }
    Ok(Relation {
        xid,
        id,
        namespace,
        name,
        replica_identity,
        columns,
    })
}

/// TupleData: Int16 column count, then one kind byte (+ value) per column.
fn tuple(r: &mut Reader) -> Result<TupleData, DecodeError> {
    let count = r.count_i16("tuple column count")?;
    // A column takes at least its kind byte.
    let mut columns = Vec::with_capacity(count.min(r.remaining()));
    for _ in 0..count {
        let kind_offset = r.offset();
        let value = match r.u8("tuple column kind")? {
            b'n' => ColumnValue::Null,
            b'u' => ColumnValue::UnchangedToast,
            b't' => {
                let len = r.len_i32("tuple column length")?;
                ColumnValue::Text(r.bytes(len, "tuple column value")?)
            }
            b'b' => {
                let len = r.len_i32("tuple column length")?;
                ColumnValue::Binary(r.bytes(len, "tuple column value")?)
            }
            other => {
                return Err(DecodeError::UnknownTag {
                    what: "tuple column kind",
                    tag: other,
                    offset: kind_offset,
                })
            }
        };
        columns.push(value);
    }
    Ok(TupleData { columns })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a message byte by byte, as proto.c's `pq_send*` calls would.
    #[derive(Default)]
    struct W(Vec<u8>);

    impl W {
        fn tag(t: u8) -> Self {
            W(vec![t])
        }
        fn u8(mut self, v: u8) -> Self {
            self.0.push(v);
            self
        }
        fn i16(mut self, v: i16) -> Self {
            self.0.extend_from_slice(&v.to_be_bytes());
            self
        }
        fn i32(mut self, v: i32) -> Self {
            self.0.extend_from_slice(&v.to_be_bytes());
            self
        }
        fn u32(mut self, v: u32) -> Self {
            self.0.extend_from_slice(&v.to_be_bytes());
            self
        }
        fn u64(mut self, v: u64) -> Self {
            self.0.extend_from_slice(&v.to_be_bytes());
            self
        }
        fn i64(mut self, v: i64) -> Self {
            self.0.extend_from_slice(&v.to_be_bytes());
            self
        }
        fn cstr(mut self, s: &[u8]) -> Self {
            self.0.extend_from_slice(s);
            self.0.push(0);
            self
        }
        fn raw(mut self, s: &[u8]) -> Self {
            self.0.extend_from_slice(s);
            self
        }
        /// A text column value.
        fn text(self, s: &[u8]) -> Self {
            self.u8(b't').i32(s.len() as i32).raw(s)
        }
        fn bytes(self) -> Bytes {
            Bytes::from(self.0)
        }
    }

    fn b(s: &'static [u8]) -> Bytes {
        Bytes::from_static(s)
    }

    fn text(s: &'static [u8]) -> ColumnValue {
        ColumnValue::Text(b(s))
    }

    const T: i64 = 785_000_000_123_456; // 2024-11-15 ... in µs since 2000
    const XID: u32 = 0x8000_0741; // above i32::MAX: xids are unsigned

    fn dec(buf: Bytes, v: u32, in_stream: bool) -> LogicalMessage {
        match decode_message(buf, v, in_stream) {
            Ok(m) => m,
            Err(e) => panic!("decode failed: {e}"),
        }
    }

    fn err(buf: Bytes, v: u32, in_stream: bool) -> DecodeError {
        match decode_message(buf, v, in_stream) {
            Ok(m) => panic!("decoded {m:?}, expected an error"),
            Err(e) => e,
        }
    }

    #[test]
    fn begin() {
        let buf = W::tag(b'B').u64(0x16_B374_D848).i64(T).u32(XID).bytes();
        for v in 1..=4 {
            for s in [false, true] {
                assert_eq!(
                    dec(buf.clone(), v, s),
                    LogicalMessage::Begin(Begin {
                        final_lsn: Lsn(0x16_B374_D848),
                        commit_time: T,
                        xid: XID
                    })
                );
            }
        }
    }

    #[test]
    fn commit() {
        let buf = W::tag(b'C').u8(0).u64(0x100).u64(0x1A8).i64(T).bytes();
        assert_eq!(
            dec(buf, 1, false),
            LogicalMessage::Commit(Commit {
                flags: 0,
                commit_lsn: Lsn(0x100),
                end_lsn: Lsn(0x1A8),
                commit_time: T
            })
        );
    }

    #[test]
    fn origin() {
        let buf = W::tag(b'O').u64(0x5_0000_0001).cstr(b"pg_16400").bytes();
        assert_eq!(
            dec(buf, 1, false),
            LogicalMessage::Origin(Origin {
                commit_lsn: Lsn(0x5_0000_0001),
                name: b(b"pg_16400")
            })
        );
    }

    fn relation_body(w: W) -> W {
        w.u32(16385)
            .cstr(b"public")
            .cstr(b"outbox")
            .u8(b'd')
            .i16(3)
            .u8(1)
            .cstr(b"id")
            .u32(2950)
            .i32(-1)
            .u8(0)
            .cstr(b"aggregatetype")
            .u32(1043)
            .i32(259)
            .u8(0)
            .cstr(b"payload")
            .u32(3802)
            .i32(-1)
    }

    fn expected_relation(xid: Option<u32>) -> LogicalMessage {
        LogicalMessage::Relation(Relation {
            xid,
            id: 16385,
            namespace: b(b"public"),
            name: b(b"outbox"),
            replica_identity: b'd',
            columns: vec![
                RelationColumn {
                    flags: 1,
                    name: b(b"id"),
                    type_oid: 2950,
                    type_modifier: -1,
                },
                RelationColumn {
                    flags: 0,
                    name: b(b"aggregatetype"),
                    type_oid: 1043,
                    type_modifier: 259,
                },
                RelationColumn {
                    flags: 0,
                    name: b(b"payload"),
                    type_oid: 3802,
                    type_modifier: -1,
                },
            ],
        })
    }

    #[test]
    fn relation() {
        let buf = relation_body(W::tag(b'R')).bytes();
        let msg = dec(buf, 1, false);
        assert_eq!(msg, expected_relation(None));
        let LogicalMessage::Relation(rel) = &msg else {
            unreachable!()
        };
        assert!(rel.columns[0].is_key());
        assert!(!rel.columns[1].is_key());

        let buf = relation_body(W::tag(b'R').u32(XID)).bytes();
        assert_eq!(dec(buf, 2, true), expected_relation(Some(XID)));
    }

    #[test]
    fn relation_without_columns() {
        let buf = W::tag(b'R')
            .u32(7)
            .cstr(b"")
            .cstr(b"empty")
            .u8(b'n')
            .i16(0)
            .bytes();
        assert_eq!(
            dec(buf, 1, false),
            LogicalMessage::Relation(Relation {
                xid: None,
                id: 7,
                namespace: Bytes::new(),
                name: b(b"empty"),
                replica_identity: b'n',
                columns: vec![],
            })
        );
    }

    #[test]
    fn type_message() {
        let buf = W::tag(b'Y')
            .u32(16390)
            .cstr(b"public")
            .cstr(b"mood")
            .bytes();
        assert_eq!(
            dec(buf, 1, false),
            LogicalMessage::Type(TypeMessage {
                xid: None,
                id: 16390,
                namespace: b(b"public"),
                name: b(b"mood")
            })
        );
        let buf = W::tag(b'Y')
            .u32(XID)
            .u32(16390)
            .cstr(b"public")
            .cstr(b"mood")
            .bytes();
        assert_eq!(
            dec(buf, 2, true),
            LogicalMessage::Type(TypeMessage {
                xid: Some(XID),
                id: 16390,
                namespace: b(b"public"),
                name: b(b"mood")
            })
        );
    }

    #[test]
    fn insert_every_column_kind() {
        let buf = W::tag(b'I')
            .u32(16385)
            .u8(b'N')
            .i16(5)
            .text(b"42")
            .u8(b'n')
            .u8(b'u')
            .u8(b'b')
            .i32(4)
            .raw(&[0, 0, 0, 42])
            .text(b"")
            .bytes();
        let msg = dec(buf.clone(), 1, false);
        assert_eq!(
            msg,
            LogicalMessage::Insert(Insert {
                xid: None,
                relation_id: 16385,
                new: TupleData {
                    columns: vec![
                        text(b"42"),
                        ColumnValue::Null,
                        ColumnValue::UnchangedToast,
                        ColumnValue::Binary(b(&[0, 0, 0, 42])),
                        text(b""),
                    ]
                }
            })
        );
        let LogicalMessage::Insert(ins) = msg else {
            unreachable!()
        };
        assert_eq!(ins.new.len(), 5);
        assert!(!ins.new.is_empty());
        assert_eq!(ins.new.get(0).and_then(|v| v.as_bytes()), Some(&b(b"42")));
        assert_eq!(ins.new.get(1).and_then(|v| v.as_bytes()), None);
        assert_eq!(ins.new.get(2).and_then(|v| v.as_bytes()), None);
        assert_eq!(
            ins.new.get(3).and_then(|v| v.as_bytes()),
            Some(&b(&[0, 0, 0, 42]))
        );
        assert_eq!(ins.new.get(5), None);
        assert_eq!(ins.new.iter().count(), 5);
        // Values are views into the message, not copies: "42" starts at
        // 1 (tag) + 4 (relid) + 1 ('N') + 2 (count) + 1 ('t') + 4 (len).
        let Some(ColumnValue::Text(v)) = ins.new.get(0) else {
            unreachable!()
        };
        assert_eq!(v.as_ptr(), buf[13..].as_ptr());
    }

    #[test]
    fn insert_in_stream_and_empty_tuple() {
        let buf = W::tag(b'I').u32(XID).u32(16385).u8(b'N').i16(0).bytes();
        assert_eq!(
            dec(buf, 2, true),
            LogicalMessage::Insert(Insert {
                xid: Some(XID),
                relation_id: 16385,
                new: TupleData::default()
            })
        );
    }

    #[test]
    fn update_without_old_tuple() {
        let buf = W::tag(b'U')
            .u32(16385)
            .u8(b'N')
            .i16(2)
            .text(b"1")
            .u8(b'u')
            .bytes();
        assert_eq!(
            dec(buf, 1, false),
            LogicalMessage::Update(Update {
                xid: None,
                relation_id: 16385,
                old: None,
                new: TupleData {
                    columns: vec![text(b"1"), ColumnValue::UnchangedToast]
                }
            })
        );
    }

    #[test]
    fn update_with_old_key_and_old_row() {
        for (kind, wrap) in [
            (b'K', OldTuple::Key as fn(TupleData) -> OldTuple),
            (b'O', OldTuple::Full),
        ] {
            let buf = W::tag(b'U')
                .u32(XID)
                .u32(16385)
                .u8(kind)
                .i16(2)
                .text(b"1")
                .u8(b'n')
                .u8(b'N')
                .i16(2)
                .text(b"2")
                .text(b"x")
                .bytes();
            let old = TupleData {
                columns: vec![text(b"1"), ColumnValue::Null],
            };
            let msg = dec(buf, 3, true);
            assert_eq!(
                msg,
                LogicalMessage::Update(Update {
                    xid: Some(XID),
                    relation_id: 16385,
                    old: Some(wrap(old.clone())),
                    new: TupleData {
                        columns: vec![text(b"2"), text(b"x")]
                    }
                })
            );
            let LogicalMessage::Update(u) = msg else {
                unreachable!()
            };
            assert_eq!(u.old.as_ref().map(OldTuple::tuple), Some(&old));
        }
    }

    #[test]
    fn delete_key_and_full() {
        let buf = W::tag(b'D')
            .u32(16385)
            .u8(b'K')
            .i16(3)
            .text(b"7")
            .u8(b'n')
            .u8(b'n')
            .bytes();
        assert_eq!(
            dec(buf, 1, false),
            LogicalMessage::Delete(Delete {
                xid: None,
                relation_id: 16385,
                old: OldTuple::Key(TupleData {
                    columns: vec![text(b"7"), ColumnValue::Null, ColumnValue::Null]
                })
            })
        );
        let buf = W::tag(b'D')
            .u32(XID)
            .u32(16385)
            .u8(b'O')
            .i16(1)
            .text(b"7")
            .bytes();
        assert_eq!(
            dec(buf, 4, true),
            LogicalMessage::Delete(Delete {
                xid: Some(XID),
                relation_id: 16385,
                old: OldTuple::Full(TupleData {
                    columns: vec![text(b"7")]
                })
            })
        );
    }

    #[test]
    fn truncate() {
        let buf = W::tag(b'T').i32(2).u8(3).u32(16385).u32(16390).bytes();
        let msg = dec(buf, 1, false);
        assert_eq!(
            msg,
            LogicalMessage::Truncate(Truncate {
                xid: None,
                options: 3,
                relation_ids: vec![16385, 16390]
            })
        );
        let LogicalMessage::Truncate(t) = msg else {
            unreachable!()
        };
        assert!(t.cascade() && t.restart_identity());

        let buf = W::tag(b'T').u32(XID).i32(1).u8(0).u32(16385).bytes();
        let msg = dec(buf, 2, true);
        assert_eq!(
            msg,
            LogicalMessage::Truncate(Truncate {
                xid: Some(XID),
                options: 0,
                relation_ids: vec![16385]
            })
        );
        let LogicalMessage::Truncate(t) = msg else {
            unreachable!()
        };
        assert!(!t.cascade() && !t.restart_identity());
    }

    #[test]
    fn logical_decoding_message() {
        let buf = W::tag(b'M')
            .u8(1)
            .u64(0x16_0000_0028)
            .cstr(b"outbox")
            .i32(5)
            .raw(b"h\x00llo")
            .bytes();
        assert_eq!(
            dec(buf, 1, false),
            LogicalMessage::Message(Message {
                xid: None,
                transactional: true,
                lsn: Lsn(0x16_0000_0028),
                prefix: b(b"outbox"),
                content: b(b"h\x00llo")
            })
        );
        let buf = W::tag(b'M')
            .u32(XID)
            .u8(0)
            .u64(0x28)
            .cstr(b"p")
            .i32(0)
            .bytes();
        assert_eq!(
            dec(buf, 2, true),
            LogicalMessage::Message(Message {
                xid: Some(XID),
                transactional: false,
                lsn: Lsn(0x28),
                prefix: b(b"p"),
                content: Bytes::new()
            })
        );
    }

    #[test]
    fn stream_start_stop_commit() {
        let buf = W::tag(b'S').u32(XID).u8(1).bytes();
        assert_eq!(
            dec(buf, 2, false),
            LogicalMessage::StreamStart(StreamStart {
                xid: XID,
                first_segment: true
            })
        );
        let buf = W::tag(b'S').u32(XID).u8(0).bytes();
        assert_eq!(
            dec(buf, 2, false),
            LogicalMessage::StreamStart(StreamStart {
                xid: XID,
                first_segment: false
            })
        );
        assert_eq!(dec(b(b"E"), 2, true), LogicalMessage::StreamStop);
        let buf = W::tag(b'c')
            .u32(XID)
            .u8(0)
            .u64(0x200)
            .u64(0x2A0)
            .i64(T)
            .bytes();
        assert_eq!(
            dec(buf, 2, false),
            LogicalMessage::StreamCommit(StreamCommit {
                xid: XID,
                flags: 0,
                commit_lsn: Lsn(0x200),
                end_lsn: Lsn(0x2A0),
                commit_time: T
            })
        );
    }

    #[test]
    fn stream_abort_by_version() {
        let short = W::tag(b'A').u32(XID).u32(XID + 1).bytes();
        let expected_short = LogicalMessage::StreamAbort(StreamAbort {
            xid: XID,
            subxid: XID + 1,
            abort_lsn: None,
            abort_time: None,
        });
        for v in 2..=4 {
            assert_eq!(dec(short.clone(), v, false), expected_short);
        }
        let long = W::tag(b'A').u32(XID).u32(XID).u64(0x300).i64(T).bytes();
        assert_eq!(
            dec(long.clone(), 4, false),
            LogicalMessage::StreamAbort(StreamAbort {
                xid: XID,
                subxid: XID,
                abort_lsn: Some(Lsn(0x300)),
                abort_time: Some(T)
            })
        );
        // Before version 4 the extra fields are not part of the message.
        assert_eq!(
            err(long, 3, false),
            DecodeError::TrailingBytes {
                what: "stream abort message",
                offset: 9,
                extra: 16
            }
        );
        // Version 4 with a partial abort LSN.
        let partial = W::tag(b'A').u32(XID).u32(XID).u32(0).bytes();
        assert_eq!(
            err(partial, 4, false),
            DecodeError::Truncated {
                what: "stream abort lsn",
                offset: 9,
                needed: 4
            }
        );
    }

    fn prepare_like(tag: u8, with_flags: bool) -> Bytes {
        let w = W::tag(tag);
        let w = if with_flags { w.u8(0) } else { w };
        w.u64(0x400)
            .u64(0x4B0)
            .i64(T)
            .u32(XID)
            .cstr(b"gid-1")
            .bytes()
    }

    #[test]
    fn two_phase_messages() {
        assert_eq!(
            dec(prepare_like(b'b', false), 3, false),
            LogicalMessage::BeginPrepare(BeginPrepare {
                prepare_lsn: Lsn(0x400),
                end_lsn: Lsn(0x4B0),
                prepare_time: T,
                xid: XID,
                gid: b(b"gid-1")
            })
        );
        assert_eq!(
            dec(prepare_like(b'P', true), 3, false),
            LogicalMessage::Prepare(Prepare {
                flags: 0,
                prepare_lsn: Lsn(0x400),
                end_lsn: Lsn(0x4B0),
                prepare_time: T,
                xid: XID,
                gid: b(b"gid-1")
            })
        );
        assert_eq!(
            dec(prepare_like(b'K', true), 3, false),
            LogicalMessage::CommitPrepared(CommitPrepared {
                flags: 0,
                commit_lsn: Lsn(0x400),
                end_lsn: Lsn(0x4B0),
                commit_time: T,
                xid: XID,
                gid: b(b"gid-1")
            })
        );
        assert_eq!(
            dec(prepare_like(b'p', true), 4, false),
            LogicalMessage::StreamPrepare(StreamPrepare {
                flags: 0,
                prepare_lsn: Lsn(0x400),
                end_lsn: Lsn(0x4B0),
                prepare_time: T,
                xid: XID,
                gid: b(b"gid-1")
            })
        );
        let buf = W::tag(b'r')
            .u8(0)
            .u64(0x4B0)
            .u64(0x500)
            .i64(T)
            .i64(T + 1)
            .u32(XID)
            .cstr(b"gid-1")
            .bytes();
        assert_eq!(
            dec(buf, 3, false),
            LogicalMessage::RollbackPrepared(RollbackPrepared {
                flags: 0,
                prepare_end_lsn: Lsn(0x4B0),
                rollback_end_lsn: Lsn(0x500),
                prepare_time: T,
                rollback_time: T + 1,
                xid: XID,
                gid: b(b"gid-1")
            })
        );
    }

    #[test]
    fn stateful_decode_tracks_stream_blocks() {
        let mut st = DecoderState::new(2);
        assert!(!st.in_stream);
        let start = W::tag(b'S').u32(XID).u8(1).bytes();
        assert_eq!(decode(&mut st, start).unwrap().kind(), "Stream Start");
        assert!(st.in_stream);
        // Inside the block the Insert carries the xid.
        let ins = W::tag(b'I').u32(XID).u32(16385).u8(b'N').i16(0).bytes();
        let LogicalMessage::Insert(i) = decode(&mut st, ins).unwrap() else {
            panic!("expected insert")
        };
        assert_eq!(i.xid, Some(XID));
        assert_eq!(
            decode(&mut st, b(b"E")).unwrap(),
            LogicalMessage::StreamStop
        );
        assert!(!st.in_stream);
        // Outside, the same xid bytes would be read as the relation id.
        let ins = W::tag(b'I').u32(16385).u8(b'N').i16(0).bytes();
        let LogicalMessage::Insert(i) = decode(&mut st, ins).unwrap() else {
            panic!("expected insert")
        };
        assert_eq!((i.xid, i.relation_id), (None, 16385));
        // A failed decode leaves the state alone.
        assert!(decode(&mut st, b(b"S\x00")).is_err());
        assert!(!st.in_stream);
    }

    #[test]
    fn kind_names() {
        assert_eq!(dec(b(b"E"), 2, false).kind(), "Stream Stop");
        assert_eq!(
            dec(prepare_like(b'K', true), 3, false).kind(),
            "Commit Prepared"
        );
    }

    // ---- errors ----

    #[test]
    fn empty_and_unknown_message() {
        assert_eq!(
            err(Bytes::new(), 1, false),
            DecodeError::Truncated {
                what: "pgoutput message tag",
                offset: 0,
                needed: 1
            }
        );
        assert_eq!(
            err(b(b"Z\x00\x00"), 1, false),
            DecodeError::UnknownTag {
                what: "pgoutput message",
                tag: b'Z',
                offset: 0
            }
        );
    }

    #[test]
    fn unsupported_versions() {
        for v in [0, 5, u32::MAX] {
            assert_eq!(
                err(b(b"E"), v, false),
                DecodeError::UnsupportedVersion { version: v }
            );
        }
    }

    #[test]
    fn messages_gated_by_version() {
        assert_eq!(
            err(W::tag(b'S').u32(1).u8(1).bytes(), 1, false),
            DecodeError::Invalid {
                what: "stream start message",
                offset: 0,
                reason: "message requires protocol version 2 or later"
            }
        );
        for tag in [b'E', b'c', b'A'] {
            assert!(matches!(
                err(Bytes::from(vec![tag]), 1, false),
                DecodeError::Invalid { offset: 0, .. }
            ));
        }
        assert_eq!(
            err(prepare_like(b'P', true), 2, false),
            DecodeError::Invalid {
                what: "prepare message",
                offset: 0,
                reason: "message requires protocol version 3 or later"
            }
        );
        for tag in [b'b', b'K', b'r', b'p'] {
            assert!(matches!(
                err(Bytes::from(vec![tag]), 2, false),
                DecodeError::Invalid { offset: 0, .. }
            ));
        }
    }

    #[test]
    fn truncated_fields_report_field_offset_and_missing_bytes() {
        // Begin cut inside commit_time (offset 9, 8 bytes, 2 present).
        let buf = W::tag(b'B').u64(1).raw(&[0, 0]).bytes();
        assert_eq!(
            err(buf, 1, false),
            DecodeError::Truncated {
                what: "begin commit time",
                offset: 9,
                needed: 6
            }
        );
        // Relation name without its NUL.
        let buf = W::tag(b'R').u32(1).cstr(b"public").raw(b"out").bytes();
        assert_eq!(
            err(buf, 1, false),
            DecodeError::Truncated {
                what: "relation name",
                offset: 12,
                needed: 1
            }
        );
        // In a stream the xid comes first, so the cut moves.
        let buf = W::tag(b'R').u32(XID).u32(1).bytes();
        assert_eq!(
            err(buf, 2, true),
            DecodeError::Truncated {
                what: "relation namespace",
                offset: 9,
                needed: 1
            }
        );
        // Relation announcing 4 columns, only 3 present.
        let buf = relation_body(W::tag(b'R')).bytes();
        let mut v = buf.to_vec();
        // The column count is at 20..22 (tag, oid, "public\0", "outbox\0", identity).
        v[20] = 0;
        v[21] = 4; // claim 4 columns, 3 present
        assert_eq!(
            err(Bytes::from(v), 1, false),
            DecodeError::Truncated {
                what: "relation column flags",
                offset: buf.len(),
                needed: 1
            }
        );
        // Tuple value longer than the message: length 100, 3 bytes present.
        let buf = W::tag(b'I')
            .u32(1)
            .u8(b'N')
            .i16(1)
            .u8(b't')
            .i32(100)
            .raw(b"abc")
            .bytes();
        assert_eq!(
            err(buf, 1, false),
            DecodeError::Truncated {
                what: "tuple column value",
                offset: 13,
                needed: 97
            }
        );
        // Oversized (i32::MAX) length must not allocate or panic.
        let buf = W::tag(b'I')
            .u32(1)
            .u8(b'N')
            .i16(1)
            .u8(b'b')
            .i32(i32::MAX)
            .bytes();
        assert_eq!(
            err(buf, 1, false),
            DecodeError::Truncated {
                what: "tuple column value",
                offset: 13,
                needed: i32::MAX as usize
            }
        );
        // Tuple claims more columns than present.
        let buf = W::tag(b'I').u32(1).u8(b'N').i16(i16::MAX).u8(b'n').bytes();
        assert_eq!(
            err(buf, 1, false),
            DecodeError::Truncated {
                what: "tuple column kind",
                offset: 9,
                needed: 1
            }
        );
        // Truncate claiming i32::MAX relations.
        let buf = W::tag(b'T').i32(i32::MAX).u8(0).u32(1).bytes();
        assert_eq!(
            err(buf, 1, false),
            DecodeError::Truncated {
                what: "truncate relation id",
                offset: 10,
                needed: 4
            }
        );
        // Message content shorter than its length.
        let buf = W::tag(b'M')
            .u8(1)
            .u64(0)
            .cstr(b"p")
            .i32(10)
            .raw(b"12345")
            .bytes();
        assert_eq!(
            err(buf, 1, false),
            DecodeError::Truncated {
                what: "message content",
                offset: 16,
                needed: 5
            }
        );
        // Gid without NUL.
        let buf = W::tag(b'b').u64(1).u64(2).i64(3).u32(4).raw(b"g").bytes();
        assert_eq!(
            err(buf, 3, false),
            DecodeError::Truncated {
                what: "begin prepare gid",
                offset: 29,
                needed: 1
            }
        );
    }

    #[test]
    fn every_prefix_of_a_valid_message_is_truncated() {
        let samples: Vec<(Bytes, u32, bool)> = vec![
            (W::tag(b'B').u64(1).i64(2).u32(3).bytes(), 1, false),
            (W::tag(b'C').u8(0).u64(1).u64(2).i64(3).bytes(), 1, false),
            (W::tag(b'O').u64(1).cstr(b"o").bytes(), 1, false),
            (relation_body(W::tag(b'R')).bytes(), 1, false),
            (relation_body(W::tag(b'R').u32(XID)).bytes(), 2, true),
            (W::tag(b'Y').u32(1).cstr(b"n").cstr(b"t").bytes(), 1, false),
            (
                W::tag(b'U')
                    .u32(1)
                    .u8(b'O')
                    .i16(2)
                    .text(b"a")
                    .u8(b'n')
                    .u8(b'N')
                    .i16(1)
                    .u8(b'b')
                    .i32(2)
                    .raw(b"zz")
                    .bytes(),
                1,
                false,
            ),
            (
                W::tag(b'D').u32(1).u8(b'K').i16(1).text(b"k").bytes(),
                1,
                false,
            ),
            (
                W::tag(b'T').u32(XID).i32(2).u8(1).u32(1).u32(2).bytes(),
                2,
                true,
            ),
            (
                W::tag(b'M')
                    .u8(1)
                    .u64(1)
                    .cstr(b"p")
                    .i32(2)
                    .raw(b"hi")
                    .bytes(),
                1,
                false,
            ),
            (W::tag(b'S').u32(1).u8(1).bytes(), 2, false),
            (
                W::tag(b'c').u32(1).u8(0).u64(1).u64(2).i64(3).bytes(),
                2,
                false,
            ),
            (prepare_like(b'b', false), 3, false),
            (prepare_like(b'P', true), 3, false),
            (prepare_like(b'K', true), 3, false),
            (prepare_like(b'p', true), 3, false),
            (
                W::tag(b'r')
                    .u8(0)
                    .u64(1)
                    .u64(2)
                    .i64(3)
                    .i64(4)
                    .u32(5)
                    .cstr(b"g")
                    .bytes(),
                3,
                false,
            ),
        ];
        for (buf, v, s) in samples {
            assert!(decode_message(buf.clone(), v, s).is_ok(), "{buf:?}");
            for cut in 0..buf.len() {
                let e = err(buf.slice(..cut), v, s);
                assert!(
                    matches!(e, DecodeError::Truncated { offset, needed, .. } if offset <= cut && needed >= 1),
                    "{buf:?} cut at {cut}: {e:?}"
                );
            }
            // And one byte too many is reported as trailing.
            let mut long = buf.to_vec();
            long.push(0xAA);
            assert_eq!(
                err(Bytes::from(long), v, s),
                DecodeError::TrailingBytes {
                    what: match buf[0] {
                        b'B' => "begin message",
                        b'C' => "commit message",
                        b'O' => "origin message",
                        b'R' => "relation message",
                        b'Y' => "type message",
                        b'U' => "update message",
                        b'D' => "delete message",
                        b'T' => "truncate message",
                        b'M' => "logical decoding message",
                        b'S' => "stream start message",
                        b'c' => "stream commit message",
                        b'b' => "begin prepare message",
                        b'P' => "prepare message",
                        b'K' => "commit prepared message",
                        b'p' => "stream prepare message",
                        b'r' => "rollback prepared message",
                        _ => unreachable!(),
                    },
                    offset: buf.len(),
                    extra: 1
                }
            );
        }
    }

    #[test]
    fn unknown_tuple_and_column_kinds() {
        let buf = W::tag(b'I').u32(1).u8(b'K').i16(0).bytes();
        assert_eq!(
            err(buf, 1, false),
            DecodeError::UnknownTag {
                what: "insert tuple kind",
                tag: b'K',
                offset: 5
            }
        );
        let buf = W::tag(b'U').u32(XID).u32(1).u8(b'X').bytes();
        assert_eq!(
            err(buf, 2, true),
            DecodeError::UnknownTag {
                what: "update tuple kind",
                tag: b'X',
                offset: 9
            }
        );
        // Old tuple followed by something other than 'N'.
        let buf = W::tag(b'U').u32(1).u8(b'K').i16(0).u8(b'K').i16(0).bytes();
        assert_eq!(
            err(buf, 1, false),
            DecodeError::UnknownTag {
                what: "update new tuple kind",
                tag: b'K',
                offset: 8
            }
        );
        let buf = W::tag(b'D').u32(1).u8(b'N').i16(0).bytes();
        assert_eq!(
            err(buf, 1, false),
            DecodeError::UnknownTag {
                what: "delete tuple kind",
                tag: b'N',
                offset: 5
            }
        );
        let buf = W::tag(b'I')
            .u32(1)
            .u8(b'N')
            .i16(2)
            .u8(b'n')
            .u8(b'x')
            .bytes();
        assert_eq!(
            err(buf, 1, false),
            DecodeError::UnknownTag {
                what: "tuple column kind",
                tag: b'x',
                offset: 9
            }
        );
    }

    #[test]
    fn negative_lengths_and_counts_are_invalid() {
        let buf = W::tag(b'I').u32(1).u8(b'N').i16(-1).bytes();
        assert_eq!(
            err(buf, 1, false),
            DecodeError::Invalid {
                what: "tuple column count",
                offset: 6,
                reason: "negative count"
            }
        );
        let buf = W::tag(b'I').u32(1).u8(b'N').i16(1).u8(b't').i32(-1).bytes();
        assert_eq!(
            err(buf, 1, false),
            DecodeError::Invalid {
                what: "tuple column length",
                offset: 9,
                reason: "negative length"
            }
        );
        let buf = W::tag(b'R')
            .u32(1)
            .cstr(b"s")
            .cstr(b"t")
            .u8(b'd')
            .i16(i16::MIN)
            .bytes();
        assert_eq!(
            err(buf, 1, false),
            DecodeError::Invalid {
                what: "relation column count",
                offset: 10,
                reason: "negative count"
            }
        );
        let buf = W::tag(b'T').i32(-2).u8(0).bytes();
        assert_eq!(
            err(buf, 1, false),
            DecodeError::Invalid {
                what: "truncate relation count",
                offset: 1,
                reason: "negative length"
            }
        );
        let buf = W::tag(b'M')
            .u32(XID)
            .u8(1)
            .u64(0)
            .cstr(b"")
            .i32(i32::MIN)
            .bytes();
        assert_eq!(
            err(buf, 2, true),
            DecodeError::Invalid {
                what: "message content length",
                offset: 15,
                reason: "negative length"
            }
        );
    }

    #[test]
    fn error_messages_read_well() {
        let e = err(W::tag(b'B').u64(1).raw(&[0, 0]).bytes(), 1, false);
        assert_eq!(
            e.to_string(),
            "unexpected end of begin commit time at offset 9: needed 6 more bytes"
        );
        assert_eq!(
            err(b(b"Z"), 1, false).to_string(),
            "unknown pgoutput message tag 90 at offset 0"
        );
    }
}
