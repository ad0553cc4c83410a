//! PostgreSQL columns as Debezium's PostgreSQL connector maps them.
//!
//! Owns the per-column facts pgoutput does not send ([`TableMeta`]:
//! `NOT NULL` and the default expression, read from the catalog by the
//! caller), the type mapping under Debezium's type-mapping options
//! ([`TypeModes`]: `decimal.handling.mode`, `time.precision.mode`,
//! `binary.handling.mode`, `interval.handling.mode`, `hstore.handling.mode`,
//! `money.fraction.digits`; the conversions of the non-default ones live in
//! `pg_time` and `pg_values`) and the decoding of pgoutput's text values
//! (`proto_version=1`, text mode, `DateStyle=ISO`, `IntervalStyle=postgres`,
//! `bytea_output=hex`) into Connect values. It never talks to the database.

use std::sync::Arc;

use bytes::Bytes;
use regex::Regex;

pub(crate) use super::pg_modes::TypeModes;
use super::pg_modes::{BinaryMode, DecimalMode, HstoreMode, IntervalMode, TimePrecisionMode};
use super::pg_time::{self, TimeUnit};
use super::pg_values;
use super::{Decimal, Field, Schema, Text, Type, Value, DECIMAL_NAME};

/// Catalog facts about one column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnMeta {
    /// Column name (`pg_attribute.attname`).
    pub name: String,
    /// `pg_attribute.attnotnull`: the Connect schema is optional iff false.
    pub not_null: bool,
    /// `format_type(atttypid, atttypmod)`, for error messages.
    pub type_name: Option<String>,
    /// `pg_get_expr(adbin, adrelid)` (JDBC's `COLUMN_DEF`): Debezium turns
    /// simple literals into the schema's `default`.
    pub default_expr: Option<String>,
}

/// Catalog facts about the outbox table's columns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableMeta {
    /// Known columns; a column not listed counts as nullable without default.
    pub(crate) columns: Vec<ColumnMeta>,
}

impl TableMeta {
    /// Nothing known: every column nullable, no defaults (tests, or a
    /// catalog that could not be read).
    #[cfg(test)]
    pub(crate) fn unknown() -> Self {
        TableMeta::default()
    }

    /// Facts about `columns`.
    pub fn new(columns: Vec<ColumnMeta>) -> Self {
        TableMeta { columns }
    }

    /// The facts about the column called `name`.
    pub(crate) fn column(&self, name: &str) -> Option<&ColumnMeta> {
        self.columns.iter().find(|c| c.name == name)
    }
}

/// Well-known PostgreSQL type OIDs (`pg_type.oid`).
pub mod oid {
    /// `bool`.
    pub(crate) const BOOL: u32 = 16;
    /// `bytea`.
    pub(crate) const BYTEA: u32 = 17;
    /// `int8`.
    pub const INT8: u32 = 20;
    /// `int2`.
    pub const INT2: u32 = 21;
    /// `int4`.
    pub const INT4: u32 = 23;
    /// `text`.
    pub const TEXT: u32 = 25;
    /// `json`.
    pub(crate) const JSON: u32 = 114;
    /// `float4`.
    pub(crate) const FLOAT4: u32 = 700;
    /// `float8`.
    pub(crate) const FLOAT8: u32 = 701;
    /// `bpchar`.
    pub(crate) const BPCHAR: u32 = 1042;
    /// `varchar`.
    pub const VARCHAR: u32 = 1043;
    /// `date`.
    pub(crate) const DATE: u32 = 1082;
    /// `timestamp`.
    pub const TIMESTAMP: u32 = 1114;
    /// `timestamptz`.
    pub const TIMESTAMPTZ: u32 = 1184;
    /// `numeric`.
    pub(crate) const NUMERIC: u32 = 1700;
    /// `money`.
    pub(crate) const MONEY: u32 = 790;
    /// `time`.
    pub(crate) const TIME: u32 = 1083;
    /// `timetz`.
    pub(crate) const TIMETZ: u32 = 1266;
    /// `interval`.
    pub(crate) const INTERVAL: u32 = 1186;
    /// `uuid`.
    pub const UUID: u32 = 2950;
    /// `jsonb`.
    pub const JSONB: u32 = 3802;
}

/// Debezium logical names used here.
pub(crate) mod names {
    /// `uuid` columns.
    pub(crate) const UUID: &str = "io.debezium.data.Uuid";
    /// `json`/`jsonb` columns.
    pub(crate) const JSON: &str = "io.debezium.data.Json";
    /// `timestamp(0..3)`: epoch milliseconds.
    pub(crate) const TIMESTAMP: &str = "io.debezium.time.Timestamp";
    /// `timestamp(4..6)`: epoch microseconds.
    pub(crate) const MICRO_TIMESTAMP: &str = "io.debezium.time.MicroTimestamp";
    /// Epoch nanoseconds (never produced from PostgreSQL, accepted as a
    /// timestamp column type).
    pub(crate) const NANO_TIMESTAMP: &str = "io.debezium.time.NanoTimestamp";
    /// `timestamptz`: ISO-8601 text in UTC.
    pub(crate) const ZONED_TIMESTAMP: &str = "io.debezium.time.ZonedTimestamp";
    /// `date`: days since the epoch.
    pub(crate) const DATE: &str = "io.debezium.time.Date";
    /// `numeric` without a type modifier.
    pub(crate) const VARIABLE_SCALE_DECIMAL: &str = "io.debezium.data.VariableScaleDecimal";
    /// `time(0..3)`: milliseconds past midnight (INT32).
    pub(crate) const TIME: &str = "io.debezium.time.Time";
    /// `time(4..6)`: microseconds past midnight.
    pub(crate) const MICRO_TIME: &str = "io.debezium.time.MicroTime";
    /// Nanoseconds past midnight (`time.precision.mode=nanoseconds`).
    pub(crate) const NANO_TIME: &str = "io.debezium.time.NanoTime";
    /// `timetz`: ISO-8601 time at UTC.
    pub(crate) const ZONED_TIME: &str = "io.debezium.time.ZonedTime";
    /// `time.precision.mode=isostring` dates.
    pub(crate) const ISO_DATE: &str = "io.debezium.time.IsoDate";
    /// `time.precision.mode=isostring` times.
    pub(crate) const ISO_TIME: &str = "io.debezium.time.IsoTime";
    /// `time.precision.mode=isostring` timestamps.
    pub(crate) const ISO_TIMESTAMP: &str = "io.debezium.time.IsoTimestamp";
    /// Kafka Connect's date (`time.precision.mode=connect`).
    pub(crate) const CONNECT_DATE: &str = "org.apache.kafka.connect.data.Date";
    /// Kafka Connect's time (`time.precision.mode=connect`).
    pub(crate) const CONNECT_TIME: &str = "org.apache.kafka.connect.data.Time";
    /// Kafka Connect's timestamp (`time.precision.mode=connect`).
    pub(crate) const CONNECT_TIMESTAMP: &str = "org.apache.kafka.connect.data.Timestamp";
    /// `interval.handling.mode=numeric`: approximate microseconds.
    pub(crate) const MICRO_DURATION: &str = "io.debezium.time.MicroDuration";
    /// `interval.handling.mode=string`: ISO-8601 duration.
    pub(crate) const INTERVAL: &str = "io.debezium.time.Interval";
}

