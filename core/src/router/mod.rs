//! Debezium outbox EventRouter semantics: one outbox row in, one Kafka record out.
//!
//! Owns the mapping from an inserted outbox row (pgoutput text values) to
//! the record Debezium's PostgreSQL connector + `EventRouter` SMT + Kafka
//! Connect converters would emit: topic through `RegexRouter`, key, value
//! (payload as is, an envelope struct, an expanded JSON struct or a
//! tombstone), headers (Debezium's context headers, tracing, `id`,
//! placements), partition and timestamp, serialised by the configured
//! converters. Column names, types and schemas are resolved once per
//! Relation message ([`Router::bind`]); with the default converters
//! (`StringConverter`, `SimpleHeaderConverter`) and text-like columns the
//! per-event path builds no Connect value and copies no key or value bytes.
//!
//! It must never do I/O, log, or look at anything but the row, the
//! catalog facts it is given and the configuration: it is a pure function
//! plus caches (topics, envelope schemas) that mirror Debezium's.

pub(crate) mod config;
mod headers;
mod message;
mod rewrite;

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use walrelay_proto::pgoutput::{ColumnValue, TupleData};
use walrelay_proto::{Lsn, RelationInfo};

pub use self::config::*;
pub use self::headers::{HeadersError, KEY_HEADERS_FIELD};
pub use self::message::{MessageEvent, MessageForm};
pub use self::rewrite::TopicRewrite;
use crate::connect::config::{ConverterKind, ConvertersConfig, HeaderConverterKind};
use crate::connect::convert::{write_json_schema, ConvertError, Converter, HeaderConverter};
use crate::connect::expand::{ExpandError, ExpandStage, JsonSchemaData};
use crate::connect::pg::{self, names, ColumnType, InvalidText, PgType};
pub use crate::connect::pg::{ColumnMeta, TableMeta};
use crate::connect::{Field, Schema, Text, Type, Value};
use crate::properties::parse_properties_ordered;

/// Name of the event id header, as Debezium writes it.
pub(crate) const ID_HEADER: &str = "id";
/// Debezium's extended header carrying `topic.prefix`.
pub(crate) const HEADER_CONNECTOR_LOGICAL_NAME: &str = "__debezium.context.connectorLogicalName";
/// Debezium's extended header carrying the task id.
pub(crate) const HEADER_TASK_ID: &str = "__debezium.context.taskId";
/// Debezium's extended header carrying the connector name.
pub(crate) const HEADER_CONNECTOR_NAME: &str = "__debezium.context.connectorName";
/// Debezium's extended header carrying a random id per task start.
pub(crate) const HEADER_RUN_ID: &str = "__debezium.context.runId";
/// W3C trace context header.
pub(crate) const HEADER_TRACEPARENT: &str = "traceparent";
/// W3C trace state header.
pub(crate) const HEADER_TRACESTATE: &str = "tracestate";

/// Name of the envelope's payload field.
const ENVELOPE_PAYLOAD: &str = config::ENVELOPE_PAYLOAD_FIELD;

/// Distinct route values remembered before the topic cache is cleared; real
/// outboxes have a handful of aggregate types, so this only bounds abuse.
const TOPIC_CACHE_LIMIT: usize = 10_000;
/// Envelope schemas remembered; Debezium's LRU cache holds 10 000.
const SCHEMA_CACHE_LIMIT: usize = 10_000;

