//! Logical decoding messages as outbox events: the content's JSON object
//! stands in for the outbox row.
//!
//! Owns how a message's content becomes the members the router reads, in
//! the two forms walrelay knows:
//!
//! - **Debezium's chain** (`DecodeLogicalDecodingMessageContent` before the
//!   EventRouter): the content, read as text, must start with `{` or `[`;
//!   Jackson's tree of it gets a schema from `JsonSchemaData` (every field
//!   optional, JSON nulls dropped unless `fields.null.include`, nested
//!   objects as structs named by path), and the EventRouter then reads the
//!   struct's fields as it reads an `after` struct. The routed record
//!   carries no `__debezium.context.*` headers: Debezium adds those to
//!   table rows only.
//! - **Native**: the content must be a JSON object. Its members are the
//!   outbox columns: strings are text, numbers and booleans are typed as
//!   `JsonSchemaData` types them, `null` is NULL, and an object or array is
//!   a `jsonb` column holding the member's text exactly as written (so the
//!   `outbox_emit` SQL helper, which writes `jsonb` text, gives the payload
//!   bytes a `jsonb` payload column gives).
//!
//! Anything that does not fit is a [`RouteError`] naming the prefix, the
//! LSN and the member, so the error policy applies as for a row. It never
//! logs and never does I/O.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::value::RawValue;
use walrelay_proto::pgoutput::{ColumnValue, Message, TupleData};
use walrelay_proto::{Lsn, RelationColumnInfo, RelationInfo};

use super::NonTransactional;
use super::{
    BoundColumn, BoundRelation, EventMeta, KafkaRecord, RouteError, Router,
    KEY_ADDITIONAL_PLACEMENT,
};
use crate::connect::expand::{
    EmptyArrayBehavior, FieldNameAdjustment, JsonSchemaData, NullBehavior,
};
use crate::connect::json::{parse, JsonNode};
use crate::connect::message::{MessageEnvelope, MessageFacts};
use crate::connect::pg::{names, ColumnType, PgType};
use crate::connect::transforms::ConnectRecord;
use crate::connect::{Field, Schema, Text, Type, Value};

/// A selected logical decoding message on its way to Kafka.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageEvent {
    /// The prefix given to `pg_logical_emit_message`.
    pub(crate) prefix: Arc<str>,
    /// The content, as written.
    pub(crate) content: Bytes,
    /// Whether it was emitted as part of its transaction.
    pub(crate) transactional: bool,
    /// For Debezium's `source.sequence`: the end LSN of the last Commit
    /// (or the LSN of the last non-transactional message, any prefix)
    /// seen before this message in the session.
    pub(crate) last_commit_lsn: Option<Lsn>,
    /// For Debezium's `source.ts_*`: the commit time of its transaction
    /// (Unix µs); for a non-transactional message, the last one seen.
    pub(crate) source_time_us: i64,
    /// Its `transaction` block when transaction metadata is on (a
    /// transactional message); `None` otherwise.
    pub(crate) transaction: Option<crate::connect::transaction::Block>,
}

impl MessageEvent {
    /// The message as a spill-file row: prefix and content as text columns.
    pub(crate) fn spill_row(m: &Message) -> TupleData {
        TupleData {
            columns: vec![
                ColumnValue::Text(m.prefix.clone()),
                ColumnValue::Text(m.content.clone()),
            ],
        }
    }

    /// Reads back what [`MessageEvent::spill_row`] wrote (spilled messages
    /// are transactional).
    pub(crate) fn from_spilled(row: &TupleData) -> Option<MessageEvent> {
        match row.columns.as_slice() {
            [ColumnValue::Text(prefix), ColumnValue::Text(content)] => Some(MessageEvent {
                prefix: Arc::from(String::from_utf8_lossy(prefix).as_ref()),
                content: content.clone(),
                transactional: true,
                last_commit_lsn: None,
                source_time_us: 0,
                transaction: None,
            }),
            _ => None,
        }
    }
}

