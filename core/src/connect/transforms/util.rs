//! What Kafka's transforms share (`util.Requirements`, `util.SchemaUtil`,
//! `Struct.get`'s defaults, `ConnectSchema.validateValue` as `Struct.put`
//! applies it, Java class names in messages, the iteration order of the
//! `HashMap`s, `HashSet`s and `LinkedHashMap`s they build), on walrelay's
//! positional [`Value::Struct`]. Pure.

use std::sync::Arc;

use super::{TransformError, Transformation};
use crate::connect::java::{
    java_hash_code, java_hash_map_copy_capacity, java_hash_map_order_by, java_hash_map_order_sized,
};
use crate::connect::pg::names;
use crate::connect::{Schema, Type, Value, DECIMAL_NAME};

/// A configured transform, boxed (`build`'s `.map(boxed)`).
pub(crate) fn boxed<T: Transformation + 'static>(t: T) -> Box<dyn Transformation> {
    Box::new(t)
}

/// Whether `schema` is Connect's Date, Time or Timestamp, whose values
/// Java holds as `java.util.Date` (walrelay: INT32 days, INT32 ms of day,
/// INT64 ms).
fn is_date_like(schema: &Schema) -> bool {
    matches!(
        schema.name.as_deref(),
        Some(names::CONNECT_DATE | names::CONNECT_TIME | names::CONNECT_TIMESTAMP)
    )
}

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

/// `Class.getName()` of a value as Connect holds it under its own
/// `schema`: Date, Time and Timestamp values are `java.util.Date`, the
/// rest as [`class_name`].
pub(crate) fn class_name_under(schema: Option<&Schema>, v: &Value) -> &'static str {
    if schema.is_some_and(is_date_like) && matches!(v, Value::Int32(_) | Value::Int64(_)) {
        return "java.util.Date";
    }
    class_name(v)
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
    field_value(schema, values, index, true)
}

/// `struct.get(field)` (`with_default`, as [`struct_get`]) or
/// `struct.getWithoutDefault(field)` of field `index`, as the transforms'
/// `replace.null.with.default` chooses.
pub(crate) fn field_value<'a>(
    schema: &'a Schema,
    values: &'a [Value],
    index: usize,
    with_default: bool,
) -> &'a Value {
    let v = values.get(index).unwrap_or(&Value::Null);
    if !v.is_null() || !with_default {
        return v;
    }
    schema
        .fields
        .get(index)
        .and_then(|f| f.schema.default.as_ref())
        .unwrap_or(&Value::Null)
}

/// `SchemaUtil.copySchemaBasics(source)`: a builder of the same type
/// (an array keeps its element schema) with name, version, doc and
/// parameters; no optionality, default or fields.
pub(crate) fn copy_schema_basics(source: &Schema) -> Schema {
    let mut s = copy_schema_basics_onto(source, source.kind);
    if source.kind == Type::Array {
        s.value_schema.clone_from(&source.value_schema);
    }
    s
}

/// `SchemaUtil.copySchemaBasics(source, SchemaBuilder.type(kind))`: a
/// schema of `kind` carrying the source's name, version, doc and
/// parameters (so a Decimal cast to string stays named Decimal).
pub(crate) fn copy_schema_basics_onto(source: &Schema, kind: Type) -> Schema {
    let mut s = Schema::new(kind);
    s.name.clone_from(&source.name);
    s.version = source.version;
    s.doc.clone_from(&source.doc);
    s.parameters.clone_from(&source.parameters);
    s
}

/// `ConnectSchema.validateValue(field, schema, value)`, as `Struct.put`
/// and `SchemaBuilder.defaultValue` check a value: `field` names the
/// location (`None`: the value itself).
pub(crate) fn validate_value(
    field: Option<&str>,
    schema: &Schema,
    value: &Value,
) -> Result<(), TransformError> {
    let location = match field {
        Some(f) => format!("field: \"{f}\""),
        None => "value".to_owned(),
    };
    validate_at(schema, value, &location)
}

/// `validateValue(schema, value, location)`: nulls against optionality,
/// the value's class against the schema's, and the contents of structs
/// (`Struct.validate`), arrays and maps.
fn validate_at(schema: &Schema, value: &Value, location: &str) -> Result<(), TransformError> {
    if value.is_null() {
        if schema.optional {
            return Ok(());
        }
        return Err(TransformError::new(format!(
            "Invalid value: null used for required {location}, schema type: {}",
            schema.kind.java_name()
        )));
    }
    if !class_matches(schema, value) {
        let name = schema
            .name
            .as_deref()
            .map(|n| format!(" \"{n}\""))
            .unwrap_or_default();
        return Err(TransformError::new(format!(
            "Invalid Java object for schema{name} with type {}: class {} for {location}",
            schema.kind.java_name(),
            class_name(value)
        )));
    }
    match value {
        Value::Struct(values) => validate_struct(schema, values),
        Value::Array(items) => {
            let at = format!("element of array {location}");
            let items_schema = schema_for(schema.value_schema.as_deref(), &at)?;
            items
                .iter()
                .try_for_each(|i| validate_at(items_schema, i, &at))
        }
        Value::Map(entries) => {
            let key_at = format!("key of map {location}");
            let value_at = format!("value of map {location}");
            let ks = schema_for(schema.key_schema.as_deref(), &key_at)?;
            let vs = schema_for(schema.value_schema.as_deref(), &value_at)?;
            entries.iter().try_for_each(|(k, v)| {
                validate_at(ks, k, &key_at)?;
                validate_at(vs, v, &value_at)
            })
        }
        _ => Ok(()),
    }
}

