//! The Kafka sink's settings: the producer (`bootstrap_servers`, any
//! librdkafka property, secret properties) and the error policy (stop on a
//! bad event, or dead-letter it).
//!
//! Owns the `[kafka]` and `[errors]` sections of the native TOML and their
//! validation (the guarantees walrelay will not give up: idempotence,
//! `acks=all`). Secret values never appear in `Debug`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;

use crate::secret::{is_secret_key, Secret};
use crate::setting::SettingError;

/// Which broker the pipeline publishes to (`[sink]`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SinkConfig {
    /// `kafka` (the default; `[kafka]` configures it), `nats-jetstream`
    /// (`[sink.nats]`), `redis` (`[sink.redis]`), `rabbitmq`
    /// (`[sink.rabbitmq]`), `rabbitmqstream` (`[sink.rabbitmqstream]`),
    /// `http` (`[sink.http]`), `sqs` (`[sink.sqs]`), `sns` (`[sink.sns]`)
    /// `kinesis` (`[sink.kinesis]`), `pubsub` (`[sink.pubsub]`) or `pulsar`
    /// (`[sink.pulsar]`), as Debezium Server's
    /// `debezium.sink.type` names them.
    #[serde(rename = "type", default)]
    pub(crate) kind: SinkKind,
    /// NATS JetStream (`sink.type = "nats-jetstream"`).
    #[serde(default)]
    pub(crate) nats: Option<super::nats::NatsConfig>,
    /// Redis Streams (`sink.type = "redis"`).
    #[serde(default)]
    pub(crate) redis: Option<super::redis::RedisConfig>,
    /// RabbitMQ over AMQP 0-9-1 (`sink.type = "rabbitmq"`).
    #[serde(default)]
    pub(crate) rabbitmq: Option<super::rabbitmq::RabbitMqConfig>,
    /// RabbitMQ streams over the stream protocol
    /// (`sink.type = "rabbitmqstream"`).
    #[serde(default)]
    pub(crate) rabbitmqstream: Option<super::rabbitmq_stream::RabbitMqStreamConfig>,
    /// HTTP (`sink.type = "http"`).
    #[serde(default)]
    pub(crate) http: Option<super::http::HttpConfig>,
    /// Amazon SQS (`sink.type = "sqs"`).
    #[serde(default)]
    pub(crate) sqs: Option<super::aws::sqs::SqsConfig>,
    /// Amazon Kinesis Data Streams (`sink.type = "kinesis"`).
    #[serde(default)]
    pub(crate) kinesis: Option<super::aws::kinesis::KinesisConfig>,
    /// Amazon SNS (`sink.type = "sns"`).
    #[serde(default)]
    pub(crate) sns: Option<super::aws::sns::SnsConfig>,
    /// Google Cloud Pub/Sub (`sink.type = "pubsub"`).
    #[serde(default)]
    pub(crate) pubsub: Option<super::pubsub::PubSubConfig>,
    /// Apache Pulsar (`sink.type = "pulsar"`).
    #[serde(default)]
    pub(crate) pulsar: Option<super::pulsar::PulsarConfig>,
}

/// The brokers walrelay publishes to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub(crate) enum SinkKind {
    /// Kafka, through librdkafka.
    #[default]
    #[serde(rename = "kafka")]
    Kafka,
    /// NATS JetStream (`sink::nats`).
    #[serde(rename = "nats-jetstream")]
    NatsJetStream,
    /// Redis Streams, through redis-rs.
    #[serde(rename = "redis")]
    Redis,
    /// RabbitMQ (AMQP 0-9-1), through lapin.
    #[serde(rename = "rabbitmq")]
    RabbitMq,
    /// RabbitMQ streams (the stream protocol), through
    /// rabbitmq-stream-client.
    #[serde(rename = "rabbitmqstream")]
    RabbitMqStream,
    /// An HTTP endpoint, through hyper.
    #[serde(rename = "http")]
    Http,
    /// Amazon SQS, through the AWS SDK.
    #[serde(rename = "sqs")]
    Sqs,
    /// Amazon Kinesis Data Streams, through the AWS SDK.
    #[serde(rename = "kinesis")]
    Kinesis,
    /// Amazon SNS, through the AWS SDK.
    #[serde(rename = "sns")]
    Sns,
    /// Google Cloud Pub/Sub, through Google's client.
    #[serde(rename = "pubsub")]
    PubSub,
    /// Apache Pulsar, through StreamNative's client.
    #[serde(rename = "pulsar")]
    Pulsar,
}