/// One outbox row (or table layout) that cannot become a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// A configured column does not exist in the outbox relation.
    #[error("outbox table {table} has no column \"{column}\" ({key})")]
    MissingColumn {
        /// `schema.table`.
        table: String,
        /// The configured column name.
        column: String,
        /// Debezium key that names it.
        key: &'static str,
    },
    /// A configured column has a type walrelay cannot map the way Debezium does.
    #[error("outbox column {table}.\"{column}\" ({key}) has type {type_name}, which walrelay cannot map to a kafka connect schema")]
    UnmappableType {
        /// `schema.table`.
        table: String,
        /// The column.
        column: String,
        /// Debezium key that names it.
        key: &'static str,
        /// The type (`format_type` from the catalog, or the OID).
        type_name: String,
    },
    /// A configured column's type does not fit how the EventRouter reads it.
    #[error("outbox column {table}.\"{column}\" ({key}) must be {expected}, but it is {actual}")]
    WrongColumnType {
        /// `schema.table`.
        table: String,
        /// The column.
        column: String,
        /// Debezium key that names it.
        key: &'static str,
        /// What the EventRouter requires.
        expected: &'static str,
        /// The column's Connect schema.
        actual: String,
    },
    /// The row has fewer values than its relation has columns.
    #[error("row at lsn {lsn} has {width} values, but column \"{column}\" is number {}", .index + 1)]
    ShortRow {
        /// The needed column.
        column: String,
        /// Its zero-based position.
        index: usize,
        /// Values in the row.
        width: usize,
        /// LSN of the change.
        lsn: Lsn,
    },
    /// The route-by column is NULL, so there is no topic (Debezium fails
    /// inside `RegexRouter`).
    #[error("route column \"{column}\" is null at lsn {lsn} (event id {event_id})")]
    NullRouteValue {
        /// The route-by column.
        column: String,
        /// LSN of the change.
        lsn: Lsn,
        /// Text of the event id, or `unknown`.
        event_id: String,
    },
    /// The route-by column is not UTF-8, so it cannot name a topic.
    #[error("route column \"{column}\" is not valid utf-8 at lsn {lsn} (event id {event_id})")]
    NonUtf8RouteValue {
        /// The route-by column.
        column: String,
        /// LSN of the change.
        lsn: Lsn,
        /// Text of the event id, or `unknown`.
        event_id: String,
        /// Where decoding stopped.
        #[source]
        source: std::str::Utf8Error,
    },
    /// A needed column came as "unchanged TOAST", which pgoutput sends only
    /// in updates.
    #[error("column \"{column}\" is an unchanged toasted value at lsn {lsn} (event id {event_id}); pgoutput sends those only for updates, never for the inserts outbox events are")]
    UnchangedToast {
        /// The column.
        column: String,
        /// LSN of the change.
        lsn: Lsn,
        /// Text of the event id, or `unknown`.
        event_id: String,
    },
    /// A needed column came in pgoutput's binary format.
    #[error("binary pgoutput values are not supported for column \"{column}\" at lsn {lsn} (event id {event_id})")]
    BinaryValue {
        /// The column.
        column: String,
        /// LSN of the change.
        lsn: Lsn,
        /// Text of the event id, or `unknown`.
        event_id: String,
    },
    /// A column's text is not a value Debezium's mapping can represent.
    #[error("column \"{column}\" at lsn {lsn} (event id {event_id}) cannot be mapped")]
    InvalidValue {
        /// The column.
        column: String,
        /// LSN of the change.
        lsn: Lsn,
        /// Text of the event id, or `unknown`.
        event_id: String,
        /// What is wrong with the text.
        #[source]
        source: InvalidText,
    },
    /// The key column is NULL: the record would land on any partition,
    /// out of order with its aggregate (`router.null_key = "error"`).
    #[error("key column \"{column}\" is null at lsn {lsn} (event id {event_id}); set router.null_key = \"allow\" to send a null key as debezium does")]
    NullKey {
        /// The key column.
        column: String,
        /// LSN of the change.
        lsn: Lsn,
        /// Text of the event id, or `unknown`.
        event_id: String,
    },
    /// The event id column is NULL: consumers would have nothing to
    /// deduplicate on (`router.null_id = "error"`).
    #[error("event id column \"{column}\" is null at lsn {lsn} (event id null); set router.null_id = \"allow\" to send a null id header as debezium does")]
    NullId {
        /// The id column.
        column: String,
        /// LSN of the change.
        lsn: Lsn,
    },
    /// With JSON expansion on, the payload is not JSON at all
    /// (`router.invalid_json_payload = "error"`).
    #[error(
        "payload column \"{column}\" is not json at lsn {lsn} (event id {event_id}): {reason}"
    )]
    InvalidJsonPayload {
        /// The payload column.
        column: String,
        /// LSN of the change.
        lsn: Lsn,
        /// Text of the event id, or `unknown`.
        event_id: String,
        /// The JSON parser's message.
        reason: String,
    },
    /// With JSON expansion on, the payload's schema was inferred but its
    /// value does not fit it (a top-level array, elements of mixed types
    /// below the first): Debezium sends the text under the inferred schema
    /// and its task fails on it (every converter but StringConverter, and
    /// every converter with an envelope placement).
    #[error("payload column \"{column}\" at lsn {lsn} (event id {event_id}) cannot be expanded: {reason}")]
    JsonExpansion {
        /// The payload column.
        column: String,
        /// LSN of the change.
        lsn: Lsn,
        /// Text of the event id, or `unknown`.
        event_id: String,
        /// What failed, and why Debezium cannot send it either.
        reason: String,
    },
    /// The topic computed from the route column is not a legal Kafka topic name.
    #[error("route column \"{column}\" gives topic {topic:?} at lsn {lsn} (event id {event_id}), which is not a legal kafka topic name: {reason}")]
    InvalidTopic {
        /// The route-by column.
        column: String,
        /// The computed topic.
        topic: String,
        /// LSN of the change.
        lsn: Lsn,
        /// Text of the event id, or `unknown`.
        event_id: String,
        /// What is wrong with the name.
        reason: &'static str,
    },
    /// The outbox table's layout (at the last Relation message before this
    /// event) does not fit the routing configuration: a needed column was
    /// dropped, has the wrong type or one walrelay cannot map.
    #[error("event at lsn {lsn} (event id {event_id}) cannot be routed: column \"{column}\" does not fit the routing configuration")]
    Layout {
        /// The column at fault.
        column: String,
        /// LSN of the change.
        lsn: Lsn,
        /// Text of the event id, or `unknown`.
        event_id: String,
        /// The layout problem found when the relation was bound.
        #[source]
        source: Box<RouteError>,
    },
    /// A logical decoding message whose content cannot be an event (not
    /// JSON, not a JSON object, non-transactional where that is refused).
    #[error("message with prefix {prefix:?} at lsn {lsn} is not an outbox event: {reason}")]
    MessageContent {
        /// The message's prefix.
        prefix: String,
        /// Its LSN.
        lsn: Lsn,
        /// What is wrong.
        reason: String,
        /// Metric label.
        what: &'static str,
    },
    /// A logical decoding message whose JSON object does not fit the
    /// routing configuration (a member missing or of the wrong type).
    #[error("message with prefix {:?} at lsn {lsn} (event id {}) cannot be routed: member \"{}\" {}", .detail.prefix, .detail.event_id, .detail.member, .detail.reason)]
    MessageLayout {
        /// Its LSN.
        lsn: Lsn,
        /// The message, the member and what is wrong with it.
        detail: Box<MessageProblem>,
        /// The kind of the underlying problem.
        what: &'static str,
    },
    /// The headers column's value cannot become headers
    /// (`router.headers_field`).
    #[error("headers column \"{column}\" of the event at lsn {lsn} (event id {event_id}) cannot become kafka headers")]
    Headers {
        /// The headers column.
        column: String,
        /// LSN of the change.
        lsn: Lsn,
        /// Text of the event id, or `unknown`.
        event_id: String,
        /// What is wrong with it.
        #[source]
        source: HeadersError,
    },
    /// A converter refused the key, value or a header.
    #[error("cannot serialise the {what} of the event at lsn {lsn} (event id {event_id})")]
    Convert {
        /// `key`, `value` or `header <name>`.
        what: String,
        /// LSN of the change.
        lsn: Lsn,
        /// Text of the event id, or `unknown`.
        event_id: String,
        /// The converter's reason.
        #[source]
        source: ConvertError,
    },
}

impl RouteError {
    /// A short, stable name of the kind of problem (metric label, the
    /// `walrelay.error.kind` dead-letter header).
    pub fn kind(&self) -> &'static str {
        match self {
            RouteError::MissingColumn { .. } => "missing_column",
            RouteError::UnmappableType { .. } => "unmappable_type",
            RouteError::WrongColumnType { .. } => "wrong_column_type",
            RouteError::ShortRow { .. } => "short_row",
            RouteError::NullRouteValue { .. } => "null_route",
            RouteError::NonUtf8RouteValue { .. } => "non_utf8_route",
            RouteError::UnchangedToast { .. } => "unchanged_toast",
            RouteError::BinaryValue { .. } => "binary_value",
            RouteError::InvalidValue { .. } => "invalid_value",
            RouteError::NullKey { .. } => "null_key",
            RouteError::NullId { .. } => "null_id",
            RouteError::InvalidJsonPayload { .. } => "invalid_json",
            RouteError::JsonExpansion { .. } => "json_expansion",
            RouteError::InvalidTopic { .. } => "invalid_topic",
            RouteError::Layout { source, .. } => source.kind(),
            RouteError::MessageContent { what, .. } | RouteError::MessageLayout { what, .. } => {
                what
            }
            RouteError::Headers { source, .. } => source.kind(),
            RouteError::Convert { .. } => "convert",
        }
    }

    /// The column at fault, where there is one.
    pub(crate) fn column(&self) -> Option<&str> {
        match self {
            RouteError::MissingColumn { column, .. }
            | RouteError::UnmappableType { column, .. }
            | RouteError::WrongColumnType { column, .. }
            | RouteError::ShortRow { column, .. }
            | RouteError::NullRouteValue { column, .. }
            | RouteError::NonUtf8RouteValue { column, .. }
            | RouteError::UnchangedToast { column, .. }
            | RouteError::BinaryValue { column, .. }
            | RouteError::InvalidValue { column, .. }
            | RouteError::NullKey { column, .. }
            | RouteError::NullId { column, .. }
            | RouteError::InvalidJsonPayload { column, .. }
            | RouteError::JsonExpansion { column, .. }
            | RouteError::InvalidTopic { column, .. }
            | RouteError::Layout { column, .. }
            | RouteError::Headers { column, .. } => Some(column),
            RouteError::MessageLayout { detail, .. } => Some(&detail.member),
            RouteError::Convert { .. } | RouteError::MessageContent { .. } => None,
        }
    }

    /// The intended topic, where the error knows it.
    pub fn topic(&self) -> Option<&str> {
        match self {
            RouteError::InvalidTopic { topic, .. } => Some(topic),
            _ => None,
        }
    }
}

