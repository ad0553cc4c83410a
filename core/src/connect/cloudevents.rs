//! Debezium 3.6.1's `io.debezium.converters.CloudEventsConverter` as a
//! Kafka Connect 4.1.1 worker runs it behind the PostgreSQL connector (and
//! the outbox EventRouter): structured JSON CloudEvents with JSON `data`.
//!
//! Owns the converter's options ([`CloudEventsConfig`]), the metadata
//! lookups of `RecordAndMetadataBaseImpl`/`RecordAndMetadataHeaderImpl`
//! (the Debezium envelope in the value, or `source`/`op`/`transaction`/
//! `id`/`type`/`traceparent`/`dataSchemaName` headers, which the converter
//! reads back from the bytes the worker's header converter wrote), the
//! PostgreSQL maker's `id`, the attribute order (`id`, `source`,
//! `specversion`, `type`, `time`, `datacontenttype`, `traceparent`,
//! `iodebezium*`, `data`) and the splice that puts the `data` schema
//! envelope into an otherwise schemaless event. A record Debezium skips is
//! `Ok(None)`; a record it throws on is [`ConvertError::Refused`] with the
//! Java message. Pure: no I/O, no logging.

mod header_json;
mod options;

use std::sync::Arc;

use bytes::Bytes;

pub use self::options::{
    CloudEventsConfig, MetadataSource, MetadataSourceValue, SchemaNameAdjustmentMode,
};
use super::config::{ConverterKind, HeaderConverterKind};
use super::convert::{java_to_string, ConvertError, Converter, HeaderConverter};
use super::pg::names::{CONNECT_DATE, CONNECT_TIME, CONNECT_TIMESTAMP};
use super::transforms::ConnectHeader;
use super::{Field, Schema, Type, Value};

/// The converter's class, named in its errors.
const CONVERTER: &str = "io.debezium.converters.CloudEventsConverter";
/// The only `CloudEventsProvider` a PostgreSQL connector plugin carries.
const POSTGRES: &str = "postgresql";

/// What the converter needs besides the record: how the worker serialised
/// the headers it reads metadata from. Everything else (logical name,
/// database, connector type, timestamps) comes from the record's `source`
/// block, in the value or in a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CloudEventsContext {
    /// The worker's `header.converter`.
    pub header_converter: HeaderConverterKind,
    /// Its `schemas.enable` (JsonConverter only).
    pub header_schemas_enable: bool,
}

impl Default for CloudEventsContext {
    /// Connect's defaults: `SimpleHeaderConverter`.
    fn default() -> Self {
        CloudEventsContext {
            header_converter: HeaderConverterKind::Simple,
            header_schemas_enable: true,
        }
    }
}

/// A configured CloudEvents converter; the same object serves as key or
/// value converter (Debezium does not distinguish them in its output).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudEventsConverter {
    cfg: CloudEventsConfig,
    ctx: CloudEventsContext,
}

/// A Java exception, as the converter's error.
fn java(reason: impl Into<String>) -> ConvertError {
    ConvertError::Refused {
        converter: CONVERTER,
        reason: reason.into(),
    }
}

/// A NullPointerException, described.
fn npe(what: &str) -> ConvertError {
    java(format!(
        "{what} is null (Debezium fails with a NullPointerException here)"
    ))
}

/// A ClassCastException, described.
fn class_cast(from: &str, to: &str) -> ConvertError {
    java(format!(
        "class {from} cannot be cast to class {to} (Debezium fails with a ClassCastException here)"
    ))
}

/// The Java class of a Connect value under `schema`.
fn java_class(schema: Option<&Schema>, value: &Value) -> &'static str {
    super::transforms::util::class_name_under(schema, value)
}

/// A struct with its schema, owned (a `source` or `transaction` block).
#[derive(Debug, Clone)]
struct OwnedStruct {
    schema: Arc<Schema>,
    values: Vec<Value>,
}

/// Struct accessors with Connect's `Struct` semantics and messages.
#[derive(Debug, Clone, Copy)]
struct View<'a> {
    schema: &'a Schema,
    values: &'a [Value],
}

impl<'a> View<'a> {
    /// `lookupField`.
    fn field(&self, name: &str) -> Result<(usize, &'a Field), ConvertError> {
        let schema: &'a Schema = self.schema;
        schema
            .fields
            .iter()
            .enumerate()
            .find(|(_, f)| &*f.name == name)
            .ok_or_else(|| java(format!("{name} is not a valid field name")))
    }

