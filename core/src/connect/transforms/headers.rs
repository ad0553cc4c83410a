//! Kafka 4.1.1's header transforms: `HeaderFrom$Key`/`$Value` (copy or
//! move struct fields or map entries into headers), `InsertHeader` (a
//! header whose schema and value `Values.parseString` infers from a
//! literal, see [`values_parse`]) and `DropHeaders`. Headers are appended
//! after the record's own, as `Headers.add` does, and checked against
//! their schema as `ConnectHeaders.checkSchemaMatches` checks them. Pure.

mod values_parse;

use std::collections::HashSet;
use std::sync::Arc;

use super::options::{Reader, TransformConfigError};
use super::util::{
    boxed, class_name, copy_capacity, copy_schema_basics_onto, field_value, java_hash_map, map_get,
    require_map, require_struct, validate_value,
};
use super::{Built, ConnectHeader, ConnectRecord, Side, TransformError, Transformation};
use crate::connect::{Schema, Type, Value, DECIMAL_NAME};

const HEADER_FROM_KEY: &str = "org.apache.kafka.connect.transforms.HeaderFrom$Key";
const HEADER_FROM_VALUE: &str = "org.apache.kafka.connect.transforms.HeaderFrom$Value";
const INSERT_HEADER: &str = "org.apache.kafka.connect.transforms.InsertHeader";
const DROP_HEADERS: &str = "org.apache.kafka.connect.transforms.DropHeaders";

/// The classes this module builds.
pub(super) const CLASSES: &[&str] = &[
    HEADER_FROM_KEY,
    HEADER_FROM_VALUE,
    INSERT_HEADER,
    DROP_HEADERS,
];

/// Builds the transform of `class`, if it is one of [`CLASSES`].
pub(super) fn build(class: &str, opts: &Reader<'_>) -> Option<Built> {
    let built: Built = match class {
        HEADER_FROM_KEY => HeaderFrom::configure(Side::Key, opts).map(boxed),
        HEADER_FROM_VALUE => HeaderFrom::configure(Side::Value, opts).map(boxed),
        INSERT_HEADER => InsertHeader::configure(opts).map(boxed),
        DROP_HEADERS => non_empty_list(opts, "headers").map(|headers| {
            boxed(DropHeaders {
                headers: headers.into_iter().collect(),
            })
        }),
        _ => return None,
    };
    Some(built)
}

/// A required `LIST` option with `NonEmptyListValidator`.
fn non_empty_list(opts: &Reader<'_>, key: &str) -> Result<Vec<String>, TransformConfigError> {
    let list = opts.list(key, None)?;
    if list.is_empty() {
        let raw = opts.raw(key).unwrap_or_default();
        return Err(TransformConfigError::invalid(key, raw, "Empty list"));
    }
    Ok(list)
}

/// `HeaderFrom`'s `operation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operation {
    /// `move`: the field leaves the key or value.
    Move,
    /// `copy`: the field stays.
    Copy,
}

impl Operation {
    /// Its name, as `Operation.toString()` gives it in messages.
    fn name(self) -> &'static str {
        match self {
            Operation::Move => "move",
            Operation::Copy => "copy",
        }
    }
}

/// `HeaderFrom$Key` / `HeaderFrom$Value`.
#[derive(Debug)]
struct HeaderFrom {
    /// Key or value.
    side: Side,
    /// `fields`.
    fields: Vec<String>,
    /// `headers`, one per field.
    headers: Vec<String>,
    /// `operation`.
    operation: Operation,
    /// `replace.null.with.default`.
    replace_null_with_default: bool,
}

impl HeaderFrom {
    /// `HeaderFrom.configure`: both lists non-empty and of one length.
    fn configure(side: Side, opts: &Reader<'_>) -> Result<HeaderFrom, TransformConfigError> {
        let fields = non_empty_list(opts, "fields")?;
        let headers = non_empty_list(opts, "headers")?;
        let op = opts.string("operation", None)?;
        let operation = match op.as_str() {
            "move" => Operation::Move,
            "copy" => Operation::Copy,
            _ => {
                return Err(TransformConfigError::invalid(
                    "operation",
                    &op,
                    "String must be one of: move, copy",
                ))
            }
        };
        let replace_null_with_default = opts.boolean("replace.null.with.default", true)?;
        if headers.len() != fields.len() {
            return Err(TransformConfigError::invalid(
                "headers",
                opts.raw("headers").unwrap_or_default(),
                "'fields' config must have the same number of elements as 'headers' config.",
            ));
        }
        Ok(HeaderFrom {
            side,
            fields,
            headers,
            operation,
            replace_null_with_default,
        })
    }

