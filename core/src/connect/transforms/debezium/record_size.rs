//! Debezium's `EnforceRecordSize`: no converter is involved — it estimates
//! the record's heap size with `ApproximateStructSizeCalculator` (100
//! bytes per source partition, source offset and header entry, 8 for the
//! timestamp, struct/string/bytes/array/map overheads for a Struct key and
//! value, the topic's UTF-8 length), scales it by `compression.ratio`, and
//! when it exceeds `max.bytes` truncates the long STRING/BYTES fields of
//! the value's `before` and `after` structs proportionally. After the
//! router a value that is not a Struct passes unchanged; a Struct value
//! with a key that is neither null nor a Struct fails (`(Struct) key`).
//! Owns the options and that arithmetic. Pure.

use std::sync::Arc;

use super::class_cast;
use crate::connect::java::{double_to_string, unscaled_bytes};
use crate::connect::transforms::options::{Reader, TransformConfigError};
use crate::connect::transforms::util::struct_get;
use crate::connect::transforms::{ConnectRecord, TransformError, Transformation};
use crate::connect::{Schema, Type, Value};

/// Source partition and offset entries the estimate counts. They are not
/// part of walrelay's record; this is Debezium's PostgreSQL connector
/// streaming a change after its first commit: partition `{server}`,
/// offset `{ts_usec, txId, lsn, lsn_proc, lsn_commit, messageType}` (no
/// `xmin`, transaction metadata or incremental snapshot keys).
const SOURCE_ENTRIES: i64 = 1 + 6;

/// `EMPTY_STRUCT_SIZE`.
const EMPTY_STRUCT: i64 = 56;
/// `EMPTY_STRING_SIZE`.
const EMPTY_STRING: i64 = 56;
/// `EMPTY_BYTES_SIZE`.
const EMPTY_BYTES: i64 = 24;
/// `EMPTY_ARRAY_SIZE`.
const EMPTY_ARRAY: i64 = 64;
/// `EMPTY_MAP_SIZE`.
const EMPTY_MAP: i64 = 88;
/// `EMPTY_PRIMITIVE`.
const EMPTY_PRIMITIVE: i64 = 24;
/// `REFERENCE_SIZE`.
const REFERENCE: i64 = 8;

/// `io.debezium.transforms.EnforceRecordSize`.
#[derive(Debug)]
pub(super) struct EnforceRecordSize {
    /// `max.bytes`.
    max_bytes: i32,
    /// `compression.ratio`.
    ratio: f64,
    /// `min.field.size`.
    min_field_size: i32,
}

impl EnforceRecordSize {
    /// `configure(props)`: Kafka's `AbstractConfig` with the SMT's
    /// `ConfigDef` (INT `max.bytes` required, DOUBLE `compression.ratio`
    /// 1.0, INT `min.field.size` 25000), then the range checks.
    pub(super) fn configure(opts: &Reader<'_>) -> Result<EnforceRecordSize, TransformConfigError> {
        let max_bytes = opts.int("max.bytes", None)?;
        let ratio = match opts.raw("compression.ratio") {
            Some(v) => java_parse_double(v.trim()).ok_or_else(|| {
                TransformConfigError::invalid("compression.ratio", v, "Not a number of type DOUBLE")
            })?,
            None => 1.0,
        };
        let min_field_size = opts.int("min.field.size", Some(25000))?;
        if max_bytes <= 0 {
            let v = max_bytes.to_string();
            return Err(TransformConfigError::invalid(
                "max.bytes",
                &v,
                "Must be a positive integer",
            ));
        }
        if ratio <= 0.0 {
            let v = double_to_string(ratio);
            return Err(TransformConfigError::invalid(
                "compression.ratio",
                &v,
                "Must be a positive number",
            ));
        }
        if min_field_size < 0 {
            let v = min_field_size.to_string();
            return Err(TransformConfigError::invalid(
                "min.field.size",
                &v,
                "Must be non-negative",
            ));
        }
        Ok(EnforceRecordSize {
            max_bytes,
            ratio,
            min_field_size,
        })
    }

