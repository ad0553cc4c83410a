//! `table.expand.json.payload`: Debezium's `JsonSchemaData`, which infers a
//! Connect schema from a JSON payload and converts the document to a struct.
//!
//! Owns the inference rules (every field optional, `int`/`long`/double
//! numbers, homogeneous arrays, merged struct elements, the null and
//! empty-array behaviours, `field.name.adjustment.mode`) and the value
//! conversion with Connect's `Struct.put` validation. Any failure is an
//! [`ExpandError`] saying how far expansion got ([`ExpandStage`]): before
//! the schema was inferred Debezium keeps the payload string (after logging
//! "JSON expansion failed"); after it, Debezium sends the string under the
//! inferred schema, which fails its task unless the converter is
//! StringConverter. The router decides which. It never logs.

use std::sync::Arc;

use serde::Deserialize;

use super::json::{parse, JsonNode};
use super::{Decimal, Field, Schema, Text, Type, Value};

/// `table.json.payload.null.behavior`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum NullBehavior {
    /// Drop JSON nulls from the inferred schema.
    #[default]
    Ignore,
    /// Keep them as optional BYTES fields.
    OptionalBytes,
}

/// `table.json.payload.empty.array.behavior`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum EmptyArrayBehavior {
    /// Drop empty arrays from the inferred schema.
    #[default]
    Ignore,
    /// Keep them as arrays of optional strings.
    OptionalString,
}

/// `field.name.adjustment.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum FieldNameAdjustment {
    /// Names as in the document.
    #[default]
    None,
    /// Characters Avro does not allow become `_`.
    Avro,
    /// Characters Avro does not allow become `_uXXXX`.
    AvroUnicode,
}

impl FieldNameAdjustment {
    /// Debezium's `SchemaNameAdjuster` for field names (`AVRO_FIELD_NAMER`,
    /// `AVRO_UNICODE_FIELD_NAMER`), applied per UTF-16 unit like Java.
    pub(crate) fn adjust(self, name: &str) -> String {
        adjust_name(self, name, false)
    }

    /// Debezium's `SchemaNameAdjuster` for schema names (`AVRO`,
    /// `AVRO_UNICODE`: the connector's `schema.name.adjustment.mode`), which
    /// also keeps `.` after the first character.
    pub(crate) fn adjust_schema_name(self, name: &str) -> String {
        adjust_name(self, name, true)
    }
}

/// `SchemaNameAdjuster.validFullname` with Debezium's replacement functions:
/// a first character must be an ASCII letter (or `_`, except in
/// `avro_unicode`), later ones may also be ASCII digits (and `.` in schema
/// names). `avro` replaces an invalid unit by `_` (a leading digit is kept
/// after it); `avro_unicode` by `_u` and Java's `Integer.toHexString`,
/// padded with `00` only when it has one or two digits. Each UTF-16 unit
/// is judged alone, as Java's `charAt` sees it.
fn adjust_name(mode: FieldNameAdjustment, name: &str, schema_name: bool) -> String {
    if mode == FieldNameAdjustment::None || name.is_empty() {
        return name.to_owned();
    }
    let unicode = mode == FieldNameAdjustment::AvroUnicode;
    let letter = |u: u16| u < 128 && (u as u8).is_ascii_alphabetic();
    let valid_first = |u: u16| letter(u) || (!unicode && u == u16::from(b'_'));
    let valid = |u: u16| {
        valid_first(u)
            || (u < 128 && (u as u8).is_ascii_digit())
            || (schema_name && u == u16::from(b'.'))
    };
    let mut out = String::with_capacity(name.len() + 8);
    let units: Vec<u16> = name.encode_utf16().collect();
    for (i, &u) in units.iter().enumerate() {
        let ok = if i == 0 { valid_first(u) } else { valid(u) };
        if ok {
            // Only ASCII units are valid.
            out.push(u as u8 as char);
            continue;
        }
        if unicode {
            let hex = format!("{u:x}");
            out.push_str("_u");
            if hex.len() <= 2 {
                out.push_str("00");
            }
            out.push_str(&hex);
        } else {
            out.push('_');
            // Java's Character.isDigit: a leading digit is kept after it.
            if i == 0 && char::from_u32(u32::from(u)).is_some_and(char::is_numeric) {
                out.push(char::from_u32(u32::from(u)).unwrap_or('_'));
            }
        }
    }
    out
}