/// Checks a topic name as the Kafka broker does (`Topic.validate`): 1 to
/// 249 characters of ASCII letters, digits, `.`, `_` and `-`, and not `.`
/// or `..`. Checked before producing, so a bad route value is an error
/// naming its event, not a delivery failure.
pub fn check_topic_name(topic: &str) -> Result<(), &'static str> {
    if topic.is_empty() {
        return Err("it is empty");
    }
    if topic == "." || topic == ".." {
        return Err("\".\" and \"..\" are not allowed");
    }
    if topic.len() > 249 {
        return Err("it is longer than 249 characters");
    }
    if !topic
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err("only ascii letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}

/// A message member that does not fit the routing configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageProblem {
    /// The message's prefix.
    pub(crate) prefix: String,
    /// The `id` member's text, or `unknown`.
    pub(crate) event_id: String,
    /// The member at fault.
    pub(crate) member: String,
    /// What is wrong with it.
    pub(crate) reason: String,
}

/// Finds a configured column by name (and the key naming it) while binding.
type ColumnLookup<'a> = dyn Fn(&str, &'static str) -> Result<Option<BoundColumn>, RouteError> + 'a;

/// Where an event comes from; used for error context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventMeta {
    /// LSN of the change.
    pub lsn: Lsn,
    /// Commit LSN of its transaction.
    pub commit_lsn: Lsn,
    /// Transaction id.
    pub xid: u32,
    /// Commit time, Unix µs.
    pub commit_time_us: i64,
    /// When walrelay read the change off the replication socket, Unix µs;
    /// 0 when it did not come from one (polling, the snapshot). Only for
    /// the latency metrics.
    pub received_us: i64,
}

/// One Kafka header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordHeader {
    /// Header name, shared between records.
    pub name: Arc<str>,
    /// Header value; `None` is a null header.
    pub value: Option<Bytes>,
}

/// A record ready for the producer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaRecord {
    /// Destination topic, shared with every record of the same route value.
    pub topic: Arc<str>,
    /// Key bytes; `None` is a null key.
    pub key: Option<Bytes>,
    /// Value bytes; `None` is a tombstone.
    pub value: Option<Bytes>,
    /// Headers in order.
    pub headers: Vec<RecordHeader>,
    /// Explicit partition; `None` lets the producer's partitioner decide.
    pub partition: Option<i32>,
    /// Explicit timestamp, Unix ms; `None` uses the producer's clock.
    pub timestamp_ms: Option<i64>,
}

/// How an INT64 timestamp column converts to milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TimestampUnit {
    Millis,
    Micros,
    Nanos,
}

/// A column the router reads, resolved.
#[derive(Debug, Clone)]
struct BoundColumn {
    index: usize,
    name: Arc<str>,
    ty: ColumnType,
}

#[derive(Debug, Clone)]
struct BoundPlacement {
    column: BoundColumn,
    placement: Placement,
    alias: Arc<str>,
}

/// The outbox relation with every configured column resolved to its
/// position, type and Connect schema.
#[derive(Debug, Clone)]
pub struct BoundRelation {
    relation: Arc<RelationInfo>,
    id: BoundColumn,
    key: BoundColumn,
    payload: BoundColumn,
    route: BoundColumn,
    timestamp: Option<(BoundColumn, TimestampUnit)>,
    version: Option<BoundColumn>,
    placements: Vec<BoundPlacement>,
    tracing: Option<BoundColumn>,
    /// The headers column (`router.headers_field`), when configured.
    headers: Option<headers::HeadersColumn>,
    /// Debezium's `after` schema name: `<prefix>.<schema>.<table>.Value`.
    after_schema_name: String,
    /// Cache key of the payload column's schema (with the column
    /// mapping's scope in front when a table overrides `[router]`'s).
    payload_schema_key: String,
    /// Whether the value is an envelope struct (an `envelope` placement).
    envelope: bool,
    /// The column mapping's [`ColumnMapping::scope`]: envelope schemas are
    /// cached per scope.
    scope: Arc<str>,
    /// Position of the route column, where the relation has it.
    route_index: Option<usize>,
    /// Positions of the configured id, key and payload columns, where the
    /// relation has them (also for a relation with a layout problem).
    id_index: Option<usize>,
    key_index: Option<usize>,
    payload_index: Option<usize>,
    /// Why the relation's layout does not fit the configuration; every
    /// event of it is then an error naming the event ([`Router::route`]).
    problem: Option<RouteError>,
}

impl BoundRelation {
    /// Why this relation's layout does not fit the routing configuration,
    /// if it does not; [`Router::route`] reports it for each event.
    #[cfg(test)]
    pub(crate) fn problem(&self) -> Option<&RouteError> {
        self.problem.as_ref()
    }

    /// `schema.table` of the relation.
    pub(crate) fn table_name(&self) -> String {
        self.relation.qualified_name()
    }

