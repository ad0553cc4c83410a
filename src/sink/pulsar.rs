//! Apache Pulsar behind the broker seam (`sink.type = "pulsar"`), through
//! StreamNative's Rust client (the binary protocol, send receipts).
//!
//! What a message is, as Debezium Server 3.6.1's `pulsar` sink produces
//! it: the topic is `persistent://<tenant>/<namespace>/<the router's
//! topic>` (`public/default`), the payload the record's value bytes, the
//! message key the record key as text (`null_key`, `default`, for a null
//! key), every header a property (its value as text). With `schema =
//! "string"` (what the translation sets for Debezium Server's JSON
//! formats, whose values are Java strings) the producer declares Pulsar's
//! STRING schema, as Debezium Server's does for a String value; else none
//! (bytes).
//!
//! Acknowledgements: a record is settled when the broker's send receipt
//! for it arrives (the broker has it in BookKeeper). One producer per
//! topic sends in pipeline order; on a partitioned topic the key picks
//! the partition with the Java client's default hash (`JavaStringHash`,
//! or `Murmur3_32Hash`), so a key's records stay on one partition in
//! order, where Debezium Server puts them. A failed send drops the
//! producers and everything unacknowledged is sent again, in order: at
//! least once (Pulsar's deduplication is a namespace setting; walrelay
//! does not rely on it).
//!
//! Limits, checked before sending (a refusal of that record alone,
//! `[errors]` decides): payload, key and properties at most
//! `max_message_bytes` (the broker's default 5 MiB), text keys and
//! property values. A dead letter is an ordinary message on the
//! dead-letter topic (its headers, with the context headers, as
//! properties).

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pulsar::message::proto::{schema, Schema};
use pulsar::producer::{Message, ProducerOptions};
use pulsar::routing_policy::{CustomRoutingPolicy, RoutingPolicy};
use pulsar::{Authentication, Producer, Pulsar as Client, TokioExecutor};
use serde::Deserialize;

use super::broker::{FailureClass, Guarantees};
use super::queued::{debezium_header_order, Outcome, Outgoing, Publisher};
use crate::secret::Secret;
use crate::setting::SettingError;

/// The broker's default `maxMessageSize`.
pub(crate) const MAX_MESSAGE_BYTES: usize = 5 << 20;
/// The bound of a dead letter's key and value.
pub(crate) const LETTER_MAX_BYTES: usize = MAX_MESSAGE_BYTES / 2;
/// Debezium Server's default `null.key`.
const NULL_KEY: &str = "default";
/// The Java client's default `serviceUrl`.
const DEFAULT_URL: &str = "pulsar://localhost:6650";
/// The Java client's defaults: `batchingMaxMessages`, `batchingMaxBytes`.
const BATCH_MESSAGES: u32 = 1000;
const BATCH_BYTES: usize = 128 * 1024;

