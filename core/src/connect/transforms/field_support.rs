//! What the field transforms of `fields.rs` share beyond `util.rs`: the
//! iteration order of the `HashMap`s and `HashSet`s they build (sized as
//! each Java constructor sizes them), `Struct.get`/`getWithoutDefault`,
//! the checks `SchemaBuilder.field` and `Struct.put` make (with
//! `ConnectSchema.validateValue`'s messages), and Java class names of
//! values as Connect holds them under a schema. Pure.

use std::sync::Arc;

use crate::connect::java::{java_hash_map_copy_capacity, java_string_hash};
use crate::connect::transforms::util::class_name;
use crate::connect::transforms::TransformError;
use crate::connect::{Field, Schema, Type, Value};

/// Logical names whose values Connect holds as `java.util.Date`.
const DATE_LIKE: [&str; 3] = [
    "org.apache.kafka.connect.data.Date",
    "org.apache.kafka.connect.data.Time",
    "org.apache.kafka.connect.data.Timestamp",
];

/// `DataException` of a Java exception other than `DataException`: the
/// message with a note of which exception Connect fails with.
pub(super) fn java_failure(message: &str, exception: &str) -> TransformError {
    TransformError::new(format!(
        "{message} (Kafka Connect fails with {exception} here)"
    ))
}

/// `Object.hashCode()` of a schemaless map key. Exact for strings,
/// integers, booleans, floating-point numbers and null; other keys (never
/// produced by walrelay's sources) count as hash 0.
fn java_hash_code(v: &Value) -> i32 {
    match v {
        Value::String(t) => java_string_hash(t.as_str()),
        Value::Int8(x) => i32::from(*x),
        Value::Int16(x) => i32::from(*x),
        Value::Int32(x) => *x,
        #[allow(clippy::cast_possible_truncation)]
        Value::Int64(x) => (x ^ ((*x as u64) >> 32) as i64) as i32,
        Value::Boolean(b) => {
            if *b {
                1231
            } else {
                1237
            }
        }
        #[allow(clippy::cast_possible_wrap)]
        Value::Float32(f) => canonical_f32_bits(*f) as i32,
        #[allow(clippy::cast_possible_truncation, clippy::cast_possible_wrap)]
        Value::Float64(f) => {
            let b = canonical_f64_bits(*f);
            (b ^ (b >> 32)) as i32
        }
        _ => 0,
    }
}

/// `Float.floatToIntBits`: every NaN is `0x7fc00000`.
fn canonical_f32_bits(f: f32) -> u32 {
    if f.is_nan() {
        0x7fc0_0000
    } else {
        f.to_bits()
    }
}

/// `Double.doubleToLongBits`: every NaN is `0x7ff8000000000000`.
fn canonical_f64_bits(f: f64) -> u64 {
    if f.is_nan() {
        0x7ff8_0000_0000_0000
    } else {
        f.to_bits()
    }
}

/// `HashMap.hash(key) & (capacity - 1)`.
fn bucket(key: &Value, capacity: usize) -> usize {
    #[allow(clippy::cast_sign_loss)]
    let h = java_hash_code(key) as u32;
    ((h ^ (h >> 16)) as usize) & (capacity - 1)
}

/// `HashMap.tableSizeFor(n)`: the power of two at or above `n`, at least 1.
pub(super) fn table_size_for(n: usize) -> usize {
    n.max(1).next_power_of_two()
}

/// Table size of `new HashMap<>(m)` for a source of `n` entries (an empty
/// source leaves the default 16).
pub(super) fn copy_capacity(n: usize) -> usize {
    if n == 0 {
        16
    } else {
        java_hash_map_copy_capacity(n)
    }
}

/// Table size of `new HashMap<>()`.
pub(super) const DEFAULT_CAPACITY: usize = 16;

