//! Debezium 3.6.1's transforms as they behave after the outbox EventRouter
//! in a Kafka Connect 4.1.1 chain: `HeaderToValue` (in
//! `debezium_header_to_value.rs`), `PartitionRouting` (with Java's
//! `hashCode` and Debezium's MurmurHash3, `debezium_partition.rs`),
//! `EnforceRecordSize` (`debezium_record_size.rs`) and `ActivateTracingSpan`
//! (here). Owns how Debezium's `Field` validators read these transforms'
//! options (raw strings, Debezium's own list splitting, the first problem
//! of the first field in `HashMap` order), Debezium's "is this a change
//! envelope" test (`SmtManager.isValidEnvelope`) and the `Struct` getters
//! Debezium calls, with Kafka's `DataException` messages. Pure: never does
//! I/O or logs.

mod header_to_value;
mod partition;
mod record_size;

use std::sync::Arc;

use super::options::{Reader, TransformConfigError};
use super::util::class_name;
use super::{Built, ConnectRecord, TransformError, Transformation};
use crate::connect::{Schema, Type, Value};

/// `io.debezium.transforms.HeaderToValue`.
const HEADER_TO_VALUE: &str = "io.debezium.transforms.HeaderToValue";
/// `io.debezium.transforms.partitions.PartitionRouting`.
const PARTITION_ROUTING: &str = "io.debezium.transforms.partitions.PartitionRouting";
/// `io.debezium.transforms.EnforceRecordSize`.
const ENFORCE_RECORD_SIZE: &str = "io.debezium.transforms.EnforceRecordSize";
/// `io.debezium.transforms.tracing.ActivateTracingSpan`.
const ACTIVATE_TRACING_SPAN: &str = "io.debezium.transforms.tracing.ActivateTracingSpan";

/// The classes this module builds.
pub(super) const CLASSES: &[&str] = &[
    HEADER_TO_VALUE,
    PARTITION_ROUTING,
    ENFORCE_RECORD_SIZE,
    ACTIVATE_TRACING_SPAN,
];

/// Builds the transform of `class`, if it is one of [`CLASSES`].
pub(super) fn build(class: &str, opts: &Reader<'_>) -> Option<Built> {
    let built: Built = match class {
        HEADER_TO_VALUE => header_to_value::HeaderToValue::configure(opts).map(boxed),
        PARTITION_ROUTING => partition::PartitionRouting::configure(opts).map(boxed),
        ENFORCE_RECORD_SIZE => record_size::EnforceRecordSize::configure(opts).map(boxed),
        ACTIVATE_TRACING_SPAN => ActivateTracingSpan::configure(opts).map(boxed),
        _ => return None,
    };
    Some(built)
}

/// Boxes a configured transform.
fn boxed<T: Transformation + 'static>(t: T) -> Box<dyn Transformation> {
    Box::new(t)
}

// ---------------------------------------------------------------------------
// Debezium's option validation (io.debezium.config.Field / Configuration)
// ---------------------------------------------------------------------------

/// A check Debezium's `Field` runs on an option's raw text (`None`:
/// absent): `Some(problem)` when it fails.
type Check = fn(Option<&str>) -> Option<String>;

/// One option as `Configuration.validate(Field.Set)` checks it: its name
/// and its checks in the order they run (`Field.validate`: the type's
/// validator, then the `withValidation`/`required` chain, the last added
/// first).
struct Checked<'a> {
    /// The option.
    name: &'a str,
    /// Its checks, in order.
    checks: &'a [Check],
}