impl SinkKind {
    /// The name `sink.type` and `debezium.sink.type` give it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SinkKind::Kafka => "kafka",
            SinkKind::NatsJetStream => "nats-jetstream",
            SinkKind::Redis => "redis",
            SinkKind::RabbitMq => "rabbitmq",
            SinkKind::RabbitMqStream => "rabbitmqstream",
            SinkKind::Http => "http",
            SinkKind::Sqs => "sqs",
            SinkKind::Kinesis => "kinesis",
            SinkKind::Sns => "sns",
            SinkKind::PubSub => "pubsub",
            SinkKind::Pulsar => "pulsar",
        }
    }
}

impl SinkConfig {
    /// Checks the section: the chosen broker's own section is there and
    /// valid, and no other broker's is; the error names the key.
    pub(crate) fn validate(&self) -> Result<(), SettingError> {
        let wrong = |section: &str| {
            SettingError::invalid(
                section,
                format!(
                    "configures another broker than sink.type = \"{}\"; remove it or change sink.type",
                    self.kind.as_str()
                ),
            )
        };
        // Every section but the chosen broker's must be absent.
        for (kind, section, set) in [
            (SinkKind::NatsJetStream, "sink.nats", self.nats.is_some()),
            (SinkKind::Redis, "sink.redis", self.redis.is_some()),
            (SinkKind::RabbitMq, "sink.rabbitmq", self.rabbitmq.is_some()),
            (
                SinkKind::RabbitMqStream,
                "sink.rabbitmqstream",
                self.rabbitmqstream.is_some(),
            ),
            (SinkKind::Http, "sink.http", self.http.is_some()),
            (SinkKind::Sqs, "sink.sqs", self.sqs.is_some()),
            (SinkKind::Kinesis, "sink.kinesis", self.kinesis.is_some()),
            (SinkKind::Sns, "sink.sns", self.sns.is_some()),
            (SinkKind::PubSub, "sink.pubsub", self.pubsub.is_some()),
            (SinkKind::Pulsar, "sink.pulsar", self.pulsar.is_some()),
        ] {
            if set && self.kind != kind {
                return Err(wrong(section));
            }
        }
        let missing = |key: &str, what: &str| SettingError::Missing {
            key: key.into(),
            reason: format!(
                "sink.type = \"{}\" publishes there ({what})",
                self.kind.as_str()
            ),
        };
        match self.kind {
            SinkKind::Kafka => {}
            SinkKind::NatsJetStream => self
                .nats
                .as_ref()
                .ok_or_else(|| missing("sink.nats", "url at least"))?
                .validate()?,
            SinkKind::Redis => self
                .redis
                .as_ref()
                .ok_or_else(|| missing("sink.redis", "address at least"))?
                .validate()?,
            SinkKind::RabbitMq => self
                .rabbitmq
                .as_ref()
                .ok_or_else(|| missing("sink.rabbitmq", "url, or host and the rest, at least"))?
                .validate()?,
            // Every key has a default (localhost:5552, guest).
            SinkKind::RabbitMqStream => {
                self.rabbitmqstream.clone().unwrap_or_default().validate()?;
            }
            SinkKind::Http => self
                .http
                .as_ref()
                .ok_or_else(|| missing("sink.http", "url at least"))?
                .validate()?,
            // Every key has a default (the SDK's region and credentials,
            // the queue named by the topic).
            SinkKind::Sqs => self.sqs.clone().unwrap_or_default().validate()?,
            SinkKind::Kinesis => self.kinesis.clone().unwrap_or_default().validate()?,
            SinkKind::Sns => self
                .sns
                .as_ref()
                .ok_or_else(|| {
                    missing(
                        "sink.sns",
                        "topic_arn or topic_arn_prefix, or topics that are ARNs",
                    )
                })?
                .validate()?,
            // The project may come from the environment or the
            // credentials file.
            SinkKind::PubSub => self.pubsub.clone().unwrap_or_default().validate()?,
            // Every key has a default (pulsar://localhost:6650, public/default).
            SinkKind::Pulsar => self.pulsar.clone().unwrap_or_default().validate()?,
        }
        Ok(())
    }
}

