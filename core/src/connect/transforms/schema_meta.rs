//! Kafka 4.1.1's `SetSchemaMetadata$Key` / `$Value` (a new name and/or
//! version on the key or value schema, the struct rebuilt on it). Pure.

use std::sync::Arc;

use super::options::{Reader, TransformConfigError};
use super::util::{boxed, field_value, require_schema, validate_value};
use super::{Built, ConnectRecord, Side, TransformError, Transformation};
use crate::connect::{Schema, Type, Value};

const SET_SCHEMA_METADATA_KEY: &str = "org.apache.kafka.connect.transforms.SetSchemaMetadata$Key";
const SET_SCHEMA_METADATA_VALUE: &str =
    "org.apache.kafka.connect.transforms.SetSchemaMetadata$Value";

/// The classes this module builds.
pub(super) const CLASSES: &[&str] = &[SET_SCHEMA_METADATA_KEY, SET_SCHEMA_METADATA_VALUE];

/// Builds the transform of `class`, if it is one of [`CLASSES`].
pub(super) fn build(class: &str, opts: &Reader<'_>) -> Option<Built> {
    let side = match class {
        SET_SCHEMA_METADATA_KEY => Side::Key,
        SET_SCHEMA_METADATA_VALUE => Side::Value,
        _ => return None,
    };
    Some(SetSchemaMetadata::configure(side, opts).map(boxed))
}

/// `SetSchemaMetadata$Key` / `$Value`.
#[derive(Debug)]
struct SetSchemaMetadata {
    /// Key or value.
    side: Side,
    /// `schema.name`.
    name: Option<String>,
    /// `schema.version`.
    version: Option<i32>,
    /// `replace.null.with.default`.
    replace_null_with_default: bool,
}

impl SetSchemaMetadata {
    /// `SetSchemaMetadata.configure`: at least one of name and version.
    fn configure(side: Side, opts: &Reader<'_>) -> Result<SetSchemaMetadata, TransformConfigError> {
        let name = opts.string_or_null("schema.name");
        let version = match opts.raw("schema.version") {
            Some(_) => Some(opts.int("schema.version", None)?),
            None => None,
        };
        let replace_null_with_default = opts.boolean("replace.null.with.default", true)?;
        if name.is_none() && version.is_none() {
            return Err(TransformConfigError::invalid(
                "schema.name",
                "",
                "Neither schema name nor version configured",
            ));
        }
        Ok(SetSchemaMetadata {
            side,
            name,
            version,
            replace_null_with_default,
        })
    }

    /// The schema with the new name and/or version; `schema.fields()` is
    /// read unconditionally, so anything but a struct schema fails.
    fn updated_schema(&self, schema: &Schema) -> Result<Schema, TransformError> {
        if schema.kind != Type::Struct {
            return Err(TransformError::new("Cannot list fields on non-struct type"));
        }
        let mut updated = schema.clone();
        if let Some(n) = &self.name {
            updated.name = Some(Arc::from(n.as_str()));
        }
        if self.version.is_some() {
            updated.version = self.version;
        }
        Ok(updated)
    }

    /// `updateSchemaIn`: a struct put field by field into a struct of the
    /// new schema (defaults applied unless `replace.null.with.default` is
    /// off); anything else as it is.
    fn update_schema_in(&self, schema: &Schema, value: Value) -> Result<Value, TransformError> {
        let Value::Struct(values) = value else {
            return Ok(value);
        };
        let mut out = Vec::with_capacity(schema.fields.len());
        for (i, field) in schema.fields.iter().enumerate() {
            let v = field_value(schema, &values, i, self.replace_null_with_default).clone();
            validate_value(Some(&field.name), &field.schema, &v)?;
            out.push(v);
        }
        Ok(Value::Struct(out))
    }
}

