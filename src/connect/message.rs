//! Debezium's logical-decoding message record: what the PostgreSQL
//! connector sends to `<topic.prefix>.message` for a
//! `pg_logical_emit_message` whose prefix passes
//! `message.prefix.include.list`/`.exclude.list`, when no
//! `DecodeLogicalDecodingMessageContent` transform turns it into an outbox
//! event (the EventRouter passes it through: its value schema is not an
//! `.Envelope`).
//!
//! Owns the key (`io.debezium.connector.postgresql.MessageKey` {prefix}) and
//! the value (`io.debezium.connector.postgresql.MessageValue` {op, ts_ms,
//! source, transaction, message{prefix, content}}) as Connect schemas and
//! values, field for field as Debezium 3.6.1.Final builds them
//! (`LogicalDecodingMessageMonitor`, `PostgresSchemaFactory`,
//! `PostgresSourceInfoStructMaker`), and their StringConverter text, which
//! Java's `ByteBuffer.toString()` makes reproducible. Observed bytes:
//! `tests/compat/observed/msg-envelope-*.jsonl`.
//!
//! It never decides which values go in: [`MessageFacts`] says which
//! pgoutput field each one is, and the stream assembly supplies them
//! (including the two that carry over from earlier messages of the stream:
//! `source.ts_ms` of a non-transactional message and `source.sequence`).
//! No I/O, no clock: the wall clock comes in as an argument.

use std::sync::Arc;

use bytes::Bytes;
use walrelay_proto::Lsn;

use super::config::ConverterKind;
use super::convert::{java_to_string, ConvertError, Converter};
use super::{Field, Schema, Type, Value};

/// Suffix of the message topic after `topic.prefix`.
pub const TOPIC_SUFFIX: &str = ".message";
/// Logical name of the key schema.
pub const KEY_SCHEMA_NAME: &str = "io.debezium.connector.postgresql.MessageKey";
/// Logical name of the value schema.
pub const VALUE_SCHEMA_NAME: &str = "io.debezium.connector.postgresql.MessageValue";
/// Logical name of the `message` block schema.
pub const BLOCK_SCHEMA_NAME: &str = "io.debezium.connector.postgresql.Message";
/// Logical name of the `source` block schema.
pub const SOURCE_SCHEMA_NAME: &str = "io.debezium.connector.postgresql.Source";
/// Logical name of the `transaction` block schema (always null here).
pub const TRANSACTION_SCHEMA_NAME: &str = "event.block";
/// `source.version`: the Debezium release walrelay reproduces.
pub const DEBEZIUM_VERSION: &str = "3.6.1.Final";
/// `source.connector`.
pub const CONNECTOR: &str = "postgresql";
/// `op` of a message record (`Envelope.Operation.MESSAGE`).
pub const OP_MESSAGE: &str = "m";
/// Logical name of `source.snapshot` (`SnapshotRecord` as an enum string).
const ENUM_NAME: &str = "io.debezium.data.Enum";
/// The `allowed` parameter of `source.snapshot`, in Debezium's order.
const SNAPSHOT_ALLOWED: &str =
    "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental";

/// The replication origin of a transaction (pgoutput's Origin message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin<'a> {
    /// Origin name (`source.origin`).
    pub name: &'a str,
    /// The commit's LSN on the origin server (`source.origin_lsn`).
    pub lsn: Lsn,
}

/// One logical decoding message and the stream state Debezium's record
/// carries. Each field names the pgoutput field (protocol v1, as Debezium
/// asks for) it comes from; "the stream" means everything pgoutput sent on
/// this slot since the relay started streaming, whatever its prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageFacts<'a> {
    /// Message.prefix (`key.prefix`, `message.prefix`).
    pub prefix: &'a str,
    /// Message.content, as sent (`message.content`; JsonConverter writes
    /// it as Base64).
    pub content: &'a [u8],
    /// The Message's own LSN field (`source.lsn`, the second element of
    /// `source.sequence`). It equals the XLogData start pgoutput sends it
    /// in, the end of the message's WAL record, and what
    /// `pg_logical_emit_message` returned.
    pub lsn: Lsn,
    /// Begin.xid of the enclosing transaction (`source.txId`); `None` for a
    /// non-transactional message (flags bit 0 clear).
    pub xid: Option<u32>,
    /// Microseconds since 1970 for `source.ts_ms`/`ts_us`/`ts_ns`.
    /// Transactional: Begin.commit_time of its transaction.
    /// Non-transactional: Debezium keeps the last commit time it saw, so
    /// this is the commit time of the latest Begin/Commit before it in the
    /// stream (a transaction of any prefix, or none); before any, the time
    /// the task started (Debezium's initial offset), or after a restart the
    /// `ts_usec` its offsets stored.
    pub source_time_us: i64,
    /// The first element of `source.sequence` (Debezium's `lastCommitLsn`):
    /// the latest "commit position" before this message in the stream,
    /// where every Commit sets it to Commit.end_lsn (the XLogData start of
    /// the Commit message) and every non-transactional message of any
    /// prefix, included or not, sets it to its own LSN *before* its record
    /// is built. So a non-transactional message has `Some(its own lsn)`;
    /// a transactional one has the previous Commit's end_lsn, or the LSN of
    /// a non-transactional message sent after that commit (pgoutput sends
    /// those ahead of the transaction they were emitted in). `None` (JSON
    /// `null`) before any, on a fresh start; after a restart Debezium starts
    /// from its offsets' `lsn_commit`.
    pub last_commit_lsn: Option<Lsn>,
    /// The transaction's Origin message (`source.origin`, `origin_lsn`);
    /// `None` when pgoutput sent none. Debezium clears it at every Begin,
    /// so a non-transactional message carries the previous transaction's.
    pub origin: Option<Origin<'a>>,
}

