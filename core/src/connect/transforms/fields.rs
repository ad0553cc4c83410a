//! Kafka Connect 4.1.1's field transforms: `InsertField`, `ReplaceField`,
//! `MaskField` (in `field_mask.rs`), `HoistField`, `ExtractField` (with
//! `field.syntax.version` paths, `field_path.rs`), each as `$Key` and
//! `$Value`, and `ValueToKey`. Owns their options, their schema and
//! schemaless branches, the schemas they build and the `DataException`
//! messages of the records they refuse; the `HashMap` orders and
//! `Struct.put` checks they share are in `field_support.rs`. Pure.

mod field_mask;
mod field_path;
mod field_support;

use std::collections::HashMap;
use std::sync::Arc;

use self::field_mask::MaskField;
use self::field_path::{read_syntax, FieldPath};
use self::field_support::{add_field, java_failure, lookup_field, struct_fields};
use super::options::{Reader, TransformConfigError};
use super::util::{
    boxed, class_name, copy_capacity, copy_schema_basics, field_value, java_hash_map, map_get,
    require_map, require_struct, table_size_for, validate_value, DEFAULT_CAPACITY,
};
use super::{Built, ConnectRecord, Side, TransformError, Transformation};
use crate::connect::java::java_hash_map_order;
use crate::connect::{Schema, Type, Value};

/// The package of Kafka's transforms.
const PACKAGE: &str = "org.apache.kafka.connect.transforms.";

/// `ValueToKey`'s class (no `$Key`/`$Value`).
const VALUE_TO_KEY: &str = "org.apache.kafka.connect.transforms.ValueToKey";

/// The classes this module builds.
pub(super) const CLASSES: &[&str] = &[
    "org.apache.kafka.connect.transforms.InsertField$Key",
    "org.apache.kafka.connect.transforms.InsertField$Value",
    "org.apache.kafka.connect.transforms.ReplaceField$Key",
    "org.apache.kafka.connect.transforms.ReplaceField$Value",
    "org.apache.kafka.connect.transforms.MaskField$Key",
    "org.apache.kafka.connect.transforms.MaskField$Value",
    "org.apache.kafka.connect.transforms.HoistField$Key",
    "org.apache.kafka.connect.transforms.HoistField$Value",
    "org.apache.kafka.connect.transforms.ExtractField$Key",
    "org.apache.kafka.connect.transforms.ExtractField$Value",
    VALUE_TO_KEY,
];

/// Builds the transform of `class`, if it is one of [`CLASSES`].
pub(super) fn build(class: &str, opts: &Reader<'_>) -> Option<Built> {
    if class == VALUE_TO_KEY {
        return Some(ValueToKey::configure(opts).map(boxed));
    }
    let rest = class.strip_prefix(PACKAGE)?;
    let (name, side) = match (rest.strip_suffix("$Key"), rest.strip_suffix("$Value")) {
        (Some(n), _) => (n, Side::Key),
        (None, Some(n)) => (n, Side::Value),
        (None, None) => return None,
    };
    Some(match name {
        "InsertField" => InsertField::configure(side, opts).map(boxed),
        "ReplaceField" => ReplaceField::configure(side, opts).map(boxed),
        "MaskField" => MaskField::configure(side, opts).map(boxed),
        "HoistField" => HoistField::configure(side, opts).map(boxed),
        "ExtractField" => ExtractField::configure(side, opts).map(boxed),
        _ => return None,
    })
}

/// `replace.null.with.default` (every transform here but `HoistField`).
fn replace_null_with_default(opts: &Reader<'_>) -> Result<bool, TransformConfigError> {
    opts.boolean("replace.null.with.default", true)
}

/// Java's `List.toString()` of a `LIST` option, as `ConfigException`
/// prints the value.
fn java_list(items: &[String]) -> String {
    format!("[{}]", items.join(", "))
}

// ---------------------------------------------------------------- InsertField

/// `InsertField`'s purpose in messages.
const INSERT_PURPOSE: &str = "field insertion";

/// `InsertionSpec`: a field name and whether its schema is optional
/// (`name?` or `name`: optional; `name!`: required).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Spec {
    /// The field name.
    name: String,
    /// Whether the inserted field's schema is optional.
    optional: bool,
}

/// `InsertionSpec.parse`.
fn parse_spec(text: Option<String>) -> Option<Spec> {
    let t = text?;
    Some(match (t.strip_suffix('?'), t.strip_suffix('!')) {
        (Some(n), _) => Spec {
            name: n.to_owned(),
            optional: true,
        },
        (None, Some(n)) => Spec {
            name: n.to_owned(),
            optional: false,
        },
        (None, None) => Spec {
            name: t,
            optional: true,
        },
    })
}

/// What an inserted field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Insert {
    /// `topic.field`.
    Topic,
    /// `partition.field`.
    Partition,
    /// `offset.field`.
    Offset,
    /// `timestamp.field`.
    Timestamp,
    /// `static.field`.
    Static,
}

/// A configured `InsertField`.
#[derive(Debug)]
struct InsertField {
    /// `$Key` or `$Value`.
    side: Side,
    /// The configured insertions, in Kafka's order (topic, partition,
    /// offset, timestamp, static).
    inserts: Vec<(Spec, Insert)>,
    /// `static.value`.
    static_value: String,
    /// `replace.null.with.default`.
    replace_null_with_default: bool,
}

impl InsertField {
    /// Reads the five `*.field` options, `static.value` and
    /// `replace.null.with.default`; at least one insertion, and a value
    /// for a static field.
    fn configure(side: Side, opts: &Reader<'_>) -> Result<InsertField, TransformConfigError> {
        let mut inserts = Vec::new();
        for (key, kind) in [
            ("topic.field", Insert::Topic),
            ("partition.field", Insert::Partition),
            ("offset.field", Insert::Offset),
            ("timestamp.field", Insert::Timestamp),
            ("static.field", Insert::Static),
        ] {
            if let Some(spec) = parse_spec(opts.string_or_null(key)) {
                inserts.push((spec, kind));
            }
        }
        let static_value = opts.string_or_null("static.value");
        let replace_null_with_default = replace_null_with_default(opts)?;
        if inserts.is_empty() {
            // A ConfigException naming no option.
            return Err(TransformConfigError::invalid(
                "topic.field",
                "null",
                "No field insertion configured",
            ));
        }
        let static_field = inserts.iter().find(|(_, k)| *k == Insert::Static);
        let static_value = match (static_field, static_value) {
            (Some((spec, _)), None) => {
                return Err(TransformConfigError::invalid(
                    "static.value",
                    "null",
                    format!("No value specified for static field: {}", spec.name),
                ))
            }
            (_, v) => v.unwrap_or_default(),
        };
        Ok(InsertField {
            side,
            inserts,
            static_value,
            replace_null_with_default,
        })
    }

