//! The Kafka Connect form, translated into walrelay's [`Config`]: a Connect
//! standalone worker `.properties` file plus a Debezium PostgreSQL connector
//! file (`.properties` or JSON).
//!
//! Owns the entry points ([`load_connect`], [`from_connect`]), reading the
//! two files, the worker's own keys, and the machinery every translation
//! shares: `Keys` (a flat map consumed key by key, named as the file spells
//! it), `Notes` (the keys ignored on the way) and `Draft` (what becomes the
//! `Config`). The decision for each key lives with its concern: `connector`,
//! `producer`, `converters`, `transforms` (with `event_router`), `errors`,
//! `keystores` and `providers`; Debezium Server's form
//! ([`super::debezium_server`]) reuses them. Every key is translated,
//! ignored with a warning (it does not change what reaches Kafka) or refused
//! (it would, and walrelay does not implement it). Nothing here logs a
//! value, puts a possibly secret value in an error, or connects to anything.

pub(super) mod aws_sinks;
pub(super) mod connector;
pub(super) mod converters;
mod errors;
pub(crate) mod event_router;
pub(super) mod eventhubs;
pub(super) mod exactly_once;
#[cfg(test)]
mod keys_doc;
mod keystores;
mod predicates;
pub(super) mod producer;
mod providers;
pub(super) mod pubsub;
pub(super) mod pulsar;
pub(super) mod server_sinks;
pub(super) mod transforms;

/// The keys `pairs` under `prefix`, as a sink's translation takes them
/// (the unit tests of the sink translations).
#[cfg(test)]
pub(super) fn test_keys(pairs: &[(&str, &str)], prefix: &str) -> Keys {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Keys::new(map, prefix)
}

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::connector_json::{parse_connector_json, ConnectorJson};
use crate::config::{Config, ConfigError, RuntimeConfig};
use crate::connect::config::ConvertersConfig;
use crate::heartbeat::HeartbeatConfig;
use crate::postgres::config::{PostgresConfig, PublicationMode, ReplicationConfig, SnapshotMode};
use crate::properties::{decode_text, parse_properties};
use crate::router::{DebeziumConfig, RouterConfig};
use crate::secret::Secret;
use crate::sink::config::{ErrorsConfig, KafkaConfig, TransactionsConfig};
use crate::txn::config::{OutboxConfig, PrefixRule};
use connector::{classify_rest, translate_connector, DEBEZIUM_PUBLICATION, DEBEZIUM_SLOT};
use converters::translate_converters;
use producer::translate_producer;
use providers::resolve_providers;
use transforms::translate_transforms;

/// Kafka Connect's default `bootstrap.servers`.
const CONNECT_BOOTSTRAP: &str = "localhost:9092";

/// Why an offset key is warned about and ignored, in a worker or a
/// connector.
const OFFSETS_IN_SLOT: &str = "ignored: walrelay keeps its position in the replication slot";

/// A key that was read and ignored; logged once, by name only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredKey {
    /// The key as the file spells it.
    pub(crate) key: String,
    /// Why it is ignored (never contains the value).
    pub(crate) reason: String,
}

/// A translated configuration and what was ignored on the way.
#[derive(Debug, Clone)]
pub struct Translation {
    /// The configuration, validated.
    pub config: Config,
    /// Ignored keys, each once, in key order.
    pub ignored: Vec<IgnoredKey>,
}

impl Translation {
    /// Logs one warning per ignored key (the key's name, never its value).
    pub(crate) fn warn(&self) {
        for i in &self.ignored {
            tracing::warn!(key = %i.key, "{}", i.reason);
        }
    }

    /// Whether `key` was ignored.
    pub fn ignored(&self, key: &str) -> bool {
        self.ignored.iter().any(|i| i.key == key)
    }
}

/// Ignored keys collected during a translation, deduplicated by name.
#[derive(Debug, Default)]
pub(super) struct Notes {
    ignored: BTreeMap<String, String>,
}

impl Notes {
    pub(super) fn ignore(&mut self, key: impl Into<String>, reason: impl Into<String>) {
        self.ignored
            .entry(key.into())
            .or_insert_with(|| reason.into());
    }

    pub(super) fn into_vec(self) -> Vec<IgnoredKey> {
        self.ignored
            .into_iter()
            .map(|(key, reason)| IgnoredKey { key, reason })
            .collect()
    }
}