/// How a column's text value becomes a Connect value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PgType {
    /// `bool` → BOOLEAN.
    Bool,
    /// `int2` → INT16.
    Int2,
    /// `int4` → INT32.
    Int4,
    /// `int8` → INT64.
    Int8,
    /// `float4` → FLOAT32.
    Float4,
    /// `float8` → FLOAT64.
    Float8,
    /// `text`, `varchar`, `bpchar`, `uuid`, `json`, `jsonb` → STRING, text as is.
    Text,
    /// `bytea` (hex text) → BYTES.
    Bytea,
    /// `date` → INT32 days.
    Date,
    /// `timestamp(p)`: epoch ms when `p <= 3`, µs otherwise.
    Timestamp {
        /// Whether the schema is `io.debezium.time.Timestamp` (ms).
        millis: bool,
    },
    /// `timestamptz(p)` → ISO-8601 in UTC with `fraction` digits (`None`:
    /// as many as needed, Java's `ISO_OFFSET_DATE_TIME`).
    Timestamptz {
        /// Exact number of fraction digits.
        fraction: Option<u8>,
    },
    /// `numeric(p, s)` → Decimal BYTES.
    Numeric {
        /// The declared scale.
        scale: i32,
    },
    /// `numeric` without modifier → VariableScaleDecimal struct.
    VariableNumeric,
    /// `numeric` under `decimal.handling.mode` double (FLOAT64) or string.
    NumericLoose {
        /// Double or string.
        mode: DecimalMode,
    },
    /// `money` → Decimal at `digits` scale, FLOAT64 or STRING.
    Money {
        /// `decimal.handling.mode`.
        mode: DecimalMode,
        /// `money.fraction.digits`.
        digits: u8,
    },
    /// `bytea` → STRING (`binary.handling.mode` base64, base64-url-safe, hex).
    ByteaText(BinaryMode),
    /// `date` → `IsoDate` STRING.
    DateIso,
    /// `time(p)` in a unit.
    Time(TimeUnit),
    /// `timetz` → `ZonedTime` STRING at UTC.
    Timetz,
    /// `timestamp(p)` in nanoseconds or ISO text (milliseconds and
    /// microseconds are [`PgType::Timestamp`]).
    TimestampIn(TimeUnit),
    /// `interval` → `MicroDuration` INT64 or `Interval` STRING.
    Interval {
        /// `interval.handling.mode=string`.
        iso: bool,
    },
    /// `hstore` → `Json` STRING or MAP.
    Hstore {
        /// `hstore.handling.mode=map`.
        map: bool,
    },
    /// A member of a logical decoding message's JSON content: its Connect
    /// value comes with it and is never decoded from text.
    Content,
}

impl PgType {
    /// Whether the text value is already the Connect STRING.
    pub(crate) fn is_text(self) -> bool {
        matches!(self, PgType::Text)
    }
}

/// A column's Debezium mapping.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ColumnType {
    /// How to decode its text.
    pub(crate) pg: PgType,
    /// Its Connect schema (optional iff nullable, default from the catalog).
    pub(crate) schema: Arc<Schema>,
}

/// A text value that is not valid for its type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a valid {type_name} value as debezium maps it: {reason}")]
pub struct InvalidText {
    /// The PostgreSQL type.
    pub(crate) type_name: &'static str,
    /// The text (truncated).
    pub(crate) value: String,
    /// What is wrong or unsupported.
    pub(crate) reason: &'static str,
}

/// The name PostgreSQL (and Debezium's `column.typeName()`) gives a
/// well-known type OID.
pub(crate) fn type_name(type_oid: u32) -> Option<&'static str> {
    Some(match type_oid {
        oid::BOOL => "bool",
        oid::BYTEA => "bytea",
        oid::INT8 => "int8",
        oid::INT2 => "int2",
        oid::INT4 => "int4",
        oid::TEXT => "text",
        oid::JSON => "json",
        oid::FLOAT4 => "float4",
        oid::FLOAT8 => "float8",
        oid::BPCHAR => "bpchar",
        oid::VARCHAR => "varchar",
        oid::DATE => "date",
        oid::TIMESTAMP => "timestamp",
        oid::TIMESTAMPTZ => "timestamptz",
        oid::NUMERIC => "numeric",
        oid::MONEY => "money",
        oid::TIME => "time",
        oid::TIMETZ => "timetz",
        oid::INTERVAL => "interval",
        oid::UUID => "uuid",
        oid::JSONB => "jsonb",
        _ => return None,
    })
}

/// Maps a column under Debezium's defaults; `None` for a type walrelay
/// cannot map.
#[cfg(test)]
pub(crate) fn column_type(
    type_oid: u32,
    type_modifier: i32,
    meta: Option<&ColumnMeta>,
) -> Option<ColumnType> {
    column_type_with(type_oid, type_modifier, meta, TypeModes::default())
}

/// Whether the catalog calls the column's type hstore (an extension type
/// whose OID differs per database; `format_type` qualifies it when its
/// schema is not on the search path).
fn is_hstore(meta: Option<&ColumnMeta>) -> bool {
    meta.and_then(|m| m.type_name.as_deref())
        .is_some_and(|t| t == "hstore" || t.ends_with(".hstore"))
}

/// Maps a column as Debezium does under `modes`; `None` for a type
/// walrelay cannot map.
pub(crate) fn column_type_with(
    type_oid: u32,
    type_modifier: i32,
    meta: Option<&ColumnMeta>,
    modes: TypeModes,
) -> Option<ColumnType> {
    // Debezium's column precision: pgjdbc reports 6 without a modifier.
    let precision = if type_modifier < 0 { 6 } else { type_modifier };
    // A type-mapping option decides first; the guards of each mode leave
    // the default mapping to `fixed_type`.
    let (pg, schema) = value_mode_type(type_oid, meta, modes)
        .or_else(|| time_mode_type(type_oid, precision, modes))
        .or_else(|| fixed_type(type_oid, type_modifier, precision))?;
    let mut schema = schema.with_optional(!meta.is_some_and(|m| m.not_null));
    if let Some(expr) = meta.and_then(|m| m.default_expr.as_deref()) {
        schema.default = default_value(type_oid, pg, expr);
    }
    Some(ColumnType {
        pg,
        schema: Arc::new(schema),
    })
}

