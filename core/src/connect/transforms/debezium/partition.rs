//! Debezium's `PartitionRouting`: on a change envelope (a value schema
//! named `*.Envelope`) it sums the hashes of the configured payload fields
//! and sets the record's partition; every other record — which includes
//! everything the EventRouter emits unless its value schema is renamed to
//! end in `.Envelope` — and tombstones pass unchanged. Owns the options,
//! Java's `Object.hashCode` of Connect values (`String`, boxed numbers,
//! `java.util.Date`, `BigDecimal`, `ByteBuffer`, lists, maps) and the
//! Infinispan MurmurHash3 Debezium calls `murmur`. Pure.

use super::super::util::class_name;
use super::{
    debezium_list, debezium_validate, envelope_struct, is_integer, is_positive_integer,
    is_required, is_valid_envelope, java_split, not_contain_empty_elements, struct_get,
    struct_get_typed, Check, Checked,
};
use crate::connect::convert::java_to_string;
use crate::connect::pg::names::{CONNECT_DATE, CONNECT_TIME, CONNECT_TIMESTAMP};
use crate::connect::transforms::options::{Reader, TransformConfigError};
use crate::connect::transforms::{ConnectRecord, TransformError, Transformation};
use crate::connect::{Decimal, Schema, Type, Value};

/// `partition.hash.function`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HashFunction {
    /// `Object::hashCode`.
    Java,
    /// `MurmurHash3.getInstance()::hash`.
    Murmur,
}

/// `io.debezium.transforms.partitions.PartitionRouting`.
#[derive(Debug)]
pub(super) struct PartitionRouting {
    /// `partition.payload.fields`.
    payload_fields: Vec<String>,
    /// `partition.topic.num`.
    partitions: i32,
    /// `partition.hash.function`.
    hash: HashFunction,
}

impl PartitionRouting {
    /// `configure(props)`: Connect's `ConfigDef` parses the INT first;
    /// Debezium then validates `partition.topic.num` and
    /// `partition.payload.fields` (that `HashMap` order) on the raw text.
    /// An unknown hash function silently means `java`.
    pub(super) fn configure(opts: &Reader<'_>) -> Result<PartitionRouting, TransformConfigError> {
        // Connect-level parse of the INT option (null default: optional).
        if opts.raw("partition.topic.num").is_some() {
            opts.int("partition.topic.num", None)?;
        }
        // Type validator, then `withValidation(isPositiveInteger).required()`.
        const NUM: &[Check] = &[is_integer, is_required, is_positive_integer];
        const FIELDS: &[Check] = &[is_required, not_contain_empty_elements];
        debezium_validate(
            opts,
            &[
                Checked {
                    name: "partition.topic.num",
                    checks: NUM,
                },
                Checked {
                    name: "partition.payload.fields",
                    checks: FIELDS,
                },
            ],
        )?;
        let partitions = opts
            .raw("partition.topic.num")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        let hash = match opts.raw("partition.hash.function") {
            Some(v) if v.trim().eq_ignore_ascii_case("murmur") => HashFunction::Murmur,
            _ => HashFunction::Java,
        };
        Ok(PartitionRouting {
            payload_fields: debezium_list(opts.raw("partition.payload.fields")),
            partitions,
            hash,
        })
    }

    /// The body of `apply`'s `try`: `Ok(None)` leaves the record as it is.
    fn partition_for(&self, schema: &Schema, values: &[Value]) -> Result<Option<i32>, Failure> {
        let op = operation(schema, values).map_err(|_| Failure::Other)?;
        if matches!(op.as_deref(), Some("t" | "m")) {
            return Ok(None);
        }
        let mut found = Vec::new();
        for name in &self.payload_fields {
            if let Some(v) = field_value(name, schema, values)? {
                found.push(v);
            }
        }
        if found.is_empty() {
            return Ok(None);
        }
        let mut total: i32 = 0;
        for (s, v) in found {
            let h = java_hash(s, v).map_err(Failure::Unhashable)?;
            let h = match self.hash {
                HashFunction::Java => h,
                HashFunction::Murmur => murmur_object(v, h),
            };
            total = total.wrapping_add(h);
        }
        let mut normalized = total & i32::MAX;
        if normalized == i32::MAX {
            normalized = 0;
        }
        Ok(Some(normalized % self.partitions))
    }
}