    /// `getCheckType`: the raw value, no default applied.
    fn get_checked(&self, name: &str, kind: Type) -> Result<&'a Value, ConvertError> {
        let (i, f) = self.field(name)?;
        if f.schema.kind != kind {
            return Err(java(format!(
                "Field '{name}' is not of type {}",
                kind.java_name()
            )));
        }
        Ok(self.values.get(i).unwrap_or(&Value::Null))
    }

    /// `get(fieldName)`: the value, or the field's default for a null.
    fn get(&self, name: &str) -> Result<(&'a Field, &'a Value), ConvertError> {
        let (i, f) = self.field(name)?;
        Ok((f, with_default(&f.schema, self.values.get(i))))
    }

    /// `getString`: `None` for null.
    fn get_string(&self, name: &str) -> Result<Option<&'a str>, ConvertError> {
        match self.get_checked(name, Type::String)? {
            Value::String(t) => Ok(Some(t.as_str())),
            Value::Null => Ok(None),
            other => Err(class_cast(java_class(None, other), "java.lang.String")),
        }
    }

    /// `getStruct`: `None` for null.
    fn get_struct(&self, name: &str) -> Result<Option<OwnedStruct>, ConvertError> {
        let (_, f) = self.field(name)?;
        match self.get_checked(name, Type::Struct)? {
            Value::Struct(values) => Ok(Some(OwnedStruct {
                schema: f.schema.clone(),
                values: values.clone(),
            })),
            Value::Null => Ok(None),
            other => Err(class_cast(
                java_class(None, other),
                "org.apache.kafka.connect.data.Struct",
            )),
        }
    }
}

impl OwnedStruct {
    fn view(&self) -> View<'_> {
        View {
            schema: &self.schema,
            values: &self.values,
        }
    }
}

/// `Struct.get(field)`'s default substitution.
fn with_default<'a>(schema: &'a Schema, value: Option<&'a Value>) -> &'a Value {
    match (value, &schema.default) {
        (None | Some(Value::Null), Some(d)) => d,
        (Some(v), _) => v,
        (None, None) => &Value::Null,
    }
}

/// `ConnectSchema.validateValue(field, schema, value)` for the classes a
/// CloudEvents attribute can receive.
fn validate(
    field: &str,
    schema: &Schema,
    vschema: Option<&Schema>,
    value: &Value,
) -> Result<(), ConvertError> {
    if value.is_null() {
        if schema.optional {
            return Ok(());
        }
        return Err(java(format!(
            "Invalid value: null used for required field: \"{field}\", schema type: {}",
            schema.kind.java_name()
        )));
    }
    let class = java_class(vschema, value);
    let ok = match schema.kind {
        Type::Boolean => class == "java.lang.Boolean",
        Type::Int8 => class == "java.lang.Byte",
        Type::Int16 => class == "java.lang.Short",
        Type::Int32 => class == "java.lang.Integer",
        Type::Int64 => class == "java.lang.Long",
        Type::Float32 => class == "java.lang.Float",
        Type::Float64 => class == "java.lang.Double",
        Type::String => class == "java.lang.String",
        Type::Bytes => matches!(value, Value::Bytes(_) | Value::Decimal(_)),
        Type::Array => matches!(value, Value::Array(_)),
        Type::Map => matches!(value, Value::Map(_)),
        Type::Struct => matches!(value, Value::Struct(_)),
    } || schema.name.as_deref().is_some_and(|n| {
        class == "java.util.Date" && [CONNECT_DATE, CONNECT_TIME, CONNECT_TIMESTAMP].contains(&n)
    });
    if ok {
        return Ok(());
    }
    let named = schema
        .name
        .as_deref()
        .map(|n| format!(" \"{n}\""))
        .unwrap_or_default();
    Err(java(format!(
        "Invalid Java object for schema{named} with type {}: class {class} for field: \"{field}\"",
        schema.kind.java_name()
    )))
}

/// The record's headers, read back as Debezium's `jsonHeaderConverter`
/// (JsonConverter, `schemas.enable=true`) reads the worker's bytes.
struct Headers<'a> {
    list: &'a [ConnectHeader],
    converter: HeaderConverter,
}

