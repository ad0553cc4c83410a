//! Debezium's `HeaderToValue`: copies (or moves) named headers into fields
//! of a Struct value, dotted field names nesting into (or creating)
//! struct fields, as `ConnectRecordUtil.makeNewSchema`/`makeUpdatedValue`
//! build them — including their quirks (a field is "nested" when any
//! configured name merely contains `<field>.`; a rebuilt nested struct
//! loses its optionality; a parent created below the top level gets no
//! fields). Owns its options, its schema cache (keyed by value schema:
//! the first record of a schema decides the new schema) and its
//! `DataException` messages. Pure apart from that cache.

use std::sync::{Arc, Mutex};

use super::super::util::require_struct;
use super::super::util::validate_value;
use super::{
    debezium_list, debezium_validate, is_required, java_split, not_contain_empty_elements,
    not_contain_space_in_any_element, Check, Checked,
};
use crate::connect::transforms::options::{Reader, TransformConfigError};
use crate::connect::transforms::{ConnectRecord, TransformError, Transformation};
use crate::connect::{Field, Schema, Type, Value};

/// The name `ConnectRecordUtil` gives the top-level value.
const ROOT: &str = "payload";

/// Entries Debezium's `BoundedConcurrentHashMap(64)` schema cache holds.
/// Java splits it into 16 LRU segments of 4 picked by `Schema.hashCode`,
/// which depends on identity hash codes, so which entry it evicts first
/// cannot be reproduced; walrelay keeps the 64 most recently used.
const CACHE_SIZE: usize = 64;

/// `move` or `copy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operation {
    /// Remove the configured headers after copying.
    Move,
    /// Keep them.
    Copy,
}

/// One header to add: `ConnectRecordUtil.NewEntry`.
#[derive(Debug, Clone)]
struct NewEntry {
    /// The configured field name (dotted for nesting).
    name: String,
    /// The header's schema.
    schema: Option<Arc<Schema>>,
    /// The header's value.
    value: Value,
}

/// `io.debezium.transforms.HeaderToValue`.
#[derive(Debug)]
pub(super) struct HeaderToValue {
    /// `headers`.
    headers: Vec<String>,
    /// `fields`, one per header.
    fields: Vec<String>,
    /// `operation`.
    operation: Operation,
    /// Value schema → updated schema, most recently used last.
    cache: Mutex<Vec<(Arc<Schema>, Arc<Schema>)>>,
}

impl HeaderToValue {
    /// `configure(props)`: Debezium validates `headers`, `fields` and
    /// `operation` (in that `HashMap` order), then checks the two lists
    /// have the same length.
    pub(super) fn configure(opts: &Reader<'_>) -> Result<HeaderToValue, TransformConfigError> {
        // `withValidation(notContainSpace, notContainEmpty).required()`
        // runs isRequired, then notContainEmpty, then notContainSpace.
        const LIST: &[Check] = &[
            is_required,
            not_contain_empty_elements,
            not_contain_space_in_any_element,
        ];
        // `withEnum(Operation.class).required()`: isRequired, then the
        // enum check (trimmed, lower-cased; listed in HashSet order).
        const OPERATION: &[Check] = &[is_required, operation_check];
        debezium_validate(
            opts,
            &[
                Checked {
                    name: "headers",
                    checks: LIST,
                },
                Checked {
                    name: "fields",
                    checks: LIST,
                },
                Checked {
                    name: "operation",
                    checks: OPERATION,
                },
            ],
        )?;
        let fields = debezium_list(opts.raw("fields"));
        let headers = debezium_list(opts.raw("headers"));
        if headers.len() != fields.len() {
            return Err(TransformConfigError::invalid(
                "fields",
                opts.raw("fields").unwrap_or("null"),
                "'fields' config must have the same number of elements as 'headers' config.",
            ));
        }
        let op = opts.raw("operation").unwrap_or_default().trim();
        let operation = if op.eq_ignore_ascii_case("move") {
            Operation::Move
        } else {
            Operation::Copy
        };
        Ok(HeaderToValue {
            headers,
            fields,
            operation,
            cache: Mutex::new(Vec::new()),
        })
    }

