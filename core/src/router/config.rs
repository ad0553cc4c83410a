//! The EventRouter's options in walrelay's native form ([`RouterConfig`]);
//! the configuration layer translates Debezium's property form into it.
//!
//! Owns the option names (Debezium's keys as constants), defaults,
//! validation as Debezium's `ConfigDef` does it (and the stricter checks
//! walrelay adds because it fails at startup where Debezium fails per
//! record), and the parsing of `table.fields.additional.placement`. It
//! never looks at a table or a row.

use serde::Deserialize;

use super::rewrite::TopicRewrite;
pub use crate::connect::expand::{EmptyArrayBehavior, FieldNameAdjustment, NullBehavior};
use crate::setting::SettingError;

/// Debezium key of [`RouterConfig::id_field`].
pub const KEY_ID_FIELD: &str = "table.field.event.id";
/// Debezium key of [`RouterConfig::key_field`].
pub const KEY_KEY_FIELD: &str = "table.field.event.key";
/// Debezium key of the event type column; defined and validated by
/// Debezium but never read by the router.
pub const KEY_TYPE_FIELD: &str = "table.field.event.type";
/// Debezium key of [`RouterConfig::payload_field`].
pub const KEY_PAYLOAD_FIELD: &str = "table.field.event.payload";
/// Debezium key of [`RouterConfig::timestamp_field`].
pub const KEY_TIMESTAMP_FIELD: &str = "table.field.event.timestamp";
/// Debezium key of [`RouterConfig::schema_version_field`].
pub const KEY_SCHEMA_VERSION_FIELD: &str = "table.field.event.schema.version";
/// Debezium key of [`RouterConfig::additional_placement`].
pub const KEY_ADDITIONAL_PLACEMENT: &str = "table.fields.additional.placement";
/// Debezium key of [`RouterConfig::additional_missing`].
pub const KEY_ADDITIONAL_MISSING: &str = "table.field.additional.missing";
/// Debezium key of [`RouterConfig::route_by_field`].
pub const KEY_ROUTE_BY_FIELD: &str = "route.by.field";
/// Debezium key of [`RouterConfig::route_topic_regex`].
pub const KEY_ROUTE_TOPIC_REGEX: &str = "route.topic.regex";
/// Debezium key of [`RouterConfig::route_topic_replacement`].
pub const KEY_ROUTE_TOPIC_REPLACEMENT: &str = "route.topic.replacement";
/// Debezium key of [`RouterConfig::route_tombstone_on_empty_payload`].
pub const KEY_ROUTE_TOMBSTONE_ON_EMPTY_PAYLOAD: &str = "route.tombstone.on.empty.payload";
/// Debezium key of `outbox.op_invalid_behavior` (not a router option).
pub const KEY_OP_INVALID_BEHAVIOR: &str = "table.op.invalid.behavior";
/// Debezium key of [`RouterConfig::expand_json_payload`].
pub const KEY_EXPAND_JSON_PAYLOAD: &str = "table.expand.json.payload";
/// Debezium key of [`RouterConfig::json_payload_null_behavior`].
pub const KEY_JSON_PAYLOAD_NULL_BEHAVIOR: &str = "table.json.payload.null.behavior";
/// Debezium key of [`RouterConfig::json_payload_empty_array_behavior`].
pub const KEY_JSON_PAYLOAD_EMPTY_ARRAY_BEHAVIOR: &str = "table.json.payload.empty.array.behavior";
/// Debezium key of [`RouterConfig::tracing_span_context_field`].
pub const KEY_TRACING_SPAN_CONTEXT_FIELD: &str = "tracing.span.context.field";
/// Debezium key of [`RouterConfig::tracing_operation_name`].
pub const KEY_TRACING_OPERATION_NAME: &str = "tracing.operation.name";
/// Debezium key of [`RouterConfig::tracing_with_context_field_only`].
pub const KEY_TRACING_WITH_CONTEXT_FIELD_ONLY: &str = "tracing.with.context.field.only";
/// Debezium key of [`RouterConfig::field_name_adjustment_mode`].
pub const KEY_FIELD_NAME_ADJUSTMENT_MODE: &str = "field.name.adjustment.mode";

