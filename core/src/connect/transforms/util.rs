//! What Kafka's transforms share (`util.Requirements`, `util.SchemaUtil`,
//! `Struct.get`'s defaults, Java class names in messages), on walrelay's
//! positional [`Value::Struct`]. Pure.

use std::sync::Arc;

use super::TransformError;
use crate::connect::{Schema, Type, Value};

/// `x.getClass().getName()` (or `null`) of a Connect value, as
/// `Requirements` writes it in its messages.
pub(crate) fn class_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Boolean(_) => "java.lang.Boolean",
        Value::Int8(_) => "java.lang.Byte",
        Value::Int16(_) => "java.lang.Short",
        Value::Int32(_) => "java.lang.Integer",
        Value::Int64(_) => "java.lang.Long",
        Value::Float32(_) => "java.lang.Float",
        Value::Float64(_) => "java.lang.Double",
        Value::String(_) => "java.lang.String",
        Value::Bytes(_) => "[B",
        Value::Decimal(_) => "java.math.BigDecimal",
        Value::Array(_) => "java.util.ArrayList",
        Value::Map(_) => "java.util.HashMap",
        Value::Struct(_) => "org.apache.kafka.connect.data.Struct",
    }
}

/// `Requirements.requireSchema`.
pub(crate) fn require_schema<'a>(
    schema: Option<&'a Arc<Schema>>,
    purpose: &str,
) -> Result<&'a Arc<Schema>, TransformError> {
    schema.ok_or_else(|| TransformError::new(format!("Schema required for [{purpose}]")))
}

/// `Requirements.requireStruct`: the struct's values.
pub(crate) fn require_struct<'a>(
    v: &'a Value,
    purpose: &str,
) -> Result<&'a [Value], TransformError> {
    match v {
        Value::Struct(values) => Ok(values),
        other => Err(TransformError::new(format!(
            "Only Struct objects supported for [{purpose}], found: {}",
            class_name(other)
        ))),
    }
}

/// `Requirements.requireMap`: the map's entries.
pub(crate) fn require_map<'a>(
    v: &'a Value,
    purpose: &str,
) -> Result<&'a [(Value, Value)], TransformError> {
    match v {
        Value::Map(entries) => Ok(entries),
        other => Err(TransformError::new(format!(
            "Only Map objects supported in absence of schema for [{purpose}], found: {}",
            class_name(other)
        ))),
    }
}

/// `struct.get(field)`: the value, or the field schema's default when it
/// is null.
pub(crate) fn struct_get<'a>(schema: &'a Schema, values: &'a [Value], index: usize) -> &'a Value {
    match values.get(index) {
        Some(Value::Null) | None => schema.fields[index]
            .schema
            .default
            .as_ref()
            .unwrap_or(&Value::Null),
        Some(v) => v,
    }
}

/// `SchemaUtil.copySchemaBasics(source)`: a builder of the same type
/// (an array keeps its element schema) with name, version, doc and
/// parameters; no optionality, default or fields.
pub(crate) fn copy_schema_basics(source: &Schema) -> Schema {
    let mut s = Schema::new(source.kind);
    if source.kind == Type::Array {
        s.value_schema.clone_from(&source.value_schema);
    }
    s.name.clone_from(&source.name);
    s.version = source.version;
    s.doc.clone_from(&source.doc);
    s.parameters.clone_from(&source.parameters);
    s
}