    /// `getFieldValue`: `Struct.get` (default applied) or
    /// `getWithoutDefault`.
    fn field_value(&self, schema: &Schema, values: &[Value], index: usize) -> Value {
        field_value(schema, values, index, self.replace_null_with_default).clone()
    }

    /// `applyWithSchema`: the struct (rebuilt without the moved fields for
    /// `move`), each field's value as a header with the field's schema.
    fn apply_with_schema(
        &self,
        record: &mut ConnectRecord,
        schema: Arc<Schema>,
        value: Value,
    ) -> Result<(), TransformError> {
        let purpose = format!("header {}", self.operation.name());
        let values = require_struct(&value, &purpose)?;
        let mut added = Vec::with_capacity(self.fields.len());
        let updated = match self.operation {
            Operation::Move => Some(self.moved(&schema, values)?),
            Operation::Copy => None,
        };
        for (field, header) in self.fields.iter().zip(&self.headers) {
            if schema.kind != Type::Struct {
                return Err(TransformError::new(
                    "Cannot look up fields on non-struct type",
                ));
            }
            let Some(index) = schema.field_index(field) else {
                return Err(TransformError::new(format!(
                    "field {field} is not in the {} schema (Kafka Connect fails with a NullPointerException here)",
                    side_name(self.side)
                )));
            };
            let field_schema = schema.fields[index].schema.clone();
            let field_value = self.field_value(&schema, values, index);
            check_schema_matches(Some(&field_schema), &field_value)?;
            added.push(ConnectHeader {
                key: Arc::from(header.as_str()),
                schema: Some(field_schema),
                value: field_value,
            });
        }
        match updated {
            Some((s, v)) => self.side.set(record, Some(s), v),
            None => self.side.set(record, Some(schema), value),
        }
        record.headers.extend(added);
        Ok(())
    }

    /// `moveSchema` and the struct put into it: the schema's basics (name,
    /// version, doc, parameters; required, no default) with every field
    /// not moved, each value checked as `Struct.put` checks it.
    fn moved(
        &self,
        schema: &Schema,
        values: &[Value],
    ) -> Result<(Arc<Schema>, Value), TransformError> {
        if schema.kind != Type::Struct {
            return Err(TransformError::new("Cannot list fields on non-struct type"));
        }
        let mut updated = copy_schema_basics_onto(schema, Type::Struct);
        let mut kept = Vec::new();
        for (i, field) in schema.fields.iter().enumerate() {
            if self.fields.iter().any(|f| **f == *field.name) {
                continue;
            }
            updated.fields.push(field.clone());
            kept.push(i);
        }
        let mut new_values = Vec::with_capacity(kept.len());
        for i in kept {
            let v = self.field_value(schema, values, i);
            let field = &schema.fields[i];
            validate_value(Some(&field.name), &field.schema, &v)?;
            new_values.push(v);
        }
        Ok((Arc::new(updated), Value::Struct(new_values)))
    }

    /// `applySchemaless`: a `new HashMap<>(map)` copy without the moved
    /// entries; each entry's value (null when absent) as a schemaless
    /// header.
    fn apply_schemaless(
        &self,
        record: &mut ConnectRecord,
        value: Value,
    ) -> Result<(), TransformError> {
        let purpose = format!("header {}", self.operation.name());
        let entries = require_map(&value, &purpose)?;
        let mut updated = java_hash_map(entries.to_vec(), copy_capacity(entries.len()))?;
        for (field, header) in self.fields.iter().zip(&self.headers) {
            let field_value = map_get(entries, field).clone();
            if self.operation == Operation::Move {
                updated.retain(|(k, _)| !is_key(k, field));
            }
            record.headers.push(ConnectHeader {
                key: Arc::from(header.as_str()),
                schema: None,
                value: field_value,
            });
        }
        self.side.set(record, None, Value::Map(updated));
        Ok(())
    }
}

