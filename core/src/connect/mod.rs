//! Kafka Connect's data model, its converters and Debezium's PostgreSQL type
//! mapping, reproduced byte for byte.
//!
//! Owns [`Schema`] and [`Value`] (Connect's `Schema`/`Struct`/`List` with
//! Debezium's logical names), the converters a Kafka Connect worker or
//! Debezium Server puts behind the EventRouter ([`convert`]), Jackson's JSON
//! rendering ([`json`]), Java's `toString` rules for numbers ([`java`]),
//! `table.expand.json.payload`'s schema inference ([`expand`]) and the
//! PostgreSQL text value → Connect value mapping ([`pg`]). It must never do
//! I/O or log: everything here is a pure function of its inputs, so the
//! router can call it on the hot path.

pub mod cloudevents;
pub mod config;
pub mod convert;
pub mod expand;
pub mod java;
pub(crate) mod json;
pub(crate) mod message;
pub mod pg;
pub mod pg_modes;
pub(crate) mod pg_time;
pub(crate) mod pg_values;
pub mod transaction;
pub mod transforms;

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

/// Connect's `Schema.Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Type {
    /// `INT8`.
    Int8,
    /// `INT16`.
    Int16,
    /// `INT32`.
    Int32,
    /// `INT64`.
    Int64,
    /// `FLOAT32`.
    Float32,
    /// `FLOAT64`.
    Float64,
    /// `BOOLEAN`.
    Boolean,
    /// `STRING`.
    String,
    /// `BYTES`.
    Bytes,
    /// `ARRAY`.
    Array,
    /// `MAP`.
    Map,
    /// `STRUCT`.
    Struct,
}

impl Type {
    /// The name Java's `Schema.Type.toString()` gives.
    pub(crate) fn java_name(self) -> &'static str {
        match self {
            Type::Int8 => "INT8",
            Type::Int16 => "INT16",
            Type::Int32 => "INT32",
            Type::Int64 => "INT64",
            Type::Float32 => "FLOAT32",
            Type::Float64 => "FLOAT64",
            Type::Boolean => "BOOLEAN",
            Type::String => "STRING",
            Type::Bytes => "BYTES",
            Type::Array => "ARRAY",
            Type::Map => "MAP",
            Type::Struct => "STRUCT",
        }
    }

    /// The `type` JsonConverter writes in a schema.
    pub(crate) fn json_name(self) -> &'static str {
        match self {
            Type::Int8 => "int8",
            Type::Int16 => "int16",
            Type::Int32 => "int32",
            Type::Int64 => "int64",
            Type::Float32 => "float",
            Type::Float64 => "double",
            Type::Boolean => "boolean",
            Type::String => "string",
            Type::Bytes => "bytes",
            Type::Array => "array",
            Type::Map => "map",
            Type::Struct => "struct",
        }
    }
}

/// Kafka's logical name of a decimal (`org.apache.kafka.connect.data.Decimal`).
pub(crate) const DECIMAL_NAME: &str = "org.apache.kafka.connect.data.Decimal";

/// One field of a struct schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// Field name.
    pub name: Arc<str>,
    /// Field schema.
    pub schema: Arc<Schema>,
}

/// Connect's `ConnectSchema`: equality compares every attribute, as Java's
/// `ConnectSchema.equals` does.
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    /// The physical type.
    pub(crate) kind: Type,
    /// Whether null is allowed.
    pub(crate) optional: bool,
    /// Logical name (`io.debezium.data.Json`, ...).
    pub(crate) name: Option<Arc<str>>,
    /// Schema version.
    pub(crate) version: Option<i32>,
    /// Documentation.
    pub(crate) doc: Option<Arc<str>>,
    /// Parameters, in insertion order (Java's `LinkedHashMap`).
    pub(crate) parameters: Vec<(Arc<str>, Arc<str>)>,
    /// Default value; `Struct.get` and JsonConverter substitute it for null.
    pub(crate) default: Option<Value>,
    /// Struct fields, in order.
    pub(crate) fields: Vec<Field>,
    /// Map key schema.
    pub(crate) key_schema: Option<Arc<Schema>>,
    /// Array element schema, or map value schema.
    pub(crate) value_schema: Option<Arc<Schema>>,
}

impl Schema {
    /// A required schema of `kind` with nothing else set.
    pub fn new(kind: Type) -> Self {
        Schema {
            kind,
            optional: false,
            name: None,
            version: None,
            doc: None,
            parameters: Vec::new(),
            default: None,
            fields: Vec::new(),
            key_schema: None,
            value_schema: None,
        }
    }