/// Kafka producer settings.
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaConfig {
    /// `bootstrap.servers` (required with the Kafka sink).
    #[serde(default)]
    pub bootstrap_servers: String,
    /// Any librdkafka producer property, passed through as is
    /// (`linger.ms`, `compression.type`, `security.protocol`, ...).
    #[serde(default)]
    pub producer: BTreeMap<String, String>,
    /// librdkafka properties whose values are secrets (`sasl.password`,
    /// `ssl.key.password`, ...): merged into `producer` when the producer is
    /// built, never shown.
    #[serde(default)]
    pub secrets: BTreeMap<String, Secret>,
    /// Secret librdkafka properties read from environment variables:
    /// property name → variable name (resolved into `secrets` at load).
    #[serde(default)]
    pub(crate) secrets_env: BTreeMap<String, String>,
    /// Secret librdkafka properties read from files (trailing newline
    /// ignored): property name → path (resolved into `secrets` at load).
    #[serde(default)]
    pub(crate) secrets_file: BTreeMap<String, PathBuf>,
    /// Exactly-once mode: a transactional producer; each Kafka transaction
    /// carries whole PostgreSQL transactions and one progress record, and
    /// the slot is confirmed only up to a committed progress record. Off:
    /// at-least-once with the idempotent producer.
    #[serde(default)]
    pub exactly_once: bool,
    /// The exactly-once settings (`[kafka.transactions]`); used only with
    /// `exactly_once = true`.
    #[serde(default)]
    pub transactions: TransactionsConfig,
}

/// Default of `kafka.transactions.progress_topic`.
pub(crate) const DEFAULT_PROGRESS_TOPIC: &str = "walrelay-progress";
/// Default of `kafka.transactions.max_events`.
pub(crate) const DEFAULT_TXN_MAX_EVENTS: u64 = 10_000;
/// Default of `kafka.transactions.max_bytes`.
pub(crate) const DEFAULT_TXN_MAX_BYTES: u64 = 16 * 1024 * 1024;
/// Default of `kafka.transactions.interval_ms`.
pub(crate) const DEFAULT_TXN_INTERVAL_MS: u64 = 100;
/// Default of `kafka.transactions.timeout_ms` (Kafka's own default of
/// `transaction.timeout.ms`).
pub(crate) const DEFAULT_TXN_TIMEOUT_MS: u64 = 60_000;

/// What a restart does when the slot is ahead of the last committed
/// progress record (something else consumed the slot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SlotAhead {
    /// Stop, naming both positions (the default).
    #[default]
    Fail,
    /// Resume at the slot: the events between the two positions are not
    /// produced by walrelay (whatever advanced the slot had them).
    TrustSlot,
}