/// Debezium's default for `table.field.event.id`.
pub(crate) const DEFAULT_ID_FIELD: &str = "id";
/// Debezium's default for `table.field.event.key`.
pub(crate) const DEFAULT_KEY_FIELD: &str = "aggregateid";
/// Debezium's default for `table.field.event.payload`.
pub(crate) const DEFAULT_PAYLOAD_FIELD: &str = "payload";
/// Debezium's default for `route.by.field`.
pub(crate) const DEFAULT_ROUTE_BY_FIELD: &str = "aggregatetype";
/// Debezium's default for `route.topic.regex`.
pub(crate) const DEFAULT_ROUTE_TOPIC_REGEX: &str = "(?<routedByValue>.*)";
/// Debezium's default for `route.topic.replacement`.
pub(crate) const DEFAULT_ROUTE_TOPIC_REPLACEMENT: &str = "outbox.event.${routedByValue}";
/// Debezium's default for `route.tombstone.on.empty.payload`.
pub(crate) const DEFAULT_ROUTE_TOMBSTONE_ON_EMPTY_PAYLOAD: bool = false;
/// Debezium's default for `table.expand.json.payload`.
pub(crate) const DEFAULT_EXPAND_JSON_PAYLOAD: bool = false;
/// Debezium's default for `tracing.span.context.field`.
pub(crate) const DEFAULT_TRACING_SPAN_CONTEXT_FIELD: &str = "tracingspancontext";
/// Debezium's default for `tracing.operation.name`.
pub(crate) const DEFAULT_TRACING_OPERATION_NAME: &str = "debezium-read";

/// Name of the envelope struct's payload field.
pub(crate) const ENVELOPE_PAYLOAD_FIELD: &str = "payload";

/// `table.field.additional.missing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AdditionalMissing {
    /// A placement naming a column the table lacks is an error.
    #[default]
    Error,
    /// Such placements are skipped.
    Ignore,
}

/// What a NULL in a column walrelay needs for ordering or deduplication
/// (the key, the event id) does. Not a Debezium option: Debezium passes
/// the NULL on (a null key lands on any partition, a null `id` header
/// leaves consumers nothing to deduplicate on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum NullPolicy {
    /// The event is a bad input: the error policy (`[errors]`) applies.
    #[default]
    Error,
    /// Pass the NULL on as Debezium does.
    Allow,
}

/// What a payload that is not JSON does when `expand_json_payload` is on.
/// Not a Debezium option: Debezium logs a warning (only for text starting
/// with `{` or `[`) and sends the text unexpanded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum InvalidJsonPolicy {
    /// The event is a bad input: the error policy (`[errors]`) applies.
    #[default]
    Error,
    /// Send the text unexpanded, as Debezium does.
    Pass,
}

/// Where an additional column goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// A header named after the alias.
    Header,
    /// A field of the value struct named after the alias.
    Envelope,
    /// The record's partition (INT32 column; alias ignored).
    Partition,
}

/// One parsed `col:placement[:alias]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdditionalField {
    /// Column name.
    pub column: String,
    /// Where the column's value goes: a header, a value field or the
    /// partition.
    pub placement: Placement,
    /// Header or envelope field name (the column name when no alias).
    pub alias: String,
}

