//! Kafka Connect converters: a schema and value in, record bytes out.
//!
//! Owns `StringConverter` (Java `toString()`), `JsonConverter` (with and
//! without the schema envelope, Jackson's compact output),
//! `ByteArrayConverter`, Debezium's `BinaryDataConverter` (without a
//! delegate) and the header converters (`SimpleHeaderConverter`'s
//! `Values.convertToString`, `JsonConverter`, `StringConverter`). A value
//! Kafka would refuse, or would render as an identity hash (`[B@1b6d3586`),
//! is an error here, never made-up bytes.

use bytes::Bytes;

use super::java::{
    base64, big_decimal_to_string, double_to_string, float_to_string, unscaled_bytes,
};
use super::json::write_string;
use super::{Schema, Type, Value};
use crate::connect::config::{ConverterKind, HeaderConverterKind};

/// A value a converter cannot serialise.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// Kafka would throw a `DataException`.
    #[error("{converter} cannot serialise this value: {reason}")]
    Refused {
        /// The converter's Java class name.
        converter: &'static str,
        /// Kafka's reason, paraphrased.
        reason: String,
    },
    /// Kafka would write `[B@<identity hash>`, which nobody can reproduce.
    #[error("{converter} would write a java identity hash for a byte array ([B@...); use a converter that can carry bytes")]
    IdentityHash {
        /// The converter's Java class name.
        converter: &'static str,
    },
}

const STRING_CONVERTER: &str = "org.apache.kafka.connect.storage.StringConverter";
const JSON_CONVERTER: &str = "org.apache.kafka.connect.json.JsonConverter";
const BYTE_ARRAY_CONVERTER: &str = "org.apache.kafka.connect.converters.ByteArrayConverter";
const BINARY_DATA_CONVERTER: &str = "io.debezium.converters.BinaryDataConverter";
const CLOUD_EVENTS_CONVERTER: &str = "io.debezium.converters.CloudEventsConverter";
const SIMPLE_HEADER_CONVERTER: &str = "org.apache.kafka.connect.storage.SimpleHeaderConverter";

fn refused(converter: &'static str, reason: impl Into<String>) -> ConvertError {
    ConvertError::Refused {
        converter,
        reason: reason.into(),
    }
}

/// A key or value converter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Converter {
    /// Which converter.
    pub(crate) kind: ConverterKind,
    /// `schemas.enable` (JsonConverter only).
    pub(crate) schemas_enable: bool,
}

impl Converter {
    /// `Converter.fromConnectData(topic, schema, value)`; `None` is a null
    /// key or value.
    pub fn from_connect_data(
        &self,
        schema: Option<&Schema>,
        value: &Value,
    ) -> Result<Option<Bytes>, ConvertError> {
        match self.kind {
            ConverterKind::String => string_converter(schema, value),
            ConverterKind::Json => json_converter(schema, value, self.schemas_enable),
            ConverterKind::ByteArray => {
                if let Some(s) = schema {
                    if s.kind != Type::Bytes {
                        return Err(refused(
                            BYTE_ARRAY_CONVERTER,
                            format!(
                                "invalid schema type for ByteArrayConverter: {}",
                                s.kind.java_name()
                            ),
                        ));
                    }
                }
                match value {
                    Value::Null => Ok(None),
                    Value::Bytes(b) => Ok(Some(b.clone())),
                    other => Err(refused(
                        BYTE_ARRAY_CONVERTER,
                        format!("not compatible with objects of type {}", java_class(other)),
                    )),
                }
            }
            // The router runs it with the record's headers
            // (`Router::convert_record`); nothing else may.
            ConverterKind::CloudEvents => Err(refused(
                CLOUD_EVENTS_CONVERTER,
                "it needs the record's headers and runs as the value converter only",
            )),
            ConverterKind::BinaryData => {
                if let Some(s) = schema {
                    if s.kind != Type::Bytes {
                        return Err(refused(
                            BINARY_DATA_CONVERTER,
                            format!(
                                "a value of schema type {} requires a delegate.converter.type to be configured",
                                s.kind.java_name()
                            ),
                        ));
                    }
                }
                match value {
                    Value::Null => Ok(None),
                    Value::Bytes(b) => Ok(Some(b.clone())),
                    other => Err(refused(
                        BINARY_DATA_CONVERTER,
                        format!(
                            "a value of type {} requires a delegate.converter.type to be configured",
                            java_class(other)
                        ),
                    )),
                }
            }
        }
    }
}

