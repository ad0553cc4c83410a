//! Debezium's configuration forms, translated into walrelay's [`Config`]:
//! a Kafka Connect worker file plus a Debezium PostgreSQL connector file
//! (`.properties` or JSON), and Debezium Server's `application.properties`
//! (see [`load_server`]).
//!
//! Owns the decision for every Debezium and Kafka key: translated, ignored
//! with a warning (it does not change what reaches Kafka), or refused (it
//! would, and walrelay does not implement it). The lists live here, one
//! comment per key. It never logs a value and never puts one in an error
//! when the key may hold a secret; it never connects to anything.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::connector_json::parse_connector_json;
use crate::config::{Config, ConfigError, RuntimeConfig};
use crate::connect::config::{ConverterKind, ConvertersConfig, HeaderConverterKind};
use crate::heartbeat::HeartbeatConfig;
use crate::postgres::config::{
    validate_slot_name, PostgresConfig, PublicationMode, ReplicationConfig, SnapshotMode, SslMode,
    DEFAULT_PG_PORT,
};
use crate::properties::{decode_text, parse_properties};
use crate::router::DebeziumConfig;
use crate::router::RouterConfig;
use crate::secret::Secret;
use crate::setting::SettingError;
use crate::sink::config::{ErrorsConfig, KafkaConfig, Tolerance};
use crate::txn::config::{parse_qualified_name, OpInvalidBehavior, OutboxConfig};

pub use super::server::{from_server_text, load_server};

/// The only connector walrelay replaces.
pub const POSTGRES_CONNECTOR: &str = "io.debezium.connector.postgresql.PostgresConnector";
/// The only transform walrelay implements.
pub const EVENT_ROUTER: &str = "io.debezium.transforms.outbox.EventRouter";
/// Debezium's default `slot.name`.
pub const DEBEZIUM_SLOT: &str = "debezium";
/// Debezium's default `publication.name`.
pub const DEBEZIUM_PUBLICATION: &str = "dbz_publication";
/// Kafka Connect's default `bootstrap.servers`.
pub const CONNECT_BOOTSTRAP: &str = "localhost:9092";

/// Why a key is warned about and ignored.
const OFFSETS_IN_SLOT: &str = "ignored: walrelay keeps its position in the replication slot";