/// A flat key/value map being consumed; `prefix` is how its keys are
/// spelled in the file (`debezium.source.` in Debezium Server), for messages.
#[derive(Debug)]
pub(super) struct Keys {
    map: BTreeMap<String, String>,
    prefix: String,
}

impl Keys {
    pub(super) fn new(map: BTreeMap<String, String>, prefix: &str) -> Self {
        Keys {
            map,
            prefix: prefix.to_owned(),
        }
    }

    /// The key as the file spells it.
    pub(super) fn name(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// Removes a key; its value trimmed (Kafka's `ConfigDef` trims).
    pub(super) fn take(&mut self, key: &str) -> Option<String> {
        self.map.remove(key).map(|v| v.trim().to_owned())
    }

    /// Removes a key without trimming (passwords).
    fn take_raw(&mut self, key: &str) -> Option<String> {
        self.map.remove(key)
    }

    fn take_required(&mut self, key: &str, reason: &str) -> Result<String, ConfigError> {
        match self.take(key) {
            Some(v) if !v.is_empty() => Ok(v),
            _ => Err(ConfigError::Missing {
                key: self.name(key),
                reason: reason.to_owned(),
            }),
        }
    }

    fn take_bool(&mut self, key: &str, default: bool) -> Result<bool, ConfigError> {
        match self.take(key) {
            None => Ok(default),
            Some(v) => parse_bool(&v).ok_or_else(|| ConfigError::Invalid {
                key: self.name(key),
                reason: format!("{v:?} is not true or false"),
            }),
        }
    }

    fn take_u64(&mut self, key: &str) -> Result<Option<u64>, ConfigError> {
        match self.take(key) {
            None => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| ConfigError::Invalid {
                key: self.name(key),
                reason: format!("{v:?} is not a non-negative integer"),
            }),
        }
    }

    /// Removes every key starting with `prefix`, returning them without it.
    pub(super) fn take_prefixed(&mut self, prefix: &str) -> BTreeMap<String, String> {
        let keys: Vec<String> = self
            .map
            .range(prefix.to_owned()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, _)| k.clone())
            .collect();
        keys.into_iter()
            .filter_map(|k| {
                let v = self.map.remove(&k)?;
                Some((k[prefix.len()..].to_owned(), v))
            })
            .collect()
    }

    fn unsupported(&self, key: &str, reason: impl Into<String>) -> ConfigError {
        ConfigError::Unsupported {
            key: self.name(key),
            reason: reason.into(),
        }
    }

    fn invalid(&self, key: &str, reason: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            key: self.name(key),
            reason: reason.into(),
        }
    }

    pub(super) fn drain(&mut self) -> BTreeMap<String, String> {
        std::mem::take(&mut self.map)
    }
}