/// Why the `try` block of `apply` failed.
enum Failure {
    /// An exception `apply` wraps as "Unprocessable message".
    Other,
    /// A value whose Java hash walrelay cannot reproduce.
    Unhashable(String),
}

impl Transformation for PartitionRouting {
    fn apply(&self, mut record: ConnectRecord) -> Result<Option<ConnectRecord>, TransformError> {
        if record.value.is_null() || !is_valid_envelope(&record) {
            return Ok(Some(record));
        }
        let (schema, values) = envelope_struct(&record)?;
        match self.partition_for(schema, values) {
            Ok(None) => Ok(Some(record)),
            Ok(Some(p)) => {
                record.partition = Some(p);
                Ok(Some(record))
            }
            Err(Failure::Unhashable(why)) => Err(TransformError::new(why)),
            Err(Failure::Other) => Err(unprocessable(schema, values)),
        }
    }
}

/// `DebeziumException(String.format("Unprocessable message %s", envelope))`.
fn unprocessable(schema: &std::sync::Arc<Schema>, values: &[Value]) -> TransformError {
    let mut text = String::new();
    let value = Value::Struct(values.to_vec());
    match java_to_string(&mut text, Some(schema), &value) {
        Ok(()) => TransformError::new(format!("Unprocessable message {text}")),
        Err(_) => TransformError::new(
            "Unprocessable message (an envelope holding bytes, whose Java toString walrelay \
             does not reproduce)",
        ),
    }
}

/// `Envelope.operationFor(record)`'s code: `op` when the envelope has
/// that field (`getString`: a non-STRING `op` throws), lower-cased.
fn operation(schema: &Schema, values: &[Value]) -> Result<Option<String>, TransformError> {
    if schema.field_index("op").is_none() {
        return Ok(None);
    }
    let (_, v) = struct_get_typed(schema, values, "op", Type::String)?;
    Ok(match v {
        Value::String(t) => Some(t.as_str().to_lowercase()),
        _ => None,
    })
}

/// `toValue(fieldName, envelope)`: the (schema, value) of a dotted path,
/// `None` when a `DataException` says it is not there or it is null; a
/// null intermediate struct (`NullPointerException`) or an empty path
/// (`ArrayIndexOutOfBoundsException`) fails the record.
fn field_value<'a>(
    name: &str,
    schema: &'a Schema,
    values: &'a [Value],
) -> Result<Option<(Option<&'a Schema>, &'a Value)>, Failure> {
    let parts: Vec<&str> = java_split(name, '.').into_iter().map(str::trim).collect();
    let Some((last, path)) = parts.split_last() else {
        return Err(Failure::Other);
    };
    let (mut s, mut vals) = (schema, values);
    for part in path {
        let step = if *part == "change" {
            match operation_for_change(schema, values) {
                Ok(n) => n,
                Err(_) => return Ok(None),
            }
        } else {
            part
        };
        match struct_get_typed(s, vals, step, Type::Struct) {
            Ok((fs, Value::Struct(v))) => (s, vals) = (fs, v),
            Ok(_) => return Err(Failure::Other),
            Err(_) => return Ok(None),
        }
    }
    match struct_get(s, vals, last) {
        Ok(Value::Null) | Err(_) => Ok(None),
        Ok(v) => {
            let i = s.field_index(last).unwrap_or_default();
            Ok(Some((s.fields.get(i).map(|f| &*f.schema), v)))
        }
    }
}

/// `getFieldName` for `change`: `before` for a delete (`op` `d`), else
/// `after` (`envelope.getString("op")` throws when `op` is missing or not
/// a STRING).
fn operation_for_change(schema: &Schema, values: &[Value]) -> Result<&'static str, TransformError> {
    let (_, v) = struct_get_typed(schema, values, "op", Type::String)?;
    Ok(match v {
        Value::String(t) if t.as_str().to_lowercase() == "d" => "before",
        _ => "after",
    })
}

