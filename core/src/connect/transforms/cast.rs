//! Kafka Connect's `Cast$Key` and `Cast$Value`: the whole key or value,
//! or named top-level fields of a struct or schemaless map, cast to a
//! primitive type, with the output schema Kafka 4.1.1 builds (the source
//! schema's name, version, doc and parameters kept, defaults cast too)
//! and Kafka's `DataException` messages for what it refuses.
//!
//! Also owns Java's `String` → number parsing rules that `Cast` relies on
//! and the `new HashMap<>(map)` + `put` ordering both this module and
//! `TimestampConverter` need for schemaless maps. Pure: never does I/O.

use std::sync::Arc;

use super::options::{Reader, TransformConfigError};
use super::timestamp::java_date_format::JavaDateFormat;
use super::util::{
    boxed, class_name, copy_capacity, copy_schema_basics_onto, field_value, java_hash_map, map_get,
    require_map, require_struct, validate_value,
};
use super::{Built, ConnectRecord, Side, TransformError, Transformation};
use crate::connect::java::{
    base64, big_decimal_to_string, double_to_string, float_to_string, java_hash_map_order,
};
use crate::connect::pg::names;
use crate::connect::{Decimal, Field, Schema, Type, Value};

/// `Cast$Key`.
const KEY: &str = "org.apache.kafka.connect.transforms.Cast$Key";
/// `Cast$Value`.
const VALUE: &str = "org.apache.kafka.connect.transforms.Cast$Value";

/// The classes this module builds.
pub(super) const CLASSES: &[&str] = &[KEY, VALUE];

/// The purpose `Requirements` names in its messages.
const PURPOSE: &str = "cast types";

/// `SUPPORTED_CAST_INPUT_TYPES` as its `EnumSet` prints.
const INPUT_TYPES: &str = "[INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES]";
/// `SUPPORTED_CAST_OUTPUT_TYPES` as its `EnumSet` prints.
const OUTPUT_TYPES: &str = "[INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING]";

/// Builds the transform of `class`, if it is one of [`CLASSES`].
pub(super) fn build(class: &str, opts: &Reader<'_>) -> Option<Built> {
    let side = match class {
        KEY => Side::Key,
        VALUE => Side::Value,
        _ => return None,
    };
    Some(configure(side, opts).map(boxed))
}

/// What `spec` asks for.
#[derive(Debug, Clone, PartialEq)]
enum Spec {
    /// A single type: the whole key or value is cast.
    Whole(Type),
    /// Field casts, in the iteration order of Kafka's `HashMap` of them
    /// (the order schemaless maps are cast in, so the first failure is
    /// the one Kafka reports).
    Fields(Vec<(String, Type)>),
}

/// A configured `Cast`.
#[derive(Debug)]
struct Cast {
    side: Side,
    spec: Spec,
    /// `replace.null.with.default`: read a null struct field as its
    /// schema default (`Struct.get`) or as null (`getWithoutDefault`).
    replace_null_with_default: bool,
}

/// Reads `spec` and `replace.null.with.default` in `ConfigDef` order.
fn configure(side: Side, opts: &Reader<'_>) -> Result<Cast, TransformConfigError> {
    let mappings = opts.list("spec", None)?;
    let raw = opts.raw("spec").unwrap_or_default().to_owned();
    if mappings.is_empty() {
        return Err(TransformConfigError::invalid(
            "spec",
            &raw,
            "Must specify at least one field to cast.",
        ));
    }
    let spec = parse_spec(&mappings)
        .map_err(|reason| TransformConfigError::invalid("spec", &raw, reason))?;
    let replace_null_with_default = opts.boolean("replace.null.with.default", true)?;
    Ok(Cast {
        side,
        spec,
        replace_null_with_default,
    })
}

/// Java's `String.split(":")`: no separator gives the text itself,
/// otherwise trailing empty parts are dropped.
fn java_split_colon(s: &str) -> Vec<&str> {
    if !s.contains(':') {
        return vec![s];
    }
    let mut parts: Vec<&str> = s.split(':').collect();
    while parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    parts
}

/// `Cast.parseFieldTypes`: the `ConfigException` message on failure.
fn parse_spec(mappings: &[String]) -> Result<Spec, String> {
    let mut fields: Vec<(String, Type)> = Vec::new();
    let mut whole = None;
    for mapping in mappings {
        let parts = java_split_colon(mapping);
        match parts.as_slice() {
            [] => {}
            [ty] => whole = Some(output_type(ty.trim())?),
            [field, ty] => {
                let ty = output_type(ty.trim())?;
                let field = field.trim().to_owned();
                match fields.iter_mut().find(|(f, _)| *f == field) {
                    Some(slot) => slot.1 = ty,
                    None => fields.push((field, ty)),
                }
            }
            _ => return Err(format!("Invalid rename mapping: {mapping}")),
        }
    }
    match whole {
        Some(_) if mappings.len() > 1 => Err("Cast transformations that specify a type to cast the entire value to may only specify a single cast in their spec".to_owned()),
        Some(ty) => Ok(Spec::Whole(ty)),
        None => Ok(Spec::Fields(java_hash_map_order(fields))),
    }
}

/// `Schema.Type.valueOf(name.toUpperCase())` checked against the output
/// types.
fn output_type(name: &str) -> Result<Type, String> {
    let ty = match name.to_uppercase().as_str() {
        "INT8" => Type::Int8,
        "INT16" => Type::Int16,
        "INT32" => Type::Int32,
        "INT64" => Type::Int64,
        "FLOAT32" => Type::Float32,
        "FLOAT64" => Type::Float64,
        "BOOLEAN" => Type::Boolean,
        "STRING" => Type::String,
        "BYTES" => Type::Bytes,
        "ARRAY" => Type::Array,
        "MAP" => Type::Map,
        "STRUCT" => Type::Struct,
        _ => return Err(format!("Invalid type found in casting spec: {name}")),
    };
    if matches!(ty, Type::Bytes | Type::Array | Type::Map | Type::Struct) {
        return Err(format!(
            "Cast transformation does not support casting to {}; supported types are {OUTPUT_TYPES}",
            ty.java_name()
        ));
    }
    Ok(ty)
}