/// How message events become records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MessageForm {
    /// walrelay's native form (see the module documentation).
    #[default]
    Native,
    /// `DecodeLogicalDecodingMessageContent`, then the EventRouter.
    Decode {
        /// The transform's `fields.null.include`.
        null_include: bool,
    },
    /// No decode transform: Debezium's `<topic.prefix>.message` record
    /// (the EventRouter passes it through unchanged).
    Envelope,
}

/// Distinct message shapes whose bindings are kept; real outboxes have a
/// handful, so this only bounds abuse.
const BINDING_CACHE_LIMIT: usize = 1024;

/// A message shape: member names in order with their schemas (primitive
/// ones by a letter). Messages of equal shape bind alike.
fn members_signature(members: &Members) -> String {
    let mut sig = String::with_capacity(16 * members.fields.len());
    for f in &members.fields {
        sig.push_str(&f.name);
        sig.push('\u{0}');
        match (f.schema.kind, f.schema.name.is_none()) {
            (Type::String, true) => sig.push('s'),
            (Type::Int32, true) => sig.push('i'),
            (Type::Int64, true) => sig.push('l'),
            (Type::Boolean, true) => sig.push('b'),
            (Type::Float64, true) => sig.push('d'),
            _ => crate::connect::convert::write_json_schema(&mut sig, &f.schema),
        }
        sig.push('\u{1}');
    }
    sig
}

/// One member of a message's content, as the router reads a column.
#[derive(Debug, Clone)]
pub(super) struct Cell {
    /// The text a `toString`-style converter prints where that is the
    /// text itself (strings; integers; `t`/`f` for booleans); `None` for
    /// null and for values without such a text.
    pub(crate) text: Option<Bytes>,
    /// The Connect value.
    pub(crate) value: Value,
}

/// The members of one message: field names and schemas, and the values.
struct Members {
    fields: Vec<Field>,
    cells: Vec<Cell>,
}

impl Router {
    /// Sets how message events are rendered and what a non-transactional
    /// one becomes (`Deliver` or `Error`; `Skip` never reaches the router).
    /// `database` is `source.db` of the [`MessageForm::Envelope`] record.
    pub fn set_message_form(
        &mut self,
        form: MessageForm,
        non_transactional: NonTransactional,
        database: &str,
    ) {
        self.message_form = form;
        self.message_non_transactional = non_transactional;
        self.message_envelope = (form == MessageForm::Envelope).then(|| {
            let envelope = MessageEnvelope::with_binary(
                &self.topic_prefix,
                database,
                self.type_modes.binary_handling_mode,
            );
            let topic: Arc<str> = Arc::from(envelope.topic());
            (envelope, topic)
        });
    }

