//! Kafka 4.1.1's `Flatten$Key` / `$Value`: nested structs (or schemaless
//! maps) become one level, field names joined with `delimiter`. With a
//! schema, a flattened field is optional when it or any ancestor is, and
//! takes its own default or its ancestors' default struct's value; the
//! new schema keeps the original's name, version, doc and parameters but
//! is required and has no default. Arrays are left as they are. A null
//! key or value passes unchanged. Pure.

use std::sync::Arc;

use super::options::Reader;
use super::util::{
    boxed, class_name, copy_schema_basics, copy_schema_basics_onto, linked_put, require_map,
    require_struct, struct_get, validate_value,
};
use super::{Built, ConnectRecord, Side, TransformError, Transformation};
use crate::connect::{Field, Schema, Type, Value};

const FLATTEN_KEY: &str = "org.apache.kafka.connect.transforms.Flatten$Key";
const FLATTEN_VALUE: &str = "org.apache.kafka.connect.transforms.Flatten$Value";

/// `Requirements` purpose of Flatten's messages.
const PURPOSE: &str = "flattening";

/// The classes this module builds.
pub(super) const CLASSES: &[&str] = &[FLATTEN_KEY, FLATTEN_VALUE];

/// Builds the transform of `class`, if it is one of [`CLASSES`].
pub(super) fn build(class: &str, opts: &Reader<'_>) -> Option<Built> {
    let side = match class {
        FLATTEN_KEY => Side::Key,
        FLATTEN_VALUE => Side::Value,
        _ => return None,
    };
    Some(
        opts.string("delimiter", Some("."))
            .map(|delimiter| boxed(Flatten { side, delimiter })),
    )
}

/// `Flatten$Key` / `Flatten$Value`.
#[derive(Debug)]
struct Flatten {
    /// Key or value.
    side: Side,
    /// `delimiter`.
    delimiter: String,
}

impl Transformation for Flatten {
    fn apply(&self, mut record: ConnectRecord) -> Result<Option<ConnectRecord>, TransformError> {
        if self.side.value(&record).is_null() {
            return Ok(Some(record));
        }
        let (schema, value) = self.side.take(&mut record);
        let (schema, value) = match schema {
            None => (None, self.flatten_schemaless(&value)?),
            Some(schema) => {
                let (s, v) = self.flatten_with_schema(&schema, &value)?;
                (Some(s), v)
            }
        };
        self.side.set(&mut record, schema, value);
        Ok(Some(record))
    }
}

