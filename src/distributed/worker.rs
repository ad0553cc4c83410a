//! Kafka Connect's distributed worker file (`connect-distributed.properties`):
//! the keys of the group and its three storage topics, taken out of the
//! worker map; the rest of the map is the worker part of every connector's
//! translation (`crate::config::kafka_connect::from_connect`), as in the
//! standalone form.
//!
//! Owns the defaults and validation of `DistributedConfig`'s keys as
//! Connect 4.1.1 has them. It never connects and never puts a value it did
//! not validate in an error.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::config::ConfigError;

/// Connect's default `session.timeout.ms`.
const SESSION_TIMEOUT_MS: u64 = 10_000;
/// Connect's default `heartbeat.interval.ms`.
const HEARTBEAT_INTERVAL_MS: u64 = 3_000;
/// Connect's default `rebalance.timeout.ms`.
const REBALANCE_TIMEOUT_MS: u64 = 60_000;
/// Connect's default replication factor of the storage topics.
const REPLICATION_FACTOR: i32 = 3;
/// Connect's default partitions of the offset topic.
const OFFSET_PARTITIONS: i32 = 25;
/// Connect's default partitions of the status topic.
const STATUS_PARTITIONS: i32 = 5;

/// Keys of the distributed worker that walrelay accepts and does not need:
/// each is removed with the reason logged at start.
const IGNORED: &[(&str, &str)] = &[
    (
        "scheduled.rebalance.max.delay.ms",
        "walrelay reassigns a departed worker's connectors as soon as the group \
         has removed it (after session.timeout.ms), without Connect's extra delay",
    ),
    (
        "connect.protocol",
        "walrelay workers always join with Connect's \"compatible\" protocol \
         (incremental cooperative)",
    ),
    (
        "worker.sync.timeout.ms",
        "walrelay reads the config topic to its end before every assignment",
    ),
    (
        "worker.unsync.backoff.ms",
        "walrelay reads the config topic to its end before every assignment",
    ),
    (
        "inter.worker.key.generation.algorithm",
        "walrelay workers do not forward task configurations to each other",
    ),
    (
        "inter.worker.key.size",
        "walrelay workers do not forward task configurations to each other",
    ),
    (
        "inter.worker.key.ttl.ms",
        "walrelay workers do not forward task configurations to each other",
    ),
    (
        "inter.worker.signature.algorithm",
        "walrelay workers do not forward task configurations to each other",
    ),
    (
        "inter.worker.verification.algorithms",
        "walrelay workers do not forward task configurations to each other",
    ),
    (
        "config.storage.min.insync.replicas",
        "ignored: the topic's own setting applies",
    ),
    (
        "metadata.max.age.ms",
        "ignored: librdkafka's default applies",
    ),
    (
        "topic.creation.enable",
        "ignored: walrelay creates no topics for connectors (the broker's \
         auto.create.topics.enable or your tooling does)",
    ),
];

/// One storage topic: its name and how to create it when missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StorageTopic {
    /// The topic's name.
    pub(crate) name: String,
    /// Partitions when created (`-1`: the broker's default).
    pub(crate) partitions: i32,
    /// Replication factor when created (`-1`: the broker's default).
    pub(crate) replication_factor: i32,
}