    /// Turns one logical decoding message into a record, with its event id.
    pub(crate) fn route_message(
        &mut self,
        m: &MessageEvent,
        meta: &EventMeta,
    ) -> Result<(Option<KafkaRecord>, Option<String>), RouteError> {
        let content_error = |reason: String, what: &'static str| RouteError::MessageContent {
            prefix: m.prefix.to_string(),
            lsn: meta.lsn,
            reason,
            what,
        };
        if !m.transactional && self.message_non_transactional != NonTransactional::Deliver {
            return Err(content_error(
                "it was written with pg_logical_emit_message(false, ...), and PostgreSQL \
                 publishes such a message even when its transaction rolls back \
                 (outbox.non_transactional = \"error\"; \"skip\" drops it)"
                    .to_owned(),
                "non_transactional",
            ));
        }
        let members = match self.message_form {
            MessageForm::Decode { null_include } => decode_members(m, null_include)
                .map_err(|reason| content_error(reason, "invalid_message"))?,
            MessageForm::Native => native_members(&m.content)
                .map_err(|reason| content_error(reason, "invalid_message"))?,
            MessageForm::Envelope => return self.message_record(m, meta),
        };
        // Messages of one shape share a binding (as rows of one relation do).
        let signature = members_signature(&members);
        let bound = match self.message_bindings.get(&signature) {
            Some(b) => Arc::clone(b),
            None => {
                let b = Arc::new(self.bind_members(m, meta, &members)?);
                if self.message_bindings.len() >= BINDING_CACHE_LIMIT {
                    self.message_bindings.clear();
                }
                self.message_bindings.insert(signature, Arc::clone(&b));
                b
            }
        };
        let row = TupleData::default();
        let r = super::Row {
            bound: &bound,
            row: &row,
            meta,
            cells: Some(&members.cells),
        };
        let event_id = Some(r.event_id()).filter(|id| id != "unknown");
        Ok((self.route_row(&r)?, event_id))
    }

    /// The topic a message was meant for, where its route member gives a
    /// legal one (for the context of a message the router refused).
    pub(crate) fn intended_message_topic(&mut self, m: &MessageEvent) -> Option<Arc<str>> {
        let members = match self.message_form {
            MessageForm::Decode { null_include } => decode_members(m, null_include).ok()?,
            MessageForm::Native => native_members(&m.content).ok()?,
            MessageForm::Envelope => {
                return self.message_envelope.as_ref().map(|(_, t)| Arc::clone(t))
            }
        };
        let i = members
            .fields
            .iter()
            .position(|f| *f.name == *self.cfg.route_by_field)?;
        let route = members.cells[i].text.as_ref()?;
        if members.fields[i].schema.kind != Type::String {
            return None;
        }
        let topic = self.rewrite.apply(std::str::from_utf8(route).ok()?);
        super::check_topic_name(&topic).ok()?;
        Some(Arc::from(topic))
    }

    /// Debezium's `<topic.prefix>.message` record of a message no decode
    /// transform turned into an event: no headers, the producer's clock.
    fn message_record(
        &self,
        m: &MessageEvent,
        meta: &EventMeta,
    ) -> Result<(Option<KafkaRecord>, Option<String>), RouteError> {
        let Some((envelope, topic)) = &self.message_envelope else {
            return Err(RouteError::MessageContent {
                prefix: m.prefix.to_string(),
                lsn: meta.lsn,
                reason: "no message record is configured (set_message_form)".to_owned(),
                what: "invalid_message",
            });
        };
        let facts = MessageFacts {
            prefix: &m.prefix,
            content: &m.content,
            lsn: meta.lsn,
            xid: m.transactional.then_some(meta.xid),
            source_time_us: m.source_time_us,
            last_commit_lsn: m.last_commit_lsn,
            origin: None,
            transaction: m.transaction.as_ref(),
        };
        let convert =
            |what: &str, r: Result<Option<Bytes>, crate::connect::convert::ConvertError>| {
                r.map_err(|source| RouteError::Convert {
                    what: what.to_owned(),
                    lsn: meta.lsn,
                    event_id: "unknown".to_owned(),
                    source,
                })
            };
        let now_ms = crate::clock::unix_now_micros() / 1000;
        if self.connect_mode() {
            let (key_schema, key) = envelope.key(&facts);
            let (value_schema, value) = envelope.value(&facts, now_ms);
            let record = ConnectRecord {
                topic: Arc::clone(topic),
                partition: None,
                key_schema: Some(key_schema),
                key,
                value_schema: Some(value_schema),
                value,
                timestamp: None,
                headers: Vec::new(),
            };
            return Ok((
                self.transform(record, meta.lsn, || "unknown".to_owned())?,
                None,
            ));
        }
        let key = convert("key", envelope.key_bytes(self.key_converter, &facts))?;
        let value = convert(
            "value",
            envelope.value_bytes(self.value_converter, &facts, now_ms),
        )?;
        Ok((
            Some(KafkaRecord {
                topic: Arc::clone(topic),
                key,
                value,
                headers: Vec::new(),
                partition: None,
                timestamp_ms: None,
            }),
            None,
        ))
    }

    /// Resolves the configured columns against the message's members.
    fn bind_members(
        &self,
        m: &MessageEvent,
        meta: &EventMeta,
        members: &Members,
    ) -> Result<BoundRelation, RouteError> {
        let rel = Arc::new(RelationInfo {
            id: 0,
            namespace: "message".to_owned(),
            name: m.prefix.to_string(),
            replica_identity: b'n',
            columns: members
                .fields
                .iter()
                .map(|f| RelationColumnInfo {
                    name: f.name.to_string(),
                    type_oid: 0,
                    type_modifier: -1,
                    is_key: false,
                })
                .collect(),
        });
        let column = |name: &str, _key: &'static str| -> Result<Option<BoundColumn>, RouteError> {
            let Some(index) = members.fields.iter().position(|f| *f.name == *name) else {
                return Ok(None);
            };
            let schema = Arc::clone(&members.fields[index].schema);
            let pg = match schema.kind {
                Type::String => PgType::Text,
                Type::Int32 => PgType::Int4,
                Type::Int64 => PgType::Int8,
                Type::Boolean => PgType::Bool,
                _ => PgType::Content,
            };
            Ok(Some(BoundColumn {
                index,
                name: Arc::from(name),
                ty: ColumnType { pg, schema },
            }))
        };
        self.bind_columns(&rel, &column, String::new(), &self.columns)
            .map_err(|problem| {
                let (member, reason) = member_problem(&problem);
                let event_id = members
                    .fields
                    .iter()
                    .position(|f| *f.name == *self.cfg.id_field)
                    .and_then(|i| members.cells[i].text.as_ref())
                    .map_or_else(
                        || "unknown".to_owned(),
                        |b| String::from_utf8_lossy(b).into_owned(),
                    );
                RouteError::MessageLayout {
                    lsn: meta.lsn,
                    detail: Box::new(super::MessageProblem {
                        prefix: m.prefix.to_string(),
                        event_id,
                        member,
                        reason,
                    }),
                    what: problem.kind(),
                }
            })
    }
}