impl Flatten {
    /// `fieldName(prefix, name)`.
    fn field_name(&self, prefix: &str, name: &str) -> String {
        if prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{prefix}{}{name}", self.delimiter)
        }
    }

    /// `applySchemaless`: a `LinkedHashMap` filled in the source's order
    /// (a name met again keeps its first place and takes the new value).
    fn flatten_schemaless(&self, value: &Value) -> Result<Value, TransformError> {
        let entries = require_map(value, PURPOSE)?;
        let mut out = Vec::new();
        self.flatten_map(entries, "", &mut out)?;
        Ok(Value::Map(
            out.into_iter()
                .map(|(k, v)| (Value::string(k), v))
                .collect(),
        ))
    }

    /// One level of a schemaless map into `out`.
    fn flatten_map(
        &self,
        entries: &[(Value, Value)],
        prefix: &str,
        out: &mut Vec<(String, Value)>,
    ) -> Result<(), TransformError> {
        for (k, v) in entries {
            let Value::String(key) = k else {
                return Err(TransformError::new(format!(
                    "class {} cannot be cast to class java.lang.String (Kafka Connect fails with a ClassCastException here)",
                    class_name(k)
                )));
            };
            let name = self.field_name(prefix, key.as_str());
            match v {
                Value::Map(inner) => self.flatten_map(inner, &name, out)?,
                Value::Decimal(_) => {
                    return Err(TransformError::new(format!(
                        "Flatten transformation was passed a value of type class {} which is not supported by Connect's data API",
                        class_name(v)
                    )))
                }
                Value::Struct(_) => {
                    return Err(TransformError::new(format!(
                        "Flatten transformation does not support class {} for record without schemas (for field {name}).",
                        class_name(v)
                    )))
                }
                _ => linked_put(out, name, v.clone()),
            }
        }
        Ok(())
    }

    /// `applyWithSchema`: the flattened schema, and the struct put into it.
    fn flatten_with_schema(
        &self,
        schema: &Schema,
        value: &Value,
    ) -> Result<(Arc<Schema>, Value), TransformError> {
        let values = require_struct(value, PURPOSE)?;
        let mut updated = copy_schema_basics_onto(schema, Type::Struct);
        let default = struct_default(schema)?;
        self.build_schema(schema, "", &mut updated.fields, schema.optional, default)?;
        let mut out = vec![Value::Null; updated.fields.len()];
        self.put_values(schema, values, "", &updated, &mut out)?;
        Ok((Arc::new(updated), Value::Struct(out)))
    }

    /// `buildUpdatedSchema`: each leaf field under its joined name.
    fn build_schema(
        &self,
        schema: &Schema,
        prefix: &str,
        fields: &mut Vec<Field>,
        optional: bool,
        parent_default: Option<&[Value]>,
    ) -> Result<(), TransformError> {
        if schema.kind != Type::Struct {
            return Err(TransformError::new("Cannot list fields on non-struct type"));
        }
        for (i, field) in schema.fields.iter().enumerate() {
            let name = self.field_name(prefix, &field.name);
            let field_optional = optional || field.schema.optional;
            let default = match (&field.schema.default, parent_default) {
                (Some(d), _) => Some(d),
                (None, Some(values)) => values.get(i).filter(|v| !v.is_null()),
                (None, None) => None,
            };
            match field.schema.kind {
                Type::Struct => {
                    let nested = match default {
                        Some(Value::Struct(v)) => Some(v.as_slice()),
                        Some(other) => return Err(not_a_struct(other)),
                        None => None,
                    };
                    self.build_schema(&field.schema, &name, fields, field_optional, nested)?;
                }
                Type::Map => {
                    return Err(TransformError::new(format!(
                        "Flatten transformation does not support MAP for record with schemas (for field {name})."
                    )))
                }
                _ => {
                    let mut leaf = copy_schema_basics(&field.schema);
                    leaf.optional = field_optional;
                    if let Some(d) = default {
                        validate_value(None, &leaf, d)
                            .map_err(|_| TransformError::new("Invalid default value"))?;
                        leaf.default = Some(d.clone());
                    }
                    if fields.iter().any(|f| *f.name == *name) {
                        return Err(TransformError::new(format!(
                            "Cannot create field because of field name duplication {name}"
                        )));
                    }
                    fields.push(Field {
                        name: Arc::from(name.as_str()),
                        schema: Arc::new(leaf),
                    });
                }
            }
        }
        Ok(())
    }

    /// `buildWithSchema`: each leaf's `Struct.get` (default applied) put
    /// into the flattened struct; a nested struct is read with
    /// `getStruct`, which ignores defaults, so a null one puts nothing.
    fn put_values(
        &self,
        schema: &Schema,
        values: &[Value],
        prefix: &str,
        updated: &Schema,
        out: &mut [Value],
    ) -> Result<(), TransformError> {
        for (i, field) in schema.fields.iter().enumerate() {
            let name = self.field_name(prefix, &field.name);
            if field.schema.kind == Type::Struct {
                match values.get(i).unwrap_or(&Value::Null) {
                    Value::Null => {}
                    Value::Struct(inner) => {
                        self.put_values(&field.schema, inner, &name, updated, out)?;
                    }
                    other => return Err(not_a_struct(other)),
                }
                continue;
            }
            let v = struct_get(schema, values, i);
            let Some(index) = updated.field_index(&name) else {
                return Err(TransformError::new(format!(
                    "{name} is not a valid field name"
                )));
            };
            validate_value(Some(&name), &updated.fields[index].schema, v)?;
            out[index] = v.clone();
        }
        Ok(())
    }
}

