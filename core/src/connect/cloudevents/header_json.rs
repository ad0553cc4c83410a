//! The CloudEvents converter's own header reader: Kafka 4.1.1's
//! `JsonConverter.toConnectData` configured with `schemas.enable=true`
//! (Debezium's `jsonHeaderConverter`), applied to the bytes the worker's
//! header converter wrote. Owns the envelope check, `asConnectSchema` and
//! `convertToConnect` with their `DataException` texts. Pure.

use std::sync::Arc;

use crate::connect::json::{parse, JsonNode};
use crate::connect::pg::names::{CONNECT_DATE, CONNECT_TIME, CONNECT_TIMESTAMP};
use crate::connect::{Decimal, Field, Schema, Type, Value, DECIMAL_NAME};

/// A decoded header: its schema (`None`: schemaless) and value.
pub(super) type Decoded = (Option<Arc<Schema>>, Value);

/// `toConnectData(null, bytes)`; `None` bytes (a null header value) give
/// `SchemaAndValue.NULL`. The error is the `DataException` message.
pub(super) fn to_connect_data(bytes: Option<&[u8]>) -> Result<Decoded, String> {
    let Some(bytes) = bytes else {
        return Ok((None, Value::Null));
    };
    let node = deserialize(bytes).ok_or_else(|| {
        "Converting byte[] to Kafka Connect data failed due to serialization error: ".to_owned()
    })?;
    let envelope = match &node {
        JsonNode::Object(members) if members.len() == 2 => {
            match (member(&node, "schema"), member(&node, "payload")) {
                (Some(s), Some(p)) => Some((s, p)),
                _ => None,
            }
        }
        _ => None,
    };
    let Some((schema_node, payload)) = envelope else {
        return Err(concat!(
            "JsonConverter with schemas.enable requires \"schema\" and \"payload\" fields and may not",
            " contain additional fields. If you are trying to deserialize plain JSON data, set",
            " schemas.enable=false in your converter configuration."
        )
        .to_owned());
    };
    let schema = as_connect_schema(schema_node)?.map(Arc::new);
    let value = convert(schema.as_deref(), Some(payload))?;
    Ok((schema, value))
}

/// Jackson's `readTree` as Kafka's `JsonDeserializer` runs it: the first
/// value, trailing content ignored, except that a root-level number must be
/// followed by white space or the end, and a root-level literal may not run
/// into further identifier characters. `None`: Jackson throws.
fn deserialize(bytes: &[u8]) -> Option<JsonNode> {
    let text = std::str::from_utf8(bytes).ok()?;
    let node = parse(text).ok()?;
    let rest = text.trim_start_matches([' ', '\t', '\n', '\r']);
    let root_len = match node {
        JsonNode::Int(_) | JsonNode::Long(_) | JsonNode::BigInt(_) | JsonNode::Double(_) => rest
            .find(|c: char| !(c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E')))
            .unwrap_or(rest.len()),
        JsonNode::Bool(true) | JsonNode::Null => 4,
        JsonNode::Bool(false) => 5,
        _ => return Some(node),
    };
    let next = rest[root_len..].chars().next();
    let ok = match node {
        JsonNode::Bool(_) | JsonNode::Null => {
            !next.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$')
        }
        _ => next.is_none_or(|c| matches!(c, ' ' | '\t' | '\n' | '\r')),
    };
    ok.then_some(node)
}

/// `ObjectNode.get(name)`.
fn member<'a>(node: &'a JsonNode, name: &str) -> Option<&'a JsonNode> {
    match node {
        JsonNode::Object(members) => members.iter().find(|(k, _)| k == name).map(|(_, v)| v),
        _ => None,
    }
}