/// Exactly-once settings: the transactional id, the progress topic, how
/// source transactions are batched into Kafka transactions.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransactionsConfig {
    /// The pipeline's name: the key of its progress records. Default: the
    /// replication slot's name.
    #[serde(default)]
    pub pipeline: Option<String>,
    /// The producer's `transactional.id`; stable across restarts, unique
    /// per pipeline. Default: `walrelay-<pipeline>`. A second instance
    /// with the same id fences the first.
    #[serde(default)]
    pub transactional_id: Option<String>,
    /// The compacted topic holding the progress records (created if
    /// missing, `cleanup.policy=compact`).
    #[serde(default = "default_progress_topic")]
    pub progress_topic: String,
    /// Replication factor of the progress topic when walrelay creates it;
    /// `-1` takes the broker's `default.replication.factor`.
    #[serde(default = "default_minus_one")]
    pub progress_topic_replication_factor: i32,
    /// Partitions of the progress topic when walrelay creates it.
    #[serde(default = "default_one")]
    pub progress_topic_partitions: i32,
    /// Commit a Kafka transaction once it holds this many events (at the
    /// next source-transaction boundary; a source transaction larger than
    /// this alone is split, its position kept inside it).
    #[serde(default = "default_txn_max_events")]
    pub max_events: u64,
    /// Commit once this many key, value and header bytes are in it.
    #[serde(default = "default_txn_max_bytes")]
    pub max_bytes: u64,
    /// Commit once the Kafka transaction has been open this long, at the
    /// next source-transaction boundary (`transaction.boundary.interval.ms`).
    #[serde(default = "default_txn_interval_ms")]
    pub interval_ms: u64,
    /// The producer's `transaction.timeout.ms`: the broker aborts a
    /// transaction left open longer (a snapshot is one transaction, so it
    /// must fit in this).
    #[serde(default = "default_txn_timeout_ms")]
    pub timeout_ms: u64,
    /// A slot found ahead of the last committed progress: `fail` or
    /// `trust_slot` (in the spirit of Debezium's `offset.mismatch.strategy`).
    #[serde(default)]
    pub slot_ahead: SlotAhead,
}

impl Default for TransactionsConfig {
    fn default() -> Self {
        TransactionsConfig {
            pipeline: None,
            transactional_id: None,
            progress_topic: default_progress_topic(),
            progress_topic_replication_factor: -1,
            progress_topic_partitions: 1,
            max_events: DEFAULT_TXN_MAX_EVENTS,
            max_bytes: DEFAULT_TXN_MAX_BYTES,
            interval_ms: DEFAULT_TXN_INTERVAL_MS,
            timeout_ms: DEFAULT_TXN_TIMEOUT_MS,
            slot_ahead: SlotAhead::Fail,
        }
    }
}

fn default_progress_topic() -> String {
    DEFAULT_PROGRESS_TOPIC.to_owned()
}
fn default_minus_one() -> i32 {
    -1
}
fn default_one() -> i32 {
    1
}
fn default_txn_max_events() -> u64 {
    DEFAULT_TXN_MAX_EVENTS
}
fn default_txn_max_bytes() -> u64 {
    DEFAULT_TXN_MAX_BYTES
}
fn default_txn_interval_ms() -> u64 {
    DEFAULT_TXN_INTERVAL_MS
}
fn default_txn_timeout_ms() -> u64 {
    DEFAULT_TXN_TIMEOUT_MS
}

impl TransactionsConfig {
    /// The pipeline name: `pipeline`, else the slot's name.
    pub(crate) fn pipeline_name<'a>(&'a self, slot: &'a str) -> &'a str {
        self.pipeline.as_deref().unwrap_or(slot)
    }

    /// The transactional id: `transactional_id`, else `walrelay-<pipeline>`.
    pub(crate) fn transactional_id_for(&self, slot: &str) -> String {
        self.transactional_id
            .clone()
            .unwrap_or_else(|| format!("walrelay-{}", self.pipeline_name(slot)))
    }