/// The member and the reason of a binding problem, worded for a message.
fn member_problem(problem: &RouteError) -> (String, String) {
    match problem {
        RouteError::MissingColumn { column, key, .. } => (
            column.clone(),
            if *key == KEY_ADDITIONAL_PLACEMENT {
                format!("is missing ({key}; table.field.additional.missing=ignore skips it)")
            } else {
                format!("is missing ({key})")
            },
        ),
        RouteError::WrongColumnType {
            column,
            key,
            expected,
            actual,
            ..
        } => (
            column.clone(),
            format!(
                "({key}) must be {}, but it is {actual}",
                expected.replace("column", "member")
            ),
        ),
        other => (other.column().unwrap_or("?").to_owned(), other.to_string()),
    }
}

/// Debezium's `DecodeLogicalDecodingMessageContent`: `new String(bytes)`,
/// text starting with `{` or `[`, Jackson's tree, `JsonSchemaData` with the
/// transform's null behaviour and no name adjustment.
fn decode_members(m: &MessageEvent, null_include: bool) -> Result<Members, String> {
    let doc = decode_document(m)?;
    let data = JsonSchemaData {
        null_behavior: if null_include {
            NullBehavior::OptionalBytes
        } else {
            NullBehavior::Ignore
        },
        empty_array_behavior: EmptyArrayBehavior::Ignore,
        field_names: FieldNameAdjustment::None,
    };
    let schema = data
        .to_connect_schema(None, &doc)
        .map_err(|e| format!("its content has no Connect schema: {}", e.reason))?
        .ok_or_else(|| "its content has no Connect schema".to_owned())?;
    let value = data
        .to_connect_data(&doc, &schema)
        .map_err(|e| format!("its content does not convert: {}", e.reason))?;
    let Value::Struct(values) = value else {
        return Err("its content did not become a struct".to_owned());
    };
    let cells = schema
        .fields
        .iter()
        .zip(values)
        .map(|(_, value)| Cell {
            text: scalar_text(&value),
            value,
        })
        .collect();
    Ok(Members {
        fields: schema.fields.clone(),
        cells,
    })
}