/// A header converter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeaderConverter {
    /// Which converter.
    pub(crate) kind: HeaderConverterKind,
    /// `schemas.enable` (JsonConverter only).
    pub(crate) schemas_enable: bool,
}

impl HeaderConverter {
    /// `HeaderConverter.fromConnectHeader(topic, key, schema, value)`;
    /// `None` is a null header value.
    #[allow(
        clippy::wrong_self_convention,
        reason = "named after Connect's fromConnectHeader"
    )]
    pub(crate) fn from_connect_header(
        &self,
        schema: Option<&Schema>,
        value: &Value,
    ) -> Result<Option<Bytes>, ConvertError> {
        match self.kind {
            HeaderConverterKind::Simple => {
                if value.is_null() {
                    return Ok(None);
                }
                let mut out = String::new();
                values_append(&mut out, schema, value, false)?;
                Ok(Some(Bytes::from(out)))
            }
            HeaderConverterKind::Json => json_converter(schema, value, self.schemas_enable),
            HeaderConverterKind::String => string_converter(schema, value),
        }
    }
}

/// The Java class a value has in Connect, for error messages.
fn java_class(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Boolean(_) => "class java.lang.Boolean",
        Value::Int8(_) => "class java.lang.Byte",
        Value::Int16(_) => "class java.lang.Short",
        Value::Int32(_) => "class java.lang.Integer",
        Value::Int64(_) => "class java.lang.Long",
        Value::Float32(_) => "class java.lang.Float",
        Value::Float64(_) => "class java.lang.Double",
        Value::String(_) => "class java.lang.String",
        Value::Bytes(_) => "class [B",
        Value::Decimal(_) => "class java.math.BigDecimal",
        Value::Array(_) => "class java.util.ArrayList",
        Value::Map(_) => "class java.util.HashMap",
        Value::Struct(_) => "class org.apache.kafka.connect.data.Struct",
    }
}

/// `StringConverter.fromConnectData`: `value.toString()` as UTF-8.
fn string_converter(schema: Option<&Schema>, value: &Value) -> Result<Option<Bytes>, ConvertError> {
    match value {
        Value::Null => Ok(None),
        // Shares the row's bytes: the common case is a varchar key and a
        // json payload.
        Value::String(t) => Ok(Some(t.bytes().clone())),
        other => {
            let mut out = String::new();
            java_to_string(&mut out, schema, other)?;
            Ok(Some(Bytes::from(out)))
        }
    }
}

