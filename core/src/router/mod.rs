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

mod bind;
pub(crate) mod config;
mod connect_out;
mod envelope_headers;
mod error;
mod headers;
mod message;
mod record;
mod rewrite;
mod row;
mod topic;
mod trace_context;
mod value;

use std::collections::HashMap;
use std::sync::Arc;

pub use self::bind::BoundRelation;
use self::bind::{BoundColumn, BoundPlacement, ColumnLookup};
pub use self::config::*;
use self::connect_out::{Headers, Part};
pub use self::envelope_headers::EnvelopeField;
pub use self::error::{MessageProblem, RouteError};
pub use self::headers::{HeadersError, KEY_HEADERS_FIELD};
pub use self::message::{MessageEvent, MessageForm};
pub use self::record::{EventMeta, KafkaRecord, RecordHeader};
pub use self::rewrite::TopicRewrite;
use self::row::Row;
pub use self::topic::check_topic_name;
#[cfg(test)]
use self::topic::TOPIC_CACHE_LIMIT;
use crate::connect::config::{ConverterKind, ConvertersConfig, HeaderConverterKind};
use crate::connect::convert::{Converter, HeaderConverter};
use crate::connect::expand::JsonSchemaData;
use crate::connect::pg;
pub use crate::connect::pg::{ColumnMeta, TableMeta};
use crate::connect::transforms::{Chain, ConnectHeader};
use crate::connect::{Schema, Text, Type, Value};

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
    /// The transforms after the router (Connect's chain); empty: none.
    chain: Chain,
    /// A `HeaderFrom$Value` before the router: the change event's fields
    /// copied into headers.
    envelope_headers: Option<envelope_headers::EnvelopeHeaders>,
    /// The value converter when it is the CloudEvents converter.
    cloudevents: Option<crate::connect::cloudevents::CloudEventsConverter>,
    /// The inherited headers as Connect headers, for the chain.
    inherited_connect: Vec<ConnectHeader>,
    /// `Schema.STRING`, shared by the headers the router writes.
    string_schema: Arc<Schema>,
    /// The schema of a headers column's members under a chain.
    raw_header_schema: Arc<Schema>,
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
        let mut inherited_connect = Vec::new();
        let string_schema = Arc::new(Schema::new(Type::String));
        if debezium.extended_headers {
            let now_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            let run_id = crate::connect::java::uuid_v7(now_ms);
            let string = Schema::new(Type::String);
            for (name, text) in [
                (
                    HEADER_CONNECTOR_LOGICAL_NAME,
                    debezium.topic_prefix.as_str(),
                ),
                (HEADER_TASK_ID, "0"),
                (HEADER_CONNECTOR_NAME, "postgresql"),
                (HEADER_RUN_ID, run_id.as_str()),
            ] {
                let value = header_converter
                    .from_connect_header(Some(&string), &Value::string(text))
                    .map_err(|_| RouteConfigError::InvalidValue {
                        key: "header.converter",
                        value: format!("{:?}", converters.header),
                        expected: "a header converter that can write strings",
                    })?;
                inherited.push(RecordHeader {
                    name: Arc::from(name),
                    value,
                });
                inherited_connect.push(ConnectHeader {
                    key: Arc::from(name),
                    schema: Some(Arc::clone(&string_schema)),
                    value: Value::string(text),
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
            chain: Chain::default(),
            envelope_headers: None,
            cloudevents: None,
            inherited_connect,
            string_schema,
            raw_header_schema: connect_out::raw_header_schema(),
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

    /// Puts `chain` after the router: records stay Connect data through
    /// the router and the chain, and are converted after it.
    pub fn with_chain(mut self, chain: Chain) -> Self {
        if !chain.is_empty() {
            self.key_direct = false;
            self.value_direct = false;
            self.header_direct = false;
        }
        self.chain = chain;
        self
    }

    /// The transforms after the router.
    pub fn chain(&self) -> &Chain {
        &self.chain
    }

    /// Makes `converter` the value converter (`value.converter=
    /// io.debezium.converters.CloudEventsConverter`): it reads the
    /// record's headers, so the router keeps Connect data and converts
    /// after the chain.
    pub fn with_cloudevents(
        mut self,
        converter: crate::connect::cloudevents::CloudEventsConverter,
    ) -> Self {
        self.cloudevents = Some(converter);
        self.key_direct = false;
        self.value_direct = false;
        self.header_direct = false;
        self
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