impl Transformation for SetSchemaMetadata {
    fn apply(&self, mut record: ConnectRecord) -> Result<Option<ConnectRecord>, TransformError> {
        if self.side.value(&record).is_null() && self.side.schema(&record).is_none() {
            return Ok(Some(record));
        }
        let (schema, value) = self.side.take(&mut record);
        let schema = require_schema(schema.as_ref(), "updating schema metadata")?;
        let updated = self.updated_schema(schema)?;
        let value = self.update_schema_in(&updated, value)?;
        self.side.set(&mut record, Some(Arc::new(updated)), value);
        Ok(Some(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::transforms::options::Options;
    use crate::connect::{Decimal, Field, DECIMAL_NAME};

    fn configure(class: &str, pairs: &[(&str, &str)]) -> Built {
        let opts: Options = pairs.iter().copied().collect();
        build(class, &opts.reader()).expect("class of this module")
    }

    fn record(side: Side, schema: Option<Arc<Schema>>, value: Value) -> ConnectRecord {
        let mut r = ConnectRecord {
            topic: Arc::from("t"),
            partition: None,
            key_schema: None,
            key: Value::Null,
            value_schema: None,
            value: Value::Null,
            timestamp: None,
            headers: Vec::new(),
        };
        side.set(&mut r, schema, value);
        r
    }

    /// The harness's `com.H` v2, optional: id, n (INT32? default 42), keep.
    fn h_schema() -> Arc<Schema> {
        let mut n = Schema::optional(Type::Int32);
        n.default = Some(Value::Int32(42));
        let f = |name: &str, s: Schema| Field {
            name: Arc::from(name),
            schema: Arc::new(s),
        };
        let mut s = Schema::structure(
            Some("com.H"),
            vec![
                f("id", Schema::new(Type::String)),
                f("n", n),
                f("keep", Schema::new(Type::Boolean)),
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

    #[test]
    fn a_struct_is_rebuilt_on_the_renamed_schema() {
        for (class, side) in [
            (SET_SCHEMA_METADATA_KEY, Side::Key),
            (SET_SCHEMA_METADATA_VALUE, Side::Value),
        ] {
            let t = configure(class, &[("schema.name", "new.Name")]).unwrap();
            let out = t
                .apply(record(side, Some(h_schema()), h_value()))
                .unwrap()
                .unwrap();
            let s = side.schema(&out).unwrap();
            // Java: STRUCT?<new.Name>v2{...}, Struct{id=abc,n=42,keep=true}.
            let mut expected = (*h_schema()).clone();
            expected.name = Some(Arc::from("new.Name"));
            assert_eq!(**s, expected);
            assert_eq!(
                side.value(&out),
                &Value::Struct(vec![
                    Value::string("abc"),
                    Value::Int32(42),
                    Value::Boolean(true)
                ])
            );
        }
        let t = configure(
            SET_SCHEMA_METADATA_VALUE,
            &[
                ("schema.version", "9"),
                ("replace.null.with.default", "false"),
            ],
        )
        .unwrap();
        let out = t
            .apply(record(Side::Value, Some(h_schema()), h_value()))
            .unwrap()
            .unwrap();
        let s = out.value_schema.unwrap();
        assert_eq!((s.name.as_deref(), s.version), (Some("com.H"), Some(9)));
        assert_eq!(out.value, h_value());
    }

    #[test]
    fn nulls_non_structs_and_schemaless_values() {
        let t = configure(SET_SCHEMA_METADATA_VALUE, &[("schema.name", "x")]).unwrap();
        let r = record(Side::Value, None, Value::Null);
        assert_eq!(t.apply(r.clone()).unwrap(), Some(r));
        // A tombstone with a schema: the schema is renamed (Java: STRUCT?<x>v2).
        let out = t
            .apply(record(Side::Value, Some(h_schema()), Value::Null))
            .unwrap()
            .unwrap();
        assert_eq!(out.value_schema.unwrap().name.as_deref(), Some("x"));
        assert_eq!(out.value, Value::Null);
        let err = t
            .apply(record(Side::Value, None, Value::Map(vec![])))
            .unwrap_err();
        assert_eq!(
            err.message,
            "Schema required for [updating schema metadata]"
        );
        // schema.fields() throws for any non-struct schema, Decimal included.
        let t = configure(SET_SCHEMA_METADATA_KEY, &[("schema.name", "x")]).unwrap();
        let err = t
            .apply(record(
                Side::Key,
                Some(Arc::new(Schema::new(Type::String))),
                Value::string("k"),
            ))
            .unwrap_err();
        assert_eq!(err.message, "Cannot list fields on non-struct type");
        let decimal = Schema::new(Type::Bytes)
            .named(DECIMAL_NAME, Some(1))
            .with_parameter("scale", "2");
        let v = Value::Decimal(Decimal {
            negative: false,
            digits: "123".into(),
            scale: 2,
        });
        assert!(t
            .apply(record(Side::Key, Some(Arc::new(decimal)), v))
            .is_err());
    }

    #[test]
    fn required_null_without_its_default_is_refused() {
        let mut s = (*h_schema()).clone();
        let mut n = Schema::new(Type::Int32);
        n.default = Some(Value::Int32(1));
        s.fields[1].schema = Arc::new(n);
        let t = configure(
            SET_SCHEMA_METADATA_VALUE,
            &[("schema.name", "x"), ("replace.null.with.default", "false")],
        )
        .unwrap();
        let err = t
            .apply(record(Side::Value, Some(Arc::new(s)), h_value()))
            .unwrap_err();
        assert_eq!(
            err.message,
            "Invalid value: null used for required field: \"n\", schema type: INT32"
        );
    }

    #[test]
    fn options() {
        let err = configure(SET_SCHEMA_METADATA_VALUE, &[]).unwrap_err();
        assert!(err
            .to_string()
            .contains("Neither schema name nor version configured"));
        let err = configure(SET_SCHEMA_METADATA_VALUE, &[("schema.version", "one")]).unwrap_err();
        assert_eq!(err.key(), Some("schema.version"));
        assert!(configure(SET_SCHEMA_METADATA_VALUE, &[("schema.version", "1")]).is_ok());
        assert!(build(
            "org.apache.kafka.connect.transforms.Filter",
            &Options::default().reader()
        )
        .is_none());
    }

    #[test]
    fn validate_value_messages() {
        let s = Schema::new(Type::Int64).named("org.apache.kafka.connect.data.Timestamp", Some(1));
        assert!(validate_value(None, &s, &Value::Int64(1)).is_ok());
        let err = validate_value(Some("ts"), &s, &Value::Int32(1)).unwrap_err();
        assert_eq!(
            err.message,
            "Invalid Java object for schema \"org.apache.kafka.connect.data.Timestamp\" with type INT64: class java.lang.Integer for field: \"ts\""
        );
        let arr = Schema::array(Arc::new(Schema::new(Type::String)));
        let err = validate_value(None, &arr, &Value::Array(vec![Value::Null])).unwrap_err();
        assert_eq!(
            err.message,
            "Invalid value: null used for required element of array value, schema type: STRING"
        );
        let err =
            validate_value(None, &Schema::new(Type::Array), &Value::Array(vec![])).unwrap_err();
        assert_eq!(err.message, "No schema defined for element of array value");
        assert!(validate_value(None, &h_schema(), &h_value()).is_ok());
        let err = validate_value(None, &h_schema(), &Value::Struct(vec![])).unwrap_err();
        assert_eq!(err.message, "Struct schemas do not match.");
    }
}