/// `SmtManager.validate(config, fields)`: the options are validated into a
/// `HashMap` keyed by name and the first one (in that map's iteration
/// order, which `fields` must already follow) with a problem throws
/// `ConfigException(name, rawValue, "The '<name>' value is invalid:
/// <first problem>")`.
fn debezium_validate(
    opts: &Reader<'_>,
    fields: &[Checked<'_>],
) -> Result<(), TransformConfigError> {
    for f in fields {
        let raw = opts.raw(f.name);
        if let Some(problem) = f.checks.iter().find_map(|c| c(raw)) {
            return Err(TransformConfigError::invalid(
                f.name,
                raw.unwrap_or("null"),
                format!("The '{}' value is invalid: {problem}", f.name),
            ));
        }
    }
    Ok(())
}

/// `Configuration.getList(key)`: Java's `split(",")` (trailing empty
/// strings dropped, the whole text when there is no comma), items trimmed;
/// absent is the empty list.
fn debezium_list(raw: Option<&str>) -> Vec<String> {
    raw.map_or_else(Vec::new, |v| {
        java_split(v, ',')
            .into_iter()
            .map(|s| s.trim().to_owned())
            .collect()
    })
}

/// Java's `String.split` on a one-character literal separator with no
/// limit: the text itself when the separator does not occur, otherwise the
/// pieces with trailing empty ones removed (so `"a,"` is `["a"]` and `","`
/// is `[]`).
fn java_split(s: &str, sep: char) -> Vec<&str> {
    if !s.contains(sep) {
        return vec![s];
    }
    let mut parts: Vec<&str> = s.split(sep).collect();
    while parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    parts
}

/// `Field::isRequired`.
fn is_required(raw: Option<&str>) -> Option<String> {
    match raw {
        Some(v) if !v.trim().is_empty() => None,
        _ => Some("A value is required".to_owned()),
    }
}

/// `Field::notContainEmptyElements`.
fn not_contain_empty_elements(raw: Option<&str>) -> Option<String> {
    raw?;
    debezium_list(raw)
        .iter()
        .any(String::is_empty)
        .then(|| "Empty string element(s) not permitted".to_owned())
}

/// `Field::notContainSpaceInAnyElement`.
fn not_contain_space_in_any_element(raw: Option<&str>) -> Option<String> {
    raw?;
    debezium_list(raw)
        .iter()
        .any(|s| s.contains(' '))
        .then(|| "Element(s) containing space not permitted".to_owned())
}

/// `Field::isInteger` (the INT type's validator) on the raw, untrimmed
/// text.
fn is_integer(raw: Option<&str>) -> Option<String> {
    let v = raw?;
    v.parse::<i32>()
        .is_err()
        .then(|| "An integer is expected".to_owned())
}

/// `Field::isPositiveInteger` on the raw, untrimmed text.
fn is_positive_integer(raw: Option<&str>) -> Option<String> {
    let v = raw?;
    match v.parse::<i32>() {
        Ok(n) if n > 0 => None,
        _ => Some("A positive, non-zero integer value is expected".to_owned()),
    }
}

// ---------------------------------------------------------------------------
// Envelopes and Struct getters
// ---------------------------------------------------------------------------

/// `SmtManager.isValidEnvelope`: a value schema whose name ends with
/// `.Envelope` (the EventRouter's payloads never have one unless a route
/// value or `SetSchemaMetadata` names it so).
fn is_valid_envelope(record: &ConnectRecord) -> bool {
    record
        .value_schema
        .as_ref()
        .and_then(|s| s.name.as_deref())
        .is_some_and(|n| n.ends_with(".Envelope"))
}

/// `(Struct) record.value()` of a record whose schema says envelope: the
/// schema and the struct's values, or the `ClassCastException` Java throws
/// for another value.
fn envelope_struct(record: &ConnectRecord) -> Result<(&Arc<Schema>, &[Value]), TransformError> {
    match (&record.value_schema, &record.value) {
        (Some(s), Value::Struct(values)) => Ok((s, values)),
        (_, other) => Err(class_cast(other, "org.apache.kafka.connect.data.Struct")),
    }
}

/// A `ClassCastException` of `value` to `target`.
fn class_cast(value: &Value, target: &str) -> TransformError {
    TransformError::new(format!(
        "class {} cannot be cast to class {target} (Kafka Connect fails with a \
         ClassCastException here)",
        class_name(value)
    ))
}

/// `Struct.lookupField(name)`: the field's position.
fn lookup_field(schema: &Schema, name: &str) -> Result<usize, TransformError> {
    if schema.kind != Type::Struct {
        return Err(TransformError::new(
            "Cannot look up fields on non-struct type",
        ));
    }
    schema
        .field_index(name)
        .ok_or_else(|| TransformError::new(format!("{name} is not a valid field name")))
}

/// `Struct.get(name)`: the value, or the field's default when null.
fn struct_get<'a>(
    schema: &'a Schema,
    values: &'a [Value],
    name: &str,
) -> Result<&'a Value, TransformError> {
    let i = lookup_field(schema, name)?;
    Ok(super::util::struct_get(schema, values, i))
}