/// Java's `toString()` of a Connect value (`Struct.toString`,
/// `AbstractCollection.toString`, `AbstractMap.toString`).
pub(crate) fn java_to_string(
    out: &mut String,
    schema: Option<&Schema>,
    value: &Value,
) -> Result<(), ConvertError> {
    if let Some(text) = super::pg_time::connect_logical_text(
        schema.and_then(|s| s.name.as_deref()),
        value,
        super::pg_time::JavaText::ToString,
    ) {
        out.push_str(&text);
        return Ok(());
    }
    match value {
        Value::Null => out.push_str("null"),
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int8(v) => out.push_str(&v.to_string()),
        Value::Int16(v) => out.push_str(&v.to_string()),
        Value::Int32(v) => out.push_str(&v.to_string()),
        Value::Int64(v) => out.push_str(&v.to_string()),
        Value::Float32(v) => out.push_str(&float_to_string(*v)),
        Value::Float64(v) => out.push_str(&double_to_string(*v)),
        Value::String(t) => out.push_str(t.as_str()),
        Value::Decimal(d) => out.push_str(&big_decimal_to_string(d)),
        Value::Bytes(_) => {
            return Err(ConvertError::IdentityHash {
                converter: STRING_CONVERTER,
            })
        }
        Value::Array(items) => {
            let items_schema = schema.and_then(|s| s.value_schema.as_deref());
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                java_to_string(out, items_schema, item)?;
            }
            out.push(']');
        }
        Value::Map(entries) => {
            let key_schema = schema.and_then(|s| s.key_schema.as_deref());
            let value_schema = schema.and_then(|s| s.value_schema.as_deref());
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                java_to_string(out, key_schema, k)?;
                out.push('=');
                java_to_string(out, value_schema, v)?;
            }
            out.push('}');
        }
        Value::Struct(values) => {
            // Struct.toString skips null fields and does not apply defaults.
            out.push_str("Struct{");
            let mut first = true;
            for (i, v) in values.iter().enumerate() {
                if v.is_null() {
                    continue;
                }
                let field = schema.and_then(|s| s.fields.get(i));
                if !first {
                    out.push(',');
                }
                first = false;
                out.push_str(field.map_or("?", |f| &f.name));
                out.push('=');
                java_to_string(out, field.map(|f| &*f.schema), v)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

/// `Values.append(sb, value, embedded)`, which `Values.convertToString`
/// (and so `SimpleHeaderConverter`) uses: strings raw at top level and
/// quoted with `\` and `"` escaped inside containers, bytes as Base64,
/// structs as `{"name":value,...}` with schema defaults applied.
pub(crate) fn values_append(
    out: &mut String,
    schema: Option<&Schema>,
    value: &Value,
    embedded: bool,
) -> Result<(), ConvertError> {
    if let Some(text) = super::pg_time::connect_logical_text(
        schema.and_then(|s| s.name.as_deref()),
        value,
        super::pg_time::JavaText::Values,
    ) {
        out.push_str(&text);
        return Ok(());
    }
    match value {
        Value::Null => out.push_str("null"),
        Value::Boolean(_)
        | Value::Int8(_)
        | Value::Int16(_)
        | Value::Int32(_)
        | Value::Int64(_)
        | Value::Float32(_)
        | Value::Float64(_)
        | Value::Decimal(_) => java_to_string(out, schema, value)?,
        Value::String(t) => {
            if embedded {
                push_quoted(out, t.as_str());
            } else {
                out.push_str(t.as_str());
            }
        }
        Value::Bytes(b) => {
            if embedded {
                out.push('"');
            }
            base64(b, out);
            if embedded {
                out.push('"');
            }
        }
        Value::Array(items) => {
            let items_schema = schema.and_then(|s| s.value_schema.as_deref());
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                values_append(out, items_schema, item, true)?;
            }
            out.push(']');
        }
        Value::Map(entries) => {
            let key_schema = schema.and_then(|s| s.key_schema.as_deref());
            let value_schema = schema.and_then(|s| s.value_schema.as_deref());
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                values_append(out, key_schema, k, true)?;
                out.push(':');
                values_append(out, value_schema, v, true)?;
            }
            out.push('}');
        }
        Value::Struct(values) => values_append_struct(out, schema, values)?,
    }
    Ok(())
}

/// `"text"` with `\` and `"` escaped, as `Values.append` quotes an
/// embedded string or a struct's field name.
#[inline]
fn push_quoted(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        if c == '\\' || c == '"' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

/// A struct as `Values.append` writes it: `{"name":value,...}` in schema
/// order, a missing or null field taking its schema's default.
fn values_append_struct(
    out: &mut String,
    schema: Option<&Schema>,
    values: &[Value],
) -> Result<(), ConvertError> {
    let Some(schema) = schema else {
        return Err(refused(
            SIMPLE_HEADER_CONVERTER,
            "a struct needs its schema",
        ));
    };
    out.push('{');
    for (i, field) in schema.fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_quoted(out, &field.name);
        out.push(':');
        let v = values.get(i).unwrap_or(&Value::Null);
        let v = match (v, &field.schema.default) {
            (Value::Null, Some(d)) => d,
            _ => v,
        };
        values_append(out, Some(&field.schema), v, true)?;
    }
    out.push('}');
    Ok(())
}

/// `JsonConverter.fromConnectData`.
fn json_converter(
    schema: Option<&Schema>,
    value: &Value,
    schemas_enable: bool,
) -> Result<Option<Bytes>, ConvertError> {
    if schema.is_none() && value.is_null() {
        return Ok(None);
    }
    let mut out = String::with_capacity(64);
    if schemas_enable {
        out.push_str("{\"schema\":");
        match schema {
            Some(s) => write_json_schema(&mut out, s),
            None => out.push_str("null"),
        }
        out.push_str(",\"payload\":");
        write_json_value(&mut out, schema, value)?;
        out.push('}');
    } else {
        write_json_value(&mut out, schema, value)?;
    }
    Ok(Some(Bytes::from(out)))
}

/// `JsonConverter.asJsonSchema`, compact: `type`, `fields`/`items`/
/// `keys`+`values`, `optional`, `name`, `version`, `doc`, `parameters`,
/// `default`; a struct field's schema ends with `"field":<name>`.
pub(crate) fn write_json_schema(out: &mut String, schema: &Schema) {
    write_json_schema_inner(out, schema, None);
}