/// A value whose hash Java derives from identity hash codes.
fn unhashable(what: &str) -> String {
    format!(
        "walrelay cannot reproduce PartitionRouting's hash of {what}: Java's hashCode of it \
         depends on identity hash codes that change with every JVM"
    )
}

/// Java's `hashCode()` of the object Connect holds for `v` of `schema`.
fn java_hash(schema: Option<&Schema>, v: &Value) -> Result<i32, String> {
    let name = schema.and_then(|s| s.name.as_deref());
    let date_millis = match (name, v) {
        (Some(CONNECT_DATE), Value::Int32(d)) => Some(i64::from(*d) * 86_400_000),
        (Some(CONNECT_TIME), Value::Int32(ms)) => Some(i64::from(*ms)),
        (Some(CONNECT_TIMESTAMP), Value::Int64(ms)) => Some(*ms),
        _ => None,
    };
    if let Some(ms) = date_millis {
        return Ok(long_hash(ms));
    }
    Ok(match v {
        // Debezium's byte values are ByteBuffers: hashed by content.
        Value::Bytes(b) => b.iter().rev().fold(1i32, |h, x| {
            h.wrapping_mul(31).wrapping_add(i32::from(*x as i8))
        }),
        Value::Decimal(d) => big_decimal_hash(d),
        Value::Array(items) => {
            let item_schema = schema.and_then(|s| s.value_schema.as_deref());
            let mut h = 1i32;
            for i in items {
                h = h.wrapping_mul(31).wrapping_add(java_hash(item_schema, i)?);
            }
            h
        }
        Value::Map(entries) => {
            let ks = schema.and_then(|s| s.key_schema.as_deref());
            let vs = schema.and_then(|s| s.value_schema.as_deref());
            let mut h = 0i32;
            for (k, x) in entries {
                h = h.wrapping_add(java_hash(ks, k)? ^ java_hash(vs, x)?);
            }
            h
        }
        Value::Struct(_) => return Err(unhashable(class_name(v))),
        // Scalars hash as `Object.hashCode` does everywhere.
        scalar => crate::connect::java::java_hash_code(scalar).unwrap_or(0),
    })
}

/// `Long.hashCode` (and `Date.hashCode` of its milliseconds).
fn long_hash(v: i64) -> i32 {
    (v ^ ((v as u64) >> 32) as i64) as i32
}

/// `BigDecimal.hashCode()`: `31 * unscaledValue.hashCode() + scale`, where
/// `BigInteger.hashCode` folds the big-endian 32-bit words of the
/// magnitude (`h = 31*h + word`) and multiplies by the sign.
fn big_decimal_hash(d: &Decimal) -> i32 {
    let mut words: Vec<u32> = Vec::new(); // little-endian base 2^32
    for c in d.digits.bytes() {
        let mut carry = u64::from(c.wrapping_sub(b'0'));
        for w in &mut words {
            let x = u64::from(*w) * 10 + carry;
            *w = x as u32;
            carry = x >> 32;
        }
        if carry > 0 {
            words.push(carry as u32);
        }
    }
    while words.last() == Some(&0) {
        words.pop();
    }
    let magnitude = words
        .iter()
        .rev()
        .fold(0i32, |h, w| h.wrapping_mul(31).wrapping_add(*w as i32));
    let signum = if words.is_empty() {
        0
    } else if d.negative {
        -1
    } else {
        1
    };
    magnitude
        .wrapping_mul(signum)
        .wrapping_mul(31)
        .wrapping_add(d.scale)
}

/// `MurmurHash3.hash(Object)`: a `String` by its UTF-8 bytes, anything
/// else (Debezium's `ByteBuffer`s included: they are not `byte[]`) by its
/// `hashCode()`'s four little-endian bytes.
fn murmur_object(v: &Value, java_hash: i32) -> i32 {
    let h = match v {
        Value::String(t) => murmur3_x64_64(t.as_str().as_bytes(), 9001),
        _ => murmur3_x64_64(&java_hash.to_le_bytes(), 9001),
    };
    (h >> 32) as i32
}