    /// The value put for `kind`; `None` when Kafka puts nothing (no
    /// partition, no timestamp). A source record has no offset:
    /// `requireSinkRecord` refuses it.
    fn inserted(&self, kind: Insert, r: &ConnectRecord) -> Result<Option<Value>, TransformError> {
        Ok(match kind {
            Insert::Topic => Some(Value::string(&*r.topic)),
            Insert::Partition => r.partition.map(Value::Int32),
            Insert::Offset => {
                return Err(TransformError::new(format!(
                    "Only SinkRecord supported for [{INSERT_PURPOSE}], found: org.apache.kafka.connect.source.SourceRecord"
                )))
            }
            // A Long schemaless, a java.util.Date under Timestamp: the
            // same milliseconds.
            Insert::Timestamp => r.timestamp.map(Value::Int64),
            Insert::Static => Some(Value::string(self.static_value.as_str())),
        })
    }

    /// `applySchemaless`: a copy of the map with the insertions put.
    fn apply_schemaless(&self, r: &ConnectRecord) -> Result<Value, TransformError> {
        let entries = require_map(self.side.value(r), INSERT_PURPOSE)?;
        let mut out = entries.to_vec();
        for (spec, kind) in &self.inserts {
            if let Some(v) = self.inserted(*kind, r)? {
                out.push((Value::string(spec.name.as_str()), v));
            }
        }
        java_hash_map(out, copy_capacity(entries.len())).map(Value::Map)
    }

    /// `makeUpdatedSchema`: a struct with the source's name, version, doc
    /// and parameters, its fields, then the inserted ones.
    fn updated_schema(&self, schema: &Schema) -> Result<Schema, TransformError> {
        let fields = struct_fields(schema)?;
        let mut updated = copy_schema_basics(schema);
        for f in fields {
            add_field(&mut updated, &f.name, f.schema.clone())?;
        }
        for (spec, kind) in &self.inserts {
            add_field(
                &mut updated,
                &spec.name,
                Arc::new(insert_schema(*kind, spec.optional)),
            )?;
        }
        Ok(updated)
    }

    /// `applyWithSchema`: the struct's fields (each `Struct.put` checked),
    /// then the insertions.
    fn apply_with_schema(
        &self,
        r: &ConnectRecord,
        schema: &Schema,
    ) -> Result<(Arc<Schema>, Value), TransformError> {
        let values = require_struct(self.side.value(r), INSERT_PURPOSE)?;
        let updated = self.updated_schema(schema)?;
        let mut out = Vec::with_capacity(updated.fields.len());
        for (i, f) in schema.fields.iter().enumerate() {
            let v = field_value(schema, values, i, self.replace_null_with_default).clone();
            validate_value(Some(&f.name), &f.schema, &v)?;
            out.push(v);
        }
        for (_, kind) in &self.inserts {
            out.push(self.inserted(*kind, r)?.unwrap_or(Value::Null));
        }
        Ok((Arc::new(updated), Value::Struct(out)))
    }
}

/// The schema of an inserted field: STRING for topic and static, INT32
/// partition, INT64 offset, Timestamp (version 1) for the timestamp.
fn insert_schema(kind: Insert, optional: bool) -> Schema {
    let s = match kind {
        Insert::Topic | Insert::Static => Schema::new(Type::String),
        Insert::Partition => Schema::new(Type::Int32),
        Insert::Offset => Schema::new(Type::Int64),
        Insert::Timestamp => {
            Schema::new(Type::Int64).named("org.apache.kafka.connect.data.Timestamp", Some(1))
        }
    };
    s.with_optional(optional)
}

impl Transformation for InsertField {
    /// A null key or value passes unchanged.
    fn apply(&self, mut record: ConnectRecord) -> Result<Option<ConnectRecord>, TransformError> {
        if self.side.value(&record).is_null() {
            return Ok(Some(record));
        }
        let (schema, value) = match self.side.schema(&record).cloned() {
            None => (None, self.apply_schemaless(&record)?),
            Some(s) => {
                let (s, v) = self.apply_with_schema(&record, &s)?;
                (Some(s), v)
            }
        };
        self.side.set(&mut record, schema, value);
        Ok(Some(record))
    }
}

// --------------------------------------------------------------- ReplaceField

/// `ReplaceField`'s purpose in messages.
const REPLACE_PURPOSE: &str = "field replacement";

/// A configured `ReplaceField`.
#[derive(Debug)]
struct ReplaceField {
    /// `$Key` or `$Value`.
    side: Side,
    /// `exclude`.
    exclude: Vec<String>,
    /// `include` (empty: every field).
    include: Vec<String>,
    /// `renames`, old name to new.
    renames: HashMap<String, String>,
    /// New name to old, the last of Kafka's `HashMap` iteration winning.
    reverse: HashMap<String, String>,
    /// `replace.null.with.default`.
    replace_null_with_default: bool,
}

impl ReplaceField {
    /// Reads `exclude`, `include`, `renames` (colon pairs) and
    /// `replace.null.with.default`. The `blacklist`/`whitelist` names are
    /// gone from Kafka 4: not read.
    fn configure(side: Side, opts: &Reader<'_>) -> Result<ReplaceField, TransformConfigError> {
        let exclude = opts.list("exclude", Some(&[]))?;
        let include = opts.list("include", Some(&[]))?;
        let pairs = parse_renames(&opts.list("renames", Some(&[]))?)?;
        let replace_null_with_default = replace_null_with_default(opts)?;
        let mut unique: Vec<(String, String)> = Vec::with_capacity(pairs.len());
        for (from, to) in pairs {
            match unique.iter_mut().find(|(f, _)| *f == from) {
                Some(slot) => slot.1 = to,
                None => unique.push((from, to)),
            }
        }
        // `invert` walks the renames HashMap: a later entry wins.
        let ordered = java_hash_map_order(unique);
        let reverse = ordered
            .iter()
            .map(|(from, to)| (to.clone(), from.clone()))
            .collect();
        Ok(ReplaceField {
            side,
            exclude,
            include,
            renames: ordered.into_iter().collect(),
            reverse,
            replace_null_with_default,
        })
    }