impl Headers<'_> {
    /// `headers.lastHeader(key) != null`.
    fn has(&self, key: &str) -> bool {
        self.list.iter().any(|h| &*h.key == key)
    }

    /// The last header called `key`, serialised by the worker's header
    /// converter and read back; a missing header is an error unless
    /// `optional` (then null).
    fn decode(&self, key: &str, optional: bool) -> Result<header_json::Decoded, ConvertError> {
        let Some(h) = self.list.iter().rev().find(|h| &*h.key == key) else {
            if optional {
                return Ok((None, Value::Null));
            }
            return Err(java(format!("Header `{key}` was not provided")));
        };
        let bytes = self
            .converter
            .from_connect_header(h.schema.as_deref(), &h.value)?;
        header_json::to_connect_data(bytes.as_deref()).map_err(java)
    }

    /// A header whose value Debezium casts to `String`.
    fn string(&self, key: &str, optional: bool) -> Result<Option<String>, ConvertError> {
        match self.decode(key, optional)? {
            (_, Value::String(t)) => Ok(Some(t.as_str().to_owned())),
            (_, Value::Null) => Ok(None),
            (s, other) => Err(class_cast(
                java_class(s.as_deref(), &other),
                "java.lang.String",
            )),
        }
    }

    /// A header whose value Debezium casts to `Struct`.
    fn structure(&self, key: &str, optional: bool) -> Result<Option<OwnedStruct>, ConvertError> {
        match self.decode(key, optional)? {
            (Some(schema), Value::Struct(values)) => Ok(Some(OwnedStruct { schema, values })),
            (_, Value::Null) => Ok(None),
            (s, other) => Err(class_cast(
                java_class(s.as_deref(), &other),
                "org.apache.kafka.connect.data.Struct",
            )),
        }
    }
}

/// `RecordAndMetadata`: the base implementation, or the header one when
/// any metadata source is `header`.
struct Meta<'a> {
    cfg: &'a CloudEventsConfig,
    header_impl: bool,
    record: View<'a>,
    headers: Headers<'a>,
}

impl Meta<'_> {
    /// Whether `source` says header (and the header implementation is in use).
    fn in_header(&self, source: MetadataSourceValue) -> bool {
        self.header_impl && source == MetadataSourceValue::Header
    }

    fn ms(&self) -> &MetadataSource {
        &self.cfg.metadata_source
    }

    /// `id()`: the `id` header, or null.
    fn id(&self) -> Result<Option<String>, ConvertError> {
        if self.in_header(self.ms().id) {
            return self.headers.string("id", false);
        }
        Ok(None)
    }

    /// `type()`: the `type` header, or null.
    fn type_(&self) -> Result<Option<String>, ConvertError> {
        if self.in_header(self.ms().type_) {
            return self.headers.string("type", false);
        }
        Ok(None)
    }

    /// `source()`.
    fn source(&self) -> Result<Option<OwnedStruct>, ConvertError> {
        if self.in_header(self.ms().global) {
            return self.headers.structure("source", false);
        }
        self.record.get_struct("source")
    }

    /// `operation()`.
    fn operation(&self) -> Result<Option<String>, ConvertError> {
        if self.in_header(self.ms().global) {
            return self.headers.string("op", false);
        }
        Ok(self.record.get_string("op")?.map(str::to_owned))
    }

    /// `transaction()`.
    fn transaction(&self) -> Result<Option<OwnedStruct>, ConvertError> {
        if self.in_header(self.ms().global) {
            return self.headers.structure("transaction", true);
        }
        if self.record.schema.field_index("transaction").is_none() {
            return Ok(None);
        }
        self.record.get_struct("transaction")
    }

    /// `traceParent()`.
    fn trace_parent(&self) -> Result<Option<String>, ConvertError> {
        if self.in_header(self.ms().trace_parent) {
            return self.headers.string("traceparent", true);
        }
        Err(java(
            "Value for `traceparent` CloudEvents field currently can't be obtained from a record value and can only be obtained from a record header",
        ))
    }

    /// `dataSchemaName()`.
    fn data_schema_name(&self, source: &OwnedStruct) -> Result<Option<String>, ConvertError> {
        if self.in_header(self.ms().data_schema_name) {
            return self.headers.string("dataSchemaName", false);
        }
        let connector = source.view().get_string("connector")?.unwrap_or("null");
        Ok(Some(format!("io.debezium.connector.{connector}.Data")))
    }

    /// `dataSchema(before, after)` / `data(before, after)`: every field of
    /// the value when the metadata is global `header` (the EventRouter's
    /// output), else the envelope's `before` and `after`. Values are taken
    /// by position, as `Struct.get(Field)` does.
    fn data(&self, source: &OwnedStruct) -> Result<(Schema, Value), ConvertError> {
        let name = self.data_schema_name(source)?;
        let fields: Vec<Field> = if self.in_header(self.ms().global) {
            self.record.schema.fields.clone()
        } else {
            let mut out = Vec::with_capacity(2);
            for f in ["before", "after"] {
                let i = self
                    .record
                    .schema
                    .field_index(f)
                    .ok_or_else(|| npe(&format!("the value schema's field `{f}`")))?;
                out.push(self.record.schema.fields[i].clone());
            }
            out
        };
        let mut values = Vec::with_capacity(fields.len());
        for (i, f) in fields.iter().enumerate() {
            let v = with_default(&f.schema, self.record.values.get(i)).clone();
            validate(&f.name, &f.schema, Some(&f.schema), &v)?;
            values.push(v);
        }
        Ok((
            Schema::structure(name.as_deref(), fields),
            Value::Struct(values),
        ))
    }
}