/// Debezium's message record for one connector: topic, schemas and the
/// fixed parts of the `source` block.
#[derive(Debug, Clone)]
pub struct MessageEnvelope {
    topic: String,
    server_name: Arc<str>,
    database: Arc<str>,
    key_schema: Arc<Schema>,
    value_schema: Arc<Schema>,
}

fn field(name: &str, schema: Schema) -> Field {
    Field {
        name: Arc::from(name),
        schema: Arc::new(schema),
    }
}

fn int64(v: Option<u64>) -> Value {
    // LSNs and xids fit: PostgreSQL's LSN space is 64 bits but no server
    // gets past 2^63, and Debezium writes them as Java longs.
    v.map_or(Value::Null, |v| Value::Int64(v as i64))
}

/// `source`'s schema: `SchemaFactory.sourceInfoSchemaBuilder()` plus the
/// PostgreSQL fields, in Debezium's order.
fn source_schema() -> Schema {
    let snapshot = Schema::optional(Type::String)
        .named(ENUM_NAME, Some(1))
        .with_parameter("allowed", SNAPSHOT_ALLOWED);
    let snapshot = Schema {
        default: Some(Value::string("false")),
        ..snapshot
    };
    Schema::structure(
        None,
        vec![
            field("version", Schema::new(Type::String)),
            field("connector", Schema::new(Type::String)),
            field("name", Schema::new(Type::String)),
            field("ts_ms", Schema::new(Type::Int64)),
            field("snapshot", snapshot),
            field("db", Schema::new(Type::String)),
            field("sequence", Schema::optional(Type::String)),
            field("ts_us", Schema::optional(Type::Int64)),
            field("ts_ns", Schema::optional(Type::Int64)),
            field("schema", Schema::new(Type::String)),
            field("table", Schema::new(Type::String)),
            field("txId", Schema::optional(Type::Int64)),
            field("lsn", Schema::optional(Type::Int64)),
            field("xmin", Schema::optional(Type::Int64)),
            field("origin", Schema::optional(Type::String)),
            field("origin_lsn", Schema::optional(Type::Int64)),
        ],
    )
    .named(SOURCE_SCHEMA_NAME, Some(1))
}

/// `transaction`'s schema (`SchemaFactory.transactionBlockSchema()`).
fn transaction_schema() -> Schema {
    Schema::structure(
        None,
        vec![
            field("id", Schema::new(Type::String)),
            field("total_order", Schema::new(Type::Int64)),
            field("data_collection_order", Schema::new(Type::Int64)),
        ],
    )
    .with_optional(true)
    .named(TRANSACTION_SCHEMA_NAME, Some(1))
}

/// `message`'s schema, for `binary.handling.mode=bytes` (the only mode the
/// decode transform accepts and the only one walrelay supports).
fn block_schema() -> Schema {
    Schema::structure(
        None,
        vec![
            field("prefix", Schema::optional(Type::String)),
            field("content", Schema::optional(Type::Bytes)),
        ],
    )
    .named(BLOCK_SCHEMA_NAME, Some(1))
}

/// Java's `Jackson.writeValueAsString(List.of(a, b))` of `source.sequence`:
/// each LSN as a quoted decimal string, or `null`.
fn sequence(last_commit: Option<Lsn>, lsn: Lsn) -> String {
    let part = |l: Option<Lsn>| l.map_or_else(|| "null".to_string(), |l| format!("\"{}\"", l.0));
    format!("[{},{}]", part(last_commit), part(Some(lsn)))
}