/// The mappings `hstore.handling.mode`, `binary.handling.mode` and
/// `decimal.handling.mode` change (hstore, bytea, numeric, money); `None`
/// where the mode leaves the default or the type is another.
fn value_mode_type(
    type_oid: u32,
    meta: Option<&ColumnMeta>,
    modes: TypeModes,
) -> Option<(PgType, Schema)> {
    Some(match type_oid {
        _ if is_hstore(meta) => match modes.hstore_handling_mode {
            HstoreMode::Json => (
                PgType::Hstore { map: false },
                Schema::new(Type::String).named(names::JSON, Some(1)),
            ),
            HstoreMode::Map => (PgType::Hstore { map: true }, {
                let mut m = Schema::new(Type::Map);
                m.key_schema = Some(Arc::new(Schema::new(Type::String)));
                m.value_schema = Some(Arc::new(Schema::optional(Type::String)));
                m
            }),
        },
        oid::BYTEA if modes.binary_handling_mode != BinaryMode::Bytes => (
            PgType::ByteaText(modes.binary_handling_mode),
            Schema::new(Type::String),
        ),
        oid::NUMERIC if modes.decimal_handling_mode != DecimalMode::Precise => (
            PgType::NumericLoose {
                mode: modes.decimal_handling_mode,
            },
            loose_decimal_schema(modes.decimal_handling_mode),
        ),
        oid::MONEY => {
            let mode = modes.decimal_handling_mode;
            let schema = match mode {
                DecimalMode::Precise => Schema::new(Type::Bytes)
                    .named(DECIMAL_NAME, Some(1))
                    .with_parameter("scale", &modes.money_fraction_digits.to_string()),
                _ => loose_decimal_schema(mode),
            };
            (
                PgType::Money {
                    mode,
                    digits: modes.money_fraction_digits,
                },
                schema,
            )
        }
        _ => return None,
    })
}

/// The mappings `time.precision.mode` and `interval.handling.mode`
/// change (date, time, timetz, timestamp, interval); `None` where the
/// adaptive modes leave the default or the type is another.
fn time_mode_type(type_oid: u32, precision: i32, modes: TypeModes) -> Option<(PgType, Schema)> {
    let time_mode = modes.time_precision_mode;
    Some(match type_oid {
        oid::DATE if time_mode == TimePrecisionMode::Isostring => (
            PgType::DateIso,
            Schema::new(Type::String).named(names::ISO_DATE, Some(1)),
        ),
        oid::DATE if time_mode == TimePrecisionMode::Connect => (
            PgType::Date,
            Schema::new(Type::Int32).named(names::CONNECT_DATE, Some(1)),
        ),
        oid::TIME => {
            let (unit, kind, name) = time_schema(time_mode, precision);
            (PgType::Time(unit), Schema::new(kind).named(name, Some(1)))
        }
        oid::TIMETZ => (
            PgType::Timetz,
            Schema::new(Type::String).named(names::ZONED_TIME, Some(1)),
        ),
        oid::TIMESTAMP
            if time_mode != TimePrecisionMode::Adaptive
                && time_mode != TimePrecisionMode::AdaptiveTimeMicroseconds =>
        {
            match time_mode {
                TimePrecisionMode::Isostring => (
                    PgType::TimestampIn(TimeUnit::Iso),
                    Schema::new(Type::String).named(names::ISO_TIMESTAMP, Some(1)),
                ),
                TimePrecisionMode::Connect => (
                    PgType::Timestamp { millis: true },
                    Schema::new(Type::Int64).named(names::CONNECT_TIMESTAMP, Some(1)),
                ),
                TimePrecisionMode::Microseconds => (
                    PgType::Timestamp { millis: false },
                    Schema::new(Type::Int64).named(names::MICRO_TIMESTAMP, Some(1)),
                ),
                _ => (
                    PgType::TimestampIn(TimeUnit::Nanos),
                    Schema::new(Type::Int64).named(names::NANO_TIMESTAMP, Some(1)),
                ),
            }
        }
        oid::INTERVAL => match modes.interval_handling_mode {
            IntervalMode::Numeric => (
                PgType::Interval { iso: false },
                Schema::new(Type::Int64).named(names::MICRO_DURATION, Some(1)),
            ),
            IntervalMode::String => (
                PgType::Interval { iso: true },
                Schema::new(Type::String).named(names::INTERVAL, Some(1)),
            ),
        },
        _ => return None,
    })
}

/// The mappings no option changes (and the defaults of those that do:
/// bytea as bytes, precise numeric, adaptive date and timestamp).
fn fixed_type(type_oid: u32, type_modifier: i32, precision: i32) -> Option<(PgType, Schema)> {
    Some(match type_oid {
        oid::BOOL => (PgType::Bool, Schema::new(Type::Boolean)),
        oid::INT2 => (PgType::Int2, Schema::new(Type::Int16)),
        oid::INT4 => (PgType::Int4, Schema::new(Type::Int32)),
        oid::INT8 => (PgType::Int8, Schema::new(Type::Int64)),
        oid::FLOAT4 => (PgType::Float4, Schema::new(Type::Float32)),
        oid::FLOAT8 => (PgType::Float8, Schema::new(Type::Float64)),
        oid::TEXT | oid::VARCHAR | oid::BPCHAR => (PgType::Text, Schema::new(Type::String)),
        oid::UUID => (
            PgType::Text,
            Schema::new(Type::String).named(names::UUID, Some(1)),
        ),
        oid::JSON | oid::JSONB => (
            PgType::Text,
            Schema::new(Type::String).named(names::JSON, Some(1)),
        ),
        oid::BYTEA => (PgType::Bytea, Schema::new(Type::Bytes)),
        oid::DATE => (
            PgType::Date,
            Schema::new(Type::Int32).named(names::DATE, Some(1)),
        ),
        oid::TIMESTAMP => {
            // Adaptive modes pick milliseconds up to precision 3.
            if precision <= 3 {
                (
                    PgType::Timestamp { millis: true },
                    Schema::new(Type::Int64).named(names::TIMESTAMP, Some(1)),
                )
            } else {
                (
                    PgType::Timestamp { millis: false },
                    Schema::new(Type::Int64).named(names::MICRO_TIMESTAMP, Some(1)),
                )
            }
        }
        oid::TIMESTAMPTZ => {
            // Debezium formats with `column.scale()` fraction digits (6
            // without a modifier); 0 means ISO_OFFSET_DATE_TIME's minimal form.
            let fraction = match type_modifier {
                m if m < 0 => Some(6),
                0 => None,
                m => Some(m.min(9) as u8),
            };
            (
                PgType::Timestamptz { fraction },
                Schema::new(Type::String).named(names::ZONED_TIMESTAMP, Some(1)),
            )
        }
        oid::NUMERIC => numeric_type(type_modifier),
        _ => return None,
    })
}

/// A precise numeric: a `Decimal` of the declared scale, or Debezium's
/// `VariableScaleDecimal` struct without a declared one.
fn numeric_type(type_modifier: i32) -> (PgType, Schema) {
    if type_modifier < 4 {
        return (PgType::VariableNumeric, variable_scale_decimal_schema());
    }
    let m = type_modifier - 4;
    let precision = (m >> 16) & 0xffff;
    // PostgreSQL 15 stores an 11-bit signed scale.
    let scale = ((m & 0x7ff) ^ 1024) - 1024;
    (
        PgType::Numeric { scale },
        Schema::new(Type::Bytes)
            .named(DECIMAL_NAME, Some(1))
            .with_parameter("scale", &scale.to_string())
            .with_parameter("connect.decimal.precision", &precision.to_string()),
    )
}

/// numeric or money under `decimal.handling.mode` double or string.
fn loose_decimal_schema(mode: DecimalMode) -> Schema {
    match mode {
        DecimalMode::String => Schema::new(Type::String),
        _ => Schema::new(Type::Float64),
    }
}