/// `[sink.pulsar]`: Apache Pulsar (`debezium.sink.pulsar.*`).
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PulsarConfig {
    /// `pulsar://host:6650` or `pulsar+ssl://host:6651`
    /// (`client.serviceUrl`; default `pulsar://localhost:6650`).
    #[serde(default)]
    pub(crate) service_url: Option<String>,
    /// The topics' tenant (`tenant`, default `public`).
    #[serde(default)]
    pub(crate) tenant: Option<String>,
    /// The topics' namespace (`namespace`, default `default`).
    #[serde(default)]
    pub(crate) namespace: Option<String>,
    /// The key of a record with a null key (`null.key`, default `default`).
    #[serde(default)]
    pub(crate) null_key: Option<String>,
    /// A JWT (`client.authParams` of `AuthenticationToken`, `token:...`).
    #[serde(default)]
    pub(crate) token: Option<Secret>,
    /// A file holding the JWT (`file:///...`), read at each connect.
    #[serde(default)]
    pub(crate) token_file: Option<PathBuf>,
    /// PEM certificates to trust (`client.tlsTrustCertsFilePath`).
    #[serde(default)]
    pub(crate) tls_ca_file: Option<PathBuf>,
    /// Accept any server certificate (`client.tlsAllowInsecureConnection`).
    #[serde(default)]
    pub(crate) tls_allow_insecure: Option<bool>,
    /// Check the server certificate's host name
    /// (`client.enableTlsHostnameVerification`, default false as in Java).
    #[serde(default)]
    pub(crate) tls_hostname_verification: Option<bool>,
    /// The producers' name prefix (`producer.producerName`); unset: the
    /// broker names them.
    #[serde(default)]
    pub(crate) producer_name: Option<String>,
    /// `none`, `lz4`, `zlib`, `zstd` or `snappy`
    /// (`producer.compressionType`).
    #[serde(default)]
    pub(crate) compression: Option<String>,
    /// Messages go in batches (`producer.batchingEnabled`, default true);
    /// off with `batcher = "key_based"` too.
    #[serde(default)]
    pub(crate) batching: Option<bool>,
    /// Most messages in one batch (`producer.batchingMaxMessages`, 1000).
    #[serde(default)]
    pub(crate) batch_max_messages: Option<u32>,
    /// `default` or `key_based` (`producer.batcherBuilder`): a
    /// `Key_Shared` subscription needs one key per batch; walrelay sends
    /// each message alone then.
    #[serde(default)]
    pub(crate) batcher: Option<String>,
    /// `java_string_hash` (default) or `murmur3_32_hash`
    /// (`producer.hashingScheme`): the partition of a key.
    #[serde(default)]
    pub(crate) hashing_scheme: Option<String>,
    /// `string` (Pulsar's STRING schema, as Debezium Server declares for
    /// text values) or `bytes` (no schema; default).
    #[serde(default)]
    pub(crate) schema: Option<String>,
    /// Largest message (payload, key and properties), bytes (default the
    /// broker's 5 MiB).
    #[serde(default)]
    pub(crate) max_message_bytes: Option<usize>,
    /// How long a connection or lookup may take, ms
    /// (`client.operationTimeoutMs`, default 30000).
    #[serde(default)]
    pub(crate) operation_timeout_ms: Option<u64>,
    /// Set by the pipeline: the dead-letter topic.
    #[serde(skip)]
    pub(crate) dead_letter_topic: Option<String>,
}

impl fmt::Debug for PulsarConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PulsarConfig")
            .field("service_url", &self.service_url)
            .field("tenant", &self.tenant)
            .field("namespace", &self.namespace)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("token_file", &self.token_file)
            .field("tls_ca_file", &self.tls_ca_file)
            .field("producer_name", &self.producer_name)
            .field("compression", &self.compression)
            .field("batching", &self.batching)
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

/// How a key picks a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hashing {
    JavaString,
    Murmur3,
}

impl PulsarConfig {
    /// Checks the section; the error names the key.
    pub(crate) fn validate(&self) -> Result<(), SettingError> {
        let url = self.url();
        if !url.starts_with("pulsar://") && !url.starts_with("pulsar+ssl://") {
            return Err(SettingError::invalid(
                "sink.pulsar.service_url",
                format!("{url:?}: must be pulsar://host:port or pulsar+ssl://host:port (walrelay speaks the binary protocol)"),
            ));
        }
        for (key, value) in [
            ("sink.pulsar.tenant", &self.tenant),
            ("sink.pulsar.namespace", &self.namespace),
        ] {
            if let Some(v) = value {
                if v.is_empty() || v.contains('/') {
                    return Err(SettingError::invalid(
                        key,
                        format!("{v:?}: one path segment"),
                    ));
                }
            }
        }
        if self.token.is_some() && self.token_file.is_some() {
            return Err(SettingError::invalid(
                "sink.pulsar.token_file",
                "sink.pulsar.token is set too: give the token one way",
            ));
        }
        self.compression()?;
        self.hashing()?;
        self.key_based()?;
        self.string_schema()?;
        if let Some(n) = self.batch_max_messages {
            if n == 0 {
                return Err(SettingError::invalid(
                    "sink.pulsar.batch_max_messages",
                    "must be above 0",
                ));
            }
        }
        if self.max_message_bytes == Some(0) {
            return Err(SettingError::invalid(
                "sink.pulsar.max_message_bytes",
                "must be above 0",
            ));
        }
        if self.operation_timeout_ms == Some(0) {
            return Err(SettingError::invalid(
                "sink.pulsar.operation_timeout_ms",
                "must be above 0",
            ));
        }
        Ok(())
    }