    /// `filter(name)`: not excluded, and included when `include` is set.
    fn keeps(&self, name: &str) -> bool {
        !self.exclude.iter().any(|e| e == name)
            && (self.include.is_empty() || self.include.iter().any(|i| i == name))
    }

    /// `renamed(name)`.
    fn renamed<'a>(&'a self, name: &'a str) -> &'a str {
        self.renames.get(name).map_or(name, String::as_str)
    }

    /// `reverseRenamed(name)`.
    fn reverse_renamed<'a>(&'a self, name: &'a str) -> &'a str {
        self.reverse.get(name).map_or(name, String::as_str)
    }

    /// `applySchemaless`: the kept entries, renamed, in a map sized for
    /// the source.
    fn apply_schemaless(&self, value: &Value) -> Result<Value, TransformError> {
        let entries = require_map(value, REPLACE_PURPOSE)?;
        let mut out = Vec::with_capacity(entries.len());
        for (k, v) in entries {
            let Value::String(name) = k else {
                return Err(java_failure(
                    &format!(
                        "class {} cannot be cast to class java.lang.String",
                        class_name(k)
                    ),
                    "a ClassCastException",
                ));
            };
            if self.keeps(name.as_str()) {
                out.push((Value::string(self.renamed(name.as_str())), v.clone()));
            }
        }
        java_hash_map(out, table_size_for(entries.len())).map(Value::Map)
    }

    /// `applyWithSchema`: the kept fields renamed (same schemas), each
    /// value read by its old name.
    fn apply_with_schema(
        &self,
        schema: &Schema,
        value: &Value,
    ) -> Result<(Arc<Schema>, Value), TransformError> {
        let values = require_struct(value, REPLACE_PURPOSE)?;
        let fields = struct_fields(schema)?;
        let mut updated = copy_schema_basics(schema);
        for f in fields.iter().filter(|f| self.keeps(&f.name)) {
            add_field(&mut updated, self.renamed(&f.name), f.schema.clone())?;
        }
        let mut out = Vec::with_capacity(updated.fields.len());
        for f in &updated.fields {
            let source = self.reverse_renamed(&f.name);
            let i = schema.field_index(source).ok_or_else(|| {
                TransformError::new(format!("{source} is not a valid field name"))
            })?;
            let v = field_value(schema, values, i, self.replace_null_with_default).clone();
            validate_value(Some(&f.name), &f.schema, &v)?;
            out.push(v);
        }
        Ok((Arc::new(updated), Value::Struct(out)))
    }
}

/// `parseRenameMappings`: each item split at colons (Java's `split`,
/// trailing empty parts dropped) must give exactly two parts.
fn parse_renames(items: &[String]) -> Result<Vec<(String, String)>, TransformConfigError> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let mut parts: Vec<&str> = item.split(':').collect();
        while parts.last() == Some(&"") {
            parts.pop();
        }
        match parts.as_slice() {
            [from, to] => out.push(((*from).to_owned(), (*to).to_owned())),
            _ => {
                return Err(TransformConfigError::invalid(
                    "renames",
                    &java_list(items),
                    format!("Invalid rename mapping: {item}"),
                ))
            }
        }
    }
    Ok(out)
}

impl Transformation for ReplaceField {
    /// A null key or value passes unchanged.
    fn apply(&self, mut record: ConnectRecord) -> Result<Option<ConnectRecord>, TransformError> {
        let value = self.side.value(&record);
        if value.is_null() {
            return Ok(Some(record));
        }
        let (schema, value) = match self.side.schema(&record) {
            None => (None, self.apply_schemaless(value)?),
            Some(s) => {
                let (s, v) = self.apply_with_schema(s, value)?;
                (Some(s), v)
            }
        };
        self.side.set(&mut record, schema, value);
        Ok(Some(record))
    }
}

// ----------------------------------------------------------------- HoistField

/// A configured `HoistField`.
#[derive(Debug)]
struct HoistField {
    /// `$Key` or `$Value`.
    side: Side,
    /// `field`.
    field: String,
}

impl HoistField {
    /// Reads `field` (required).
    fn configure(side: Side, opts: &Reader<'_>) -> Result<HoistField, TransformConfigError> {
        Ok(HoistField {
            side,
            field: opts.string("field", None)?,
        })
    }
}

impl Transformation for HoistField {
    /// Wraps whatever is there, null included: a one-entry map, or a
    /// struct (no name, required) with one field of the old schema.
    fn apply(&self, mut record: ConnectRecord) -> Result<Option<ConnectRecord>, TransformError> {
        let (schema, value) = self.side.take(&mut record);
        match schema {
            None => {
                let map = java_hash_map(
                    vec![(Value::string(self.field.as_str()), value)],
                    DEFAULT_CAPACITY,
                )?;
                self.side.set(&mut record, None, Value::Map(map));
            }
            Some(s) => {
                let mut updated = Schema::structure(None, Vec::new());
                add_field(&mut updated, &self.field, s.clone())?;
                validate_value(Some(&self.field), &s, &value)?;
                self.side.set(
                    &mut record,
                    Some(Arc::new(updated)),
                    Value::Struct(vec![value]),
                );
            }
        }
        Ok(Some(record))
    }
}

// --------------------------------------------------------------- ExtractField

/// `ExtractField`'s purpose in messages.
const EXTRACT_PURPOSE: &str = "field extraction";

/// A configured `ExtractField`.
#[derive(Debug)]
struct ExtractField {
    /// `$Key` or `$Value`.
    side: Side,
    /// `field` as written.
    original: String,
    /// `field` parsed in `field.syntax.version`.
    path: FieldPath,
    /// `replace.null.with.default`.
    replace_null_with_default: bool,
}

impl ExtractField {
    /// Reads `field` (required), `replace.null.with.default` and
    /// `field.syntax.version`, then parses the path.
    fn configure(side: Side, opts: &Reader<'_>) -> Result<ExtractField, TransformConfigError> {
        let original = opts.string("field", None)?;
        let replace_null_with_default = replace_null_with_default(opts)?;
        let syntax = read_syntax(opts)?;
        let path = FieldPath::parse(&original, syntax)
            .map_err(|m| TransformConfigError::invalid("field", &original, m))?;
        Ok(ExtractField {
            side,
            original,
            path,
            replace_null_with_default,
        })
    }