/// `assertSchemaNotNull`.
fn schema_for<'a>(
    schema: Option<&'a Schema>,
    location: &str,
) -> Result<&'a Schema, TransformError> {
    schema.ok_or_else(|| TransformError::new(format!("No schema defined for {location}")))
}

/// `Struct.validate()` of a struct value of `schema` (a value of another
/// field count cannot be of this schema: "Struct schemas do not match.").
fn validate_struct(schema: &Schema, values: &[Value]) -> Result<(), TransformError> {
    if values.len() != schema.fields.len() {
        return Err(TransformError::new("Struct schemas do not match."));
    }
    for (field, v) in schema.fields.iter().zip(values) {
        if v.is_null() && (field.schema.optional || field.schema.default.is_some()) {
            continue;
        }
        validate_value(Some(&field.name), &field.schema, v)?;
    }
    Ok(())
}

/// Whether the value's Java class is one `expectedClassesFor(schema)`
/// lists: by logical name first, then by type. A Date, Time or Timestamp
/// takes a `java.util.Date`, which walrelay holds as an INT64 under an
/// INT64 schema and as an INT32 otherwise; the other integer is taken for
/// the `Integer` or `Long` it is.
fn class_matches(schema: &Schema, value: &Value) -> bool {
    if schema.name.as_deref() == Some(DECIMAL_NAME) {
        return matches!(value, Value::Decimal(_));
    }
    if is_date_like(schema) {
        return matches!(value, Value::Int32(_) | Value::Int64(_))
            && (schema.kind == Type::Int64) == matches!(value, Value::Int64(_));
    }
    matches!(
        (schema.kind, value),
        (Type::Int8, Value::Int8(_))
            | (Type::Int16, Value::Int16(_))
            | (Type::Int32, Value::Int32(_))
            | (Type::Int64, Value::Int64(_))
            | (Type::Float32, Value::Float32(_))
            | (Type::Float64, Value::Float64(_))
            | (Type::Boolean, Value::Boolean(_))
            | (Type::String, Value::String(_))
            | (Type::Bytes, Value::Bytes(_))
            | (Type::Array, Value::Array(_))
            | (Type::Map, Value::Map(_))
            | (Type::Struct, Value::Struct(_))
    )
}

/// `map.get(name)` on a schemaless map (null when absent).
pub(crate) fn map_get<'a>(entries: &'a [(Value, Value)], name: &str) -> &'a Value {
    entries
        .iter()
        .find(|(k, _)| matches!(k, Value::String(t) if t.as_str() == name))
        .map_or(&Value::Null, |(_, v)| v)
}

/// `LinkedHashMap.put`: an equal key keeps its place and takes the value.
pub(crate) fn linked_put<K: PartialEq, V>(entries: &mut Vec<(K, V)>, key: K, value: V) {
    match entries.iter_mut().find(|(k, _)| *k == key) {
        Some(slot) => slot.1 = value,
        None => entries.push((key, value)),
    }
}

/// Table size of `new HashMap<>()`.
pub(crate) const DEFAULT_CAPACITY: usize = 16;

/// Table size of `new HashMap<>(n)`: `tableSizeFor(n)`, the power of two
/// at or above `n`, at least 1.
pub(crate) fn table_size_for(n: usize) -> usize {
    n.max(1).next_power_of_two()
}

/// Table size of `new HashMap<>(m)` for a source of `n` entries (an empty
/// source leaves the table unallocated: the first `put` makes 16).
pub(crate) fn copy_capacity(n: usize) -> usize {
    if n == 0 {
        DEFAULT_CAPACITY
    } else {
        java_hash_map_copy_capacity(n)
    }
}

/// A `java.util.HashMap<Object, Object>` whose table starts with
/// `capacity` buckets, filled with `put` in `entries`' order (an equal key
/// replaces the value in place), in the order Java iterates it: the table
/// doubles while more than three quarters full, entries come out by bucket
/// and, within one, in first-insertion order (resizing keeps it). A key
/// whose `hashCode()` walrelay cannot reproduce (see
/// [`java_hash_code`]) is refused.
pub(crate) fn java_hash_map(
    entries: Vec<(Value, Value)>,
    capacity: usize,
) -> Result<Vec<(Value, Value)>, TransformError> {
    let mut unique: Vec<(Value, Value)> = Vec::with_capacity(entries.len());
    for (k, v) in entries {
        if java_hash_code(&k).is_none() {
            return Err(TransformError::new(format!(
                "walrelay cannot reproduce the order of a schemaless map with a {} key",
                class_name(&k)
            )));
        }
        linked_put(&mut unique, k, v);
    }
    let mut cap = table_size_for(capacity);
    while unique.len() > cap * 3 / 4 {
        cap *= 2;
    }
    Ok(java_hash_map_order_by(unique, cap, |k| {
        java_hash_code(k).unwrap_or(0)
    }))
}