    /// The service URL.
    pub(crate) fn url(&self) -> &str {
        self.service_url.as_deref().unwrap_or(DEFAULT_URL)
    }

    fn compression(&self) -> Result<pulsar::compression::Compression, SettingError> {
        use pulsar::compression::{
            Compression, CompressionLz4, CompressionSnappy, CompressionZlib, CompressionZstd,
        };
        let name = self.compression.as_deref().unwrap_or("none");
        Ok(match name.to_ascii_lowercase().as_str() {
            "none" => Compression::None,
            "lz4" => Compression::Lz4(CompressionLz4::default()),
            "zlib" => Compression::Zlib(CompressionZlib::default()),
            "zstd" => Compression::Zstd(CompressionZstd::default()),
            "snappy" => Compression::Snappy(CompressionSnappy::default()),
            _ => {
                return Err(SettingError::invalid(
                    "sink.pulsar.compression",
                    format!("{name:?}: one of none, lz4, zlib, zstd, snappy"),
                ))
            }
        })
    }

    fn hashing(&self) -> Result<Hashing, SettingError> {
        match self
            .hashing_scheme
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            None | Some("java_string_hash" | "javastringhash") => Ok(Hashing::JavaString),
            Some("murmur3_32_hash" | "murmur3_32hash") => Ok(Hashing::Murmur3),
            Some(other) => Err(SettingError::invalid(
                "sink.pulsar.hashing_scheme",
                format!("{other:?}: java_string_hash or murmur3_32_hash"),
            )),
        }
    }

    fn key_based(&self) -> Result<bool, SettingError> {
        match self
            .batcher
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            None | Some("default") => Ok(false),
            Some("key_based") => Ok(true),
            Some(other) => Err(SettingError::invalid(
                "sink.pulsar.batcher",
                format!("{other:?}: default or key_based"),
            )),
        }
    }

    fn string_schema(&self) -> Result<bool, SettingError> {
        match self.schema.as_deref() {
            None | Some("bytes") => Ok(false),
            Some("string") => Ok(true),
            Some(other) => Err(SettingError::invalid(
                "sink.pulsar.schema",
                format!("{other:?}: string or bytes"),
            )),
        }
    }

    /// The largest message, bytes.
    pub(crate) fn max_bytes(&self) -> usize {
        self.max_message_bytes.unwrap_or(MAX_MESSAGE_BYTES)
    }

    /// The full name of `topic`.
    pub(crate) fn topic(&self, topic: &str) -> String {
        format!(
            "persistent://{}/{}/{topic}",
            self.tenant.as_deref().unwrap_or("public"),
            self.namespace.as_deref().unwrap_or("default")
        )
    }

    /// The token, if any (the file read now).
    fn token(&self) -> Result<Option<String>, String> {
        if let Some(t) = &self.token {
            return Ok(Some(t.expose().to_owned()));
        }
        match &self.token_file {
            None => Ok(None),
            Some(path) => std::fs::read_to_string(path)
                .map(|t| Some(t.trim().to_owned()))
                .map_err(|e| format!("sink.pulsar.token_file {}: {e}", path.display())),
        }
    }

    /// The producer options every topic's producer gets.
    fn producer_options(&self) -> Result<ProducerOptions, String> {
        let batching =
            self.batching.unwrap_or(true) && !self.key_based().map_err(|e| e.to_string())?;
        let hashing = self.hashing().map_err(|e| e.to_string())?;
        let schema = self
            .string_schema()
            .map_err(|e| e.to_string())?
            .then(|| Schema {
                name: String::new(),
                schema_data: Vec::new(),
                r#type: schema::Type::String as i32,
                properties: Vec::new(),
            });
        Ok(ProducerOptions {
            schema,
            batch_size: batching.then(|| self.batch_max_messages.unwrap_or(BATCH_MESSAGES)),
            batch_byte_size: batching.then_some(BATCH_BYTES),
            compression: Some(self.compression().map_err(|e| e.to_string())?),
            routing_policy: Some(RoutingPolicy::Custom(Arc::new(KeyHash(hashing)))),
            ..ProducerOptions::default()
        })
    }
}