    /// The event id column's text, if the row has a non-null one.
    pub(crate) fn event_id(&self, row: &TupleData) -> Option<String> {
        match self.id_index.and_then(|i| row.get(i)) {
            Some(ColumnValue::Text(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }

    /// The row's original bytes for a dead-letter record: the key column's
    /// text and the payload column's text (bytea: its text form), `None`
    /// where the column is NULL, absent or not text.
    pub(crate) fn original(&self, row: &TupleData) -> (Option<Bytes>, Option<Bytes>) {
        let raw = |i: Option<usize>| match i.and_then(|i| row.get(i)) {
            Some(ColumnValue::Text(b)) => Some(b.clone()),
            _ => None,
        };
        (raw(self.key_index), raw(self.payload_index))
    }

    fn column_name(&self, index: usize) -> String {
        self.relation
            .columns
            .get(index)
            .map_or_else(|| format!("#{}", index + 1), |c| c.name.clone())
    }
}

/// Output bytes that follow from the text alone (the fast path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direct {
    /// The PostgreSQL text is the output.
    Text,
    /// `t`/`f` become `true`/`false`.
    Bool,
}

/// Whether a `StringConverter` or `SimpleHeaderConverter` renders this
/// column's non-null value as its PostgreSQL text (Java's `toString` of a
/// String or an integer is the text PostgreSQL sends).
fn direct(pg: PgType) -> Option<Direct> {
    match pg {
        PgType::Text | PgType::Int2 | PgType::Int4 | PgType::Int8 => Some(Direct::Text),
        PgType::Bool => Some(Direct::Bool),
        _ => None,
    }
}

/// The outbox EventRouter: configuration and converters compiled once, plus
/// Debezium's caches.
#[derive(Debug, Clone)]
pub struct Router {
    cfg: RouterConfig,
    rewrite: TopicRewrite,
    /// `[router]`'s own columns (what [`Router::bind`] reads).
    columns: Arc<ColumnMapping>,
    key_converter: Converter,
    value_converter: Converter,
    header_converter: HeaderConverter,
    key_direct: bool,
    value_direct: bool,
    header_direct: bool,
    topic_prefix: String,
    inherited: Vec<RecordHeader>,
    expand: Option<JsonSchemaData>,
    tracing_context_only: bool,
    /// Debezium Server: partition and timestamp are not sent.
    server_mode: bool,
    topics: HashMap<Box<[u8]>, Arc<str>>,
    /// Envelope schemas by payload schema (Debezium's `payloadSchemaCache`).
    value_schemas: HashMap<String, Arc<Schema>>,
    /// Envelope schemas by column mapping scope and version (Debezium's
    /// `versionedValueSchema`).
    versioned_schemas: HashMap<(Arc<str>, Option<i32>), Arc<Schema>>,
    id_header: Arc<str>,
    traceparent_header: Arc<str>,
    tracestate_header: Arc<str>,
    expansion_failures: u64,
    /// How logical decoding messages become records.
    message_form: MessageForm,
    /// What a non-transactional message becomes here (`Deliver` or `Error`).
    message_non_transactional: NonTransactional,
    /// [`MessageForm::Envelope`]: Debezium's message record and its topic.
    message_envelope: Option<(crate::connect::message::MessageEnvelope, Arc<str>)>,
    /// Message bindings by shape (`message::members_signature`).
    message_bindings: HashMap<String, Arc<BoundRelation>>,
    /// Debezium's type-mapping options for the table's columns.
    type_modes: pg::TypeModes,
    /// The connector's `schema.name.adjustment.mode`.
    schema_names: crate::connect::expand::FieldNameAdjustment,
    /// The connector's `field.name.adjustment.mode`: relations are bound
    /// under their adjusted column names.
    column_names: crate::connect::expand::FieldNameAdjustment,
}

impl Router {
    /// Validates and compiles the router options and converters. Each
    /// router is one Debezium task start: it draws its own `runId`.
    pub fn new(
        cfg: RouterConfig,
        converters: ConvertersConfig,
        debezium: DebeziumConfig,
    ) -> Result<Self, RouteConfigError> {
        let (rewrite, _) = cfg.compile()?;
        let columns = Arc::new(cfg.columns(&ColumnOverrides::default())?);
        let key_converter = converters.key_converter();
        let value_converter = converters.value_converter();
        let header_converter = converters.header_converter();
        let mut inherited = Vec::new();
        if debezium.extended_headers {
            let now_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            let run_id = crate::connect::java::uuid_v7(now_ms);
            let string = Schema::new(Type::String);
            for (name, value) in [
                (
                    HEADER_CONNECTOR_LOGICAL_NAME,
                    debezium.topic_prefix.as_str(),
                ),
                (HEADER_TASK_ID, "0"),
                (HEADER_CONNECTOR_NAME, "postgresql"),
                (HEADER_RUN_ID, run_id.as_str()),
            ] {
                let value = header_converter
                    .from_connect_header(Some(&string), &Value::string(value))
                    .map_err(|_| RouteConfigError::InvalidValue {
                        key: "header.converter",
                        value: format!("{:?}", converters.header),
                        expected: "a header converter that can write strings",
                    })?;
                inherited.push(RecordHeader {
                    name: Arc::from(name),
                    value,
                });
            }
        }
        let expand = cfg.expand_json_payload.then_some(JsonSchemaData {
            null_behavior: cfg.json_payload_null_behavior,
            empty_array_behavior: cfg.json_payload_empty_array_behavior,
            field_names: cfg.field_name_adjustment_mode,
        });
        Ok(Router {
            tracing_context_only: cfg.tracing_with_context_field_only.unwrap_or(true),
            rewrite,
            columns,
            key_converter,
            value_converter,
            header_converter,
            key_direct: converters.key == ConverterKind::String,
            // Per event also: no envelope (`BoundRelation::envelope`).
            value_direct: converters.value == ConverterKind::String && expand.is_none(),
            header_direct: matches!(
                converters.header,
                HeaderConverterKind::Simple | HeaderConverterKind::String
            ),
            server_mode: debezium.server_mode,
            type_modes: debezium.column_types,
            topic_prefix: debezium.topic_prefix,
            inherited,
            expand,
            topics: HashMap::new(),
            value_schemas: HashMap::new(),
            versioned_schemas: HashMap::new(),
            id_header: Arc::from(ID_HEADER),
            traceparent_header: Arc::from(HEADER_TRACEPARENT),
            tracestate_header: Arc::from(HEADER_TRACESTATE),
            expansion_failures: 0,
            message_form: MessageForm::Native,
            message_non_transactional: NonTransactional::Error,
            message_envelope: None,
            message_bindings: HashMap::new(),
            schema_names: debezium.schema_name_adjustment,
            column_names: debezium.field_name_adjustment,
            cfg,
        })
    }

    /// `[router]`'s own columns, which [`Router::bind`] reads.
    #[cfg(test)]
    pub(crate) fn columns(&self) -> &Arc<ColumnMapping> {
        &self.columns
    }

    /// The columns of a table that overrides some of `[router]`'s
    /// (`[[outbox.tables]]`); `[router]`'s own when `overrides` is empty.
    pub fn mapping(
        &self,
        overrides: &ColumnOverrides,
    ) -> Result<Arc<ColumnMapping>, RouteConfigError> {
        if overrides.is_empty() {
            return Ok(Arc::clone(&self.columns));
        }
        Ok(Arc::new(self.cfg.columns(overrides)?))
    }

    /// Payloads `table.expand.json.payload` could not expand and sent as
    /// text instead (Debezium logs "JSON expansion failed" for each).
    #[cfg(test)]
    pub(crate) fn expansion_failures(&self) -> u64 {
        self.expansion_failures
    }

    /// Resolves the configured columns against the outbox relation and the
    /// catalog facts about it; call once per Relation message, not per row.
    ///
    /// A layout that does not fit the configuration (a needed column
    /// missing or dropped, a wrong or unmappable type) does not fail here:
    /// the binding records it ([`BoundRelation::problem`]) and every event
    /// of the relation becomes a [`RouteError::Layout`] naming the event,
    /// its LSN and the column, so the error policy applies per event.
    pub fn bind(
        &self,
        rel: &Arc<RelationInfo>,
        table: &TableMeta,
    ) -> Result<BoundRelation, RouteError> {
        self.bind_with(rel, table, &self.columns)
    }

    /// [`Router::bind`] with a table's own columns (a [`Router::mapping`]).
    pub fn bind_with(
        &self,
        rel: &Arc<RelationInfo>,
        table: &TableMeta,
        columns: &ColumnMapping,
    ) -> Result<BoundRelation, RouteError> {
        let adjusted = self.adjusted_columns(rel, table);
        let (rel, table) = match &adjusted {
            Some((r, t)) => (r, t),
            None => (rel, table),
        };
        match self.bind_strict(rel, table, columns) {
            Ok(bound) => Ok(bound),
            Err(problem) => Ok(self.broken(rel, problem, columns)),
        }
    }

    /// [`Router::check_layout_with`] with the router's own columns.
    #[cfg(test)]
    pub(crate) fn check_layout(
        &self,
        rel: &Arc<RelationInfo>,
        table: &TableMeta,
    ) -> Result<(), RouteError> {
        self.check_layout_with(rel, table, &self.columns)
    }

    /// `bind` with a table's own columns, failing on a layout problem
    /// instead of recording it (for `walrelay check`).
    pub fn check_layout_with(
        &self,
        rel: &Arc<RelationInfo>,
        table: &TableMeta,
        columns: &ColumnMapping,
    ) -> Result<(), RouteError> {
        match self.adjusted_columns(rel, table) {
            Some((rel, table)) => self.bind_strict(&rel, &table, columns).map(drop),
            None => self.bind_strict(rel, table, columns).map(drop),
        }
    }

    /// The relation and catalog facts under the column names Debezium's
    /// `field.name.adjustment.mode` gives the `after` struct's fields
    /// (`event-id` becomes `event_id`); `None` when names are kept.
    fn adjusted_columns(
        &self,
        rel: &Arc<RelationInfo>,
        table: &TableMeta,
    ) -> Option<(Arc<RelationInfo>, TableMeta)> {
        let mode = self.column_names;
        if mode == crate::connect::expand::FieldNameAdjustment::None {
            return None;
        }
        let mut r = RelationInfo::clone(rel);
        for c in &mut r.columns {
            c.name = mode.adjust(&c.name);
        }
        let mut t = table.clone();
        for c in &mut t.columns {
            c.name = mode.adjust(&c.name);
        }
        Some((Arc::new(r), t))
    }

    /// A binding whose every event fails with `problem`; it keeps the
    /// positions of the id, key and payload columns that exist, for error
    /// context and dead-letter records.
    fn broken(
        &self,
        rel: &Arc<RelationInfo>,
        problem: RouteError,
        columns: &ColumnMapping,
    ) -> BoundRelation {
        let placeholder = BoundColumn {
            index: usize::MAX,
            name: Arc::from(""),
            ty: ColumnType {
                pg: PgType::Text,
                schema: Arc::new(Schema::new(Type::String)),
            },
        };
        BoundRelation {
            relation: Arc::clone(rel),
            id: placeholder.clone(),
            key: placeholder.clone(),
            payload: placeholder.clone(),
            route: placeholder,
            timestamp: None,
            version: None,
            placements: Vec::new(),
            tracing: None,
            headers: None,
            after_schema_name: String::new(),
            payload_schema_key: String::new(),
            envelope: columns.envelope,
            scope: Arc::from(columns.scope.as_str()),
            route_index: rel.column_index(&columns.route_by_field),
            id_index: rel.column_index(&columns.id_field),
            key_index: rel.column_index(&columns.key_field),
            payload_index: rel.column_index(&columns.payload_field),
            problem: Some(problem),
        }
    }

    fn bind_strict(
        &self,
        rel: &Arc<RelationInfo>,
        table: &TableMeta,
        columns: &ColumnMapping,
    ) -> Result<BoundRelation, RouteError> {
        let column = |name: &str, key: &'static str| -> Result<Option<BoundColumn>, RouteError> {
            let Some(index) = rel.column_index(name) else {
                return Ok(None);
            };
            let info = &rel.columns[index];
            let meta = table.column(name);
            let ty = pg::column_type_with(info.type_oid, info.type_modifier, meta, self.type_modes)
                .ok_or_else(|| {
                    RouteError::UnmappableType {
                        table: rel.qualified_name(),
                        column: name.to_owned(),
                        key,
                        // The catalog facts are read at session start; after an
                        // ALTER while streaming only the OID is current.
                        type_name: match meta.and_then(|m| m.type_name.as_deref()) {
                            Some(name) => format!(
                                "oid {} (the catalog said {name} at session start)",
                                info.type_oid
                            ),
                            None => format!("oid {}", info.type_oid),
                        },
                    }
                })?;
            Ok(Some(BoundColumn {
                index,
                name: Arc::from(name),
                ty,
            }))
        };
        let after_schema_name = self.schema_names.adjust_schema_name(&format!(
            "{}.{}.{}.Value",
            self.topic_prefix, rel.namespace, rel.name
        ));
        self.bind_columns(rel, &column, after_schema_name, columns)
    }

    /// The checks and resolution of [`Router::bind_strict`], for a relation
    /// or a message's members: `column` finds a configured column by name.
    fn bind_columns(
        &self,
        rel: &Arc<RelationInfo>,
        column: &ColumnLookup<'_>,
        after_schema_name: String,
        columns: &ColumnMapping,
    ) -> Result<BoundRelation, RouteError> {
        let required = |name: &str, key: &'static str| -> Result<BoundColumn, RouteError> {
            column(name, key)?.ok_or_else(|| RouteError::MissingColumn {
                table: rel.qualified_name(),
                column: name.to_owned(),
                key,
            })
        };
        let wrong = |c: &BoundColumn, key: &'static str, expected: &'static str| {
            RouteError::WrongColumnType {
                table: rel.qualified_name(),
                column: c.name.to_string(),
                key,
                expected,
                actual: c.ty.schema.java_string(),
            }
        };
        let id = required(&columns.id_field, KEY_ID_FIELD)?;
        let key = required(&columns.key_field, KEY_KEY_FIELD)?;
        let payload = required(&columns.payload_field, KEY_PAYLOAD_FIELD)?;
        let route = required(&columns.route_by_field, KEY_ROUTE_BY_FIELD)?;
        if route.ty.schema.kind != Type::String {
            return Err(wrong(
                &route,
                KEY_ROUTE_BY_FIELD,
                "a string column (getString)",
            ));
        }
        let timestamp = match &columns.timestamp_field {
            None => None,
            Some(name) => {
                let c = required(name, KEY_TIMESTAMP_FIELD)?;
                let unit = match (c.ty.schema.kind, c.ty.schema.name.as_deref()) {
                    (Type::Int64, Some(names::TIMESTAMP)) => TimestampUnit::Millis,
                    (Type::Int64, Some(names::MICRO_TIMESTAMP)) => TimestampUnit::Micros,
                    (Type::Int64, Some(names::NANO_TIMESTAMP)) => TimestampUnit::Nanos,
                    _ => {
                        return Err(wrong(
                            &c,
                            KEY_TIMESTAMP_FIELD,
                            "an INT64 Timestamp, MicroTimestamp or NanoTimestamp (a timestamp column, not timestamptz)",
                        ))
                    }
                };
                Some((c, unit))
            }
        };
        // Debezium reads the version only to name envelope schemas.
        let version = match (&columns.schema_version_field, columns.envelope) {
            (Some(name), true) => {
                let c = required(name, KEY_SCHEMA_VERSION_FIELD)?;
                if c.ty.schema.kind != Type::Int32 {
                    return Err(wrong(
                        &c,
                        KEY_SCHEMA_VERSION_FIELD,
                        "an INT32 (int4) column",
                    ));
                }
                Some(c)
            }
            _ => None,
        };
        let mut placements = Vec::with_capacity(columns.placements.len());
        for p in &columns.placements {
            let Some(c) = column(&p.column, KEY_ADDITIONAL_PLACEMENT)? else {
                if self.cfg.additional_missing == AdditionalMissing::Ignore {
                    continue;
                }
                return Err(RouteError::MissingColumn {
                    table: rel.qualified_name(),
                    column: p.column.clone(),
                    key: KEY_ADDITIONAL_PLACEMENT,
                });
            };
            if p.placement == Placement::Partition && c.ty.schema.kind != Type::Int32 {
                return Err(wrong(
                    &c,
                    KEY_ADDITIONAL_PLACEMENT,
                    "an INT32 (int4) column for a partition placement",
                ));
            }
            placements.push(BoundPlacement {
                column: c,
                placement: p.placement,
                alias: Arc::from(p.alias.as_str()),
            });
        }
        let tracing = column(
            &columns.tracing_span_context_field,
            KEY_TRACING_SPAN_CONTEXT_FIELD,
        )?;
        if let Some(c) = &tracing {
            if c.ty.schema.kind != Type::String {
                return Err(wrong(c, KEY_TRACING_SPAN_CONTEXT_FIELD, "a string column"));
            }
        }
        let headers = self.bind_headers(rel, column, &placements, tracing.is_some())?;
        let mut payload_schema_key = columns.scope.clone();
        write_json_schema(&mut payload_schema_key, &payload.ty.schema);
        Ok(BoundRelation {
            envelope: columns.envelope,
            scope: Arc::from(columns.scope.as_str()),
            route_index: Some(route.index),
            id_index: Some(id.index),
            key_index: Some(key.index),
            payload_index: Some(payload.index),
            problem: None,
            relation: Arc::clone(rel),
            after_schema_name,
            id,
            key,
            payload,
            route,
            timestamp,
            version,
            placements,
            tracing,
            headers,
            payload_schema_key,
        })
    }

