//! Debezium's `io.debezium.transforms.outbox.EventRouter` properties,
//! translated into the router's native [`RouterConfig`].
//!
//! Owns the reading of each EventRouter key and its validation as Debezium's
//! `ConfigDef` does it (trimmed, case-insensitive enums and booleans). It
//! never routes anything; the router never sees a Debezium key except in
//! its own error messages. It never logs a value and never connects.

use std::collections::BTreeMap;

use crate::connect::expand::{FieldNameAdjustment, NullBehavior};
use crate::router::*;
use crate::txn::config::OpInvalidBehavior;

/// What [`event_router_options`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DebeziumRouterOptions {
    /// The router options.
    pub(crate) router: RouterConfig,
    /// `table.op.invalid.behavior`, if set (it belongs to `outbox`).
    pub(crate) op_invalid_behavior: Option<OpInvalidBehavior>,
    /// Keys the EventRouter does not define; the caller warns about them.
    pub(crate) unknown: Vec<String>,
}

/// Debezium's `Field.isBoolean` and `Boolean.parseBoolean` after trimming.
fn parse_bool(key: &'static str, value: &str) -> Result<bool, RouteConfigError> {
    let v = value.trim();
    if v.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if v.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err(RouteConfigError::InvalidValue {
            key,
            value: value.to_owned(),
            expected: "true or false",
        })
    }
}

/// Debezium's `EnumeratedValue.parse`: trimmed, case-insensitive.
fn parse_enum<T: Copy>(
    key: &'static str,
    value: &str,
    options: &[(&str, T)],
    expected: &'static str,
) -> Result<T, RouteConfigError> {
    let v = value.trim();
    options
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(v))
        .map(|(_, t)| *t)
        .ok_or_else(|| RouteConfigError::InvalidValue {
            key,
            value: value.to_owned(),
            expected,
        })
}