/// The outbox EventRouter options walrelay implements, with Debezium's defaults.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RouterConfig {
    /// Column whose value becomes the `id` header (`table.field.event.id`).
    pub id_field: String,
    /// Column whose value becomes the record key (`table.field.event.key`).
    pub key_field: String,
    /// Column whose value becomes the record value (`table.field.event.payload`).
    pub payload_field: String,
    /// INT64 timestamp column (`Timestamp`, `MicroTimestamp` or
    /// `NanoTimestamp`) giving the record timestamp; unset or NULL uses the
    /// producer's clock (`table.field.event.timestamp`).
    pub timestamp_field: Option<String>,
    /// INT32 column giving the envelope schema's version
    /// (`table.field.event.schema.version`).
    pub schema_version_field: Option<String>,
    /// Additional columns, Debezium's `col:placement[:alias],...` with
    /// placements `header`, `envelope` and `partition`
    /// (`table.fields.additional.placement`).
    pub additional_placement: Option<String>,
    /// What a placement naming a missing column does: `error` or `ignore`
    /// (`table.field.additional.missing`).
    pub additional_missing: AdditionalMissing,
    /// Column whose value selects the topic (`route.by.field`).
    pub route_by_field: String,
    /// Java regular expression the route value must fully match to be
    /// rewritten (`route.topic.regex`).
    pub route_topic_regex: String,
    /// Java `Matcher` replacement giving the topic (`$1`, `${name}`, `\`
    /// escapes) (`route.topic.replacement`).
    pub route_topic_replacement: String,
    /// A NULL or blank payload becomes a tombstone (null value)
    /// (`route.tombstone.on.empty.payload`).
    pub route_tombstone_on_empty_payload: bool,
    /// Parse a JSON text payload into a struct with an inferred schema
    /// (`table.expand.json.payload`).
    pub expand_json_payload: bool,
    /// What JSON nulls become when expanding: `ignore` or `optional_bytes`
    /// (`table.json.payload.null.behavior`).
    pub json_payload_null_behavior: NullBehavior,
    /// What empty JSON arrays become when expanding: `ignore` or
    /// `optional_string` (`table.json.payload.empty.array.behavior`).
    pub json_payload_empty_array_behavior: EmptyArrayBehavior,
    /// Column holding a serialised OpenTelemetry span context
    /// (`tracing.span.context.field`).
    pub tracing_span_context_field: String,
    /// Name of the span Debezium creates (`tracing.operation.name`); kept
    /// for compatibility, walrelay exports no spans.
    pub tracing_operation_name: String,
    /// Trace only rows with a span context; unset means true, as the
    /// EventRouter forces (`tracing.with.context.field.only`).
    pub tracing_with_context_field_only: Option<bool>,
    /// How expanded JSON member names become field names: `none`, `avro`
    /// or `avro_unicode` (`field.name.adjustment.mode`).
    pub field_name_adjustment_mode: FieldNameAdjustment,
    /// What a NULL key column does: `error` (default; a null key breaks
    /// per-aggregate ordering) or `allow` (Debezium's behaviour). The
    /// Debezium configuration forms default to `allow`.
    pub null_key: NullPolicy,
    /// What a NULL event id column does: `error` (default) or `allow`
    /// (Debezium's: a null `id` header). The Debezium forms default to `allow`.
    pub(crate) null_id: NullPolicy,
    /// What a `numeric` NaN or ±Infinity that `decimal.handling.mode =
    /// precise` has no form for does where the router reads it: `error`
    /// (default) or `allow` (Debezium's: null, or the column's default,
    /// with a warning). The Debezium forms default to `allow`.
    pub numeric_nan: NullPolicy,
    /// With `expand_json_payload`: what a payload that is not JSON at all
    /// does: `error` (default) or `pass` (Debezium's: sent unexpanded).
    /// The Debezium forms default to `pass`. Valid JSON that cannot be
    /// expanded (a scalar, a mixed array) is always sent unexpanded.
    pub invalid_json_payload: InvalidJsonPolicy,
    /// Not a Debezium option: a `jsonb`, `json`, `text` or `varchar`
    /// column holding a JSON object whose top-level members become Kafka
    /// headers after the router's own (`router::headers`). Unset: none.
    pub headers_field: Option<String>,
}

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig {
            id_field: DEFAULT_ID_FIELD.to_owned(),
            key_field: DEFAULT_KEY_FIELD.to_owned(),
            payload_field: DEFAULT_PAYLOAD_FIELD.to_owned(),
            timestamp_field: None,
            schema_version_field: None,
            additional_placement: None,
            additional_missing: AdditionalMissing::Error,
            route_by_field: DEFAULT_ROUTE_BY_FIELD.to_owned(),
            route_topic_regex: DEFAULT_ROUTE_TOPIC_REGEX.to_owned(),
            route_topic_replacement: DEFAULT_ROUTE_TOPIC_REPLACEMENT.to_owned(),
            route_tombstone_on_empty_payload: DEFAULT_ROUTE_TOMBSTONE_ON_EMPTY_PAYLOAD,
            expand_json_payload: DEFAULT_EXPAND_JSON_PAYLOAD,
            json_payload_null_behavior: NullBehavior::Ignore,
            json_payload_empty_array_behavior: EmptyArrayBehavior::Ignore,
            tracing_span_context_field: DEFAULT_TRACING_SPAN_CONTEXT_FIELD.to_owned(),
            tracing_operation_name: DEFAULT_TRACING_OPERATION_NAME.to_owned(),
            tracing_with_context_field_only: None,
            field_name_adjustment_mode: FieldNameAdjustment::None,
            null_key: NullPolicy::Error,
            null_id: NullPolicy::Error,
            numeric_nan: NullPolicy::Error,
            invalid_json_payload: InvalidJsonPolicy::Error,
            headers_field: None,
        }
    }
}