/// The distinct names of a `new HashSet<>(list)` in its iteration order
/// (its table: `tableSizeFor(max((int) (n / .75f) + 1, 16))`, never
/// resized while filling).
pub(crate) fn java_hash_set_order(names: &[String]) -> Vec<String> {
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    let wanted = ((names.len() as f32 / 0.75f32) as usize + 1).max(DEFAULT_CAPACITY);
    let mut unique: Vec<(&str, ())> = Vec::with_capacity(names.len());
    for n in names {
        linked_put(&mut unique, n.as_str(), ());
    }
    java_hash_map_order_sized(unique, table_size_for(wanted))
        .into_iter()
        .map(|(n, ())| n.to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::Field;

    /// The keys of map entries, in order.
    fn keys(entries: &[(Value, Value)]) -> Vec<String> {
        entries
            .iter()
            .map(|(k, _)| match k {
                Value::String(t) => t.as_str().to_owned(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn maps_iterate_by_bucket_of_their_final_table() {
        // "id" and "eventType" share bucket 11 of 16 (see java.rs).
        let m = java_hash_map(
            vec![
                (Value::string("tenant"), Value::Null),
                (Value::string("eventType"), Value::Null),
                (Value::string("id"), Value::Int32(1)),
                (Value::string("eventType"), Value::Int32(2)),
            ],
            DEFAULT_CAPACITY,
        )
        .unwrap();
        assert_eq!(keys(&m), ["eventType", "id", "tenant"]);
        assert_eq!(m[0].1, Value::Int32(2));
        // A 4-bucket table puts tenant first.
        let small = java_hash_map(
            vec![
                (Value::string("eventType"), Value::Null),
                (Value::string("id"), Value::Null),
                (Value::string("tenant"), Value::Null),
            ],
            copy_capacity(3),
        )
        .unwrap();
        assert_eq!(keys(&small), ["tenant", "eventType", "id"]);
        assert_eq!(table_size_for(0), 1);
        assert_eq!(table_size_for(5), 8);
        assert_eq!(copy_capacity(0), 16);
    }

    #[test]
    fn hash_sets_and_non_string_keys() {
        let names: Vec<String> = ["tenant", "id", "eventType", "id"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        // `id` and `eventType` share bucket 11: first-added first.
        assert_eq!(java_hash_set_order(&names), ["id", "eventType", "tenant"]);
        let m = java_hash_map(
            vec![
                (Value::Int32(17), Value::Null),
                (Value::Int32(1), Value::Null),
            ],
            DEFAULT_CAPACITY,
        )
        .unwrap();
        assert_eq!(
            m,
            [
                (Value::Int32(17), Value::Null),
                (Value::Int32(1), Value::Null)
            ]
        );
        let err = java_hash_map(
            vec![(Value::Bytes(bytes::Bytes::from_static(b"k")), Value::Null)],
            DEFAULT_CAPACITY,
        )
        .unwrap_err();
        assert_eq!(
            err.message,
            "walrelay cannot reproduce the order of a schemaless map with a [B key"
        );
    }

    #[test]
    fn struct_put_validation_messages() {
        let put = |name: &str, s: &Schema, v: &Value| validate_value(Some(name), s, v);
        let s = Schema::new(Type::String);
        assert_eq!(
            put("a", &s, &Value::Null).unwrap_err().message,
            "Invalid value: null used for required field: \"a\", schema type: STRING"
        );
        assert_eq!(
            put("a", &s, &Value::Int32(1)).unwrap_err().message,
            "Invalid Java object for schema with type STRING: class java.lang.Integer for field: \"a\""
        );
        let inner = Schema::structure(
            None,
            vec![Field {
                name: Arc::from("x"),
                schema: Arc::new(Schema::new(Type::Int32)),
            }],
        );
        assert_eq!(
            put("n", &inner, &Value::Struct(vec![Value::Null]))
                .unwrap_err()
                .message,
            "Invalid value: null used for required field: \"x\", schema type: INT32"
        );
        let arr = Schema::array(Arc::new(Schema::new(Type::Int32)));
        assert_eq!(
            put("l", &arr, &Value::Array(vec![Value::Null]))
                .unwrap_err()
                .message,
            "Invalid value: null used for required element of array field: \"l\", schema type: INT32"
        );
        let date = Schema::new(Type::Int32).named(names::CONNECT_DATE, Some(1));
        assert!(put("d", &date, &Value::Int32(3)).is_ok());
        assert_eq!(
            class_name_under(Some(&date), &Value::Int32(3)),
            "java.util.Date"
        );
        assert_eq!(
            class_name_under(None, &Value::Int32(3)),
            "java.lang.Integer"
        );
        assert!(put("o", &Schema::optional(Type::Int8), &Value::Null).is_ok());
    }
}