/// A `java.util.HashMap` whose table starts with `capacity` buckets,
/// filled with `put` in `entries`' order (an equal key replaces the value
/// in place), as Java iterates it: the table doubles while more than
/// three quarters full, entries come out by bucket and, within one, in
/// first-insertion order (resizing keeps it).
pub(super) fn java_map(entries: Vec<(Value, Value)>, capacity: usize) -> Value {
    let mut unique: Vec<(Value, Value)> = Vec::with_capacity(entries.len());
    for (k, v) in entries {
        match unique.iter_mut().find(|(u, _)| *u == k) {
            Some(slot) => slot.1 = v,
            None => unique.push((k, v)),
        }
    }
    let mut cap = capacity.max(1).next_power_of_two();
    while unique.len() > cap * 3 / 4 {
        cap *= 2;
    }
    let mut keyed: Vec<(usize, (Value, Value))> =
        unique.into_iter().map(|e| (bucket(&e.0, cap), e)).collect();
    // Stable: insertion order within a bucket.
    keyed.sort_by_key(|(b, _)| *b);
    Value::Map(keyed.into_iter().map(|(_, e)| e).collect())
}

/// The distinct names of a `new HashSet<>(list)` in its iteration order
/// (its table: `tableSizeFor(max((int) (n / .75f) + 1, 16))`, never
/// resized while filling).
pub(super) fn java_hash_set_order(names: &[String]) -> Vec<String> {
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    let wanted = ((names.len() as f32 / 0.75f32) as usize + 1).max(16);
    let cap = table_size_for(wanted);
    let mut unique: Vec<&String> = Vec::with_capacity(names.len());
    for n in names {
        if !unique.contains(&n) {
            unique.push(n);
        }
    }
    let mut keyed: Vec<(usize, &String)> = unique
        .into_iter()
        .map(|n| (bucket(&Value::string(n.as_str()), cap), n))
        .collect();
    keyed.sort_by_key(|(b, _)| *b);
    keyed.into_iter().map(|(_, n)| n.clone()).collect()
}

/// `map.get(name)` on a schemaless map (null when absent).
pub(super) fn map_get<'a>(entries: &'a [(Value, Value)], name: &str) -> &'a Value {
    entries
        .iter()
        .find(|(k, _)| matches!(k, Value::String(t) if t.as_str() == name))
        .map_or(&Value::Null, |(_, v)| v)
}

/// `struct.get(field)` (`with_default`: the field's default for null) or
/// `struct.getWithoutDefault(field)` of field `index`.
pub(super) fn field_value(
    schema: &Schema,
    values: &[Value],
    index: usize,
    with_default: bool,
) -> Value {
    let v = values.get(index).unwrap_or(&Value::Null);
    if v.is_null() && with_default {
        if let Some(d) = schema
            .fields
            .get(index)
            .and_then(|f| f.schema.default.as_ref())
        {
            return d.clone();
        }
    }
    v.clone()
}

/// `schema.fields()`: `DataException` on a schema that is not a struct.
pub(super) fn struct_fields(schema: &Schema) -> Result<&[Field], TransformError> {
    if schema.kind == Type::Struct {
        Ok(&schema.fields)
    } else {
        Err(TransformError::new("Cannot list fields on non-struct type"))
    }
}

/// `schema.field(name)`: `DataException` on a schema that is not a struct.
pub(super) fn lookup_field<'a>(
    schema: &'a Schema,
    name: &str,
) -> Result<Option<(usize, &'a Field)>, TransformError> {
    if schema.kind != Type::Struct {
        return Err(TransformError::new(
            "Cannot look up fields on non-struct type",
        ));
    }
    Ok(schema.field_index(name).map(|i| (i, &schema.fields[i])))
}

/// `SchemaBuilder.field(name, schema)` appended to `builder` (a struct):
/// refuses an empty name and a name already present.
pub(super) fn add_field(
    builder: &mut Schema,
    name: &str,
    schema: Arc<Schema>,
) -> Result<(), TransformError> {
    if name.is_empty() {
        return Err(TransformError::new("fieldName cannot be null."));
    }
    if builder.field_index(name).is_some() {
        return Err(TransformError::new(format!(
            "Cannot create field because of field name duplication {name}"
        )));
    }
    builder.fields.push(Field {
        name: Arc::from(name),
        schema,
    });
    Ok(())
}