/// The Java client's default routing of a keyed message on a partitioned
/// topic (`RoundRobinPartition` mode): the key's hash, made non-negative,
/// modulo the partition count. `JavaStringHash` is `String.hashCode()`
/// over UTF-16 code units; `Murmur3_32Hash` is murmur3 (seed 0) over the
/// UTF-8 bytes. A message without a key (walrelay sends none) goes to 0.
struct KeyHash(Hashing);

impl KeyHash {
    fn hash(&self, key: &str) -> u32 {
        let h = match self.0 {
            Hashing::JavaString => key
                .encode_utf16()
                .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c))),
            Hashing::Murmur3 => murmur3_32(key.as_bytes()) as i32,
        };
        (h & i32::MAX) as u32
    }
}

impl CustomRoutingPolicy for KeyHash {
    fn route(&self, message: &Message, partitions: usize) -> usize {
        match (&message.partition_key, partitions) {
            (_, 0) | (None, _) => 0,
            (Some(key), n) => (self.hash(key) as usize) % n,
        }
    }
}

/// Murmur3 x86 32-bit, seed 0 (Pulsar's `Murmur3_32Hash`): written here
/// because only this one function of the family is needed.
fn murmur3_32(data: &[u8]) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mut h: u32 = 0;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let mut k: u32 = 0;
        for (i, b) in tail.iter().enumerate() {
            k |= u32::from(*b) << (8 * i);
        }
        h ^= k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
    }
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// Why a record is refused for itself.
fn refused(kind: &'static str, too_large: bool, error: String) -> Outcome {
    Outcome::Failed {
        class: FailureClass::Record { kind, too_large },
        code: kind.to_owned(),
        error,
    }
}

/// A connected Pulsar publisher: one client, a producer per topic.
pub(crate) struct PulsarSink {
    client: Client<TokioExecutor>,
    producers: HashMap<Arc<str>, Producer<TokioExecutor>>,
    options: ProducerOptions,
    config: PulsarConfig,
}

impl Publisher for PulsarSink {
    const NAME: &'static str = "pulsar";
    /// One producer per topic, in order, a key on one partition (see the
    /// module doc); no deduplication relied on, no transactions.
    const GUARANTEES: Guarantees = Guarantees {
        idempotent: false,
        transactional: false,
        dedup_by_id: false,
        per_key_order: true,
    };
    const ERROR_CLASS: &'static str = "pulsar::Error";
    type Config = PulsarConfig;

    async fn connect(config: &PulsarConfig) -> Result<PulsarSink, String> {
        let options = config.producer_options()?;
        let mut builder = Client::builder(config.url(), TokioExecutor);
        if let Some(token) = config.token()? {
            builder = builder.with_auth(Authentication {
                name: "token".to_owned(),
                data: token.into_bytes(),
            });
        }
        if let Some(ca) = &config.tls_ca_file {
            builder = builder
                .with_certificate_chain_file(ca)
                .map_err(|e| format!("sink.pulsar.tls_ca_file {}: {e}", ca.display()))?;
        }
        builder = builder
            .with_allow_insecure_connection(config.tls_allow_insecure.unwrap_or(false))
            .with_tls_hostname_verification_enabled(
                config.tls_hostname_verification.unwrap_or(false),
            )
            .with_operation_retry_options(pulsar::OperationRetryOptions {
                operation_timeout: Duration::from_millis(
                    config.operation_timeout_ms.unwrap_or(30_000),
                ),
                ..pulsar::OperationRetryOptions::default()
            })
            .with_connection_retry_options(pulsar::ConnectionRetryOptions {
                max_retries: 2,
                ..pulsar::ConnectionRetryOptions::default()
            });
        let client = builder
            .build()
            .await
            .map_err(|e| format!("Pulsar at {}: {e}", config.url()))?;
        Ok(PulsarSink {
            client,
            producers: HashMap::new(),
            options,
            config: config.clone(),
        })
    }