impl Transformation for HeaderFrom {
    fn apply(&self, mut record: ConnectRecord) -> Result<Option<ConnectRecord>, TransformError> {
        let (schema, value) = self.side.take(&mut record);
        match schema {
            Some(schema) => self.apply_with_schema(&mut record, schema, value)?,
            None => self.apply_schemaless(&mut record, value)?,
        }
        Ok(Some(record))
    }
}

/// `key` or `value`, for messages.
fn side_name(side: Side) -> &'static str {
    match side {
        Side::Key => "key",
        Side::Value => "value",
    }
}

/// Whether a map key is the string `name`.
fn is_key(k: &Value, name: &str) -> bool {
    matches!(k, Value::String(t) if t.as_str() == name)
}

/// `ConnectHeaders.checkSchemaMatches`: a null needs an optional schema,
/// a value the Java class of its schema's type.
fn check_schema_matches(schema: Option<&Schema>, value: &Value) -> Result<(), TransformError> {
    let Some(schema) = schema else {
        return Ok(());
    };
    let fits = match (schema.kind, value) {
        (_, Value::Null) => {
            if schema.optional {
                return Ok(());
            }
            return Err(TransformError::new(format!(
                "A null value requires an optional schema but was {}",
                schema.java_string()
            )));
        }
        (Type::Bytes, Value::Decimal(_)) => schema.name.as_deref() == Some(DECIMAL_NAME),
        (Type::Bytes, Value::Bytes(_))
        | (Type::String, Value::String(_))
        | (Type::Boolean, Value::Boolean(_))
        | (Type::Int8, Value::Int8(_))
        | (Type::Int16, Value::Int16(_))
        | (Type::Int32, Value::Int32(_))
        | (Type::Int64, Value::Int64(_))
        | (Type::Float32, Value::Float32(_))
        | (Type::Float64, Value::Float64(_))
        | (Type::Array, Value::Array(_))
        | (Type::Map, Value::Map(_))
        | (Type::Struct, Value::Struct(_)) => true,
        _ => false,
    };
    if fits {
        return Ok(());
    }
    let mut text = String::new();
    if crate::connect::convert::java_to_string(&mut text, Some(schema), value).is_err() {
        text = class_name(value).to_owned();
    }
    Err(TransformError::new(format!(
        "The value {text} is not compatible with the schema {}",
        schema.java_string()
    )))
}

/// `InsertHeader`: the same header (schema and value parsed once from
/// `value.literal`) appended to every record.
#[derive(Debug)]
struct InsertHeader {
    /// `header`.
    header: Arc<str>,
    /// `value.literal`, parsed.
    literal: values_parse::Literal,
}

impl InsertHeader {
    /// `InsertHeader.configure`: `header` and `value.literal` required.
    fn configure(opts: &Reader<'_>) -> Result<InsertHeader, TransformConfigError> {
        let header = opts.string("header", None)?;
        let text = opts.string("value.literal", None)?;
        let literal = values_parse::parse_string(&text)
            .map_err(|reason| TransformConfigError::invalid("value.literal", &text, reason))?;
        Ok(InsertHeader {
            header: Arc::from(header.as_str()),
            literal,
        })
    }
}

impl Transformation for InsertHeader {
    fn apply(&self, mut record: ConnectRecord) -> Result<Option<ConnectRecord>, TransformError> {
        record.headers.push(ConnectHeader {
            key: self.header.clone(),
            schema: self.literal.schema.clone(),
            value: self.literal.value.clone(),
        });
        Ok(Some(record))
    }
}

/// `DropHeaders`: every header of one of the names removed.
#[derive(Debug)]
struct DropHeaders {
    /// `headers`.
    headers: HashSet<String>,
}