fn write_json_schema_inner(out: &mut String, schema: &Schema, field: Option<&str>) {
    out.push_str("{\"type\":\"");
    out.push_str(schema.kind.json_name());
    out.push('"');
    match schema.kind {
        Type::Struct => {
            out.push_str(",\"fields\":[");
            for (i, f) in schema.fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_schema_inner(out, &f.schema, Some(&f.name));
            }
            out.push(']');
        }
        Type::Array => {
            out.push_str(",\"items\":");
            match &schema.value_schema {
                Some(s) => write_json_schema_inner(out, s, None),
                None => out.push_str("null"),
            }
        }
        Type::Map => {
            out.push_str(",\"keys\":");
            match &schema.key_schema {
                Some(s) => write_json_schema_inner(out, s, None),
                None => out.push_str("null"),
            }
            out.push_str(",\"values\":");
            match &schema.value_schema {
                Some(s) => write_json_schema_inner(out, s, None),
                None => out.push_str("null"),
            }
        }
        _ => {}
    }
    out.push_str(",\"optional\":");
    out.push_str(if schema.optional { "true" } else { "false" });
    if let Some(name) = &schema.name {
        out.push_str(",\"name\":");
        write_string(out, name);
    }
    if let Some(v) = schema.version {
        out.push_str(",\"version\":");
        out.push_str(&v.to_string());
    }
    if let Some(doc) = &schema.doc {
        out.push_str(",\"doc\":");
        write_string(out, doc);
    }
    if !schema.parameters.is_empty() {
        out.push_str(",\"parameters\":{");
        for (i, (k, v)) in schema.parameters.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_string(out, k);
            out.push(':');
            write_string(out, v);
        }
        out.push('}');
    }
    if let Some(d) = &schema.default {
        // A default that does not fit its schema is dropped rather than
        // failing every record; Debezium never builds one.
        let mut rendered = String::new();
        if write_json_value(&mut rendered, Some(schema), d).is_ok() {
            out.push_str(",\"default\":");
            out.push_str(&rendered);
        }
    }
    if let Some(name) = field {
        out.push_str(",\"field\":");
        write_string(out, name);
    }
    out.push('}');
}

fn write_f64(out: &mut String, v: f64) {
    if v.is_finite() {
        out.push_str(&double_to_string(v));
    } else {
        // Jackson's QUOTE_NON_NUMERIC_NUMBERS (on by default).
        write_string(out, &double_to_string(v));
    }
}

/// `JsonConverter.convertToJson`: a null takes the schema's default
/// (`replace.null.with.default=true`), Decimal is Base64 of the unscaled
/// two's-complement bytes (`decimal.format=BASE64`), bytes are Base64.
pub(crate) fn write_json_value(
    out: &mut String,
    schema: Option<&Schema>,
    value: &Value,
) -> Result<(), ConvertError> {
    let Some(schema) = schema else {
        return write_schemaless(out, value);
    };
    if value.is_null() {
        return write_json_null(out, schema);
    }
    if schema.is_decimal() {
        return write_json_decimal(out, schema, value);
    }
    match (schema.kind, value) {
        (Type::Boolean, Value::Boolean(b)) => out.push_str(if *b { "true" } else { "false" }),
        (Type::Int8, Value::Int8(v)) => out.push_str(&v.to_string()),
        (Type::Int16, Value::Int16(v)) => out.push_str(&v.to_string()),
        (Type::Int32, Value::Int32(v)) => out.push_str(&v.to_string()),
        (Type::Int64, Value::Int64(v)) => out.push_str(&v.to_string()),
        (Type::Float32, Value::Float32(v)) => {
            if v.is_finite() {
                out.push_str(&float_to_string(*v));
            } else {
                write_string(out, &float_to_string(*v));
            }
        }
        (Type::Float64, Value::Float64(v)) => write_f64(out, *v),
        (Type::String, Value::String(t)) => write_string(out, t.as_str()),
        (Type::Bytes, Value::Bytes(b)) => {
            out.push('"');
            base64(b, out);
            out.push('"');
        }
        (Type::Array, Value::Array(items)) => write_json_array(out, schema, items)?,
        (Type::Map, Value::Map(entries)) => write_json_map(out, schema, value, entries)?,
        (Type::Struct, Value::Struct(values)) => write_json_struct(out, schema, value, values)?,
        _ => return Err(mismatch(schema, value)),
    }
    Ok(())
}

/// A value of another Java class than its schema's type asks for.
#[cold]
fn mismatch(schema: &Schema, value: &Value) -> ConvertError {
    refused(
        JSON_CONVERTER,
        format!(
            "invalid type {} for schema {}",
            java_class(value),
            schema.kind.java_name()
        ),
    )
}