/// `Struct.getCheckType(name, type)` (`getString`, `getStruct`,
/// `getInt64`): the raw value (no default) of a field of that type.
fn struct_get_typed<'a>(
    schema: &'a Schema,
    values: &'a [Value],
    name: &str,
    kind: Type,
) -> Result<(&'a Arc<Schema>, &'a Value), TransformError> {
    let i = lookup_field(schema, name)?;
    let field = &schema.fields[i];
    if field.schema.kind != kind {
        return Err(TransformError::new(format!(
            "Field '{name}' is not of type {}",
            kind.java_name()
        )));
    }
    Ok((&field.schema, values.get(i).unwrap_or(&Value::Null)))
}

// ---------------------------------------------------------------------------
// ActivateTracingSpan
// ---------------------------------------------------------------------------

/// `ActivateTracingSpan` in a Connect worker without the OpenTelemetry
/// API: the Debezium connector archives do not ship it
/// (`opentelemetry-api` is an optional dependency of
/// `debezium-connect-plugins` and `provided` in the connector modules), so
/// `TracingSpanUtil` cannot load and every record the SMT would trace
/// fails. Records that are not change envelopes — every record the
/// EventRouter emits, unless a route value or `SetSchemaMetadata` gives
/// its value schema a name ending in `.Envelope` — pass unchanged, as do
/// tombstones. (walrelay's router writes the W3C headers itself from its
/// own tracing options; see `router/trace_context.rs`.)
#[derive(Debug)]
struct ActivateTracingSpan {
    /// `tracing.span.context.field` (raw: Debezium reads the original
    /// text, untrimmed).
    span_context_field: String,
    /// `tracing.with.context.field.only`.
    require_context_field: bool,
}

impl ActivateTracingSpan {
    /// `configure(props)`: Connect's `ConfigDef` types (a BOOLEAN that is
    /// not `true`/`false` is refused before `configure`); the two STRING
    /// options have no validator, and `tracing.operation.name` only names
    /// the span.
    fn configure(opts: &Reader<'_>) -> Result<ActivateTracingSpan, TransformConfigError> {
        let require_context_field = opts.boolean("tracing.with.context.field.only", false)?;
        let span_context_field = opts
            .raw("tracing.span.context.field")
            .unwrap_or("tracingspancontext")
            .to_owned();
        let _ = opts.raw("tracing.operation.name");
        Ok(ActivateTracingSpan {
            span_context_field,
            require_context_field,
        })
    }

    /// The span context text of `after.<field>`, reading `after` and
    /// `source` as `apply` does (`getStruct`, `getString`: their type
    /// checks can throw).
    fn propagated_context(
        &self,
        schema: &Schema,
        values: &[Value],
    ) -> Result<Option<String>, TransformError> {
        let after = match schema.field_index("after") {
            Some(_) => struct_get_typed(schema, values, "after", Type::Struct)?,
            None => return self.check_source(schema, values).map(|()| None),
        };
        self.check_source(schema, values)?;
        let (after_schema, Value::Struct(after_values)) = after else {
            return Ok(None);
        };
        if after_schema.field_index(&self.span_context_field).is_none() {
            return Ok(None);
        }
        let (_, v) = struct_get_typed(
            after_schema,
            after_values,
            &self.span_context_field,
            Type::String,
        )?;
        Ok(match v {
            Value::String(t) => Some(t.as_str().to_owned()),
            _ => None,
        })
    }

    /// `envelope.getStruct("source")` when the envelope has a `source`
    /// field: only its type check matters here.
    fn check_source(&self, schema: &Schema, values: &[Value]) -> Result<(), TransformError> {
        if schema.field_index("source").is_some() {
            struct_get_typed(schema, values, "source", Type::Struct)?;
        }
        Ok(())
    }
}

impl Transformation for ActivateTracingSpan {
    fn apply(&self, record: ConnectRecord) -> Result<Option<ConnectRecord>, TransformError> {
        if record.value.is_null() || !is_valid_envelope(&record) {
            return Ok(Some(record));
        }
        let (schema, values) = envelope_struct(&record)?;
        let context = self.propagated_context(schema, values)?;
        if context.is_none() && self.require_context_field {
            return Ok(Some(record));
        }
        // `TracingSpanUtil.traceRecord` throws NoClassDefFoundError without
        // the OpenTelemetry API, which `apply` turns into this.
        Err(TransformError::new(
            "Failed to record tracing information, tracing libraries not available",
        ))
    }
}

#[cfg(test)]
mod tests;
