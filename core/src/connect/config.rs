//! The converter settings: which Kafka Connect converter serialises record
//! keys, values and headers, as a Kafka Connect worker (or Debezium Server's
//! `debezium.format.*`) configures them.
//!
//! Owns the `[converters]` section of the native TOML. It never reads a
//! Kafka Connect file: the configuration layer translates those into this.

use serde::Deserialize;

/// A Kafka Connect converter for record keys or values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ConverterKind {
    /// `org.apache.kafka.connect.storage.StringConverter`.
    #[default]
    String,
    /// `org.apache.kafka.connect.json.JsonConverter` (Debezium Server's
    /// `json` and `jsonbytearray` formats).
    Json,
    /// `org.apache.kafka.connect.converters.ByteArrayConverter`.
    ByteArray,
    /// `io.debezium.converters.BinaryDataConverter` (Debezium Server's `binary`).
    BinaryData,
    /// `io.debezium.converters.CloudEventsConverter`, as the value
    /// converter only: it reads the record's headers, so the router runs
    /// it after the chain (`connect::cloudevents`), with the options of
    /// `[cloudevents]`.
    CloudEvents,
}

/// A Kafka Connect header converter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum HeaderConverterKind {
    /// `org.apache.kafka.connect.storage.SimpleHeaderConverter`, Kafka
    /// Connect's default.
    #[default]
    Simple,
    /// `org.apache.kafka.connect.json.JsonConverter`.
    Json,
    /// `org.apache.kafka.connect.storage.StringConverter`.
    String,
}

/// Converters for keys, values and headers, as a Kafka Connect worker (or
/// Debezium Server's `debezium.format.*`) configures them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConvertersConfig {
    /// `key.converter`.
    #[serde(default)]
    pub key: ConverterKind,
    /// `key.converter.schemas.enable` (JsonConverter only; its default is true).
    #[serde(default = "default_true")]
    pub key_schemas_enable: bool,
    /// `value.converter`.
    #[serde(default)]
    pub value: ConverterKind,
    /// `value.converter.schemas.enable`.
    #[serde(default = "default_true")]
    pub value_schemas_enable: bool,
    /// `header.converter`.
    #[serde(default)]
    pub header: HeaderConverterKind,
    /// `header.converter.schemas.enable`.
    #[serde(default = "default_true")]
    pub header_schemas_enable: bool,
}

impl Default for ConvertersConfig {
    fn default() -> Self {
        ConvertersConfig {
            key: ConverterKind::String,
            key_schemas_enable: true,
            value: ConverterKind::String,
            value_schemas_enable: true,
            header: HeaderConverterKind::Simple,
            header_schemas_enable: true,
        }
    }
}

impl ConvertersConfig {
    /// The key converter these settings describe.
    pub fn key_converter(&self) -> super::convert::Converter {
        super::convert::Converter {
            kind: self.key,
            schemas_enable: self.key_schemas_enable,
        }
    }

    /// The value converter these settings describe.
    pub fn value_converter(&self) -> super::convert::Converter {
        super::convert::Converter {
            kind: self.value,
            schemas_enable: self.value_schemas_enable,
        }
    }

    /// The header converter these settings describe.
    pub(crate) fn header_converter(&self) -> super::convert::HeaderConverter {
        super::convert::HeaderConverter {
            kind: self.header,
            schemas_enable: self.header_schemas_enable,
        }
    }
}

fn default_true() -> bool {
    true
}