/// MurmurHash3 x64 state (Infinispan's variant: mixing constants that
/// change per block).
struct Murmur {
    /// First hash word.
    h1: u64,
    /// Second hash word.
    h2: u64,
    /// First block word.
    k1: u64,
    /// Second block word.
    k2: u64,
    /// First mixing constant.
    c1: u64,
    /// Second mixing constant.
    c2: u64,
}

impl Murmur {
    /// `bmix(state)`.
    fn bmix(&mut self) {
        self.k1 = self
            .k1
            .wrapping_mul(self.c1)
            .rotate_left(23)
            .wrapping_mul(self.c2);
        self.h1 ^= self.k1;
        self.h1 = self.h1.wrapping_add(self.h2);
        self.h2 = self.h2.rotate_left(41);
        self.k2 = self
            .k2
            .wrapping_mul(self.c2)
            .rotate_left(23)
            .wrapping_mul(self.c1);
        self.h2 ^= self.k2;
        self.h2 = self.h2.wrapping_add(self.h1);
        self.h1 = self.h1.wrapping_mul(3).wrapping_add(0x52dc_e729);
        self.h2 = self.h2.wrapping_mul(3).wrapping_add(0x3849_5ab5);
        self.c1 = self.c1.wrapping_mul(5).wrapping_add(0x7b7d_159c);
        self.c2 = self.c2.wrapping_mul(5).wrapping_add(0x6bce_6396);
    }
}

/// `fmix(k)`.
fn fmix(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// `MurmurHash3_x64_64(byte[] key, seed)`, tail bytes sign-extended as
/// Java's `(long) key[i] << n` does.
fn murmur3_x64_64(key: &[u8], seed: i64) -> i64 {
    let mut s = Murmur {
        h1: 0x9368_e53c_2f6a_f274 ^ seed as u64,
        h2: 0x586d_cd20_8f7c_d3fd ^ seed as u64,
        k1: 0,
        k2: 0,
        c1: 0x87c3_7b91_1142_53d5,
        c2: 0x4cf5_ad43_2745_937f,
    };
    let block = |b: &[u8]| {
        b.iter()
            .rev()
            .fold(0u64, |acc, x| (acc << 8) | u64::from(*x))
    };
    let blocks = key.len() / 16;
    for i in 0..blocks {
        s.k1 = block(&key[i * 16..i * 16 + 8]);
        s.k2 = block(&key[i * 16 + 8..i * 16 + 16]);
        s.bmix();
    }
    s.k1 = 0;
    s.k2 = 0;
    let tail = &key[blocks * 16..];
    let signed = |i: usize, shift: u32| ((tail[i] as i8 as i64) << shift) as u64;
    for i in (8..tail.len()).rev() {
        s.k2 ^= signed(i, 8 * (i as u32 - 8));
    }
    for i in (0..tail.len().min(8)).rev() {
        s.k1 ^= signed(i, 8 * i as u32);
    }
    if !tail.is_empty() {
        s.bmix();
    }
    s.h2 ^= key.len() as u64;
    s.h1 = s.h1.wrapping_add(s.h2);
    s.h2 = s.h2.wrapping_add(s.h1);
    s.h1 = fmix(s.h1);
    s.h2 = fmix(s.h2);
    s.h1 = s.h1.wrapping_add(s.h2);
    s.h1 as i64
}

/// Debezium's `MurmurHash3.hash(byte[])` (seed 9001), for tests.
#[cfg(test)]
pub(super) fn test_murmur(key: &[u8]) -> i32 {
    (murmur3_x64_64(key, 9001) >> 32) as i32
}

/// Java's `hashCode()` of a Connect value, for tests.
#[cfg(test)]
pub(super) fn test_java_hash(schema: Option<&Schema>, v: &Value) -> Result<i32, String> {
    java_hash(schema, v)
}