/// A key that was read and ignored; logged once, by name only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredKey {
    /// The key as the file spells it.
    pub key: String,
    /// Why it is ignored (never contains the value).
    pub reason: String,
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
    pub fn warn(&self) {
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

// ---------------------------------------------------------------------------
// The key lists. Every key of the PostgreSQL connector, Kafka Connect's
// connector-level keys and the Java producer that walrelay knows of is in
// exactly one place: translated in code below, or in one of these lists.
// Keys in none of them are warned about as unknown.
// ---------------------------------------------------------------------------

/// Connector keys that do not change what reaches Kafka for an outbox:
/// warned about once, by name, and ignored.
#[rustfmt::skip]
const IGNORED_CONNECTOR_KEYS: &[(&str, &str)] = &[
    // Queueing between Debezium's reader and Connect's poll loop; walrelay's
    // bounded channels do this job.
    ("max.batch.size", "ignored: walrelay sizes its own batches"),
    ("max.queue.size", "ignored: walrelay sizes its own queues"),
    ("max.queue.size.in.bytes", "ignored: walrelay sizes its own queues"),
    ("poll.interval.ms", "ignored: walrelay does not poll"),
    // Debezium's status interval (default 10 s); walrelay sends standby
    // status every replication.status_interval_ms (1 s).
    ("status.update.interval.ms", "ignored: walrelay uses replication.status_interval_ms (default 1000)"),
    // Retry knobs: walrelay retries with its own exponential backoff.
    ("retriable.restart.connector.wait.ms", "ignored: walrelay reconnects with its own backoff"),
    ("slot.max.retries", "ignored: walrelay reconnects with its own backoff (a busy slot is retried forever)"),
    ("slot.retry.delay.ms", "ignored: walrelay reconnects with its own backoff"),
    ("connection.validation.timeout.ms", "ignored: walrelay uses its own connect timeout"),
    ("database.tcpKeepAlive", "ignored: walrelay detects dead connections with replication.receive_timeout_ms"),
    ("database.initial.statements", "ignored: walrelay runs no statements on connect"),
    ("database.query.timeout.ms", "ignored"),
    ("query.fetch.size", "ignored"),
    // LSN flushing: walrelay confirms exactly what Kafka acknowledged.
    ("lsn.flush.timeout.ms", "ignored: walrelay confirms the slot position with standby status updates"),
    ("lsn.flush.timeout.action", "ignored: walrelay confirms the slot position with standby status updates"),
    ("offset.mismatch.strategy", "ignored: walrelay keeps its position in the replication slot (trust_slot)"),
    ("xmin.fetch.interval.ms", "ignored: walrelay does not track xmin"),
    // Offsets: Debezium Server puts the offset store under debezium.source.
    ("offset.storage", OFFSETS_IN_SLOT),
    ("offset.storage.file.filename", OFFSETS_IN_SLOT),
    ("offset.storage.topic", OFFSETS_IN_SLOT),
    ("offset.storage.partitions", OFFSETS_IN_SLOT),
    ("offset.storage.replication.factor", OFFSETS_IN_SLOT),
    ("offset.flush.interval.ms", OFFSETS_IN_SLOT),
    ("offset.flush.timeout.ms", OFFSETS_IN_SLOT),
    ("offsets.storage.topic", OFFSETS_IN_SLOT),
    // The delete tombstones Debezium emits after a DELETE are dropped by
    // EventRouter either way.
    ("tombstones.on.delete", "ignored: EventRouter drops delete tombstones either way"),
    // Affects only UPDATE events, which EventRouter drops or fails on per
    // table.op.invalid.behavior.
    ("skip.messages.without.change", "ignored: updates are handled by table.op.invalid.behavior"),
    // Snapshot tuning: the snapshot itself is snapshot.mode.
    ("snapshot.fetch.size", "ignored"),
    ("snapshot.lock.timeout.ms", "ignored"),
    ("snapshot.delay.ms", "ignored"),
    ("snapshot.max.threads", "ignored"),
    ("snapshot.isolation.mode", "ignored"),
    ("snapshot.locking.mode", "ignored"),
    ("streaming.delay.ms", "ignored"),
    // Only the names of topics walrelay never writes (data-change topics
    // before EventRouter) or metrics.
    ("topic.naming.strategy", "ignored: walrelay writes no data-change topics"),
    ("topic.cache.size", "ignored"),
    ("topic.transaction", "ignored: walrelay writes no transaction topic"),
    ("custom.metric.tags", "ignored: walrelay exposes its own metrics"),
    ("sourceinfo.struct.maker", "ignored: the source block never reaches the outbox record"),
    ("schema.refresh.mode", "ignored"),
    ("include.unknown.datatypes", "ignored: outbox columns have known types"),
    ("unavailable.value.placeholder", "ignored: only affects TOASTed values in updates"),
    ("money.fraction.digits", "ignored: only affects money columns"),
    ("table.ignore.builtin", "ignored"),
    ("read.only", "ignored: walrelay writes nothing to the source database"),
    ("replica.identity.autoset.values", "ignored: walrelay never alters replica identity"),
    // Signals, notifications, incremental snapshots: operational features
    // walrelay does not have.
    ("signal.data.collection", "ignored: walrelay has no signal channel"),
    ("signal.enabled.channels", "ignored: walrelay has no signal channel"),
    ("signal.poll.interval.ms", "ignored: walrelay has no signal channel"),
    ("notification.enabled.channels", "ignored: walrelay has no notifications"),
    ("notification.sink.topic.name", "ignored: walrelay has no notifications"),
    ("incremental.snapshot.chunk.size", "ignored: walrelay has no incremental snapshots"),
    ("incremental.snapshot.watermarking.strategy", "ignored: walrelay has no incremental snapshots"),
    // Logical decoding messages: Debezium forwards them to <prefix>.message,
    // walrelay never forwards them.
    ("message.prefix.include.list", "ignored: walrelay does not forward logical decoding messages"),
    ("message.prefix.exclude.list", "ignored: walrelay does not forward logical decoding messages"),
    // PG 17 failover slots: walrelay creates plain slots.
    ("slot.failover", "ignored: walrelay creates the slot without FAILOVER; create it yourself to have one"),
    // Kafka Connect: walrelay does not create topics (broker auto-creation
    // or your own tooling does).
    ("topic.creation.enable", "ignored: walrelay does not create topics"),
    ("exactly.once.support", "ignored: walrelay is at-least-once with an idempotent producer"),
    ("transaction.boundary", "ignored: walrelay does not use Kafka transactions"),
    ("config.action.reload", "ignored"),
    ("errors.log.enable", "ignored: walrelay logs every bad event at warn (dead-lettered) or error (stopped)"),
    ("errors.log.include.messages", "ignored: walrelay never logs record contents"),
    ("errors.retry.timeout", "ignored: walrelay retries transient failures forever"),
    ("errors.retry.delay.max.ms", "ignored: walrelay retries with its own backoff"),
    // The schema-history store of other connectors; PostgreSQL has none.
    ("schema.history.internal", "ignored: the PostgreSQL connector has no schema history"),
    ("database.server.name", "ignored: replaced by topic.prefix in Debezium 2.0"),
];

/// Connector key prefixes ignored with a warning.
#[rustfmt::skip]
const IGNORED_CONNECTOR_PREFIXES: &[(&str, &str)] = &[
    ("topic.creation.", "ignored: walrelay does not create topics"),
    ("offset.storage.", OFFSETS_IN_SLOT),
    ("schema.history.internal.", "ignored: the PostgreSQL connector has no schema history"),
    ("snapshot.include.collection.list", "ignored"),
    ("incremental.snapshot.", "ignored: walrelay has no incremental snapshots"),
    ("database.ssl", "ignored: walrelay reads database.sslmode, sslrootcert, sslcert, sslkey and sslpassword only"),
    ("driver.", "ignored: walrelay does not use JDBC"),
    ("errors.deadletterqueue.", "ignored: walrelay reads only errors.deadletterqueue.topic.name and .context.headers.enable"),
    ("internal.", "ignored"),
];

/// Connector keys accepted only at the listed values (Debezium's default,
/// or values equivalent for an outbox); any other value is refused.
#[rustfmt::skip]
const DEFAULT_ONLY_CONNECTOR_KEYS: &[(&str, &[&str], &str)] = &[
    // Decimal, time, binary, hstore and interval handling change how column
    // values are represented; a bytea payload or a timestamp column would
    // come out differently.
    ("decimal.handling.mode", &["precise"], "walrelay renders columns as Debezium's defaults do"),
    ("time.precision.mode", &["adaptive"], "walrelay converts timestamps as Debezium's adaptive mode does"),
    ("binary.handling.mode", &["bytes"], "walrelay passes bytea columns as bytes"),
    ("hstore.handling.mode", &["json"], "walrelay renders hstore as Debezium's default (json) does"),
    ("interval.handling.mode", &["numeric"], "walrelay renders intervals as Debezium's default does"),
    ("schema.name.adjustment.mode", &["none"], "schema names would change"),
    ("field.name.adjustment.mode", &["none"], "expanded JSON field names would change"),
    // Debezium's failure handling: `warn`/`skip` would drop events walrelay
    // stops on.
    ("event.processing.failure.handling.mode", &["fail"], "walrelay stops on an event it cannot process"),
    // LSN flushing must stay on: `manual` never confirms.
    ("lsn.flush.mode", &["connector", "connector_and_driver"], "walrelay always confirms the slot position itself"),
    ("flush.lsn.source", &["true"], "walrelay always confirms the slot position itself"),
    // Transaction metadata records would be extra records in Kafka.
    ("provide.transaction.metadata", &["false"], "walrelay emits no transaction metadata records"),
    ("include.schema.comments", &["false"], "schemas would carry comments"),
    ("datatype.propagate.source.type", &[""], "schemas would carry source type parameters"),
    ("publish.via.partition.root", &["false"], "walrelay does not create partition-root publications"),
    ("snapshot.select.statement.overrides", &[""], "walrelay snapshots the whole outbox table"),
    ("converters", &[""], "custom converters change column values"),
    ("post.processors", &[""], "post processors change events"),
    ("message.key.columns", &[""], "it changes the keys of data-change events walrelay never emits; remove it"),
    ("predicates", &[""], "walrelay applies EventRouter to the outbox table unconditionally"),
    ("slot.stream.params", &[""], "walrelay sets the pgoutput options itself"),
    ("table.exclude.list", &[""], "walrelay relays exactly table.include.list"),
    ("column.include.list", &[""], "columns would be missing from the outbox row"),
    ("column.exclude.list", &[""], "columns would be missing from the outbox row"),
];

/// Connector key prefixes refused at any value.
#[rustfmt::skip]
const REFUSED_CONNECTOR_PREFIXES: &[(&str, &str)] = &[
    // Column transformations change values in the outbox row.
    ("column.", "column transformations change the outbox row; walrelay relays columns as they are"),
    ("predicates.", "walrelay applies EventRouter to the outbox table unconditionally"),
    ("snapshot.select.statement.overrides.", "walrelay snapshots the whole outbox table"),
    ("snapshot.mode.", "walrelay implements snapshot.mode no_data, initial, always and when_needed only"),
    ("converters.", "custom converters change column values"),
    ("post.processors.", "post processors change events"),
    ("slot.stream.params.", "walrelay sets the pgoutput options itself"),
];

/// Java producer properties with the same name and meaning in librdkafka.
const PRODUCER_SAME: &[&str] = &[
    "batch.size",                            // bytes per partition batch
    "linger.ms",                             // batching delay
    "compression.type",                      // none, gzip, snappy, lz4, zstd
    "retries",                               // librdkafka alias of message.send.max.retries
    "retry.backoff.ms",                      // first retry delay
    "retry.backoff.max.ms",                  // longest retry delay
    "request.timeout.ms",                    // per produce request
    "client.id",                             // broker-side client name
    "max.in.flight.requests.per.connection", // librdkafka alias of max.in.flight
    "reconnect.backoff.ms",                  // broker reconnect delay
    "reconnect.backoff.max.ms",              // longest broker reconnect delay
    "metadata.max.age.ms",                   // metadata refresh
    "connections.max.idle.ms",               // idle connection close
    "socket.connection.setup.timeout.ms",    // connect timeout
    "client.dns.lookup", // use_all_dns_ips, resolve_canonical_bootstrap_servers_only
];

/// Java producer properties whose librdkafka name differs.
const PRODUCER_RENAMED: &[(&str, &str)] = &[
    ("max.request.size", "message.max.bytes"),
    ("delivery.timeout.ms", "message.timeout.ms"),
    ("receive.buffer.bytes", "socket.receive.buffer.bytes"),
    ("send.buffer.bytes", "socket.send.buffer.bytes"),
];

/// Java producer properties ignored with a warning.
#[rustfmt::skip]
const PRODUCER_IGNORED: &[(&str, &str)] = &[
    // Serializers: walrelay writes the converter's bytes.
    ("key.serializer", ""),
    ("value.serializer", ""),
    ("max.block.ms", "ignored: walrelay applies backpressure instead of blocking"),
    ("metric.reporters", "ignored: walrelay exposes its own metrics"),
    ("metrics.num.samples", "ignored"),
    ("metrics.sample.window.ms", "ignored"),
    ("metrics.recording.level", "ignored"),
    ("auto.include.jmx.reporter", "ignored"),
    ("enable.metrics.push", "ignored"),
    ("socket.connection.setup.timeout.max.ms", "ignored"),
    ("transactional.id", "ignored: walrelay does not use Kafka transactions"),
    ("transaction.timeout.ms", "ignored: walrelay does not use Kafka transactions"),
    // Keyless records only; an outbox record has a key unless the key
    // column is NULL.
    ("partitioner.adaptive.partitioning.enable", "ignored: affects only records without a key"),
    ("partitioner.availability.timeout.ms", "ignored: affects only records without a key"),
    ("compression.gzip.level", "ignored: set librdkafka's compression.level in walrelay's own config if needed"),
    ("compression.lz4.level", "ignored: set librdkafka's compression.level in walrelay's own config if needed"),
    ("compression.zstd.level", "ignored: set librdkafka's compression.level in walrelay's own config if needed"),
    ("ssl.protocol", "ignored: librdkafka negotiates the TLS version"),
    ("ssl.enabled.protocols", "ignored: librdkafka negotiates the TLS version"),
    ("ssl.cipher.suites", "ignored: Java cipher suite names do not apply to OpenSSL"),
    ("ssl.truststore.password", "ignored: only PKCS12 truststores have a password"),
    ("ssl.keymanager.algorithm", "ignored"),
    ("ssl.trustmanager.algorithm", "ignored"),
    ("ssl.secure.random.implementation", "ignored"),
    ("sasl.login.refresh.window.factor", "ignored"),
    ("sasl.login.refresh.window.jitter", "ignored"),
    ("sasl.login.refresh.min.period.seconds", "ignored"),
    ("sasl.login.refresh.buffer.seconds", "ignored"),
    ("sasl.login.connect.timeout.ms", "ignored"),
    ("sasl.login.read.timeout.ms", "ignored"),
    ("sasl.login.retry.backoff.ms", "ignored"),
    ("sasl.login.retry.backoff.max.ms", "ignored"),
];

/// Java producer properties refused at any value but the listed ones.
#[rustfmt::skip]
const PRODUCER_DEFAULT_ONLY: &[(&str, &[&str], &str)] = &[
    // Other partitioners put a key's records on other partitions than the
    // Java default (murmur2 of the key bytes), which walrelay reproduces.
    ("partitioner.class", &["", "org.apache.kafka.clients.producer.internals.DefaultPartitioner"], "walrelay partitions like the Java default partitioner (murmur2 of the key bytes)"),
    ("partitioner.ignore.keys", &["false"], "walrelay partitions by key"),
    ("interceptor.classes", &[""], "producer interceptors are Java code"),
    ("sasl.client.callback.handler.class", &[""], "callback handlers are Java code"),
    ("sasl.login.callback.handler.class", &[""], "callback handlers are Java code"),
    ("sasl.login.class", &[""], "login classes are Java code"),
    ("ssl.engine.factory.class", &[""], "ssl engine factories are Java code"),
];

// ---------------------------------------------------------------------------
// Connector
// ---------------------------------------------------------------------------

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
}