    async fn publish(&mut self, batch: &[Outgoing]) -> Vec<Outcome> {
        let mut outcomes = Vec::with_capacity(batch.len());
        let mut receipts = Vec::with_capacity(batch.len());
        let mut used: Vec<Arc<str>> = Vec::new();
        for record in batch {
            let message = match self.message(record) {
                Ok(m) => m,
                // Nothing after a refused record is sent in this call: the
                // worker settles it first (it may stop the pipeline).
                Err(refusal) if receipts.is_empty() => return vec![refusal],
                Err(_) => break,
            };
            let producer = match self.producer(&record.destination).await {
                Ok(p) => p,
                Err(outcome) if receipts.is_empty() => return vec![outcome],
                Err(_) => break,
            };
            match producer.send_non_blocking(message).await {
                Ok(receipt) => receipts.push(receipt),
                Err(e) => {
                    receipts.clear();
                    return vec![Outcome::Retry(format!(
                        "Pulsar send to {}: {e}",
                        &*record.destination
                    ))];
                }
            }
            if !used.contains(&record.destination) {
                used.push(record.destination.clone());
            }
        }
        for topic in &used {
            if let Some(p) = self.producers.get_mut(topic) {
                if let Err(e) = p.send_batch().await {
                    return vec![Outcome::Retry(format!("Pulsar batch to {}: {e}", &**topic))];
                }
            }
        }
        for receipt in receipts {
            match receipt.await {
                Ok(_) => outcomes.push(Outcome::Acked),
                Err(e) => {
                    outcomes.push(Outcome::Retry(format!("Pulsar receipt: {e}")));
                    break;
                }
            }
        }
        outcomes
    }
}

impl PulsarSink {
    /// The message of `record`, or why it is refused.
    fn message(&self, record: &Outgoing) -> Result<Message, Outcome> {
        let dead_letter = self.config.dead_letter_topic.as_deref() == Some(&*record.destination);
        let key = match &record.key {
            None => self
                .config
                .null_key
                .as_deref()
                .unwrap_or(NULL_KEY)
                .to_owned(),
            Some(k) => match std::str::from_utf8(k) {
                Ok(t) => t.to_owned(),
                Err(_) if dead_letter => self
                    .config
                    .null_key
                    .as_deref()
                    .unwrap_or(NULL_KEY)
                    .to_owned(),
                Err(_) => {
                    return Err(refused(
                        "invalid_key",
                        false,
                        "the record key is not UTF-8 text; a Pulsar message key is".to_owned(),
                    ))
                }
            },
        };
        let mut properties = HashMap::new();
        let mut size = key.len();
        for (name, value) in debezium_header_order(&record.headers) {
            let Some(value) = value else { continue };
            let text = std::str::from_utf8(value).map_err(|_| {
                refused(
                    "invalid_property",
                    false,
                    format!("header {name:?} is not UTF-8 text; a Pulsar property is"),
                )
            })?;
            size += name.len() + text.len();
            properties.insert(name.to_owned(), text.to_owned());
        }
        let payload = record.value.as_deref().unwrap_or_default().to_vec();
        size += payload.len();
        // A dead letter is bounded by the broker's default alone: a record
        // refused for its size can still be dead-lettered.
        let max = if dead_letter {
            MAX_MESSAGE_BYTES
        } else {
            self.config.max_bytes()
        };
        if size > max {
            return Err(refused(
                "message_too_large",
                true,
                format!(
                    "{size} bytes of payload, key and properties, above max_message_bytes {max}"
                ),
            ));
        }
        Ok(Message {
            payload,
            properties,
            partition_key: Some(key),
            ..Message::default()
        })
    }

    /// The producer of `topic`, created at first use.
    async fn producer(
        &mut self,
        topic: &Arc<str>,
    ) -> Result<&mut Producer<TokioExecutor>, Outcome> {
        if !self.producers.contains_key(topic) {
            let full = self.config.topic(topic);
            let mut builder = self
                .client
                .producer()
                .with_topic(&full)
                .with_options(self.options.clone());
            if let Some(name) = &self.config.producer_name {
                builder = builder.with_name(format!("{name}-{topic}"));
            }
            let producer = builder
                .build()
                .await
                .map_err(|e| producer_error(&full, &e))?;
            self.producers.insert(topic.clone(), producer);
        }
        Ok(self.producers.get_mut(topic).expect("inserted"))
    }
}