impl CloudEventsConverter {
    /// A converter with `cfg`, in a worker described by `ctx`.
    pub fn new(cfg: CloudEventsConfig, ctx: CloudEventsContext) -> Self {
        CloudEventsConverter { cfg, ctx }
    }

    /// `fromConnectData(topic, headers, schema, value)`: `None` for a record
    /// Debezium writes as null (a tombstone, a schemaless record, a value
    /// that is no Debezium envelope with `metadata.source=value`, a record
    /// without `source`/`op` headers with `metadata.source=header`).
    pub fn from_connect_data(
        &self,
        topic: &str,
        headers: &[ConnectHeader],
        schema: Option<&Schema>,
        value: &Value,
    ) -> Result<Option<Bytes>, ConvertError> {
        let _ = topic;
        let Some(schema) = schema else {
            return Ok(None);
        };
        if value.is_null() {
            return Ok(None);
        }
        let ms = &self.cfg.metadata_source;
        let headers = Headers {
            list: headers,
            converter: HeaderConverter {
                kind: self.ctx.header_converter,
                schemas_enable: self.ctx.header_schemas_enable,
            },
        };
        if ms.global == MetadataSourceValue::Value {
            let Some(name) = schema.name.as_deref() else {
                return Err(npe("the value schema's name (Envelope.isEnvelopeSchema)"));
            };
            if !name.ends_with(".Envelope") {
                return Ok(None);
            }
        } else if !headers.has("source") || !headers.has("op") {
            return Ok(None);
        }
        if schema.kind != Type::Struct {
            return Err(java("Mismatching schema"));
        }
        let Value::Struct(values) = value else {
            return Err(java(format!(
                "Only Struct objects supported for [CloudEvents converter], found: {}",
                java_class(Some(schema), value)
            )));
        };
        let header_impl = [
            ms.global,
            ms.id,
            ms.type_,
            ms.trace_parent,
            ms.data_schema_name,
        ]
        .contains(&MetadataSourceValue::Header);
        let meta = Meta {
            cfg: &self.cfg,
            header_impl,
            record: View { schema, values },
            headers,
        };
        let source = meta.source()?.ok_or_else(|| npe("the `source` block"))?;
        match source.view().get_string("connector")? {
            Some(POSTGRES) => {}
            other => {
                return Err(java(format!(
                    "No usable CloudEvents converters for connector type \"{}\"",
                    other.unwrap_or("null")
                )))
            }
        }
        self.write(&meta, &source)
    }

    /// The JSON–JSON branch of `fromConnectData`.
    fn write(&self, meta: &Meta<'_>, source: &OwnedStruct) -> Result<Option<Bytes>, ConvertError> {
        let plain = Converter {
            kind: ConverterKind::Json,
            schemas_enable: false,
        };
        if !self.cfg.data_schemas_enable {
            let data = meta.data(source)?;
            let (s, v) = self.cloud_event(meta, source, data)?;
            return plain.from_connect_data(Some(&s), &v);
        }
        // A dummy `{}` stands for data; the `{"schema":..,"payload":..}`
        // JSON of the data replaces it, so the event itself stays schemaless.
        let dummy = (
            Schema::structure(None, Vec::new()),
            Value::Struct(Vec::new()),
        );
        let (s, v) = self.cloud_event(meta, source, dummy)?;
        let (ds, dv) = meta.data(source)?;
        let enveloped = Converter {
            kind: ConverterKind::Json,
            schemas_enable: true,
        };
        let data = enveloped
            .from_connect_data(Some(&ds), &dv)?
            .unwrap_or_default();
        let event = plain.from_connect_data(Some(&s), &v)?.unwrap_or_default();
        let head = event
            .get(..event.len().saturating_sub(3))
            .unwrap_or_default();
        let mut out = Vec::with_capacity(head.len() + data.len() + 1);
        out.extend_from_slice(head);
        out.extend_from_slice(&data);
        out.push(b'}');
        Ok(Some(Bytes::from(out)))
    }