/// The content as the decode transform reads it: lossy UTF-8 text that
/// starts like JSON, parses, is an object, and has no member named `""`
/// (each refusal worded as what Debezium's task does with it).
fn decode_document(m: &MessageEvent) -> Result<JsonNode, String> {
    let text = String::from_utf8_lossy(&m.content);
    if !(text.starts_with('{') || text.starts_with('[')) {
        return Err(not_json_start(m.content.len()));
    }
    let doc = parse(&text).map_err(|e| format!("its content is not JSON: {e}"))?;
    if !matches!(doc, JsonNode::Object(_)) {
        return Err(format!(
            "its content is a JSON {}, not an object (Debezium's decode transform fails on it)",
            doc.node_type().to_ascii_lowercase()
        ));
    }
    if has_empty_name(&doc) {
        // Debezium's SchemaBuilder refuses it ("fieldName cannot be null"):
        // its task fails.
        return Err(
            "its content has a member with an empty name, which no Connect struct can hold"
                .to_owned(),
        );
    }
    Ok(doc)
}

/// What Debezium's task says of content that does not start like JSON.
const UNPARSABLE: &str = "Unable to parse logical decoding message content JSON string";

/// The refusal of `len` bytes of content that do not start like JSON.
fn not_json_start(len: usize) -> String {
    // Plain text, not a format string: its braces stand as they are.
    let start = "its content does not start with '{' or '['";
    format!("{start} (Debezium: \"{UNPARSABLE}\"); it is {len} bytes")
}

/// Whether any object in `node` has a member named `""`.
fn has_empty_name(node: &JsonNode) -> bool {
    match node {
        JsonNode::Object(members) => members
            .iter()
            .any(|(name, v)| name.is_empty() || has_empty_name(v)),
        JsonNode::Array(items) => items.iter().any(has_empty_name),
        _ => false,
    }
}

/// The text a `toString`-style converter prints for a scalar, where the
/// router's direct path may use it.
fn scalar_text(v: &Value) -> Option<Bytes> {
    match v {
        Value::String(t) => Some(t.bytes().clone()),
        Value::Int32(i) => Some(Bytes::from(i.to_string())),
        Value::Int64(i) => Some(Bytes::from(i.to_string())),
        Value::Boolean(true) => Some(Bytes::from_static(b"t")),
        Value::Boolean(false) => Some(Bytes::from_static(b"f")),
        _ => None,
    }
}

/// The native form: a JSON object whose members are columns.
fn native_members(content: &Bytes) -> Result<Members, String> {
    let text =
        std::str::from_utf8(content).map_err(|e| format!("its content is not UTF-8: {e}"))?;
    let trimmed = text.trim_start();
    if !trimmed.starts_with('{') {
        let what = match trimmed.as_bytes().first() {
            None => "empty".to_owned(),
            Some(b'[') => "a JSON array, not an object".to_owned(),
            Some(_) => match serde_json::from_str::<serde::de::IgnoredAny>(trimmed) {
                Ok(_) => "a JSON scalar, not an object".to_owned(),
                Err(e) => format!("not JSON ({e})"),
            },
        };
        return Err(format!("its content is {what}"));
    }
    // Members in document order; a repeated name keeps its first position
    // and its last value (as Jackson reads it).
    let members: Vec<(String, &RawValue)> = serde_json::from_str::<OrderedMembers<'_>>(text)
        .map_err(|e| format!("its content is not a JSON object: {e}"))?
        .0;
    let mut fields: Vec<Field> = Vec::with_capacity(members.len());
    let mut cells: Vec<Cell> = Vec::with_capacity(members.len());
    let mut seen: HashMap<String, usize> = HashMap::with_capacity(members.len());
    for (name, raw) in members {
        let (schema, cell) =
            native_member(raw.get()).map_err(|e| format!("member \"{name}\": {e}"))?;
        match seen.get(&name) {
            Some(&i) => {
                fields[i].schema = schema;
                cells[i] = cell;
            }
            None => {
                seen.insert(name.clone(), fields.len());
                fields.push(Field {
                    name: Arc::from(name),
                    schema,
                });
                cells.push(cell);
            }
        }
    }
    Ok(Members { fields, cells })
}