    /// The schema cache's entry for `schema`, or `make`'s result stored
    /// (nothing is stored when `make` fails).
    fn cached_schema(
        &self,
        schema: &Arc<Schema>,
        make: impl FnOnce() -> Result<Arc<Schema>, TransformError>,
    ) -> Result<Arc<Schema>, TransformError> {
        let mut cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(i) = cache.iter().position(|(k, _)| k == schema) {
            let hit = cache.remove(i);
            let updated = Arc::clone(&hit.1);
            cache.push(hit);
            return Ok(updated);
        }
        let updated = make()?;
        if cache.len() >= CACHE_SIZE {
            cache.remove(0);
        }
        cache.push((Arc::clone(schema), Arc::clone(&updated)));
        Ok(updated)
    }
}

/// The `Operation` enum's validator.
fn operation_check(raw: Option<&str>) -> Option<String> {
    let v = raw?.trim().to_lowercase();
    (v != "move" && v != "copy").then(|| "Value must be one of move, copy".to_owned())
}

impl Transformation for HeaderToValue {
    fn apply(&self, mut record: ConnectRecord) -> Result<Option<ConnectRecord>, TransformError> {
        // A tombstone is skipped.
        if record.value.is_null() {
            return Ok(Some(record));
        }
        let values = require_struct(&record.value, "Header field insertion")?;
        let Some(schema) = record.value_schema.clone() else {
            return Err(TransformError::new(
                "a Struct value without a schema (Kafka Connect fails with a \
                 NullPointerException here)",
            ));
        };
        let entries: Vec<NewEntry> = record
            .headers
            .iter()
            .filter_map(|h| {
                let i = self.headers.iter().position(|n| **n == *h.key)?;
                Some(NewEntry {
                    name: self.fields[i].clone(),
                    schema: h.schema.clone(),
                    value: h.value.clone(),
                })
            })
            .collect();
        if entries.is_empty() {
            return Ok(Some(record));
        }
        let updated = self.cached_schema(&schema, || make_new_schema(&schema, &entries))?;
        let nested = nested_fields(&entries);
        let new_values = build_value(&Level::root(&nested), &schema, values, &entries, &updated)?;
        if self.operation == Operation::Move {
            record
                .headers
                .retain(|h| !self.headers.iter().any(|n| **n == *h.key));
        }
        record.value_schema = Some(updated);
        record.value = Value::Struct(new_values);
        Ok(Some(record))
    }
}

/// The configured names that contain a dot.
fn nested_fields(entries: &[NewEntry]) -> Vec<String> {
    entries
        .iter()
        .filter(|e| e.name.contains('.'))
        .map(|e| e.name.clone())
        .collect()
}

/// Where `buildNewSchema`/`buildUpdatedValue` are: the struct's field name
/// (`payload` at the top) and depth, with the nested names.
#[derive(Clone, Copy)]
struct Level<'a> {
    /// `fieldName`.
    name: &'a str,
    /// `level`.
    depth: usize,
    /// `nestedFields`.
    nested: &'a [String],
}

impl<'a> Level<'a> {
    /// The top-level value.
    fn root(nested: &'a [String]) -> Level<'a> {
        Level {
            name: ROOT,
            depth: 0,
            nested,
        }
    }

    /// The struct in field `name` below this one.
    fn child(&self, name: &'a str) -> Level<'a> {
        Level {
            name,
            depth: self.depth + 1,
            nested: self.nested,
        }
    }

    /// `isContainedIn(field, nestedFields)`: any nested name contains
    /// `<field>.` anywhere (a substring test, not a path test).
    fn contains(&self, field: &str) -> bool {
        let needle = format!("{field}.");
        self.nested.iter().any(|s| s.contains(&needle))
    }

    /// `getFieldName(destination, fieldName, level)`: the name an entry
    /// takes in this struct, if it belongs here.
    fn field_name<'e>(&self, destination: &'e str) -> Option<&'e str> {
        let parts = java_split(destination, '.');
        if parts.len() == 1 && self.name == ROOT {
            return Some(parts[0]);
        }
        if parts.len() != self.depth + 1 {
            return None;
        }
        let parent = if self.depth == 0 { 0 } else { self.depth - 1 };
        (parts[parent] == self.name).then(|| parts[self.depth])
    }