    /// Turns one inserted outbox row into a record.
    pub fn route(
        &mut self,
        bound: &BoundRelation,
        row: &TupleData,
        meta: &EventMeta,
    ) -> Result<KafkaRecord, RouteError> {
        if let Some(problem) = &bound.problem {
            return Err(RouteError::Layout {
                column: problem.column().unwrap_or("?").to_owned(),
                lsn: meta.lsn,
                event_id: bound.event_id(row).unwrap_or_else(|| "unknown".to_owned()),
                source: Box::new(problem.clone()),
            });
        }
        let r = Row {
            bound,
            row,
            meta,
            cells: None,
        };
        self.route_row(&r)
    }

    /// [`Router::route`] once the row (or message) is in hand.
    fn route_row(&mut self, r: &Row<'_>) -> Result<KafkaRecord, RouteError> {
        let (bound, meta) = (r.bound, r.meta);

        // Topic: getString(route.by.field), no default, then RegexRouter.
        let route = r
            .raw(&bound.route)?
            .ok_or_else(|| RouteError::NullRouteValue {
                column: bound.route.name.to_string(),
                lsn: meta.lsn,
                event_id: r.event_id(),
            })?;
        let topic = self.topic(r, route)?;

        let timestamp_ms = match &bound.timestamp {
            None => None,
            Some((c, unit)) => match r.value(c)? {
                Value::Int64(t) => Some(match unit {
                    TimestampUnit::Millis => t,
                    // Java's long division truncates toward zero, as Rust's does.
                    TimestampUnit::Micros => t / 1_000,
                    TimestampUnit::Nanos => t / 1_000_000,
                }),
                _ => None,
            },
        };

        // Debezium adds its context headers to table rows only, never to
        // a decoded message.
        let inherited: &[RecordHeader] = if r.cells.is_some() {
            &[]
        } else {
            &self.inherited
        };
        let mut headers = Vec::with_capacity(inherited.len() + 1 + bound.placements.len());
        headers.extend(inherited.iter().cloned());
        self.tracing_headers(r, &mut headers)?;
        let id = self.header_value(r, &bound.id, ID_HEADER)?;
        if id.is_none() && self.cfg.null_id == NullPolicy::Error {
            return Err(RouteError::NullId {
                column: bound.id.name.to_string(),
                lsn: meta.lsn,
            });
        }
        headers.push(RecordHeader {
            name: Arc::clone(&self.id_header),
            value: id,
        });

        let key = if self.key_direct {
            r.direct(
                &bound.key,
                |v| {
                    self.key_converter
                        .from_connect_data(Some(&bound.key.ty.schema), v)
                },
                "key",
            )?
        } else {
            let v = r.get(&bound.key)?;
            r.convert(
                "key",
                self.key_converter
                    .from_connect_data(Some(&bound.key.ty.schema), &v),
            )?
        };

        if key.is_none() && self.cfg.null_key == NullPolicy::Error {
            return Err(RouteError::NullKey {
                column: bound.key.name.to_string(),
                lsn: meta.lsn,
                event_id: r.event_id(),
            });
        }

        let fast_value = self.value_direct
            && !bound.envelope
            && (!self.cfg.route_tombstone_on_empty_payload || bound.payload.ty.pg.is_text());
        let mut partition = None;
        let value = if fast_value
            && bound
                .placements
                .iter()
                .all(|p| p.placement == Placement::Header)
        {
            for p in &bound.placements {
                let v = self.header_value(r, &p.column, &p.alias)?;
                headers.push(RecordHeader {
                    name: Arc::clone(&p.alias),
                    value: v,
                });
            }
            let tombstone = self.cfg.route_tombstone_on_empty_payload
                && match r.raw(&bound.payload)? {
                    None => match &bound.payload.ty.schema.default {
                        None => true,
                        Some(Value::String(t)) => java_blank(t.bytes()),
                        Some(_) => false,
                    },
                    Some(text) => java_blank(text),
                };
            if tombstone {
                None
            } else {
                let schema = &bound.payload.ty.schema;
                r.direct(
                    &bound.payload,
                    |v| self.value_converter.from_connect_data(Some(schema), v),
                    "value",
                )?
            }
        } else {
            self.general_value(r, &mut headers, &mut partition)?
        };
        if let Some(h) = &bound.headers {
            self.column_headers(r, h, &mut headers)?;
        }

        if self.server_mode {
            // KafkaChangeConsumer builds `new ProducerRecord<>(topic, null, null, key, value, headers)`.
            partition = None;
            return Ok(KafkaRecord {
                topic,
                key,
                value,
                headers,
                partition,
                timestamp_ms: None,
            });
        }
        Ok(KafkaRecord {
            topic,
            key,
            value,
            headers,
            partition,
            timestamp_ms,
        })
    }