/// One native member: its schema and cell.
fn native_member(raw: &str) -> Result<(Arc<Schema>, Cell), String> {
    let optional = |kind: Type| Arc::new(Schema::optional(kind));
    Ok(match raw.as_bytes().first() {
        Some(b'"') => {
            let s: String = serde_json::from_str(raw).map_err(|e| e.to_string())?;
            let bytes = Bytes::from(s);
            let text = Text::new(bytes.clone()).map_err(|e| e.to_string())?;
            (
                optional(Type::String),
                Cell {
                    text: Some(bytes),
                    value: Value::String(text),
                },
            )
        }
        Some(b'{' | b'[') => {
            // A jsonb column: its text as written.
            let bytes = Bytes::copy_from_slice(raw.as_bytes());
            let text = Text::new(bytes.clone()).map_err(|e| e.to_string())?;
            (
                Arc::new(
                    Schema::new(Type::String)
                        .named(names::JSON, Some(1))
                        .with_optional(true),
                ),
                Cell {
                    text: Some(bytes),
                    value: Value::String(text),
                },
            )
        }
        Some(b'n') => (
            optional(Type::String),
            Cell {
                text: None,
                value: Value::Null,
            },
        ),
        _ => {
            // Numbers and booleans, typed as JsonSchemaData types them.
            let node = parse(raw).map_err(|e| e.to_string())?;
            let (kind, value) = match node {
                JsonNode::Bool(b) => (Type::Boolean, Value::Boolean(b)),
                JsonNode::Int(i) => (Type::Int32, Value::Int32(i)),
                JsonNode::Long(i) => (Type::Int64, Value::Int64(i)),
                JsonNode::Double(d) => (Type::Float64, Value::Float64(d)),
                JsonNode::BigInt(s) => (
                    Type::Float64,
                    Value::Float64(s.parse::<f64>().map_err(|e| e.to_string())?),
                ),
                other => return Err(format!("unexpected JSON {}", other.node_type())),
            };
            let text = scalar_text(&value);
            (optional(kind), Cell { text, value })
        }
    })
}