/// Why a payload could not be expanded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("json expansion failed: {reason}")]
pub(crate) struct ExpandError {
    /// Debezium's (or Kafka's) message.
    pub(crate) reason: String,
    /// How far `EventRouterDelegate` got before it failed.
    pub(crate) stage: ExpandStage,
}

/// Where expansion failed, which decides what Debezium sends: it replaces
/// the payload's schema with the inferred one before it converts the
/// value, and keeps the replaced schema when the value then fails.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ExpandStage {
    /// The text does not start with `{` or `[`, or is not JSON: Debezium
    /// keeps the text and its column schema.
    Parse,
    /// No schema could be inferred (an array mixing types): the text and
    /// its column schema are kept.
    Schema,
    /// The schema was inferred (`None`: the document has none, as the empty
    /// array with `ignore`) but the value does not fit it (a top-level
    /// array; an element of another type than the first): Debezium goes on
    /// with the text under the inferred schema, so its envelope struct or
    /// its converter fails the task, unless StringConverter prints the text
    /// (or JsonConverter writes it schemaless, where no schema was inferred).
    Value {
        /// The inferred schema.
        schema: Option<Arc<Schema>>,
    },
}

fn fail<T>(reason: impl Into<String>) -> Result<T, ExpandError> {
    Err(ExpandError {
        reason: reason.into(),
        stage: ExpandStage::Parse,
    })
}

/// Sets the stage of an error from a later step.
fn at<T>(r: Result<T, ExpandError>, stage: &ExpandStage) -> Result<T, ExpandError> {
    r.map_err(|mut e| {
        e.stage = stage.clone();
        e
    })
}

/// Debezium's `JsonSchemaData` with its three options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct JsonSchemaData {
    /// What JSON nulls become.
    pub(crate) null_behavior: NullBehavior,
    /// What empty arrays become.
    pub(crate) empty_array_behavior: EmptyArrayBehavior,
    /// How member names become field names.
    pub(crate) field_names: FieldNameAdjustment,
}

fn optional(kind: Type) -> Arc<Schema> {
    Arc::new(Schema::optional(kind))
}

impl JsonSchemaData {
    /// Expands `payload` (the text of column `column`) the way
    /// `EventRouterDelegate` does: only text starting with `{` or `[` is
    /// parsed; the schema is named after the column.
    pub(crate) fn expand(
        &self,
        column: &str,
        payload: &str,
    ) -> Result<(Arc<Schema>, Value), ExpandError> {
        if !(payload.starts_with('{') || payload.starts_with('[')) {
            return fail("payload does not start with '{' or '['");
        }
        let doc = parse(payload).map_err(|e| ExpandError {
            reason: e.to_string(),
            stage: ExpandStage::Parse,
        })?;
        let schema = at(
            self.to_connect_schema(Some(column), &doc),
            &ExpandStage::Schema,
        )?;
        let stage = ExpandStage::Value {
            schema: schema.clone(),
        };
        // `new Struct(null)` fails where the document has no schema.
        let Some(schema) = schema else {
            return at(fail("payload has no schema"), &stage);
        };
        let value = at(self.to_connect_data(&doc, &schema), &stage)?;
        Ok((schema, value))
    }