    /// `findTruncatableFields` of `envelope.<name>` when it is a Struct:
    /// (index, size) of each non-null STRING (UTF-16 length) or BYTES
    /// field longer than `min.field.size`.
    fn truncatable(
        &self,
        schema: &Schema,
        values: &[Value],
        name: &str,
    ) -> Result<Vec<(usize, i32)>, TransformError> {
        let Some(i) = schema.field_index(name) else {
            return Ok(Vec::new());
        };
        let (Value::Struct(inner), inner_schema) =
            (struct_get(schema, values, i), &schema.fields[i].schema)
        else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for (j, f) in inner_schema.fields.iter().enumerate() {
            let size = match (f.schema.kind, struct_get(inner_schema, inner, j)) {
                (_, Value::Null) => continue,
                (Type::String, Value::String(t)) => utf16_len(t.as_str()),
                (Type::Bytes, Value::Bytes(b)) => i32::try_from(b.len()).unwrap_or(i32::MAX),
                (Type::Bytes, other) => return Err(class_cast(other, "java.nio.ByteBuffer")),
                _ => continue,
            };
            if size > self.min_field_size {
                out.push((j, size));
            }
        }
        Ok(out)
    }
}

/// `String.length()`: UTF-16 code units.
fn utf16_len(s: &str) -> i32 {
    i32::try_from(s.encode_utf16().count()).unwrap_or(i32::MAX)
}

/// `Double.parseDouble` of a trimmed text: decimal or exponent notation,
/// an optional `f`/`d` suffix, `NaN`, `Infinity` (hex floats are not
/// accepted here).
fn java_parse_double(v: &str) -> Option<f64> {
    let body = v
        .strip_suffix(['f', 'F', 'd', 'D'])
        .filter(|b| !b.ends_with(['f', 'F', 'd', 'D']))
        .unwrap_or(v);
    let unsigned = body.trim_start_matches(['+', '-']);
    if body.len() - unsigned.len() > 1 {
        return None;
    }
    if unsigned == "NaN" || unsigned == "Infinity" {
        return body.replace("Infinity", "inf").parse().ok();
    }
    let ok = unsigned
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
    if !ok || !unsigned.bytes().any(|b| b.is_ascii_digit()) {
        return None;
    }
    body.parse().ok()
}

impl Transformation for EnforceRecordSize {
    fn apply(&self, record: ConnectRecord) -> Result<Option<ConnectRecord>, TransformError> {
        let (Some(schema), Value::Struct(values)) = (&record.value_schema, &record.value) else {
            return Ok(Some(record));
        };
        let raw = record_size(&record)?;
        let current = ((raw as f64) * self.ratio).ceil() as i64;
        if current <= i64::from(self.max_bytes) {
            return Ok(Some(record));
        }
        let excess = current - i64::from(self.max_bytes);
        let before = self.truncatable(schema, values, "before")?;
        let after = self.truncatable(schema, values, "after")?;
        let sum = |v: &[(usize, i32)]| v.iter().map(|(_, s)| i64::from(*s)).sum::<i64>();
        let (before_bytes, after_bytes) = (sum(&before), sum(&after));
        let total = before_bytes + after_bytes;
        if total <= 0 {
            return Ok(Some(record));
        }
        let share = |b: i64| ((b as f64) / (total as f64) * (excess as f64)).ceil() as i64;
        let mut values = values.clone();
        let schema = Arc::clone(schema);
        truncate(
            &schema,
            &mut values,
            "before",
            &before,
            before_bytes,
            share(before_bytes),
        )?;
        truncate(
            &schema,
            &mut values,
            "after",
            &after,
            after_bytes,
            share(after_bytes),
        )?;
        let mut record = record;
        record.value = Value::Struct(values);
        Ok(Some(record))
    }
}

/// `truncateFields(envelope, name, fields, total, excess)`: each field
/// loses `ceil(size / total * excess)` characters (or bytes).
fn truncate(
    schema: &Schema,
    values: &mut [Value],
    name: &str,
    fields: &[(usize, i32)],
    total: i64,
    excess: i64,
) -> Result<(), TransformError> {
    if fields.is_empty() || total == 0 || excess <= 0 {
        return Ok(());
    }
    let Some(i) = schema.field_index(name) else {
        return Ok(());
    };
    let inner_schema = &schema.fields[i].schema;
    // `envelope.get(name)`: the default when null, then written back.
    let mut inner = match struct_get(schema, values, i) {
        Value::Struct(v) => v.clone(),
        _ => return Ok(()),
    };
    for &(j, size) in fields {
        let proportion = f64::from(size) / total as f64;
        let remove = (proportion * excess as f64).ceil() as i32;
        let new_size = size.wrapping_sub(remove).max(0);
        let current = struct_get(inner_schema, &inner, j).clone();
        if let Some(cut) = cut_value(&current, new_size)? {
            inner[j] = cut;
        }
    }
    values[i] = Value::Struct(inner);
    Ok(())
}