/// `asConnectSchema`: `None` for a JSON null schema.
fn as_connect_schema(node: &JsonNode) -> Result<Option<Schema>, String> {
    if matches!(node, JsonNode::Null) {
        return Ok(None);
    }
    let Some(JsonNode::String(type_name)) = member(node, "type") else {
        return Err("Schema must contain 'type' field".to_owned());
    };
    let mut schema = match type_name.as_str() {
        "boolean" => Schema::new(Type::Boolean),
        "int8" => Schema::new(Type::Int8),
        "int16" => Schema::new(Type::Int16),
        "int32" => Schema::new(Type::Int32),
        "int64" => Schema::new(Type::Int64),
        "float" => Schema::new(Type::Float32),
        "double" => Schema::new(Type::Float64),
        "bytes" => Schema::new(Type::Bytes),
        "string" => Schema::new(Type::String),
        "array" => array_schema(node)?,
        "map" => map_schema(node)?,
        "struct" => struct_schema(node)?,
        other => return Err(format!("Unknown schema type: {other}")),
    };
    schema.optional = matches!(member(node, "optional"), Some(JsonNode::Bool(true)));
    if let Some(JsonNode::String(name)) = member(node, "name") {
        schema.name = Some(Arc::from(name.as_str()));
    }
    if let Some(v) = member(node, "version").and_then(int_value_if_integral) {
        schema.version = Some(v);
    }
    if let Some(JsonNode::String(doc)) = member(node, "doc") {
        schema.doc = Some(Arc::from(doc.as_str()));
    }
    if let Some(JsonNode::Object(params)) = member(node, "parameters") {
        for (k, v) in params {
            let JsonNode::String(v) = v else {
                return Err("Schema parameters must have string values.".to_owned());
            };
            schema
                .parameters
                .push((Arc::from(k.as_str()), Arc::from(v.as_str())));
        }
    }
    if let Some(default) = member(node, "default") {
        let d = convert(Some(&schema), Some(default))?;
        if !d.is_null() {
            schema.default = Some(d);
        }
    }
    Ok(Some(schema))
}

fn array_schema(node: &JsonNode) -> Result<Schema, String> {
    let items = match member(node, "items") {
        None | Some(JsonNode::Null) => {
            return Err("Array schema did not specify the element type".to_owned())
        }
        Some(items) => as_connect_schema(items)?,
    };
    let items = items.ok_or("SchemaBuilderException: element schema cannot be null.")?;
    Ok(Schema::array(Arc::new(items)))
}

fn map_schema(node: &JsonNode) -> Result<Schema, String> {
    let keys = member(node, "keys").ok_or("Map schema did not specify the key type")?;
    let values = member(node, "values").ok_or("Map schema did not specify the value type")?;
    let keys =
        as_connect_schema(keys)?.ok_or("SchemaBuilderException: keySchema cannot be null.")?;
    let values =
        as_connect_schema(values)?.ok_or("SchemaBuilderException: valueSchema cannot be null.")?;
    let mut s = Schema::new(Type::Map);
    s.key_schema = Some(Arc::new(keys));
    s.value_schema = Some(Arc::new(values));
    Ok(s)
}

fn struct_schema(node: &JsonNode) -> Result<Schema, String> {
    let Some(JsonNode::Array(fields)) = member(node, "fields") else {
        return Err("Struct schema's \"fields\" argument is not an array.".to_owned());
    };
    let mut out: Vec<Field> = Vec::with_capacity(fields.len());
    for f in fields {
        let Some(JsonNode::String(name)) = member(f, "field") else {
            return Err("Struct schema's field name not specified properly".to_owned());
        };
        let schema = as_connect_schema(f)?
            .ok_or_else(|| format!("fieldSchema for field {name} cannot be null."))?;
        if out.iter().any(|x| &*x.name == name) {
            return Err(format!(
                "Cannot create field because of field name duplication {name}"
            ));
        }
        out.push(Field {
            name: Arc::from(name.as_str()),
            schema: Arc::new(schema),
        });
    }
    Ok(Schema::structure(None, out))
}