/// Reads the EventRouter's properties (without the
/// `transforms.<name>.` prefix and without `type`), validating values
/// as Debezium's `ConfigDef` does. Keys the EventRouter does not define
/// are returned in `unknown`, sorted.
pub(crate) fn event_router_options(
    props: &BTreeMap<String, String>,
) -> Result<DebeziumRouterOptions, RouteConfigError> {
    let mut router = RouterConfig::debezium();
    let mut op_invalid_behavior = None;
    let mut unknown = Vec::new();
    for (k, v) in props {
        let value = v.clone();
        match k.as_str() {
            KEY_ID_FIELD => router.id_field = value,
            KEY_KEY_FIELD => router.key_field = value,
            KEY_PAYLOAD_FIELD => router.payload_field = value,
            // Validated as a string by Debezium, then never read.
            KEY_TYPE_FIELD => {}
            KEY_TIMESTAMP_FIELD => router.timestamp_field = Some(value),
            KEY_SCHEMA_VERSION_FIELD => router.schema_version_field = Some(value),
            KEY_ADDITIONAL_PLACEMENT => router.additional_placement = Some(value),
            KEY_ADDITIONAL_MISSING => {
                router.additional_missing = parse_enum(
                    KEY_ADDITIONAL_MISSING,
                    &value,
                    &[
                        ("error", AdditionalMissing::Error),
                        ("ignore", AdditionalMissing::Ignore),
                    ],
                    "error or ignore",
                )?;
            }
            KEY_ROUTE_BY_FIELD => router.route_by_field = value,
            KEY_ROUTE_TOPIC_REGEX => router.route_topic_regex = value,
            KEY_ROUTE_TOPIC_REPLACEMENT => router.route_topic_replacement = value,
            KEY_ROUTE_TOMBSTONE_ON_EMPTY_PAYLOAD => {
                router.route_tombstone_on_empty_payload =
                    parse_bool(KEY_ROUTE_TOMBSTONE_ON_EMPTY_PAYLOAD, &value)?;
            }
            KEY_OP_INVALID_BEHAVIOR => {
                op_invalid_behavior = Some(parse_enum(
                    KEY_OP_INVALID_BEHAVIOR,
                    &value,
                    &[
                        ("warn", OpInvalidBehavior::Warn),
                        ("error", OpInvalidBehavior::Error),
                        ("fatal", OpInvalidBehavior::Fatal),
                    ],
                    "warn, error or fatal",
                )?);
            }
            KEY_EXPAND_JSON_PAYLOAD => {
                router.expand_json_payload = parse_bool(KEY_EXPAND_JSON_PAYLOAD, &value)?;
            }
            KEY_JSON_PAYLOAD_NULL_BEHAVIOR => {
                router.json_payload_null_behavior = parse_enum(
                    KEY_JSON_PAYLOAD_NULL_BEHAVIOR,
                    &value,
                    &[
                        ("ignore", NullBehavior::Ignore),
                        ("optional_bytes", NullBehavior::OptionalBytes),
                    ],
                    "ignore or optional_bytes",
                )?;
            }
            // Debezium 3.6.1's EventRouter does not define it (an empty
            // array has no schema and is dropped), so the Debezium forms
            // leave it at `ignore` and warn, as Debezium ignores it; the
            // native `router.json_payload_empty_array_behavior` has it.
            KEY_JSON_PAYLOAD_EMPTY_ARRAY_BEHAVIOR => unknown.push(k.clone()),
            KEY_TRACING_SPAN_CONTEXT_FIELD => router.tracing_span_context_field = value,
            KEY_TRACING_OPERATION_NAME => router.tracing_operation_name = value,
            KEY_TRACING_WITH_CONTEXT_FIELD_ONLY => {
                router.tracing_with_context_field_only =
                    Some(parse_bool(KEY_TRACING_WITH_CONTEXT_FIELD_ONLY, &value)?);
            }
            KEY_FIELD_NAME_ADJUSTMENT_MODE => {
                router.field_name_adjustment_mode = parse_enum(
                    KEY_FIELD_NAME_ADJUSTMENT_MODE,
                    &value,
                    &[
                        ("none", FieldNameAdjustment::None),
                        ("avro", FieldNameAdjustment::Avro),
                        ("avro_unicode", FieldNameAdjustment::AvroUnicode),
                    ],
                    "none, avro or avro_unicode",
                )?;
            }
            _ => unknown.push(k.clone()),
        }
    }
    router.validate()?;
    Ok(DebeziumRouterOptions {
        router,
        op_invalid_behavior,
        unknown,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn err(pairs: &[(&str, &str)]) -> RouteConfigError {
        event_router_options(&props(pairs)).expect_err("invalid")
    }

    #[test]
    fn every_key_is_read() {
        let o = event_router_options(&props(&[
            ("table.field.event.id", "eid"),
            ("table.field.event.key", "k"),
            ("table.field.event.type", "t"),
            ("table.field.event.payload", "p"),
            ("table.field.event.timestamp", "ts"),
            ("table.field.event.schema.version", "v"),
            (
                "table.fields.additional.placement",
                "type:header:eventType, p2:envelope",
            ),
            ("table.field.additional.missing", "IGNORE"),
            ("route.by.field", "r"),
            ("route.topic.regex", "(.*)"),
            ("route.topic.replacement", "t.$1"),
            ("route.tombstone.on.empty.payload", " True "),
            ("table.op.invalid.behavior", "fatal"),
            ("table.expand.json.payload", "true"),
            ("table.json.payload.null.behavior", "optional_bytes"),
            ("tracing.span.context.field", "sc"),
            ("tracing.operation.name", "op"),
            ("tracing.with.context.field.only", "false"),
            ("field.name.adjustment.mode", "avro_unicode"),
            ("predicate", "x"),
        ]))
        .expect("valid");
        let r = &o.router;
        assert_eq!(
            (
                r.id_field.as_str(),
                r.key_field.as_str(),
                r.payload_field.as_str()
            ),
            ("eid", "k", "p")
        );
        assert_eq!(r.timestamp_field.as_deref(), Some("ts"));
        assert_eq!(r.schema_version_field.as_deref(), Some("v"));
        assert_eq!(r.additional_missing, AdditionalMissing::Ignore);
        assert!(r.route_tombstone_on_empty_payload && r.expand_json_payload);
        assert_eq!(r.json_payload_null_behavior, NullBehavior::OptionalBytes);
        assert_eq!(
            r.json_payload_empty_array_behavior,
            crate::connect::expand::EmptyArrayBehavior::Ignore
        );
        assert_eq!(r.tracing_with_context_field_only, Some(false));
        assert_eq!(
            r.field_name_adjustment_mode,
            FieldNameAdjustment::AvroUnicode
        );
        assert_eq!(o.op_invalid_behavior, Some(OpInvalidBehavior::Fatal));
        assert_eq!(o.unknown, ["predicate"]);
        let placements = r.placements().unwrap();
        assert_eq!(
            placements,
            [
                AdditionalField {
                    column: "type".into(),
                    placement: Placement::Header,
                    alias: "eventType".into()
                },
                AdditionalField {
                    column: "p2".into(),
                    placement: Placement::Envelope,
                    alias: "p2".into()
                },
            ]
        );
    }

    // EventRouterTest.shouldFailOnInvalidConfigurationFor{TopicRegex,AdditionalFields,
    // AdditionalFieldsEmpty,OperationBehavior}
    #[test]
    fn invalid_values_name_the_key() {
        assert!(err(&[("route.topic.regex", " [[a-z]")])
            .to_string()
            .starts_with("route.topic.regex"));
        assert!(err(&[("table.fields.additional.placement", "type")])
            .to_string()
            .starts_with("table.fields.additional.placement"));
        assert!(err(&[("table.fields.additional.placement", "")])
            .to_string()
            .starts_with("table.fields.additional.placement"));
        assert!(
            err(&[("table.fields.additional.placement", "type:nowhere")])
                .to_string()
                .contains("header, envelope or partition")
        );
        assert_eq!(
            err(&[("table.op.invalid.behavior", "invalidOption")]).to_string(),
            "table.op.invalid.behavior has invalid value \"invalidOption\"; expected warn, error or fatal"
        );
        assert!(err(&[("table.expand.json.payload", "yes")])
            .to_string()
            .starts_with("table.expand.json.payload"));
        assert!(err(&[("table.field.additional.missing", "skip")])
            .to_string()
            .starts_with("table.field.additional.missing"));
        assert!(err(&[("field.name.adjustment.mode", "x")])
            .to_string()
            .starts_with("field.name.adjustment.mode"));
    }
}