    /// `toConnectSchema(key, node)`; `None` where Debezium returns null.
    #[allow(
        clippy::wrong_self_convention,
        reason = "named after Connect's toConnectSchema"
    )]
    pub(crate) fn to_connect_schema(
        &self,
        key: Option<&str>,
        node: &JsonNode,
    ) -> Result<Option<Arc<Schema>>, ExpandError> {
        Ok(Some(match node {
            JsonNode::String(_) => optional(Type::String),
            JsonNode::Bool(_) => optional(Type::Boolean),
            JsonNode::Int(_) => optional(Type::Int32),
            JsonNode::Long(_) => optional(Type::Int64),
            JsonNode::BigInt(_) | JsonNode::Double(_) => optional(Type::Float64),
            JsonNode::Array(items) => {
                if items.is_empty() {
                    return Ok(match self.empty_array_behavior {
                        EmptyArrayBehavior::OptionalString => Some(Arc::new(
                            Schema::array(optional(Type::String)).with_optional(true),
                        )),
                        EmptyArrayBehavior::Ignore => None,
                    });
                }
                let items = self.array_element_schema(key, items)?;
                Arc::new(Schema::array(items).with_optional(true))
            }
            JsonNode::Object(members) => {
                let mut s = Schema::structure(key, Vec::new()).with_optional(true);
                for (name, v) in members {
                    let field_name = self.field_names.adjust(name);
                    let field_key = match key {
                        Some(k) if !k.trim().is_empty() => format!("{k}.{field_name}"),
                        _ => field_name.clone(),
                    };
                    if let Some(fs) = self.to_connect_schema(Some(&field_key), v)? {
                        if s.field_index(&field_name).is_none() {
                            s.fields.push(Field {
                                name: Arc::from(field_name),
                                schema: fs,
                            });
                        }
                    }
                }
                Arc::new(s)
            }
            JsonNode::Null => match self.null_behavior {
                NullBehavior::OptionalBytes => optional(Type::Bytes),
                NullBehavior::Ignore => return Ok(None),
            },
        }))
    }

    /// `toConnectSchemaWithCycles`.
    fn array_element_schema(
        &self,
        key: Option<&str>,
        items: &[JsonNode],
    ) -> Result<Arc<Schema>, ExpandError> {
        let sample = self.first_array_element(items)?;
        if let JsonNode::Object(_) = sample {
            // Debezium merges a HashSet of element schemas, whose order
            // follows Java hash codes; walrelay merges in document order,
            // which only differs when elements have different field sets.
            let mut distinct: Vec<Arc<Schema>> = Vec::new();
            for e in items {
                if let JsonNode::Object(_) = e {
                    if let Some(s) = self.to_connect_schema(key, e)? {
                        if !distinct.contains(&s) {
                            distinct.push(s);
                        }
                    }
                }
            }
            let mut merged: Option<Arc<Schema>> = None;
            for s in distinct {
                merged = Some(match merged {
                    None => s,
                    Some(left) => Arc::new(merge(&left, &s)),
                });
            }
            merged.map_or_else(|| fail("array has no element schema"), Ok)
        } else {
            match self.to_connect_schema(None, sample)? {
                Some(s) => Ok(s),
                None => fail("Array '' has unrecognized member schema."),
            }
        }
    }

    /// `getFirstArrayElement`: the first non-null element, after checking
    /// that every element has its node type (and number schema).
    fn first_array_element<'a>(&self, items: &'a [JsonNode]) -> Result<&'a JsonNode, ExpandError> {
        static NULL: JsonNode = JsonNode::Null;
        let mut reference: &JsonNode = &NULL;
        let mut reference_schema: Option<Arc<Schema>> = None;
        for e in items {
            if matches!(e, JsonNode::Null) {
                continue;
            }
            if matches!(reference, JsonNode::Null) {
                reference = e;
            }
            if e.node_type() != reference.node_type() {
                return fail(format!(
                    "Field is not a homogenous array ({} x {}).",
                    reference.as_text(),
                    e.node_type()
                ));
            }
            if reference.node_type() == "NUMBER" {
                if reference_schema.is_none() {
                    reference_schema = self.to_connect_schema(None, reference)?;
                }
                let es = self.to_connect_schema(None, e)?;
                if let (Some(r), Some(es)) = (&reference_schema, &es) {
                    if r.kind != es.kind {
                        return fail(format!(
                            "Field is not a homogenous array ({} x {}), different number types ({} x {})",
                            reference.as_text(),
                            e.as_text(),
                            r.java_string(),
                            es.java_string()
                        ));
                    }
                }
            }
        }
        Ok(reference)
    }

    /// `toConnectData(document, schema)`.
    #[allow(
        clippy::wrong_self_convention,
        reason = "named after Connect's toConnectData"
    )]
    pub(crate) fn to_connect_data(
        &self,
        doc: &JsonNode,
        schema: &Schema,
    ) -> Result<Value, ExpandError> {
        self.build_struct(doc, schema)
    }

    fn build_struct(&self, doc: &JsonNode, schema: &Schema) -> Result<Value, ExpandError> {
        if schema.kind != Type::Struct {
            return fail("Not a struct schema");
        }
        let members: &[(String, JsonNode)] = match doc {
            JsonNode::Object(m) => m,
            _ => &[],
        };
        let mut values = Vec::with_capacity(schema.fields.len());
        for field in &schema.fields {
            // `document.has(field.name())`: the adjusted name, as Debezium does.
            let v = match members.iter().find(|(n, _)| **n == *field.name) {
                Some((_, node)) => {
                    let v = self.field_value(node, Some(&field.schema))?;
                    validate(&field.name, &field.schema, &v)?;
                    v
                }
                None => Value::Null,
            };
            values.push(v);
        }
        Ok(Value::Struct(values))
    }

    /// `getStructFieldValue`.
    fn field_value(&self, node: &JsonNode, schema: Option<&Schema>) -> Result<Value, ExpandError> {
        Ok(match node {
            JsonNode::String(s) => Value::String(Text::from(s.as_str())),
            JsonNode::Bool(b) => Value::Boolean(*b),
            JsonNode::Double(d) => Value::Float64(*d),
            JsonNode::Int(i) => Value::Int32(*i),
            JsonNode::Long(i) => Value::Int64(*i),
            JsonNode::BigInt(s) => {
                let (negative, digits) = match s.strip_prefix('-') {
                    Some(d) => (true, d),
                    None => (false, s.as_str()),
                };
                Value::Decimal(Decimal {
                    negative,
                    digits: digits.into(),
                    scale: 0,
                })
            }
            JsonNode::Array(items) => {
                let items_schema = schema.and_then(|s| s.value_schema.as_deref());
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(self.field_value(item, items_schema)?);
                }
                Value::Array(out)
            }
            JsonNode::Object(_) => match schema {
                Some(s) => self.build_struct(node, s)?,
                None => return fail("nested object without a schema"),
            },
            JsonNode::Null => Value::Null,
        })
    }
}