    /// `getNewParentFieldsAtLevel`: the missing intermediate structs the
    /// nested names need at this level, in first-seen order.
    fn new_parents(&self, existing: &Schema) -> Vec<&'a str> {
        let mut parents: Vec<&'a str> = Vec::new();
        for nested in self.nested {
            let parts = java_split(nested, '.');
            let process = (self.depth == 0 && self.name == ROOT)
                || (self.depth > 0
                    && self.depth < parts.len()
                    && parts[self.depth - 1] == self.name);
            if !process || self.depth + 1 >= parts.len() {
                continue;
            }
            let field = parts[self.depth];
            if existing.field_index(field).is_none() && !parents.contains(&field) {
                parents.push(field);
            }
        }
        parents
    }

    /// `getNestedFieldNameForParent`: the name an entry takes inside the
    /// new parent struct `parent` (below the top level the joined path is
    /// compared with a single name, so nothing matches).
    fn name_in_parent<'e>(&self, destination: &'e str, parent: &str) -> Option<&'e str> {
        let parts = java_split(destination, '.');
        if self.depth == 0 && self.name == ROOT {
            return (parts.len() > 1 && parent == parts[0]).then(|| parts[1]);
        }
        if self.depth == 0 {
            return None;
        }
        let upto = (self.depth + 1).min(parts.len());
        let path = parts[..upto].join(".");
        (path == parent && self.depth + 1 < parts.len()).then(|| parts[self.depth + 1])
    }
}

/// Whether `kind` is one of `Schema.Type.isPrimitive()`'s types.
fn is_primitive(kind: Type) -> bool {
    !matches!(kind, Type::Struct | Type::Array | Type::Map)
}

/// `ConnectRecordUtil.makeNewSchema`.
fn make_new_schema(old: &Arc<Schema>, entries: &[NewEntry]) -> Result<Arc<Schema>, TransformError> {
    let nested = nested_fields(entries);
    validate_nested_fields_exist(old, &nested)?;
    build_schema(&Level::root(&nested), old, entries)
}

/// `validateNestedFieldsExist`: a nested name may not descend through a
/// primitive field (an absent one ends the check).
fn validate_nested_fields_exist(schema: &Schema, nested: &[String]) -> Result<(), TransformError> {
    for name in nested {
        let parts = java_split(name, '.');
        let mut current = schema;
        for part in parts.iter().take(parts.len().saturating_sub(1)) {
            if current.kind != Type::Struct {
                return Err(TransformError::new(
                    "Cannot look up fields on non-struct type",
                ));
            }
            let Some(i) = current.field_index(part) else {
                break;
            };
            let field_schema = &current.fields[i].schema;
            if is_primitive(field_schema.kind) {
                return Err(TransformError::new(format!(
                    "Field '{part}' is a primitive type, not a struct. Cannot add nested field '{name}'."
                )));
            }
            current = field_schema;
        }
    }
    Ok(())
}

/// A `SchemaBuilder.struct()` being filled.
struct StructBuilder {
    /// The schema so far (fields included).
    schema: Schema,
}

impl StructBuilder {
    /// `SchemaUtil.copySchemaBasics(source, SchemaBuilder.struct())`: a
    /// required struct with the source's name, version, doc, parameters.
    fn copy_basics(source: &Schema) -> StructBuilder {
        let mut schema = Schema::new(Type::Struct);
        schema.name.clone_from(&source.name);
        schema.version = source.version;
        schema.doc.clone_from(&source.doc);
        schema.parameters.clone_from(&source.parameters);
        StructBuilder { schema }
    }

    /// `SchemaBuilder.field(name, schema)` with its checks.
    fn field(&mut self, name: &str, schema: Option<&Arc<Schema>>) -> Result<(), TransformError> {
        if name.is_empty() {
            return Err(TransformError::new("fieldName cannot be null."));
        }
        let Some(schema) = schema else {
            return Err(TransformError::new(format!(
                "fieldSchema for field {name} cannot be null."
            )));
        };
        if self.has(name) {
            return Err(TransformError::new(format!(
                "Cannot create field because of field name duplication {name}"
            )));
        }
        self.schema.fields.push(Field {
            name: Arc::from(name),
            schema: Arc::clone(schema),
        });
        Ok(())
    }