/// `convertToConnect(schema, node)`; a missing node is JSON null.
fn convert(schema: Option<&Schema>, node: Option<&JsonNode>) -> Result<Value, String> {
    let node = node.unwrap_or(&JsonNode::Null);
    let Some(schema) = schema else {
        return schemaless(node);
    };
    if matches!(node, JsonNode::Null) {
        if let Some(d) = &schema.default {
            return Ok(d.clone());
        }
        if schema.optional {
            return Ok(Value::Null);
        }
        return Err(format!(
            "Invalid null value for required {} field",
            schema.kind.java_name()
        ));
    }
    if let Some(v) = logical(schema, node)? {
        return Ok(v);
    }
    Ok(match schema.kind {
        Type::Boolean => Value::Boolean(matches!(node, JsonNode::Bool(true))),
        Type::Int8 => Value::Int8(long_value(node) as i32 as i8),
        Type::Int16 => Value::Int16(long_value(node) as i32 as i16),
        Type::Int32 => Value::Int32(int_value(node)),
        Type::Int64 => Value::Int64(long_value(node)),
        Type::Float32 => Value::Float32(double_value(node) as f32),
        Type::Float64 => Value::Float64(double_value(node)),
        Type::Bytes => match node {
            JsonNode::String(s) => {
                Value::Bytes(base64_decode(s).ok_or("Invalid bytes field")?.into())
            }
            _ => Value::Null,
        },
        Type::String => match node {
            JsonNode::String(s) => Value::string(s.as_str()),
            _ => Value::Null,
        },
        Type::Array => {
            let items = schema.value_schema.as_deref();
            let mut out = Vec::new();
            for e in children(node) {
                out.push(convert(items, Some(e))?);
            }
            Value::Array(out)
        }
        Type::Map => map_value(schema, node)?,
        Type::Struct => struct_value(schema, node)?,
    })
}

/// The elements Jackson's `JsonNode` iterator yields.
fn children(node: &JsonNode) -> Vec<&JsonNode> {
    match node {
        JsonNode::Array(items) => items.iter().collect(),
        JsonNode::Object(members) => members.iter().map(|(_, v)| v).collect(),
        _ => Vec::new(),
    }
}

fn map_value(schema: &Schema, node: &JsonNode) -> Result<Value, String> {
    let values = schema.value_schema.as_deref();
    let string_keys = schema
        .key_schema
        .as_deref()
        .is_none_or(|k| k.kind == Type::String);
    let mut out = Vec::new();
    if string_keys {
        let JsonNode::Object(members) = node else {
            return Err(format!(
                "Maps with string fields should be encoded as JSON objects, but found {}",
                node.node_type()
            ));
        };
        for (k, v) in members {
            out.push((Value::string(k.as_str()), convert(values, Some(v))?));
        }
        return Ok(Value::Map(out));
    }
    let JsonNode::Array(entries) = node else {
        return Err(format!(
            "Maps with non-string fields should be encoded as JSON array of tuples, but found {}",
            node.node_type()
        ));
    };
    for e in entries {
        let JsonNode::Array(pair) = e else {
            return Err(format!(
                "Found invalid map entry instead of array tuple: {}",
                e.node_type()
            ));
        };
        if pair.len() != 2 {
            return Err(format!(
                "Found invalid map entry, expected length 2 but found :{}",
                pair.len()
            ));
        }
        let k = convert(schema.key_schema.as_deref(), pair.first())?;
        out.push((k, convert(values, pair.get(1))?));
    }
    Ok(Value::Map(out))
}

fn struct_value(schema: &Schema, node: &JsonNode) -> Result<Value, String> {
    if !matches!(node, JsonNode::Object(_)) {
        return Err(format!(
            "Structs should be encoded as JSON objects, but found {}",
            node.node_type()
        ));
    }
    let mut out = Vec::with_capacity(schema.fields.len());
    for f in &schema.fields {
        let v = convert(Some(&f.schema), member(node, &f.name))?;
        // Struct.put validates; the converted value always has the right
        // class, so only a null can fail.
        if v.is_null() && !f.schema.optional {
            return Err(format!(
                "Invalid value: null used for required field: \"{}\", schema type: {}",
                f.name,
                f.schema.kind.java_name()
            ));
        }
        out.push(v);
    }
    Ok(Value::Struct(out))
}