    /// The schema branch: the field must exist in the schema even for a
    /// null value (`IllegalArgumentException` otherwise).
    fn with_schema(
        &self,
        schema: &Schema,
        value: &Value,
    ) -> Result<(Arc<Schema>, Value), TransformError> {
        let values = match value {
            Value::Null => None,
            v => Some(require_struct(v, EXTRACT_PURPOSE)?),
        };
        let field = self.path.field_from(schema)?.ok_or_else(|| {
            java_failure(
                &format!("Unknown field: {}", self.original),
                "an IllegalArgumentException",
            )
        })?;
        let out = match values {
            None => Value::Null,
            Some(v) => self
                .path
                .value_from_struct(schema, v, self.replace_null_with_default)?,
        };
        Ok((field.schema.clone(), out))
    }
}

impl Transformation for ExtractField {
    /// Schemaless: the map's entry at the path (null for a null map or a
    /// missing entry); with a schema: the field's schema and value.
    fn apply(&self, mut record: ConnectRecord) -> Result<Option<ConnectRecord>, TransformError> {
        let value = self.side.value(&record);
        let (schema, out) = match self.side.schema(&record) {
            None => match value {
                Value::Null => (None, Value::Null),
                v => (
                    None,
                    self.path.value_from_map(require_map(v, EXTRACT_PURPOSE)?)?,
                ),
            },
            Some(s) => {
                let (s, v) = self.with_schema(s, value)?;
                (Some(s), v)
            }
        };
        self.side.set(&mut record, schema, out);
        Ok(Some(record))
    }
}

// ----------------------------------------------------------------- ValueToKey

/// `ValueToKey`'s purpose in messages.
const VALUE_TO_KEY_PURPOSE: &str = "copying fields from value to key";

/// A configured `ValueToKey`.
#[derive(Debug)]
struct ValueToKey {
    /// `fields`, in order (repeats kept).
    fields: Vec<String>,
    /// `replace.null.with.default`.
    replace_null_with_default: bool,
}

impl ValueToKey {
    /// Reads `fields` (required, non-empty) and `replace.null.with.default`.
    fn configure(opts: &Reader<'_>) -> Result<ValueToKey, TransformConfigError> {
        let fields = opts.list("fields", None)?;
        if fields.is_empty() {
            return Err(TransformConfigError::invalid("fields", "[]", "Empty list"));
        }
        Ok(ValueToKey {
            fields,
            replace_null_with_default: replace_null_with_default(opts)?,
        })
    }

    /// The schema branch: a struct key (no name, required) of the listed
    /// value fields.
    fn with_schema(
        &self,
        schema: &Schema,
        value: &Value,
    ) -> Result<(Arc<Schema>, Value), TransformError> {
        let values = require_struct(value, VALUE_TO_KEY_PURPOSE)?;
        let mut key_schema = Schema::structure(None, Vec::new());
        let mut indexes = Vec::with_capacity(self.fields.len());
        for name in &self.fields {
            let (i, f) = lookup_field(schema, name)?
                .ok_or_else(|| TransformError::new(format!("Field does not exist: {name}")))?;
            add_field(&mut key_schema, name, f.schema.clone())?;
            indexes.push(i);
        }
        let mut key = Vec::with_capacity(indexes.len());
        for (name, i) in self.fields.iter().zip(indexes) {
            let v = field_value(schema, values, i, self.replace_null_with_default).clone();
            validate_value(Some(name), &schema.fields[i].schema, &v)?;
            key.push(v);
        }
        Ok((Arc::new(key_schema), Value::Struct(key)))
    }
}

