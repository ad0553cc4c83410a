//! Heartbeats: small writes to the source database on an interval, so a slot
//! on a quiet database keeps advancing while other databases on the same
//! cluster fill the WAL.
//!
//! A logical replication slot belongs to one database, but WAL is shared by
//! the whole cluster. When the outbox database is quiet, the walsender finds
//! nothing to send and the slot's position cannot advance, so the WAL of
//! every other database piles up behind it. A heartbeat gives the stream
//! something to confirm. By default it emits a transactional logical
//! decoding message (`pg_logical_emit_message`), which needs no table. With
//! Debezium's `heartbeat.action.query`, that query runs instead.
//!
//! Each heartbeat also produces Debezium's heartbeat record to
//! `<heartbeat.topic_prefix>.<topic.prefix>`: key struct
//! `io.debezium.connector.common.ServerNameKey` {serverName}, value struct
//! `io.debezium.connector.common.Heartbeat` {ts_ms}, both version 1, through
//! the configured key and value converters (the EventRouter passes
//! non-envelope records through), always to partition 0 (`HeartbeatImpl`
//! sets it, whatever the key hashes to) and without headers, as Debezium
//! 3.6.1 sends them.
//!
//! This module owns only that periodic write and record. It never touches
//! the stream or the checkpoint: the resulting transaction flows through
//! the normal path and is confirmed like any other, and the record's
//! delivery confirms nothing.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde::Deserialize;
use tokio::sync::watch;
use tracing::{debug, warn};

use crate::connect::config::ConvertersConfig;

use crate::connect::convert::{ConvertError, Converter};
use crate::connect::transforms::ConnectRecord;
use crate::connect::{Field, Schema, Type, Value};
use crate::postgres::catalog;
use crate::postgres::replication::ConnectParams;
use crate::router::{DebeziumConfig, KafkaRecord, Router};
use crate::setting::SettingError;
use crate::sink::choice::Sink;

/// Logical name of the heartbeat key schema.
pub(crate) const KEY_SCHEMA_NAME: &str = "io.debezium.connector.common.ServerNameKey";
/// Logical name of the heartbeat value schema.
pub(crate) const VALUE_SCHEMA_NAME: &str = "io.debezium.connector.common.Heartbeat";
/// The partition Debezium's `HeartbeatImpl` puts on every heartbeat record.
pub(crate) const PARTITION: i32 = 0;

/// Errors of the heartbeat record.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HeartbeatError {
    /// A transform after the router refused the heartbeat record.
    #[error("the transforms refused the heartbeat record: {0}")]
    Transform(String),
    /// The configured converter cannot write the heartbeat struct (Debezium's
    /// task would fail on its first heartbeat).
    #[error("the {which} converter cannot write the heartbeat record")]
    Convert {
        /// `key` or `value`.
        which: &'static str,
        /// The converter's reason.
        #[source]
        source: ConvertError,
    },
}

/// Debezium's heartbeat record for one configuration: topic and key bytes
/// are fixed, the value carries the wall clock. With transforms after the
/// router, the record goes through them as Connect data (they see every
/// record the connector emits) and is converted after them.
#[derive(Debug, Clone)]
pub(crate) struct HeartbeatRecord {
    topic: Arc<str>,
    key: Option<Bytes>,
    key_schema: Arc<Schema>,
    key_value: Value,
    value_schema: Arc<Schema>,
    value_converter: Converter,
    /// The router holding the chain and the converters, when there is a chain.
    chain: Option<Box<Router>>,
}