/// `Class.getName()` of a value as Connect holds it under `schema`:
/// Date, Time and Timestamp values are `java.util.Date`.
pub(super) fn java_class(schema: Option<&Schema>, v: &Value) -> &'static str {
    let date_like = schema
        .and_then(|s| s.name.as_deref())
        .is_some_and(|n| DATE_LIKE.contains(&n));
    if date_like && matches!(v, Value::Int32(_) | Value::Int64(_)) {
        return "java.util.Date";
    }
    class_name(v)
}

/// `Struct.put(name, value)`'s `ConnectSchema.validateValue(name, schema,
/// value)`.
pub(super) fn check_put(name: &str, schema: &Schema, value: &Value) -> Result<(), TransformError> {
    validate(schema, value, &format!("field: \"{name}\""))
}

/// `ConnectSchema.validateValue(schema, value, location)`: nulls against
/// optionality, the value's class against the schema's, and the contents
/// of structs (`Struct.validate`), arrays and maps.
fn validate(schema: &Schema, value: &Value, location: &str) -> Result<(), TransformError> {
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
        let named = schema
            .name
            .as_deref()
            .map(|n| format!(" \"{n}\""))
            .unwrap_or_default();
        return Err(TransformError::new(format!(
            "Invalid Java object for schema{named} with type {}: class {} for {location}",
            schema.kind.java_name(),
            java_class(Some(schema), value)
        )));
    }
    match value {
        Value::Struct(values) => validate_struct(schema, values),
        Value::Array(items) => {
            let at = format!("element of array {location}");
            let items_schema = schema_or_fail(schema.value_schema.as_deref(), &at)?;
            items
                .iter()
                .try_for_each(|i| validate(items_schema, i, &at))
        }
        Value::Map(entries) => {
            let key_at = format!("key of map {location}");
            let value_at = format!("value of map {location}");
            let ks = schema_or_fail(schema.key_schema.as_deref(), &key_at)?;
            let vs = schema_or_fail(schema.value_schema.as_deref(), &value_at)?;
            entries.iter().try_for_each(|(k, v)| {
                validate(ks, k, &key_at)?;
                validate(vs, v, &value_at)
            })
        }
        _ => Ok(()),
    }
}

/// `Struct.validate()`: every field but a null one that is optional or has
/// a default.
fn validate_struct(schema: &Schema, values: &[Value]) -> Result<(), TransformError> {
    for (i, f) in schema.fields.iter().enumerate() {
        let v = values.get(i).unwrap_or(&Value::Null);
        if v.is_null() && (f.schema.optional || f.schema.default.is_some()) {
            continue;
        }
        validate(&f.schema, v, &format!("field: \"{}\"", f.name))?;
    }
    Ok(())
}

/// `assertSchemaNotNull`.
fn schema_or_fail<'a>(s: Option<&'a Schema>, location: &str) -> Result<&'a Schema, TransformError> {
    s.ok_or_else(|| TransformError::new(format!("No schema defined for {location}")))
}