    /// `convertToCloudEventsFormat`: the event's schema, then its values,
    /// in Debezium's order (so the same error wins).
    fn cloud_event(
        &self,
        meta: &Meta<'_>,
        source: &OwnedStruct,
        data: (Schema, Value),
    ) -> Result<(Schema, Value), ConvertError> {
        let src = source.view();
        let transaction = meta.transaction()?;
        let schema_name = match &self.cfg.cloudevents_schema_name {
            Some(n) => n.clone(),
            None => format!(
                "{}.{}.CloudEvents.Envelope",
                source_text(src, "name")?,
                source_text(src, "db")?
            ),
        };
        let fields = self.event_fields(source, data.0)?;
        let mut values: Vec<Value> = Vec::with_capacity(fields.len());
        let ms = &self.cfg.metadata_source;
        let id = match ms.id {
            MetadataSourceValue::Generate => Some(postgres_id(src)?),
            _ => meta.id()?,
        };
        let type_ = match ms.type_ {
            MetadataSourceValue::Generate => Some(format!(
                "io.debezium.connector.{}.DataChangeEvent",
                src.get_string("connector")?.unwrap_or("null")
            )),
            _ => meta.type_()?,
        };
        let mut put = |value: Value| -> Result<(), ConvertError> {
            let f = fields
                .get(values.len())
                .ok_or_else(|| java("field cannot be null."))?;
            validate(&f.name, &f.schema, None, &value)?;
            values.push(value);
            Ok(())
        };
        let text = |s: Option<String>| s.map_or(Value::Null, Value::string);
        put(text(id))?;
        let name = src.get_string("name")?.unwrap_or("null").to_owned();
        let connector = src.get_string("connector")?.unwrap_or("null");
        put(Value::string(format!("/debezium/{connector}/{name}")))?;
        put(Value::string("1.0"))?;
        put(text(type_))?;
        put(Value::string(ce_time(src)?))?;
        put(Value::string("application/json"))?;
        if self.cfg.opentelemetry_tracing_attributes {
            put(text(meta.trace_parent()?))?;
        }
        if self.cfg.extension_attributes {
            put(text(meta.operation()?))?;
            for f in &source.schema.fields {
                let (_, v) = src.get(&f.name)?;
                put(int64_as_string(&f.schema, v)?)?;
            }
            if let Some(tx) = &transaction {
                for (i, int64) in [(0, false), (1, true), (2, true)] {
                    let v = tx.values.get(i).ok_or_else(|| {
                        java(format!(
                            "Index {i} out of bounds for length {} (Debezium fails with an ArrayIndexOutOfBoundsException here)",
                            tx.values.len()
                        ))
                    })?;
                    let v = if int64 { long_to_string(v)? } else { v.clone() };
                    put(v)?;
                }
            } else {
                // Never put: the (optional) attributes stay null.
                for _ in 0..3 {
                    put(Value::Null)?;
                }
            }
        }
        put(data.1)?;
        let mut schema = Schema::structure(Some(&schema_name), fields);
        schema.optional = false;
        Ok((schema, Value::Struct(values)))
    }

    /// The event's fields, as `convertToCloudEventsFormat` defines them.
    fn event_fields(&self, source: &OwnedStruct, data: Schema) -> Result<Vec<Field>, ConvertError> {
        let mut fields: Vec<Field> = Vec::new();
        let mut add = |name: String, schema: Schema| -> Result<(), ConvertError> {
            if fields.iter().any(|f| *f.name == *name) {
                return Err(java(format!(
                    "Cannot create field because of field name duplication {name}"
                )));
            }
            fields.push(Field {
                name: Arc::from(name),
                schema: Arc::new(schema),
            });
            Ok(())
        };
        for name in [
            "id",
            "source",
            "specversion",
            "type",
            "time",
            "datacontenttype",
        ] {
            add(name.to_owned(), Schema::new(Type::String))?;
        }
        if self.cfg.opentelemetry_tracing_attributes {
            add("traceparent".to_owned(), Schema::new(Type::String))?;
        }
        if self.cfg.extension_attributes {
            add(extension_name("op"), Schema::new(Type::String))?;
            for f in &source.schema.fields {
                add(extension_name(&f.name), extension_schema(&f.schema, false)?)?;
            }
            for (name, kind) in [
                ("id", Type::String),
                ("total_order", Type::Int64),
                ("data_collection_order", Type::Int64),
            ] {
                let tx = extension_schema(&Schema::new(kind), true)?;
                add(extension_name(&format!("tx{name}")), tx)?;
            }
        }
        add("data".to_owned(), data)?;
        Ok(fields)
    }
}

