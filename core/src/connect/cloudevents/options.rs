//! `CloudEventsConverterConfig` (Debezium 3.6.1) and the `json.` options
//! it passes to its inner `JsonConverter`s, read as `configure` reads them:
//! `ConfigDef` typing first, then the schema-name mode, `metadata.source`,
//! the serializer types and the JSON converters' own options. Pure.

use std::collections::BTreeMap;

use crate::connect::transforms::options::{split_list, Options, Reader};
use crate::connect::transforms::TransformConfigError;

/// Where a piece of CloudEvents metadata comes from
/// (`CloudEventsConverterConfig.MetadataSourceValue`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataSourceValue {
    /// `value`: the Debezium envelope in the record value.
    Value,
    /// `header`: a record header (JSON with schema).
    Header,
    /// `generate`: the converter makes it up.
    Generate,
}

impl MetadataSourceValue {
    /// `MetadataSourceValue.parse`: trimmed, case-insensitive.
    fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "value" => Some(Self::Value),
            "header" => Some(Self::Header),
            "generate" => Some(Self::Generate),
            _ => None,
        }
    }

    /// The Java enum constant's name.
    fn java_name(self) -> &'static str {
        match self {
            Self::Value => "VALUE",
            Self::Header => "HEADER",
            Self::Generate => "GENERATE",
        }
    }
}

/// `metadata.source` resolved per field, as `metadataSource()` returns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetadataSource {
    /// The first element: `value` or `header`.
    pub global: MetadataSourceValue,
    /// Source of `id`.
    pub id: MetadataSourceValue,
    /// Source of `type`.
    pub type_: MetadataSourceValue,
    /// Source of `traceparent` (`header` only with OpenTelemetry attributes on).
    pub trace_parent: MetadataSourceValue,
    /// Source of the `data` schema name (`header` only with
    /// `schema.data.name.source.header.enable`).
    pub data_schema_name: MetadataSourceValue,
}

/// `schema.name.adjustment.mode` (`SchemaNameAdjustmentMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaNameAdjustmentMode {
    /// `none`.
    None,
    /// `avro` (the default).
    Avro,
    /// `avro_unicode`.
    AvroUnicode,
}

/// The converter's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudEventsConfig {
    /// `json.schemas.enable` (default true): `data` is written with its
    /// schema envelope; the CloudEvent itself never carries one.
    pub data_schemas_enable: bool,
    /// `opentelemetry.tracing.attributes.enable` (default false).
    pub opentelemetry_tracing_attributes: bool,
    /// `extension.attributes.enable` (default true).
    pub extension_attributes: bool,
    /// `schema.name.adjustment.mode`: only names the CloudEvents schema,
    /// which JSON output never shows.
    pub schema_name_adjustment: SchemaNameAdjustmentMode,
    /// `schema.cloudevents.name` (default: derived from `source`).
    pub cloudevents_schema_name: Option<String>,
    /// `schema.data.name.source.header.enable` (default false).
    pub data_schema_name_from_header: bool,
    /// `metadata.source`.
    pub metadata_source: MetadataSource,
}

const METADATA_SOURCE_DEFAULT: &str =
    "value,id:generate,type:generate,traceparent:header,dataSchemaName:generate";