/// A null: the schema's default where it has one, `null` where the field
/// is optional, refused where it is required.
fn write_json_null(out: &mut String, schema: &Schema) -> Result<(), ConvertError> {
    if let Some(d) = &schema.default {
        return write_json_value(out, Some(schema), d);
    }
    if schema.optional {
        out.push_str("null");
        return Ok(());
    }
    Err(refused(
        JSON_CONVERTER,
        "null value for field that is required and has no default value",
    ))
}

/// A `Decimal`: Base64 of the unscaled bytes, refused unless its scale is
/// the schema's (`decimal.format=BASE64`).
fn write_json_decimal(
    out: &mut String,
    schema: &Schema,
    value: &Value,
) -> Result<(), ConvertError> {
    let Value::Decimal(d) = value else {
        return Err(refused(
            JSON_CONVERTER,
            "invalid type for Decimal, expected BigDecimal",
        ));
    };
    if schema.decimal_scale() != Some(d.scale) {
        return Err(refused(
            JSON_CONVERTER,
            "BigDecimal has mismatching scale value for given Decimal schema",
        ));
    }
    out.push('"');
    base64(&unscaled_bytes(d), out);
    out.push('"');
    Ok(())
}

/// An array, each item under the schema's value schema.
fn write_json_array(
    out: &mut String,
    schema: &Schema,
    items: &[Value],
) -> Result<(), ConvertError> {
    let items_schema = schema.value_schema.as_deref();
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_json_value(out, items_schema, item)?;
    }
    out.push(']');
    Ok(())
}

/// A map: a JSON object when its keys are strings, otherwise an array of
/// `[key, value]` pairs, as JsonConverter writes it.
fn write_json_map(
    out: &mut String,
    schema: &Schema,
    value: &Value,
    entries: &[(Value, Value)],
) -> Result<(), ConvertError> {
    let key_schema = schema.key_schema.as_deref();
    let value_schema = schema.value_schema.as_deref();
    let string_keys = key_schema.is_some_and(|k| k.kind == Type::String);
    if string_keys {
        out.push('{');
        for (i, (k, v)) in entries.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let Value::String(k) = k else {
                return Err(mismatch(schema, value));
            };
            write_string(out, k.as_str());
            out.push(':');
            write_json_value(out, value_schema, v)?;
        }
        out.push('}');
    } else {
        out.push('[');
        for (i, (k, v)) in entries.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push('[');
            write_json_value(out, key_schema, k)?;
            out.push(',');
            write_json_value(out, value_schema, v)?;
            out.push(']');
        }
        out.push(']');
    }
    Ok(())
}

/// A struct: its fields in schema order, refused when the value has
/// another number of fields than the schema.
fn write_json_struct(
    out: &mut String,
    schema: &Schema,
    value: &Value,
    values: &[Value],
) -> Result<(), ConvertError> {
    if values.len() != schema.fields.len() {
        return Err(mismatch(schema, value));
    }
    out.push('{');
    for (i, (field, v)) in schema.fields.iter().zip(values).enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(out, &field.name);
        out.push(':');
        write_json_value(out, Some(&field.schema), v)?;
    }
    out.push('}');
    Ok(())
}

/// `convertToJson(null, value)`: types inferred from the Java class.
fn write_schemaless(out: &mut String, value: &Value) -> Result<(), ConvertError> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int8(v) => out.push_str(&v.to_string()),
        Value::Int16(v) => out.push_str(&v.to_string()),
        Value::Int32(v) => out.push_str(&v.to_string()),
        Value::Int64(v) => out.push_str(&v.to_string()),
        Value::Float32(v) => out.push_str(&float_to_string(*v)),
        Value::Float64(v) => write_f64(out, *v),
        Value::String(t) => write_string(out, t.as_str()),
        Value::Bytes(b) => {
            out.push('"');
            base64(b, out);
            out.push('"');
        }
        Value::Decimal(d) => out.push_str(&big_decimal_to_string(d)),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_schemaless(out, item)?;
            }
            out.push(']');
        }
        Value::Map(entries) => write_schemaless_map(out, entries)?,
        Value::Struct(_) => {
            return Err(refused(JSON_CONVERTER, "a struct needs a schema"));
        }
    }
    Ok(())
}