/// Kafka's logical converters (Decimal, Date, Time, Timestamp).
fn logical(schema: &Schema, node: &JsonNode) -> Result<Option<Value>, String> {
    let Some(name) = schema.name.as_deref() else {
        return Ok(None);
    };
    let v = match name {
        DECIMAL_NAME => Value::Decimal(decimal_value(schema, node)?),
        CONNECT_DATE | CONNECT_TIME => {
            let JsonNode::Int(v) = node else {
                let what = if name == CONNECT_DATE { "Date" } else { "Time" };
                return Err(format!(
                    "Invalid type for {what}, underlying representation should be integer but was {}",
                    node.node_type()
                ));
            };
            Value::Int32(*v)
        }
        CONNECT_TIMESTAMP => match node {
            JsonNode::Int(_) | JsonNode::Long(_) | JsonNode::BigInt(_) => {
                Value::Int64(long_value(node))
            }
            _ => {
                return Err(format!(
                    "Invalid type for Timestamp, underlying representation should be integral but was {}",
                    node.node_type()
                ))
            }
        },
        _ => return Ok(None),
    };
    Ok(Some(v))
}

/// The Decimal logical converter's `toConnect`.
fn decimal_value(schema: &Schema, node: &JsonNode) -> Result<Decimal, String> {
    match node {
        JsonNode::Int(_) | JsonNode::Long(_) | JsonNode::BigInt(_) => {
            Ok(decimal_from_text(&node.as_text()))
        }
        JsonNode::Double(d) => Ok(decimal_from_text(&crate::connect::java::double_to_string(
            *d,
        ))),
        JsonNode::String(s) => {
            let bytes = base64_decode(s).ok_or("Invalid bytes for Decimal field")?;
            let scale = schema
                .decimal_scale()
                .ok_or("Invalid bytes for Decimal field")?;
            Ok(decimal_from_twos_complement(&bytes, scale))
        }
        other => Err(format!(
            "Invalid type for Decimal, underlying representation should be numeric or bytes but was {}",
            other.node_type()
        )),
    }
}

/// `new BigDecimal(text)` for `123`, `-1.50`, `1.0E10`.
fn decimal_from_text(text: &str) -> Decimal {
    let (negative, t) = match text.strip_prefix('-') {
        Some(t) => (true, t),
        None => (false, text),
    };
    let (mantissa, exp) = match t.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (t, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all: String = format!("{int}{frac}");
    let digits = all.trim_start_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    let scale = i32::try_from(frac.len()).unwrap_or(0) - exp;
    Decimal {
        negative: negative && digits != "0",
        digits: digits.into(),
        scale,
    }
}

/// `new BigDecimal(new BigInteger(bytes), scale)`.
fn decimal_from_twos_complement(bytes: &[u8], scale: i32) -> Decimal {
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let mut mag: Vec<u8> = bytes.to_vec();
    if negative {
        // Two's complement negation: invert and add one.
        for b in &mut mag {
            *b = !*b;
        }
        for b in mag.iter_mut().rev() {
            let (v, carry) = b.overflowing_add(1);
            *b = v;
            if !carry {
                break;
            }
        }
    }
    let mut digits = Vec::new();
    while mag.iter().any(|b| *b != 0) {
        let mut rem: u32 = 0;
        for b in &mut mag {
            let cur = (rem << 8) | u32::from(*b);
            *b = (cur / 10) as u8;
            rem = cur % 10;
        }
        digits.push(b'0' + rem as u8);
    }
    digits.reverse();
    let text = if digits.is_empty() {
        "0".to_owned()
    } else {
        String::from_utf8(digits).unwrap_or_default()
    };
    Decimal {
        negative: negative && text != "0",
        digits: text.into(),
        scale,
    }
}

/// Jackson's MIME-no-linefeeds Base64 with padding required; `None` for
/// text Jackson refuses.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut quad = [0u8; 4];
    let mut n = 0;
    let mut pad = 0;
    for c in s.bytes() {
        if c <= b' ' && n == 0 {
            continue;
        }
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' if n >= 2 => {
                pad += 1;
                0
            }
            _ => return None,
        };
        if pad > 0 && c != b'=' {
            return None;
        }
        quad[n] = v;
        n += 1;
        if n == 4 {
            let bits = (u32::from(quad[0]) << 18)
                | (u32::from(quad[1]) << 12)
                | (u32::from(quad[2]) << 6)
                | u32::from(quad[3]);
            let bytes = [(bits >> 16) as u8, (bits >> 8) as u8, bits as u8];
            out.extend_from_slice(&bytes[..3 - pad]);
            if pad > 0 {
                return Some(out);
            }
            n = 0;
        }
    }
    (n == 0).then_some(out)
}