/// `TemporalPrecisionMode.getTimeBuilder(precision)`.
fn time_schema(mode: TimePrecisionMode, precision: i32) -> (TimeUnit, Type, &'static str) {
    let millis = (TimeUnit::Millis, Type::Int32, names::TIME);
    let micros = (TimeUnit::Micros, Type::Int64, names::MICRO_TIME);
    let nanos = (TimeUnit::Nanos, Type::Int64, names::NANO_TIME);
    match mode {
        TimePrecisionMode::Adaptive if precision <= 3 => millis,
        TimePrecisionMode::Adaptive if precision <= 6 => micros,
        TimePrecisionMode::Adaptive => nanos,
        TimePrecisionMode::AdaptiveTimeMicroseconds | TimePrecisionMode::Microseconds => micros,
        TimePrecisionMode::Nanoseconds => nanos,
        TimePrecisionMode::Isostring => (TimeUnit::Iso, Type::String, names::ISO_TIME),
        TimePrecisionMode::Connect => (TimeUnit::Millis, Type::Int32, names::CONNECT_TIME),
    }
}

/// `io.debezium.data.VariableScaleDecimal.schema()`.
pub(crate) fn variable_scale_decimal_schema() -> Schema {
    let mut s = Schema::structure(
        Some(names::VARIABLE_SCALE_DECIMAL),
        vec![
            Field {
                name: Arc::from("scale"),
                schema: Arc::new(Schema::new(Type::Int32)),
            },
            Field {
                name: Arc::from("value"),
                schema: Arc::new(Schema::new(Type::Bytes)),
            },
        ],
    );
    s.version = Some(1);
    s.doc = Some(Arc::from("Variable scaled decimal"));
    s
}

fn invalid(type_name: &'static str, text: &[u8], reason: &'static str) -> InvalidText {
    let shown = String::from_utf8_lossy(&text[..text.len().min(64)]).into_owned();
    InvalidText {
        type_name,
        value: shown,
        reason,
    }
}

/// Decodes one pgoutput text value.
pub(crate) fn decode(pg: PgType, text: &Bytes) -> Result<Value, InvalidText> {
    let s = std::str::from_utf8(text).map_err(|_| invalid("text", text, "not utf-8"))?;
    match pg {
        PgType::Text => Ok(Value::String(
            Text::new(text.clone()).map_err(|_| invalid("text", text, "not utf-8"))?,
        )),
        PgType::Bool => match s {
            "t" => Ok(Value::Boolean(true)),
            "f" => Ok(Value::Boolean(false)),
            _ => Err(invalid("bool", text, "expected t or f")),
        },
        PgType::Int2 => s
            .parse()
            .map(Value::Int16)
            .map_err(|_| invalid("int2", text, "not an int2")),
        PgType::Int4 => s
            .parse()
            .map(Value::Int32)
            .map_err(|_| invalid("int4", text, "not an int4")),
        PgType::Int8 => s
            .parse()
            .map(Value::Int64)
            .map_err(|_| invalid("int8", text, "not an int8")),
        PgType::Float4 => parse_float(s)
            .map(|v| Value::Float32(v as f32))
            .or_else(|| s.parse::<f32>().ok().map(Value::Float32))
            .ok_or_else(|| invalid("float4", text, "not a float4")),
        PgType::Float8 => parse_float(s)
            .map(Value::Float64)
            .or_else(|| s.parse::<f64>().ok().map(Value::Float64))
            .ok_or_else(|| invalid("float8", text, "not a float8")),
        PgType::Bytea => decode_bytea(s)
            .map(|b| Value::Bytes(Bytes::from(b)))
            .ok_or_else(|| invalid("bytea", text, "expected \\x hex format")),
        PgType::Date => pg_time::date_days(s)
            .and_then(|days| i32::try_from(days).ok())
            .map(Value::Int32)
            .ok_or_else(|| invalid("date", text, "expected YYYY-MM-DD[ BC]")),
        PgType::DateIso => pg_time::date_days(s)
            .map(|days| Value::String(Text::from(pg_time::iso_date(days))))
            .ok_or_else(|| invalid("date", text, "expected YYYY-MM-DD[ BC]")),
        PgType::Timestamp { millis } => {
            let unit = if millis {
                TimeUnit::Millis
            } else {
                TimeUnit::Micros
            };
            Ok(pg_time::timestamp_value(unit, timestamp_micros(s, text)?))
        }
        PgType::TimestampIn(unit) => Ok(pg_time::timestamp_value(unit, timestamp_micros(s, text)?)),
        PgType::Time(unit) => pg_time::time_value(unit, s)
            .ok_or_else(|| invalid("time", text, "expected HH:MM:SS[.ffffff]")),
        PgType::Timetz => decode_timetz(s, text),
        PgType::Interval { iso } => decode_interval(s, text, iso),
        PgType::NumericLoose { mode } => pg_values::numeric_loose(mode, s)
            .ok_or_else(|| invalid("numeric", text, "not a number")),
        PgType::Money { mode, digits } => pg_values::money_value(mode, digits, s)
            .ok_or_else(|| invalid("money", text, "expected lc_monetary C text ($1,234.56)")),
        PgType::ByteaText(mode) => decode_bytea(s)
            .map(|b| Value::String(Text::from(pg_values::binary_text(mode, &b))))
            .ok_or_else(|| invalid("bytea", text, "expected \\x hex format")),
        PgType::Hstore { map } => decode_hstore(s, text, map),
        PgType::Timestamptz { fraction } => decode_timestamptz(s, text, fraction),
        PgType::Numeric { scale } => Ok(match finite_numeric(s, text)? {
            Some(d) => Value::Decimal(rescale(d, scale)),
            None => Value::Null,
        }),
        PgType::VariableNumeric => {
            // convertDecimal: stripTrailingZeros, a negative scale set to 0.
            let Some(d) = finite_numeric(s, text)? else {
                return Ok(Value::Null);
            };
            let d = strip_trailing_zeros(d);
            Ok(Value::Struct(vec![
                Value::Int32(d.scale),
                Value::Bytes(Bytes::from(super::java::unscaled_bytes(&d))),
            ]))
        }
        PgType::Content => Err(invalid(
            "message content",
            text,
            "a content member has no text form",
        )),
    }
}

/// `timetz` text → Debezium's `ZonedTime` string (UTC).
fn decode_timetz(s: &str, text: &Bytes) -> Result<Value, InvalidText> {
    pg_time::zoned_time(s)
        .map(|t| Value::String(Text::from(t)))
        .ok_or_else(|| {
            invalid(
                "timetz",
                text,
                "expected HH:MM:SS[.ffffff]+HH[:MM] up to 24:00:00 (Debezium cannot read an offset with seconds)",
            )
        })
}

/// `interval` text → an ISO 8601 string (`iso`) or `MicroDuration`.
fn decode_interval(s: &str, text: &Bytes, iso: bool) -> Result<Value, InvalidText> {
    pg_time::PgInterval::parse(s)
        .map(|iv| {
            if iso {
                Value::String(Text::from(iv.iso()))
            } else {
                Value::Int64(iv.micro_duration())
            }
        })
        .ok_or_else(|| {
            invalid(
                "interval",
                text,
                "expected IntervalStyle postgres text (1 year 2 mons -3 days +04:05:06)",
            )
        })
}