impl Transformation for ValueToKey {
    /// No null check: a tombstone fails `requireMap`/`requireStruct`.
    fn apply(&self, mut record: ConnectRecord) -> Result<Option<ConnectRecord>, TransformError> {
        let (key_schema, key) = match &record.value_schema {
            None => {
                let entries = require_map(&record.value, VALUE_TO_KEY_PURPOSE)?;
                let out = self
                    .fields
                    .iter()
                    .map(|f| (Value::string(f.as_str()), map_get(entries, f).clone()))
                    .collect();
                let map = java_hash_map(out, table_size_for(self.fields.len()))?;
                (None, Value::Map(map))
            }
            Some(s) => {
                let (ks, k) = self.with_schema(s, &record.value)?;
                (Some(ks), k)
            }
        };
        record.key_schema = key_schema;
        record.key = key;
        Ok(Some(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::transforms::options::Options;
    use crate::connect::Field;

    /// `InsertField$Value`.
    const INSERT_V: &str = "org.apache.kafka.connect.transforms.InsertField$Value";
    /// `InsertField$Key`.
    const INSERT_K: &str = "org.apache.kafka.connect.transforms.InsertField$Key";
    /// `ReplaceField$Value`.
    const REPLACE_V: &str = "org.apache.kafka.connect.transforms.ReplaceField$Value";
    /// `ReplaceField$Key`.
    const REPLACE_K: &str = "org.apache.kafka.connect.transforms.ReplaceField$Key";
    /// `HoistField$Value`.
    const HOIST_V: &str = "org.apache.kafka.connect.transforms.HoistField$Value";
    /// `HoistField$Key`.
    const HOIST_K: &str = "org.apache.kafka.connect.transforms.HoistField$Key";
    /// `ExtractField$Value`.
    const EXTRACT_V: &str = "org.apache.kafka.connect.transforms.ExtractField$Value";
    /// `ExtractField$Key`.
    const EXTRACT_K: &str = "org.apache.kafka.connect.transforms.ExtractField$Key";

    /// `build` on `opts`.
    pub(super) fn configured(class: &str, opts: &[(&str, &str)]) -> Built {
        let o: Options = opts.iter().copied().collect();
        let r = o.reader();
        build(class, &r).expect("a class of this module")
    }

    /// A transform that must configure.
    pub(super) fn t(class: &str, opts: &[(&str, &str)]) -> Box<dyn Transformation> {
        configured(class, opts).unwrap()
    }

    /// The configuration error `opts` must give.
    pub(super) fn config_err(class: &str, opts: &[(&str, &str)]) -> TransformConfigError {
        configured(class, opts).unwrap_err()
    }

    /// A source record of topic `orders`, partition 3, a fixed timestamp.
    pub(super) fn record(
        key_schema: Option<Schema>,
        key: Value,
        value_schema: Option<Schema>,
        value: Value,
    ) -> ConnectRecord {
        ConnectRecord {
            topic: Arc::from("orders"),
            partition: Some(3),
            key_schema: key_schema.map(Arc::new),
            key,
            value_schema: value_schema.map(Arc::new),
            value,
            timestamp: Some(1_700_000_000_123),
            headers: Vec::new(),
        }
    }

    /// Applies a transform that must keep the record.
    pub(super) fn apply(t: &dyn Transformation, r: ConnectRecord) -> ConnectRecord {
        t.apply(r).unwrap().unwrap()
    }

    /// The message of a record the transform must refuse.
    pub(super) fn fail(t: &dyn Transformation, r: ConnectRecord) -> String {
        t.apply(r).unwrap_err().message
    }

    /// An unnamed struct schema.
    pub(super) fn structure(fields: Vec<(&str, Schema)>) -> Schema {
        Schema::structure(
            None,
            fields
                .into_iter()
                .map(|(n, s)| Field {
                    name: Arc::from(n),
                    schema: Arc::new(s),
                })
                .collect(),
        )
    }

    /// A schemaless map with string keys, in this order.
    pub(super) fn map(entries: &[(&str, Value)]) -> Value {
        Value::Map(
            entries
                .iter()
                .map(|(k, v)| (Value::string(*k), v.clone()))
                .collect(),
        )
    }

    /// A STRING value.
    pub(super) fn s(v: &str) -> Value {
        Value::string(v)
    }

    /// A `shop.Row` struct: a required id, an optional string, a required int with default
    /// 7, and a doc, name and version to copy.
    fn row_schema() -> Schema {
        let mut sch = structure(vec![
            ("id", Schema::new(Type::Int64)),
            ("name", Schema::optional(Type::String)),
            ("qty", {
                let mut q = Schema::new(Type::Int32);
                q.default = Some(Value::Int32(7));
                q
            }),
        ])
        .named("shop.Row", Some(2));
        sch.doc = Some(Arc::from("a row"));
        sch.with_parameter("p", "v")
    }

    /// A value of [`row_schema`].
    fn row(name: Value, qty: Value) -> Value {
        Value::Struct(vec![Value::Int64(1), name, qty])
    }

    #[test]
    fn classes_are_all_built_and_others_are_not() {
        for c in CLASSES {
            let opts: &[(&str, &str)] = &[("topic.field", "t"), ("fields", "a"), ("field", "a")];
            assert!(configured(c, opts).is_ok(), "{c}");
        }
        let o = Options::default();
        assert!(build(
            "org.apache.kafka.connect.transforms.Flatten$Value",
            &o.reader()
        )
        .is_none());
        assert!(build(
            "org.apache.kafka.connect.transforms.InsertField",
            &o.reader()
        )
        .is_none());
    }

    // ------------------------------------------------------------ InsertField

    #[test]
    fn insert_field_schemaless_puts_into_a_copy_of_the_map() {
        let tr = t(
            INSERT_V,
            &[
                ("topic.field", "t"),
                ("partition.field", "p!"),
                ("timestamp.field", "ts?"),
                ("static.field", "tag"),
                ("static.value", " shop "),
            ],
        );
        let out = apply(
            &*tr,
            record(
                None,
                Value::Null,
                None,
                map(&[("id", Value::Int32(1)), ("op", s("c"))]),
            ),
        );
        // Copy of 2 entries: 4 buckets, 6 entries: 8 buckets.
        assert_eq!(
            out.value,
            map(&[
                ("p", Value::Int32(3)),
                ("op", s("c")),
                ("id", Value::Int32(1)),
                ("tag", s("shop")),
                ("t", s("orders")),
                ("ts", Value::Int64(1_700_000_000_123)),
            ])
        );
        assert_eq!(out.value_schema, None);
        // No partition, no timestamp: nothing put.
        let mut r = record(
            None,
            Value::Null,
            None,
            map(&[("id", Value::Int32(1)), ("op", s("c"))]),
        );
        r.partition = None;
        r.timestamp = None;
        let out = apply(&*tr, r);
        assert_eq!(
            out.value,
            map(&[
                ("op", s("c")),
                ("id", Value::Int32(1)),
                ("tag", s("shop")),
                ("t", s("orders"))
            ])
        );
    }

    #[test]
    fn insert_field_with_schema_appends_fields_in_kafka_order() {
        let tr = t(
            INSERT_V,
            &[
                ("static.field", "tag!"),
                ("static.value", "x"),
                ("timestamp.field", "ts"),
                ("partition.field", "p!"),
                ("topic.field", "t?"),
            ],
        );
        let out = apply(
            &*tr,
            record(
                None,
                Value::Null,
                Some(row_schema()),
                row(s("a"), Value::Null),
            ),
        );
        let sch = out.value_schema.unwrap();
        assert_eq!(sch.name.as_deref(), Some("shop.Row"));
        assert_eq!(sch.version, Some(2));
        assert_eq!(sch.doc.as_deref(), Some("a row"));
        assert_eq!(sch.parameters, vec![(Arc::from("p"), Arc::from("v"))]);
        assert!(!sch.optional);
        let names: Vec<&str> = sch.fields.iter().map(|f| &*f.name).collect();
        assert_eq!(names, ["id", "name", "qty", "t", "p", "ts", "tag"]);
        assert_eq!(*sch.fields[3].schema, Schema::optional(Type::String));
        assert_eq!(*sch.fields[4].schema, Schema::new(Type::Int32));
        assert_eq!(
            *sch.fields[5].schema,
            Schema::optional(Type::Int64).named("org.apache.kafka.connect.data.Timestamp", Some(1))
        );
        assert_eq!(*sch.fields[6].schema, Schema::new(Type::String));
        // The null qty reads its default (replace.null.with.default).
        assert_eq!(
            out.value,
            Value::Struct(vec![
                Value::Int64(1),
                s("a"),
                Value::Int32(7),
                s("orders"),
                Value::Int32(3),
                Value::Int64(1_700_000_000_123),
                s("x"),
            ])
        );
    }

    #[test]
    fn insert_field_key_and_tombstones() {
        let tr = t(INSERT_K, &[("topic.field", "t")]);
        let key_schema = structure(vec![("id", Schema::new(Type::Int64))]);
        let out = apply(
            &*tr,
            record(
                Some(key_schema.clone()),
                Value::Struct(vec![Value::Int64(5)]),
                None,
                s("v"),
            ),
        );
        assert_eq!(out.key, Value::Struct(vec![Value::Int64(5), s("orders")]));
        assert_eq!(out.key_schema.unwrap().fields.len(), 2);
        assert_eq!(out.value, s("v"));
        // Null key: unchanged, schema kept.
        let r = record(Some(key_schema), Value::Null, None, s("v"));
        assert_eq!(apply(&*tr, r.clone()), r);
        // Null value through the $Value variant, even with offset.field.
        let tv = t(INSERT_V, &[("offset.field", "o")]);
        let r = record(None, Value::Null, Some(row_schema()), Value::Null);
        assert_eq!(apply(&*tv, r.clone()), r);
    }

    #[test]
    fn insert_field_refuses_offsets_of_source_records() {
        let tr = t(INSERT_V, &[("offset.field", "o"), ("topic.field", "t")]);
        let msg = "Only SinkRecord supported for [field insertion], found: org.apache.kafka.connect.source.SourceRecord";
        assert_eq!(fail(&*tr, record(None, Value::Null, None, map(&[]))), msg);
        assert_eq!(
            fail(
                &*tr,
                record(
                    None,
                    Value::Null,
                    Some(row_schema()),
                    row(Value::Null, Value::Null)
                )
            ),
            msg
        );
    }

    #[test]
    fn insert_field_errors() {
        let tr = t(INSERT_V, &[("topic.field", "name")]);
        assert_eq!(
            fail(
                &*tr,
                record(
                    None,
                    Value::Null,
                    Some(row_schema()),
                    row(Value::Null, Value::Null)
                )
            ),
            "Cannot create field because of field name duplication name"
        );
        assert_eq!(
            fail(&*tr, record(None, Value::Null, None, s("x"))),
            "Only Map objects supported in absence of schema for [field insertion], found: java.lang.String"
        );
        assert_eq!(
            fail(
                &*tr,
                record(None, Value::Null, Some(Schema::new(Type::String)), s("x"))
            ),
            "Only Struct objects supported for [field insertion], found: java.lang.String"
        );
        // `!` alone: an empty name, refused by SchemaBuilder (schema only).
        let empty = t(INSERT_V, &[("topic.field", "!")]);
        assert_eq!(
            fail(
                &*empty,
                record(
                    None,
                    Value::Null,
                    Some(row_schema()),
                    row(Value::Null, Value::Null)
                )
            ),
            "fieldName cannot be null."
        );
        assert_eq!(
            apply(&*empty, record(None, Value::Null, None, map(&[]))).value,
            map(&[("", s("orders"))])
        );
        // Without the default, the required qty is null: Struct.put refuses.
        let raw = t(
            INSERT_V,
            &[("topic.field", "t"), ("replace.null.with.default", "false")],
        );
        assert_eq!(
            fail(
                &*raw,
                record(
                    None,
                    Value::Null,
                    Some(row_schema()),
                    row(Value::Null, Value::Null)
                )
            ),
            "Invalid value: null used for required field: \"qty\", schema type: INT32"
        );
    }

    #[test]
    fn insert_field_options() {
        assert_eq!(
            config_err(INSERT_V, &[("static.value", "x")]).to_string(),
            "option topic.field = \"null\" is invalid: No field insertion configured"
        );
        assert_eq!(
            config_err(INSERT_V, &[("static.field", "s")]).key(),
            Some("static.value")
        );
        assert_eq!(
            config_err(
                INSERT_V,
                &[("topic.field", "t"), ("replace.null.with.default", "maybe")]
            )
            .key(),
            Some("replace.null.with.default")
        );
        assert_eq!(
            parse_spec(Some("a?!".into())),
            Some(Spec {
                name: "a?".into(),
                optional: false
            })
        );
        assert_eq!(
            parse_spec(Some("a".into())),
            Some(Spec {
                name: "a".into(),
                optional: true
            })
        );
    }

    // ----------------------------------------------------------- ReplaceField

    #[test]
    fn replace_field_with_schema_filters_and_renames() {
        let tr = t(
            REPLACE_V,
            &[("exclude", "qty"), ("renames", "name:label,id:key")],
        );
        let out = apply(
            &*tr,
            record(
                None,
                Value::Null,
                Some(row_schema()),
                row(s("n"), Value::Null),
            ),
        );
        let sch = out.value_schema.unwrap();
        let names: Vec<&str> = sch.fields.iter().map(|f| &*f.name).collect();
        assert_eq!(names, ["key", "label"]);
        assert_eq!(sch.name.as_deref(), Some("shop.Row"));
        assert_eq!(sch.doc.as_deref(), Some("a row"));
        assert_eq!(*sch.fields[1].schema, Schema::optional(Type::String));
        assert_eq!(out.value, Value::Struct(vec![Value::Int64(1), s("n")]));
        // Exclude wins over include.
        let inc = t(REPLACE_V, &[("include", "id,qty"), ("exclude", "id")]);
        let out = apply(
            &*inc,
            record(
                None,
                Value::Null,
                Some(row_schema()),
                row(s("n"), Value::Null),
            ),
        );
        assert_eq!(out.value, Value::Struct(vec![Value::Int32(7)]));
        let raw = t(
            REPLACE_V,
            &[("include", "qty"), ("replace.null.with.default", "false")],
        );
        assert_eq!(
            fail(
                &*raw,
                record(
                    None,
                    Value::Null,
                    Some(row_schema()),
                    row(s("n"), Value::Null)
                )
            ),
            "Invalid value: null used for required field: \"qty\", schema type: INT32"
        );
    }

    #[test]
    fn replace_field_schemaless_and_key() {
        let tr = t(
            REPLACE_V,
            &[("exclude", "secret"), ("renames", "op:operation")],
        );
        let v = map(&[
            ("id", Value::Int32(1)),
            ("op", s("c")),
            ("secret", s("x")),
            ("name", s("n")),
        ]);
        // HashMap(4): 4 buckets.
        assert_eq!(
            apply(&*tr, record(None, Value::Null, None, v)).value,
            map(&[
                ("name", s("n")),
                ("operation", s("c")),
                ("id", Value::Int32(1))
            ])
        );
        let k = t(REPLACE_K, &[("include", "id")]);
        let out = apply(
            &*k,
            record(Some(row_schema()), row(s("n"), Value::Null), None, s("v")),
        );
        assert_eq!(out.key, Value::Struct(vec![Value::Int64(1)]));
        assert_eq!(out.value, s("v"));
        let r = record(None, Value::Null, Some(row_schema()), Value::Null);
        assert_eq!(apply(&*tr, r.clone()), r);
        assert_eq!(
            fail(&*tr, record(None, Value::Null, None, Value::Int64(1))),
            "Only Map objects supported in absence of schema for [field replacement], found: java.lang.Long"
        );
    }

    #[test]
    fn replace_field_errors() {
        let dup = t(REPLACE_V, &[("renames", "name:id")]);
        assert_eq!(
            fail(
                &*dup,
                record(
                    None,
                    Value::Null,
                    Some(row_schema()),
                    row(s("n"), Value::Null)
                )
            ),
            "Cannot create field because of field name duplication id"
        );
        // `x` renamed to `id`: the `id` field is read back as `x`.
        let ghost = t(REPLACE_V, &[("renames", "x:id")]);
        assert_eq!(
            fail(
                &*ghost,
                record(
                    None,
                    Value::Null,
                    Some(row_schema()),
                    row(s("n"), Value::Null)
                )
            ),
            "x is not a valid field name"
        );
    }

    #[test]
    fn replace_field_rename_validator() {
        let e = config_err(REPLACE_V, &[("renames", "a:b, c")]);
        assert_eq!(
            e,
            TransformConfigError::invalid("renames", "[a:b, c]", "Invalid rename mapping: c")
        );
        assert!(configured(REPLACE_V, &[("renames", "a:b:c")]).is_err());
        assert!(configured(REPLACE_V, &[("renames", "a:")]).is_err());
        assert!(configured(REPLACE_V, &[("renames", "a,,b")]).is_err());
        // Java's split drops trailing empty parts; a leading one stays.
        assert!(configured(REPLACE_V, &[("renames", "a:b::")]).is_ok());
        assert!(configured(REPLACE_V, &[("renames", ":b")]).is_ok());
        // Kafka 4 no longer reads blacklist/whitelist.
        let o: Options = [("blacklist", "a"), ("whitelist", "b")]
            .into_iter()
            .collect();
        let r = o.reader();
        assert!(build(REPLACE_V, &r).unwrap().is_ok());
        assert_eq!(r.unused(), ["blacklist", "whitelist"]);
    }

    // ------------------------------------------------------------- HoistField

    #[test]
    fn hoist_field_wraps_anything() {
        let tr = t(HOIST_V, &[("field", "payload")]);
        let out = apply(&*tr, record(None, Value::Null, None, s("x")));
        assert_eq!(out.value, map(&[("payload", s("x"))]));
        // A tombstone is hoisted too.
        let out = apply(&*tr, record(None, Value::Null, None, Value::Null));
        assert_eq!(out.value, map(&[("payload", Value::Null)]));
        let out = apply(
            &*tr,
            record(
                None,
                Value::Null,
                Some(Schema::optional(Type::String)),
                s("x"),
            ),
        );
        let sch = out.value_schema.unwrap();
        assert_eq!(
            *sch,
            structure(vec![("payload", Schema::optional(Type::String))])
        );
        assert_eq!(out.value, Value::Struct(vec![s("x")]));
        assert_eq!(
            fail(
                &*tr,
                record(
                    None,
                    Value::Null,
                    Some(Schema::new(Type::String)),
                    Value::Null
                )
            ),
            "Invalid value: null used for required field: \"payload\", schema type: STRING"
        );
        let k = t(HOIST_K, &[("field", "k")]);
        let out = apply(
            &*k,
            record(
                Some(Schema::new(Type::Int64)),
                Value::Int64(9),
                None,
                s("v"),
            ),
        );
        assert_eq!(out.key, Value::Struct(vec![Value::Int64(9)]));
        assert_eq!(out.value, s("v"));
        let empty = t(HOIST_V, &[("field", "")]);
        assert_eq!(
            fail(
                &*empty,
                record(None, Value::Null, Some(Schema::new(Type::String)), s("x"))
            ),
            "fieldName cannot be null."
        );
        assert_eq!(
            config_err(HOIST_V, &[]),
            TransformConfigError::Missing {
                key: "field".into()
            }
        );
    }

    // ----------------------------------------------------------- ExtractField

    /// A struct holding an optional row and a field named `a.b`.
    fn nested_schema() -> Schema {
        structure(vec![
            ("after", row_schema().with_optional(true)),
            ("a.b", Schema::optional(Type::String)),
        ])
    }

    #[test]
    fn extract_field_v1() {
        let tr = t(EXTRACT_V, &[("field", "a.b")]);
        let v = Value::Struct(vec![Value::Null, s("dotted")]);
        let out = apply(&*tr, record(None, Value::Null, Some(nested_schema()), v));
        assert_eq!(out.value, s("dotted"));
        assert_eq!(*out.value_schema.unwrap(), Schema::optional(Type::String));
        let out = apply(
            &*tr,
            record(None, Value::Null, None, map(&[("a.b", Value::Int32(1))])),
        );
        assert_eq!(out.value, Value::Int32(1));
        assert_eq!(out.value_schema, None);
        // Schemaless: a missing entry and a null map give null.
        assert_eq!(
            apply(&*tr, record(None, Value::Null, None, map(&[]))).value,
            Value::Null
        );
        assert_eq!(
            apply(&*tr, record(None, Value::Null, None, Value::Null)).value,
            Value::Null
        );
        // With a schema, a null value keeps the field's schema.
        let out = apply(
            &*tr,
            record(None, Value::Null, Some(nested_schema()), Value::Null),
        );
        assert_eq!(out.value, Value::Null);
        assert_eq!(*out.value_schema.unwrap(), Schema::optional(Type::String));
        assert_eq!(
            fail(&*tr, record(None, Value::Null, None, s("x"))),
            "Only Map objects supported in absence of schema for [field extraction], found: java.lang.String"
        );
        assert_eq!(
            fail(
                &*tr,
                record(None, Value::Null, Some(nested_schema()), s("x"))
            ),
            "Only Struct objects supported for [field extraction], found: java.lang.String"
        );
    }

    #[test]
    fn extract_field_unknown_field_fails_even_on_tombstones() {
        let tr = t(EXTRACT_V, &[("field", "nope")]);
        let msg = fail(
            &*tr,
            record(None, Value::Null, Some(nested_schema()), Value::Null),
        );
        assert!(
            msg.starts_with(
                "Unknown field: nope (Kafka Connect fails with an IllegalArgumentException"
            ),
            "{msg}"
        );
        let non_struct = fail(
            &*tr,
            record(
                None,
                Value::Null,
                Some(Schema::new(Type::String)),
                Value::Null,
            ),
        );
        assert_eq!(non_struct, "Cannot look up fields on non-struct type");
    }

    #[test]
    fn extract_field_v2_paths_and_defaults() {
        let tr = t(
            EXTRACT_V,
            &[("field", "after.qty"), ("field.syntax.version", "v2")],
        );
        let v = Value::Struct(vec![row(s("n"), Value::Null), Value::Null]);
        let out = apply(
            &*tr,
            record(None, Value::Null, Some(nested_schema()), v.clone()),
        );
        assert_eq!(out.value, Value::Int32(7));
        assert_eq!(out.value_schema.unwrap().default, Some(Value::Int32(7)));
        let raw = t(
            EXTRACT_V,
            &[
                ("field", "after.qty"),
                ("field.syntax.version", "V2"),
                ("replace.null.with.default", "false"),
            ],
        );
        assert_eq!(
            apply(&*raw, record(None, Value::Null, Some(nested_schema()), v)).value,
            Value::Null
        );
        let dotted = t(
            EXTRACT_V,
            &[("field", "`a.b`"), ("field.syntax.version", "V2")],
        );
        let v = Value::Struct(vec![Value::Null, s("d")]);
        assert_eq!(
            apply(
                &*dotted,
                record(None, Value::Null, Some(nested_schema()), v)
            )
            .value,
            s("d")
        );
        let m = map(&[("after", map(&[("id", Value::Int64(4))]))]);
        let id = t(
            EXTRACT_V,
            &[("field", "after.id"), ("field.syntax.version", "V2")],
        );
        assert_eq!(
            apply(&*id, record(None, Value::Null, None, m)).value,
            Value::Int64(4)
        );
        let k = t(EXTRACT_K, &[("field", "id")]);
        let out = apply(
            &*k,
            record(Some(row_schema()), row(s("n"), Value::Null), None, s("v")),
        );
        assert_eq!(out.key, Value::Int64(1));
        assert_eq!(*out.key_schema.unwrap(), Schema::new(Type::Int64));
    }

    #[test]
    fn extract_field_options() {
        assert_eq!(
            config_err(EXTRACT_V, &[]),
            TransformConfigError::Missing {
                key: "field".into()
            }
        );
        assert_eq!(
            config_err(EXTRACT_V, &[("field", "a"), ("field.syntax.version", "V9")]).key(),
            Some("field.syntax.version")
        );
        let e = config_err(
            EXTRACT_V,
            &[("field", "`a"), ("field.syntax.version", "V2")],
        );
        assert_eq!(e.key(), Some("field"));
        // V1 takes a backtick as a character.
        assert!(configured(EXTRACT_V, &[("field", "`a")]).is_ok());
        // An empty V2 path is accepted, then fails when used.
        let empty = t(EXTRACT_V, &[("field", ""), ("field.syntax.version", "V2")]);
        assert!(fail(&*empty, record(None, Value::Null, None, map(&[])))
            .contains("IllegalArgumentException"));
    }

    // ------------------------------------------------------------- ValueToKey

    #[test]
    fn value_to_key_schemaless() {
        let tr = t(VALUE_TO_KEY, &[("fields", "id,tenant,missing")]);
        let v = map(&[("tenant", s("t1")), ("id", Value::Int32(1)), ("x", s("y"))]);
        let out = apply(
            &*tr,
            record(Some(Schema::new(Type::String)), s("old"), None, v.clone()),
        );
        // HashMap(3): 4 buckets; a missing field is put as null.
        assert_eq!(out.key_schema, None);
        assert_eq!(
            out.key,
            map(&[
                ("missing", Value::Null),
                ("tenant", s("t1")),
                ("id", Value::Int32(1))
            ])
        );
        assert_eq!(out.value, v);
        let two = t(VALUE_TO_KEY, &[("fields", "id,tenant")]);
        let out = apply(&*two, record(None, Value::Null, None, v));
        // Two keys outgrow HashMap(2): 4 buckets put `tenant` first.
        assert_eq!(
            out.key,
            map(&[("tenant", s("t1")), ("id", Value::Int32(1))])
        );
        assert_eq!(
            fail(&*tr, record(None, Value::Null, None, Value::Null)),
            "Only Map objects supported in absence of schema for [copying fields from value to key], found: null"
        );
    }

    #[test]
    fn value_to_key_with_schema() {
        let tr = t(VALUE_TO_KEY, &[("fields", "qty,id")]);
        let out = apply(
            &*tr,
            record(
                None,
                Value::Null,
                Some(row_schema()),
                row(s("n"), Value::Null),
            ),
        );
        let ks = out.key_schema.unwrap();
        assert_eq!(ks.name, None);
        assert!(!ks.optional);
        let names: Vec<&str> = ks.fields.iter().map(|f| &*f.name).collect();
        assert_eq!(names, ["qty", "id"]);
        assert_eq!(ks.fields[0].schema.default, Some(Value::Int32(7)));
        assert_eq!(
            out.key,
            Value::Struct(vec![Value::Int32(7), Value::Int64(1)])
        );
        assert_eq!(out.value_schema.unwrap().name.as_deref(), Some("shop.Row"));
        let raw = t(
            VALUE_TO_KEY,
            &[("fields", "qty"), ("replace.null.with.default", "false")],
        );
        assert_eq!(
            fail(
                &*raw,
                record(
                    None,
                    Value::Null,
                    Some(row_schema()),
                    row(s("n"), Value::Null)
                )
            ),
            "Invalid value: null used for required field: \"qty\", schema type: INT32"
        );
        let missing = t(VALUE_TO_KEY, &[("fields", "id,nope")]);
        assert_eq!(
            fail(
                &*missing,
                record(
                    None,
                    Value::Null,
                    Some(row_schema()),
                    row(s("n"), Value::Null)
                )
            ),
            "Field does not exist: nope"
        );
        let twice = t(VALUE_TO_KEY, &[("fields", "id,id")]);
        assert_eq!(
            fail(
                &*twice,
                record(
                    None,
                    Value::Null,
                    Some(row_schema()),
                    row(s("n"), Value::Null)
                )
            ),
            "Cannot create field because of field name duplication id"
        );
        assert_eq!(
            fail(
                &*tr,
                record(None, Value::Null, Some(row_schema()), Value::Null)
            ),
            "Only Struct objects supported for [copying fields from value to key], found: null"
        );
    }

    #[test]
    fn value_to_key_options() {
        assert_eq!(
            config_err(VALUE_TO_KEY, &[]),
            TransformConfigError::Missing {
                key: "fields".into()
            }
        );
        assert_eq!(
            config_err(VALUE_TO_KEY, &[("fields", " ")]),
            TransformConfigError::invalid("fields", "[]", "Empty list")
        );
    }
}