/// `convertToConnect(null, node)`: types inferred from the JSON node.
fn schemaless(node: &JsonNode) -> Result<Value, String> {
    Ok(match node {
        JsonNode::Null => Value::Null,
        JsonNode::Bool(b) => Value::Boolean(*b),
        JsonNode::Int(_) | JsonNode::Long(_) | JsonNode::BigInt(_) => {
            Value::Int64(long_value(node))
        }
        JsonNode::Double(d) => Value::Float64(*d),
        JsonNode::String(s) => Value::string(s.as_str()),
        JsonNode::Array(items) => {
            Value::Array(items.iter().map(schemaless).collect::<Result<_, _>>()?)
        }
        JsonNode::Object(members) => Value::Map(
            members
                .iter()
                .map(|(k, v)| Ok((Value::string(k.as_str()), schemaless(v)?)))
                .collect::<Result<_, String>>()?,
        ),
    })
}

/// `JsonNode.longValue()`: numbers converted as Java does, 0 otherwise.
fn long_value(node: &JsonNode) -> i64 {
    match node {
        JsonNode::Int(v) => i64::from(*v),
        JsonNode::Long(v) => *v,
        // BigInteger.longValue keeps the low 64 bits.
        JsonNode::BigInt(s) => low_bits(s),
        JsonNode::Double(d) => *d as i64,
        _ => 0,
    }
}

/// `JsonNode.intValue()`.
fn int_value(node: &JsonNode) -> i32 {
    match node {
        JsonNode::Double(d) => *d as i32,
        other => long_value(other) as i32,
    }
}

/// `JsonNode.doubleValue()`.
fn double_value(node: &JsonNode) -> f64 {
    match node {
        JsonNode::Int(v) => f64::from(*v),
        JsonNode::Long(v) => *v as f64,
        JsonNode::BigInt(s) => s.parse().unwrap_or(0.0),
        JsonNode::Double(d) => *d,
        _ => 0.0,
    }
}

/// A version number (`isIntegralNumber` then `intValue`).
fn int_value_if_integral(node: &JsonNode) -> Option<i32> {
    match node {
        JsonNode::Int(_) | JsonNode::Long(_) | JsonNode::BigInt(_) => Some(int_value(node)),
        _ => None,
    }
}