impl CloudEventsConfig {
    /// Reads the converter's options (keys without `value.converter.`).
    pub fn from_options(opts: &BTreeMap<String, String>) -> Result<Self, TransformConfigError> {
        let options = Options(opts.clone());
        let r = options.reader();
        let serializer = r.string("serializer.type", Some("json"))?;
        let data_serializer = r.string("data.serializer.type", Some("json"))?;
        let opentelemetry = r.boolean("opentelemetry.tracing.attributes.enable", false)?;
        let extension = r.boolean("extension.attributes.enable", true)?;
        let mode_text = r.string("schema.name.adjustment.mode", Some("avro"))?;
        let cloudevents_schema_name = r.string_or_null("schema.cloudevents.name");
        let from_header = r.boolean("schema.data.name.source.header.enable", false)?;
        let sources = split_list(r.raw("metadata.source").unwrap_or(METADATA_SOURCE_DEFAULT));
        let mode = adjustment_mode(&mode_text)?;
        let metadata_source = metadata_source(&sources, opentelemetry, from_header)?;
        serializer_types(&serializer, &data_serializer)?;
        let data_schemas_enable = json_options(&r)?;
        Ok(CloudEventsConfig {
            data_schemas_enable,
            opentelemetry_tracing_attributes: opentelemetry,
            extension_attributes: extension,
            schema_name_adjustment: mode,
            cloudevents_schema_name,
            data_schema_name_from_header: from_header,
            metadata_source,
        })
    }
}

impl Default for CloudEventsConfig {
    fn default() -> Self {
        // The defaults parse; an empty map cannot fail.
        CloudEventsConfig::from_options(&BTreeMap::new()).unwrap_or(CloudEventsConfig {
            data_schemas_enable: true,
            opentelemetry_tracing_attributes: false,
            extension_attributes: true,
            schema_name_adjustment: SchemaNameAdjustmentMode::Avro,
            cloudevents_schema_name: None,
            data_schema_name_from_header: false,
            metadata_source: MetadataSource {
                global: MetadataSourceValue::Value,
                id: MetadataSourceValue::Generate,
                type_: MetadataSourceValue::Generate,
                trace_parent: MetadataSourceValue::Generate,
                data_schema_name: MetadataSourceValue::Generate,
            },
        })
    }
}

/// `SchemaNameAdjustmentMode.parse(..).createAdjuster()`: an unknown mode
/// is a null, and Debezium's `configure` fails with a NullPointerException.
fn adjustment_mode(text: &str) -> Result<SchemaNameAdjustmentMode, TransformConfigError> {
    match text.trim().to_ascii_lowercase().as_str() {
        "none" => Ok(SchemaNameAdjustmentMode::None),
        "avro" => Ok(SchemaNameAdjustmentMode::Avro),
        "avro_unicode" => Ok(SchemaNameAdjustmentMode::AvroUnicode),
        _ => Err(TransformConfigError::invalid(
            "schema.name.adjustment.mode",
            text,
            "not one of none, avro, avro_unicode (Debezium's configure fails with a NullPointerException here)",
        )),
    }
}

/// `CloudEventsConverterConfig.metadataSource()`.
fn metadata_source(
    items: &[String],
    opentelemetry: bool,
    data_name_from_header: bool,
) -> Result<MetadataSource, TransformConfigError> {
    const KEY: &str = "metadata.source";
    let all = items.join(",");
    let bad = |reason: String| TransformConfigError::invalid(KEY, &all, reason);
    let Some(first) = items.first() else {
        return Err(bad(
            "an empty list (Debezium fails with an IndexOutOfBoundsException here)".to_owned(),
        ));
    };
    let global = match MetadataSourceValue::parse(first) {
        Some(v @ (MetadataSourceValue::Value | MetadataSourceValue::Header)) => v,
        Some(other) => {
            return Err(bad(format!(
                "Global metadata source can't be {}",
                other.java_name()
            )))
        }
        None => {
            return Err(bad(format!(
                "unknown global source `{first}` (Debezium fails with a NullPointerException here)"
            )))
        }
    };
    let mut custom: [Option<MetadataSourceValue>; 4] = [None; 4];
    for item in &items[1..] {
        // String.split(":") drops trailing empty strings.
        let parts: Vec<&str> = item.split(':').collect();
        let end = parts
            .iter()
            .rposition(|p| !p.is_empty())
            .map_or(0, |i| i + 1);
        let (field, source) = match (parts.first(), parts.get(1)) {
            (Some(f), Some(s)) if end >= 2 => (*f, *s),
            _ => {
                return Err(bad(format!(
                    "`{item}` has no source (Debezium fails with an ArrayIndexOutOfBoundsException here)"
                )))
            }
        };
        let value = MetadataSourceValue::parse(source)
            .ok_or_else(|| bad(format!("Field source `{source}` is not valid")))?;
        if value == MetadataSourceValue::Value {
            return Err(bad("Field metadata source can't be VALUE".to_owned()));
        }
        let slot = match field {
            "id" => 0,
            "type" => 1,
            "traceparent" => 2,
            "dataSchemaName" => 3,
            _ => {
                return Err(bad(format!(
                    "Field `{field}` is not allowed to set custom source"
                )))
            }
        };
        custom[slot] = Some(value);
    }
    let pick = |i: usize| custom[i].unwrap_or(global);
    let mut trace_parent = pick(2);
    if trace_parent == MetadataSourceValue::Header && !opentelemetry {
        trace_parent = MetadataSourceValue::Generate;
    }
    let mut data_schema_name = pick(3);
    if data_schema_name == MetadataSourceValue::Header && !data_name_from_header {
        data_schema_name = MetadataSourceValue::Generate;
    }
    Ok(MetadataSource {
        global,
        id: pick(0),
        type_: pick(1),
        trace_parent,
        data_schema_name,
    })
}

