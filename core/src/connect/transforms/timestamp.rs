//! Kafka Connect's `TimestampConverter$Key`/`$Value` (a timestamp field,
//! or the whole key or value, converted between a formatted string, Unix
//! time and Connect's `Date`, `Time` and `Timestamp`) and
//! `TimestampRouter` (the topic rewritten from the record's timestamp),
//! both with `java.text.SimpleDateFormat` patterns in UTC
//! ([`java_date_format`]).
//!
//! A Connect `Date`/`Time`/`Timestamp` value is a `java.util.Date` in
//! Java and its encoded number in walrelay (days, ms of day, ms), which is
//! what the converters write either way. A schemaless `java.util.Date`
//! has no such encoding and no converter can write it, so converting a
//! schemaless value to `Date`, `Time` or `Timestamp` is refused. Pure.

pub(super) mod java_date_format;

use std::sync::Arc;

use self::java_date_format::{JavaDateFormat, PatternError};
use super::options::{Reader, TransformConfigError};
use super::util::{
    boxed, class_name, copy_capacity, copy_schema_basics_onto, field_value, java_hash_map, map_get,
    require_map, validate_value,
};
use super::{Built, ConnectRecord, Side, TransformError, Transformation};
use crate::connect::pg::names;
use crate::connect::{Field, Schema, Type, Value};

/// `TimestampConverter$Key`.
const KEY: &str = "org.apache.kafka.connect.transforms.TimestampConverter$Key";
/// `TimestampConverter$Value`.
const VALUE: &str = "org.apache.kafka.connect.transforms.TimestampConverter$Value";
/// `TimestampRouter`.
const ROUTER: &str = "org.apache.kafka.connect.transforms.TimestampRouter";

/// The classes this module builds.
pub(super) const CLASSES: &[&str] = &[KEY, VALUE, ROUTER];

/// The purpose `Requirements` names in its messages.
const PURPOSE: &str = "converting timestamp formats";
/// Milliseconds in a day.
const DAY_MS: i64 = 86_400_000;

/// Builds the transform of `class`, if it is one of [`CLASSES`].
pub(super) fn build(class: &str, opts: &Reader<'_>) -> Option<Built> {
    let side = match class {
        KEY => Side::Key,
        VALUE => Side::Value,
        ROUTER => return Some(configure_router(opts).map(boxed)),
        _ => return None,
    };
    Some(configure_converter(side, opts).map(boxed))
}

/// A timestamp representation (`target.type`, or what a schema says).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `string`: text in `format`.
    String,
    /// `unix`: a Long in `unix.precision`.
    Unix,
    /// `Date`.
    Date,
    /// `Time`.
    Time,
    /// `Timestamp`.
    Timestamp,
}

/// `unix.precision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Precision {
    Seconds,
    Milliseconds,
    Microseconds,
    Nanoseconds,
}

/// A configured `TimestampConverter`.
#[derive(Debug)]
struct Converter {
    side: Side,
    /// `field`: empty for the whole key or value.
    field: String,
    target: Kind,
    /// `format`, when not blank.
    format: Option<JavaDateFormat>,
    precision: Precision,
    replace_null_with_default: bool,
}

/// Reads the options in `ConfigDef` order, then `configure`'s checks.
fn configure_converter(side: Side, opts: &Reader<'_>) -> Result<Converter, TransformConfigError> {
    let field = opts.string("field", Some(""))?;
    let target_text = opts.string("target.type", None)?;
    let target = match target_text.as_str() {
        "string" => Kind::String,
        "unix" => Kind::Unix,
        "Date" => Kind::Date,
        "Time" => Kind::Time,
        "Timestamp" => Kind::Timestamp,
        _ => {
            return Err(TransformConfigError::invalid(
                "target.type",
                &target_text,
                "String must be one of: string, unix, Date, Time, Timestamp",
            ))
        }
    };
    let pattern = opts.string("format", Some(""))?;
    let precision = match opts
        .one_of(
            "unix.precision",
            "milliseconds",
            &["nanoseconds", "microseconds", "milliseconds", "seconds"],
        )?
        .as_str()
    {
        "seconds" => Precision::Seconds,
        "microseconds" => Precision::Microseconds,
        "nanoseconds" => Precision::Nanoseconds,
        _ => Precision::Milliseconds,
    };
    let replace_null_with_default = opts.boolean("replace.null.with.default", true)?;
    let blank = pattern.trim().is_empty();
    if target == Kind::String && blank {
        return Err(TransformConfigError::invalid(
            "format",
            &pattern,
            "TimestampConverter requires format option to be specified when using string timestamps",
        ));
    }
    let format = if blank {
        None
    } else {
        Some(JavaDateFormat::compile(&pattern).map_err(|e| match e {
            PatternError::Illegal(why) => TransformConfigError::invalid(
                "format",
                &pattern,
                format!("TimestampConverter requires a SimpleDateFormat-compatible pattern for string timestamps: {pattern} ({why})"),
            ),
            PatternError::Unsupported(why) => TransformConfigError::invalid("format", &pattern, why),
        })?)
    };
    Ok(Converter {
        side,
        field,
        target,
        format,
        precision,
        replace_null_with_default,
    })
}