impl Transformation for Cast {
    fn apply(&self, mut record: ConnectRecord) -> Result<Option<ConnectRecord>, TransformError> {
        if self.side.value(&record).is_null() {
            return Ok(Some(record));
        }
        let (schema, value) = self.side.take(&mut record);
        let (schema, value) = match schema {
            None => (None, self.apply_schemaless(&value)?),
            Some(s) => {
                let (s, v) = self.apply_with_schema(&s, &value)?;
                (Some(s), v)
            }
        };
        self.side.set(&mut record, schema, value);
        Ok(Some(record))
    }
}

impl Cast {
    /// The target type of the field called `name`, if `spec` casts it.
    fn target(&self, name: &str) -> Option<Type> {
        match &self.spec {
            Spec::Whole(_) => None,
            Spec::Fields(f) => f.iter().find(|(n, _)| n == name).map(|(_, t)| *t),
        }
    }

    /// `applySchemaless`.
    fn apply_schemaless(&self, value: &Value) -> Result<Value, TransformError> {
        let casts = match &self.spec {
            Spec::Whole(ty) => return cast_value(None, value, *ty),
            Spec::Fields(casts) => casts,
        };
        let entries = require_map(value, PURPOSE)?;
        let mut out = entries.to_vec();
        for (field, ty) in casts {
            let cast = cast_value(None, map_get(entries, field), *ty)?;
            out.push((Value::string(field.as_str()), cast));
        }
        java_hash_map(out, copy_capacity(entries.len())).map(Value::Map)
    }

    /// `applyWithSchema`.
    fn apply_with_schema(
        &self,
        schema: &Arc<Schema>,
        value: &Value,
    ) -> Result<(Arc<Schema>, Value), TransformError> {
        let updated = self.build_schema(schema)?;
        if let Spec::Whole(ty) = self.spec {
            return Ok((updated, cast_value(Some(schema), value, ty)?));
        }
        let values = require_struct(value, PURPOSE)?;
        let mut out = Vec::with_capacity(schema.fields.len());
        for (i, field) in schema.fields.iter().enumerate() {
            let orig = field_value(schema, values, i, self.replace_null_with_default);
            let new = match self.target(&field.name) {
                Some(ty) => cast_value(Some(&field.schema), orig, ty)?,
                None => orig.clone(),
            };
            if let Some(f) = updated.fields.get(i) {
                validate_value(Some(&f.name), &f.schema, &new)?;
            }
            out.push(new);
        }
        Ok((updated, Value::Struct(out)))
    }

    /// `getOrBuildSchema`.
    fn build_schema(&self, schema: &Schema) -> Result<Arc<Schema>, TransformError> {
        let mut builder = match &self.spec {
            Spec::Whole(ty) => copy_schema_basics_onto(schema, *ty),
            Spec::Fields(_) => self.struct_builder(schema)?,
        };
        if schema.optional {
            builder.optional = true;
        }
        if let Some(default) = &schema.default {
            let cast = cast_value(Some(schema), default, builder.kind)?;
            check_default(&builder)?;
            builder.default = Some(cast);
        }
        Ok(Arc::new(builder))
    }

    /// The struct part of `getOrBuildSchema`: cast fields get a plain
    /// schema of their target type, optional as before, default cast.
    fn struct_builder(&self, schema: &Schema) -> Result<Schema, TransformError> {
        if schema.kind != Type::Struct {
            return Err(TransformError::new("Cannot list fields on non-struct type"));
        }
        let mut builder = copy_schema_basics_onto(schema, Type::Struct);
        for field in &schema.fields {
            let Some(ty) = self.target(&field.name) else {
                builder.fields.push(field.clone());
                continue;
            };
            let mut fs = Schema::new(ty);
            fs.optional = field.schema.optional;
            if let Some(default) = &field.schema.default {
                fs.default = Some(cast_value(Some(&field.schema), default, ty)?);
            }
            builder.fields.push(Field {
                name: field.name.clone(),
                schema: Arc::new(fs),
            });
        }
        Ok(builder)
    }
}

/// `SchemaBuilder.defaultValue`'s validation of a cast default: a schema
/// named Decimal, Date, Time or Timestamp expects a `BigDecimal` or a
/// `java.util.Date`, which no cast produces.
fn check_default(builder: &Schema) -> Result<(), TransformError> {
    let logical = matches!(
        builder.name.as_deref(),
        Some(
            crate::connect::DECIMAL_NAME
                | names::CONNECT_DATE
                | names::CONNECT_TIME
                | names::CONNECT_TIMESTAMP
        )
    );
    if logical {
        return Err(TransformError::new("Invalid default value"));
    }
    Ok(())
}

/// `ConnectSchema.schemaType(value.getClass())` for a schemaless value.
fn schemaless_type(value: &Value) -> Result<Type, TransformError> {
    Ok(match value {
        Value::Boolean(_) => Type::Boolean,
        Value::Int8(_) => Type::Int8,
        Value::Int16(_) => Type::Int16,
        Value::Int32(_) => Type::Int32,
        Value::Int64(_) => Type::Int64,
        Value::Float32(_) => Type::Float32,
        Value::Float64(_) => Type::Float64,
        Value::String(_) => Type::String,
        Value::Bytes(_) => Type::Bytes,
        Value::Array(_) => Type::Array,
        Value::Map(_) => Type::Map,
        Value::Struct(_) => Type::Struct,
        Value::Null | Value::Decimal(_) => {
            return Err(TransformError::new(format!(
                "Cast transformation was passed a value of type class {} which is not supported by Connect's data API",
                class_name(value)
            )))
        }
    })
}