    /// Checks the section; the error names the key.
    pub(crate) fn validate(&self) -> Result<(), SettingError> {
        crate::router::check_topic_name(&self.progress_topic).map_err(|reason| {
            SettingError::invalid(
                "kafka.transactions.progress_topic",
                format!(
                    "{:?} is not a legal kafka topic name: {reason}",
                    self.progress_topic
                ),
            )
        })?;
        if let Some(id) = &self.transactional_id {
            if id.trim().is_empty() {
                return Err(SettingError::invalid(
                    "kafka.transactions.transactional_id",
                    "must not be empty",
                ));
            }
        }
        if let Some(p) = &self.pipeline {
            if p.trim().is_empty() {
                return Err(SettingError::invalid(
                    "kafka.transactions.pipeline",
                    "must not be empty",
                ));
            }
        }
        if self.progress_topic_replication_factor == 0
            || self.progress_topic_replication_factor < -1
        {
            return Err(SettingError::invalid(
                "kafka.transactions.progress_topic_replication_factor",
                "must be -1 (the broker's default) or at least 1",
            ));
        }
        if self.progress_topic_partitions < 1 {
            return Err(SettingError::invalid(
                "kafka.transactions.progress_topic_partitions",
                "must be at least 1",
            ));
        }
        for (key, v) in [
            ("kafka.transactions.max_events", self.max_events),
            ("kafka.transactions.max_bytes", self.max_bytes),
            ("kafka.transactions.interval_ms", self.interval_ms),
        ] {
            if v == 0 {
                return Err(SettingError::invalid(key, "must be at least 1"));
            }
        }
        if !(1_000..=3_600_000).contains(&self.timeout_ms) {
            return Err(SettingError::invalid(
                "kafka.transactions.timeout_ms",
                "must be between 1000 and 3600000 (the broker caps it at its transaction.max.timeout.ms, 15 minutes by default)",
            ));
        }
        Ok(())
    }
}

impl KafkaConfig {
    /// Every producer property: `producer`, then `secrets`. Only for handing
    /// to librdkafka.
    pub(crate) fn properties(&self) -> impl Iterator<Item = (&str, &str)> {
        self.producer
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain(self.secrets.iter().map(|(k, v)| (k.as_str(), v.expose())))
    }
}

impl fmt::Debug for KafkaConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let producer: BTreeMap<&str, &str> = self
            .producer
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str(),
                    if is_secret_key(k) {
                        "<redacted>"
                    } else {
                        v.as_str()
                    },
                )
            })
            .collect();
        f.debug_struct("KafkaConfig")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("producer", &producer)
            .field("secrets", &self.secrets.keys().collect::<Vec<_>>())
            .field("secrets_env", &self.secrets_env)
            .field("secrets_file", &self.secrets_file)
            .field("exactly_once", &self.exactly_once)
            .field("transactions", &self.transactions)
            .finish()
    }
}

/// Kafka Connect's `errors.tolerance`: what a bad event does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Tolerance {
    /// Stop without confirming past the event (the default).
    #[default]
    None,
    /// Send the event to `errors.dead_letter_topic` and go on.
    All,
}

/// The error policy: stop on a bad event, or dead-letter it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ErrorsConfig {
    /// `none`: a bad event stops walrelay, nothing after it is confirmed.
    /// `all`: it goes to `dead_letter_topic` and the stream goes on
    /// (Kafka Connect's `errors.tolerance`).
    #[serde(default)]
    pub(crate) tolerance: Tolerance,
    /// Topic receiving bad events with `tolerance = "all"`; required then,
    /// because skipping an event would lose it
    /// (`errors.deadletterqueue.topic.name`).
    #[serde(default)]
    pub(crate) dead_letter_topic: Option<String>,
    /// Add the context headers (reason, LSNs, event id, intended topic) to
    /// dead-letter records (`errors.deadletterqueue.context.headers.enable`).
    #[serde(default = "default_true")]
    pub(crate) dead_letter_context_headers: bool,
}

impl Default for ErrorsConfig {
    fn default() -> Self {
        ErrorsConfig {
            tolerance: Tolerance::None,
            dead_letter_topic: None,
            dead_letter_context_headers: true,
        }
    }
}

impl ErrorsConfig {
    /// The dead-letter topic when bad events go there.
    pub(crate) fn dead_letter(&self) -> Option<&str> {
        match self.tolerance {
            Tolerance::All => self.dead_letter_topic.as_deref(),
            Tolerance::None => None,
        }
    }