impl Transformation for DropHeaders {
    fn apply(&self, mut record: ConnectRecord) -> Result<Option<ConnectRecord>, TransformError> {
        record.headers.retain(|h| !self.headers.contains(&*h.key));
        Ok(Some(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::transforms::options::Options;
    use crate::connect::Field;

    fn configure(class: &str, pairs: &[(&str, &str)]) -> Built {
        let opts: Options = pairs.iter().copied().collect();
        build(class, &opts.reader()).expect("class of this module")
    }

    fn transform(class: &str, pairs: &[(&str, &str)]) -> Box<dyn Transformation> {
        configure(class, pairs).expect("valid configuration")
    }

    fn record(schema: Option<Arc<Schema>>, value: Value) -> ConnectRecord {
        ConnectRecord {
            topic: Arc::from("t"),
            partition: None,
            key_schema: schema.clone(),
            key: value.clone(),
            value_schema: schema,
            value,
            timestamp: Some(1),
            headers: vec![ConnectHeader {
                key: Arc::from("first"),
                schema: None,
                value: Value::string("1"),
            }],
        }
    }

    fn field(name: &str, schema: Schema) -> Field {
        Field {
            name: Arc::from(name),
            schema: Arc::new(schema),
        }
    }

    /// The struct of the Java harness: `com.H` v2, optional, with `id`,
    /// `n` (optional, default 42) and `keep`.
    fn h_schema() -> Arc<Schema> {
        let mut n = Schema::optional(Type::Int32);
        n.default = Some(Value::Int32(42));
        let mut s = Schema::structure(
            Some("com.H"),
            vec![
                field("id", Schema::new(Type::String)),
                field("n", n),
                field("keep", Schema::new(Type::Boolean)),
            ],
        )
        .with_optional(true);
        s.version = Some(2);
        Arc::new(s)
    }

    fn h_value() -> Value {
        Value::Struct(vec![
            Value::string("abc"),
            Value::Null,
            Value::Boolean(true),
        ])
    }

    fn header_keys(r: &ConnectRecord) -> Vec<&str> {
        r.headers.iter().map(|h| &*h.key).collect()
    }

    #[test]
    fn header_from_move_rebuilds_the_struct_without_the_fields() {
        for class in [HEADER_FROM_KEY, HEADER_FROM_VALUE] {
            let side = if class == HEADER_FROM_KEY {
                Side::Key
            } else {
                Side::Value
            };
            let t = transform(
                class,
                &[
                    ("fields", "id,n"),
                    ("headers", "h1,h2"),
                    ("operation", "move"),
                ],
            );
            let out = t
                .apply(record(Some(h_schema()), h_value()))
                .unwrap()
                .unwrap();
            // Java: STRUCT<com.H>v2{keep:BOOLEAN;} (required: copySchemaBasics
            // drops optionality), value Struct{keep=true}.
            let s = side.schema(&out).unwrap();
            assert_eq!(s.name.as_deref(), Some("com.H"));
            assert_eq!(s.version, Some(2));
            assert!(!s.optional);
            assert_eq!(s.fields.len(), 1);
            assert_eq!(&*s.fields[0].name, "keep");
            assert_eq!(side.value(&out), &Value::Struct(vec![Value::Boolean(true)]));
            assert_eq!(header_keys(&out), ["first", "h1", "h2"]);
            assert_eq!(out.headers[1].value, Value::string("abc"));
            assert_eq!(
                out.headers[1].schema.as_deref(),
                Some(&Schema::new(Type::String))
            );
            // The default replaces the null; the header keeps the field schema.
            assert_eq!(out.headers[2].value, Value::Int32(42));
            assert_eq!(
                out.headers[2].schema,
                Some(h_schema().fields[1].schema.clone())
            );
            // The other side is untouched.
            let other = if side == Side::Key {
                Side::Value
            } else {
                Side::Key
            };
            assert_eq!(other.schema(&out), Some(&h_schema()));
        }
    }

    #[test]
    fn header_from_copy_keeps_the_struct_and_can_keep_nulls() {
        let t = transform(
            HEADER_FROM_VALUE,
            &[
                ("fields", "n"),
                ("headers", "h2"),
                ("operation", "copy"),
                ("replace.null.with.default", "false"),
            ],
        );
        let out = t
            .apply(record(Some(h_schema()), h_value()))
            .unwrap()
            .unwrap();
        assert_eq!(out.value_schema, Some(h_schema()));
        assert_eq!(out.value, h_value());
        assert_eq!(out.headers[1].value, Value::Null);
        assert_eq!(
            out.headers[1].schema,
            Some(h_schema().fields[1].schema.clone())
        );
    }

    #[test]
    fn header_from_refusals() {
        let t = transform(
            HEADER_FROM_VALUE,
            &[("fields", "id"), ("headers", "h"), ("operation", "move")],
        );
        let err = t.apply(record(Some(h_schema()), Value::Null)).unwrap_err();
        assert_eq!(
            err.message,
            "Only Struct objects supported for [header move], found: null"
        );
        let t = transform(
            HEADER_FROM_VALUE,
            &[("fields", "zz"), ("headers", "h"), ("operation", "copy")],
        );
        let err = t.apply(record(Some(h_schema()), h_value())).unwrap_err();
        assert!(
            err.message.contains("NullPointerException"),
            "{}",
            err.message
        );
        let err = t.apply(record(None, Value::string("x"))).unwrap_err();
        assert_eq!(
            err.message,
            "Only Map objects supported in absence of schema for [header copy], found: java.lang.String"
        );
        // A required field that is null without replacing it by its default.
        let mut s = (*h_schema()).clone();
        let mut n = Schema::new(Type::Int32);
        n.default = Some(Value::Int32(1));
        s.fields[1].schema = Arc::new(n);
        let t = transform(
            HEADER_FROM_VALUE,
            &[
                ("fields", "n"),
                ("headers", "h"),
                ("operation", "copy"),
                ("replace.null.with.default", "false"),
            ],
        );
        let err = t
            .apply(record(Some(Arc::new(s.clone())), h_value()))
            .unwrap_err();
        assert_eq!(
            err.message,
            "A null value requires an optional schema but was Schema{INT32}"
        );
        let t = transform(
            HEADER_FROM_VALUE,
            &[
                ("fields", "id"),
                ("headers", "h"),
                ("operation", "move"),
                ("replace.null.with.default", "false"),
            ],
        );
        let err = t.apply(record(Some(Arc::new(s)), h_value())).unwrap_err();
        assert_eq!(
            err.message,
            "Invalid value: null used for required field: \"n\", schema type: INT32"
        );
    }

    /// Kafka's harness put id, eventType, tenant, aggregateid, payload into a
    /// `HashMap`, which iterates aggregateid, payload, id, eventType, tenant.
    fn java_map() -> Value {
        Value::Map(
            [
                ("aggregateid", "A"),
                ("payload", "P"),
                ("id", "1"),
                ("eventType", "E"),
                ("tenant", "T"),
            ]
            .into_iter()
            .map(|(k, v)| (Value::string(k), Value::string(v)))
            .collect(),
        )
    }

    fn map_keys(v: &Value) -> Vec<&str> {
        match v {
            Value::Map(e) => e
                .iter()
                .map(|(k, _)| match k {
                    Value::String(t) => t.as_str(),
                    _ => "?",
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    #[test]
    fn header_from_schemaless_copies_in_hash_map_order() {
        let t = transform(
            HEADER_FROM_KEY,
            &[
                ("fields", "id,missing"),
                ("headers", "h1,h2"),
                ("operation", "move"),
            ],
        );
        let out = t.apply(record(None, java_map())).unwrap().unwrap();
        // Java: {aggregateid=A, eventType=E, payload=P, tenant=T} (an 8-bucket copy).
        assert_eq!(
            map_keys(&out.key),
            ["aggregateid", "eventType", "payload", "tenant"]
        );
        assert_eq!(out.key_schema, None);
        assert_eq!(header_keys(&out), ["first", "h1", "h2"]);
        assert_eq!(out.headers[1].value, Value::string("1"));
        assert_eq!(out.headers[1].schema, None);
        assert_eq!(out.headers[2].value, Value::Null);
        assert_eq!(out.value, java_map());
        let t = transform(
            HEADER_FROM_KEY,
            &[
                ("fields", "tenant"),
                ("headers", "h1"),
                ("operation", "copy"),
            ],
        );
        let out = t.apply(record(None, java_map())).unwrap().unwrap();
        assert_eq!(
            map_keys(&out.key),
            ["aggregateid", "id", "eventType", "payload", "tenant"]
        );
        assert_eq!(out.headers[1].value, Value::string("T"));
        // Keys whose hash walrelay cannot compute are refused.
        let odd = Value::Map(vec![(Value::Array(vec![]), Value::Null)]);
        assert!(t.apply(record(None, odd)).is_err());
    }

    #[test]
    fn header_from_options_are_validated_as_connect_does() {
        let err = configure(
            HEADER_FROM_VALUE,
            &[("fields", "a,b"), ("headers", "h"), ("operation", "copy")],
        )
        .unwrap_err();
        assert!(err
            .to_string()
            .contains("'fields' config must have the same number of elements"));
        let err = configure(
            HEADER_FROM_VALUE,
            &[("fields", "a"), ("headers", "h"), ("operation", "Move")],
        )
        .unwrap_err();
        assert_eq!(
            err,
            TransformConfigError::invalid("operation", "Move", "String must be one of: move, copy")
        );
        let err = configure(
            HEADER_FROM_VALUE,
            &[("fields", ""), ("headers", "h"), ("operation", "copy")],
        )
        .unwrap_err();
        assert_eq!(
            err,
            TransformConfigError::invalid("fields", "", "Empty list")
        );
        let err = configure(HEADER_FROM_KEY, &[("fields", "a"), ("headers", "h")]).unwrap_err();
        assert_eq!(
            err,
            TransformConfigError::Missing {
                key: "operation".into()
            }
        );
        let err =
            configure(HEADER_FROM_KEY, &[("fields", "a"), ("operation", "copy")]).unwrap_err();
        assert_eq!(err.key(), Some("headers"));
        let err = configure(
            HEADER_FROM_KEY,
            &[
                ("fields", "a"),
                ("headers", "h"),
                ("operation", "copy"),
                ("replace.null.with.default", "maybe"),
            ],
        )
        .unwrap_err();
        assert_eq!(err.key(), Some("replace.null.with.default"));
        assert!(build(
            "org.apache.kafka.connect.transforms.Flatten$Key",
            &Options::default().reader()
        )
        .is_none());
    }

    #[test]
    fn drop_headers_removes_every_header_of_the_names() {
        let t = transform(DROP_HEADERS, &[("headers", "a, c")]);
        let mut r = record(None, Value::Null);
        r.headers = ["a", "b", "c", "a"]
            .into_iter()
            .map(|k| ConnectHeader {
                key: Arc::from(k),
                schema: Some(Arc::new(Schema::new(Type::String))),
                value: Value::string(k),
            })
            .collect();
        let out = t.apply(r).unwrap().unwrap();
        assert_eq!(header_keys(&out), ["b"]);
        let err = configure(DROP_HEADERS, &[("headers", "")]).unwrap_err();
        assert_eq!(
            err,
            TransformConfigError::invalid("headers", "", "Empty list")
        );
        assert!(configure(DROP_HEADERS, &[]).is_err());
    }

    #[test]
    fn insert_header_appends_the_parsed_literal() {
        let t = transform(
            INSERT_HEADER,
            &[("header", "source"), ("value.literal", " 128 ")],
        );
        let out = t.apply(record(None, Value::Null)).unwrap().unwrap();
        assert_eq!(header_keys(&out), ["first", "source"]);
        assert_eq!(out.headers[1].value, Value::Int16(128));
        assert_eq!(
            out.headers[1].schema.as_deref(),
            Some(&Schema::new(Type::Int16))
        );
        let t = transform(INSERT_HEADER, &[("header", "h"), ("value.literal", "null")]);
        let out = t.apply(record(None, Value::Null)).unwrap().unwrap();
        assert_eq!(out.headers[1].schema, None);
        assert_eq!(out.headers[1].value, Value::Null);
        let t = transform(
            INSERT_HEADER,
            &[("header", "h"), ("value.literal", "walrelay")],
        );
        let out = t.apply(record(None, Value::Null)).unwrap().unwrap();
        assert_eq!(out.headers[1].value, Value::string("walrelay"));
        assert_eq!(
            configure(INSERT_HEADER, &[("header", "h")]).unwrap_err(),
            TransformConfigError::Missing {
                key: "value.literal".into()
            }
        );
        assert_eq!(
            configure(INSERT_HEADER, &[("value.literal", "x")]).unwrap_err(),
            TransformConfigError::Missing {
                key: "header".into()
            }
        );
        let err = configure(
            INSERT_HEADER,
            &[("header", "h"), ("value.literal", "[2020-01-01, true]")],
        )
        .unwrap_err();
        assert_eq!(err.key(), Some("value.literal"));
    }

    #[test]
    fn header_schema_checks() {
        assert!(check_schema_matches(None, &Value::Int8(1)).is_ok());
        let err =
            check_schema_matches(Some(&Schema::new(Type::String)), &Value::Int8(1)).unwrap_err();
        assert_eq!(
            err.message,
            "The value 1 is not compatible with the schema Schema{STRING}"
        );
        assert!(check_schema_matches(Some(&Schema::optional(Type::String)), &Value::Null).is_ok());
    }
}