    /// The topic an event was meant for, where its route column gives a
    /// legal one; for the context of an event [`Router::route`] refused.
    pub(crate) fn intended_topic(
        &mut self,
        bound: &BoundRelation,
        row: &TupleData,
    ) -> Option<Arc<str>> {
        let index = bound.route_index?;
        let Some(ColumnValue::Text(route)) = row.get(index) else {
            return None;
        };
        if let Some(topic) = self.topics.get(route.as_ref()) {
            return Some(Arc::clone(topic));
        }
        let topic = self.rewrite.apply(std::str::from_utf8(route).ok()?);
        check_topic_name(&topic).ok()?;
        Some(Arc::from(topic))
    }

    /// The value through the general path: payload (maybe expanded),
    /// placements, envelope, tombstone, value converter.
    fn general_value(
        &mut self,
        r: &Row<'_>,
        headers: &mut Vec<RecordHeader>,
        partition: &mut Option<i32>,
    ) -> Result<Option<Bytes>, RouteError> {
        let bound = r.bound;
        let mut payload_schema = Arc::clone(&bound.payload.ty.schema);
        let mut payload = r.get(&bound.payload)?;
        let mut expanded = false;
        // The payload goes out without a schema (JsonConverter writes
        // `"schema":null`): Debezium's empty array under `ignore`.
        let mut schemaless = false;
        if let (Some(expand), Value::String(text)) = (&self.expand, &payload) {
            match expand.expand(&bound.payload.name, text.as_str()) {
                Ok((schema, value)) => {
                    payload_schema = schema;
                    payload = value;
                    expanded = true;
                }
                Err(
                    ref e @ ExpandError {
                        stage: ExpandStage::Value { ref schema },
                        ..
                    },
                ) => {
                    let inferred = schema
                        .as_ref()
                        .map_or("no".to_owned(), |s| s.kind.java_name().to_owned());
                    let refuse = |why: &str| RouteError::JsonExpansion {
                        column: bound.payload.name.to_string(),
                        lsn: r.meta.lsn,
                        event_id: r.event_id(),
                        reason: format!(
                            "{e} after the payload's schema was replaced by the inferred one \
                             ({inferred} schema); {why}"
                        ),
                    };
                    if bound.envelope {
                        return Err(refuse(
                            "debezium's envelope struct refuses the text there and its task fails",
                        ));
                    }
                    match (self.value_converter.kind, schema) {
                        // toString() of the text: what walrelay sends anyway.
                        (ConverterKind::String, _) => {}
                        (ConverterKind::Json, None) => schemaless = true,
                        _ => {
                            return Err(refuse(
                                "debezium's value converter refuses the text under it and its task fails",
                            ))
                        }
                    }
                    self.expansion_failures += 1
                }
                Err(_) => {
                    // Debezium sends what it cannot expand as text; text
                    // that is not JSON at all is a bad input unless
                    // `invalid_json_payload = "pass"`. Blank text is left
                    // to the tombstone rule.
                    if self.cfg.invalid_json_payload == InvalidJsonPolicy::Error
                        && !java_blank(text.bytes())
                    {
                        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text.as_str())
                        {
                            return Err(RouteError::InvalidJsonPayload {
                                column: bound.payload.name.to_string(),
                                lsn: r.meta.lsn,
                                event_id: r.event_id(),
                                reason: e.to_string(),
                            });
                        }
                    }
                    self.expansion_failures += 1
                }
            }
        }