/// A JSON object's members in document order, values unparsed.
struct OrderedMembers<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for OrderedMembers<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = OrderedMembers<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, &'de RawValue>()? {
                    out.push((k, v));
                }
                Ok(OrderedMembers(out))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::config::{ConverterKind, ConvertersConfig};
    use crate::router::{DebeziumConfig, RouterConfig};

    fn router(form: MessageForm, converters: ConvertersConfig) -> Router {
        let mut r = Router::new(
            RouterConfig::default(),
            converters,
            DebeziumConfig {
                extended_headers: true,
                ..DebeziumConfig::default()
            },
        )
        .unwrap();
        r.set_message_form(form, NonTransactional::Error, "app");
        r
    }

    fn event(content: &str) -> MessageEvent {
        MessageEvent {
            prefix: Arc::from("outbox"),
            content: Bytes::copy_from_slice(content.as_bytes()),
            transactional: true,
            last_commit_lsn: None,
            source_time_us: 0,
            transaction: None,
        }
    }

    const META: EventMeta = EventMeta {
        lsn: Lsn(0x1_0000_0010),
        commit_lsn: Lsn(0x1_0000_0100),
        xid: 7,
        commit_time_us: 0,
        received_us: 0,
        last_commit_lsn: None,
    };

    const EVENT: &str = r#"{"id": "e1", "type": "OrderPlaced", "payload": {"total": 10, "items": [1, 2]}, "aggregateid": "42", "aggregatetype": "Order"}"#;

    #[test]
    fn native_members_are_columns_and_objects_are_jsonb_text() {
        let mut r = router(MessageForm::Native, ConvertersConfig::default());
        let (rec, id) = r
            .route_message(&event(EVENT), &META)
            .map(|(r, id)| (r.unwrap(), id))
            .unwrap();
        assert_eq!(id.as_deref(), Some("e1"));
        assert_eq!(&*rec.topic, "outbox.event.Order");
        assert_eq!(rec.key.as_deref(), Some(&b"42"[..]));
        assert_eq!(
            rec.value.as_deref(),
            Some(&br#"{"total": 10, "items": [1, 2]}"#[..])
        );
        // Only the id header: no Debezium context headers on messages.
        let names: Vec<&str> = rec.headers.iter().map(|h| &*h.name).collect();
        assert_eq!(names, vec!["id"]);
        assert_eq!(rec.headers[0].value.as_deref(), Some(&b"e1"[..]));
        // A null payload is a null value; an integer key is its text.
        let (rec, _) = r
            .route_message(
                &event(r#"{"id":"e2","aggregatetype":"Order","aggregateid":42,"payload":null}"#),
                &META,
            )
            .map(|(r, id)| (r.unwrap(), id))
            .unwrap();
        assert_eq!(rec.key.as_deref(), Some(&b"42"[..]));
        assert_eq!(rec.value, None);
    }

    #[test]
    fn decode_form_builds_debeziums_struct() {
        let converters = ConvertersConfig {
            key: ConverterKind::Json,
            value: ConverterKind::Json,
            ..ConvertersConfig::default()
        };
        let mut r = router(
            MessageForm::Decode {
                null_include: false,
            },
            converters,
        );
        let (rec, _) = r
            .route_message(&event(EVENT), &META)
            .map(|(r, id)| (r.unwrap(), id))
            .unwrap();
        assert_eq!(
            rec.key.as_deref(),
            Some(&br#"{"schema":{"type":"string","optional":true},"payload":"42"}"#[..])
        );
        assert_eq!(
            String::from_utf8_lossy(rec.value.as_deref().unwrap()),
            r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"total"},{"type":"array","items":{"type":"int32","optional":true},"optional":true,"field":"items"}],"optional":true,"name":"payload"},"payload":{"total":10,"items":[1,2]}}"#
        );
        // Without fields.null.include a null payload member is dropped,
        // and the router then misses it, as Debezium's does.
        let err = r
            .route_message(
                &event(r#"{"id":"e2","aggregatetype":"Order","aggregateid":"42","payload":null}"#),
                &META,
            )
            .map(|(r, id)| (r.unwrap(), id))
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("\"payload\"") && text.contains("1/10") && text.contains("outbox"),
            "{text}"
        );
        let mut r = router(MessageForm::Decode { null_include: true }, converters);
        let (rec, _) = r
            .route_message(
                &event(r#"{"id":"e2","aggregatetype":"Order","aggregateid":"42","payload":null}"#),
                &META,
            )
            .map(|(r, id)| (r.unwrap(), id))
            .unwrap();
        assert_eq!(
            rec.value.as_deref(),
            Some(&br#"{"schema":{"type":"bytes","optional":true},"payload":null}"#[..])
        );
    }

    #[test]
    fn bad_content_names_the_prefix_the_lsn_and_the_member() {
        for form in [
            MessageForm::Native,
            MessageForm::Decode {
                null_include: false,
            },
        ] {
            let mut r = router(form, ConvertersConfig::default());
            for (content, needle) in [
                ("not json", "does not start"),
                ("{not json", "not"),
                ("[1, 2]", "array"),
                (
                    r#"{"id":"e","aggregatetype":"T","payload":"p"}"#,
                    "\"aggregateid\"",
                ),
                (
                    r#"{"id":"e","aggregatetype":5,"aggregateid":"k","payload":"p"}"#,
                    "\"aggregatetype\"",
                ),
                (
                    r#"{"aggregatetype":"T","aggregateid":"k","payload":"p"}"#,
                    "\"id\"",
                ),
            ] {
                let err = r
                    .route_message(&event(content), &META)
                    .map(|(r, id)| (r.unwrap(), id))
                    .unwrap_err();
                let text = err.to_string();
                let needle = if form == MessageForm::Native && content == "not json" {
                    "not JSON"
                } else {
                    needle
                };
                assert!(
                    text.contains(needle) && text.contains("1/10") && text.contains("\"outbox\""),
                    "{form:?} {content}: {text}"
                );
            }
        }
        let mut r = router(MessageForm::Native, ConvertersConfig::default());
        let mut m = event(EVENT);
        m.transactional = false;
        let err = r
            .route_message(&m, &META)
            .map(|(r, id)| (r.unwrap(), id))
            .unwrap_err();
        assert_eq!(err.kind(), "non_transactional");
        r.set_message_form(MessageForm::Native, NonTransactional::Deliver, "app");
        assert!(r
            .route_message(&m, &META)
            .map(|(r, id)| (r.unwrap(), id))
            .is_ok());
    }
}