impl RouterConfig {
    /// The defaults the Debezium configuration forms start from: Debezium's
    /// own handling of NULL keys and ids (`allow`) and of payloads that are
    /// not JSON (`pass`), since those forms promise Debezium's output.
    pub fn debezium() -> Self {
        RouterConfig {
            null_key: NullPolicy::Allow,
            null_id: NullPolicy::Allow,
            numeric_nan: NullPolicy::Allow,
            invalid_json_payload: InvalidJsonPolicy::Pass,
            ..RouterConfig::default()
        }
    }
}

/// A configuration the router cannot run with.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RouteConfigError {
    /// A column-name option is empty.
    #[error("{key} must name a column, but it is empty")]
    EmptyField {
        /// Debezium key of the option.
        key: &'static str,
    },
    /// The topic regex does not compile (or uses Java syntax the `regex`
    /// crate does not have: look-around, back-references, possessive
    /// quantifiers, `\Q..\E`).
    #[error("{key} is not a supported regular expression")]
    InvalidRegex {
        /// Debezium key of the option.
        key: &'static str,
        /// What the regex compiler objected to.
        #[source]
        source: regex::Error,
    },
    /// The topic replacement is not valid Java `Matcher` replacement syntax
    /// for the configured regex.
    #[error("{key} is invalid at character {position}: {reason}")]
    InvalidReplacement {
        /// Debezium key of the option.
        key: &'static str,
        /// Zero-based character index of the problem.
        position: usize,
        /// What is wrong there.
        reason: String,
    },
    /// A value is not one of the allowed ones.
    #[error("{key} has invalid value {value:?}; expected {expected}")]
    InvalidValue {
        /// Debezium key of the option.
        key: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        expected: &'static str,
    },
    /// An entry of `table.fields.additional.placement` is malformed.
    #[error("{key} entry {entry:?} is invalid: {reason}")]
    InvalidPlacement {
        /// Debezium key of the option.
        key: &'static str,
        /// The `col:placement[:alias]` entry as written.
        entry: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// The headers column is also a column another option names.
    #[error("{key} names column \"{column}\", which {other} already uses; the headers column must be a column of its own")]
    HeadersFieldConflict {
        /// The headers column's key.
        key: &'static str,
        /// The column both options name.
        column: String,
        /// The option that uses it too.
        other: String,
    },
}

/// Parses `table.fields.additional.placement` as Debezium does: split on
/// `,` then `:`, parts trimmed; 2 or 3 parts; placement case-insensitive.
/// An empty value is refused (Debezium's validator refuses `""`); an
/// unknown placement word is refused here, where Debezium fails per record.
pub(crate) fn parse_placements(value: &str) -> Result<Vec<AdditionalField>, RouteConfigError> {
    let key = KEY_ADDITIONAL_PLACEMENT;
    if value.is_empty() {
        return Err(RouteConfigError::InvalidPlacement {
            key,
            entry: String::new(),
            reason: "the value is empty",
        });
    }
    let mut out = Vec::new();
    for entry in value.split(',') {
        let parts: Vec<&str> = entry.split(':').map(str::trim).collect();
        let bad = |reason| RouteConfigError::InvalidPlacement {
            key,
            entry: entry.to_owned(),
            reason,
        };
        if parts.len() < 2 || parts.len() > 3 {
            return Err(bad("expected column:placement or column:placement:alias"));
        }
        if parts[0].is_empty() {
            return Err(bad("the column name is empty"));
        }
        let placement = match parts[1].to_ascii_lowercase().as_str() {
            "header" => Placement::Header,
            "envelope" => Placement::Envelope,
            "partition" => Placement::Partition,
            _ => return Err(bad("placement must be header, envelope or partition")),
        };
        let alias = match parts.get(2) {
            Some(a) if !a.is_empty() => (*a).to_owned(),
            Some(_) => return Err(bad("the alias is empty")),
            None => parts[0].to_owned(),
        };
        out.push(AdditionalField {
            column: parts[0].to_owned(),
            placement,
            alias,
        });
    }
    Ok(out)
}