/// `SchemaUtil.copySchemaBasics(left)` plus the union of fields: a field
/// already present keeps its schema unless it was BYTES (a JSON null). The
/// copy does not carry `optional`, as in Debezium.
fn merge(left: &Schema, right: &Schema) -> Schema {
    let mut fields = left.fields.clone();
    for f in &right.fields {
        match fields.iter_mut().find(|old| old.name == f.name) {
            None => fields.push(f.clone()),
            Some(old) => {
                if old.schema != f.schema
                    && old.schema.kind == Type::Bytes
                    && f.schema.kind != Type::Bytes
                {
                    *old = f.clone();
                }
            }
        }
    }
    let mut merged = Schema::new(left.kind);
    merged.name = left.name.clone();
    merged.version = left.version;
    merged.doc = left.doc.clone();
    merged.parameters = left.parameters.clone();
    merged.fields = fields;
    merged
}

/// `ConnectSchema.validateValue` for the values expansion produces.
fn validate(field: &str, schema: &Schema, value: &Value) -> Result<(), ExpandError> {
    let ok = match (schema.kind, value) {
        (_, Value::Null) => schema.optional,
        (Type::String, Value::String(_))
        | (Type::Boolean, Value::Boolean(_))
        | (Type::Int32, Value::Int32(_))
        | (Type::Int64, Value::Int64(_))
        | (Type::Float64, Value::Float64(_))
        | (Type::Struct, Value::Struct(_)) => true,
        (Type::Array, Value::Array(items)) => {
            let Some(items_schema) = &schema.value_schema else {
                return fail(format!("array field {field} has no element schema"));
            };
            for item in items {
                validate(field, items_schema, item)?;
            }
            true
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        fail(format!(
            "invalid value for field \"{field}\" of schema {}",
            schema.java_string()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::config::ConverterKind;
    use crate::connect::convert::Converter;

    fn data() -> JsonSchemaData {
        JsonSchemaData::default()
    }

    fn schema_of(d: &JsonSchemaData, json: &str) -> Result<Option<Arc<Schema>>, ExpandError> {
        d.to_connect_schema(Some("pub"), &parse(json).unwrap())
    }

    fn compact(schema: &Schema, value: &Value) -> String {
        let c = Converter {
            kind: ConverterKind::Json,
            schemas_enable: false,
        };
        String::from_utf8(
            c.from_connect_data(Some(schema), value)
                .unwrap()
                .unwrap()
                .to_vec(),
        )
        .unwrap()
    }

    fn with_schema(schema: &Schema, value: &Value) -> String {
        let c = Converter {
            kind: ConverterKind::Json,
            schemas_enable: true,
        };
        String::from_utf8(
            c.from_connect_data(Some(schema), value)
                .unwrap()
                .unwrap()
                .to_vec(),
        )
        .unwrap()
    }

    // JsonSchemaDataTest.shouldCreateCorrectSchemaFromInsertJson
    #[test]
    fn nested_struct_names() {
        let s = schema_of(
            &data(),
            r#"{"name":"x","address":{"street":"s","floor":{"n":1}}}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.name.as_deref(), Some("pub"));
        assert!(s.optional);
        let address = &s.fields[1].schema;
        assert_eq!(address.name.as_deref(), Some("pub.address"));
        assert_eq!(
            address.fields[1].schema.name.as_deref(),
            Some("pub.address.floor")
        );
    }

    // JsonSchemaDataTest.shouldCreateCorrectSchemaFromArrayJson
    #[test]
    fn arrays_of_structs_share_one_element_schema() {
        let s = schema_of(&data(), r#"{"a":[{"x":1},{"x":2}]}"#)
            .unwrap()
            .unwrap();
        let items = s.fields[0].schema.value_schema.as_ref().unwrap();
        assert_eq!(items.kind, Type::Struct);
        assert_eq!(items.name.as_deref(), Some("pub.a"));
        assert!(
            items.optional,
            "a single distinct element schema is kept as is"
        );
        // canExpandJsonArrayWithComplexElements: merged schema of unequal elements.
        let s = schema_of(&data(), r#"{"a":[{"x":1},{"y":"z"}]}"#)
            .unwrap()
            .unwrap();
        let items = s.fields[0].schema.value_schema.as_ref().unwrap();
        assert_eq!(items.fields.len(), 2);
        assert!(!items.optional);
    }

    // JsonSchemaDataTest.failSchemaCheckForArrayWithDifferentNumberTypes
    #[test]
    fn mixed_number_array_fails_with_debezium_message() {
        let err = schema_of(&data(), r#"{"a":[1,2.0]}"#).unwrap_err();
        assert_eq!(
            err.reason,
            "Field is not a homogenous array (1 x 2.0), different number types (Schema{INT32} x Schema{FLOAT64})"
        );
        let err = schema_of(&data(), r#"{"a":[1,"x"]}"#).unwrap_err();
        assert_eq!(err.reason, "Field is not a homogenous array (1 x STRING).");
    }

    // JsonSchemaDataTest.shouldConvertNullNodeToOptionalBytes
    #[test]
    fn null_behaviours() {
        let s = schema_of(&data(), r#"{"a":null,"b":1}"#).unwrap().unwrap();
        assert_eq!(s.fields.len(), 1);
        let d = JsonSchemaData {
            null_behavior: NullBehavior::OptionalBytes,
            ..data()
        };
        let s = schema_of(&d, r#"{"a":null,"b":1}"#).unwrap().unwrap();
        assert_eq!(s.fields[0].schema.kind, Type::Bytes);
        assert!(s.fields[0].schema.optional);
    }

    // shouldDropEmptyArrayFieldByDefault / shouldKeepEmptyArrayFieldAsOptionalStringArray /
    // shouldKeepNestedEmptyArrayFieldAsOptionalStringArray / shouldConvertEmptyArrayFieldToEmptyList
    #[test]
    fn empty_array_behaviours() {
        let s = schema_of(&data(), r#"{"a":[],"b":{"c":[]}}"#)
            .unwrap()
            .unwrap();
        assert_eq!(&*s.fields[0].name, "b");
        assert!(s.fields[0].schema.fields.is_empty());
        let d = JsonSchemaData {
            empty_array_behavior: EmptyArrayBehavior::OptionalString,
            ..data()
        };
        let (s, v) = d.expand("payload", r#"{"a":[],"b":{"c":[]}}"#).unwrap();
        assert_eq!(
            s.fields[0].schema.value_schema.as_ref().unwrap().kind,
            Type::String
        );
        assert_eq!(s.fields[1].schema.fields[0].schema.kind, Type::Array);
        assert_eq!(compact(&s, &v), r#"{"a":[],"b":{"c":[]}}"#);
    }

    // EventRouterTest.canExpandJsonPayloadIfConfigured
    #[test]
    fn expands_six_field_document() {
        let (s, v) = data()
            .expand(
                "payload",
                r#"{"fullName": "John Doe", "enabled": true, "rating": 4.9, "age": 42, "pets": ["dog", "cat"], "nums": [1, 2]}"#,
            )
            .unwrap();
        let kinds: Vec<Type> = s.fields.iter().map(|f| f.schema.kind).collect();
        assert_eq!(
            kinds,
            [
                Type::String,
                Type::Boolean,
                Type::Float64,
                Type::Int32,
                Type::Array,
                Type::Array
            ]
        );
        assert_eq!(
            compact(&s, &v),
            r#"{"fullName":"John Doe","enabled":true,"rating":4.9,"age":42,"pets":["dog","cat"],"nums":[1,2]}"#
        );
        assert_eq!(
            with_schema(&s, &v),
            concat!(
                r#"{"schema":{"type":"struct","fields":[{"type":"string","optional":true,"field":"fullName"},"#,
                r#"{"type":"boolean","optional":true,"field":"enabled"},{"type":"double","optional":true,"field":"rating"},"#,
                r#"{"type":"int32","optional":true,"field":"age"},"#,
                r#"{"type":"array","items":{"type":"string","optional":true},"optional":true,"field":"pets"},"#,
                r#"{"type":"array","items":{"type":"int32","optional":true},"optional":true,"field":"nums"}],"#,
                r#""optional":true,"name":"payload"},"payload":{"fullName":"John Doe","enabled":true,"rating":4.9,"age":42,"pets":["dog","cat"],"nums":[1,2]}}"#
            )
        );
    }

    // compat doc: expand=true plus JsonConverter schemas.enable=false
    #[test]
    fn jsonb_text_expands_compactly() {
        let (s, v) = data()
            .expand(
                "payload",
                r#"{"email": "gh@mefi.in", "gone": null, "none": []}"#,
            )
            .unwrap();
        assert_eq!(compact(&s, &v), r#"{"email":"gh@mefi.in"}"#);
    }

    // canExpandJsonArrayWithFirstElementNull
    #[test]
    fn array_with_leading_null() {
        let (s, v) = data().expand("payload", r#"{"a":[null,2,3]}"#).unwrap();
        assert_eq!(
            s.fields[0].schema.value_schema.as_ref().unwrap().kind,
            Type::Int32
        );
        assert_eq!(compact(&s, &v), r#"{"a":[null,2,3]}"#);
    }

    #[test]
    fn failures_keep_the_string() {
        // not an object or array
        assert!(data().expand("payload", "\"x\"").is_err());
        assert!(data().expand("payload", " {}").is_err());
        // top-level array: a struct is required
        assert!(data().expand("payload", "[1,2]").is_err());
        // invalid json
        assert!(data().expand("payload", "{\"a\":").is_err());
        // a big integer cannot be put into the inferred FLOAT64 field
        assert!(data()
            .expand("payload", r#"{"a":123456789012345678901234}"#)
            .is_err());
        // merged element schemas that disagree
        assert!(data()
            .expand("payload", r#"{"a":[{"x":1},{"x":"y"}]}"#)
            .is_err());
        // an empty object is fine
        let (s, v) = data().expand("payload", "{}").unwrap();
        assert_eq!(compact(&s, &v), "{}");
    }

    #[test]
    fn field_name_adjustment() {
        assert_eq!(FieldNameAdjustment::Avro.adjust("a-b.c"), "a_b_c");
        assert_eq!(FieldNameAdjustment::Avro.adjust("1abc"), "_1abc");
        assert_eq!(FieldNameAdjustment::AvroUnicode.adjust("a-b"), "a_u002db");
        assert_eq!(FieldNameAdjustment::None.adjust("a-b"), "a-b");
        // avro_unicode: `_` is not valid anywhere, Java's unpadded hex.
        assert_eq!(
            FieldNameAdjustment::AvroUnicode.adjust("event_id"),
            "event_u005fid"
        );
        assert_eq!(FieldNameAdjustment::AvroUnicode.adjust("1a"), "_u0031a");
        assert_eq!(
            FieldNameAdjustment::AvroUnicode.adjust("a\u{100}"),
            "a_u100"
        );
        assert_eq!(FieldNameAdjustment::AvroUnicode.adjust("a\t"), "a_u009");
        assert_eq!(FieldNameAdjustment::Avro.adjust("a\u{1F600}"), "a__");
        assert_eq!(
            FieldNameAdjustment::Avro.adjust_schema_name("p-1.public.t-x.Value"),
            "p_1.public.t_x.Value"
        );
        assert_eq!(
            FieldNameAdjustment::AvroUnicode.adjust_schema_name("p-1.my_t.Value"),
            "p_u002d1.my_u005ft.Value"
        );
        // the adjusted name is looked up in the document, so the value is lost (as in Debezium)
        let d = JsonSchemaData {
            field_names: FieldNameAdjustment::Avro,
            ..data()
        };
        let (s, v) = d.expand("payload", r#"{"a-b":1,"ok":2}"#).unwrap();
        assert_eq!(compact(&s, &v), r#"{"a_b":null,"ok":2}"#);
    }
}