pub(super) fn parse_bool(v: &str) -> Option<bool> {
    // Kafka's ConfigDef accepts true/false in any case.
    if v.eq_ignore_ascii_case("true") {
        Some(true)
    } else if v.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// Everything a translation builds before it becomes a [`Config`].
#[derive(Debug)]
pub(super) struct Draft {
    pub(super) postgres: Option<PostgresConfig>,
    pub(super) replication: ReplicationConfig,
    pub(super) outbox: OutboxConfig,
    pub(super) router: RouterConfig,
    pub(super) converters: ConvertersConfig,
    pub(super) debezium: DebeziumConfig,
    pub(super) heartbeat: HeartbeatConfig,
    pub(super) kafka: KafkaDraft,
    pub(super) errors: ErrorsConfig,
    /// The connector's `name` (Kafka Connect requires one).
    pub(super) connector_name: Option<String>,
    /// Exactly-once mode, as `exactly_once` decided it.
    pub(super) exactly_once: bool,
    /// `[kafka.transactions]`, as `exactly_once` decided it.
    pub(super) transactions: TransactionsConfig,
    /// `message.prefix.include.list` / `.exclude.list`, compiled.
    pub(super) message_rule: PrefixRule,
    /// Whether `table.include.list` names the outbox table (without it the
    /// connector captures logical decoding messages only).
    pub(super) captures_table: bool,
    /// `tombstones.on.delete` where the file sets it (Debezium's default
    /// is true).
    pub(super) tombstones_on_delete: Option<bool>,
    /// The broker (Debezium Server's `debezium.sink.type`; Kafka in the
    /// Kafka Connect forms).
    pub(super) sink: crate::sink::config::SinkConfig,
    /// The transforms after the EventRouter, and the predicates.
    pub(super) transforms: Vec<crate::connect::transforms::config::TransformSpec>,
    pub(super) predicates: Vec<crate::connect::transforms::config::PredicateSpec>,
    /// The CloudEvents value converter's options.
    pub(super) cloudevents: BTreeMap<String, String>,
}

/// The Kafka part of a [`Draft`].
#[derive(Debug, Default)]
pub(super) struct KafkaDraft {
    pub(super) bootstrap: Option<String>,
    pub(super) producer: BTreeMap<String, String>,
    pub(super) secrets: BTreeMap<String, Secret>,
    /// The producer's `transactional.id`, as the file spells the key (never
    /// the value): every form refuses it (`exactly_once`).
    pub(super) transactional_id_key: Option<String>,
    /// The producer's `transaction.timeout.ms`: the key as the file spells
    /// it and the value; the last one read wins (a connector's override
    /// after the worker's).
    pub(super) transaction_timeout: Option<(String, String)>,
}

impl Draft {
    /// Debezium's defaults where they differ from walrelay's native ones.
    pub(super) fn new(converters: ConvertersConfig) -> Self {
        Draft {
            postgres: None,
            replication: ReplicationConfig {
                slot: DEBEZIUM_SLOT.into(),
                publication: DEBEZIUM_PUBLICATION.into(),
                publication_mode: PublicationMode::AllTables,
                snapshot_mode: SnapshotMode::Initial,
                ..ReplicationConfig::default()
            },
            outbox: OutboxConfig::default(),
            router: RouterConfig::default(),
            converters,
            debezium: DebeziumConfig {
                extended_headers: true,
                ..DebeziumConfig::default()
            },
            heartbeat: HeartbeatConfig::default(),
            kafka: KafkaDraft::default(),
            errors: ErrorsConfig::default(),
            connector_name: None,
            exactly_once: false,
            transactions: TransactionsConfig::default(),
            message_rule: PrefixRule::All,
            captures_table: true,
            tombstones_on_delete: None,
            sink: crate::sink::config::SinkConfig::default(),
            transforms: Vec::new(),
            predicates: Vec::new(),
            cloudevents: BTreeMap::new(),
        }
    }

    /// The finished, validated configuration.
    pub(super) fn finish(self, bootstrap_key: &str) -> Result<Config, ConfigError> {
        let postgres = self.postgres.ok_or_else(|| ConfigError::Missing {
            key: "database.hostname".into(),
            reason: "the connector configuration is missing".into(),
        })?;
        let bootstrap_servers = match self.sink.kind {
            crate::sink::config::SinkKind::Kafka => {
                self.kafka.bootstrap.ok_or_else(|| ConfigError::Missing {
                    key: bootstrap_key.into(),
                    reason: "walrelay needs the Kafka brokers".into(),
                })?
            }
            _ => self.kafka.bootstrap.unwrap_or_default(),
        };
        let config = Config {
            name: self
                .connector_name
                .clone()
                .unwrap_or_else(|| super::DEFAULT_PIPELINE_NAME.into()),
            postgres,
            // Debezium's forms read the WAL; polling is native TOML only.
            source: Default::default(),
            poll: Default::default(),
            replication: self.replication,
            outbox: self.outbox,
            router: self.router,
            converters: self.converters,
            debezium: self.debezium,
            heartbeat: self.heartbeat,
            sink: self.sink,
            transforms: self.transforms,
            predicates: self.predicates,
            cloudevents: self
                .cloudevents
                .into_iter()
                .map(|(k, v)| (k, crate::connect::transforms::config::OptionValue::Text(v)))
                .collect(),
            kafka: KafkaConfig {
                bootstrap_servers,
                producer: self.kafka.producer,
                secrets: self.kafka.secrets,
                secrets_env: BTreeMap::new(),
                secrets_file: BTreeMap::new(),
                exactly_once: self.exactly_once,
                transactions: self.transactions,
            },
            runtime: RuntimeConfig::default(),
            metrics: Default::default(),
            lag: Default::default(),
            errors: self.errors,
        };
        config.validate()?;
        Ok(config)
    }
}

/// The worker's `connector.client.config.override.policy`: which
/// `producer.override.*` keys Kafka Connect lets a connector set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OverridePolicy {
    /// `All`, Kafka Connect's default since 3.0.
    All,
    /// `None`: no override at all.
    None,
    /// `Principal`: the SASL JAAS config, mechanism and security protocol.
    Principal,
}

