//! Kafka Connect's converter keys (`key.converter`, `value.converter`,
//! `header.converter` and their `.schemas.enable`), from the worker or
//! overridden by the connector, translated into walrelay's
//! [`ConvertersConfig`].
//!
//! Owns which converter classes walrelay implements; any other class is
//! refused; `<role>.converter.*` settings that change the bytes
//! (`decimal.format`, `replace.null.with.default`, `converter.encoding`) are
//! accepted at Kafka's defaults only, the others ignored with a warning. It
//! never logs a value, never puts a possibly secret value in an error, and
//! never connects.

use super::{parse_bool, Keys, Notes};
use crate::config::ConfigError;
use crate::connect::config::{ConverterKind, ConvertersConfig, HeaderConverterKind};

/// A converter role in Kafka Connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Key,
    Value,
    Header,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Key => "key",
            Role::Value => "value",
            Role::Header => "header",
        }
    }
}

const STRING_CONVERTER: &str = "org.apache.kafka.connect.storage.StringConverter";
const JSON_CONVERTER: &str = "org.apache.kafka.connect.json.JsonConverter";
const BYTE_ARRAY_CONVERTER: &str = "org.apache.kafka.connect.converters.ByteArrayConverter";
const BINARY_DATA_CONVERTER: &str = "io.debezium.converters.BinaryDataConverter";
const SIMPLE_HEADER_CONVERTER: &str = "org.apache.kafka.connect.storage.SimpleHeaderConverter";
const CLOUD_EVENTS_CONVERTER: &str = "io.debezium.converters.CloudEventsConverter";

/// Converter settings that change the bytes written, accepted only at the
/// value walrelay's converters implement (Kafka's defaults).
#[rustfmt::skip]
const BYTE_SETTINGS: &[(&str, &[&str], &str)] = &[
    ("decimal.format", &["BASE64"], "JsonConverter would write Decimal values as JSON numbers"),
    ("replace.null.with.default", &["true"], "JsonConverter would write null where a field's schema has a default"),
    ("converter.encoding", &["UTF-8", "UTF8"], "StringConverter would encode strings in another charset"),
];

/// `None` unless `setting` (a converter setting without the role) changes
/// the bytes; then whether `value` is the one walrelay implements, or why not.
pub(in crate::config) fn byte_setting(setting: &str, value: &str) -> Option<Result<(), String>> {
    let (_, allowed, why) = BYTE_SETTINGS.iter().find(|(k, _, _)| *k == setting)?;
    let value = value.trim();
    Some(if allowed.iter().any(|a| a.eq_ignore_ascii_case(value)) {
        Ok(())
    } else {
        Err(format!(
            "{why}; walrelay implements {}",
            allowed.join(" or ")
        ))
    })
}

/// Which converter roles a file set (so a connector's override can be told
/// from the worker's).
#[derive(Debug, Default, Clone)]
pub(super) struct ConvertersSet {
    pub(super) key: bool,
    pub(super) value: bool,
    /// `value.converter.*` of a CloudEvents value converter named here.
    pub(super) cloudevents: Option<std::collections::BTreeMap<String, String>>,
}

/// Reads `key.converter`, `value.converter`, `header.converter` and their
/// `.schemas.enable`; other `<role>.converter.*` keys are warned about.
/// `connector_level`: a converter class set here starts from its defaults
/// (Kafka Connect configures an overriding converter only from the
/// connector's own keys), and `.schemas.enable` without a class is ignored.
pub(super) fn translate_converters(
    c: &mut Keys,
    converters: &mut ConvertersConfig,
    notes: &mut Notes,
    connector_level: bool,
) -> Result<ConvertersSet, ConfigError> {
    let mut set = ConvertersSet::default();
    for role in [Role::Key, Role::Value, Role::Header] {
        let class_key = format!("{}.converter", role.name());
        let class = c.take(&class_key);
        let mut extras = c.take_prefixed(&format!("{class_key}."));
        if class.as_deref().map(str::trim) == Some(CLOUD_EVENTS_CONVERTER) {
            if role != Role::Value {
                return Err(c.unsupported(
                    &class_key,
                    "walrelay runs the CloudEventsConverter as the value converter only".to_owned(),
                ));
            }
            crate::connect::cloudevents::CloudEventsConfig::from_options(&extras).map_err(|e| {
                let key = e
                    .key()
                    .map_or_else(|| class_key.clone(), |k| format!("{class_key}.{k}"));
                c.invalid(&key, e.to_string())
            })?;
            converters.value = ConverterKind::CloudEvents;
            set.value = true;
            set.cloudevents = Some(std::mem::take(&mut extras));
            continue;
        }
        let schemas_key = format!("{class_key}.schemas.enable");
        let schemas = match extras.remove("schemas.enable") {
            None => None,
            Some(v) => Some(parse_bool(v.trim()).ok_or_else(|| {
                c.invalid(&schemas_key, format!("{:?} is not true or false", v.trim()))
            })?),
        };
        for (extra, value) in &extras {
            let key = format!("{class_key}.{extra}");
            match byte_setting(extra, value) {
                Some(Err(why)) => return Err(c.unsupported(&key, why)),
                Some(Ok(())) => {
                    notes.ignore(
                        c.name(&key),
                        "ignored: it is at the value walrelay implements",
                    );
                    continue;
                }
                None => {}
            }
            notes.ignore(
                c.name(&key),
                "ignored: not a converter setting walrelay implements",
            );
        }
        if let Some(class) = &class {
            match role {
                Role::Key | Role::Value => {
                    let kind = match class.as_str() {
                        STRING_CONVERTER => ConverterKind::String,
                        JSON_CONVERTER => ConverterKind::Json,
                        BYTE_ARRAY_CONVERTER => ConverterKind::ByteArray,
                        BINARY_DATA_CONVERTER => ConverterKind::BinaryData,
                        other => {
                            return Err(c.unsupported(
                                &class_key,
                                format!("walrelay implements StringConverter, JsonConverter, ByteArrayConverter and BinaryDataConverter, not {other}"),
                            ))
                        }
                    };
                    if role == Role::Key {
                        converters.key = kind;
                        converters.key_schemas_enable = true;
                        set.key = true;
                    } else {
                        converters.value = kind;
                        converters.value_schemas_enable = true;
                        set.value = true;
                    }
                }
                Role::Header => {
                    converters.header = match class.as_str() {
                        SIMPLE_HEADER_CONVERTER => HeaderConverterKind::Simple,
                        JSON_CONVERTER => HeaderConverterKind::Json,
                        STRING_CONVERTER => HeaderConverterKind::String,
                        other => {
                            return Err(c.unsupported(
                                &class_key,
                                format!("walrelay implements SimpleHeaderConverter, JsonConverter and StringConverter for headers, not {other}"),
                            ))
                        }
                    };
                    converters.header_schemas_enable = true;
                }
            }
        }
        if let Some(enabled) = schemas {
            if connector_level && class.is_none() {
                notes.ignore(
                    c.name(&schemas_key),
                    "ignored: Kafka Connect applies it only together with the connector's own converter class",
                );
                continue;
            }
            match role {
                Role::Key => converters.key_schemas_enable = enabled,
                Role::Value => converters.value_schemas_enable = enabled,
                Role::Header => converters.header_schemas_enable = enabled,
            }
        }
    }
    Ok(set)
}