impl RouterConfig {
    /// Checks every option, naming the Debezium key of the first bad one.
    pub fn validate(&self) -> Result<(), RouteConfigError> {
        self.compile().map(drop)
    }

    /// The parsed `table.fields.additional.placement` (empty when unset).
    pub fn placements(&self) -> Result<Vec<AdditionalField>, RouteConfigError> {
        match &self.additional_placement {
            Some(v) => parse_placements(v),
            None => Ok(Vec::new()),
        }
    }

    /// The columns of a table that overrides some of `[router]`'s
    /// (`overrides` empty: `[router]`'s own), compiled and checked as
    /// `[router]`'s are (envelope fields named once).
    pub(crate) fn columns(
        &self,
        overrides: &ColumnOverrides,
    ) -> Result<ColumnMapping, RouteConfigError> {
        let pick = |o: &Option<String>, base: &String| o.clone().unwrap_or_else(|| base.clone());
        let placements = match &overrides.additional_placement {
            Some(v) => parse_placements(v)?,
            None => self.placements()?,
        };
        let mut aliases: Vec<&str> = vec![ENVELOPE_PAYLOAD_FIELD];
        for p in placements
            .iter()
            .filter(|p| p.placement == Placement::Envelope)
        {
            if aliases.contains(&p.alias.as_str()) {
                return Err(RouteConfigError::InvalidPlacement {
                    key: KEY_ADDITIONAL_PLACEMENT,
                    entry: format!("{}:envelope:{}", p.column, p.alias),
                    reason: "the envelope already has a field with this name",
                });
            }
            aliases.push(&p.alias);
        }
        let envelope = placements
            .iter()
            .any(|p| p.placement == Placement::Envelope);
        Ok(ColumnMapping {
            id_field: pick(&overrides.id_field, &self.id_field),
            key_field: pick(&overrides.key_field, &self.key_field),
            payload_field: pick(&overrides.payload_field, &self.payload_field),
            route_by_field: pick(&overrides.route_by_field, &self.route_by_field),
            timestamp_field: overrides
                .timestamp_field
                .clone()
                .or_else(|| self.timestamp_field.clone()),
            schema_version_field: overrides
                .schema_version_field
                .clone()
                .or_else(|| self.schema_version_field.clone()),
            placements,
            envelope,
            tracing_span_context_field: pick(
                &overrides.tracing_span_context_field,
                &self.tracing_span_context_field,
            ),
            scope: if overrides.is_empty() {
                String::new()
            } else {
                format!("{overrides:?}")
            },
        })
    }

    /// The topic rewrite and the additional placements, each option
    /// validated (what `walrelay check` applies to the route values it
    /// finds).
    pub fn compile(&self) -> Result<(TopicRewrite, Vec<AdditionalField>), RouteConfigError> {
        for (key, value) in [
            (KEY_ID_FIELD, Some(&self.id_field)),
            (KEY_KEY_FIELD, Some(&self.key_field)),
            (KEY_PAYLOAD_FIELD, Some(&self.payload_field)),
            (KEY_ROUTE_BY_FIELD, Some(&self.route_by_field)),
            (KEY_TIMESTAMP_FIELD, self.timestamp_field.as_ref()),
            (KEY_SCHEMA_VERSION_FIELD, self.schema_version_field.as_ref()),
            (
                KEY_TRACING_SPAN_CONTEXT_FIELD,
                Some(&self.tracing_span_context_field),
            ),
            (
                super::headers::KEY_HEADERS_FIELD,
                self.headers_field.as_ref(),
            ),
        ] {
            if value.is_some_and(|v| v.trim().is_empty()) {
                return Err(RouteConfigError::EmptyField { key });
            }
        }
        let placements = self.placements()?;
        super::headers::check_config(self, &placements)?;
        let rewrite = TopicRewrite::new(&self.route_topic_regex, &self.route_topic_replacement)?;
        Ok((rewrite, placements))
    }
}