impl Transformation for Converter {
    fn apply(&self, mut record: ConnectRecord) -> Result<Option<ConnectRecord>, TransformError> {
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

impl Converter {
    /// `applySchemaless`.
    fn apply_schemaless(&self, value: &Value) -> Result<Value, TransformError> {
        if value.is_null() || self.field.is_empty() {
            return self.convert(value, None, false);
        }
        let entries = require_map(value, PURPOSE)?;
        let converted = self.convert(map_get(entries, &self.field), None, false)?;
        let mut out = entries.to_vec();
        out.push((Value::string(self.field.as_str()), converted));
        java_hash_map(out, copy_capacity(entries.len())).map(Value::Map)
    }

    /// `applyWithSchema`.
    fn apply_with_schema(
        &self,
        schema: &Arc<Schema>,
        value: &Value,
    ) -> Result<(Arc<Schema>, Value), TransformError> {
        if self.field.is_empty() {
            let updated = Arc::new(type_schema(self.target, schema.optional));
            // The source kind is read from the schema before the null check.
            let kind = kind_of_schema(schema)?;
            return Ok((updated, self.convert(value, Some(kind), true)?));
        }
        if !value.is_null() && !matches!(value, Value::Struct(_)) {
            return Err(TransformError::new(format!(
                "Only Struct objects supported for [{PURPOSE}], found: {}",
                class_name(value)
            )));
        }
        if schema.kind != Type::Struct {
            return Err(TransformError::new("Cannot list fields on non-struct type"));
        }
        let mut builder = copy_schema_basics_onto(schema, Type::Struct);
        for f in &schema.fields {
            let fs = if *f.name == *self.field {
                Arc::new(type_schema(self.target, f.schema.optional))
            } else {
                f.schema.clone()
            };
            builder.fields.push(Field {
                name: f.name.clone(),
                schema: fs,
            });
        }
        builder.optional = schema.optional;
        if let Some(default) = &schema.default {
            builder.default = Some(self.apply_struct(schema, &builder, default)?);
        }
        let updated = Arc::new(builder);
        let v = self.apply_struct(schema, &updated, value)?;
        Ok((updated, v))
    }

    /// `applyValueWithSchema`: every field copied (`Struct.get` or
    /// `getWithoutDefault`), the chosen one converted, each checked as
    /// `Struct.put` checks it.
    fn apply_struct(
        &self,
        schema: &Schema,
        updated: &Schema,
        value: &Value,
    ) -> Result<Value, TransformError> {
        let values = match value {
            Value::Null => return Ok(Value::Null),
            Value::Struct(v) => v,
            other => {
                return Err(TransformError::new(format!(
                    "walrelay expected a Struct default value, found {} (Kafka Connect fails with a ClassCastException here)",
                    class_name(other)
                )))
            }
        };
        let mut out = Vec::with_capacity(schema.fields.len());
        for (i, f) in schema.fields.iter().enumerate() {
            let orig = field_value(schema, values, i, self.replace_null_with_default);
            let v = if *f.name == *self.field {
                let kind = kind_of_schema(&f.schema)?;
                self.convert(orig, Some(kind), true)?
            } else {
                orig.clone()
            };
            if let Some(uf) = updated.fields.get(i) {
                validate_value(Some(&uf.name), &uf.schema, &v)?;
            }
            out.push(v);
        }
        Ok(Value::Struct(out))
    }

    /// `convertTimestamp`: `source` is the schema's kind (none: inferred
    /// from the value); `with_schema` says whether a `java.util.Date`
    /// result can be written (as its Connect encoding).
    fn convert(
        &self,
        value: &Value,
        source: Option<Kind>,
        with_schema: bool,
    ) -> Result<Value, TransformError> {
        if value.is_null() {
            return Ok(Value::Null);
        }
        let source = match source {
            Some(k) => k,
            None => infer_kind(value)?,
        };
        let raw = self.to_raw(source, value)?;
        self.to_type(raw, with_schema)
    }

    /// A translator's `toRaw`: the instant in Unix milliseconds.
    fn to_raw(&self, kind: Kind, value: &Value) -> Result<i64, TransformError> {
        let found = || format!("class {}", class_name(value));
        match (kind, value) {
            (Kind::String, Value::String(t)) => self.parse(t.as_str()),
            (Kind::String, _) => Err(TransformError::new(format!(
                "Expected string timestamp to be a String, but found {}",
                found()
            ))),
            (Kind::Unix, Value::Int64(v)) => Ok(match self.precision {
                Precision::Seconds => v.saturating_mul(1000),
                Precision::Milliseconds => *v,
                Precision::Microseconds => v / 1000,
                Precision::Nanoseconds => v / 1_000_000,
            }),
            (Kind::Unix, _) => Err(TransformError::new(format!(
                "Expected Unix timestamp to be a Long, but found {}",
                found()
            ))),
            (Kind::Date, Value::Int32(days)) => Ok(i64::from(*days) * DAY_MS),
            (Kind::Time, Value::Int32(ms)) => Ok(i64::from(*ms)),
            (Kind::Timestamp, Value::Int64(ms)) => Ok(*ms),
            (k, _) => Err(TransformError::new(format!(
                "Expected {} to be a java.util.Date, but found {}",
                match k {
                    Kind::Date => "Date",
                    Kind::Time => "Time",
                    _ => "Timestamp",
                },
                found()
            ))),
        }
    }

    /// `format.parse(text)` with Kafka's message for text that does not
    /// match.
    fn parse(&self, text: &str) -> Result<i64, TransformError> {
        let Some(format) = &self.format else {
            return Err(TransformError::new(
                "TimestampConverter has no format to parse a string timestamp with (Kafka Connect fails with a NullPointerException here)",
            ));
        };
        match format.parse(text) {
            Ok(Some(ms)) => Ok(ms),
            Ok(None) => Err(TransformError::new(format!(
                "Could not parse timestamp: value ({text}) does not match pattern ({})",
                format.pattern()
            ))),
            Err(why) => Err(TransformError::new(why)),
        }
    }

    /// The target translator's `toType`.
    fn to_type(&self, ms: i64, with_schema: bool) -> Result<Value, TransformError> {
        if !with_schema && matches!(self.target, Kind::Date | Kind::Time | Kind::Timestamp) {
            return Err(TransformError::new(
                "walrelay cannot represent a schemaless java.util.Date (TimestampConverter to Date, Time or Timestamp needs a schema)",
            ));
        }
        Ok(match self.target {
            Kind::String => Value::string(
                self.format
                    .as_ref()
                    .map(|f| f.format(ms))
                    .unwrap_or_default(),
            ),
            Kind::Unix => Value::Int64(match self.precision {
                Precision::Seconds => ms / 1000,
                Precision::Milliseconds => ms,
                Precision::Microseconds => ms.saturating_mul(1000),
                Precision::Nanoseconds => ms.saturating_mul(1_000_000),
            }),
            // Date.fromLogical's (int) of the day count.
            Kind::Date => Value::Int32(ms.div_euclid(DAY_MS) as i32),
            Kind::Time => Value::Int32(ms.rem_euclid(DAY_MS) as i32),
            Kind::Timestamp => Value::Int64(ms),
        })
    }
}

/// `inferTimestampType` of a schemaless value.
fn infer_kind(value: &Value) -> Result<Kind, TransformError> {
    match value {
        Value::Int64(_) => Ok(Kind::Unix),
        Value::String(_) => Ok(Kind::String),
        other => Err(TransformError::new(format!(
            "TimestampConverter does not support class {} objects as timestamps",
            class_name(other)
        ))),
    }
}

/// `timestampTypeFromSchema` (a `ConnectException`).
fn kind_of_schema(schema: &Schema) -> Result<Kind, TransformError> {
    Ok(match (schema.name.as_deref(), schema.kind) {
        (Some(names::CONNECT_TIMESTAMP), _) => Kind::Timestamp,
        (Some(names::CONNECT_DATE), _) => Kind::Date,
        (Some(names::CONNECT_TIME), _) => Kind::Time,
        (_, Type::String) => Kind::String,
        (_, Type::Int64) => Kind::Unix,
        _ => {
            return Err(TransformError::new(format!(
                "Schema {} does not correspond to a known timestamp type format",
                schema.java_string()
            )))
        }
    })
}

/// A translator's `typeSchema(isOptional)`.
fn type_schema(kind: Kind, optional: bool) -> Schema {
    let s = match kind {
        Kind::String => Schema::new(Type::String),
        Kind::Unix => Schema::new(Type::Int64),
        Kind::Date => Schema::new(Type::Int32).named(names::CONNECT_DATE, Some(1)),
        Kind::Time => Schema::new(Type::Int32).named(names::CONNECT_TIME, Some(1)),
        Kind::Timestamp => Schema::new(Type::Int64).named(names::CONNECT_TIMESTAMP, Some(1)),
    };
    s.with_optional(optional)
}

/// A configured `TimestampRouter`.
#[derive(Debug)]
struct Router {
    /// `topic.format`.
    topic_format: String,
    /// `timestamp.format` compiled, or the `IllegalArgumentException`
    /// Java raises when its thread-local format is first made (on the
    /// first record, not at configuration).
    format: Result<JavaDateFormat, String>,
}

/// Reads `topic.format` and `timestamp.format`.
fn configure_router(opts: &Reader<'_>) -> Result<Router, TransformConfigError> {
    let topic_format = opts.string("topic.format", Some("${topic}-${timestamp}"))?;
    let pattern = opts.string("timestamp.format", Some("yyyyMMdd"))?;
    let format = match JavaDateFormat::compile(&pattern) {
        Ok(f) => Ok(f),
        Err(PatternError::Illegal(why)) => Err(why),
        Err(PatternError::Unsupported(why)) => {
            return Err(TransformConfigError::invalid(
                "timestamp.format",
                &pattern,
                why,
            ))
        }
    };
    Ok(Router {
        topic_format,
        format,
    })
}

impl Transformation for Router {
    fn apply(&self, mut record: ConnectRecord) -> Result<Option<ConnectRecord>, TransformError> {
        let Some(ts) = record.timestamp else {
            return Err(TransformError::new(format!(
                "Timestamp missing on record: {}",
                record_to_string(&record)
            )));
        };
        let format = self.format.as_ref().map_err(|why| {
            TransformError::new(format!(
                "{why} (Kafka Connect fails with an IllegalArgumentException here: timestamp.format is not a SimpleDateFormat pattern)"
            ))
        })?;
        let stamp = format.format(ts);
        let topic = self
            .topic_format
            .replace("${topic}", &record.topic)
            .replace("${timestamp}", &stamp);
        record.topic = Arc::from(topic);
        Ok(Some(record))
    }
}

/// `SourceRecord.toString()` as far as the chain knows the record: the
/// source partition and offset are Debezium's and not carried here.
fn record_to_string(r: &ConnectRecord) -> String {
    let schema =
        |s: &Option<Arc<Schema>>| s.as_ref().map_or("null".to_owned(), |s| s.java_string());
    let partition = r.partition.map_or("null".to_owned(), |p| p.to_string());
    let headers: Vec<String> = r
        .headers
        .iter()
        .map(|h| {
            format!(
                "ConnectHeader(key={}, value={}, schema={})",
                h.key,
                java_to_string(&h.value, h.schema.as_deref()),
                schema(&h.schema)
            )
        })
        .collect();
    format!(
        "SourceRecord{{sourcePartition=(not known after the router), sourceOffset=(not known after the router)}} ConnectRecord{{topic='{}', kafkaPartition={partition}, key={}, keySchema={}, value={}, valueSchema={}, timestamp=null, headers=ConnectHeaders(headers=[{}])}}",
        r.topic,
        java_to_string(&r.key, r.key_schema.as_deref()),
        schema(&r.key_schema),
        java_to_string(&r.value, r.value_schema.as_deref()),
        schema(&r.value_schema),
        headers.join(", ")
    )
}

/// A value's Java `toString()` (`Struct{a=1}`, `[1, 2]`, `{k=v}`); a
/// `byte[]` prints its identity, which walrelay cannot know.
fn java_to_string(v: &Value, schema: Option<&Schema>) -> String {
    use crate::connect::java::{big_decimal_to_string, double_to_string, float_to_string};
    match v {
        Value::Null => "null".to_owned(),
        Value::Boolean(b) => b.to_string(),
        Value::Int8(x) => x.to_string(),
        Value::Int16(x) => x.to_string(),
        Value::Int32(x) => x.to_string(),
        Value::Int64(x) => x.to_string(),
        Value::Float32(x) => float_to_string(*x),
        Value::Float64(x) => double_to_string(*x),
        Value::String(t) => t.as_str().to_owned(),
        Value::Bytes(_) => "[B@?".to_owned(),
        Value::Decimal(d) => big_decimal_to_string(d),
        Value::Array(items) => {
            let inner = schema.and_then(|s| s.value_schema.as_deref());
            let parts: Vec<String> = items.iter().map(|x| java_to_string(x, inner)).collect();
            format!("[{}]", parts.join(", "))
        }
        Value::Map(entries) => {
            let (ks, vs) = schema.map_or((None, None), |s| {
                (s.key_schema.as_deref(), s.value_schema.as_deref())
            });
            let parts: Vec<String> = entries
                .iter()
                .map(|(k, x)| format!("{}={}", java_to_string(k, ks), java_to_string(x, vs)))
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
        Value::Struct(values) => {
            let parts: Vec<String> = values
                .iter()
                .enumerate()
                .filter(|(_, x)| !x.is_null())
                .map(|(i, x)| {
                    let f = schema.and_then(|s| s.fields.get(i));
                    let name = f.map_or("?", |f| &*f.name);
                    format!("{name}={}", java_to_string(x, f.map(|f| &*f.schema)))
                })
                .collect();
            format!("Struct{{{}}}", parts.join(","))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::options::Options;
    use super::*;

    fn make(
        class: &str,
        opts: &[(&str, &str)],
    ) -> Result<Box<dyn Transformation>, TransformConfigError> {
        let o: Options = opts.iter().copied().collect();
        build(class, &o.reader()).expect("a class of this module")
    }

    fn record(schema: Option<Schema>, value: Value) -> ConnectRecord {
        ConnectRecord {
            topic: Arc::from("orders"),
            partition: None,
            key_schema: schema.clone().map(Arc::new),
            key: value.clone(),
            value_schema: schema.map(Arc::new),
            value,
            timestamp: Some(T),
            headers: Vec::new(),
        }
    }

    /// 2019-03-24T20:52:59.123Z.
    const T: i64 = 1_553_460_779_123;
    const DAYS: i32 = 17_979;

    fn conv(
        opts: &[(&str, &str)],
        schema: Option<Schema>,
        value: Value,
    ) -> Result<(Option<Arc<Schema>>, Value), TransformError> {
        let t = make(VALUE, opts).unwrap();
        let r = t.apply(record(schema, value))?.unwrap();
        Ok((r.value_schema, r.value))
    }

    fn field(name: &str, schema: Schema) -> Field {
        Field {
            name: Arc::from(name),
            schema: Arc::new(schema),
        }
    }

    fn cfg_err(class: &str, opts: &[(&str, &str)]) -> (String, String) {
        match make(class, opts) {
            Err(TransformConfigError::Invalid { key, reason, .. }) => (key, reason),
            other => panic!("expected an invalid option, got {other:?}"),
        }
    }

    #[test]
    fn options_are_checked_as_connect_does() {
        assert!(build("x.Other", &Options::default().reader()).is_none());
        assert!(
            matches!(make(VALUE, &[]), Err(TransformConfigError::Missing { key }) if key == "target.type")
        );
        assert_eq!(
            cfg_err(VALUE, &[("target.type", "date")]).1,
            "String must be one of: string, unix, Date, Time, Timestamp"
        );
        assert_eq!(
            cfg_err(
                VALUE,
                &[("target.type", "unix"), ("unix.precision", "hours")]
            )
            .1,
            "String must be one of: nanoseconds, microseconds, milliseconds, seconds"
        );
        assert_eq!(cfg_err(VALUE, &[("target.type", "string")]), ("format".to_owned(), "TimestampConverter requires format option to be specified when using string timestamps".to_owned()));
        assert_eq!(
            cfg_err(VALUE, &[("target.type", "string"), ("format", "  ")]).0,
            "format"
        );
        assert_eq!(cfg_err(KEY, &[("target.type", "unix"), ("format", "yyyy-bb")]).1, "TimestampConverter requires a SimpleDateFormat-compatible pattern for string timestamps: yyyy-bb (Illegal pattern character 'b')");
        assert!(
            cfg_err(KEY, &[("target.type", "unix"), ("format", "YYYY-ww")])
                .1
                .contains("week-based")
        );
        assert_eq!(
            cfg_err(
                VALUE,
                &[("target.type", "unix"), ("replace.null.with.default", "x")]
            )
            .0,
            "replace.null.with.default"
        );
    }

    #[test]
    fn whole_value_with_schema_between_all_kinds() {
        let ts = || Some(Schema::new(Type::Int64).named(names::CONNECT_TIMESTAMP, Some(1)));
        let fmt = [
            ("target.type", "string"),
            ("format", "yyyy-MM-dd'T'HH:mm:ss.SSS"),
        ];
        let (s, v) = conv(&fmt, ts(), Value::Int64(T)).unwrap();
        assert_eq!(
            (s.unwrap().as_ref(), v),
            (
                &Schema::new(Type::String),
                Value::string("2019-03-24T20:52:59.123")
            )
        );
        let (s, v) = conv(&[("target.type", "Date")], ts(), Value::Int64(T)).unwrap();
        assert_eq!(
            (s.unwrap().as_ref(), v),
            (
                &Schema::new(Type::Int32).named(names::CONNECT_DATE, Some(1)),
                Value::Int32(DAYS)
            )
        );
        let (s, v) = conv(&[("target.type", "Time")], ts(), Value::Int64(T)).unwrap();
        assert_eq!(
            (s.unwrap().name.as_deref(), v),
            (Some(names::CONNECT_TIME), Value::Int32((T % DAY_MS) as i32))
        );
        let date = Some(
            Schema::new(Type::Int32)
                .named(names::CONNECT_DATE, Some(1))
                .with_optional(true),
        );
        let (s, v) = conv(&[("target.type", "Timestamp")], date, Value::Int32(DAYS)).unwrap();
        assert_eq!(
            (s.unwrap().as_ref(), v),
            (
                &Schema::new(Type::Int64)
                    .named(names::CONNECT_TIMESTAMP, Some(1))
                    .with_optional(true),
                Value::Int64(T - T % DAY_MS)
            )
        );
        let time = Some(Schema::new(Type::Int32).named(names::CONNECT_TIME, Some(1)));
        assert_eq!(
            conv(&[("target.type", "unix")], time, Value::Int32(1000))
                .unwrap()
                .1,
            Value::Int64(1000)
        );
        let string = Some(Schema::new(Type::String));
        let (_, v) = conv(
            &[
                ("target.type", "unix"),
                ("format", "yyyy-MM-dd HH:mm:ss.SSS"),
            ],
            string,
            Value::string("2019-03-24 20:52:59.123"),
        )
        .unwrap();
        assert_eq!(v, Value::Int64(T));
    }

    #[test]
    fn unix_precisions_in_and_out() {
        let long = || Some(Schema::new(Type::Int64));
        let out = |p: &str, v: i64| {
            conv(
                &[("target.type", "unix"), ("unix.precision", p)],
                long(),
                Value::Int64(v),
            )
            .unwrap()
            .1
        };
        // Unix in and out in the same precision loses the sub-millisecond part.
        assert_eq!(out("seconds", 1_553_460_779), Value::Int64(1_553_460_779));
        assert_eq!(
            out("microseconds", 1_553_460_779_123_456),
            Value::Int64(1_553_460_779_123_000)
        );
        assert_eq!(
            out("nanoseconds", -1_500_000),
            Value::Int64(-1_000_000),
            "toMillis truncates toward zero"
        );
        let to_ts = |p: &str, v: i64| {
            conv(
                &[("target.type", "Timestamp"), ("unix.precision", p)],
                long(),
                Value::Int64(v),
            )
            .unwrap()
            .1
        };
        assert_eq!(
            to_ts("seconds", i64::MAX),
            Value::Int64(i64::MAX),
            "SECONDS.toMillis saturates"
        );
        let ts = Some(Schema::new(Type::Int64).named(names::CONNECT_TIMESTAMP, Some(1)));
        assert_eq!(
            conv(
                &[("target.type", "unix"), ("unix.precision", "seconds")],
                ts.clone(),
                Value::Int64(-1500)
            )
            .unwrap()
            .1,
            Value::Int64(-1)
        );
        assert_eq!(
            conv(
                &[("target.type", "unix"), ("unix.precision", "nanoseconds")],
                ts,
                Value::Int64(i64::MAX / 10)
            )
            .unwrap()
            .1,
            Value::Int64(i64::MAX)
        );
    }

    #[test]
    fn schema_errors_and_null_whole_values() {
        let int32 = Some(Schema::new(Type::Int32));
        // The schema is checked before the null value is.
        assert_eq!(
            conv(&[("target.type", "unix")], int32.clone(), Value::Null)
                .unwrap_err()
                .message,
            "Schema Schema{INT32} does not correspond to a known timestamp type format"
        );
        let (s, v) = conv(
            &[("target.type", "Timestamp")],
            Some(Schema::optional(Type::Int64)),
            Value::Null,
        )
        .unwrap();
        assert_eq!(
            (s.unwrap().name.as_deref(), v),
            (Some(names::CONNECT_TIMESTAMP), Value::Null),
            "a null keeps going with the new schema"
        );
        let fmt = [("target.type", "unix"), ("format", "yyyy-MM-dd")];
        assert_eq!(
            conv(
                &fmt,
                Some(Schema::new(Type::String)),
                Value::string("24/03/2019")
            )
            .unwrap_err()
            .message,
            "Could not parse timestamp: value (24/03/2019) does not match pattern (yyyy-MM-dd)"
        );
        assert!(conv(
            &[("target.type", "unix")],
            Some(Schema::new(Type::String)),
            Value::string("x")
        )
        .unwrap_err()
        .message
        .contains("NullPointerException"));
        assert_eq!(
            conv(
                &[("target.type", "unix")],
                Some(Schema::new(Type::Int64)),
                Value::Int32(1)
            )
            .unwrap_err()
            .message,
            "Expected Unix timestamp to be a Long, but found class java.lang.Integer"
        );
        assert_eq!(
            conv(&fmt, Some(Schema::new(Type::String)), Value::Int64(1))
                .unwrap_err()
                .message,
            "Expected string timestamp to be a String, but found class java.lang.Long"
        );
        let date = Some(Schema::new(Type::Int32).named(names::CONNECT_DATE, Some(1)));
        assert_eq!(
            conv(&fmt, date, Value::Int64(1)).unwrap_err().message,
            "Expected Date to be a java.util.Date, but found class java.lang.Long"
        );
    }

    fn sample() -> Schema {
        let mut at = Schema::new(Type::Int64);
        at.default = Some(Value::Int64(0));
        let mut s = Schema::structure(
            Some("order"),
            vec![
                field("id", Schema::new(Type::Int32)),
                field("at", at),
                field("note", Schema::optional(Type::String)),
            ],
        );
        s.version = Some(4);
        s
    }

    #[test]
    fn struct_field_converted_with_schema() {
        let opts = [
            ("target.type", "string"),
            ("format", "yyyy-MM-dd"),
            ("field", "at"),
        ];
        let v = Value::Struct(vec![Value::Int32(1), Value::Int64(T), Value::Null]);
        let (s, out) = conv(&opts, Some(sample()), v).unwrap();
        let s = s.unwrap();
        assert_eq!(
            (s.name.as_deref(), s.version, s.fields.len()),
            (Some("order"), Some(4), 3)
        );
        assert_eq!(
            *s.fields[1].schema,
            Schema::new(Type::String),
            "the field's default is dropped"
        );
        assert_eq!(
            out,
            Value::Struct(vec![
                Value::Int32(1),
                Value::string("2019-03-24"),
                Value::Null
            ])
        );
        // A null field with a default: Struct.get gives the default, converted.
        let v = Value::Struct(vec![Value::Int32(1), Value::Null, Value::Null]);
        assert_eq!(
            conv(&opts, Some(sample()), v.clone()).unwrap().1,
            Value::Struct(vec![
                Value::Int32(1),
                Value::string("1970-01-01"),
                Value::Null
            ])
        );
        // Without the default, the null is put into a required string field.
        let mut no_default = opts.to_vec();
        no_default.push(("replace.null.with.default", "false"));
        assert_eq!(
            conv(&no_default, Some(sample()), v).unwrap_err().message,
            "Invalid value: null used for required field: \"at\", schema type: STRING"
        );
    }

    #[test]
    fn struct_default_and_tombstone_with_field() {
        let opts = [("target.type", "Date"), ("field", "at")];
        let mut s = sample();
        s.optional = true;
        s.default = Some(Value::Struct(vec![
            Value::Int32(0),
            Value::Int64(T),
            Value::Null,
        ]));
        let (schema, v) = conv(&opts, Some(s), Value::Null).unwrap();
        let schema = schema.unwrap();
        assert_eq!(v, Value::Null);
        assert!(schema.optional);
        assert_eq!(
            schema.default,
            Some(Value::Struct(vec![
                Value::Int32(0),
                Value::Int32(DAYS),
                Value::Null
            ]))
        );
        assert_eq!(
            conv(&opts, Some(Schema::new(Type::Int64)), Value::Null)
                .unwrap_err()
                .message,
            "Cannot list fields on non-struct type"
        );
        assert_eq!(conv(&opts, Some(sample()), Value::Int64(1)).unwrap_err().message, "Only Struct objects supported for [converting timestamp formats], found: java.lang.Long");
        let bad = [("target.type", "Date"), ("field", "id")];
        assert_eq!(
            conv(
                &bad,
                Some(sample()),
                Value::Struct(vec![Value::Int32(1), Value::Int64(0), Value::Null])
            )
            .unwrap_err()
            .message,
            "Schema Schema{INT32} does not correspond to a known timestamp type format"
        );
    }

    #[test]
    fn schemaless_values_and_maps() {
        let fmt = [("target.type", "string"), ("format", "yyyyMMddHHmmss")];
        assert_eq!(
            conv(&fmt, None, Value::Int64(T)).unwrap(),
            (None, Value::string("20190324205259"))
        );
        assert_eq!(
            conv(
                &[("target.type", "unix"), ("format", "yyyyMMdd")],
                None,
                Value::string("20190324")
            )
            .unwrap()
            .1,
            Value::Int64(T - T % DAY_MS)
        );
        assert_eq!(conv(&fmt, None, Value::Null).unwrap(), (None, Value::Null));
        assert_eq!(
            conv(&fmt, None, Value::Int32(1)).unwrap_err().message,
            "TimestampConverter does not support class java.lang.Integer objects as timestamps"
        );
        assert!(conv(&[("target.type", "Timestamp")], None, Value::Int64(1))
            .unwrap_err()
            .message
            .contains("schemaless java.util.Date"));
        let mut f = fmt.to_vec();
        f.push(("field", "at"));
        let m = Value::Map(vec![
            (Value::string("id"), Value::Int32(1)),
            (Value::string("at"), Value::Int64(T)),
        ]);
        let (_, out) = conv(&f, None, m).unwrap();
        let Value::Map(entries) = out else {
            panic!("a map")
        };
        assert!(entries.contains(&(Value::string("at"), Value::string("20190324205259"))));
        assert!(entries.contains(&(Value::string("id"), Value::Int32(1))));
        // A missing field is put as null.
        let (_, out) = conv(&f, None, Value::Map(vec![])).unwrap();
        assert_eq!(out, Value::Map(vec![(Value::string("at"), Value::Null)]));
        assert_eq!(conv(&f, None, Value::Int64(1)).unwrap_err().message, "Only Map objects supported in absence of schema for [converting timestamp formats], found: java.lang.Long");
    }

    #[test]
    fn key_variant_converts_the_key() {
        let t = make(
            KEY,
            &[("target.type", "unix"), ("unix.precision", "seconds")],
        )
        .unwrap();
        let r = t
            .apply(record(
                Some(Schema::new(Type::Int64).named(names::CONNECT_TIMESTAMP, Some(1))),
                Value::Int64(T),
            ))
            .unwrap()
            .unwrap();
        assert_eq!(
            (r.key_schema.as_deref(), &r.key),
            (Some(&Schema::new(Type::Int64)), &Value::Int64(T / 1000))
        );
        assert_eq!(r.value, Value::Int64(T));
    }

    #[test]
    fn router_rewrites_the_topic() {
        let r = make(ROUTER, &[])
            .unwrap()
            .apply(record(None, Value::Null))
            .unwrap()
            .unwrap();
        assert_eq!(&*r.topic, "orders-20190324");
        let t = make(
            ROUTER,
            &[
                ("topic.format", "${timestamp}.${topic}.${topic}"),
                ("timestamp.format", "yyyy-MM'x'"),
            ],
        )
        .unwrap();
        assert_eq!(
            &*t.apply(record(None, Value::Null)).unwrap().unwrap().topic,
            "2019-03x.orders.orders"
        );
        let mut no_ts = record(Some(Schema::new(Type::String)), Value::string("v"));
        no_ts.timestamp = None;
        let msg = make(ROUTER, &[]).unwrap().apply(no_ts).unwrap_err().message;
        assert!(
            msg.starts_with("Timestamp missing on record: SourceRecord{"),
            "{msg}"
        );
        assert!(msg.contains("ConnectRecord{topic='orders', kafkaPartition=null, key=v, keySchema=Schema{STRING}, value=v, valueSchema=Schema{STRING}, timestamp=null, headers=ConnectHeaders(headers=[])}"), "{msg}");
        // An illegal pattern fails on each record, as Java's lazy format does.
        let bad = make(ROUTER, &[("timestamp.format", "yyyyqq")]).unwrap();
        assert!(bad
            .apply(record(None, Value::Null))
            .unwrap_err()
            .message
            .starts_with("Illegal pattern character 'q'"));
        assert_eq!(
            cfg_err(ROUTER, &[("timestamp.format", "YYYY")]).0,
            "timestamp.format"
        );
    }

    #[test]
    fn java_to_string_of_structs_skips_nulls() {
        let s = sample();
        assert_eq!(
            java_to_string(
                &Value::Struct(vec![Value::Int32(1), Value::Null, Value::string("n")]),
                Some(&s)
            ),
            "Struct{id=1,note=n}"
        );
        assert_eq!(
            java_to_string(&Value::Array(vec![Value::Float64(1.0), Value::Null]), None),
            "[1.0, null]"
        );
    }
}