/// The Kafka part of a [`Draft`].
#[derive(Debug, Default)]
pub(super) struct KafkaDraft {
    pub(super) bootstrap: Option<String>,
    pub(super) producer: BTreeMap<String, String>,
    pub(super) secrets: BTreeMap<String, Secret>,
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
        }
    }

    /// The finished, validated configuration.
    pub(super) fn finish(self, bootstrap_key: &str) -> Result<Config, ConfigError> {
        let postgres = self.postgres.ok_or_else(|| ConfigError::Missing {
            key: "database.hostname".into(),
            reason: "the connector configuration is missing".into(),
        })?;
        let bootstrap_servers = self.kafka.bootstrap.ok_or_else(|| ConfigError::Missing {
            key: bootstrap_key.into(),
            reason: "walrelay needs the Kafka brokers".into(),
        })?;
        let config = Config {
            postgres,
            replication: self.replication,
            outbox: self.outbox,
            router: self.router,
            converters: self.converters,
            debezium: self.debezium,
            heartbeat: self.heartbeat,
            kafka: KafkaConfig {
                bootstrap_servers,
                producer: self.kafka.producer,
                secrets: self.kafka.secrets,
                secrets_env: BTreeMap::new(),
                secrets_file: BTreeMap::new(),
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

/// Translates the Debezium PostgreSQL connector's keys (without any
/// `debezium.source.` prefix) into `draft`. Converter and producer keys are
/// not handled here. Every key of `c` is consumed or warned about.
pub(super) fn translate_connector(
    c: &mut Keys,
    draft: &mut Draft,
    notes: &mut Notes,
) -> Result<(), ConfigError> {
    let class = c.take_required(
        "connector.class",
        "walrelay replaces Debezium's PostgreSQL connector",
    )?;
    if class != POSTGRES_CONNECTOR {
        return Err(c.unsupported(
            "connector.class",
            format!("walrelay replaces {POSTGRES_CONNECTOR} only, not {class}"),
        ));
    }
    c.take("name");
    if let Some(tasks) = c.take("tasks.max") {
        if tasks != "1" {
            return Err(c.unsupported(
                "tasks.max",
                "walrelay runs one task per outbox (Debezium's PostgreSQL connector uses one anyway); set 1",
            ));
        }
    }

    // Connection.
    let host = c.take_required("database.hostname", "the PostgreSQL server to read from")?;
    let port = match c.take("database.port") {
        None => DEFAULT_PG_PORT,
        Some(p) => p
            .parse()
            .map_err(|_| c.invalid("database.port", format!("{p:?} is not a port number")))?,
    };
    let user = c.take_required("database.user", "the role walrelay connects as")?;
    let password = c.take_raw("database.password").map(Secret::new);
    let dbname = c.take_required("database.dbname", "the database holding the outbox table")?;
    // TLS: pgjdbc's libpq-style keys (its LibPQFactory), Debezium's
    // default sslmode being prefer like libpq's.
    let sslmode = match c.take("database.sslmode") {
        None => SslMode::default(),
        Some(mode) => SslMode::parse(&mode.to_ascii_lowercase()).ok_or_else(|| {
            c.invalid(
                "database.sslmode",
                format!("{mode:?} is not one of disable, allow, prefer, require, verify-ca, verify-full"),
            )
        })?,
    };
    let sslrootcert = c.take("database.sslrootcert").filter(|v| !v.is_empty());
    let sslcert = c
        .take("database.sslcert")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let sslkey = c
        .take("database.sslkey")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let sslpassword = c.take_raw("database.sslpassword").map(Secret::new);
    if let Some(factory) = c.take("database.sslfactory") {
        if !matches!(factory.as_str(), "" | "org.postgresql.ssl.LibPQFactory") {
            return Err(c.unsupported(
                "database.sslfactory",
                "walrelay implements libpq's (and pgjdbc's LibPQFactory) TLS settings only: use database.sslmode, database.sslrootcert, database.sslcert and database.sslkey",
            ));
        }
    }
    for key in [
        "database.sslhostnameverifier",
        "database.sslpasswordcallback",
    ] {
        if c.take(key).is_some_and(|v| !v.is_empty()) {
            return Err(c.unsupported(
                key,
                "it names Java code; walrelay verifies host names as libpq does (database.sslmode=verify-full)",
            ));
        }
    }
    draft.postgres = Some(PostgresConfig {
        host,
        port,
        user,
        password,
        password_env: None,
        password_file: None,
        dbname,
        connect_timeout_ms: crate::postgres::config::DEFAULT_CONNECT_TIMEOUT_MS,
        application_name: "walrelay".into(),
        sslmode,
        sslrootcert,
        sslcert,
        sslkey,
        sslpassword,
        sslpassword_env: None,
        sslpassword_file: None,
        channel_binding: Default::default(),
    });

    // Decoding, slot, publication.
    match c.take("plugin.name").as_deref() {
        Some("pgoutput") => {}
        None => {
            return Err(c.unsupported(
                "plugin.name",
                "Debezium's default is decoderbufs; walrelay reads pgoutput only: set plugin.name=pgoutput (the slot must be a pgoutput slot)",
            ))
        }
        Some(other) => {
            return Err(c.unsupported(
                "plugin.name",
                format!("walrelay reads pgoutput only, not {other}"),
            ))
        }
    }
    let r = &mut draft.replication;
    if let Some(slot) = c.take("slot.name") {
        validate_slot_name(&slot).map_err(|e| match e {
            SettingError::Invalid { reason, .. } => c.invalid("slot.name", reason),
            other => other.into(),
        })?;
        r.slot = slot;
    }
    if let Some(publication) = c.take("publication.name") {
        r.publication = publication;
    }
    if let Some(mode) = c.take("publication.autocreate.mode") {
        r.publication_mode = match mode.to_ascii_lowercase().as_str() {
            "all_tables" => PublicationMode::AllTables,
            "disabled" => PublicationMode::Disabled,
            "filtered" => PublicationMode::Filtered,
            "no_tables" => PublicationMode::NoTables,
            _ => {
                return Err(c.invalid(
                    "publication.autocreate.mode",
                    format!("{mode:?} is not one of all_tables, disabled, filtered, no_tables"),
                ))
            }
        };
    }
    r.slot_drop_on_stop = c.take_bool("slot.drop.on.stop", false)?;
    if let Some(mode) = c.take("snapshot.mode") {
        r.snapshot_mode = match mode.to_ascii_lowercase().as_str() {
            "no_data" => SnapshotMode::NoData,
            "initial" => SnapshotMode::Initial,
            "always" => SnapshotMode::Always,
            "when_needed" => SnapshotMode::WhenNeeded,
            "never" | "schema_only" => {
                return Err(c.unsupported(
                    "snapshot.mode",
                    format!("{mode} was removed from Debezium; use no_data"),
                ))
            }
            _ => {
                return Err(c.unsupported(
                    "snapshot.mode",
                    format!(
                        "walrelay implements no_data, initial, always and when_needed, not {mode}"
                    ),
                ))
            }
        };
    }

    // The outbox table.
    let include = c.take_required(
        "table.include.list",
        "it must name the outbox table (schema.table); without it Debezium routes every table through EventRouter",
    )?;
    let tables: Vec<&str> = include
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    let table = match tables.as_slice() {
        [one] => *one,
        [] => return Err(c.invalid("table.include.list", "names no table")),
        _ => {
            return Err(c.unsupported(
                "table.include.list",
                "walrelay relays exactly one outbox table; run one walrelay per outbox",
            ))
        }
    };
    // Debezium reads the list as Java regexes matched against schema.table;
    // `.` is accepted as the separator it is meant to be.
    if table.contains([
        '\\', '[', ']', '(', ')', '{', '}', '*', '+', '?', '^', '$', '|',
    ]) {
        return Err(c.unsupported(
            "table.include.list",
            "walrelay needs the outbox table's plain name (schema.table), not a regular expression",
        ));
    }
    let (schema, _) = match parse_qualified_name(table) {
        Some(parts) if table.contains('.') => parts,
        _ => {
            return Err(c.invalid(
                "table.include.list",
                "must be schema.table: Debezium matches it against the qualified name",
            ))
        }
    };
    draft.outbox.table = table.to_owned();
    if let Some(schemas) = c.take("schema.include.list") {
        let listed = schemas
            .split(',')
            .map(str::trim)
            .any(|s| s.eq_ignore_ascii_case(&schema));
        if !listed {
            return Err(c.unsupported(
                "schema.include.list",
                "it does not list the outbox table's schema as a plain name, so Debezium would capture nothing",
            ));
        }
    }
    if let Some(schemas) = c.take("schema.exclude.list") {
        if schemas
            .split(',')
            .map(str::trim)
            .any(|s| s.eq_ignore_ascii_case(&schema))
        {
            return Err(c.unsupported(
                "schema.exclude.list",
                "it excludes the outbox table's schema, so Debezium would capture nothing",
            ));
        }
        notes.ignore(
            c.name("schema.exclude.list"),
            "ignored: walrelay reads only the outbox table",
        );
    }

    // What the publication publishes.
    if let Some(skipped) = c.take("skipped.operations") {
        let mut ops = Vec::new();
        for op in skipped.split(',').map(str::trim).filter(|o| !o.is_empty()) {
            match op {
                "c" => {
                    return Err(c.unsupported(
                        "skipped.operations",
                        "skipping c (inserts) would skip every outbox event",
                    ))
                }
                "u" | "d" | "t" | "none" => ops.push(op),
                // `r` (snapshot reads) exists in newer Debezium; walrelay's
                // snapshot emits reads only when snapshot.mode asks for them.
                _ => {
                    return Err(c.invalid(
                        "skipped.operations",
                        format!("{op:?} is not one of c, u, d, t, none"),
                    ))
                }
            }
        }
        // Debezium sets publish explicitly whenever skipped.operations is set.
        let publish: Vec<&str> = [
            ("insert", "c"),
            ("update", "u"),
            ("delete", "d"),
            ("truncate", "t"),
        ]
        .iter()
        .filter(|(_, op)| !ops.contains(op))
        .map(|(name, _)| *name)
        .collect();
        draft.replication.publish = Some(publish.join(", "));
    }

    // Naming and headers.
    draft.debezium.topic_prefix = c.take_required(
        "topic.prefix",
        "Debezium requires it; it names envelope schemas, the __debezium.context.connectorLogicalName header and the heartbeat topic",
    )?;
    draft.debezium.extended_headers = c.take_bool("extended.headers.enabled", true)?;

    translate_errors(c, draft, notes)?;

    // Heartbeats.
    if let Some(ms) = c.take_u64("heartbeat.interval.ms")? {
        draft.heartbeat.interval_ms = ms;
    }
    draft.heartbeat.action_query = c.take("heartbeat.action.query").filter(|q| !q.is_empty());
    if let Some(prefix) = c.take("topic.heartbeat.prefix") {
        draft.heartbeat.topic_prefix = prefix;
    }

    Ok(())
}

/// Kafka Connect's error handling: `errors.tolerance=all` with
/// `errors.deadletterqueue.topic.name` becomes walrelay's dead-letter
/// policy (Connect has dead-letter queues for sink connectors only; walrelay
/// gives its source one). `all` without a topic is refused: the events would
/// be skipped and lost.
fn translate_errors(c: &mut Keys, draft: &mut Draft, notes: &mut Notes) -> Result<(), ConfigError> {
    if let Some(t) = c.take("errors.tolerance") {
        draft.errors.tolerance = match t.trim().to_ascii_lowercase().as_str() {
            "none" => Tolerance::None,
            "all" => Tolerance::All,
            _ => {
                return Err(c.invalid("errors.tolerance", format!("{t:?} is not one of none, all")))
            }
        };
    }
    if let Some(topic) = c.take("errors.deadletterqueue.topic.name") {
        let topic = topic.trim();
        if !topic.is_empty() {
            crate::router::check_topic_name(topic).map_err(|reason| {
                c.invalid(
                    "errors.deadletterqueue.topic.name",
                    format!("{topic:?} is not a legal kafka topic name: {reason}"),
                )
            })?;
            draft.errors.dead_letter_topic = Some(topic.to_owned());
        }
    }
    // Connect's default is false; walrelay's is true, because a dead-letter
    // record without them does not say why or where from.
    draft.errors.dead_letter_context_headers =
        c.take_bool("errors.deadletterqueue.context.headers.enable", true)?;
    if c.take("errors.deadletterqueue.topic.replication.factor")
        .is_some()
    {
        notes.ignore(
            c.name("errors.deadletterqueue.topic.replication.factor"),
            "ignored: walrelay does not create topics; create the dead-letter topic yourself",
        );
    }
    if draft.errors.tolerance == Tolerance::All && draft.errors.dead_letter_topic.is_none() {
        return Err(ConfigError::Missing {
            key: c.name("errors.deadletterqueue.topic.name"),
            reason: "errors.tolerance=all sends bad events there; without it walrelay would skip and lose them".into(),
        });
    }
    Ok(())
}

/// Reads `transforms` and `transforms.<name>.*` (prefixed as `t` spells
/// them): exactly one EventRouter, whose options go through
/// [`super::event_router::event_router_options`]. Refuses predicates.
pub(super) fn translate_transforms(
    c: &mut Keys,
    draft: &mut Draft,
    notes: &mut Notes,
) -> Result<(), ConfigError> {
    let list = c.take("transforms").unwrap_or_default();
    let names: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .collect();
    let name = match names.as_slice() {
        [one] => (*one).to_owned(),
        [] => {
            return Err(c.unsupported(
                "transforms",
                format!("walrelay implements the outbox EventRouter: set transforms=outbox and transforms.outbox.type={EVENT_ROUTER}"),
            ))
        }
        _ => {
            return Err(c.unsupported(
                "transforms",
                "walrelay implements exactly one transform, the outbox EventRouter",
            ))
        }
    };
    let prefix = format!("transforms.{name}.");
    let mut options = c.take_prefixed(&prefix);
    let type_key = format!("{prefix}type");
    match options.remove("type").map(|t| t.trim().to_owned()) {
        Some(t) if t == EVENT_ROUTER => {}
        Some(other) => {
            return Err(c.unsupported(
                &type_key,
                format!("walrelay implements {EVENT_ROUTER} only, not {other}"),
            ))
        }
        None => {
            return Err(ConfigError::Missing {
                key: c.name(&type_key),
                reason: format!("set it to {EVENT_ROUTER}"),
            })
        }
    }
    for conditional in ["predicate", "negate"] {
        if options.remove(conditional).is_some() {
            return Err(c.unsupported(
                &format!("{prefix}{conditional}"),
                "walrelay applies EventRouter to the outbox table unconditionally",
            ));
        }
    }
    let parsed =
        super::event_router::event_router_options(&options).map_err(|e| ConfigError::Invalid {
            key: c.name(&format!("transforms.{name}")),
            reason: e.to_string(),
        })?;
    draft.router = parsed.router;
    if let Some(behavior) = parsed.op_invalid_behavior {
        draft.outbox.op_invalid_behavior = behavior;
    }
    for key in parsed.unknown {
        notes.ignore(
            c.name(&format!("{prefix}{key}")),
            "ignored: not an EventRouter option walrelay implements",
        );
    }
    // Debezium never shows skipped updates to EventRouter, so they can
    // neither fail nor log there.
    if draft
        .replication
        .publish
        .as_deref()
        .is_some_and(|p| !p.contains("update"))
        && draft.outbox.op_invalid_behavior != OpInvalidBehavior::Warn
    {
        draft.outbox.op_invalid_behavior = OpInvalidBehavior::Warn;
    }
    // Other transforms' keys are ignored by Kafka Connect too.
    for key in c.take_prefixed("transforms.").into_keys() {
        notes.ignore(
            c.name(&format!("transforms.{key}")),
            "ignored: the transform is not listed in transforms",
        );
    }
    if let Some(key) = ["predicates"].into_iter().find(|k| c.map.contains_key(*k)) {
        return Err(c.unsupported(
            key,
            "walrelay applies EventRouter to the outbox table unconditionally",
        ));
    }
    if let Some(key) = c.map.keys().find(|k| k.starts_with("predicates.")).cloned() {
        return Err(c.unsupported(
            &key,
            "walrelay applies EventRouter to the outbox table unconditionally",
        ));
    }
    Ok(())
}

/// Classifies the keys nobody consumed: ignored (warned), refused, or
/// unknown (warned).
pub(super) fn classify_rest(c: &mut Keys, notes: &mut Notes) -> Result<(), ConfigError> {
    for (key, value) in c.drain() {
        let value = value.trim();
        if let Some((_, why)) = IGNORED_CONNECTOR_KEYS.iter().find(|(k, _)| *k == key) {
            notes.ignore(c.name(&key), *why);
            continue;
        }
        if let Some((_, allowed, why)) = DEFAULT_ONLY_CONNECTOR_KEYS
            .iter()
            .find(|(k, _, _)| *k == key)
        {
            if allowed.iter().any(|a| a.eq_ignore_ascii_case(value)) {
                notes.ignore(
                    c.name(&key),
                    "ignored: it is at the value walrelay implements",
                );
                continue;
            }
            let expected = if allowed == &[""] {
                "leave it unset".to_owned()
            } else {
                format!("walrelay implements {}", allowed.join(" or "))
            };
            return Err(c.unsupported(&key, format!("{why}; {expected}")));
        }
        if let Some((_, why)) = REFUSED_CONNECTOR_PREFIXES
            .iter()
            .find(|(p, _)| key.starts_with(p))
        {
            return Err(c.unsupported(&key, *why));
        }
        if let Some((_, why)) = IGNORED_CONNECTOR_PREFIXES
            .iter()
            .find(|(p, _)| key.starts_with(p))
        {
            notes.ignore(c.name(&key), *why);
            continue;
        }
        notes.ignore(c.name(&key), "ignored: unknown to walrelay");
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Converters
// ---------------------------------------------------------------------------

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

/// Which converter roles a file set (so a connector's override can be told
/// from the worker's).
#[derive(Debug, Default, Clone, Copy)]
struct ConvertersSet {
    key: bool,
    value: bool,
}

/// Reads `key.converter`, `value.converter`, `header.converter` and their
/// `.schemas.enable`; other `<role>.converter.*` keys are warned about.
/// `connector_level`: a converter class set here starts from its defaults
/// (Kafka Connect configures an overriding converter only from the
/// connector's own keys), and `.schemas.enable` without a class is ignored.
fn translate_converters(
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
        let schemas_key = format!("{class_key}.schemas.enable");
        let schemas = match extras.remove("schemas.enable") {
            None => None,
            Some(v) => Some(parse_bool(v.trim()).ok_or_else(|| {
                c.invalid(&schemas_key, format!("{:?} is not true or false", v.trim()))
            })?),
        };
        for extra in extras.keys() {
            notes.ignore(
                c.name(&format!("{class_key}.{extra}")),
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

// ---------------------------------------------------------------------------
// Producer
// ---------------------------------------------------------------------------

/// Translates Java producer properties (without their prefix; `prefix` is
/// how the file spells it, e.g. `producer.`) into librdkafka properties.
pub(super) fn translate_producer(
    props: BTreeMap<String, String>,
    prefix: &str,
    kafka: &mut KafkaDraft,
    notes: &mut Notes,
) -> Result<(), ConfigError> {
    let mut p = Keys::new(props, prefix);
    if let Some(servers) = p.take("bootstrap.servers") {
        kafka.bootstrap = Some(servers);
    }
    for key in PRODUCER_SAME {
        if let Some(v) = p.take(key) {
            kafka.producer.insert((*key).to_owned(), v);
        }
    }
    for (java, rdkafka) in PRODUCER_RENAMED {
        if let Some(v) = p.take(java) {
            kafka.producer.insert((*rdkafka).to_owned(), v);
        }
    }
    if let Some(acks) = p.take("acks") {
        if acks != "all" && acks != "-1" {
            return Err(p.unsupported(
                "acks",
                "walrelay confirms an event to PostgreSQL only once every in-sync replica has it; use all",
            ));
        }
        kafka.producer.insert("acks".into(), "all".into());
    }
    if let Some(idem) = p.take("enable.idempotence") {
        if parse_bool(&idem) != Some(true) {
            return Err(p.unsupported(
                "enable.idempotence",
                "walrelay requires the idempotent producer (per-key order across retries)",
            ));
        }
    }
    if let Some(bytes) = p.take("buffer.memory") {
        let bytes: u64 = bytes
            .parse()
            .map_err(|_| p.invalid("buffer.memory", format!("{bytes:?} is not a byte count")))?;
        kafka.producer.insert(
            "queue.buffering.max.kbytes".into(),
            bytes.div_ceil(1024).max(1).to_string(),
        );
    }
    let protocol = p.take("security.protocol").map(|s| s.to_ascii_lowercase());
    if let Some(proto) = &protocol {
        if !matches!(
            proto.as_str(),
            "plaintext" | "ssl" | "sasl_plaintext" | "sasl_ssl"
        ) {
            return Err(p.invalid(
                "security.protocol",
                format!("{proto:?} is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
            ));
        }
        kafka
            .producer
            .insert("security.protocol".into(), proto.clone());
    }
    let sasl = protocol.as_deref().is_some_and(|p| p.starts_with("sasl"));
    let mechanism = p.take("sasl.mechanism");
    match mechanism.as_deref() {
        Some(m @ ("PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512")) => {
            kafka.producer.insert("sasl.mechanism".into(), m.into());
        }
        Some(other) => {
            return Err(p.unsupported(
                "sasl.mechanism",
                format!("walrelay supports PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, not {other}"),
            ))
        }
        None if sasl => {
            return Err(p.unsupported(
                "sasl.mechanism",
                "Java's default is GSSAPI (Kerberos), which walrelay does not support; set PLAIN or SCRAM-SHA-256/512",
            ))
        }
        None => {}
    }
    if let Some(jaas) = p.take_raw("sasl.jaas.config") {
        let (username, password) =
            parse_jaas(&jaas).map_err(|reason| p.unsupported("sasl.jaas.config", reason))?;
        kafka.producer.insert("sasl.username".into(), username);
        kafka
            .secrets
            .insert("sasl.password".into(), Secret::new(password));
    }
    if let Some(alg) = p.take("ssl.endpoint.identification.algorithm") {
        let v = if alg.is_empty() { "none" } else { "https" };
        kafka
            .producer
            .insert("ssl.endpoint.identification.algorithm".into(), v.into());
    }
    translate_truststore(&mut p, kafka)?;
    translate_keystore(&mut p, kafka)?;

    for (key, value) in p.drain() {
        if let Some((_, why)) = PRODUCER_IGNORED.iter().find(|(k, _)| *k == key) {
            if !why.is_empty() {
                notes.ignore(format!("{prefix}{key}"), *why);
            }
            continue;
        }
        if let Some((_, allowed, why)) = PRODUCER_DEFAULT_ONLY.iter().find(|(k, _, _)| *k == key) {
            if allowed.iter().any(|a| a.eq_ignore_ascii_case(value.trim())) {
                continue;
            }
            return Err(ConfigError::Unsupported {
                key: format!("{prefix}{key}"),
                reason: (*why).to_owned(),
            });
        }
        if key.starts_with("sasl.kerberos.") || key.starts_with("sasl.oauthbearer.") {
            return Err(ConfigError::Unsupported {
                key: format!("{prefix}{key}"),
                reason: "walrelay supports SASL PLAIN and SCRAM only".into(),
            });
        }
        notes.ignore(
            format!("{prefix}{key}"),
            "ignored: not a producer property walrelay translates to librdkafka",
        );
    }
    Ok(())
}

/// Extracts username and password from a PlainLoginModule or
/// ScramLoginModule JAAS line. Errors never contain the text.
fn parse_jaas(text: &str) -> Result<(String, String), String> {
    let text = text.trim();
    let body = text.strip_suffix(';').ok_or("it must end with ';'")?.trim();
    if body.contains(';') {
        return Err("walrelay supports a single login module".into());
    }
    let mut rest = body;
    let class_end = rest
        .find(char::is_whitespace)
        .ok_or("it has no control flag")?;
    let class = &rest[..class_end];
    rest = rest[class_end..].trim_start();
    if !matches!(
        class,
        "org.apache.kafka.common.security.plain.PlainLoginModule"
            | "org.apache.kafka.common.security.scram.ScramLoginModule"
    ) {
        return Err(format!(
            "walrelay supports PlainLoginModule and ScramLoginModule, not {class}"
        ));
    }
    let flag_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    if !matches!(
        &rest[..flag_end],
        "required" | "requisite" | "sufficient" | "optional"
    ) {
        return Err("the control flag must be required, requisite, sufficient or optional".into());
    }
    rest = rest[flag_end..].trim_start();
    let mut options = BTreeMap::new();
    while !rest.is_empty() {
        let eq = rest
            .find('=')
            .ok_or("malformed option list (expected name=value)")?;
        let name = rest[..eq].trim().to_owned();
        rest = rest[eq + 1..].trim_start();
        let value;
        if let Some(quoted) = rest.strip_prefix('"') {
            let mut v = String::new();
            let mut chars = quoted.char_indices();
            let mut end = None;
            while let Some((i, ch)) = chars.next() {
                match ch {
                    '\\' => {
                        if let Some((_, e)) = chars.next() {
                            v.push(e);
                        }
                    }
                    '"' => {
                        end = Some(i);
                        break;
                    }
                    _ => v.push(ch),
                }
            }
            let end = end.ok_or("malformed option list (unterminated quote)")?;
            value = v;
            rest = quoted[end + 1..].trim_start();
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            value = rest[..end].to_owned();
            rest = rest[end..].trim_start();
        }
        if name.is_empty() {
            return Err("malformed option list (empty option name)".into());
        }
        options.insert(name, value);
    }
    let username = options
        .remove("username")
        .ok_or("it has no username option")?;
    let password = options
        .remove("password")
        .ok_or("it has no password option")?;
    Ok((username, password))
}

/// What a key or trust store file is, by its type setting or its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StoreKind {
    Pem,
    Pkcs12,
    Jks,
}

fn store_kind(declared: Option<&str>, path: &str) -> Option<StoreKind> {
    match declared.map(str::to_ascii_uppercase).as_deref() {
        Some("PEM") => return Some(StoreKind::Pem),
        Some("PKCS12") => return Some(StoreKind::Pkcs12),
        Some("JKS") => return Some(StoreKind::Jks),
        _ => {}
    }
    let bytes = std::fs::read(path).ok()?;
    let start: Vec<u8> = bytes
        .iter()
        .copied()
        .skip_while(u8::is_ascii_whitespace)
        .take(10)
        .collect();
    if start.starts_with(b"-----BEGIN") {
        Some(StoreKind::Pem)
    } else if bytes.starts_with(&[0xFE, 0xED, 0xFE, 0xED]) {
        Some(StoreKind::Jks)
    } else if bytes.first() == Some(&0x30) {
        Some(StoreKind::Pkcs12)
    } else {
        None
    }
}

/// `ssl.truststore.*` → librdkafka's `ssl.ca.location` (PEM file) or
/// `ssl.ca.pem` (the certificates of a PKCS12 truststore, which librdkafka
/// cannot read itself). `ssl.truststore.password` stays in the map unless a
/// PKCS12 store needs it, so it is warned about as ignored otherwise.
fn translate_truststore(p: &mut Keys, kafka: &mut KafkaDraft) -> Result<(), ConfigError> {
    let declared = p.take("ssl.truststore.type");
    if let Some(pem) = p.take_raw("ssl.truststore.certificates") {
        kafka.producer.insert("ssl.ca.pem".into(), pem);
    }
    let Some(location) = p.take("ssl.truststore.location") else {
        return Ok(());
    };
    match store_kind(declared.as_deref(), &location) {
        Some(StoreKind::Pem) => {
            kafka.producer.insert("ssl.ca.location".into(), location);
            Ok(())
        }
        Some(StoreKind::Pkcs12) => {
            if kafka.producer.contains_key("ssl.ca.pem") {
                return Err(p.invalid(
                    "ssl.truststore.location",
                    format!(
                        "set either it or {}, not both",
                        p.name("ssl.truststore.certificates")
                    ),
                ));
            }
            // Java opens a truststore without a password too (it then skips
            // the integrity check); OpenSSL's nearest is the empty one.
            let password = Secret::new(p.take_raw("ssl.truststore.password").unwrap_or_default());
            let password_key = p.name("ssl.truststore.password");
            let pem = pkcs12_certificates_pem(Path::new(&location), &password, &password_key)
                .map_err(|why| {
                    p.invalid(
                        "ssl.truststore.location",
                        format!("PKCS12 truststore {location}: {why}"),
                    )
                })?;
            kafka.producer.insert("ssl.ca.pem".into(), pem);
            Ok(())
        }
        Some(StoreKind::Jks) => Err(p.unsupported(
            "ssl.truststore.location",
            "it is a JKS truststore, which librdkafka cannot read; convert it to PKCS12 \
             (keytool -importkeystore -deststoretype PKCS12) or export the CA certificates as PEM \
             (keytool -exportcert -rfc) and set ssl.truststore.type=PEM",
        )),
        None => Err(p.invalid(
            "ssl.truststore.location",
            "cannot read it as a PEM, JKS or PKCS12 file",
        )),
    }
}

/// Every certificate in the PKCS12 file at `path`, as PEM. The reason it
/// fails names what to check (`password_key` is how the file spells the
/// password's key) and never contains the password.
fn pkcs12_certificates_pem(
    path: &Path,
    password: &Secret,
    password_key: &str,
) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read it: {e}"))?;
    let store = openssl::pkcs12::Pkcs12::from_der(&bytes)
        .map_err(|e| format!("not a PKCS12 file ({})", openssl_reasons(&e)))?;
    let parsed = store.parse2(password.expose()).map_err(|e| {
        let reasons = openssl_reasons(&e);
        if reasons.contains("mac verify failure") {
            format!("wrong password ({password_key}) or a damaged file")
        } else if reasons.contains("unsupported") {
            // Stores written by Java 8 and OpenSSL 1.1 use RC2-40, which
            // OpenSSL 3 keeps in its legacy provider.
            format!(
                "it uses an algorithm this OpenSSL does not provide ({reasons}); re-create it \
                 with keytool from Java 17+ or export the certificates as PEM"
            )
        } else {
            format!("cannot open it with {password_key} ({reasons})")
        }
    })?;
    let mut pem = Vec::new();
    let own = parsed.cert.iter().map(|c| &**c);
    for cert in own.chain(parsed.ca.iter().flatten()) {
        let text = cert.to_pem().map_err(|e| {
            format!(
                "cannot convert a certificate to PEM ({})",
                openssl_reasons(&e)
            )
        })?;
        pem.extend_from_slice(&text);
    }
    if pem.is_empty() {
        return Err("it holds no certificate".into());
    }
    String::from_utf8(pem).map_err(|_| "a certificate did not convert to ASCII PEM".into())
}

/// OpenSSL's reason strings, without the file and line noise of its
/// `Display`.
fn openssl_reasons(stack: &openssl::error::ErrorStack) -> String {
    let reasons: Vec<&str> = stack.errors().iter().filter_map(|e| e.reason()).collect();
    if reasons.is_empty() {
        "no reason given".into()
    } else {
        reasons.join(": ")
    }
}

fn translate_keystore(p: &mut Keys, kafka: &mut KafkaDraft) -> Result<(), ConfigError> {
    let declared = p.take("ssl.keystore.type");
    let store_password = p.take_raw("ssl.keystore.password");
    if let Some(key_password) = p.take_raw("ssl.key.password") {
        kafka
            .secrets
            .insert("ssl.key.password".into(), Secret::new(key_password));
    }
    if let Some(key) = p.take_raw("ssl.keystore.key") {
        kafka.secrets.insert("ssl.key.pem".into(), Secret::new(key));
    }
    if let Some(chain) = p.take_raw("ssl.keystore.certificate.chain") {
        kafka.producer.insert("ssl.certificate.pem".into(), chain);
    }
    let Some(location) = p.take("ssl.keystore.location") else {
        return Ok(());
    };
    match store_kind(declared.as_deref(), &location) {
        Some(StoreKind::Pem) => {
            // One PEM file holding the key and the certificate chain.
            kafka
                .producer
                .insert("ssl.certificate.location".into(), location.clone());
            kafka.producer.insert("ssl.key.location".into(), location);
        }
        Some(StoreKind::Pkcs12) => {
            kafka
                .producer
                .insert("ssl.keystore.location".into(), location);
            if let Some(pw) = store_password {
                kafka
                    .secrets
                    .insert("ssl.keystore.password".into(), Secret::new(pw));
            }
        }
        Some(StoreKind::Jks) => {
            return Err(p.unsupported(
                "ssl.keystore.location",
                "it is a JKS keystore, which librdkafka cannot read; convert it to PKCS12 \
                 (keytool -importkeystore -deststoretype PKCS12) or PEM",
            ))
        }
        None => {
            return Err(p.invalid(
                "ssl.keystore.location",
                "cannot read it as a PEM, JKS or PKCS12 file",
            ))
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Kafka Connect standalone
// ---------------------------------------------------------------------------

/// Worker keys with a specific reason to be ignored.
#[rustfmt::skip]
const IGNORED_WORKER_PREFIXES: &[(&str, &str)] = &[
    ("offset.", OFFSETS_IN_SLOT),
    ("plugin.", "ignored: walrelay has no plugins"),
    ("config.storage.", "ignored: walrelay has no config topic"),
    ("status.storage.", "ignored: walrelay has no status topic"),
    ("rest.", "ignored: walrelay has no REST API"),
    ("listeners", "ignored: walrelay has no REST API"),
    ("admin.", "ignored: walrelay uses no admin client"),
    ("consumer.", "ignored: walrelay uses no consumer"),
    ("internal.", "ignored"),
    ("metric", "ignored: walrelay exposes its own metrics"),
    ("security.protocol", "ignored: the worker's own clients; walrelay reads producer.*"),
    ("sasl.", "ignored: the worker's own clients; walrelay reads producer.*"),
    ("ssl.", "ignored: the worker's own clients; walrelay reads producer.*"),
    ("config.providers", "ignored: not a config provider setting walrelay uses"),
];

const FILE_PROVIDER: &str = "org.apache.kafka.common.config.provider.FileConfigProvider";
const DIRECTORY_PROVIDER: &str = "org.apache.kafka.common.config.provider.DirectoryConfigProvider";
const ENV_PROVIDER: &str = "org.apache.kafka.common.config.provider.EnvVarConfigProvider";

/// A Kafka `ConfigProvider` walrelay resolves.
#[derive(Debug, Clone, Copy)]
enum Provider {
    /// `${name:/path/file.properties:key}`.
    File,
    /// `${name:/dir:file}`: the file's content.
    Directory,
    /// `${name:VAR}`.
    Env,
}

/// Resolves Kafka Connect config-provider references
/// (`config.providers=file` + `config.providers.file.class=...FileConfigProvider`,
/// then `${file:/secrets/pg.properties:password}`) in every worker and
/// connector value, as the worker does before a connector sees them.
fn resolve_providers(
    worker: &mut BTreeMap<String, String>,
    connector: &mut BTreeMap<String, String>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(), ConfigError> {
    let Some(list) = worker.remove("config.providers") else {
        return Ok(());
    };
    let mut providers = BTreeMap::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let class_key = format!("config.providers.{name}.class");
        let provider = match worker.remove(&class_key).as_deref().map(str::trim) {
            Some(FILE_PROVIDER) => Provider::File,
            Some(DIRECTORY_PROVIDER) => Provider::Directory,
            Some(ENV_PROVIDER) => Provider::Env,
            Some(other) => {
                return Err(ConfigError::Unsupported {
                    key: class_key,
                    reason: format!(
                        "walrelay resolves FileConfigProvider, DirectoryConfigProvider and EnvVarConfigProvider, not {other}"
                    ),
                })
            }
            None => {
                return Err(ConfigError::Missing {
                    key: class_key,
                    reason: "config.providers names it".into(),
                })
            }
        };
        providers.insert(name.to_owned(), provider);
    }
    for map in [worker, connector] {
        for (key, value) in map.iter_mut() {
            if value.contains("${") {
                *value = substitute_providers(key, value, &providers, env)?;
            }
        }
    }
    Ok(())
}

fn substitute_providers(
    key: &str,
    value: &str,
    providers: &BTreeMap<String, Provider>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ConfigError> {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let inner = &after[..end];
        let reference = &rest[start..start + 2 + end + 1];
        rest = &after[end + 1..];
        // Kafka's pattern: provider ':' [path ':'] key.
        let Some((name, tail)) = inner.split_once(':') else {
            out.push_str(reference);
            continue;
        };
        let Some(provider) = providers.get(name) else {
            // Unknown provider: Kafka leaves the reference as it is.
            out.push_str(reference);
            continue;
        };
        let (path, item) = match tail.split_once(':') {
            Some((p, k)) => (Some(p), k),
            None => (None, tail),
        };
        let missing = |what: String| ConfigError::Invalid {
            key: key.to_owned(),
            reason: what,
        };
        let resolved = match (provider, path) {
            (Provider::Env, None) => env(item)
                .ok_or_else(|| missing(format!("environment variable {item} is not set")))?,
            (Provider::File, Some(path)) => {
                let props = read_properties(Path::new(path))?;
                props
                    .get(item)
                    .cloned()
                    .ok_or_else(|| missing(format!("{path} has no key {item}")))?
            }
            (Provider::Directory, Some(dir)) => {
                let file = Path::new(dir).join(item);
                std::fs::read_to_string(&file).map_err(|source| ConfigError::Read {
                    path: file.clone(),
                    source,
                })?
            }
            _ => {
                return Err(missing(format!(
                    "cannot resolve ${{{name}:...}}: wrong number of parts"
                )))
            }
        };
        out.push_str(&resolved);
    }
    out.push_str(rest);
    Ok(out)
}

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
        parse_connector_json(&text)
            .map_err(|source| ConfigError::Syntax {
                path: connector.to_owned(),
                source,
            })?
            .config
    } else {
        parse_properties(&text).map_err(|source| ConfigError::Syntax {
            path: connector.to_owned(),
            source: source.into(),
        })?
    };
    from_connect(worker_map, connector_map, worker, connector).map_err(|e| match e {
        // Errors already say which file.
        e @ ConfigError::InFile { .. } => e,
        other => in_file(connector)(other),
    })
}

pub(super) fn read_properties(path: &Path) -> Result<BTreeMap<String, String>, ConfigError> {
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
    for (key, _) in w.drain() {
        let why = IGNORED_WORKER_PREFIXES
            .iter()
            .find(|(p, _)| key.starts_with(p))
            .map(|(_, why)| *why)
            .unwrap_or("ignored: not a worker setting walrelay uses");
        notes.ignore(key, why);
    }

    // Connector.
    let mut c = Keys::new(connector, "");
    let connector_set = translate_converters(&mut c, &mut draft.converters, &mut notes, true)
        .map_err(connector_err)?;
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
    translate_producer(
        overrides,
        "producer.override.",
        &mut draft.kafka,
        &mut notes,
    )
    .map_err(connector_err)?;
    translate_connector(&mut c, &mut draft, &mut notes).map_err(connector_err)?;
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
    use super::*;

    fn data_props(name: &str) -> BTreeMap<String, String> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/debezium")
            .join(name);
        parse_properties(&std::fs::read_to_string(path).unwrap()).unwrap()
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

    /// A self-signed CA certificate and its key, made in memory.
    fn test_ca(
        cn: &str,
    ) -> (
        openssl::pkey::PKey<openssl::pkey::Private>,
        openssl::x509::X509,
    ) {
        use openssl::{
            asn1::Asn1Time, bn::BigNum, ec, hash::MessageDigest, nid::Nid, pkey::PKey, x509,
        };
        let group = ec::EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
        let key = PKey::from_ec_key(ec::EcKey::generate(&group).unwrap()).unwrap();
        let mut name = x509::X509NameBuilder::new().unwrap();
        name.append_entry_by_text("CN", cn).unwrap();
        let name = name.build();
        let mut b = x509::X509Builder::new().unwrap();
        b.set_version(2).unwrap();
        b.set_serial_number(&BigNum::from_u32(1).unwrap().to_asn1_integer().unwrap())
            .unwrap();
        b.set_subject_name(&name).unwrap();
        b.set_issuer_name(&name).unwrap();
        b.set_pubkey(&key).unwrap();
        b.set_not_before(&Asn1Time::days_from_now(0).unwrap())
            .unwrap();
        b.set_not_after(&Asn1Time::days_from_now(1).unwrap())
            .unwrap();
        b.sign(&key, MessageDigest::sha256()).unwrap();
        (key, b.build())
    }

    /// A worker whose producer trusts `store` (type `store_type` if given,
    /// password `password` if given); the translation or its error chain.
    fn with_truststore(
        store: &Path,
        store_type: Option<&str>,
        password: Option<&str>,
    ) -> Result<Translation, String> {
        let mut worker = data_props("connect-standalone.properties");
        worker.insert("producer.security.protocol".into(), "SSL".into());
        worker.insert(
            "producer.ssl.truststore.location".into(),
            store.display().to_string(),
        );
        if let Some(t) = store_type {
            worker.insert("producer.ssl.truststore.type".into(), t.into());
        }
        if let Some(pw) = password {
            worker.insert("producer.ssl.truststore.password".into(), pw.into());
        }
        let connector = data_props("outbox-connector.properties");
        from_connect(worker, connector, Path::new("w"), Path::new("c"))
            .map_err(|e| crate::chain::DisplayChain(&e).to_string())
    }

    #[test]
    fn pkcs12_truststore() {
        let dir = tempfile::tempdir().unwrap();
        let (_, ca) = test_ca("walrelay unit CA");
        let (_, other) = test_ca("walrelay other unit CA");
        let mut cas = openssl::stack::Stack::new().unwrap();
        cas.push(ca.clone()).unwrap();
        cas.push(other.clone()).unwrap();
        let password = "Trust-Store-Pw-5a1";
        let mut builder = openssl::pkcs12::Pkcs12::builder();
        builder.ca(cas);
        let store = dir.path().join("truststore.p12");
        std::fs::write(&store, builder.build2(password).unwrap().to_der().unwrap()).unwrap();
        let want = format!(
            "{}{}",
            String::from_utf8(ca.to_pem().unwrap()).unwrap(),
            String::from_utf8(other.to_pem().unwrap()).unwrap()
        );

        // Declared or detected: every certificate goes to ssl.ca.pem and the
        // password is used, not warned about.
        for declared in [Some("PKCS12"), Some("pkcs12"), None] {
            let t = with_truststore(&store, declared, Some(password)).unwrap();
            let k = &t.config.kafka;
            assert_eq!(k.producer["ssl.ca.pem"], want, "{declared:?}");
            assert!(!k.producer.contains_key("ssl.ca.location"));
            assert!(!t.ignored("producer.ssl.truststore.password"));
            assert!(!format!("{:?}", t.config).contains(password));
        }

        // A wrong or missing password: named, never shown.
        for wrong in [Some("Not-The-Pw-77"), None] {
            let err = with_truststore(&store, Some("PKCS12"), wrong).unwrap_err();
            assert!(
                err.contains("producer.ssl.truststore.location")
                    && err.contains("truststore.p12")
                    && err.contains("wrong password (producer.ssl.truststore.password)"),
                "{err}"
            );
            assert!(
                !err.contains("Not-The-Pw-77") && !err.contains(password),
                "{err}"
            );
        }

        // A store holding only a key has nothing to trust.
        let (key, _) = test_ca("unused");
        let mut builder = openssl::pkcs12::Pkcs12::builder();
        builder.pkey(&key);
        let keyonly = dir.path().join("key-only.p12");
        std::fs::write(
            &keyonly,
            builder.build2(password).unwrap().to_der().unwrap(),
        )
        .unwrap();
        let err = with_truststore(&keyonly, None, Some(password)).unwrap_err();
        assert!(
            err.contains("producer.ssl.truststore.location")
                && err.contains("key-only.p12")
                && err.contains("no certificate"),
            "{err}"
        );

        // Declared PKCS12 but unreadable or not PKCS12 at all.
        let missing = dir.path().join("missing.p12");
        let err = with_truststore(&missing, Some("PKCS12"), Some(password)).unwrap_err();
        assert!(
            err.contains("producer.ssl.truststore.location")
                && err.contains("missing.p12")
                && err.contains("cannot read"),
            "{err}"
        );
        let junk = dir.path().join("junk.p12");
        std::fs::write(&junk, b"\x30\x03\x02\x01\x00").unwrap();
        let err = with_truststore(&junk, None, Some(password)).unwrap_err();
        assert!(
            err.contains("junk.p12") && err.contains("not a PKCS12 file"),
            "{err}"
        );
        assert!(!err.contains(password), "{err}");

        // Certificates inline and a PKCS12 file at once: ambiguous.
        let mut worker = data_props("connect-standalone.properties");
        worker.insert(
            "producer.ssl.truststore.location".into(),
            store.display().to_string(),
        );
        worker.insert("producer.ssl.truststore.password".into(), password.into());
        worker.insert("producer.ssl.truststore.certificates".into(), want.clone());
        let err = from_connect(
            worker,
            data_props("outbox-connector.properties"),
            Path::new("w"),
            Path::new("c"),
        )
        .unwrap_err();
        let text = crate::chain::DisplayChain(&err).to_string();
        assert!(
            text.contains("producer.ssl.truststore.certificates"),
            "{text}"
        );

        // A PEM truststore leaves the password unused: warned about.
        let pem = dir.path().join("ca.pem");
        std::fs::write(&pem, &want).unwrap();
        let t = with_truststore(&pem, None, Some(password)).unwrap();
        assert_eq!(
            t.config.kafka.producer["ssl.ca.location"],
            pem.to_str().unwrap()
        );
        assert!(t.ignored("producer.ssl.truststore.password"));
    }

    #[test]
    fn jaas_lines() {
        let plain = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p\"w";"#;
        assert_eq!(parse_jaas(plain), Ok(("u".into(), "p\"w".into())));
        let scram = "org.apache.kafka.common.security.scram.ScramLoginModule required\n  username=u\n  password=pw ;";
        assert_eq!(parse_jaas(scram), Ok(("u".into(), "pw".into())));
        for bad in [
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"secret\"",
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"secret;",
            "org.apache.kafka.common.security.plain.PlainLoginModule maybe username=u password=secret;",
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=u;",
            "a.B required x=1; c.D required y=2;",
        ] {
            let err = parse_jaas(bad).unwrap_err();
            assert!(!err.contains("secret"), "{err}");
        }
        let err = parse_jaas("com.sun.security.auth.module.Krb5LoginModule required;").unwrap_err();
        assert!(err.contains("Krb5LoginModule"), "{err}");
    }

    #[test]
    fn provider_references() {
        let providers: BTreeMap<String, Provider> = [("env".to_owned(), Provider::Env)].into();
        let env = |name: &str| (name == "PW").then(|| "secret".to_owned());
        let sub = |v: &str| substitute_providers("k", v, &providers, &env);
        assert_eq!(sub("${env:PW}").unwrap(), "secret");
        assert_eq!(sub("a${env:PW}b${env:PW}").unwrap(), "asecretbsecret");
        // Other references stay as they are.
        assert_eq!(sub("${routedByValue}").unwrap(), "${routedByValue}");
        assert_eq!(sub("${vault:x:y}").unwrap(), "${vault:x:y}");
        assert_eq!(sub("${env:PW").unwrap(), "${env:PW");
        assert!(sub("${env:UNSET}").is_err());
    }

    #[test]
    fn key_lists_do_not_overlap() {
        let mut seen = std::collections::BTreeSet::new();
        for key in IGNORED_CONNECTOR_KEYS
            .iter()
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

#[cfg(test)]
mod errors_tests {
    use super::*;
    use crate::sink::config::Tolerance;

    fn translate(extra: &[(&str, &str)]) -> Result<Translation, ConfigError> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/debezium");
        let read = |name: &str| {
            parse_properties(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap()
        };
        let mut connector = read("outbox-connector.properties");
        for (k, v) in extra {
            connector.insert((*k).into(), (*v).into());
        }
        from_connect(
            read("connect-standalone.properties"),
            connector,
            Path::new("w"),
            Path::new("c"),
        )
    }

    fn chain(e: &ConfigError) -> String {
        crate::chain::DisplayChain(e).to_string()
    }

    #[test]
    fn dead_letter_queue_keys() {
        let t = translate(&[
            ("errors.tolerance", "all"),
            ("errors.deadletterqueue.topic.name", "outbox.dlq"),
            ("errors.deadletterqueue.topic.replication.factor", "3"),
            ("errors.log.enable", "true"),
            ("errors.log.include.messages", "true"),
        ])
        .unwrap();
        let e = &t.config.errors;
        assert_eq!(e.tolerance, Tolerance::All);
        assert_eq!(e.dead_letter(), Some("outbox.dlq"));
        // walrelay's default, not Connect's false.
        assert!(e.dead_letter_context_headers);
        for key in [
            "errors.deadletterqueue.topic.replication.factor",
            "errors.log.enable",
            "errors.log.include.messages",
        ] {
            assert!(t.ignored(key), "{key} should be warned about");
        }
        // Debezium's own handling of NULL keys and ids and of text it
        // cannot expand.
        assert_eq!(t.config.router.null_key, crate::router::NullPolicy::Allow);
        assert_eq!(
            t.config.router.invalid_json_payload,
            crate::router::InvalidJsonPolicy::Pass
        );

        let t = translate(&[
            ("errors.tolerance", "all"),
            ("errors.deadletterqueue.topic.name", "outbox.dlq"),
            ("errors.deadletterqueue.context.headers.enable", "false"),
        ])
        .unwrap();
        assert!(!t.config.errors.dead_letter_context_headers);

        let t = translate(&[("errors.tolerance", "none")]).unwrap();
        assert_eq!(t.config.errors.dead_letter(), None);
    }

    #[test]
    fn tolerance_all_without_a_topic_is_refused() {
        let err = translate(&[("errors.tolerance", "all")]).unwrap_err();
        let text = chain(&err);
        assert!(
            text.contains("errors.deadletterqueue.topic.name") && text.contains("errors.tolerance"),
            "{text}"
        );
        let err = translate(&[
            ("errors.tolerance", "all"),
            ("errors.deadletterqueue.topic.name", "no good"),
        ])
        .unwrap_err();
        assert!(
            chain(&err).contains("errors.deadletterqueue.topic.name"),
            "{err}"
        );
        let err = translate(&[("errors.tolerance", "some")]).unwrap_err();
        assert!(chain(&err).contains("errors.tolerance"), "{err}");
    }
}