    /// Checks the section; the error names the key.
    pub(crate) fn validate(&self) -> Result<(), SettingError> {
        if let Some(topic) = &self.dead_letter_topic {
            crate::router::check_topic_name(topic).map_err(|reason| SettingError::Invalid {
                key: "errors.dead_letter_topic".into(),
                reason: format!("{topic:?} is not a legal kafka topic name: {reason}"),
            })?;
        }
        if self.tolerance == Tolerance::All && self.dead_letter_topic.is_none() {
            return Err(SettingError::Missing {
                key: "errors.dead_letter_topic".into(),
                reason: "errors.tolerance = \"all\" sends bad events there; without it they would be skipped and lost".into(),
            });
        }
        Ok(())
    }
}

fn default_true() -> bool {
    true
}

impl KafkaConfig {
    /// Resolves `secrets_env` and `secrets_file` into `secrets`; errors name
    /// the key, never the value.
    pub(crate) fn resolve_secrets(&mut self) -> Result<(), SettingError> {
        let from_env = self
            .secrets_env
            .iter()
            .map(|(k, v)| (k, "kafka.secrets_env", Some(v.as_str()), None));
        let from_file = self
            .secrets_file
            .iter()
            .map(|(k, p)| (k, "kafka.secrets_file", None, Some(p.as_path())));
        let mut resolved = Vec::new();
        for (name, table, env, file) in from_env.chain(from_file) {
            let key = format!("{table}.\"{name}\"");
            if self.secrets.contains_key(name) || resolved.iter().any(|(n, _)| n == name) {
                return Err(SettingError::invalid(
                    key,
                    format!(
                        "{name} is set more than once (kafka.secrets, secrets_env, secrets_file)"
                    ),
                ));
            }
            let value = match (env, file) {
                (Some(var), _) => std::env::var(var).map_err(|_| {
                    SettingError::invalid(
                        key.clone(),
                        format!("environment variable {var} is not set"),
                    )
                })?,
                (_, Some(path)) => std::fs::read_to_string(path)
                    .map_err(|e| {
                        SettingError::invalid(
                            key.clone(),
                            format!("cannot read {}: {e}", path.display()),
                        )
                    })?
                    .trim_end_matches(['\r', '\n'])
                    .to_owned(),
                (None, None) => continue,
            };
            resolved.push((name.clone(), Secret::new(value)));
        }
        self.secrets.extend(resolved);
        Ok(())
    }

    /// Checks the section, including the guarantees walrelay will not give
    /// up (the idempotent producer, `acks=all`); the error names the key.
    pub(crate) fn validate(&self) -> Result<(), SettingError> {
        if self.bootstrap_servers.trim().is_empty() {
            return Err(SettingError::invalid(
                "kafka.bootstrap_servers",
                "must not be empty",
            ));
        }
        if let Some(v) = self.producer.get("enable.idempotence") {
            if v != "true" {
                return Err(SettingError::invalid(
                    "kafka.producer.enable.idempotence",
                    "walrelay requires the idempotent producer (per-key order across retries)",
                ));
            }
        }
        if self.producer.contains_key("bootstrap.servers") {
            return Err(SettingError::invalid(
                "kafka.producer.bootstrap.servers",
                "set kafka.bootstrap_servers instead",
            ));
        }
        for key in self.secrets.keys() {
            if self.producer.contains_key(key) {
                return Err(SettingError::invalid(
                    format!("kafka.secrets.{key}"),
                    "is also set in kafka.producer; set it once",
                ));
            }
        }
        for key in ["transactional.id", "transaction.timeout.ms"] {
            if self.producer.contains_key(key) {
                let native = if key == "transactional.id" {
                    "kafka.transactions.transactional_id"
                } else {
                    "kafka.transactions.timeout_ms"
                };
                return Err(SettingError::invalid(
                    format!("kafka.producer.{key}"),
                    format!("set {native} (with kafka.exactly_once = true) instead"),
                ));
            }
        }
        if self.exactly_once {
            self.transactions.validate()?;
        }
        if let Some(acks) = self.producer.get("acks") {
            if acks != "all" && acks != "-1" {
                return Err(SettingError::invalid(
                    "kafka.producer.acks",
                    "must be all: an event is confirmed to PostgreSQL only once every in-sync replica has it",
                ));
            }
        }
        Ok(())
    }
}