/// `adjustExtensionName`: `iodebezium` and the ASCII letters and digits of
/// the name.
fn extension_name(original: &str) -> String {
    let mut out = String::from("iodebezium");
    out.extend(original.chars().filter(char::is_ascii_alphanumeric));
    out
}

/// `convertToCeExtensionSchema`.
fn extension_schema(schema: &Schema, always_optional: bool) -> Result<Schema, ConvertError> {
    let kind = match schema.kind {
        Type::Boolean => Type::Boolean,
        Type::Int8 | Type::Int16 | Type::Int32 => Type::Int32,
        Type::String | Type::Int64 => Type::String,
        other => {
            return Err(java(format!(
                "Source field of type {} cannot be converted into CloudEvents extension attribute.",
                other.java_name()
            )))
        }
    };
    Ok(Schema::new(kind).with_optional(always_optional || schema.optional))
}

/// `ceValueFromStruct`: an INT64 field's value as its decimal text.
fn int64_as_string(schema: &Schema, value: &Value) -> Result<Value, ConvertError> {
    if schema.kind == Type::Int64 {
        return long_to_string(value);
    }
    Ok(value.clone())
}

/// `String.valueOf((long) value)`, null kept.
fn long_to_string(value: &Value) -> Result<Value, ConvertError> {
    match value {
        Value::Null => Ok(Value::Null),
        Value::Int64(v) => Ok(Value::string(v.to_string())),
        other => Err(class_cast(java_class(None, other), "java.lang.Long")),
    }
}

/// A `source` field as string concatenation renders it (`null` for null).
fn source_text(src: View<'_>, name: &str) -> Result<String, ConvertError> {
    let (f, v) = src.get(name)?;
    let mut out = String::new();
    java_to_string(&mut out, Some(&f.schema), v)?;
    Ok(out)
}

/// `PostgresCloudEventsMaker.ceId()`.
fn postgres_id(src: View<'_>) -> Result<String, ConvertError> {
    Ok(format!(
        "name:{};lsn:{};txId:{};sequence:{}",
        source_text(src, "name")?,
        source_text(src, "lsn")?,
        source_text(src, "txId")?,
        source_text(src, "sequence")?
    ))
}

/// `CloudEventsMaker.ceTime()`: `source.ts_ms` as
/// `yyyy-MM-dd'T'HH:mm:ss.SSSXXX` in UTC.
fn ce_time(src: View<'_>) -> Result<String, ConvertError> {
    match src.get("ts_ms")?.1 {
        Value::Int64(ms) => Ok(format_utc_millis(*ms)),
        Value::Null => Err(npe("`source.ts_ms`")),
        other => Err(class_cast(java_class(None, other), "java.lang.Long")),
    }
}

/// `SimpleDateFormat("yyyy-MM-dd'T'HH:mm:ss.SSSXXX")` in UTC: the year of
/// era, Julian dates before 1582-10-15 as `GregorianCalendar` has them.
fn format_utc_millis(ms: i64) -> String {
    const DAY: i64 = 86_400_000;
    const CUTOVER_DAY: i64 = -141_427;
    let days = ms.div_euclid(DAY);
    let rem = ms.rem_euclid(DAY);
    let (y, m, d) = if days >= CUTOVER_DAY {
        let (y, m, d) = super::pg::civil_from_days(days);
        (y, i64::from(m), i64::from(d))
    } else {
        julian_from_days(days)
    };
    let year = if y <= 0 { 1 - y } else { y };
    format!(
        "{year:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

/// The Julian calendar date of a day counted from 1970-01-01.
fn julian_from_days(days: i64) -> (i64, i64, i64) {
    let f = days + 2_440_588 + 1401;
    let e = 4 * f + 3;
    let g = e.rem_euclid(1461) / 4;
    let h = 5 * g + 2;
    let d = h.rem_euclid(153) / 5 + 1;
    let m = (h.div_euclid(153) + 2).rem_euclid(12) + 1;
    let y = e.div_euclid(1461) - 4716 + (14 - m) / 12;
    (y, m, d)
}

#[cfg(test)]
mod tests;