/// `hstore` text → a Connect map (`map`) or its JSON text.
fn decode_hstore(s: &str, text: &Bytes, map: bool) -> Result<Value, InvalidText> {
    pg_values::parse_hstore(s)
        .map(|entries| {
            if map {
                pg_values::hstore_map(entries)
            } else {
                Value::String(Text::from(pg_values::hstore_json(&entries)))
            }
        })
        .ok_or_else(|| invalid("hstore", text, "expected hstore text (\"k\"=>\"v\")"))
}

/// `timestamptz` text → Debezium's `ZonedTimestamp` string in UTC with
/// `fraction` digits; `[-]infinity` passes through as PostgreSQL wrote it
/// (convertTimestampWithZone).
fn decode_timestamptz(s: &str, text: &Bytes, fraction: Option<u8>) -> Result<Value, InvalidText> {
    if s == "infinity" || s == "-infinity" {
        return Ok(Value::string(s));
    }
    let (micros, offset) = parse_timestamp(s).ok_or_else(|| {
        invalid(
            "timestamptz",
            text,
            "expected YYYY-MM-DD HH:MM:SS[.ffffff]+HH[:MM] (infinity is not supported)",
        )
    })?;
    let Some(offset) = offset else {
        return Err(invalid("timestamptz", text, "missing utc offset"));
    };
    Ok(Value::String(Text::from(zoned_timestamp(
        micros - offset * 1_000_000,
        fraction,
    ))))
}

/// `numeric` text as a decimal, `None` for NaN and the infinities: the
/// `precise` mode has no form for them. Debezium's converter throws
/// there, its `TableSchemaBuilder` logs that and leaves the field unset
/// (`event.converting.failure.handling.mode=warn`, the default), so the
/// record goes out with null, or with the column's default where
/// `Struct.get` reads one (observed with Debezium 3.6.1: the row is
/// published, the task keeps running).
fn finite_numeric(s: &str, text: &Bytes) -> Result<Option<Decimal>, InvalidText> {
    if let Some(d) = parse_numeric(s) {
        return Ok(Some(d));
    }
    if parse_float(s).is_some() {
        return Ok(None);
    }
    Err(invalid("numeric", text, "not a number"))
}

/// Whether `text` is a `numeric`'s NaN or infinity, which the `precise`
/// mode has no form for.
pub(crate) fn is_special_numeric(text: &[u8]) -> bool {
    matches!(text, b"NaN" | b"Infinity" | b"-Infinity")
}

/// The error of a NaN or infinity under the `precise` mode where
/// `router.numeric_nan = "error"` (the native default) refuses it.
pub(crate) fn unrepresentable(text: &[u8]) -> InvalidText {
    invalid(
        "numeric",
        text,
        "decimal.handling.mode=precise has no form for NaN or infinity; set router.numeric_nan = \"allow\" to publish null (or the column's default) as Debezium does, or use decimal.handling.mode string or double",
    )
}

/// The error of a NaN or infinity in a `numeric` column that is NOT NULL
/// without a default, under the `precise` mode: Debezium's change event
/// refuses the null its conversion leaves, and its task fails.
pub(crate) fn unrepresentable_in_required(text: &[u8]) -> InvalidText {
    invalid(
        "numeric",
        text,
        "decimal.handling.mode=precise has no form for NaN or infinity, and the column is NOT NULL without a default: Debezium's task fails on it (\"Invalid value: null used for required field\"); use decimal.handling.mode=string or double, or a nullable column",
    )
}

/// `timestamp` text (or `[-]infinity`) → epoch microseconds, as
/// Debezium's `asInstant` reads it (UTC).
fn timestamp_micros(s: &str, text: &Bytes) -> Result<i64, InvalidText> {
    match s {
        "infinity" => Ok(pg_time::POSITIVE_INFINITY_MICROS),
        "-infinity" => Ok(pg_time::NEGATIVE_INFINITY_MICROS),
        _ => parse_timestamp(s)
            .filter(|(_, offset)| offset.is_none())
            .map(|(m, _)| m)
            .ok_or_else(|| {
                invalid(
                    "timestamp",
                    text,
                    "expected YYYY-MM-DD HH:MM:SS[.ffffff][ BC]",
                )
            }),
    }
}