impl OverridePolicy {
    fn name(self) -> &'static str {
        match self {
            OverridePolicy::All => "All",
            OverridePolicy::None => "None",
            OverridePolicy::Principal => "Principal",
        }
    }

    fn allows(self, key: &str) -> bool {
        match self {
            OverridePolicy::All => true,
            OverridePolicy::None => false,
            OverridePolicy::Principal => {
                matches!(
                    key,
                    "sasl.jaas.config" | "sasl.mechanism" | "security.protocol"
                )
            }
        }
    }
}

/// Reads `connector.client.config.override.policy` (an alias or the class
/// name of one of Kafka's three policies); another class is refused.
fn override_policy(w: &mut Keys) -> Result<OverridePolicy, ConfigError> {
    const KEY: &str = "connector.client.config.override.policy";
    let Some(value) = w.take(KEY) else {
        return Ok(OverridePolicy::All);
    };
    let alias = value
        .trim()
        .strip_prefix("org.apache.kafka.connect.connector.policy.")
        .map(|c| {
            c.strip_suffix("ConnectorClientConfigOverridePolicy")
                .unwrap_or(c)
        })
        .unwrap_or(value.trim());
    Ok(match alias {
        "All" => OverridePolicy::All,
        "None" => OverridePolicy::None,
        "Principal" => OverridePolicy::Principal,
        _ => {
            return Err(w.unsupported(
                KEY,
                "walrelay implements Kafka Connect's All, None and Principal policies",
            ))
        }
    })
}

/// Worker keys with a specific reason to be ignored.
#[rustfmt::skip]
const IGNORED_WORKER_PREFIXES: &[(&str, &str)] = &[
    ("offset.", OFFSETS_IN_SLOT),
    ("plugin.", "ignored: walrelay has no plugins"),
    ("config.storage.", "ignored: walrelay has no config topic"),
    ("status.storage.", "ignored: walrelay has no status topic"),
    ("rest.", "ignored: connect-standalone serves no REST API (connect-distributed does)"),
    ("listeners", "ignored: connect-standalone serves no REST API (connect-distributed does)"),
    ("admin.", "ignored: walrelay uses no admin client"),
    ("consumer.", "ignored: walrelay uses no consumer"),
    ("internal.", "ignored"),
    ("metric", "ignored: walrelay exposes its own metrics"),
    ("security.protocol", "ignored: the worker's own clients; walrelay reads producer.*"),
    ("sasl.", "ignored: the worker's own clients; walrelay reads producer.*"),
    ("ssl.", "ignored: the worker's own clients; walrelay reads producer.*"),
    ("config.providers", "ignored: not a config provider setting walrelay uses"),
];

/// Reads a Kafka Connect standalone worker file and one connector file
/// (`.json`, else `.properties`) and translates them.
pub fn load_connect(worker: &Path, connector: &Path) -> Result<Translation, ConfigError> {
    let in_file = |path: &Path| {
        let path = path.to_owned();
        move |e: ConfigError| ConfigError::InFile {
            path,
            source: Box::new(e),
        }
    };
    let worker_map = read_properties(worker)?;
    let bytes = std::fs::read(connector).map_err(|source| ConfigError::Read {
        path: connector.to_owned(),
        source,
    })?;
    let text = decode_text(&bytes);
    let connector_map = if connector.extension().is_some_and(|e| e == "json") {
        let json = parse_connector_json(&text).map_err(|source| ConfigError::Syntax {
            path: connector.to_owned(),
            source,
        })?;
        with_rest_name(json).map_err(in_file(connector))?
    } else {
        parse_properties(&text).map_err(|source| ConfigError::Syntax {
            path: connector.to_owned(),
            source: source.into(),
        })?
    };
    let named = connector_map
        .get("name")
        .is_some_and(|n| !n.trim().is_empty());
    let mut translation =
        from_connect(worker_map, connector_map, worker, connector).map_err(|e| match e {
            // Errors already say which file.
            e @ ConfigError::InFile { .. } => e,
            other => in_file(connector)(other),
        })?;
    if !named {
        // Kafka Connect requires a name; walrelay takes the file's stem,
        // so that several unnamed connectors still tell their pipelines
        // apart.
        if let Some(stem) = connector.file_stem() {
            translation.config.name = stem.to_string_lossy().into_owned();
        }
    }
    Ok(translation)
}