/// The distributed worker: the group, the storage topics, the timings.
#[derive(Debug, Clone)]
pub(crate) struct DistributedConfig {
    /// `group.id`.
    pub(crate) group_id: String,
    /// `bootstrap.servers`, comma-separated.
    pub(crate) bootstrap: String,
    /// `config.storage.topic` (always one partition).
    pub(crate) config_topic: StorageTopic,
    /// `offset.storage.topic`.
    pub(crate) offset_topic: StorageTopic,
    /// `status.storage.topic`.
    pub(crate) status_topic: StorageTopic,
    /// `session.timeout.ms`.
    pub(crate) session_timeout: Duration,
    /// `heartbeat.interval.ms`.
    pub(crate) heartbeat_interval: Duration,
    /// `rebalance.timeout.ms`.
    pub(crate) rebalance_timeout: Duration,
    /// `client.id` of the worker's own clients, when set.
    pub(crate) client_id: Option<String>,
    /// Keys accepted and not used, with why.
    pub(crate) ignored: Vec<(String, &'static str)>,
}

impl DistributedConfig {
    /// Takes the distributed keys out of `worker`; what is left is the
    /// worker part of each connector's translation. `group.id` and
    /// `offset.storage.*` stay in it too (exactly-once reads them).
    pub(crate) fn take(worker: &mut BTreeMap<String, String>) -> Result<Self, ConfigError> {
        let group_id = required(worker, "group.id", false)?;
        let bootstrap = worker
            .get("bootstrap.servers")
            .cloned()
            .unwrap_or_else(|| "localhost:9092".into());
        let config_topic = StorageTopic {
            name: required(worker, "config.storage.topic", true)?,
            partitions: 1,
            replication_factor: count(worker, "config.storage.replication.factor", true)?
                .unwrap_or(REPLICATION_FACTOR),
        };
        let offset_topic = StorageTopic {
            name: required(worker, "offset.storage.topic", false)?,
            partitions: count(worker, "offset.storage.partitions", false)?
                .unwrap_or(OFFSET_PARTITIONS),
            replication_factor: count(worker, "offset.storage.replication.factor", false)?
                .unwrap_or(REPLICATION_FACTOR),
        };
        let status_topic = StorageTopic {
            name: required(worker, "status.storage.topic", true)?,
            partitions: count(worker, "status.storage.partitions", true)?
                .unwrap_or(STATUS_PARTITIONS),
            replication_factor: count(worker, "status.storage.replication.factor", true)?
                .unwrap_or(REPLICATION_FACTOR),
        };
        let session_timeout = millis(worker, "session.timeout.ms", SESSION_TIMEOUT_MS)?;
        let heartbeat_interval = millis(worker, "heartbeat.interval.ms", HEARTBEAT_INTERVAL_MS)?;
        let rebalance_timeout = millis(worker, "rebalance.timeout.ms", REBALANCE_TIMEOUT_MS)?;
        if heartbeat_interval >= session_timeout {
            return Err(ConfigError::Invalid {
                key: "heartbeat.interval.ms".into(),
                reason: "must be lower than session.timeout.ms (Kafka's group protocol)".into(),
            });
        }
        let client_id = worker.get("client.id").cloned();
        let mut ignored = Vec::new();
        for (key, why) in IGNORED {
            if worker.remove(*key).is_some() {
                ignored.push(((*key).to_owned(), *why));
            }
        }
        Ok(DistributedConfig {
            group_id,
            bootstrap,
            config_topic,
            offset_topic,
            status_topic,
            session_timeout,
            heartbeat_interval,
            rebalance_timeout,
            client_id,
            ignored,
        })
    }
}

/// A required non-empty key; `remove` takes it out of the map.
fn required(
    worker: &mut BTreeMap<String, String>,
    key: &str,
    remove: bool,
) -> Result<String, ConfigError> {
    let value = if remove {
        worker.remove(key)
    } else {
        worker.get(key).cloned()
    };
    match value.map(|v| v.trim().to_owned()) {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(ConfigError::Invalid {
            key: key.into(),
            reason: "a distributed worker requires it (Connect has no default either)".into(),
        }),
    }
}

/// A partition count or replication factor: -1 or positive.
fn count(
    worker: &mut BTreeMap<String, String>,
    key: &str,
    remove: bool,
) -> Result<Option<i32>, ConfigError> {
    let value = if remove {
        worker.remove(key)
    } else {
        worker.get(key).cloned()
    };
    let Some(v) = value else { return Ok(None) };
    match v.trim().parse::<i32>() {
        Ok(n) if n == -1 || n >= 1 => Ok(Some(n)),
        _ => Err(ConfigError::Invalid {
            key: key.into(),
            reason: format!("{v:?} is not -1 (the broker's default) or a positive integer"),
        }),
    }
}

/// A duration in milliseconds, removed from the map.
fn millis(
    worker: &mut BTreeMap<String, String>,
    key: &str,
    default: u64,
) -> Result<Duration, ConfigError> {
    match worker.remove(key) {
        None => Ok(Duration::from_millis(default)),
        Some(v) => match v.trim().parse::<u64>() {
            Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
            _ => Err(ConfigError::Invalid {
                key: key.into(),
                reason: format!("{v:?} is not a positive number of milliseconds"),
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(lines: &[(&str, &str)]) -> BTreeMap<String, String> {
        lines
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn connect_defaults_and_the_keys_left_for_the_translation() {
        let mut w = worker(&[
            ("bootstrap.servers", "k:9092"),
            ("group.id", "g"),
            ("config.storage.topic", "c"),
            ("offset.storage.topic", "o"),
            ("status.storage.topic", "s"),
            ("connect.protocol", "sessioned"),
            (
                "key.converter",
                "org.apache.kafka.connect.json.JsonConverter",
            ),
        ]);
        let d = DistributedConfig::take(&mut w).unwrap();
        assert_eq!(d.group_id, "g");
        assert_eq!(
            d.config_topic,
            StorageTopic {
                name: "c".into(),
                partitions: 1,
                replication_factor: 3
            }
        );
        assert_eq!(d.offset_topic.partitions, 25);
        assert_eq!(d.status_topic.partitions, 5);
        assert_eq!(d.session_timeout, Duration::from_secs(10));
        assert_eq!(d.ignored.len(), 1);
        // group.id and offset.storage.topic stay for exactly-once; the
        // rest of the distributed keys are gone.
        assert!(w.contains_key("group.id") && w.contains_key("offset.storage.topic"));
        assert!(!w.contains_key("config.storage.topic") && !w.contains_key("connect.protocol"));
        assert!(w.contains_key("key.converter"));
    }

    #[test]
    fn missing_and_bad_keys_are_named() {
        let mut w = worker(&[("group.id", "g")]);
        let e = DistributedConfig::take(&mut w).unwrap_err().to_string();
        assert!(e.contains("config.storage.topic"), "{e}");
        let mut w = worker(&[
            ("group.id", "g"),
            ("config.storage.topic", "c"),
            ("offset.storage.topic", "o"),
            ("status.storage.topic", "s"),
            ("status.storage.partitions", "0"),
        ]);
        let e = DistributedConfig::take(&mut w).unwrap_err().to_string();
        assert!(e.contains("status.storage.partitions"), "{e}");
    }
}