    /// `SchemaBuilder.field(name) != null`.
    fn has(&self, name: &str) -> bool {
        self.schema.field_index(name).is_some()
    }
}

/// `buildNewSchema(fieldName, oldSchema, newEntries, nestedFields, level)`.
fn build_schema(
    at: &Level<'_>,
    old: &Arc<Schema>,
    entries: &[NewEntry],
) -> Result<Arc<Schema>, TransformError> {
    if is_primitive(old.kind) {
        return Ok(Arc::clone(old));
    }
    let mut b = StructBuilder::copy_basics(old);
    if old.kind != Type::Struct {
        return Err(TransformError::new("Cannot list fields on non-struct type"));
    }
    for f in &old.fields {
        if at.contains(&f.name) {
            let rebuilt = build_schema(&at.child(&f.name), &f.schema, entries)?;
            b.field(&f.name, Some(&rebuilt))?;
        } else {
            b.field(&f.name, Some(&f.schema))?;
        }
    }
    for e in entries {
        if let Some(name) = at.field_name(&e.name) {
            if !b.has(name) {
                b.field(name, e.schema.as_ref())?;
            }
        }
    }
    for parent in at.new_parents(old) {
        let mut p = StructBuilder {
            schema: Schema::optional(Type::Struct),
        };
        for e in entries {
            if let Some(name) = at.name_in_parent(&e.name, parent) {
                p.field(name, e.schema.as_ref())?;
            }
        }
        b.field(parent, Some(&Arc::new(p.schema)))?;
    }
    Ok(Arc::new(b.schema))
}

/// `Struct.put(name, value)` into `values` of `schema`: the field must
/// exist and the value must be valid for it.
fn put(
    schema: &Schema,
    values: &mut [Value],
    name: &str,
    value: Value,
) -> Result<(), TransformError> {
    let Some(i) = schema.field_index(name) else {
        return Err(TransformError::new(format!(
            "{name} is not a valid field name"
        )));
    };
    validate_value(Some(name), &schema.fields[i].schema, &value)?;
    values[i] = value;
    Ok(())
}

/// `buildUpdatedValue(fieldName, originalValue, newEntries, updatedSchema,
/// nestedFields, level)`: the original non-null fields (defaults applied,
/// nested ones rebuilt), then the entries of this level, then the new
/// parent structs.
fn build_value(
    at: &Level<'_>,
    old: &Schema,
    values: &[Value],
    entries: &[NewEntry],
    updated: &Schema,
) -> Result<Vec<Value>, TransformError> {
    if updated.kind != Type::Struct {
        return Err(TransformError::new(format!(
            "Not a struct schema: {}",
            updated.java_string()
        )));
    }
    let mut out = vec![Value::Null; updated.fields.len()];
    for (i, f) in old.fields.iter().enumerate() {
        let v = super::super::util::struct_get(old, values, i);
        if v.is_null() {
            continue;
        }
        let v = if at.contains(&f.name) {
            let inner = require_struct(v, "Nested field")?;
            let Some(j) = updated.field_index(&f.name) else {
                return Err(TransformError::new(
                    "a field missing from the cached schema (Kafka Connect fails with a \
                     NullPointerException here)",
                ));
            };
            let sub = &updated.fields[j].schema;
            Value::Struct(build_value(
                &at.child(&f.name),
                &f.schema,
                inner,
                entries,
                sub,
            )?)
        } else {
            v.clone()
        };
        put(updated, &mut out, &f.name, v)?;
    }
    for e in entries {
        if let Some(name) = at.field_name(&e.name) {
            put(updated, &mut out, name, e.value.clone())?;
        }
    }
    for parent in at.new_parents(old) {
        let Some(j) = updated.field_index(parent) else {
            continue;
        };
        let parent_schema = &updated.fields[j].schema;
        let mut inner = vec![Value::Null; parent_schema.fields.len()];
        for e in entries {
            if let Some(name) = at.name_in_parent(&e.name, parent) {
                put(parent_schema, &mut inner, name, e.value.clone())?;
            }
        }
        put(updated, &mut out, parent, Value::Struct(inner))?;
    }
    Ok(out)
}