/// The per-table keys of [`ColumnOverrides`] (`[[outbox.tables]]`), the
/// native names of `[router]`'s column options.
pub(crate) const COLUMN_OVERRIDE_KEYS: &[&str] = &[
    "id_field",
    "key_field",
    "payload_field",
    "route_by_field",
    "timestamp_field",
    "schema_version_field",
    "additional_placement",
    "tracing_span_context_field",
];

/// The options of `[router]` that every table of a pipeline shares (the
/// rest, [`COLUMN_OVERRIDE_KEYS`], a table may set for itself).
pub(crate) const SHARED_ROUTER_KEYS: &[&str] = &[
    "additional_missing",
    "route_topic_regex",
    "route_topic_replacement",
    "route_tombstone_on_empty_payload",
    "expand_json_payload",
    "json_payload_null_behavior",
    "json_payload_empty_array_behavior",
    "tracing_operation_name",
    "tracing_with_context_field_only",
    "field_name_adjustment_mode",
    "null_key",
    "null_id",
    "numeric_nan",
    "invalid_json_payload",
];

/// The native name (`[router]` key, and per-table key) of the column
/// option Debezium calls `debezium_key`.
pub fn native_column_option(debezium_key: &str) -> Option<&'static str> {
    Some(match debezium_key {
        KEY_ID_FIELD => "id_field",
        KEY_KEY_FIELD => "key_field",
        KEY_PAYLOAD_FIELD => "payload_field",
        KEY_ROUTE_BY_FIELD => "route_by_field",
        KEY_TIMESTAMP_FIELD => "timestamp_field",
        KEY_SCHEMA_VERSION_FIELD => "schema_version_field",
        KEY_ADDITIONAL_PLACEMENT => "additional_placement",
        KEY_TRACING_SPAN_CONTEXT_FIELD => "tracing_span_context_field",
        _ => return None,
    })
}

/// One outbox table's own column names (`[[outbox.tables]]` of the native
/// form), each overriding `[router]`'s option of the same name; an unset
/// one takes `[router]`'s. Only the columns are per table: the topic
/// rewrite, converters, expansion and policies stay `[router]`'s.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ColumnOverrides {
    /// The event id column (`router.id_field`).
    #[serde(default)]
    pub id_field: Option<String>,
    /// The record key column (`router.key_field`).
    #[serde(default)]
    pub key_field: Option<String>,
    /// The payload column (`router.payload_field`).
    #[serde(default)]
    pub payload_field: Option<String>,
    /// The column naming the topic (`router.route_by_field`).
    #[serde(default)]
    pub route_by_field: Option<String>,
    /// The timestamp column (`router.timestamp_field`).
    #[serde(default)]
    pub timestamp_field: Option<String>,
    /// The schema version column (`router.schema_version_field`).
    #[serde(default)]
    pub schema_version_field: Option<String>,
    /// This table's placements, instead of `router.additional_placement`.
    #[serde(default)]
    pub additional_placement: Option<String>,
    /// The span context column (`router.tracing_span_context_field`).
    #[serde(default)]
    pub tracing_span_context_field: Option<String>,
}

impl ColumnOverrides {
    /// Whether no column is overridden (the table reads `[router]`'s).
    pub fn is_empty(&self) -> bool {
        *self == ColumnOverrides::default()
    }

    /// Whether the option `native` ([`COLUMN_OVERRIDE_KEYS`]) is set here.
    pub fn sets(&self, native: &str) -> bool {
        self.get(native).is_some()
    }