        let envelope_schema = if bound.envelope {
            Some(self.envelope_schema(r, &payload_schema, expanded)?)
        } else {
            None
        };
        let mut fields = Vec::new();
        if bound.envelope {
            fields.push(payload.clone());
        }
        for p in &bound.placements {
            match p.placement {
                Placement::Envelope => fields.push(r.get(&p.column)?),
                Placement::Header => {
                    let v = self.header_value(r, &p.column, &p.alias)?;
                    headers.push(RecordHeader {
                        name: Arc::clone(&p.alias),
                        value: v,
                    });
                }
                // getInt32: no default; a later partition placement wins.
                Placement::Partition => {
                    *partition = match r.value(&p.column)? {
                        Value::Int32(v) => Some(v),
                        _ => None,
                    }
                }
            }
        }

        let blank = match &payload {
            Value::Null => true,
            Value::String(t) => java_blank(t.bytes()),
            _ => false,
        };
        if blank && self.cfg.route_tombstone_on_empty_payload {
            return Ok(None);
        }
        let converted = match &envelope_schema {
            Some(schema) => {
                // A schema cached from an earlier relation layout can have
                // fewer fields than this row provides (Debezium's quirk);
                // Struct.put would fail on the unknown alias.
                if fields.len() != schema.fields.len() {
                    fields.resize(schema.fields.len(), Value::Null);
                }
                self.value_converter
                    .from_connect_data(Some(schema), &Value::Struct(fields))
            }
            None => self
                .value_converter
                .from_connect_data((!schemaless).then_some(&*payload_schema), &payload),
        };
        r.convert("value", converted)
    }

    /// Debezium's `getValueSchema`: cached by payload schema (or by
    /// version when a version column is configured), so the first route
    /// value seen names the schema.
    fn envelope_schema(
        &mut self,
        r: &Row<'_>,
        payload_schema: &Arc<Schema>,
        expanded: bool,
    ) -> Result<Arc<Schema>, RouteError> {
        let bound = r.bound;
        let build = |route: &str, version: Option<i32>| {
            let mut fields = vec![Field {
                name: Arc::from(ENVELOPE_PAYLOAD),
                schema: Arc::clone(payload_schema),
            }];
            for p in bound
                .placements
                .iter()
                .filter(|p| p.placement == Placement::Envelope)
            {
                fields.push(Field {
                    name: Arc::clone(&p.alias),
                    schema: Arc::clone(&p.column.ty.schema),
                });
            }
            // Debezium's getSchemaName: a message's decoded `after` has no
            // name, and the route value alone names the envelope.
            let name = match bound.after_schema_name.rfind('.') {
                _ if bound.after_schema_name.is_empty() => route.to_owned(),
                Some(dot) => format!(
                    "{}{route}.{}",
                    &bound.after_schema_name[..=dot],
                    &bound.after_schema_name[dot + 1..]
                ),
                None => format!("{route}.{}", bound.after_schema_name),
            };
            let mut s = Schema::structure(Some(&name), fields);
            s.version = version;
            Arc::new(s)
        };
        let route_text = || -> Result<String, RouteError> {
            let raw = r
                .raw(&bound.route)?
                .map(|b| String::from_utf8_lossy(b).into_owned());
            Ok(raw.unwrap_or_else(|| "null".to_owned()))
        };
        if let Some(vc) = &bound.version {
            let version = match r.value(vc)? {
                Value::Int32(v) => Some(v),
                _ => None,
            };
            let key = (Arc::clone(&bound.scope), version);
            if let Some(s) = self.versioned_schemas.get(&key) {
                return Ok(Arc::clone(s));
            }
            let s = build(&route_text()?, version);
            if self.versioned_schemas.len() >= SCHEMA_CACHE_LIMIT {
                self.versioned_schemas.clear();
            }
            self.versioned_schemas.insert(key, Arc::clone(&s));
            return Ok(s);
        }
        let key = if expanded {
            let mut k = bound.scope.to_string();
            write_json_schema(&mut k, payload_schema);
            k
        } else {
            bound.payload_schema_key.clone()
        };
        if let Some(s) = self.value_schemas.get(&key) {
            return Ok(Arc::clone(s));
        }
        let s = build(&route_text()?, None);
        if self.value_schemas.len() >= SCHEMA_CACHE_LIMIT {
            self.value_schemas.clear();
        }
        self.value_schemas.insert(key, Arc::clone(&s));
        Ok(s)
    }

    fn topic(&mut self, r: &Row<'_>, route: &Bytes) -> Result<Arc<str>, RouteError> {
        if let Some(topic) = self.topics.get(route.as_ref()) {
            return Ok(Arc::clone(topic));
        }
        let route_str =
            std::str::from_utf8(route).map_err(|source| RouteError::NonUtf8RouteValue {
                column: r.bound.route.name.to_string(),
                lsn: r.meta.lsn,
                event_id: r.event_id(),
                source,
            })?;
        let topic: Arc<str> = Arc::from(self.rewrite.apply(route_str));
        // Only legal names are cached, so a cached topic needs no check.
        if let Err(reason) = check_topic_name(&topic) {
            return Err(RouteError::InvalidTopic {
                column: r.bound.route.name.to_string(),
                topic: topic.to_string(),
                lsn: r.meta.lsn,
                event_id: r.event_id(),
                reason,
            });
        }
        if self.topics.len() >= TOPIC_CACHE_LIMIT {
            self.topics.clear();
        }
        self.topics
            .insert(Box::from(route.as_ref()), Arc::clone(&topic));
        Ok(topic)
    }

    /// `headers.add(name, struct.get(column), columnSchema)` through the
    /// header converter.
    fn header_value(
        &self,
        r: &Row<'_>,
        c: &BoundColumn,
        name: &str,
    ) -> Result<Option<Bytes>, RouteError> {
        let schema = &c.ty.schema;
        if self.header_direct {
            let what = format!("header {name}");
            return r.direct(
                c,
                |v| self.header_converter.from_connect_header(Some(schema), v),
                &what,
            );
        }
        let v = r.get(c)?;
        r.convert(
            &format!("header {name}"),
            self.header_converter.from_connect_header(Some(schema), &v),
        )
    }

    /// OpenTelemetry W3C propagation as Debezium's `ActivateTracingSpan`
    /// documents it: a row with a span context (Java properties text with
    /// `traceparent`) gets a `traceparent` for a new child span and its
    /// `tracestate`; without one, nothing unless
    /// `tracing.with.context.field.only=false`, which starts a new trace.
    fn tracing_headers(
        &self,
        r: &Row<'_>,
        headers: &mut Vec<RecordHeader>,
    ) -> Result<(), RouteError> {
        let context = match &r.bound.tracing {
            Some(c) => r.raw(c)?,
            None => None,
        };
        if context.is_none() && self.tracing_context_only {
            return Ok(());
        }
        // Debezium reads the column with `Properties.load`; a text it cannot
        // read (a malformed `\u` escape) carries no usable parent here.
        let props = context
            .and_then(|b| parse_properties_ordered(&String::from_utf8_lossy(b)).ok())
            .unwrap_or_default();
        let parent = props
            .iter()
            .find(|(k, _)| k == HEADER_TRACEPARENT)
            .and_then(|(_, v)| parse_traceparent(v));
        let span: [u8; 8] = loop {
            let s: [u8; 8] = rand::random();
            if s != [0; 8] {
                break s;
            }
        };
        let mut out = String::with_capacity(55);
        out.push_str("00-");
        let (trace, flags, state) = match parent {
            Some((trace, flags)) => {
                let state = props
                    .iter()
                    .find(|(k, _)| k == HEADER_TRACESTATE)
                    .map(|(_, v)| v.clone());
                (trace, flags, state)
            }
            None => {
                let t: [u8; 16] = loop {
                    let t: [u8; 16] = rand::random();
                    if t != [0; 16] {
                        break t;
                    }
                };
                (t, 1, None)
            }
        };
        crate::connect::java::hex(&trace, &mut out);
        out.push('-');
        crate::connect::java::hex(&span, &mut out);
        out.push('-');
        crate::connect::java::hex(&[flags], &mut out);
        let string = Schema::new(Type::String);
        let mut add = |name: &Arc<str>, value: String| -> Result<(), RouteError> {
            let v = r.convert(
                &format!("header {name}"),
                self.header_converter
                    .from_connect_header(Some(&string), &Value::string(value)),
            )?;
            headers.push(RecordHeader {
                name: Arc::clone(name),
                value: v,
            });
            Ok(())
        };
        add(&self.traceparent_header, out)?;
        if let Some(state) = state.filter(|s| !s.is_empty()) {
            add(&self.tracestate_header, state)?;
        }
        Ok(())
    }
}