/// Why a producer could not be created: a topic that cannot exist is the
/// record's; anything else passes (the broker, authorisation) and is
/// retried.
fn producer_error(topic: &str, e: &pulsar::Error) -> Outcome {
    use pulsar::message::proto::ServerError;
    let server = match e {
        pulsar::Error::Connection(pulsar::error::ConnectionError::PulsarError(s, _))
        | pulsar::Error::Producer(pulsar::error::ProducerError::Connection(
            pulsar::error::ConnectionError::PulsarError(s, _),
        ))
        | pulsar::Error::ServiceDiscovery(pulsar::error::ServiceDiscoveryError::Query(s, _)) => *s,
        _ => None,
    };
    match server {
        Some(ServerError::TopicNotFound) => refused(
            "unknown_topic",
            false,
            format!("{topic}: topic not found (auto-creation off?): {e}"),
        ),
        Some(ServerError::InvalidTopicName) => {
            refused("invalid_topic", false, format!("{topic}: {e}"))
        }
        _ => Outcome::Retry(format!("Pulsar producer for {topic}: {e}")),
    }
}

/// What `walrelay check` reads: whether the service URL answers a lookup
/// of each topic (never producing), or why not.
pub(crate) async fn probe(
    config: &PulsarConfig,
    topics: &[String],
) -> Result<(String, Vec<(String, Result<String, String>)>), String> {
    let sink = <PulsarSink as Publisher>::connect(config).await?;
    let mut found = Vec::with_capacity(topics.len());
    for name in topics {
        let full = config.topic(name);
        let answer = match sink.client.lookup_partitioned_topic_number(&full).await {
            Ok(0) => Ok("found (not partitioned)".to_owned()),
            Ok(n) => Ok(format!("found with {n} partitions")),
            Err(e) => Err(e.to_string()),
        };
        found.push((name.clone(), answer));
    }
    Ok((config.url().to_owned(), found))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_string_hash_matches_java() {
        // "hello".hashCode() == 99162322; "" == 0; a multi-unit string.
        let h = KeyHash(Hashing::JavaString);
        assert_eq!(h.hash("hello"), 99_162_322);
        assert_eq!(h.hash(""), 0);
        // "order-42".hashCode() is negative in Java: -1121497398 → & MAX.
        let java = "order-42"
            .encode_utf16()
            .fold(0i32, |a, c| a.wrapping_mul(31).wrapping_add(i32::from(c)));
        assert_eq!(h.hash("order-42"), (java & i32::MAX) as u32);
    }

    #[test]
    fn murmur3_matches_the_reference_vectors() {
        assert_eq!(murmur3_32(b""), 0);
        assert_eq!(murmur3_32(b"hello"), 0x248b_fa47);
        assert_eq!(
            murmur3_32(b"The quick brown fox jumps over the lazy dog"),
            0x2e4f_f723
        );
    }

    #[test]
    fn validate_names_the_key() {
        let ok = PulsarConfig::default();
        assert!(ok.validate().is_ok());
        let http = PulsarConfig {
            service_url: Some("http://localhost:8080".into()),
            ..PulsarConfig::default()
        };
        assert!(http
            .validate()
            .unwrap_err()
            .to_string()
            .contains("sink.pulsar.service_url"));
        let comp = PulsarConfig {
            compression: Some("brotli".into()),
            ..PulsarConfig::default()
        };
        assert!(comp
            .validate()
            .unwrap_err()
            .to_string()
            .contains("sink.pulsar.compression"));
        let tok = PulsarConfig {
            token: Some(Secret::new("t")),
            token_file: Some("/t".into()),
            ..PulsarConfig::default()
        };
        assert!(tok
            .validate()
            .unwrap_err()
            .to_string()
            .contains("sink.pulsar.token_file"));
    }

    #[test]
    fn the_token_never_shows_in_debug() {
        let c = PulsarConfig {
            token: Some(Secret::new("eyJhbGciOi.secret")),
            ..PulsarConfig::default()
        };
        assert!(!format!("{c:?}").contains("secret"));
    }

    #[test]
    fn topics_are_in_tenant_and_namespace() {
        let c = PulsarConfig {
            tenant: Some("shop".into()),
            ..PulsarConfig::default()
        };
        assert_eq!(
            c.topic("outbox.event.order"),
            "persistent://shop/default/outbox.event.order"
        );
    }
}
