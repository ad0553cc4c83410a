//! What can keep an outbox row or message from becoming a record: one
//! error type for binding and routing, each variant with the column, LSN
//! and event id a person needs, and a stable kind for metrics and
//! dead-letter headers. Pure data; never logs.

use walrelay_proto::Lsn;

use super::HeadersError;
use crate::connect::convert::ConvertError;
use crate::connect::pg::InvalidText;

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
        /// The column of `table` that `key` names.
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
        /// The column of `table` that `key` names.
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
        /// The column, as the Relation message names it.
        column: String,
        /// LSN of the change.
        lsn: Lsn,
        /// Text of the event id, or `unknown`.
        event_id: String,
    },
    /// A needed column came in pgoutput's binary format.
    #[error("binary pgoutput values are not supported for column \"{column}\" at lsn {lsn} (event id {event_id})")]
    BinaryValue {
        /// The column, as the Relation message names it.
        column: String,
        /// LSN of the change.
        lsn: Lsn,
        /// Text of the event id, or `unknown`.
        event_id: String,
    },
    /// A column's text is not a value Debezium's mapping can represent.
    #[error("column \"{column}\" at lsn {lsn} (event id {event_id}) cannot be mapped")]
    InvalidValue {
        /// The column, as the Relation message names it.
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
        /// Where the message is in the WAL.
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
        /// Where the message is in the WAL.
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
    /// A transform after the router refused the record (Connect's
    /// `DataException`).
    #[error("transform {alias} ({class}) refused the event at lsn {lsn} (event id {event_id}): {reason}")]
    Transform {
        /// LSN of the change.
        lsn: Lsn,
        /// Text of the event id, or `unknown`.
        event_id: String,
        /// The transform's alias.
        alias: String,
        /// Its class.
        class: String,
        /// Kafka's message.
        reason: String,
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
            RouteError::Transform { .. } => "transform",
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
            RouteError::Convert { .. }
            | RouteError::MessageContent { .. }
            | RouteError::Transform { .. } => None,
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