impl HeartbeatRecord {
    /// Builds the topic and key, and checks that the value converter can
    /// write the value.
    pub(crate) fn new(
        heartbeat: &HeartbeatConfig,
        debezium: &DebeziumConfig,
        converters: ConvertersConfig,
    ) -> Result<Self, HeartbeatError> {
        let struct_of = |name: &str, field: &str, kind: Type| {
            Arc::new(
                Schema::structure(
                    None,
                    vec![Field {
                        name: Arc::from(field),
                        schema: Arc::new(Schema::new(kind)),
                    }],
                )
                .named(name, Some(1)),
            )
        };
        let key_schema = struct_of(KEY_SCHEMA_NAME, "serverName", Type::String);
        let key_value = Value::Struct(vec![Value::string(debezium.topic_prefix.as_str())]);
        let key = converters
            .key_converter()
            .from_connect_data(Some(&key_schema), &key_value)
            .map_err(|source| HeartbeatError::Convert {
                which: "key",
                source,
            })?;
        let record = HeartbeatRecord {
            topic: Arc::from(heartbeat.topic(&debezium.topic_prefix)),
            key,
            key_schema,
            key_value,
            value_schema: struct_of(VALUE_SCHEMA_NAME, "ts_ms", Type::Int64),
            value_converter: converters.value_converter(),
            chain: None,
        };
        // The CloudEvents converter runs in the router, after the chain.
        if converters.value != crate::connect::config::ConverterKind::CloudEvents {
            record.value(0)?;
        }
        Ok(record)
    }

    /// Sends the record through `router`'s chain of transforms, when it
    /// has one.
    pub(crate) fn with_chain(mut self, router: &Router) -> Self {
        if router.connect_mode() {
            self.chain = Some(Box::new(router.clone()));
        }
        self
    }

    /// The heartbeat topic (before any transform).
    #[cfg(test)]
    pub(crate) fn topic(&self) -> &str {
        &self.topic
    }

    /// The key bytes (`None` only for a converter that writes null).
    #[cfg(test)]
    pub(crate) fn key(&self) -> Option<&[u8]> {
        self.key.as_deref()
    }

    /// The value bytes for `ts_ms`.
    pub(crate) fn value(&self, ts_ms: i64) -> Result<Option<Bytes>, HeartbeatError> {
        self.value_converter
            .from_connect_data(
                Some(&self.value_schema),
                &Value::Struct(vec![Value::Int64(ts_ms)]),
            )
            .map_err(|source| HeartbeatError::Convert {
                which: "value",
                source,
            })
    }

    /// The record for `ts_ms`, through the chain when there is one (`None`:
    /// a transform dropped it).
    pub(crate) fn record(&self, ts_ms: i64) -> Result<Option<KafkaRecord>, HeartbeatError> {
        let Some(router) = &self.chain else {
            return Ok(Some(KafkaRecord {
                topic: Arc::clone(&self.topic),
                key: self.key.clone(),
                value: self.value(ts_ms)?,
                headers: Vec::new(),
                partition: Some(PARTITION),
                timestamp_ms: None,
            }));
        };
        let record = ConnectRecord {
            topic: Arc::clone(&self.topic),
            partition: Some(PARTITION),
            key_schema: Some(Arc::clone(&self.key_schema)),
            key: self.key_value.clone(),
            value_schema: Some(Arc::clone(&self.value_schema)),
            value: Value::Struct(vec![Value::Int64(ts_ms)]),
            timestamp: None,
            headers: Vec::new(),
        };
        router
            .transform(record, walrelay_proto::Lsn(0), || "heartbeat".to_owned())
            .map_err(|e| HeartbeatError::Transform(e.to_string()))
    }
}