/// `SerializerType.withName` for both serializer options: walrelay writes
/// JSON CloudEvents with JSON `data` only.
fn serializer_types(envelope: &str, data: &str) -> Result<(), TransformConfigError> {
    let is_json = |s: &str| s.to_lowercase() == "json";
    let is_avro = |s: &str| s.to_lowercase() == "avro";
    if !is_json(envelope) {
        let reason = if is_json(data) {
            // configure's IllegalStateException.
            "Cannot use 'application/json' data content type within Avro events"
        } else if is_avro(envelope) {
            "Avro CloudEvents need a schema registry (avro.*); walrelay writes JSON CloudEvents only"
        } else {
            "not a serializer type (json or avro); Debezium would fall back to Avro, which walrelay does not write"
        };
        return Err(TransformConfigError::invalid(
            "serializer.type",
            envelope,
            reason,
        ));
    }
    if !is_json(data) {
        let reason = if is_avro(data) {
            "Avro data needs a schema registry (avro.*); walrelay writes JSON data only"
        } else {
            "not a serializer type (json or avro); Debezium would fall back to Avro, which walrelay does not write"
        };
        return Err(TransformConfigError::invalid(
            "data.serializer.type",
            data,
            reason,
        ));
    }
    Ok(())
}

/// The `json.` options, as the inner `JsonConverterConfig`s validate them;
/// returns `json.schemas.enable`. `decimal.format=NUMERIC` and
/// `replace.null.with.default=false` change what JsonConverter writes in a
/// way walrelay's JsonConverter does not reproduce, so they are refused.
fn json_options(r: &Reader<'_>) -> Result<bool, TransformConfigError> {
    r.int("json.schemas.cache.size", Some(1000))?;
    let format = r.string("json.decimal.format", Some("BASE64"))?;
    match format.to_ascii_uppercase().as_str() {
        "BASE64" => {}
        "NUMERIC" => {
            return Err(TransformConfigError::invalid(
                "json.decimal.format",
                &format,
                "walrelay's JsonConverter writes decimals as BASE64 only",
            ))
        }
        _ => {
            return Err(TransformConfigError::invalid(
                "json.decimal.format",
                &format,
                "String must be one of (case insensitive): BASE64, NUMERIC",
            ))
        }
    }
    if !r.boolean("json.replace.null.with.default", true)? {
        return Err(TransformConfigError::invalid(
            "json.replace.null.with.default",
            "false",
            "walrelay's JsonConverter always writes a null as its schema's default",
        ));
    }
    r.boolean("json.schemas.enable", true)
}