/// `(Struct) schema.defaultValue()`.
fn struct_default(schema: &Schema) -> Result<Option<&[Value]>, TransformError> {
    match &schema.default {
        None => Ok(None),
        Some(Value::Struct(v)) => Ok(Some(v)),
        Some(other) => Err(not_a_struct(other)),
    }
}

/// The `ClassCastException` of casting a non-struct to `Struct`.
fn not_a_struct(v: &Value) -> TransformError {
    TransformError::new(format!(
        "class {} cannot be cast to class org.apache.kafka.connect.data.Struct (Kafka Connect fails with a ClassCastException here)",
        class_name(v)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::transforms::options::Options;
    use crate::connect::Decimal;

    fn transform(class: &str, pairs: &[(&str, &str)]) -> Box<dyn Transformation> {
        let opts: Options = pairs.iter().copied().collect();
        build(class, &opts.reader())
            .expect("class of this module")
            .expect("valid configuration")
    }

    fn record(side: Side, schema: Option<Arc<Schema>>, value: Value) -> ConnectRecord {
        let mut r = ConnectRecord {
            topic: Arc::from("t"),
            partition: None,
            key_schema: None,
            key: Value::string("k"),
            value_schema: None,
            value: Value::string("v"),
            timestamp: None,
            headers: Vec::new(),
        };
        side.set(&mut r, schema, value);
        r
    }

    fn field(name: &str, schema: Schema) -> Field {
        Field {
            name: Arc::from(name),
            schema: Arc::new(schema),
        }
    }

    fn with_default(mut s: Schema, d: Value) -> Schema {
        s.default = Some(d);
        s
    }

    /// The Java harness's `deep` {z: BOOLEAN default true} and optional
    /// `inner` {x: INT32, y: STRING?, deep}.
    fn inner() -> Schema {
        let deep = Schema::structure(
            None,
            vec![field(
                "z",
                with_default(Schema::new(Type::Boolean), Value::Boolean(true)),
            )],
        );
        Schema::structure(
            None,
            vec![
                field("x", Schema::new(Type::Int32)),
                field("y", Schema::optional(Type::String)),
                field("deep", deep),
            ],
        )
        .with_optional(true)
    }

    /// `com.Outer` v3, doc `d`, parameter a=b, optional.
    fn outer() -> Arc<Schema> {
        let mut s = Schema::structure(
            Some("com.Outer"),
            vec![
                field("id", Schema::new(Type::Int32)),
                field("inner", inner()),
                field(
                    "arr",
                    Schema::array(Arc::new(Schema::new(Type::Int8))).with_optional(true),
                ),
            ],
        )
        .with_optional(true)
        .with_parameter("a", "b");
        s.version = Some(3);
        s.doc = Some(Arc::from("d"));
        Arc::new(s)
    }

    fn names(s: &Schema) -> Vec<&str> {
        s.fields.iter().map(|f| &*f.name).collect()
    }

    #[test]
    fn nested_structs_flatten_with_inherited_optionality() {
        for side in [Side::Key, Side::Value] {
            let class = if side == Side::Key {
                FLATTEN_KEY
            } else {
                FLATTEN_VALUE
            };
            let t = transform(class, &[]);
            let value = Value::Struct(vec![
                Value::Int32(1),
                Value::Struct(vec![
                    Value::Int32(7),
                    Value::Null,
                    Value::Struct(vec![Value::Null]),
                ]),
                Value::Null,
            ]);
            let out = t
                .apply(record(side, Some(outer()), value))
                .unwrap()
                .unwrap();
            // Java: STRUCT<com.Outer>v3doc=d{a=b}{id:INT32?;inner.x:INT32?;
            // inner.y:STRING?;inner.deep.z:BOOLEAN? default=true;arr:ARRAY?[INT8];}
            // (the root was optional, so every field is), Struct{id=1,
            // inner.x=7,inner.deep.z=true} (z's default applied by get).
            let s = side.schema(&out).unwrap();
            assert_eq!(
                names(s),
                ["id", "inner.x", "inner.y", "inner.deep.z", "arr"]
            );
            assert!(s.fields.iter().all(|f| f.schema.optional));
            assert_eq!(s.name.as_deref(), Some("com.Outer"));
            assert_eq!((s.version, s.doc.as_deref()), (Some(3), Some("d")));
            assert_eq!(s.parameters, outer().parameters);
            assert!(!s.optional && s.default.is_none());
            assert_eq!(s.fields[3].schema.default, Some(Value::Boolean(true)));
            assert_eq!(s.fields[4].schema.kind, Type::Array);
            assert_eq!(
                s.fields[4].schema.value_schema.as_ref().unwrap().kind,
                Type::Int8
            );
            assert_eq!(
                side.value(&out),
                &Value::Struct(vec![
                    Value::Int32(1),
                    Value::Int32(7),
                    Value::Null,
                    Value::Boolean(true),
                    Value::Null
                ])
            );
        }
    }

    #[test]
    fn the_delimiter_and_a_null_nested_struct() {
        let t = transform(FLATTEN_VALUE, &[("delimiter", "_")]);
        let arr = Value::Array(vec![Value::Int8(1), Value::Int8(2)]);
        let value = Value::Struct(vec![Value::Int32(2), Value::Null, arr.clone()]);
        let out = t
            .apply(record(Side::Value, Some(outer()), value))
            .unwrap()
            .unwrap();
        let s = out.value_schema.unwrap();
        assert_eq!(
            names(&s),
            ["id", "inner_x", "inner_y", "inner_deep_z", "arr"]
        );
        assert_eq!(
            out.value,
            Value::Struct(vec![
                Value::Int32(2),
                Value::Null,
                Value::Null,
                Value::Null,
                arr
            ])
        );
        assert_eq!(out.key, Value::string("k"));
    }

    #[test]
    fn defaults_come_from_the_parent_default_struct() {
        // inner's default {x=5, y=null, deep={z=false}}; z's own default
        // (true) wins, y has none. The null inner puts nothing: getStruct
        // ignores defaults (Java: Struct{}).
        let inner_default = Value::Struct(vec![
            Value::Int32(5),
            Value::Null,
            Value::Struct(vec![Value::Boolean(false)]),
        ]);
        let schema = Arc::new(Schema::structure(
            None,
            vec![field("inner", with_default(inner(), inner_default))],
        ));
        let t = transform(FLATTEN_VALUE, &[]);
        let out = t
            .apply(record(
                Side::Value,
                Some(schema),
                Value::Struct(vec![Value::Null]),
            ))
            .unwrap()
            .unwrap();
        let s = out.value_schema.unwrap();
        let defaults: Vec<_> = s.fields.iter().map(|f| f.schema.default.clone()).collect();
        assert_eq!(
            defaults,
            [Some(Value::Int32(5)), None, Some(Value::Boolean(true))]
        );
        assert!(s.fields.iter().all(|f| f.schema.optional));
        assert_eq!(out.value, Value::Struct(vec![Value::Null; 3]));
    }

    #[test]
    fn tombstones_pass_unchanged() {
        let t = transform(FLATTEN_VALUE, &[]);
        let r = record(Side::Value, Some(outer()), Value::Null);
        assert_eq!(t.apply(r.clone()).unwrap(), Some(r));
        let t = transform(FLATTEN_KEY, &[]);
        let r = record(Side::Key, None, Value::Null);
        assert_eq!(t.apply(r.clone()).unwrap(), Some(r));
    }

    #[test]
    fn schemaless_maps_flatten_in_linked_order() {
        let t = transform(FLATTEN_KEY, &[]);
        let s = |x: &str| Value::string(x);
        let nested = Value::Map(vec![
            (s("b"), Value::Int32(1)),
            (s("c"), Value::Map(vec![(s("d"), s("x"))])),
        ]);
        let map = Value::Map(vec![
            (s("a.b"), Value::Int32(0)),
            (s("a"), nested),
            (s("n"), Value::Null),
            (s("l"), Value::Array(vec![Value::Int32(1)])),
        ]);
        let out = t.apply(record(Side::Key, None, map)).unwrap().unwrap();
        // Java: {a.b=1, a.c.d=x, n=null, l=[1]}: a.b keeps its place.
        assert_eq!(
            out.key,
            Value::Map(vec![
                (s("a.b"), Value::Int32(1)),
                (s("a.c.d"), s("x")),
                (s("n"), Value::Null),
                (s("l"), Value::Array(vec![Value::Int32(1)])),
            ])
        );
        assert_eq!(out.key_schema, None);
    }

    #[test]
    fn refusals_word_for_word() {
        let t = transform(FLATTEN_VALUE, &[]);
        let dec = Value::Decimal(Decimal {
            negative: false,
            digits: "15".into(),
            scale: 1,
        });
        let err = t
            .apply(record(
                Side::Value,
                None,
                Value::Map(vec![(Value::string("x"), dec)]),
            ))
            .unwrap_err();
        assert_eq!(
            err.message,
            "Flatten transformation was passed a value of type class java.math.BigDecimal which is not supported by Connect's data API"
        );
        let err = t
            .apply(record(Side::Value, None, Value::string("x")))
            .unwrap_err();
        assert_eq!(
            err.message,
            "Only Map objects supported in absence of schema for [flattening], found: java.lang.String"
        );
        let err = t
            .apply(record(
                Side::Value,
                None,
                Value::Map(vec![(Value::Int32(1), Value::Null)]),
            ))
            .unwrap_err();
        assert!(err.message.contains("ClassCastException"));
    }

    #[test]
    fn schema_refusals_word_for_word() {
        let t = transform(FLATTEN_VALUE, &[]);
        let mut map_schema = Schema::new(Type::Map);
        map_schema.key_schema = Some(Arc::new(Schema::new(Type::String)));
        map_schema.value_schema = Some(Arc::new(Schema::new(Type::String)));
        let schema = Arc::new(Schema::structure(None, vec![field("m", map_schema)]));
        let err = t
            .apply(record(
                Side::Value,
                Some(schema.clone()),
                Value::Struct(vec![Value::Map(vec![])]),
            ))
            .unwrap_err();
        assert_eq!(
            err.message,
            "Flatten transformation does not support MAP for record with schemas (for field m)."
        );
        let err = t
            .apply(record(Side::Value, Some(schema), Value::Int32(1)))
            .unwrap_err();
        assert_eq!(
            err.message,
            "Only Struct objects supported for [flattening], found: java.lang.Integer"
        );
        // `a.b` twice: SchemaBuilder refuses the duplicate.
        let dup = Arc::new(Schema::structure(
            None,
            vec![
                field("a.b", Schema::new(Type::Int32)),
                field(
                    "a",
                    Schema::structure(None, vec![field("b", Schema::new(Type::Int32))]),
                ),
            ],
        ));
        let err = t
            .apply(record(
                Side::Value,
                Some(dup),
                Value::Struct(vec![Value::Int32(1), Value::Struct(vec![Value::Int32(2)])]),
            ))
            .unwrap_err();
        assert_eq!(
            err.message,
            "Cannot create field because of field name duplication a.b"
        );
        // A required leaf under required parents that is null.
        let req = Arc::new(Schema::structure(
            None,
            vec![field("x", Schema::new(Type::Int32))],
        ));
        let err = t
            .apply(record(
                Side::Value,
                Some(req),
                Value::Struct(vec![Value::Null]),
            ))
            .unwrap_err();
        assert_eq!(
            err.message,
            "Invalid value: null used for required field: \"x\", schema type: INT32"
        );
    }
}