fn parse_float(s: &str) -> Option<f64> {
    match s {
        "NaN" => Some(f64::NAN),
        "Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

fn decode_bytea(s: &str) -> Option<Vec<u8>> {
    let hex = s.strip_prefix("\\x")?.as_bytes();
    if hex.len() % 2 != 0 {
        return None;
    }
    let nibble = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    hex.chunks(2)
        .map(|p| Some((nibble(p[0])? << 4) | nibble(p[1])?))
        .collect()
}

/// `[-]digits[.digits]` → BigDecimal with the text's scale (leading zeros
/// dropped, no negative zero).
pub(super) fn parse_numeric(s: &str) -> Option<Decimal> {
    let (negative, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    if int.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let all: String = format!("{int}{frac}");
    let trimmed = all.trim_start_matches('0');
    let digits = if trimmed.is_empty() { "0" } else { trimmed };
    Some(Decimal {
        negative: negative && digits != "0",
        digits: digits.into(),
        scale: i32::try_from(frac.len()).ok()?,
    })
}

/// `BigDecimal.stripTrailingZeros()` with a negative scale set back to 0.
fn strip_trailing_zeros(mut d: Decimal) -> Decimal {
    if &*d.digits == "0" {
        d.scale = 0;
        return d;
    }
    let keep = d.digits.trim_end_matches('0').len();
    let strip = (d.digits.len() - keep).min(usize::try_from(d.scale.max(0)).unwrap_or(0));
    if strip > 0 {
        let digits = d.digits[..d.digits.len() - strip].to_owned();
        d.digits = digits.into();
        d.scale -= strip as i32;
    }
    d
}

/// Raises the scale to the column's (`withScaleAdjustedIfNeeded`).
fn rescale(mut d: Decimal, scale: i32) -> Decimal {
    if scale > d.scale {
        let extra = (scale - d.scale) as usize;
        if &*d.digits != "0" {
            let mut digits = d.digits.into_string();
            digits.push_str(&"0".repeat(extra));
            d.digits = digits.into();
        }
        d.scale = scale;
    }
    d
}

/// Days from 1970-01-01 to a proleptic Gregorian date (ISO year, 0 = 1 BC).
pub(super) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

pub(super) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn num(s: &str, len: usize) -> Option<(u32, &str)> {
    let part = s.get(..len)?;
    if !part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((part.parse().ok()?, &s[len..]))
}

/// `YYYY-MM-DD[ BC]` → (days since epoch, rest).
pub(super) fn parse_date(s: &str) -> Option<(i64, &str)> {
    let dash = s.find('-')?;
    let year: i64 = s[..dash].parse().ok().filter(|_| dash >= 4)?;
    let rest = &s[dash + 1..];
    let (month, rest) = num(rest, 2)?;
    let rest = rest.strip_prefix('-')?;
    let (day, rest) = num(rest, 2)?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    // " BC" can only follow the whole value; the caller passes what is left.
    let (year, rest) = match rest.strip_suffix(" BC") {
        Some(r) => (1 - year, r),
        None => (year, rest),
    };
    Some((days_from_civil(year, month, day), rest))
}

/// `YYYY-MM-DD HH:MM:SS[.f{1,6}][+HH[:MM[:SS]]][ BC]` → (local µs since
/// epoch, offset seconds east of UTC).
fn parse_timestamp(s: &str) -> Option<(i64, Option<i64>)> {
    let (days, rest) = parse_date(s)?;
    let rest = rest.strip_prefix(' ')?;
    let (h, rest) = num(rest, 2)?;
    let rest = rest.strip_prefix(':')?;
    let (mi, rest) = num(rest, 2)?;
    let rest = rest.strip_prefix(':')?;
    let (sec, mut rest) = num(rest, 2)?;
    if h > 24 || mi > 59 || sec > 60 {
        return None;
    }
    let mut micros: i64 = 0;
    if let Some(r) = rest.strip_prefix('.') {
        let n = r.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 || n > 6 {
            return None;
        }
        micros = r[..n].parse::<i64>().ok()? * 10_i64.pow((6 - n) as u32);
        rest = &r[n..];
    }
    let mut offset = None;
    if let Some(sign) = rest.chars().next().filter(|c| *c == '+' || *c == '-') {
        let r = &rest[1..];
        let (oh, mut r) = num(r, 2)?;
        let mut secs = i64::from(oh) * 3600;
        if let Some(x) = r.strip_prefix(':') {
            let (om, x) = num(x, 2)?;
            secs += i64::from(om) * 60;
            r = x;
            if let Some(y) = r.strip_prefix(':') {
                let (os, y) = num(y, 2)?;
                secs += i64::from(os);
                r = y;
            }
        }
        offset = Some(if sign == '-' { -secs } else { secs });
        rest = r;
    }
    if !rest.is_empty() {
        return None;
    }
    let local = ((days * 24 + i64::from(h)) * 60 + i64::from(mi)) * 60 + i64::from(sec);
    Some((local * 1_000_000 + micros, offset))
}

/// `ZonedTimestamp.toIsoString` of a UTC instant: `ISO_LOCAL_DATE` year
/// rules, seconds always, `fraction` digits exactly (or as many as needed,
/// trailing zeros dropped, when `None`), `Z`.
pub(crate) fn zoned_timestamp(utc_micros: i64, fraction: Option<u8>) -> String {
    let secs = utc_micros.div_euclid(1_000_000);
    let micros = utc_micros.rem_euclid(1_000_000);
    let days = secs.div_euclid(86_400);
    let tod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let mut out = String::with_capacity(32);
    if y > 9999 {
        out.push_str(&format!("+{y}"));
    } else if y < 0 {
        out.push_str(&format!("-{:04}", -y));
    } else {
        out.push_str(&format!("{y:04}"));
    }
    out.push_str(&format!(
        "-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        tod / 3600,
        tod / 60 % 60,
        tod % 60
    ));
    let nanos = format!("{:09}", micros * 1000);
    match fraction {
        Some(w) if w > 0 => {
            out.push('.');
            out.push_str(&nanos[..usize::from(w.min(9))]);
        }
        _ => {
            if micros != 0 {
                out.push('.');
                out.push_str(nanos.trim_end_matches('0'));
            }
        }
    }
    out.push('Z');
    out
}

fn function_default() -> &'static Regex {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"^\(?[A-Za-z0-9_.]+\((?:.+(?:, ?.+)*)?\)").expect("static regex compiles")
    })
}

/// `PostgresDefaultValueConverter.extractDefault`: a function call or
/// `current_timestamp`-like keyword gives the placeholder; otherwise the
/// text inside the first pair of quotes, or the raw text; `NULL::` is null.
fn extract_default<'a>(expr: &'a str, placeholder: &'a str) -> Option<&'a str> {
    const CURRENT: [&str; 5] = [
        "current_timestamp",
        "current_time",
        "current_date",
        "localtime",
        "localtimestamp",
    ];
    if function_default().is_match(expr) || CURRENT.contains(&expr.to_lowercase().as_str()) {
        return Some(placeholder);
    }
    if !expr.contains('\'') {
        return if expr.starts_with("NULL::") {
            None
        } else {
            Some(expr)
        };
    }
    let start = expr.find('\'')? + 1;
    let end = expr[start..].find('\'')? + start;
    Some(&expr[start..end])
}

/// The schema default Debezium derives from a column default expression;
/// `None` where Debezium would have none (unsupported type, expression it
/// cannot parse, NULL).
fn default_value(type_oid: u32, pg: PgType, expr: &str) -> Option<Value> {
    let name = type_name(type_oid)?;
    let trimmed = matches!(
        name,
        "bool"
            | "numeric"
            | "float4"
            | "float8"
            | "int2"
            | "int4"
            | "int8"
            | "uuid"
            | "date"
            | "timestamp"
            | "timestamptz"
    );
    let expr = if trimmed { expr.trim() } else { expr };
    let null_checked = matches!(
        name,
        "bool" | "numeric" | "float4" | "float8" | "int2" | "int4" | "int8"
    );
    if null_checked && expr.starts_with("NULL::") {
        return None;
    }
    let text = |placeholder: &'static str| extract_default(expr, placeholder);
    let v = match name {
        "bool" => Value::Boolean(text("false")?.eq_ignore_ascii_case("true")),
        "bpchar" | "varchar" | "text" => Value::String(Text::from(text("")?)),
        "json" | "jsonb" => Value::String(Text::from(text("{}")?)),
        "uuid" => uuid_default(text("00000000-0000-0000-0000-000000000000")?)?,
        "int2" => Value::Int16(text("0")?.parse().ok()?),
        "int4" => Value::Int32(text("0")?.parse().ok()?),
        "int8" => Value::Int64(text("0")?.parse().ok()?),
        "float4" => Value::Float32(text("0.0")?.parse().ok()?),
        "float8" => Value::Float64(text("0.0")?.parse().ok()?),
        "numeric" => {
            let d = parse_numeric(text("0.0")?)?;
            match pg {
                PgType::Numeric { scale } => Value::Decimal(rescale(d, scale)),
                // decimal.handling.mode double or string: Debezium converts
                // the default as it converts a value.
                PgType::NumericLoose { .. } => {
                    decode(pg, &Bytes::copy_from_slice(text("0.0")?.as_bytes())).ok()?
                }
                // Structs cannot be defaults (KAFKA-12694): Debezium drops it.
                _ => return None,
            }
        }
        // interval.handling.mode=numeric: Debezium's default converter
        // parses the literal into a MicroDuration; under `string` it gives
        // none (observed).
        "interval" if pg == (PgType::Interval { iso: false }) => {
            decode(pg, &Bytes::copy_from_slice(text("00:00:00")?.as_bytes())).ok()?
        }
        // A time default is converted as a value is, in every mode.
        "time" => decode(pg, &Bytes::copy_from_slice(text("00:00:00")?.as_bytes())).ok()?,
        "date" if pg != PgType::Date => {
            decode(pg, &Bytes::copy_from_slice(text("1970-01-01")?.as_bytes())).ok()?
        }
        "timestamp" if matches!(pg, PgType::TimestampIn(_)) => {
            decode(pg, &Bytes::copy_from_slice(text("1970-01-01")?.as_bytes())).ok()?
        }
        "date" => date_default(text("1970-01-01")?)?,
        "timestamp" => timestamp_default(text("1970-01-01")?, pg)?,
        "timestamptz" => timestamptz_default(text("1970-01-01")?, pg)?,
        _ => return None,
    };
    Some(v)
}