/// `Cast.castValueToType`: `schema` is the value's schema (none for a
/// schemaless value).
fn cast_value(
    schema: Option<&Schema>,
    value: &Value,
    target: Type,
) -> Result<Value, TransformError> {
    if value.is_null() {
        return Ok(Value::Null);
    }
    let inferred = match schema {
        Some(s) => s.kind,
        None => schemaless_type(value)?,
    };
    if matches!(inferred, Type::Array | Type::Map | Type::Struct) {
        return Err(TransformError::new(format!(
            "Cast transformation does not support casting from {}; supported types are {INPUT_TYPES}",
            inferred.java_name()
        )));
    }
    let logical = schema.and_then(|s| s.name.as_deref());
    if target == Type::String {
        // A Date, Time or Timestamp value is a java.util.Date here, which
        // `Values.dateFormatFor` renders.
        if let Some(text) = date_text(logical, value) {
            return Ok(Value::string(text));
        }
        return to_string(value).map(Value::string);
    }
    if logical == Some(names::CONNECT_TIME) {
        // `Time.fromLogical`'s check of the java.util.Date.
        if let Value::Int32(ms) = value {
            if *ms < 0 || *ms > 86_400_000 {
                return Err(TransformError::new(
                    "Kafka Connect Time type should not have any date fields set to non-zero values.",
                ));
            }
        }
    }
    cast_to(value, target)
}

/// `Values.dateFormatFor(date).format(date)` of a Date, Time or
/// Timestamp value (Julian before 1582-10-15, as `SimpleDateFormat`);
/// `None` for any other value.
fn date_text(logical: Option<&str>, value: &Value) -> Option<String> {
    let millis = match (logical?, value) {
        (names::CONNECT_DATE, Value::Int32(days)) => i64::from(*days) * 86_400_000,
        (names::CONNECT_TIME, Value::Int32(ms)) => i64::from(*ms),
        (names::CONNECT_TIMESTAMP, Value::Int64(ms)) => *ms,
        _ => return None,
    };
    let pattern = if millis < 86_400_000 {
        "HH:mm:ss.SSS'Z'"
    } else if millis % 86_400_000 == 0 {
        "yyyy-MM-dd"
    } else {
        "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"
    };
    JavaDateFormat::compile(pattern)
        .ok()
        .map(|f| f.format(millis))
}

/// The numeric and boolean casts (`castToInt8` ... `castToBoolean`).
fn cast_to(value: &Value, target: Type) -> Result<Value, TransformError> {
    if let Value::String(t) = value {
        return parse_string(t.as_str(), target);
    }
    if let Value::Boolean(b) = value {
        let one = i64::from(*b);
        return Ok(match target {
            Type::Int8 => Value::Int8(one as i8),
            Type::Int16 => Value::Int16(one as i16),
            Type::Int32 => Value::Int32(one as i32),
            Type::Int64 => Value::Int64(one),
            Type::Float32 => Value::Float32(one as f32),
            Type::Float64 => Value::Float64(one as f64),
            _ => Value::Boolean(*b),
        });
    }
    let n = Number::of(value).ok_or_else(|| unexpected(value))?;
    Ok(match target {
        Type::Int8 => Value::Int8(n.int_value() as i8),
        Type::Int16 => Value::Int16(n.int_value() as i16),
        Type::Int32 => Value::Int32(n.int_value()),
        Type::Int64 => Value::Int64(n.long_value()),
        Type::Float32 => Value::Float32(n.float_value()),
        Type::Float64 => Value::Float64(n.double_value()),
        _ => Value::Boolean(n.long_value() != 0),
    })
}

/// `DataException("Unexpected type in Cast transformation: " + value.getClass())`.
fn unexpected(value: &Value) -> TransformError {
    TransformError::new(format!(
        "Unexpected type in Cast transformation: class {}",
        class_name(value)
    ))
}

/// A `java.lang.Number` and its narrowing conversions.
#[derive(Debug, Clone, Copy)]
enum Number<'a> {
    /// `Byte`, `Short`, `Integer` or `Long`.
    Integral(i64),
    /// `Float`.
    Float(f32),
    /// `Double`.
    Double(f64),
    /// `BigDecimal`.
    Big(&'a Decimal),
}