/// `String.trim().isEmpty()` on UTF-8 bytes: Java trims every char up to
/// U+0020, and those are exactly the bytes up to 0x20.
fn java_blank(text: &[u8]) -> bool {
    text.iter().all(|&b| b <= b' ')
}

/// `00-<32 hex>-<16 hex>-<2 hex>` → (trace id, flags); invalid ids are
/// refused as the W3C propagator refuses them.
fn parse_traceparent(v: &str) -> Option<([u8; 16], u8)> {
    let parts: Vec<&str> = v.trim().split('-').collect();
    if parts.len() < 4
        || parts[0].len() != 2
        || parts[1].len() != 32
        || parts[2].len() != 16
        || parts[3].len() != 2
    {
        return None;
    }
    if parts[0] == "ff" {
        return None;
    }
    let hex = |s: &str| -> Option<Vec<u8>> {
        if !s
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return None;
        }
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
            .collect()
    };
    let trace: [u8; 16] = hex(parts[1])?.try_into().ok()?;
    let span = hex(parts[2])?;
    let flags = hex(parts[3])?;
    if trace == [0; 16] || span.iter().all(|b| *b == 0) {
        return None;
    }
    Some((trace, flags[0]))
}

/// One row being routed, with its error context.
struct Row<'a> {
    bound: &'a BoundRelation,
    row: &'a TupleData,
    meta: &'a EventMeta,
    /// A message's members, which stand in for `row` when set.
    cells: Option<&'a [message::Cell]>,
}

impl Row<'_> {
    fn event_id(&self) -> String {
        if let Some(cells) = self.cells {
            return cells
                .get(self.bound.id.index)
                .and_then(|c| c.text.as_ref())
                .map_or_else(
                    || "unknown".to_owned(),
                    |b| String::from_utf8_lossy(b).into_owned(),
                );
        }
        match self.row.get(self.bound.id.index) {
            Some(ColumnValue::Text(b)) => String::from_utf8_lossy(b).into_owned(),
            _ => "unknown".to_owned(),
        }
    }

    /// The text of a column; `None` for NULL.
    fn raw(&self, c: &BoundColumn) -> Result<Option<&Bytes>, RouteError> {
        if let Some(cells) = self.cells {
            return Ok(cells.get(c.index).and_then(|cell| cell.text.as_ref()));
        }
        match self.row.get(c.index) {
            None => Err(RouteError::ShortRow {
                column: self.bound.column_name(c.index),
                index: c.index,
                width: self.row.len(),
                lsn: self.meta.lsn,
            }),
            Some(ColumnValue::Text(b)) => Ok(Some(b)),
            Some(ColumnValue::Null) => Ok(None),
            Some(ColumnValue::UnchangedToast) => Err(RouteError::UnchangedToast {
                column: c.name.to_string(),
                lsn: self.meta.lsn,
                event_id: self.event_id(),
            }),
            Some(ColumnValue::Binary(_)) => Err(RouteError::BinaryValue {
                column: c.name.to_string(),
                lsn: self.meta.lsn,
                event_id: self.event_id(),
            }),
        }
    }

    /// The Connect value as stored in the `after` struct (`getInt32` and
    /// friends: no default).
    fn value(&self, c: &BoundColumn) -> Result<Value, RouteError> {
        if let Some(cells) = self.cells {
            return Ok(cells
                .get(c.index)
                .map_or(Value::Null, |cell| cell.value.clone()));
        }
        match self.raw(c)? {
            None => Ok(Value::Null),
            Some(text) => pg::decode(c.ty.pg, text).map_err(|source| RouteError::InvalidValue {
                column: c.name.to_string(),
                lsn: self.meta.lsn,
                event_id: self.event_id(),
                source,
            }),
        }
    }

    /// `Struct.get(field)`: null becomes the schema's default.
    fn get(&self, c: &BoundColumn) -> Result<Value, RouteError> {
        let v = self.value(c)?;
        Ok(match (&v, &c.ty.schema.default) {
            (Value::Null, Some(d)) => d.clone(),
            _ => v,
        })
    }

    fn convert(
        &self,
        what: &str,
        result: Result<Option<Bytes>, ConvertError>,
    ) -> Result<Option<Bytes>, RouteError> {
        result.map_err(|source| RouteError::Convert {
            what: what.to_owned(),
            lsn: self.meta.lsn,
            event_id: self.event_id(),
            source,
        })
    }

    /// A `toString`-style converter's output: the text itself where that is
    /// what Java would print, otherwise through `general` on `Struct.get`.
    fn direct(
        &self,
        c: &BoundColumn,
        general: impl FnOnce(&Value) -> Result<Option<Bytes>, ConvertError>,
        what: &str,
    ) -> Result<Option<Bytes>, RouteError> {
        match (direct(c.ty.pg), self.raw(c)?) {
            (Some(Direct::Text), Some(text)) => return Ok(Some(text.clone())),
            (Some(Direct::Bool), Some(text)) if text.as_ref() == b"t" => {
                return Ok(Some(Bytes::from_static(b"true")))
            }
            (Some(Direct::Bool), Some(text)) if text.as_ref() == b"f" => {
                return Ok(Some(Bytes::from_static(b"false")))
            }
            (Some(_), None) if c.ty.schema.default.is_none() => return Ok(None),
            _ => {}
        }
        let v = self.get(c)?;
        self.convert(what, general(&v))
    }
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<BoundRelation>();
    check::<Router>();
    check::<Text>();
}

#[cfg(test)]
mod tests;