/// `convertToJson(null, map)`: a JSON object in the map's iteration order
/// when every key is a string (a key met again replaces the value in
/// place, as `ObjectNode.set` does), otherwise an array of `[key, value]`
/// pairs; keys and values typed by their Java class.
fn write_schemaless_map(out: &mut String, entries: &[(Value, Value)]) -> Result<(), ConvertError> {
    let mut object: Vec<(&str, &Value)> = Vec::with_capacity(entries.len());
    for (k, v) in entries {
        let Value::String(k) = k else {
            return write_schemaless_pairs(out, entries);
        };
        match object.iter_mut().find(|(name, _)| *name == k.as_str()) {
            Some(slot) => slot.1 = v,
            None => object.push((k.as_str(), v)),
        }
    }
    out.push('{');
    for (i, (k, v)) in object.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(out, k);
        out.push(':');
        write_schemaless(out, v)?;
    }
    out.push('}');
    Ok(())
}

/// A map with a non-string key, as `[[key,value],...]`.
fn write_schemaless_pairs(
    out: &mut String,
    entries: &[(Value, Value)],
) -> Result<(), ConvertError> {
    out.push('[');
    for (i, (k, v)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('[');
        write_schemaless(out, k)?;
        out.push(',');
        write_schemaless(out, v)?;
        out.push(']');
    }
    out.push(']');
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::connect::{Decimal, Field, Text};

    fn conv(kind: ConverterKind, schemas_enable: bool) -> Converter {
        Converter {
            kind,
            schemas_enable,
        }
    }

    fn s(b: Option<Bytes>) -> String {
        String::from_utf8(b.expect("bytes").to_vec()).expect("utf-8")
    }

    fn json_schema() -> Schema {
        Schema::optional(Type::String).named("io.debezium.data.Json", Some(1))
    }

    fn payload() -> Value {
        Value::string("{\"email\": \"gh@mefi.in\"}")
    }

    // The bytes Debezium's converters put on the wire for the `10711fa5`
    // example (tests/compat/observed.md).
    #[test]
    fn compat_doc_wire_table() {
        let key_schema = Schema::new(Type::String);
        let key = Value::string("10711fa5");
        let string = conv(ConverterKind::String, true);
        assert_eq!(
            s(string.from_connect_data(Some(&key_schema), &key).unwrap()),
            "10711fa5"
        );
        assert_eq!(
            s(string
                .from_connect_data(Some(&json_schema()), &payload())
                .unwrap()),
            "{\"email\": \"gh@mefi.in\"}"
        );
        assert_eq!(
            string
                .from_connect_data(Some(&json_schema()), &Value::Null)
                .unwrap(),
            None
        );

        let plain = conv(ConverterKind::Json, false);
        assert_eq!(
            s(plain.from_connect_data(Some(&key_schema), &key).unwrap()),
            "\"10711fa5\""
        );
        assert_eq!(
            s(plain
                .from_connect_data(Some(&json_schema()), &payload())
                .unwrap()),
            r#""{\"email\": \"gh@mefi.in\"}""#
        );
        assert_eq!(
            s(plain
                .from_connect_data(Some(&json_schema()), &Value::Null)
                .unwrap()),
            "null"
        );
        assert_eq!(plain.from_connect_data(None, &Value::Null).unwrap(), None);

        let enveloped = conv(ConverterKind::Json, true);
        assert_eq!(
            s(enveloped
                .from_connect_data(Some(&key_schema), &key)
                .unwrap()),
            r#"{"schema":{"type":"string","optional":false},"payload":"10711fa5"}"#
        );
        assert_eq!(
            s(enveloped
                .from_connect_data(Some(&json_schema()), &payload())
                .unwrap()),
            r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{\"email\": \"gh@mefi.in\"}"}"#
        );
        assert_eq!(
            s(enveloped
                .from_connect_data(Some(&json_schema()), &Value::Null)
                .unwrap()),
            r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":null}"#
        );
    }

    #[test]
    fn id_header_converters() {
        let uuid = Schema::new(Type::String).named("io.debezium.data.Uuid", Some(1));
        let id = Value::string("59a42efd-b015-44a9-9dde-cb36d9002425");
        let simple = HeaderConverter {
            kind: HeaderConverterKind::Simple,
            schemas_enable: true,
        };
        assert_eq!(
            s(simple.from_connect_header(Some(&uuid), &id).unwrap()),
            "59a42efd-b015-44a9-9dde-cb36d9002425"
        );
        assert_eq!(
            s(simple
                .from_connect_header(Some(&Schema::new(Type::Boolean)), &Value::Boolean(true))
                .unwrap()),
            "true"
        );
        assert_eq!(
            s(simple
                .from_connect_header(Some(&Schema::new(Type::Int32)), &Value::Int32(2))
                .unwrap()),
            "2"
        );
        assert_eq!(
            simple
                .from_connect_header(Some(&uuid), &Value::Null)
                .unwrap(),
            None
        );
        let json = HeaderConverter {
            kind: HeaderConverterKind::Json,
            schemas_enable: true,
        };
        assert_eq!(
            s(json.from_connect_header(Some(&uuid), &id).unwrap()),
            r#"{"schema":{"type":"string","optional":false,"name":"io.debezium.data.Uuid","version":1},"payload":"59a42efd-b015-44a9-9dde-cb36d9002425"}"#
        );
        let json = HeaderConverter {
            kind: HeaderConverterKind::Json,
            schemas_enable: false,
        };
        assert_eq!(
            s(json.from_connect_header(Some(&uuid), &id).unwrap()),
            "\"59a42efd-b015-44a9-9dde-cb36d9002425\""
        );
    }

    fn envelope() -> (Schema, Value) {
        let field = |name: &str, schema: Schema| Field {
            name: Arc::from(name),
            schema: Arc::new(schema),
        };
        let mut deleted = Schema::optional(Type::Boolean);
        deleted.default = Some(Value::Boolean(false));
        let schema = Schema::structure(
            Some("test_server.outboxsmtit.outbox.UserEmail.Value"),
            vec![
                field("payload", json_schema()),
                field("eventType", Schema::new(Type::String)),
                field("deleted", deleted),
                field("blob", Schema::optional(Type::Bytes)),
            ],
        );
        let value = Value::Struct(vec![
            payload(),
            Value::string("UserCreated"),
            Value::Null,
            Value::Bytes(Bytes::from_static(b"hi")),
        ]);
        (schema, value)
    }

    #[test]
    fn struct_json_and_schema_order() {
        let (schema, value) = envelope();
        let out = s(conv(ConverterKind::Json, true)
            .from_connect_data(Some(&schema), &value)
            .unwrap());
        assert_eq!(
            out,
            concat!(
                r#"{"schema":{"type":"struct","fields":["#,
                r#"{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"payload"},"#,
                r#"{"type":"string","optional":false,"field":"eventType"},"#,
                r#"{"type":"boolean","optional":true,"default":false,"field":"deleted"},"#,
                r#"{"type":"bytes","optional":true,"field":"blob"}],"#,
                r#""optional":false,"name":"test_server.outboxsmtit.outbox.UserEmail.Value"},"#,
                r#""payload":{"payload":"{\"email\": \"gh@mefi.in\"}","eventType":"UserCreated","deleted":false,"blob":"aGk="}}"#
            )
        );
    }

    #[test]
    fn struct_to_string_forms() {
        let (schema, value) = envelope();
        // StringConverter: Struct.toString() has a byte[] identity hash here.
        assert!(matches!(
            conv(ConverterKind::String, true).from_connect_data(Some(&schema), &value),
            Err(ConvertError::IdentityHash { .. })
        ));
        let (schema, mut value) = envelope();
        if let Value::Struct(v) = &mut value {
            v[3] = Value::Null;
        }
        assert_eq!(
            s(conv(ConverterKind::String, true)
                .from_connect_data(Some(&schema), &value)
                .unwrap()),
            "Struct{payload={\"email\": \"gh@mefi.in\"},eventType=UserCreated}"
        );
        let simple = HeaderConverter {
            kind: HeaderConverterKind::Simple,
            schemas_enable: true,
        };
        assert_eq!(
            s(simple.from_connect_header(Some(&schema), &value).unwrap()),
            r#"{"payload":"{\"email\": \"gh@mefi.in\"}","eventType":"UserCreated","deleted":false,"blob":null}"#
        );
    }

    #[test]
    fn decimals_and_bytes() {
        let schema = Schema::new(Type::Bytes)
            .named(crate::connect::DECIMAL_NAME, Some(1))
            .with_parameter("scale", "2")
            .with_parameter("connect.decimal.precision", "10");
        let v = Value::Decimal(Decimal {
            negative: false,
            digits: "12345".into(),
            scale: 2,
        });
        assert_eq!(
            s(conv(ConverterKind::Json, true)
                .from_connect_data(Some(&schema), &v)
                .unwrap()),
            r#"{"schema":{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"10"}},"payload":"MDk="}"#
        );
        assert_eq!(
            s(conv(ConverterKind::String, true)
                .from_connect_data(Some(&schema), &v)
                .unwrap()),
            "123.45"
        );
        assert!(conv(ConverterKind::ByteArray, true)
            .from_connect_data(Some(&schema), &v)
            .is_err());

        let bytes = Schema::new(Type::Bytes);
        let raw = Value::Bytes(Bytes::from_static(b"value1"));
        for kind in [ConverterKind::ByteArray, ConverterKind::BinaryData] {
            assert_eq!(
                conv(kind, true)
                    .from_connect_data(Some(&bytes), &raw)
                    .unwrap()
                    .as_deref(),
                Some(&b"value1"[..])
            );
            assert!(conv(kind, true)
                .from_connect_data(
                    Some(&Schema::new(Type::String)),
                    &Value::String(Text::from("x"))
                )
                .is_err());
            assert_eq!(
                conv(kind, true)
                    .from_connect_data(Some(&bytes), &Value::Null)
                    .unwrap(),
                None
            );
        }
        let simple = HeaderConverter {
            kind: HeaderConverterKind::Simple,
            schemas_enable: true,
        };
        assert_eq!(
            s(simple.from_connect_header(Some(&bytes), &raw).unwrap()),
            "dmFsdWUx"
        );
    }

    #[test]
    fn floats_in_json() {
        let f = Schema::new(Type::Float64);
        let json = conv(ConverterKind::Json, false);
        assert_eq!(
            s(json
                .from_connect_data(Some(&f), &Value::Float64(1e21))
                .unwrap()),
            "1.0E21"
        );
        assert_eq!(
            s(json
                .from_connect_data(Some(&f), &Value::Float64(f64::NAN))
                .unwrap()),
            "\"NaN\""
        );
        assert_eq!(
            s(json
                .from_connect_data(Some(&f), &Value::Float64(2.5))
                .unwrap()),
            "2.5"
        );
    }
    #[test]
    fn schemaless_maps_as_kafka_writes_them() {
        // Read from Kafka 4.1.1's JsonConverter, StringConverter and
        // SimpleHeaderConverter given a null schema and these LinkedHashMaps.
        let st = |x: &str| Value::string(x);
        let strings = Value::Map(vec![
            (st("b"), Value::Int32(1)),
            (
                st("a"),
                Value::Map(vec![(
                    st("x"),
                    Value::Array(vec![Value::Int64(1), Value::Float64(2.5)]),
                )]),
            ),
            (st("n"), Value::Null),
        ]);
        let mixed = Value::Map(vec![
            (Value::Int32(1), st("one")),
            (st("two"), Value::Int32(2)),
            (Value::Null, Value::Boolean(true)),
        ]);
        let empty = Value::Map(vec![]);
        let simple = HeaderConverter {
            kind: HeaderConverterKind::Simple,
            schemas_enable: true,
        };
        for (value, json, to_string, header) in [
            (
                &strings,
                r#"{"b":1,"a":{"x":[1,2.5]},"n":null}"#,
                "{b=1, a={x=[1, 2.5]}, n=null}",
                r#"{"b":1,"a":{"x":[1,2.5]},"n":null}"#,
            ),
            (
                &mixed,
                r#"[[1,"one"],["two",2],[null,true]]"#,
                "{1=one, two=2, null=true}",
                r#"{1:"one","two":2,null:true}"#,
            ),
            (&empty, "{}", "{}", "{}"),
        ] {
            assert_eq!(
                s(conv(ConverterKind::Json, true)
                    .from_connect_data(None, value)
                    .unwrap()),
                format!("{{\"schema\":null,\"payload\":{json}}}")
            );
            assert_eq!(
                s(conv(ConverterKind::Json, false)
                    .from_connect_data(None, value)
                    .unwrap()),
                json
            );
            assert_eq!(
                s(conv(ConverterKind::String, false)
                    .from_connect_data(None, value)
                    .unwrap()),
                to_string
            );
            assert_eq!(s(simple.from_connect_header(None, value).unwrap()), header);
        }
        // A repeated string key keeps its first place, as ObjectNode.set does.
        let dup = Value::Map(vec![
            (st("a"), Value::Int32(1)),
            (st("b"), Value::Int32(2)),
            (st("a"), Value::Int32(3)),
        ]);
        assert_eq!(
            s(conv(ConverterKind::Json, false)
                .from_connect_data(None, &dup)
                .unwrap()),
            r#"{"a":3,"b":2}"#
        );
        let with_struct = Value::Map(vec![(st("s"), Value::Struct(vec![]))]);
        assert!(conv(ConverterKind::Json, false)
            .from_connect_data(None, &with_struct)
            .is_err());
    }
}