/// `truncateField`: the first `new_size` UTF-16 units of a string (or
/// bytes of a buffer) when it is longer; `None` when it is not.
fn cut_value(v: &Value, new_size: i32) -> Result<Option<Value>, TransformError> {
    let n = usize::try_from(new_size).unwrap_or(0);
    match v {
        Value::String(t) => {
            let s = t.as_str();
            if s.encode_utf16().count() <= n {
                return Ok(None);
            }
            let mut units = 0;
            let mut end = 0;
            for (at, c) in s.char_indices() {
                if units == n {
                    break;
                }
                if units + c.len_utf16() > n {
                    return Err(TransformError::new(
                        "EnforceRecordSize would cut a string inside a surrogate pair, leaving \
                         a lone surrogate walrelay's strings cannot hold",
                    ));
                }
                units += c.len_utf16();
                end = at + c.len_utf8();
            }
            Ok(Some(Value::string(&s[..end])))
        }
        Value::Bytes(b) if b.len() > n => Ok(Some(Value::Bytes(b.slice(..n)))),
        _ => Ok(None),
    }
}

/// `ApproximateStructSizeCalculator.getApproximateRecordSize(record)`.
fn record_size(record: &ConnectRecord) -> Result<i64, TransformError> {
    let headers = i64::try_from(record.headers.len()).unwrap_or(i64::MAX);
    let mut size = SOURCE_ENTRIES * 100 + headers * 100 + 8;
    size += match (&record.key, &record.key_schema) {
        (Value::Null, _) => 0,
        (Value::Struct(v), Some(s)) => struct_size(s, v),
        (other, _) => return Err(class_cast(other, "org.apache.kafka.connect.data.Struct")),
    };
    if let (Value::Struct(v), Some(s)) = (&record.value, &record.value_schema) {
        size += struct_size(s, v);
    }
    Ok(size + record.topic.len() as i64)
}

/// `getStructSize`: every field's reference and value (no defaults).
fn struct_size(schema: &Schema, values: &[Value]) -> i64 {
    let mut size = EMPTY_STRUCT;
    for (i, f) in schema.fields.iter().enumerate() {
        size += REFERENCE + value_size(&f.schema, values.get(i).unwrap_or(&Value::Null));
    }
    size
}

/// `getValueSize(schema, value)`: by the schema's type (a primitive counts
/// even when null; strings by their UTF-8 length).
fn value_size(schema: &Schema, v: &Value) -> i64 {
    let len = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    match (schema.kind, v) {
        (Type::String | Type::Bytes | Type::Struct | Type::Array | Type::Map, Value::Null) => 0,
        (Type::String, Value::String(t)) => EMPTY_STRING + len(t.as_str().len()),
        (Type::Bytes, Value::Bytes(b)) => EMPTY_BYTES + len(b.len()),
        (Type::Bytes, Value::Decimal(d)) => EMPTY_BYTES + len(unscaled_bytes(d).len()),
        (Type::Struct, Value::Struct(vals)) => struct_size(schema, vals),
        (Type::Array, Value::Array(items)) => {
            let item = schema.value_schema.as_deref();
            items.iter().fold(EMPTY_ARRAY, |acc, x| {
                acc + REFERENCE + item.map_or(0, |s| value_size(s, x))
            })
        }
        (Type::Map, Value::Map(entries)) => {
            let (ks, vs) = (schema.key_schema.as_deref(), schema.value_schema.as_deref());
            entries.iter().fold(EMPTY_MAP, |acc, (k, x)| {
                acc + 2 * REFERENCE
                    + ks.map_or(0, |s| value_size(s, k))
                    + vs.map_or(0, |s| value_size(s, x))
            })
        }
        (Type::String | Type::Bytes | Type::Struct | Type::Array | Type::Map, _) => 0,
        _ => EMPTY_PRIMITIVE,
    }
}