    /// The value of the option `native` ([`COLUMN_OVERRIDE_KEYS`]), if set.
    fn get(&self, native: &str) -> Option<&str> {
        let value = match native {
            "id_field" => &self.id_field,
            "key_field" => &self.key_field,
            "payload_field" => &self.payload_field,
            "route_by_field" => &self.route_by_field,
            "timestamp_field" => &self.timestamp_field,
            "schema_version_field" => &self.schema_version_field,
            "additional_placement" => &self.additional_placement,
            "tracing_span_context_field" => &self.tracing_span_context_field,
            _ => return None,
        };
        value.as_deref()
    }

    /// Checks every value given, naming the key under `prefix` (the
    /// table's entry, e.g. `outbox.tables[1]`).
    pub(crate) fn validate(&self, prefix: &str) -> Result<(), SettingError> {
        let names = COLUMN_OVERRIDE_KEYS
            .iter()
            .filter(|k| **k != "additional_placement");
        for key in names {
            if self.get(key).is_some_and(|v| v.trim().is_empty()) {
                return Err(SettingError::invalid(
                    format!("{prefix}.{key}"),
                    "must name a column, but it is empty",
                ));
            }
        }
        if let Some(v) = &self.additional_placement {
            parse_placements(v).map_err(|e| {
                SettingError::invalid(format!("{prefix}.additional_placement"), e.to_string())
            })?;
        }
        Ok(())
    }
}

/// The columns the router reads from one outbox table, compiled: the
/// column options of `[router]`, or of a table's [`ColumnOverrides`] on
/// top of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnMapping {
    pub(crate) id_field: String,
    pub(crate) key_field: String,
    pub(crate) payload_field: String,
    pub(crate) route_by_field: String,
    pub(crate) timestamp_field: Option<String>,
    pub(crate) schema_version_field: Option<String>,
    pub(crate) placements: Vec<AdditionalField>,
    /// Whether any placement is `envelope` (the value is then a struct).
    pub(crate) envelope: bool,
    pub(crate) tracing_span_context_field: String,
    /// Empty for `[router]`'s own columns; otherwise tells this mapping's
    /// envelope schemas apart in the router's cache, which Debezium keys by
    /// the payload schema alone (one EventRouter, one set of columns).
    pub(crate) scope: String,
}

impl ColumnMapping {
    /// The event id column.
    pub fn id_field(&self) -> &str {
        &self.id_field
    }

    /// The record key column.
    pub fn key_field(&self) -> &str {
        &self.key_field
    }

    /// The payload column.
    pub fn payload_field(&self) -> &str {
        &self.payload_field
    }

    /// The column whose value names the topic.
    pub fn route_by_field(&self) -> &str {
        &self.route_by_field
    }

    /// Whether this mapping is `[router]`'s own (no table overrides it).
    pub fn is_router_default(&self) -> bool {
        self.scope.is_empty()
    }
}

/// Default `topic.prefix`.
pub(crate) const DEFAULT_TOPIC_PREFIX: &str = "walrelay";

/// What Debezium's PostgreSQL connector contributes beyond the row itself.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DebeziumConfig {
    /// `topic.prefix`: the connector's logical name. Names envelope schemas
    /// (`<prefix>.<schema>.<table>.<route>.Value`), the
    /// `__debezium.context.connectorLogicalName` header and the heartbeat topic.
    #[serde(default = "default_topic_prefix")]
    pub topic_prefix: String,
    /// `extended.headers.enabled`: add Debezium's `__debezium.context.*`
    /// headers. Debezium's default is true; walrelay's native default is
    /// false (only `id` and configured headers).
    #[serde(default)]
    pub extended_headers: bool,
    /// Debezium Server's Kafka sink: the record's partition and timestamp
    /// from the router are discarded (the producer's partitioner and clock
    /// decide), as `KafkaChangeConsumer` does.
    #[serde(default)]
    pub server_mode: bool,
    /// Debezium forms: how logical decoding messages become records (the
    /// transforms chain decides); the native form's is always native.
    #[serde(skip)]
    pub message_form: super::MessageForm,
    /// Debezium's type-mapping options (`decimal.handling.mode`,
    /// `time.precision.mode`, `binary.handling.mode`,
    /// `interval.handling.mode`, `hstore.handling.mode`,
    /// `money.fraction.digits`): `[debezium.column_types]`.
    #[serde(default)]
    pub column_types: crate::connect::pg::TypeModes,
    /// Debezium forms: the connector's `schema.name.adjustment.mode`, which
    /// adjusts the table's value schema name
    /// (`<prefix>.<schema>.<table>.Value`, and so the envelope's).
    #[serde(skip)]
    pub schema_name_adjustment: FieldNameAdjustment,
    /// Debezium forms: the connector's `field.name.adjustment.mode`, which
    /// adjusts the column names of the `after` struct: the EventRouter's
    /// options name the adjusted fields.
    #[serde(skip)]
    pub field_name_adjustment: FieldNameAdjustment,
    /// Fields of Debezium's change event copied into headers before the
    /// router, as a `HeaderFrom$Value` ahead of the EventRouter copies
    /// them: `source`, `op`, `transaction`, each as `field` (a header of
    /// the same name) or `field:header`. For the CloudEvents converter's
    /// `metadata.source=header`.
    #[serde(default)]
    pub envelope_headers: Vec<String>,
}