impl MessageEnvelope {
    /// The record of a connector with this `topic.prefix` on the database
    /// `database` (`database.dbname`, written as `source.db`).
    pub fn new(topic_prefix: &str, database: &str) -> Self {
        let key_schema =
            Schema::structure(None, vec![field("prefix", Schema::optional(Type::String))])
                .named(KEY_SCHEMA_NAME, Some(1));
        let value_schema = Schema::structure(
            None,
            vec![
                field("op", Schema::new(Type::String)),
                field("ts_ms", Schema::optional(Type::Int64)),
                field("source", source_schema()),
                field("transaction", transaction_schema()),
                field("message", block_schema()),
            ],
        )
        .named(VALUE_SCHEMA_NAME, Some(1));
        MessageEnvelope {
            topic: format!("{topic_prefix}{TOPIC_SUFFIX}"),
            server_name: Arc::from(topic_prefix),
            database: Arc::from(database),
            key_schema: Arc::new(key_schema),
            value_schema: Arc::new(value_schema),
        }
    }

    /// `<topic.prefix>.message`.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The key: `MessageKey{prefix}`.
    pub fn key(&self, m: &MessageFacts) -> (Arc<Schema>, Value) {
        (
            self.key_schema.clone(),
            Value::Struct(vec![Value::string(m.prefix)]),
        )
    }

    /// The value. `now_ms` is the top-level `ts_ms`: Debezium's wall clock
    /// when it dispatched the message (not the commit time; the Kafka
    /// record timestamp is left to the producer, the SourceRecord has none).
    pub fn value(&self, m: &MessageFacts, now_ms: i64) -> (Arc<Schema>, Value) {
        let us = m.source_time_us;
        let source = Value::Struct(vec![
            Value::string(DEBEZIUM_VERSION),
            Value::string(CONNECTOR),
            Value::string(&*self.server_name),
            Value::Int64(us.div_euclid(1000)),
            // Streaming: SnapshotRecord FALSE is written as "false".
            Value::string("false"),
            Value::string(&*self.database),
            Value::string(sequence(m.last_commit_lsn, m.lsn)),
            Value::Int64(us),
            Value::Int64(us.saturating_mul(1000)),
            // A message belongs to no table.
            Value::string(""),
            Value::string(""),
            int64(m.xid.map(u64::from)),
            int64(Some(m.lsn.0)),
            // xmin.fetch.interval.ms is 0 by default: never fetched.
            Value::Null,
            m.origin.map_or(Value::Null, |o| Value::string(o.name)),
            int64(m.origin.map(|o| o.lsn.0)),
        ]);
        let message = Value::Struct(vec![
            Value::string(m.prefix),
            Value::Bytes(Bytes::copy_from_slice(m.content)),
        ]);
        (
            self.value_schema.clone(),
            Value::Struct(vec![
                Value::string(OP_MESSAGE),
                Value::Int64(now_ms),
                source,
                // provide.transaction.metadata=false (walrelay refuses true).
                Value::Null,
                message,
            ]),
        )
    }

    /// The key bytes through `converter`.
    pub fn key_bytes(
        &self,
        converter: Converter,
        m: &MessageFacts,
    ) -> Result<Option<Bytes>, ConvertError> {
        let (schema, value) = self.key(m);
        converter.from_connect_data(Some(&schema), &value)
    }

    /// The value bytes through `converter`. StringConverter is rendered
    /// here: Debezium puts the content in a `ByteBuffer`, whose
    /// `toString()` (`java.nio.HeapByteBuffer[pos=0 lim=N cap=N]`) is
    /// reproducible, unlike a `byte[]`'s identity hash the generic
    /// converter refuses.
    pub fn value_bytes(
        &self,
        converter: Converter,
        m: &MessageFacts,
        now_ms: i64,
    ) -> Result<Option<Bytes>, ConvertError> {
        let (schema, value) = self.value(m, now_ms);
        if converter.kind != ConverterKind::String {
            return converter.from_connect_data(Some(&schema), &value);
        }
        // Struct.toString of op, ts_ms, source (and the null transaction,
        // which it skips), then the message block by hand.
        let Value::Struct(mut fields) = value else {
            return converter.from_connect_data(Some(&schema), &value);
        };
        fields.truncate(4);
        let mut out = String::new();
        java_to_string(&mut out, Some(&schema), &Value::Struct(fields))?;
        // Reopen the outer struct: `out` ends with its closing brace.
        out.pop();
        let n = m.content.len();
        out.push_str(&format!(
            ",message=Struct{{prefix={},content=java.nio.HeapByteBuffer[pos=0 lim={n} cap={n}]}}}}",
            m.prefix
        ));
        Ok(Some(Bytes::from(out)))
    }
}