/// A uuid default: only the canonical 8-4-4-4-12 hex form, lowercased.
fn uuid_default(u: &str) -> Option<Value> {
    let ok = u.len() == 36
        && u.bytes().enumerate().all(|(i, b)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                b == b'-'
            } else {
                b.is_ascii_hexdigit()
            }
        });
    if !ok {
        return None;
    }
    Some(Value::String(Text::from(u.to_ascii_lowercase())))
}

/// A date default as Connect's days since the epoch; nothing may follow
/// the date.
fn date_default(t: &str) -> Option<Value> {
    let (days, rest) = parse_date(t)?;
    if !rest.is_empty() {
        return None;
    }
    Some(Value::Int32(i32::try_from(days).ok()?))
}

/// A timestamp default (a bare date is its midnight) in the column's
/// unit: milliseconds or microseconds.
fn timestamp_default(t: &str, pg: PgType) -> Option<Value> {
    let micros = match parse_timestamp(t) {
        Some((m, None)) => m,
        _ => parse_date(t).filter(|(_, r)| r.is_empty())?.0 * 86_400_000_000,
    };
    Some(match pg {
        PgType::Timestamp { millis: true } => Value::Int64(micros.div_euclid(1000)),
        _ => Value::Int64(micros),
    })
}

/// A timestamptz default (a bare date is its UTC midnight) as Debezium's
/// `ZonedTimestamp` string.
fn timestamptz_default(t: &str, pg: PgType) -> Option<Value> {
    let utc = match parse_timestamp(t) {
        Some((m, off)) => m - off.unwrap_or(0) * 1_000_000,
        None => parse_date(t).filter(|(_, r)| r.is_empty())?.0 * 86_400_000_000,
    };
    let fraction = match pg {
        PgType::Timestamptz { fraction } => fraction,
        _ => None,
    };
    Some(Value::String(Text::from(zoned_timestamp(utc, fraction))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> Value {
        decode(
            PgType::Numeric { scale: 2 },
            &Bytes::copy_from_slice(s.as_bytes()),
        )
        .unwrap()
    }

    fn meta(not_null: bool, default: Option<&str>) -> ColumnMeta {
        ColumnMeta {
            name: "c".into(),
            not_null,
            type_name: None,
            default_expr: default.map(str::to_owned),
        }
    }

    fn t(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn schemas_follow_debezium_defaults() {
        let c = column_type(oid::UUID, -1, Some(&meta(true, None))).unwrap();
        assert_eq!(c.schema.name.as_deref(), Some(names::UUID));
        assert!(!c.schema.optional);
        let c = column_type(oid::JSONB, -1, None).unwrap();
        assert!(c.schema.optional);
        assert_eq!(c.schema.version, Some(1));
        assert_eq!(
            column_type(oid::TIMESTAMP, 3, None)
                .unwrap()
                .schema
                .name
                .as_deref(),
            Some(names::TIMESTAMP)
        );
        assert_eq!(
            column_type(oid::TIMESTAMP, -1, None)
                .unwrap()
                .schema
                .name
                .as_deref(),
            Some(names::MICRO_TIMESTAMP)
        );
        // numeric(10,2): typmod = (10 << 16 | 2) + 4
        let n = column_type(oid::NUMERIC, (10 << 16 | 2) + 4, None).unwrap();
        assert_eq!(n.pg, PgType::Numeric { scale: 2 });
        assert_eq!(n.schema.decimal_scale(), Some(2));
        assert_eq!(n.schema.parameters[1].1.as_ref(), "10");
        assert_eq!(
            column_type(oid::NUMERIC, -1, None).unwrap().pg,
            PgType::VariableNumeric
        );
        assert!(column_type(600, -1, None).is_none(), "point is not mapped");
    }

    #[test]
    fn defaults_follow_the_type_modes() {
        let with = |oid: u32, typmod: i32, expr: &str, m: TypeModes| {
            column_type_with(oid, typmod, Some(&meta(true, Some(expr))), m)
                .unwrap()
                .schema
                .default
                .clone()
        };
        let double = TypeModes {
            decimal_handling_mode: DecimalMode::Double,
            ..TypeModes::default()
        };
        let numeric_10_2 = ((10 << 16) | 2) + 4;
        assert_eq!(
            with(oid::NUMERIC, numeric_10_2, "1.5", double),
            Some(Value::Float64(1.5))
        );
        let d = TypeModes::default();
        assert_eq!(
            with(oid::INTERVAL, -1, "'1 day'::interval", d),
            Some(Value::Int64(86_400_000_000))
        );
        assert_eq!(
            with(oid::TIME, -1, "'12:34:56.789'::time without time zone", d),
            Some(Value::Int64(45_296_789_000))
        );
        let iso = TypeModes {
            interval_handling_mode: IntervalMode::String,
            ..TypeModes::default()
        };
        assert_eq!(with(oid::INTERVAL, -1, "'1 day'::interval", iso), None);
    }

    #[test]
    fn schemas_follow_the_type_modes() {
        let modes = |f: &dyn Fn(&mut TypeModes)| {
            let mut m = TypeModes::default();
            f(&mut m);
            m
        };
        let name = |oid: u32, typmod: i32, m: TypeModes| {
            let c = column_type_with(oid, typmod, None, m).unwrap();
            (c.schema.kind, c.schema.name.as_deref().map(str::to_owned))
        };
        let d = TypeModes::default();
        assert_eq!(
            name(oid::TIME, -1, d),
            (Type::Int64, Some(names::MICRO_TIME.into()))
        );
        assert_eq!(
            name(oid::TIME, 3, d),
            (Type::Int32, Some(names::TIME.into()))
        );
        assert_eq!(
            name(oid::TIMETZ, -1, d),
            (Type::String, Some(names::ZONED_TIME.into()))
        );
        assert_eq!(
            name(oid::INTERVAL, -1, d),
            (Type::Int64, Some(names::MICRO_DURATION.into()))
        );
        let connect = modes(&|m| m.time_precision_mode = TimePrecisionMode::Connect);
        assert_eq!(
            name(oid::DATE, -1, connect),
            (Type::Int32, Some(names::CONNECT_DATE.into()))
        );
        assert_eq!(
            name(oid::TIME, 6, connect),
            (Type::Int32, Some(names::CONNECT_TIME.into()))
        );
        assert_eq!(
            name(oid::TIMESTAMP, 6, connect),
            (Type::Int64, Some(names::CONNECT_TIMESTAMP.into()))
        );
        let nanos = modes(&|m| m.time_precision_mode = TimePrecisionMode::Nanoseconds);
        assert_eq!(
            name(oid::TIMESTAMP, 3, nanos),
            (Type::Int64, Some(names::NANO_TIMESTAMP.into()))
        );
        let iso = modes(&|m| m.time_precision_mode = TimePrecisionMode::Isostring);
        assert_eq!(
            name(oid::TIMESTAMP, 3, iso),
            (Type::String, Some(names::ISO_TIMESTAMP.into()))
        );
        let dbl = modes(&|m| m.decimal_handling_mode = DecimalMode::Double);
        assert_eq!(name(oid::NUMERIC, -1, dbl), (Type::Float64, None));
        assert_eq!(name(oid::MONEY, -1, dbl), (Type::Float64, None));
        let money = column_type_with(oid::MONEY, -1, None, d).unwrap();
        assert_eq!(money.schema.decimal_scale(), Some(2));
        assert_eq!(money.schema.parameters.len(), 1, "no precision parameter");
        let hex = modes(&|m| m.binary_handling_mode = BinaryMode::Hex);
        assert_eq!(name(oid::BYTEA, -1, hex), (Type::String, None));
        let hstore = ColumnMeta {
            name: "h".into(),
            not_null: false,
            type_name: Some("hstore".into()),
            default_expr: None,
        };
        let map = modes(&|m| m.hstore_handling_mode = HstoreMode::Map);
        let c = column_type_with(16_385, -1, Some(&hstore), map).unwrap();
        assert_eq!(c.schema.kind, Type::Map);
        assert!(c.schema.value_schema.as_ref().unwrap().optional);
        let c = column_type_with(16_385, -1, Some(&hstore), d).unwrap();
        assert_eq!(c.schema.name.as_deref(), Some(names::JSON));
        assert_eq!(
            decode(c.pg, &t(r#""a"=>"1", "b"=>NULL"#)).unwrap(),
            Value::string(r#"{"a":"1","b":null}"#)
        );
    }

    #[test]
    fn text_values_decode() {
        assert_eq!(decode(PgType::Bool, &t("t")).unwrap(), Value::Boolean(true));
        assert_eq!(decode(PgType::Int4, &t("-7")).unwrap(), Value::Int32(-7));
        assert_eq!(
            decode(PgType::Float8, &t("1e+20")).unwrap(),
            Value::Float64(1e20)
        );
        assert_eq!(
            decode(PgType::Float4, &t("-Infinity")).unwrap(),
            Value::Float32(f32::NEG_INFINITY)
        );
        assert_eq!(
            decode(PgType::Bytea, &t("\\x76616c756531")).unwrap(),
            Value::Bytes(Bytes::from_static(b"value1"))
        );
        assert_eq!(
            decode(PgType::Date, &t("2019-03-24")).unwrap(),
            Value::Int32(17_979)
        );
        assert_eq!(
            decode(PgType::Date, &t("1969-12-31")).unwrap(),
            Value::Int32(-1)
        );
        // shouldSupportAllFeatures / shouldConvertMicrosecondsTimestampToMilliseconds
        assert_eq!(
            decode(
                PgType::Timestamp { millis: false },
                &t("2019-03-24 20:52:59")
            )
            .unwrap(),
            Value::Int64(1_553_460_779_000_000)
        );
        assert_eq!(
            decode(
                PgType::Timestamp { millis: true },
                &t("2019-03-24 20:52:59.123")
            )
            .unwrap(),
            Value::Int64(1_553_460_779_123)
        );
        assert_eq!(
            decode(
                PgType::Timestamp { millis: false },
                &t("1969-12-31 23:59:59.5")
            )
            .unwrap(),
            Value::Int64(-500_000)
        );
        assert_eq!(
            decode(PgType::Timestamp { millis: false }, &t("infinity")).unwrap(),
            Value::Int64(pg_time::POSITIVE_INFINITY_MICROS)
        );
        assert_eq!(
            dec("123.45"),
            Value::Decimal(Decimal {
                negative: false,
                digits: "12345".into(),
                scale: 2
            })
        );
        assert_eq!(
            dec("-0.50"),
            Value::Decimal(Decimal {
                negative: true,
                digits: "50".into(),
                scale: 2
            })
        );
        assert_eq!(
            decode(PgType::Numeric { scale: 2 }, &t("NaN")).unwrap(),
            Value::Null
        );
        assert_eq!(
            decode(PgType::VariableNumeric, &t("-Infinity")).unwrap(),
            Value::Null
        );
        assert!(decode(PgType::Numeric { scale: 2 }, &t("nan")).is_err());
        // Debezium strips trailing zeros: 1.50 is 15 at scale 1, 100 stays 100.
        assert_eq!(
            decode(PgType::VariableNumeric, &t("1.50")).unwrap(),
            Value::Struct(vec![
                Value::Int32(1),
                Value::Bytes(Bytes::from_static(&[0x0f]))
            ])
        );
        assert_eq!(
            decode(PgType::VariableNumeric, &t("100")).unwrap(),
            Value::Struct(vec![
                Value::Int32(0),
                Value::Bytes(Bytes::from_static(&[0x64]))
            ])
        );
        assert_eq!(
            decode(PgType::VariableNumeric, &t("0.000")).unwrap(),
            Value::Struct(vec![
                Value::Int32(0),
                Value::Bytes(Bytes::from_static(&[0x00]))
            ])
        );
    }

    #[test]
    fn zoned_timestamps_are_utc_iso() {
        let z = |s: &str, f: Option<u8>| match decode(PgType::Timestamptz { fraction: f }, &t(s))
            .unwrap()
        {
            Value::String(t) => t.as_str().to_owned(),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            z("2019-03-24 20:52:59+01", Some(6)),
            "2019-03-24T19:52:59.000000Z"
        );
        assert_eq!(
            z("2019-03-24 20:52:59.5-05:30", Some(6)),
            "2019-03-25T02:22:59.500000Z"
        );
        assert_eq!(
            z("2019-03-24 20:52:59.5+00", None),
            "2019-03-24T20:52:59.5Z"
        );
        assert_eq!(z("2019-03-24 20:52:59+00", None), "2019-03-24T20:52:59Z");
        assert_eq!(
            z("2019-03-24 20:52:59.123456+00", Some(3)),
            "2019-03-24T20:52:59.123Z"
        );
    }

    #[test]
    fn defaults_follow_debezium_mappers() {
        let d = |oid: u32, typmod: i32, expr: &str| {
            column_type(oid, typmod, Some(&meta(false, Some(expr))))
                .unwrap()
                .schema
                .default
                .clone()
        };
        assert_eq!(d(oid::BOOL, -1, "false"), Some(Value::Boolean(false)));
        assert_eq!(
            d(oid::VARCHAR, -1, "'abc'::character varying"),
            Some(Value::string("abc"))
        );
        assert_eq!(
            d(oid::INT4, -1, "nextval('outbox_seq'::regclass)"),
            Some(Value::Int32(0))
        );
        assert_eq!(d(oid::INT4, -1, "'-1'::integer"), Some(Value::Int32(-1)));
        assert_eq!(
            d(oid::UUID, -1, "gen_random_uuid()"),
            Some(Value::string("00000000-0000-0000-0000-000000000000"))
        );
        assert_eq!(d(oid::TIMESTAMP, -1, "now()"), Some(Value::Int64(0)));
        assert_eq!(d(oid::JSONB, -1, "'{}'::jsonb"), Some(Value::string("{}")));
        assert_eq!(d(oid::INT4, -1, "NULL::integer"), None);
        assert_eq!(d(oid::BYTEA, -1, "'\\x00'::bytea"), None);
    }
}