impl Default for DebeziumConfig {
    fn default() -> Self {
        DebeziumConfig {
            topic_prefix: default_topic_prefix(),
            extended_headers: false,
            server_mode: false,
            message_form: super::MessageForm::Native,
            column_types: Default::default(),
            schema_name_adjustment: FieldNameAdjustment::None,
            field_name_adjustment: FieldNameAdjustment::None,
            envelope_headers: Vec::new(),
        }
    }
}

fn default_topic_prefix() -> String {
    DEFAULT_TOPIC_PREFIX.into()
}

impl DebeziumConfig {
    /// `envelope_headers` as (field, header) pairs; the error names the key.
    pub fn envelope_fields(&self) -> Result<Vec<(super::EnvelopeField, String)>, SettingError> {
        let mut out: Vec<(super::EnvelopeField, String)> = Vec::new();
        for item in &self.envelope_headers {
            let (field, header) = item.split_once(':').unwrap_or((item, item));
            let (field, header) = (field.trim(), header.trim());
            let Some(f) = super::EnvelopeField::parse(field) else {
                return Err(SettingError::Invalid {
                    key: "debezium.envelope_headers".into(),
                    reason: format!("{field:?} is not source, op or transaction"),
                });
            };
            if header.is_empty() || out.iter().any(|(g, _)| *g == f) {
                return Err(SettingError::Invalid {
                    key: "debezium.envelope_headers".into(),
                    reason: format!("{item:?}: an empty header name, or the field twice"),
                });
            }
            out.push((f, header.to_owned()));
        }
        Ok(out)
    }

    /// Checks the section; the error names the key.
    pub fn validate(&self) -> Result<(), SettingError> {
        self.envelope_fields()?;
        if self.topic_prefix.trim().is_empty() {
            return Err(SettingError::invalid(
                "debezium.topic_prefix",
                "must not be empty",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_config_deserializes() {
        let cfg: RouterConfig = serde_json::from_str(
            r#"{"route_by_field": "kind", "additional_placement": "type:envelope:eventType",
                "json_payload_null_behavior": "optional_bytes", "field_name_adjustment_mode": "avro_unicode",
                "additional_missing": "ignore"}"#,
        )
        .expect("valid json");
        assert_eq!(cfg.route_by_field, "kind");
        assert_eq!(cfg.id_field, DEFAULT_ID_FIELD);
        assert_eq!(
            cfg.field_name_adjustment_mode,
            FieldNameAdjustment::AvroUnicode
        );
        assert!(serde_json::from_str::<RouterConfig>(r#"{"nope": 1}"#).is_err());
    }
}

/// What a selected non-transactional message
/// (`pg_logical_emit_message(false, ...)`) becomes. PostgreSQL publishes
/// such a message at once, even when the transaction that wrote it rolls
/// back, so it breaks the outbox promise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum NonTransactional {
    /// A bad input: the `[errors]` policy applies (the native default).
    #[default]
    Error,
    /// Dropped with a warning and counted.
    Skip,
    /// Delivered like a transactional one (Debezium's behaviour, and the
    /// Debezium configuration forms').
    Deliver,
}