    /// An optional schema of `kind`.
    pub(crate) fn optional(kind: Type) -> Self {
        Schema::new(kind).with_optional(true)
    }

    /// Sets optionality.
    pub(crate) fn with_optional(mut self, optional: bool) -> Self {
        self.optional = optional;
        self
    }

    /// Sets the logical name and version.
    pub fn named(mut self, name: &str, version: Option<i32>) -> Self {
        self.name = Some(Arc::from(name));
        self.version = version;
        self
    }

    /// Adds a parameter.
    pub(crate) fn with_parameter(mut self, key: &str, value: &str) -> Self {
        self.parameters.push((Arc::from(key), Arc::from(value)));
        self
    }

    /// A struct schema with `fields`.
    pub fn structure(name: Option<&str>, fields: Vec<Field>) -> Self {
        let mut s = Schema::new(Type::Struct);
        s.name = name.map(Arc::from);
        s.fields = fields;
        s
    }

    /// An array schema of `items`.
    pub(crate) fn array(items: Arc<Schema>) -> Self {
        let mut s = Schema::new(Type::Array);
        s.value_schema = Some(items);
        s
    }

    /// Position of the field called `name`.
    pub(crate) fn field_index(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| &*f.name == name)
    }

    /// Java's `ConnectSchema.toString()`: `Schema{name:TYPE}` or `Schema{TYPE}`.
    pub(crate) fn java_string(&self) -> String {
        match &self.name {
            Some(n) => format!("Schema{{{n}:{}}}", self.kind.java_name()),
            None => format!("Schema{{{}}}", self.kind.java_name()),
        }
    }

    /// Whether this is Kafka's Decimal logical type.
    pub(crate) fn is_decimal(&self) -> bool {
        self.kind == Type::Bytes && self.name.as_deref() == Some(DECIMAL_NAME)
    }

    /// The `scale` parameter of a Decimal schema.
    pub(crate) fn decimal_scale(&self) -> Option<i32> {
        self.parameters
            .iter()
            .find(|(k, _)| &**k == "scale")
            .and_then(|(_, v)| v.parse().ok())
    }
}

/// UTF-8 text held in shared bytes, so a PostgreSQL text value becomes a
/// Connect STRING without a copy.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Text(Bytes);

impl Text {
    /// Checks that `bytes` is UTF-8.
    pub(crate) fn new(bytes: Bytes) -> Result<Text, std::str::Utf8Error> {
        std::str::from_utf8(&bytes)?;
        Ok(Text(bytes))
    }

    /// The text.
    pub(crate) fn as_str(&self) -> &str {
        // Every constructor checked or produced UTF-8.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }

    /// The UTF-8 bytes, shared.
    pub(crate) fn bytes(&self) -> &Bytes {
        &self.0
    }
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        Text(Bytes::from(s))
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Text {
        Text(Bytes::copy_from_slice(s.as_bytes()))
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// A `java.math.BigDecimal`: sign, unscaled magnitude in decimal digits, scale.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Decimal {
    /// Whether the value is below zero (never set for zero).
    pub(crate) negative: bool,
    /// Unscaled magnitude: ASCII digits, no leading zeros, `0` for zero.
    pub(crate) digits: Box<str>,
    /// Digits after the decimal point.
    pub(crate) scale: i32,
}

/// A Connect value. Struct values are positional: field `i` of the schema
/// is element `i`.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// null.
    Null,
    /// `Boolean`.
    Boolean(bool),
    /// `Byte`.
    Int8(i8),
    /// `Short`.
    Int16(i16),
    /// `Integer`.
    Int32(i32),
    /// `Long`.
    Int64(i64),
    /// `Float`.
    Float32(f32),
    /// `Double`.
    Float64(f64),
    /// `String`.
    String(Text),
    /// `byte[]`.
    Bytes(Bytes),
    /// `BigDecimal` (the value of a Decimal logical schema).
    Decimal(Decimal),
    /// `List`.
    Array(Vec<Value>),
    /// `Map`, in insertion order.
    Map(Vec<(Value, Value)>),
    /// `Struct`, one value per schema field.
    Struct(Vec<Value>),
}

impl Value {
    /// Whether this is null.
    pub(crate) fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// A STRING value.
    pub fn string(s: impl Into<Text>) -> Value {
        Value::String(s.into())
    }
}