impl<'a> Number<'a> {
    /// The number a value is, if it is one.
    fn of(value: &'a Value) -> Option<Number<'a>> {
        Some(match value {
            Value::Int8(v) => Number::Integral(i64::from(*v)),
            Value::Int16(v) => Number::Integral(i64::from(*v)),
            Value::Int32(v) => Number::Integral(i64::from(*v)),
            Value::Int64(v) => Number::Integral(*v),
            Value::Float32(v) => Number::Float(*v),
            Value::Float64(v) => Number::Double(*v),
            Value::Decimal(d) => Number::Big(d),
            _ => return None,
        })
    }

    /// `intValue()` (`byteValue`/`shortValue` narrow it further): a
    /// float saturates to int, a long and a `BigDecimal` keep low bits.
    fn int_value(self) -> i32 {
        match self {
            Number::Float(f) => f as i32,
            Number::Double(d) => d as i32,
            other => other.long_value() as i32,
        }
    }

    /// `longValue()`.
    fn long_value(self) -> i64 {
        match self {
            Number::Integral(v) => v,
            Number::Float(f) => f as i64,
            Number::Double(d) => d as i64,
            Number::Big(d) => decimal_low_bits(d),
        }
    }

    /// `floatValue()`: correctly rounded.
    fn float_value(self) -> f32 {
        match self {
            Number::Integral(v) => v as f32,
            Number::Float(f) => f,
            Number::Double(d) => d as f32,
            Number::Big(d) => decimal_text(d).parse().unwrap_or(0.0),
        }
    }

    /// `doubleValue()`: correctly rounded.
    fn double_value(self) -> f64 {
        match self {
            Number::Integral(v) => v as f64,
            Number::Float(f) => f64::from(f),
            Number::Double(d) => d,
            Number::Big(d) => decimal_text(d).parse().unwrap_or(0.0),
        }
    }
}

/// A `BigDecimal` as text Rust's float parser reads (`-123e-2`).
fn decimal_text(d: &Decimal) -> String {
    let sign = if d.negative { "-" } else { "" };
    format!("{sign}{}e{}", d.digits, -i64::from(d.scale))
}

/// `BigDecimal.longValue()`: the low 64 bits of the integer part.
fn decimal_low_bits(d: &Decimal) -> i64 {
    let digits = d.digits.as_bytes();
    let scale = i64::from(d.scale);
    let int_len = (digits.len() as i64 - scale).max(0);
    let mut acc: u64 = 0;
    for &b in digits
        .iter()
        .take(int_len.min(digits.len() as i64) as usize)
    {
        acc = acc
            .wrapping_mul(10)
            .wrapping_add(u64::from(b.wrapping_sub(b'0')));
    }
    // A negative scale appends zeros; 10^64 is a multiple of 2^64.
    for _ in 0..(-scale).clamp(0, 64) {
        acc = acc.wrapping_mul(10);
    }
    let v = acc as i64;
    if d.negative {
        v.wrapping_neg()
    } else {
        v
    }
}

/// `castToString`'s `value.toString()` (and Base64 for bytes).
fn to_string(value: &Value) -> Result<String, TransformError> {
    Ok(match value {
        Value::Boolean(b) => b.to_string(),
        Value::Int8(v) => v.to_string(),
        Value::Int16(v) => v.to_string(),
        Value::Int32(v) => v.to_string(),
        Value::Int64(v) => v.to_string(),
        Value::Float32(v) => float_to_string(*v),
        Value::Float64(v) => double_to_string(*v),
        Value::String(t) => t.as_str().to_owned(),
        Value::Decimal(d) => big_decimal_to_string(d),
        Value::Bytes(b) => {
            let mut out = String::new();
            base64(b, &mut out);
            out
        }
        other => {
            return Err(TransformError::new(format!(
                "walrelay cannot render a {} as Java's toString does",
                class_name(other)
            )))
        }
    })
}

/// `Byte.parseByte` ... `Boolean.parseBoolean` of a string value; a
/// `NumberFormatException` becomes Kafka's out-of-range message.
fn parse_string(s: &str, target: Type) -> Result<Value, TransformError> {
    let out_of_range = || {
        TransformError::new(format!(
            "Value ({s}) was out of range for requested data type"
        ))
    };
    if s.chars().any(|c| !c.is_ascii() && c.is_numeric()) {
        return Err(TransformError::new(format!(
            "walrelay does not parse the non-ASCII digits of ({s}) as Java does"
        )));
    }
    let int = |min: i64, max: i64| {
        parse_java_long(s)
            .filter(|v| (min..=max).contains(v))
            .ok_or_else(out_of_range)
    };
    Ok(match target {
        Type::Int8 => Value::Int8(int(i64::from(i8::MIN), i64::from(i8::MAX))? as i8),
        Type::Int16 => Value::Int16(int(i64::from(i16::MIN), i64::from(i16::MAX))? as i16),
        Type::Int32 => Value::Int32(int(i64::from(i32::MIN), i64::from(i32::MAX))? as i32),
        Type::Int64 => Value::Int64(int(i64::MIN, i64::MAX)?),
        Type::Float32 => Value::Float32(
            java_float_text(s)?
                .ok_or_else(out_of_range)?
                .parse()
                .map_err(|_| out_of_range())?,
        ),
        Type::Float64 => Value::Float64(
            java_float_text(s)?
                .ok_or_else(out_of_range)?
                .parse()
                .map_err(|_| out_of_range())?,
        ),
        _ => Value::Boolean(s.eq_ignore_ascii_case("true")),
    })
}

/// `Long.parseLong(s)`: an optional sign, then ASCII digits, no spaces.
fn parse_java_long(s: &str) -> Option<i64> {
    let (negative, digits) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Accumulate negatively so that Long.MIN_VALUE parses.
    let mut acc: i64 = 0;
    for b in digits.bytes() {
        acc = acc.checked_mul(10)?.checked_sub(i64::from(b - b'0'))?;
    }
    if negative {
        Some(acc)
    } else {
        acc.checked_neg()
    }
}

/// `FloatingDecimal.readJavaFormatString`'s grammar: `s` trimmed of
/// characters up to U+0020, then a sign, `NaN`, `Infinity` or a decimal
/// with optional exponent and an `f`/`d` suffix. Returns the text Rust's
/// parser reads the same way, `None` where Java throws
/// `NumberFormatException`, and an error for hexadecimal floats.
fn java_float_text(s: &str) -> Result<Option<String>, TransformError> {
    let t = s.trim_matches(|c: char| c <= ' ');
    let (sign, body) = match t.as_bytes().first() {
        Some(b'-') => ("-", &t[1..]),
        Some(b'+') => ("", &t[1..]),
        _ => ("", t),
    };
    match body {
        "NaN" => return Ok(Some("NaN".to_owned())),
        "Infinity" => return Ok(Some(format!("{sign}inf"))),
        _ => {}
    }
    if body.starts_with("0x") || body.starts_with("0X") {
        return Err(TransformError::new(format!(
            "walrelay does not parse hexadecimal floating-point text ({s})"
        )));
    }
    let body = body.strip_suffix(['f', 'F', 'd', 'D']).unwrap_or(body);
    Ok(is_java_decimal(body).then(|| format!("{sign}{body}")))
}

/// Digits with at most one point (at least one digit), then an optional
/// exponent with at least one digit.
fn is_java_decimal(s: &str) -> bool {
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |x: &str| x.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || !digits(frac) || int.len() + frac.len() == 0 {
        return false;
    }
    match exponent {
        None => true,
        Some(e) => {
            let e = e.strip_prefix(['+', '-']).unwrap_or(e);
            !e.is_empty() && digits(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::options::Options;
    use super::*;
    use crate::connect::java::java_hash_map_order_sized;
    use bytes::Bytes;

    fn cast(
        class: &str,
        opts: &[(&str, &str)],
    ) -> Result<Box<dyn Transformation>, TransformConfigError> {
        let o: Options = opts.iter().copied().collect();
        build(class, &o.reader()).expect("a Cast class")
    }

    fn record(schema: Option<Schema>, value: Value) -> ConnectRecord {
        ConnectRecord {
            topic: Arc::from("t"),
            partition: None,
            key_schema: schema.clone().map(Arc::new),
            key: value.clone(),
            value_schema: schema.map(Arc::new),
            value,
            timestamp: Some(0),
            headers: Vec::new(),
        }
    }

    fn apply_value(
        spec: &str,
        schema: Option<Schema>,
        value: Value,
    ) -> Result<(Option<Arc<Schema>>, Value), TransformError> {
        let t = cast(VALUE, &[("spec", spec)]).unwrap();
        let r = t.apply(record(schema, value))?.unwrap();
        Ok((r.value_schema, r.value))
    }

    fn field(name: &str, schema: Schema) -> Field {
        Field {
            name: Arc::from(name),
            schema: Arc::new(schema),
        }
    }

    fn dec(negative: bool, digits: &str, scale: i32) -> Decimal {
        Decimal {
            negative,
            digits: digits.into(),
            scale,
        }
    }

    fn decimal_schema(scale: &str) -> Schema {
        Schema::new(Type::Bytes)
            .named(crate::connect::DECIMAL_NAME, Some(1))
            .with_parameter("scale", scale)
    }

    fn cfg_err(opts: &[(&str, &str)]) -> String {
        match cast(VALUE, opts) {
            Err(TransformConfigError::Invalid { key, reason, .. }) => format!("{key}: {reason}"),
            other => panic!("expected an invalid option, got {other:?}"),
        }
    }

    #[test]
    fn spec_is_parsed_and_refused_as_connect_does() {
        assert!(build("x.Other", &Options::default().reader()).is_none());
        assert!(
            matches!(cast(KEY, &[]), Err(TransformConfigError::Missing { key }) if key == "spec")
        );
        assert_eq!(
            cfg_err(&[("spec", "")]),
            "spec: Must specify at least one field to cast."
        );
        assert_eq!(cfg_err(&[("spec", "a:bytes")]), "spec: Cast transformation does not support casting to BYTES; supported types are [INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING]");
        assert_eq!(
            cfg_err(&[("spec", "a:text")]),
            "spec: Invalid type found in casting spec: text"
        );
        assert_eq!(
            cfg_err(&[("spec", "a:b:int8")]),
            "spec: Invalid rename mapping: a:b:int8"
        );
        assert_eq!(cfg_err(&[("spec", "int8,a:int16")]), "spec: Cast transformations that specify a type to cast the entire value to may only specify a single cast in their spec");
        // "a:" splits to ["a"]: a whole-value cast to the type "a".
        assert_eq!(
            cfg_err(&[("spec", "a:")]),
            "spec: Invalid type found in casting spec: a"
        );
        assert_eq!(
            cfg_err(&[("spec", "int8"), ("replace.null.with.default", "maybe")]),
            "replace.null.with.default: Expected value to be either true or false"
        );
        let c = configure(
            Side::Value,
            &[("spec", " a : Int64 , b:STRING,a:int8 ")]
                .into_iter()
                .collect::<Options>()
                .reader(),
        )
        .unwrap();
        assert_eq!(
            c.target("a"),
            Some(Type::Int8),
            "a later cast of a field replaces the earlier"
        );
        assert_eq!(c.target("b"), Some(Type::String));
        assert!(c.replace_null_with_default);
        // ":" splits to nothing: ignored, leaving a field cast of nothing.
        let c = configure(
            Side::Value,
            &[("spec", ":")].into_iter().collect::<Options>().reader(),
        )
        .unwrap();
        assert_eq!(c.spec, Spec::Fields(Vec::new()));
    }

    #[test]
    fn whole_value_casts_between_primitives() {
        let s = |t| Some(Schema::new(t));
        let ok = |spec: &str, schema, v| apply_value(spec, schema, v).unwrap().1;
        assert_eq!(
            ok("int8", s(Type::Int32), Value::Int32(300)),
            Value::Int8(44)
        );
        assert_eq!(
            ok("int16", s(Type::Int64), Value::Int64(70_000)),
            Value::Int16(4464)
        );
        assert_eq!(
            ok("int32", s(Type::Float64), Value::Float64(1e12)),
            Value::Int32(i32::MAX)
        );
        // (byte)(int)3e9f: the float saturates to int first, then wraps.
        assert_eq!(
            ok("int8", s(Type::Float32), Value::Float32(3e9)),
            Value::Int8(-1)
        );
        assert_eq!(
            ok("int64", s(Type::Float64), Value::Float64(f64::NAN)),
            Value::Int64(0)
        );
        assert_eq!(
            ok("float32", s(Type::Float64), Value::Float64(0.1)),
            Value::Float32(0.1)
        );
        assert_eq!(
            ok("float64", s(Type::Float32), Value::Float32(0.1)),
            Value::Float64(f64::from(0.1f32))
        );
        assert_eq!(
            ok("boolean", s(Type::Float64), Value::Float64(0.5)),
            Value::Boolean(false),
            "longValue() of 0.5 is 0"
        );
        assert_eq!(
            ok("boolean", s(Type::Int8), Value::Int8(-3)),
            Value::Boolean(true)
        );
        assert_eq!(
            ok("int16", s(Type::Boolean), Value::Boolean(true)),
            Value::Int16(1)
        );
        assert_eq!(
            ok("float64", s(Type::Boolean), Value::Boolean(false)),
            Value::Float64(0.0)
        );
        assert_eq!(
            ok("string", s(Type::Float64), Value::Float64(1e7)),
            Value::string("1.0E7")
        );
        assert_eq!(
            ok("string", s(Type::Float32), Value::Float32(1.5)),
            Value::string("1.5")
        );
        assert_eq!(
            ok("string", s(Type::Boolean), Value::Boolean(true)),
            Value::string("true")
        );
        assert_eq!(
            ok(
                "string",
                s(Type::Bytes),
                Value::Bytes(Bytes::from_static(b"hi!"))
            ),
            Value::string("aGkh")
        );
        assert_eq!(ok("string", None, Value::Int64(-5)), Value::string("-5"));
    }

    #[test]
    fn strings_parse_with_java_rules() {
        let ok = |spec: &str, s: &str| apply_value(spec, None, Value::string(s)).unwrap().1;
        let err = |spec: &str, s: &str| {
            apply_value(spec, None, Value::string(s))
                .unwrap_err()
                .message
        };
        assert_eq!(ok("int8", "-128"), Value::Int8(-128));
        assert_eq!(
            err("int8", "128"),
            "Value (128) was out of range for requested data type"
        );
        assert_eq!(
            err("int32", " 1"),
            "Value ( 1) was out of range for requested data type"
        );
        assert_eq!(
            err("int32", "+"),
            "Value (+) was out of range for requested data type"
        );
        assert_eq!(ok("int32", "+42"), Value::Int32(42));
        assert_eq!(ok("int64", "-9223372036854775808"), Value::Int64(i64::MIN));
        assert_eq!(
            err("int64", "9223372036854775808"),
            "Value (9223372036854775808) was out of range for requested data type"
        );
        assert_eq!(
            err("int16", "abc"),
            "Value (abc) was out of range for requested data type"
        );
        // Float.parseFloat trims and takes a type suffix.
        assert_eq!(ok("float32", " 1.5f "), Value::Float32(1.5));
        assert_eq!(
            ok("float64", "-Infinity"),
            Value::Float64(f64::NEG_INFINITY)
        );
        assert_eq!(ok("float64", ".5e1"), Value::Float64(5.0));
        assert!(matches!(ok("float64", "NaN"), Value::Float64(v) if v.is_nan()));
        assert_eq!(
            err("float64", "inf"),
            "Value (inf) was out of range for requested data type"
        );
        assert_eq!(
            err("float64", "1e"),
            "Value (1e) was out of range for requested data type"
        );
        assert!(err("float64", "0x1p3").contains("hexadecimal"));
        assert!(err("int32", "١").contains("non-ASCII digits"));
        assert_eq!(ok("boolean", "TRUE"), Value::Boolean(true));
        assert_eq!(ok("boolean", "yes"), Value::Boolean(false));
    }

    #[test]
    fn decimals_cast_as_big_decimal_does() {
        let s = decimal_schema("2");
        let v = Value::Decimal(dec(true, "12345", 2));
        let (schema, out) = apply_value("string", Some(s.clone()), v.clone()).unwrap();
        assert_eq!(out, Value::string("-123.45"));
        // copySchemaBasics keeps the Decimal name and scale on the string schema.
        let schema = schema.unwrap();
        assert_eq!(
            (schema.kind, schema.name.as_deref()),
            (Type::String, Some(crate::connect::DECIMAL_NAME))
        );
        assert_eq!(schema.decimal_scale(), Some(2));
        assert_eq!(
            apply_value("int32", Some(s.clone()), v.clone()).unwrap().1,
            Value::Int32(-123)
        );
        assert_eq!(
            apply_value("float64", Some(s.clone()), v.clone())
                .unwrap()
                .1,
            Value::Float64(-123.45)
        );
        assert_eq!(
            apply_value("float32", Some(s.clone()), v).unwrap().1,
            Value::Float32(-123.45)
        );
        // 2^64 + 5: longValue keeps the low 64 bits; intValue of those.
        let big = Value::Decimal(dec(false, "18446744073709551621", 0));
        assert_eq!(
            apply_value("int64", Some(s.clone()), big.clone())
                .unwrap()
                .1,
            Value::Int64(5)
        );
        assert_eq!(
            apply_value(
                "boolean",
                Some(s.clone()),
                Value::Decimal(dec(false, "1", -64))
            )
            .unwrap()
            .1,
            Value::Boolean(false)
        );
        assert_eq!(decimal_low_bits(&dec(false, "3", -2)), 300);
        assert_eq!(decimal_low_bits(&dec(false, "999", 5)), 0);
        // Schemaless BigDecimal has no Connect type.
        assert_eq!(apply_value("int32", None, big).unwrap_err().message, "Cast transformation was passed a value of type class java.math.BigDecimal which is not supported by Connect's data API");
    }

    #[test]
    fn dates_cast_to_strings_and_numbers() {
        let date = Schema::new(Type::Int32).named(names::CONNECT_DATE, Some(1));
        let time = Schema::new(Type::Int32).named(names::CONNECT_TIME, Some(1));
        let ts = Schema::new(Type::Int64).named(names::CONNECT_TIMESTAMP, Some(1));
        assert_eq!(
            apply_value("string", Some(date.clone()), Value::Int32(17_979))
                .unwrap()
                .1,
            Value::string("2019-03-24")
        );
        assert_eq!(
            apply_value("string", Some(time.clone()), Value::Int32(49_512_123))
                .unwrap()
                .1,
            Value::string("13:45:12.123Z")
        );
        assert_eq!(
            apply_value("string", Some(ts.clone()), Value::Int64(1_553_460_779_123))
                .unwrap()
                .1,
            Value::string("2019-03-24T20:52:59.123Z")
        );
        assert_eq!(
            apply_value("int64", Some(date), Value::Int32(17_979))
                .unwrap()
                .1,
            Value::Int64(17_979)
        );
        assert_eq!(
            apply_value("int32", Some(ts), Value::Int64(1_553_460_779_123))
                .unwrap()
                .1,
            Value::Int32(1_553_460_779_123i64 as i32)
        );
        // A negative instant takes the time-only pattern (getTime() < one day).
        assert_eq!(
            date_text(
                Some(names::CONNECT_TIMESTAMP),
                &Value::Int64(-86_400_000 * 500_000 + 1)
            )
            .as_deref(),
            Some("00:00:00.001Z")
        );
        assert_eq!(
            date_text(
                Some(names::CONNECT_TIMESTAMP),
                &Value::Int64(86_400_000 * 2 + 5)
            )
            .as_deref(),
            Some("1970-01-03T00:00:00.005Z")
        );
        assert_eq!(
            date_text(Some(names::CONNECT_DATE), &Value::Int32(i32::MAX)).as_deref(),
            Some("5881580-07-11")
        );
        assert_eq!(date_text(Some(names::CONNECT_DATE), &Value::Int64(1)), None);
        assert_eq!(
            apply_value("int64", Some(time), Value::Int32(-1))
                .unwrap_err()
                .message,
            "Kafka Connect Time type should not have any date fields set to non-zero values."
        );
    }

    #[test]
    fn whole_value_schema_keeps_basics_optionality_and_cast_default() {
        let mut s = Schema::new(Type::Int64)
            .named("my.Long", Some(3))
            .with_parameter("p", "v")
            .with_optional(true);
        s.doc = Some(Arc::from("doc"));
        s.default = Some(Value::Int64(7));
        let (schema, v) = apply_value("string", Some(s), Value::Int64(42)).unwrap();
        let schema = schema.unwrap();
        let mut want = Schema::new(Type::String)
            .named("my.Long", Some(3))
            .with_parameter("p", "v")
            .with_optional(true);
        want.doc = Some(Arc::from("doc"));
        want.default = Some(Value::string("7"));
        assert_eq!(*schema, want);
        assert_eq!(v, Value::string("42"));
        // A Timestamp default cast to int64 fails SchemaBuilder's check.
        let mut ts = Schema::new(Type::Int64).named(names::CONNECT_TIMESTAMP, Some(1));
        ts.default = Some(Value::Int64(0));
        assert_eq!(
            apply_value("int64", Some(ts), Value::Int64(1))
                .unwrap_err()
                .message,
            "Invalid default value"
        );
    }

    #[test]
    fn whole_value_refuses_complex_types() {
        let st = Schema::structure(None, vec![field("a", Schema::new(Type::Int32))]);
        assert_eq!(apply_value("int32", Some(st), Value::Struct(vec![Value::Int32(1)])).unwrap_err().message, "Cast transformation does not support casting from STRUCT; supported types are [INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES]");
        assert_eq!(apply_value("string", None, Value::Array(vec![])).unwrap_err().message, "Cast transformation does not support casting from ARRAY; supported types are [INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES]");
        assert_eq!(
            apply_value(
                "int8",
                Some(Schema::new(Type::Bytes)),
                Value::Bytes(Bytes::from_static(b"x"))
            )
            .unwrap_err()
            .message,
            "Unexpected type in Cast transformation: class [B"
        );
    }

    fn sample_struct() -> (Schema, Value) {
        let mut with_default = Schema::new(Type::Int32);
        with_default.default = Some(Value::Int32(9));
        let mut s = Schema::structure(
            Some("rec"),
            vec![
                field("a", Schema::new(Type::Int64)),
                field("b", Schema::optional(Type::Float64)),
                field("c", with_default),
                field("d", Schema::new(Type::String)),
            ],
        );
        s.version = Some(2);
        let v = Value::Struct(vec![
            Value::Int64(5),
            Value::Null,
            Value::Null,
            Value::string("x"),
        ]);
        (s, v)
    }

    #[test]
    fn struct_fields_cast_with_their_schemas() {
        let (s, v) = sample_struct();
        let (schema, out) = apply_value("a:string,b:int32,c:float32,zz:int8", Some(s), v).unwrap();
        let schema = schema.unwrap();
        assert_eq!(
            (schema.name.as_deref(), schema.version),
            (Some("rec"), Some(2))
        );
        assert_eq!(*schema.fields[0].schema, Schema::new(Type::String));
        assert_eq!(*schema.fields[1].schema, Schema::optional(Type::Int32));
        let mut c = Schema::new(Type::Float32);
        c.default = Some(Value::Float32(9.0));
        assert_eq!(*schema.fields[2].schema, c, "the field default is cast");
        assert_eq!(*schema.fields[3].schema, Schema::new(Type::String));
        // c was null: Struct.get gives its default, cast.
        assert_eq!(
            out,
            Value::Struct(vec![
                Value::string("5"),
                Value::Null,
                Value::Float32(9.0),
                Value::string("x")
            ])
        );
    }

    #[test]
    fn replace_null_with_default_false_keeps_null_and_put_refuses_it() {
        let (s, v) = sample_struct();
        let t = cast(
            VALUE,
            &[("spec", "b:int32"), ("replace.null.with.default", "false")],
        )
        .unwrap();
        // c is required with a default and holds null: Struct.put(null) on
        // a required field throws even though c is not cast.
        let err = t.apply(record(Some(s.clone()), v)).unwrap_err();
        assert_eq!(
            err.message,
            "Invalid value: null used for required field: \"c\", schema type: INT32"
        );
        let v = Value::Struct(vec![
            Value::Int64(5),
            Value::Null,
            Value::Int32(1),
            Value::string("x"),
        ]);
        let r = t.apply(record(Some(s), v)).unwrap().unwrap();
        assert_eq!(
            r.value,
            Value::Struct(vec![
                Value::Int64(5),
                Value::Null,
                Value::Int32(1),
                Value::string("x")
            ])
        );
    }

    #[test]
    fn field_casts_refuse_non_structs_and_struct_defaults() {
        assert_eq!(
            apply_value("a:int8", Some(Schema::new(Type::Int32)), Value::Int32(1))
                .unwrap_err()
                .message,
            "Cannot list fields on non-struct type"
        );
        let (mut s, v) = sample_struct();
        s.default = Some(v.clone());
        assert_eq!(apply_value("a:int8", Some(s), v).unwrap_err().message, "Cast transformation does not support casting from STRUCT; supported types are [INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES]");
        let (s, _) = sample_struct();
        assert_eq!(
            apply_value("a:int8", Some(s), Value::Map(vec![]))
                .unwrap_err()
                .message,
            "Only Struct objects supported for [cast types], found: java.util.HashMap"
        );
        assert_eq!(apply_value("a:int8", None, Value::Int32(1)).unwrap_err().message, "Only Map objects supported in absence of schema for [cast types], found: java.lang.Integer");
    }

    #[test]
    fn schemaless_maps_cast_fields_and_add_missing_ones_as_null() {
        let m = Value::Map(vec![
            (Value::string("a"), Value::string("12")),
            (Value::string("keep"), Value::Boolean(true)),
        ]);
        let (schema, out) = apply_value("a:int16,missing:string", None, m).unwrap();
        assert!(schema.is_none());
        // new HashMap<>(2 entries) has 4 buckets; the third key grows it to 8.
        // Buckets of 8: "a" 1, "keep" 3 ... in hash order.
        let Value::Map(entries) = out else {
            panic!("a map")
        };
        let mut got: Vec<(String, Value)> = entries
            .into_iter()
            .map(|(k, v)| {
                (
                    match k {
                        Value::String(t) => t.as_str().to_owned(),
                        _ => unreachable!(),
                    },
                    v,
                )
            })
            .collect();
        let want_order =
            java_hash_map_order_sized(vec![("a", ()), ("keep", ()), ("missing", ())], 8);
        assert_eq!(
            got.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            want_order.iter().map(|(k, _)| *k).collect::<Vec<_>>()
        );
        got.sort_by(|x, y| x.0.cmp(&y.0));
        assert_eq!(
            got,
            vec![
                ("a".to_owned(), Value::Int16(12)),
                ("keep".to_owned(), Value::Boolean(true)),
                ("missing".to_owned(), Value::Null)
            ]
        );
        // Java's `Map<String, Object>` is unchecked: an Integer key is
        // copied like any other (hash 1, and "a" (97) share bucket 1 of 4).
        let int_keyed = Value::Map(vec![(Value::Int32(1), Value::Null)]);
        assert_eq!(
            apply_value("a:int8", None, int_keyed).unwrap().1,
            Value::Map(vec![
                (Value::Int32(1), Value::Null),
                (Value::string("a"), Value::Null)
            ])
        );
        let bad = Value::Map(vec![(Value::Bytes(Bytes::from_static(b"k")), Value::Null)]);
        assert!(apply_value("a:int8", None, bad)
            .unwrap_err()
            .message
            .contains("[B key"));
    }

    #[test]
    fn map_copy_sizing_differs_from_a_filled_map() {
        // 13 keys: a copy sized 32 (ceil(13/0.75)=18 -> 32).
        let keys: Vec<String> = (0..13).map(|i| format!("k{i}")).collect();
        let entries: Vec<(Value, Value)> = keys
            .iter()
            .map(|k| (Value::string(k.as_str()), Value::Null))
            .collect();
        let (_, out) = apply_value("k0:string", None, Value::Map(entries)).unwrap();
        let Value::Map(out) = out else { panic!() };
        let want = java_hash_map_order_sized(keys.iter().map(|k| (k.as_str(), ())).collect(), 32);
        assert_eq!(
            out.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
            want.into_iter()
                .map(|(k, _)| Value::string(k))
                .collect::<Vec<_>>()
        );
        let (_, empty) = apply_value("x:string", None, Value::Map(vec![])).unwrap();
        assert_eq!(empty, Value::Map(vec![(Value::string("x"), Value::Null)]));
    }

    #[test]
    fn tombstones_pass_and_key_variant_casts_the_key() {
        let t = cast(KEY, &[("spec", "int8")]).unwrap();
        let mut r = record(Some(Schema::new(Type::Int32)), Value::Int32(1));
        r.key = Value::Null;
        assert_eq!(
            t.apply(r.clone()).unwrap().unwrap(),
            r,
            "a null key is left alone"
        );
        let r = record(Some(Schema::new(Type::Int32)), Value::Int32(2));
        let out = t.apply(r).unwrap().unwrap();
        assert_eq!(
            (out.key_schema.as_deref(), &out.key),
            (Some(&Schema::new(Type::Int8)), &Value::Int8(2))
        );
        assert_eq!(out.value, Value::Int32(2), "the value is untouched");
        let v = cast(VALUE, &[("spec", "int8")]).unwrap();
        let mut tomb = record(Some(Schema::new(Type::Int32)), Value::Null);
        tomb.key = Value::Int32(3);
        assert_eq!(v.apply(tomb.clone()).unwrap().unwrap(), tomb);
    }

    #[test]
    fn java_split_drops_trailing_empties() {
        assert_eq!(java_split_colon(""), vec![""]);
        assert_eq!(java_split_colon("a:b:"), vec!["a", "b"]);
        assert_eq!(java_split_colon("::"), Vec::<&str>::new());
        assert_eq!(java_split_colon(":x"), vec!["", "x"]);
    }
}