/// Runs heartbeats until shutdown: on every interval, the heartbeat record
/// and then the SQL. Failures are logged and retried on the next tick; they
/// never stop walrelay (a permanent delivery failure of the record stops
/// the sink, like any other).
pub(crate) async fn run(
    cfg: HeartbeatConfig,
    record: HeartbeatRecord,
    sink: Arc<Sink>,
    params: ConnectParams,
    mut shutdown: watch::Receiver<bool>,
) {
    let sql = cfg
        .action_query
        .clone()
        .unwrap_or_else(|| catalog::DEFAULT_HEARTBEAT_SQL.to_owned());
    let mut ticker = tokio::time::interval(Duration::from_millis(cfg.interval_ms.max(1)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut client: Option<tokio_postgres::Client> = None;
    loop {
        tokio::select! {
            biased;
            _ = shutdown.changed() => return,
            _ = ticker.tick() => {}
        }
        produce(&record, &sink);
        if client
            .as_ref()
            .is_none_or(tokio_postgres::Client::is_closed)
        {
            client = match catalog::connect(&params).await {
                Ok(c) => Some(c),
                Err(e) => {
                    warn!(error = %e, "heartbeat cannot connect; retrying at the next interval");
                    None
                }
            };
        }
        let Some(c) = client.as_ref() else { continue };
        let bound = catalog::sql_timeout(&params);
        let Ok(executed) = tokio::time::timeout(bound, catalog::run_heartbeat(c, &sql)).await
        else {
            // A black-holed connection never answers; start afresh.
            warn!(after = ?bound, "heartbeat query got no answer; reconnecting at the next interval");
            client = None;
            continue;
        };
        match executed {
            Ok(()) => debug!("heartbeat"),
            Err(e) => {
                // The query text may be the user's; the error says what failed.
                warn!(error = %e, "heartbeat query failed; retrying at the next interval");
                client = None;
            }
        }
    }
}

/// Sends one heartbeat record stamped with the wall clock. A record that
/// cannot be sent now is skipped: the next interval sends a fresh one.
fn produce(record: &HeartbeatRecord, sink: &Sink) {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let record = match record.record(now_ms) {
        Ok(Some(r)) => r,
        Ok(None) => return,
        Err(e) => {
            warn!(error = %e, "heartbeat record skipped");
            return;
        }
    };
    if let Err(e) = sink.produce_untracked(&record) {
        warn!(topic = %record.topic, error = %e, "heartbeat record not sent; retrying at the next interval");
    }
}

/// Default heartbeat topic prefix (Debezium's `topic.heartbeat.prefix`).
pub(crate) const DEFAULT_HEARTBEAT_TOPIC_PREFIX: &str = "__debezium-heartbeat";

/// Debezium's heartbeats: records to `<topic_prefix>.<debezium.topic_prefix>`
/// and an optional SQL statement, so an idle database still lets the slot
/// advance.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatConfig {
    /// `heartbeat.interval.ms`; 0 turns heartbeats off.
    #[serde(default)]
    pub interval_ms: u64,
    /// `heartbeat.action.query`: SQL run against the source database on each
    /// heartbeat.
    #[serde(default)]
    pub action_query: Option<String>,
    /// `topic.heartbeat.prefix`.
    #[serde(default = "default_heartbeat_topic_prefix")]
    pub topic_prefix: String,
    /// `topic.heartbeat.name`: the whole topic name, instead of
    /// `<topic_prefix>.<debezium.topic_prefix>`.
    #[serde(default)]
    pub(crate) topic_name: Option<String>,
}

impl Default for HeartbeatConfig {
    fn default() -> Self {
        HeartbeatConfig {
            interval_ms: 0,
            action_query: None,
            topic_prefix: default_heartbeat_topic_prefix(),
            topic_name: None,
        }
    }
}

fn default_heartbeat_topic_prefix() -> String {
    DEFAULT_HEARTBEAT_TOPIC_PREFIX.into()
}

impl HeartbeatConfig {
    /// The heartbeat topic of a connector whose `topic.prefix` is
    /// `topic_prefix`: `topic_name`, else `<self.topic_prefix>.<topic_prefix>`.
    pub(crate) fn topic(&self, topic_prefix: &str) -> String {
        match &self.topic_name {
            Some(name) => name.clone(),
            None => format!("{}.{topic_prefix}", self.topic_prefix),
        }
    }

    /// Checks the section; the error names the key.
    pub(crate) fn validate(&self) -> Result<(), SettingError> {
        if self
            .topic_name
            .as_deref()
            .is_some_and(|n| n.trim().is_empty())
        {
            return Err(SettingError::invalid(
                "heartbeat.topic_name",
                "must not be empty",
            ));
        }
        if self.topic_prefix.trim().is_empty() {
            return Err(SettingError::invalid(
                "heartbeat.topic_prefix",
                "must not be empty",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::config::ConverterKind;

    fn record(kind: ConverterKind, schemas: bool) -> HeartbeatRecord {
        let converters = ConvertersConfig {
            key: kind,
            key_schemas_enable: schemas,
            value: kind,
            value_schemas_enable: schemas,
            ..ConvertersConfig::default()
        };
        let debezium = DebeziumConfig {
            topic_prefix: "test".into(),
            ..DebeziumConfig::default()
        };
        HeartbeatRecord::new(&HeartbeatConfig::default(), &debezium, converters)
            .expect("converter writes structs")
    }

    /// `topic.heartbeat.name` (`heartbeat.topic_name`) names the whole
    /// topic, instead of `<topic.heartbeat.prefix>.<topic.prefix>`.
    #[test]
    fn topic_name_replaces_prefix_and_topic_prefix() {
        let debezium = DebeziumConfig {
            topic_prefix: "test".into(),
            ..DebeziumConfig::default()
        };
        let named = HeartbeatConfig {
            topic_prefix: "hb".into(),
            topic_name: Some("shared-heartbeats".into()),
            ..HeartbeatConfig::default()
        };
        let r = HeartbeatRecord::new(&named, &debezium, ConvertersConfig::default()).unwrap();
        assert_eq!(r.topic(), "shared-heartbeats");
        let prefixed = HeartbeatConfig {
            topic_name: None,
            ..named.clone()
        };
        let r = HeartbeatRecord::new(&prefixed, &debezium, ConvertersConfig::default()).unwrap();
        assert_eq!(r.topic(), "hb.test");
        let empty = HeartbeatConfig {
            topic_name: Some(" ".into()),
            ..named
        };
        assert!(empty.validate().is_err());
    }

    // Bytes observed from Debezium 3.6.1 (heartbeat.interval.ms=1000).
    #[test]
    fn string_converter_matches_debezium() {
        let r = record(ConverterKind::String, true);
        assert_eq!(r.topic(), "__debezium-heartbeat.test");
        assert_eq!(r.key(), Some(&b"Struct{serverName=test}"[..]));
        assert_eq!(
            r.value(1796027498705).unwrap().as_deref(),
            Some(&b"Struct{ts_ms=1796027498705}"[..])
        );
    }

    #[test]
    fn json_converter_with_schemas_matches_debezium() {
        let r = record(ConverterKind::Json, true);
        assert_eq!(
            r.key(),
            Some(&br#"{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"serverName"}],"optional":false,"name":"io.debezium.connector.common.ServerNameKey","version":1},"payload":{"serverName":"test"}}"#[..])
        );
        assert_eq!(
            r.value(1796027535534).unwrap().as_deref(),
            Some(&br#"{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"ts_ms"}],"optional":false,"name":"io.debezium.connector.common.Heartbeat","version":1},"payload":{"ts_ms":1796027535534}}"#[..])
        );
    }

    #[test]
    fn json_converter_without_schemas() {
        let r = record(ConverterKind::Json, false);
        assert_eq!(r.key(), Some(&br#"{"serverName":"test"}"#[..]));
        assert_eq!(r.value(5).unwrap().as_deref(), Some(&br#"{"ts_ms":5}"#[..]));
    }

    #[test]
    fn byte_array_converter_is_refused() {
        let converters = ConvertersConfig {
            key: ConverterKind::ByteArray,
            ..ConvertersConfig::default()
        };
        let err = HeartbeatRecord::new(
            &HeartbeatConfig::default(),
            &DebeziumConfig::default(),
            converters,
        )
        .unwrap_err();
        assert!(matches!(err, HeartbeatError::Convert { which: "key", .. }));
    }
}