/// Whether `value` is of a class `schema` accepts (`expectedClassesFor`):
/// the logical type's class, else the physical type's.
fn class_matches(schema: &Schema, value: &Value) -> bool {
    if schema.is_decimal() {
        return matches!(value, Value::Decimal(_));
    }
    if schema
        .name
        .as_deref()
        .is_some_and(|n| DATE_LIKE.contains(&n))
    {
        return matches!(value, Value::Int32(_) | Value::Int64(_));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys of a map, in order.
    fn keys(v: &Value) -> Vec<String> {
        match v {
            Value::Map(e) => e
                .iter()
                .map(|(k, _)| match k {
                    Value::String(t) => t.as_str().to_owned(),
                    other => format!("{other:?}"),
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    #[test]
    fn maps_iterate_by_bucket_of_their_final_table() {
        // "id" and "eventType" share bucket 11 of 16 (see java.rs).
        let m = java_map(
            vec![
                (Value::string("tenant"), Value::Null),
                (Value::string("eventType"), Value::Null),
                (Value::string("id"), Value::Int32(1)),
                (Value::string("eventType"), Value::Int32(2)),
            ],
            DEFAULT_CAPACITY,
        );
        assert_eq!(keys(&m), ["eventType", "id", "tenant"]);
        let Value::Map(e) = &m else { panic!() };
        assert_eq!(e[0].1, Value::Int32(2));
        // A 4-bucket table puts tenant first.
        let small = java_map(
            vec![
                (Value::string("eventType"), Value::Null),
                (Value::string("id"), Value::Null),
                (Value::string("tenant"), Value::Null),
            ],
            copy_capacity(3),
        );
        assert_eq!(keys(&small), ["tenant", "eventType", "id"]);
        assert_eq!(table_size_for(0), 1);
        assert_eq!(table_size_for(5), 8);
        assert_eq!(copy_capacity(0), 16);
    }

    #[test]
    fn hash_sets_and_integer_keys() {
        let names: Vec<String> = ["tenant", "id", "eventType", "id"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        // `id` and `eventType` share bucket 11: first-added first.
        assert_eq!(java_hash_set_order(&names), ["id", "eventType", "tenant"]);
        let m = java_map(
            vec![
                (Value::Int32(17), Value::Null),
                (Value::Int32(1), Value::Null),
            ],
            DEFAULT_CAPACITY,
        );
        assert_eq!(
            m,
            Value::Map(vec![
                (Value::Int32(17), Value::Null),
                (Value::Int32(1), Value::Null)
            ])
        );
        assert_eq!(java_hash_code(&Value::Int64(-1)), 0);
        assert_eq!(java_hash_code(&Value::Boolean(true)), 1231);
    }

    #[test]
    fn struct_put_validation_messages() {
        let s = Schema::new(Type::String);
        assert_eq!(
            check_put("a", &s, &Value::Null).unwrap_err().message,
            "Invalid value: null used for required field: \"a\", schema type: STRING"
        );
        assert_eq!(
            check_put("a", &s, &Value::Int32(1)).unwrap_err().message,
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
            check_put("n", &inner, &Value::Struct(vec![Value::Null]))
                .unwrap_err()
                .message,
            "Invalid value: null used for required field: \"x\", schema type: INT32"
        );
        let arr = Schema::array(Arc::new(Schema::new(Type::Int32)));
        assert_eq!(
            check_put("l", &arr, &Value::Array(vec![Value::Null]))
                .unwrap_err()
                .message,
            "Invalid value: null used for required element of array field: \"l\", schema type: INT32"
        );
        let date = Schema::new(Type::Int32).named("org.apache.kafka.connect.data.Date", Some(1));
        assert!(check_put("d", &date, &Value::Int32(3)).is_ok());
        assert_eq!(java_class(Some(&date), &Value::Int32(3)), "java.util.Date");
        assert!(check_put("o", &Schema::optional(Type::Int8), &Value::Null).is_ok());
    }

    #[test]
    fn builder_refuses_empty_and_duplicate_names() {
        let mut b = Schema::structure(None, Vec::new());
        let s = Arc::new(Schema::new(Type::String));
        add_field(&mut b, "a", s.clone()).unwrap();
        assert_eq!(
            add_field(&mut b, "a", s.clone()).unwrap_err().message,
            "Cannot create field because of field name duplication a"
        );
        assert_eq!(
            add_field(&mut b, "", s).unwrap_err().message,
            "fieldName cannot be null."
        );
        assert_eq!(
            lookup_field(&Schema::new(Type::String), "a")
                .unwrap_err()
                .message,
            "Cannot look up fields on non-struct type"
        );
    }
}