/// The connector map of a JSON file, with the REST form's top-level `name`
/// as the connector's `name` (Kafka Connect's REST API refuses a config
/// whose `name` differs, and so does walrelay).
fn with_rest_name(json: ConnectorJson) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut config = json.config;
    if let Some(name) = json.name {
        match config.get("name") {
            Some(inner) if inner.trim() != name.trim() => {
                return Err(ConfigError::Invalid {
                    key: "name".into(),
                    reason: "the config's name differs from the top-level name (Kafka Connect's \
                             REST API refuses it too)"
                        .into(),
                })
            }
            Some(_) => {}
            None => {
                config.insert("name".into(), name);
            }
        }
    }
    Ok(config)
}

/// librdkafka properties, and the secrets among them.
pub(crate) type ClientProperties = (BTreeMap<String, String>, BTreeMap<String, Secret>);

/// The worker's own Kafka clients (a distributed worker's storage topics
/// and group membership): its top-level `bootstrap.servers`,
/// `security.protocol`, `ssl.*` and `sasl.*`, translated as a producer's
/// keys are, into librdkafka properties and the secrets among them.
pub(crate) fn worker_client_properties(
    worker: &BTreeMap<String, String>,
) -> Result<ClientProperties, ConfigError> {
    let keys: BTreeMap<String, String> = worker
        .iter()
        .filter(|(k, _)| {
            k.as_str() == "security.protocol" || k.starts_with("ssl.") || k.starts_with("sasl.")
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut draft = Draft::new(ConvertersConfig::default());
    let mut notes = Notes::default();
    translate_producer(keys, "", &mut draft.kafka, &mut notes)?;
    Ok((draft.kafka.producer, draft.kafka.secrets))
}

pub(crate) fn read_properties(path: &Path) -> Result<BTreeMap<String, String>, ConfigError> {
    let bytes = std::fs::read(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse_properties(&decode_text(&bytes)).map_err(|source| ConfigError::Syntax {
        path: path.to_owned(),
        source: source.into(),
    })
}

/// Translates parsed worker and connector maps; the paths are only used in
/// messages.
pub fn from_connect(
    worker: BTreeMap<String, String>,
    connector: BTreeMap<String, String>,
    worker_path: &Path,
    connector_path: &Path,
) -> Result<Translation, ConfigError> {
    let (mut worker, mut connector) = (worker, connector);
    let env = |name: &str| std::env::var(name).ok();
    resolve_providers(&mut worker, &mut connector, &env).map_err(|e| ConfigError::InFile {
        path: PathBuf::from(worker_path),
        source: Box::new(e),
    })?;
    let mut notes = Notes::default();
    let worker_err = |e: ConfigError| ConfigError::InFile {
        path: PathBuf::from(worker_path),
        source: Box::new(e),
    };
    let connector_err = |e: ConfigError| ConfigError::InFile {
        path: PathBuf::from(connector_path),
        source: Box::new(e),
    };

    // Worker.
    let mut w = Keys::new(worker, "");
    let mut converters = ConvertersConfig::default();
    let worker_set =
        translate_converters(&mut w, &mut converters, &mut notes, false).map_err(worker_err)?;
    let mut draft = Draft::new(converters);
    draft.kafka.bootstrap = Some(
        w.take("bootstrap.servers")
            .unwrap_or_else(|| CONNECT_BOOTSTRAP.into()),
    );
    let producer = w.take_prefixed("producer.");
    translate_producer(producer, "producer.", &mut draft.kafka, &mut notes).map_err(worker_err)?;
    exactly_once::check_connect_producer(&draft.kafka).map_err(worker_err)?;
    let worker_eos = exactly_once::take_worker(&mut w).map_err(worker_err)?;
    let policy = override_policy(&mut w).map_err(worker_err)?;
    for (key, _) in w.drain() {
        let why = IGNORED_WORKER_PREFIXES
            .iter()
            .find(|(p, _)| key.starts_with(p))
            .map(|(_, why)| *why)
            .unwrap_or("ignored: not a worker setting walrelay uses");
        let why = if why == OFFSETS_IN_SLOT && worker_eos.enabled() {
            exactly_once::OFFSETS_IN_PROGRESS_TOPIC
        } else {
            why
        };
        notes.ignore(key, why);
    }

    // Connector.
    let mut c = Keys::new(connector, "");
    let connector_set = translate_converters(&mut c, &mut draft.converters, &mut notes, true)
        .map_err(connector_err)?;
    // The connector's value converter replaces the worker's, options and all.
    draft.cloudevents = if connector_set.value {
        connector_set.cloudevents.clone()
    } else {
        worker_set.cloudevents.clone()
    }
    .unwrap_or_default();
    for (role, set) in [
        ("key.converter", worker_set.key || connector_set.key),
        ("value.converter", worker_set.value || connector_set.value),
    ] {
        if !set {
            return Err(worker_err(ConfigError::Missing {
                key: role.into(),
                reason: "Kafka Connect's worker requires it (StringConverter, JsonConverter, ...)"
                    .into(),
            }));
        }
    }
    let overrides = c.take_prefixed("producer.override.");
    if let Some(key) = overrides.keys().find(|k| !policy.allows(k)) {
        return Err(connector_err(c.unsupported(
            &format!("producer.override.{key}"),
            format!(
                "the worker's connector.client.config.override.policy={} does not allow it, so Kafka Connect refuses this connector; remove it or change the policy",
                policy.name()
            ),
        )));
    }
    translate_producer(
        overrides,
        "producer.override.",
        &mut draft.kafka,
        &mut notes,
    )
    .map_err(connector_err)?;
    exactly_once::check_connect_producer(&draft.kafka).map_err(connector_err)?;
    translate_connector(&mut c, &mut draft, &mut notes).map_err(connector_err)?;
    exactly_once::translate_connect(worker_eos, &mut c, &mut draft, &mut notes)
        .map_err(connector_err)?;
    translate_transforms(&mut c, &mut draft, &mut notes).map_err(connector_err)?;
    classify_rest(&mut c, &mut notes).map_err(connector_err)?;
    let config = draft.finish("bootstrap.servers")?;
    Ok(Translation {
        config,
        ignored: notes.into_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::connector::{DEFAULT_ONLY_CONNECTOR_KEYS, IGNORED_CONNECTOR_KEYS};
    use super::errors::IGNORED_ERRORS_KEYS;
    use super::producer::{
        PRODUCER_DEFAULT_ONLY, PRODUCER_IGNORED, PRODUCER_RENAMED, PRODUCER_SAME,
    };
    use super::*;
    use crate::postgres::config::SslMode;

    /// A `.properties` file of `tests/data/debezium`, parsed.
    pub(super) fn data_props(name: &str) -> BTreeMap<String, String> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/debezium")
            .join(name);
        parse_properties(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// The worker's `connector.client.config.override.policy` decides
    /// which `producer.override.*` a connector may set, as Kafka Connect
    /// decides when it creates the connector.
    #[test]
    fn override_policy_refuses_what_connect_refuses() {
        let translate = |policy: Option<&str>, override_key: &str| {
            let mut worker = data_props("connect-standalone.properties");
            if let Some(p) = policy {
                worker.insert("connector.client.config.override.policy".into(), p.into());
            }
            let mut connector = data_props("outbox-connector.properties");
            connector.insert(format!("producer.override.{override_key}"), "1000".into());
            from_connect(worker, connector, Path::new("w"), Path::new("c"))
                .map_err(|e| crate::chain::DisplayChain(&e).to_string())
        };
        for policy in [None, Some("All")] {
            translate(policy, "linger.ms").expect("All allows every override");
        }
        for policy in [
            "None",
            "org.apache.kafka.connect.connector.policy.NoneConnectorClientConfigOverridePolicy",
        ] {
            let err = translate(Some(policy), "linger.ms").unwrap_err();
            assert!(err.contains("producer.override.linger.ms"), "{err}");
        }
        let err = translate(Some("Principal"), "linger.ms").unwrap_err();
        assert!(err.contains("producer.override.linger.ms"), "{err}");
        let principal = OverridePolicy::Principal;
        assert!(["sasl.jaas.config", "sasl.mechanism", "security.protocol"]
            .iter()
            .all(|k| principal.allows(k)));
        let err = translate(Some("com.example.Policy"), "linger.ms").unwrap_err();
        assert!(
            err.contains("connector.client.config.override.policy"),
            "{err}"
        );
    }

    #[test]
    fn postgres_tls_and_kafka_sasl_keys() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, "-----BEGIN CERTIFICATE-----\n").unwrap();
        let mut worker = data_props("connect-standalone.properties");
        worker.insert("producer.security.protocol".into(), "SASL_SSL".into());
        worker.insert("producer.sasl.mechanism".into(), "SCRAM-SHA-512".into());
        worker.insert(
            "producer.sasl.jaas.config".into(),
            r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="relay" password="kafka-pw-1";"#.into(),
        );
        worker.insert(
            "producer.ssl.truststore.location".into(),
            ca.display().to_string(),
        );
        worker.insert("producer.ssl.truststore.type".into(), "PEM".into());
        let mut connector = data_props("outbox-connector.properties");
        for (k, v) in [
            ("database.sslmode", "verify-full"),
            ("database.sslrootcert", ca.to_str().unwrap()),
            ("database.sslfactory", "org.postgresql.ssl.LibPQFactory"),
        ] {
            connector.insert(k.into(), v.into());
        }
        let t = from_connect(
            worker.clone(),
            connector.clone(),
            Path::new("w"),
            Path::new("c"),
        )
        .unwrap();
        let pg = &t.config.postgres;
        assert_eq!(pg.sslmode, SslMode::VerifyFull);
        assert_eq!(pg.sslrootcert.as_deref(), ca.to_str());
        let k = &t.config.kafka;
        assert_eq!(k.producer["security.protocol"], "sasl_ssl");
        assert_eq!(k.producer["sasl.mechanism"], "SCRAM-SHA-512");
        assert_eq!(k.producer["sasl.username"], "relay");
        assert_eq!(k.producer["ssl.ca.location"], ca.to_str().unwrap());
        assert_eq!(k.secrets["sasl.password"].expose(), "kafka-pw-1");
        let shown = format!("{:?}", t.config);
        assert!(
            !shown.contains("kafka-pw-1") && !shown.contains("pg-s3cret"),
            "{shown}"
        );

        // A JKS truststore: refused, naming the key and the fix.
        let jks = dir.path().join("trust.jks");
        std::fs::write(&jks, [0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2]).unwrap();
        let mut w = worker.clone();
        w.insert(
            "producer.ssl.truststore.location".into(),
            jks.display().to_string(),
        );
        w.remove("producer.ssl.truststore.type");
        let err = from_connect(w, connector.clone(), Path::new("w"), Path::new("c")).unwrap_err();
        let text = crate::chain::DisplayChain(&err).to_string();
        assert!(
            text.contains("ssl.truststore.location")
                && text.contains("JKS")
                && text.contains("keytool -importkeystore"),
            "{text}"
        );

        // An unknown sslmode is refused by name.
        let mut c = connector;
        c.insert("database.sslmode".into(), "verify-sideways".into());
        let err = from_connect(worker, c, Path::new("w"), Path::new("c")).unwrap_err();
        let text = crate::chain::DisplayChain(&err).to_string();
        assert!(text.contains("database.sslmode"), "{text}");
    }

    #[test]
    fn key_lists_do_not_overlap() {
        let mut seen = std::collections::BTreeSet::new();
        for key in IGNORED_CONNECTOR_KEYS
            .iter()
            .chain(IGNORED_ERRORS_KEYS)
            .map(|(k, _)| *k)
            .chain(DEFAULT_ONLY_CONNECTOR_KEYS.iter().map(|(k, _, _)| *k))
        {
            assert!(seen.insert(key), "{key} is listed twice");
        }
        for key in PRODUCER_SAME
            .iter()
            .copied()
            .chain(PRODUCER_RENAMED.iter().map(|(k, _)| *k))
            .chain(PRODUCER_IGNORED.iter().map(|(k, _)| *k))
            .chain(PRODUCER_DEFAULT_ONLY.iter().map(|(k, _, _)| *k))
        {
            assert!(seen.insert(key), "{key} is listed twice");
        }
    }
}