/// The low 64 bits of a decimal integer, as `BigInteger.longValue` gives.
fn low_bits(s: &str) -> i64 {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s),
    };
    let mut v: u64 = 0;
    for c in digits.bytes().filter(u8::is_ascii_digit) {
        v = v.wrapping_mul(10).wrapping_add(u64::from(c - b'0'));
    }
    let v = v as i64;
    if neg {
        v.wrapping_neg()
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(s: &str) -> Result<Decoded, String> {
        to_connect_data(Some(s.as_bytes()))
    }

    #[test]
    fn envelopes_round_trip_and_refusals_match_kafka() {
        let (s, v) = decode(r#"{"schema":{"type":"string","optional":false,"name":"io.debezium.data.Uuid","version":1},"payload":"59a4"}"#).unwrap();
        let s = s.unwrap();
        assert_eq!(s.name.as_deref(), Some("io.debezium.data.Uuid"));
        assert_eq!(s.version, Some(1));
        assert_eq!(v, Value::string("59a4"));
        // SimpleHeaderConverter's text: Jackson fails on the root number.
        assert!(decode("59a42efd-b015")
            .unwrap_err()
            .starts_with("Converting byte[]"));
        assert!(decode("UserCreated")
            .unwrap_err()
            .starts_with("Converting byte[]"));
        assert!(decode("truex")
            .unwrap_err()
            .starts_with("Converting byte[]"));
        // Valid JSON that is no envelope.
        for plain in [
            "42",
            "\"c\"",
            r#"{"schema":null}"#,
            r#"{"schema":null,"payload":1,"x":2}"#,
        ] {
            assert!(decode(plain)
                .unwrap_err()
                .starts_with("JsonConverter with schemas.enable requires"));
        }
        assert_eq!(to_connect_data(None).unwrap(), (None, Value::Null));
        // A schemaless envelope: types from the JSON.
        assert_eq!(
            decode(r#"{"schema":null,"payload":7}"#).unwrap().1,
            Value::Int64(7)
        );
        assert_eq!(
            decode(r#"{"schema":{"type":"strin"},"payload":1}"#).unwrap_err(),
            "Unknown schema type: strin"
        );
        assert_eq!(
            decode(r#"{"schema":{"type":"string"},"payload":null}"#).unwrap_err(),
            "Invalid null value for required STRING field"
        );
        // textValue() of a number is null, which Struct.put refuses.
        assert_eq!(
            decode(r#"{"schema":{"type":"struct","fields":[{"type":"string","field":"a"}]},"payload":{"a":1}}"#).unwrap_err(),
            "Invalid value: null used for required field: \"a\", schema type: STRING"
        );
    }

    #[test]
    fn defaults_logical_types_and_bytes() {
        let (s, v) = decode(concat!(
            r#"{"schema":{"type":"struct","fields":["#,
            r#"{"type":"string","optional":true,"default":"false","field":"snapshot"},"#,
            r#"{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2"},"field":"d"},"#,
            r#"{"type":"int32","name":"org.apache.kafka.connect.data.Date","field":"day"},"#,
            r#"{"type":"map","keys":{"type":"int32"},"values":{"type":"bytes"},"field":"m"}"#,
            r#"],"optional":false,"name":"x"},"payload":{"snapshot":null,"d":"/w==","day":3,"m":[[1,"aGk="]]}}"#
        ))
        .unwrap();
        assert_eq!(
            s.unwrap().fields[0].schema.default,
            Some(Value::string("false"))
        );
        assert_eq!(
            v,
            Value::Struct(vec![
                Value::string("false"),
                Value::Decimal(Decimal {
                    negative: true,
                    digits: "1".into(),
                    scale: 2
                }),
                Value::Int32(3),
                Value::Map(vec![(Value::Int32(1), Value::Bytes(b"hi".to_vec().into()))]),
            ])
        );
        assert_eq!(
            decimal_from_twos_complement(&[0x30, 0x39], 2)
                .digits
                .as_ref(),
            "12345"
        );
        assert_eq!(decimal_from_text("1.0E10").scale, -9);
        assert_eq!(base64_decode("aGk"), None);
        assert_eq!(
            decode(r#"{"schema":{"type":"bytes"},"payload":"!!"}"#).unwrap_err(),
            "Invalid bytes field"
        );
    }
}
