//! Configuration: walrelay's native TOML, validated before anything connects.
//!
//! Owns parsing, defaults and validation of every setting, and the [`Secret`]
//! type that keeps passwords out of `Debug`, logs and errors. It never opens
//! connections. Debezium's property forms (Kafka Connect worker + connector
//! files, Debezium Server's `application.properties`) are translated into
//! this same [`Config`] by [`debezium`], so the engine has one shape to trust.

pub mod debezium;
pub mod properties;
pub mod server;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::router::RouterConfig;

/// Default PostgreSQL port.
pub const DEFAULT_PG_PORT: u16 = 5432;
/// Default slot name (Debezium's is `debezium`; ours differs so both can coexist).
pub const DEFAULT_SLOT: &str = "walrelay";
/// Default publication name.
pub const DEFAULT_PUBLICATION: &str = "walrelay_outbox";
/// Default outbox table.
pub const DEFAULT_OUTBOX_TABLE: &str = "public.outbox";
/// Default interval between standby status updates.
pub const DEFAULT_STATUS_INTERVAL_MS: u64 = 1_000;
/// Longest allowed status interval: well inside PostgreSQL's default
/// `wal_sender_timeout` of 60 s.
pub const MAX_STATUS_INTERVAL_MS: u64 = 10_000;
/// Default bound on silence from the server before the connection is
/// considered dead (the walsender sends keepalives at half its timeout).
pub const DEFAULT_RECEIVE_TIMEOUT_MS: u64 = 60_000;
/// Default TCP connect + authentication timeout.
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 10_000;
/// Default bound on waiting for in-flight deliveries at shutdown.
pub const DEFAULT_SHUTDOWN_TIMEOUT_MS: u64 = 10_000;
/// Default first reconnect delay.
pub const DEFAULT_RECONNECT_MIN_MS: u64 = 200;
/// Default longest reconnect delay.
pub const DEFAULT_RECONNECT_MAX_MS: u64 = 10_000;

/// A secret string: never shown by `Debug` or `Display`.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself; call only where it is handed to a connection.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Whole configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Connection to the database holding the outbox table.
    pub postgres: PostgresConfig,
    /// Slot, publication and stream settings.
    #[serde(default)]
    pub replication: ReplicationConfig,
    /// Which table is the outbox and what to do with non-insert changes.
    #[serde(default)]
    pub outbox: OutboxConfig,
    /// Debezium EventRouter options (names as in Debezium, snake_case).
    #[serde(default)]
    pub router: RouterConfig,
    /// How keys, values and headers are serialised (Kafka Connect converters).
    #[serde(default)]
    pub converters: ConvertersConfig,
    /// What Debezium's connector adds to records beyond the row.
    #[serde(default)]
    pub debezium: DebeziumConfig,
    /// Debezium heartbeats.
    #[serde(default)]
    pub heartbeat: HeartbeatConfig,
    /// Kafka producer.
    pub kafka: KafkaConfig,
    /// Process behaviour.
    #[serde(default)]
    pub runtime: RuntimeConfig,
    /// The `/metrics`, `/healthz` and `/readyz` listener.
    #[serde(default)]
    pub metrics: crate::metrics::MetricsConfig,
    /// Slot lag monitor thresholds.
    #[serde(default)]
    pub lag: crate::lag::LagConfig,
    /// What happens to an event walrelay cannot route or Kafka rejects.
    #[serde(default)]
    pub errors: ErrorsConfig,
}

/// PostgreSQL connection.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostgresConfig {
    /// Host name or address.
    pub host: String,
    /// Port.
    #[serde(default = "default_pg_port")]
    pub port: u16,
    /// Role; needs the REPLICATION attribute.
    pub user: String,
    /// Password written inline (prefer `password_env` or `password_file`).
    #[serde(default)]
    pub password: Option<Secret>,
    /// Name of an environment variable holding the password.
    #[serde(default)]
    pub password_env: Option<String>,
    /// Path of a file holding the password (trailing newline ignored).
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// Database.
    pub dbname: String,
    /// TCP connect + authentication timeout in milliseconds.
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
    /// `application_name` reported to the server.
    #[serde(default = "default_application_name")]
    pub application_name: String,
    /// TLS use and verification, as libpq's `sslmode`.
    #[serde(default)]
    pub sslmode: SslMode,
    /// CA certificate file (PEM) verifying the server, or `system` for the
    /// system's trust store (which needs `sslmode = "verify-full"`). Unset:
    /// `~/.postgresql/root.crt` when it exists, as with libpq.
    #[serde(default)]
    pub sslrootcert: Option<String>,
    /// Client certificate file (PEM, may hold the chain). Unset:
    /// `~/.postgresql/postgresql.crt` when it exists.
    #[serde(default)]
    pub sslcert: Option<PathBuf>,
    /// Private key of the client certificate (PEM or DER PKCS#8; must not be
    /// readable by group or others). Unset: `~/.postgresql/postgresql.key`.
    #[serde(default)]
    pub sslkey: Option<PathBuf>,
    /// Passphrase of an encrypted `sslkey`, written inline (prefer
    /// `sslpassword_env` or `sslpassword_file`).
    #[serde(default)]
    pub sslpassword: Option<Secret>,
    /// Name of an environment variable holding the `sslkey` passphrase.
    #[serde(default)]
    pub sslpassword_env: Option<String>,
    /// Path of a file holding the `sslkey` passphrase.
    #[serde(default)]
    pub sslpassword_file: Option<PathBuf>,
    /// SCRAM channel binding, as libpq's `channel_binding`.
    #[serde(default)]
    pub channel_binding: ChannelBindingMode,
}

/// libpq's `sslmode`: whether TLS is used and what is verified.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SslMode {
    /// Never TLS.
    Disable,
    /// Plain first; TLS only when the server refuses the plain connection.
    Allow,
    /// TLS when the server offers it, plain otherwise (libpq's default).
    #[default]
    Prefer,
    /// TLS or nothing; the server certificate is verified only when a root
    /// certificate is configured (then as `verify-ca`).
    Require,
    /// TLS, the server certificate chain verified against the root certificate.
    VerifyCa,
    /// As `verify-ca`, and the certificate must name the host.
    VerifyFull,
}

impl SslMode {
    /// Parses libpq's spelling.
    pub fn parse(value: &str) -> Option<SslMode> {
        Some(match value {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }

    /// libpq's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// libpq's `channel_binding`: SCRAM-SHA-256-PLUS over TLS.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChannelBindingMode {
    /// Never bind.
    Disable,
    /// Bind when the connection is TLS and the server offers it.
    #[default]
    Prefer,
    /// Refuse to authenticate without channel binding.
    Require,
}

impl fmt::Debug for PostgresConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("password", &self.password)
            .field("password_env", &self.password_env)
            .field("password_file", &self.password_file)
            .field("dbname", &self.dbname)
            .field("sslmode", &self.sslmode)
            .field("sslrootcert", &self.sslrootcert)
            .field("sslcert", &self.sslcert)
            .field("sslkey", &self.sslkey)
            .field("sslpassword", &self.sslpassword)
            .field("sslpassword_env", &self.sslpassword_env)
            .field("sslpassword_file", &self.sslpassword_file)
            .field("channel_binding", &self.channel_binding)
            .finish()
    }
}

/// Slot, publication and stream settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicationConfig {
    /// Logical replication slot name.
    #[serde(default = "default_slot")]
    pub slot: String,
    /// Publication name.
    #[serde(default = "default_publication")]
    pub publication: String,
    /// Create the slot when it does not exist. Only at first start: a slot
    /// that disappears while walrelay runs is a fatal error (recreating it
    /// would skip events).
    #[serde(default = "default_true")]
    pub create_slot: bool,
    /// With `create_slot`: when walrelay may create a slot that is missing
    /// at start. PostgreSQL keeps no trace of a dropped slot, so walrelay
    /// records each slot it uses in its publication's comment.
    #[serde(default)]
    pub slot_missing: SlotMissing,
    /// With `publication_mode = "table"`: create the publication
    /// `FOR TABLE <outbox>` when it does not exist (false: it must exist, as
    /// with mode `disabled`). Ignored by the other modes.
    #[serde(default = "default_true")]
    pub create_publication: bool,
    /// How the publication is created or checked (Debezium's
    /// `publication.autocreate.mode`, plus walrelay's own `table`).
    #[serde(default)]
    pub publication_mode: PublicationMode,
    /// The `publish` option used when walrelay creates the publication, e.g.
    /// `insert` (Debezium derives it from `skipped.operations`). Unset: mode
    /// `table` publishes `insert, update, delete`; the other modes use
    /// PostgreSQL's default. Existing publications are never changed for it.
    #[serde(default)]
    pub publish: Option<String>,
    /// What to do when the slot has no position of its own yet (Debezium's
    /// `snapshot.mode`).
    #[serde(default)]
    pub snapshot_mode: SnapshotMode,
    /// Drop the slot on an orderly shutdown (Debezium's `slot.drop.on.stop`).
    /// Everything written while walrelay is stopped is then lost to it; for
    /// tests and throwaway setups only.
    #[serde(default)]
    pub slot_drop_on_stop: bool,
    /// Milliseconds between standby status updates.
    #[serde(default = "default_status_interval_ms")]
    pub status_interval_ms: u64,
    /// Milliseconds of silence from the server after which the connection
    /// is considered dead and re-established.
    #[serde(default = "default_receive_timeout_ms")]
    pub receive_timeout_ms: u64,
    /// First reconnect delay in milliseconds (doubles up to the maximum, with jitter).
    #[serde(default = "default_reconnect_min_ms")]
    pub reconnect_min_ms: u64,
    /// Longest reconnect delay in milliseconds.
    #[serde(default = "default_reconnect_max_ms")]
    pub reconnect_max_ms: u64,
    /// Ask the server (PostgreSQL 14 and later) to stream large
    /// transactions while they run (pgoutput protocol version 2,
    /// `streaming 'on'`); walrelay spills them to temporary files until
    /// their commit, so its memory stays bounded whatever their size. Off,
    /// or on an older server: protocol version 1, whole transactions after
    /// their commit.
    #[serde(default = "default_true")]
    pub streaming: bool,
    /// Directory for the spill files of streamed transactions (unlinked
    /// temporary files, as large as the open transactions' outbox rows).
    /// Unset: the system temporary directory (`TMPDIR`, else `/tmp`),
    /// often a small tmpfs; point it at a disk with room.
    #[serde(default)]
    pub spill_dir: Option<PathBuf>,
    /// Microseconds to pause after a read from the server that brought
    /// little (less than 64 KiB), so the next read takes a batch: every
    /// read that wakes walrelay costs the walsender a wake-up too. Adds at
    /// most this much latency; 0 reads as soon as bytes arrive.
    #[serde(default = "default_read_coalesce_us")]
    pub read_coalesce_us: u64,
}

/// Default of `replication.read_coalesce_us`.
pub const DEFAULT_READ_COALESCE_US: u64 = 1000;

fn default_read_coalesce_us() -> u64 {
    DEFAULT_READ_COALESCE_US
}

impl Default for ReplicationConfig {
    fn default() -> Self {
        ReplicationConfig {
            slot: default_slot(),
            publication: default_publication(),
            create_slot: true,
            slot_missing: SlotMissing::IfNew,
            create_publication: true,
            publication_mode: PublicationMode::Table,
            publish: None,
            snapshot_mode: SnapshotMode::NoData,
            slot_drop_on_stop: false,
            status_interval_ms: DEFAULT_STATUS_INTERVAL_MS,
            receive_timeout_ms: DEFAULT_RECEIVE_TIMEOUT_MS,
            reconnect_min_ms: DEFAULT_RECONNECT_MIN_MS,
            reconnect_max_ms: DEFAULT_RECONNECT_MAX_MS,
            streaming: true,
            spill_dir: None,
            read_coalesce_us: DEFAULT_READ_COALESCE_US,
        }
    }
}

/// When a slot missing at start may be created (`replication.slot_missing`).
/// A slot that disappears while walrelay runs is always fatal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SlotMissing {
    /// Create it unless the publication's comment records that this slot
    /// existed (walrelay adds that line once the slot exists; it needs
    /// ownership of the publication). A recorded slot that is missing was
    /// dropped, and a new one would skip what was written since: fatal.
    #[default]
    IfNew,
    /// Create it whenever it is missing, with a loud warning: events written
    /// since the old slot's position are skipped.
    Create,
    /// Never create it: the operator creates the slot.
    Fail,
}

impl SlotMissing {
    /// The configuration spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SlotMissing::IfNew => "if_new",
            SlotMissing::Create => "create",
            SlotMissing::Fail => "fail",
        }
    }
}

/// How the publication is created or checked. Every mode then requires the
/// publication to publish the outbox table's inserts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum PublicationMode {
    /// walrelay's own: create `FOR TABLE <outbox>` when missing (if
    /// `create_publication`); an existing one is used as it is.
    #[default]
    Table,
    /// Debezium's `all_tables`: create `FOR ALL TABLES` when missing; an
    /// existing one is used as it is.
    AllTables,
    /// Debezium's `filtered`: create `FOR TABLE <outbox>` when missing, or
    /// `ALTER PUBLICATION ... SET TABLE <outbox>` when its table set
    /// differs; an existing `FOR ALL TABLES` publication is an error.
    Filtered,
    /// Debezium's `disabled`: the publication must exist.
    Disabled,
    /// Debezium's `no_tables`: create an empty publication when missing
    /// (walrelay then stops until the outbox is added to it).
    NoTables,
}

impl PublicationMode {
    /// The Debezium spelling (`publication.autocreate.mode`), or `table`.
    pub fn as_str(self) -> &'static str {
        match self {
            PublicationMode::Table => "table",
            PublicationMode::AllTables => "all_tables",
            PublicationMode::Filtered => "filtered",
            PublicationMode::Disabled => "disabled",
            PublicationMode::NoTables => "no_tables",
        }
    }
}

/// What happens when walrelay starts on a slot with no position of its own
/// (Debezium's `snapshot.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotMode {
    /// Stream only: start at the slot's position (Debezium's `no_data`).
    #[default]
    NoData,
    /// Emit the outbox table's existing rows once, when walrelay creates the
    /// slot, then stream (Debezium's `initial`).
    Initial,
    /// Emit the outbox table's existing rows at every start, then stream.
    Always,
    /// Like `initial`, and also when the slot's position is no longer
    /// usable (Debezium's `when_needed`).
    WhenNeeded,
}

/// What Debezium's `table.op.invalid.behavior` does with UPDATEs of outbox rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OpInvalidBehavior {
    /// Log a warning and drop the row.
    #[default]
    Warn,
    /// Log an error and drop the row.
    Error,
    /// Stop the pipeline without confirming past the row.
    Fatal,
}

/// The outbox table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutboxConfig {
    /// `schema.table` (schema defaults to `public`).
    #[serde(default = "default_outbox_table")]
    pub table: String,
    /// Debezium's `table.op.invalid.behavior` for UPDATEs.
    #[serde(default)]
    pub op_invalid_behavior: OpInvalidBehavior,
}

impl Default for OutboxConfig {
    fn default() -> Self {
        OutboxConfig {
            table: default_outbox_table(),
            op_invalid_behavior: OpInvalidBehavior::Warn,
        }
    }
}

impl OutboxConfig {
    /// Splits `table` into schema and table name. Quoted identifiers
    /// (`"My Schema"."Outbox"`) keep their case; unquoted ones fold to lower
    /// case like PostgreSQL does.
    pub fn qualified(&self) -> Result<(String, String), ConfigError> {
        parse_qualified_name(&self.table).ok_or_else(|| ConfigError::Invalid {
            key: "outbox.table".into(),
            reason: format!("{:?} is not a table name like schema.table", self.table),
        })
    }
}

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

/// Default `topic.prefix`.
pub const DEFAULT_TOPIC_PREFIX: &str = "walrelay";

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
}

impl Default for DebeziumConfig {
    fn default() -> Self {
        DebeziumConfig {
            topic_prefix: default_topic_prefix(),
            extended_headers: false,
            server_mode: false,
        }
    }
}

/// Default heartbeat topic prefix (Debezium's `topic.heartbeat.prefix`).
pub const DEFAULT_HEARTBEAT_TOPIC_PREFIX: &str = "__debezium-heartbeat";

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
}

impl Default for HeartbeatConfig {
    fn default() -> Self {
        HeartbeatConfig {
            interval_ms: 0,
            action_query: None,
            topic_prefix: default_heartbeat_topic_prefix(),
        }
    }
}

fn default_heartbeat_topic_prefix() -> String {
    DEFAULT_HEARTBEAT_TOPIC_PREFIX.into()
}

fn default_topic_prefix() -> String {
    DEFAULT_TOPIC_PREFIX.into()
}

/// Kafka producer settings.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaConfig {
    /// `bootstrap.servers`.
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
    pub secrets_env: BTreeMap<String, String>,
    /// Secret librdkafka properties read from files (trailing newline
    /// ignored): property name → path (resolved into `secrets` at load).
    #[serde(default)]
    pub secrets_file: BTreeMap<String, PathBuf>,
}

impl KafkaConfig {
    /// Every producer property: `producer`, then `secrets`. Only for handing
    /// to librdkafka.
    pub fn properties(&self) -> impl Iterator<Item = (&str, &str)> {
        self.producer
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain(self.secrets.iter().map(|(k, v)| (k.as_str(), v.expose())))
    }
}

/// Property names whose values are secrets.
pub fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    k.contains("password")
        || k.contains("secret")
        || k.contains("sasl.jaas")
        || k.ends_with(".key.pem")
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
            .finish()
    }
}

/// Process behaviour.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeConfig {
    /// Milliseconds to wait for in-flight deliveries on SIGTERM.
    #[serde(default = "default_shutdown_timeout_ms")]
    pub shutdown_timeout_ms: u64,
    /// Tokio worker threads; 0 runs every task on one thread (the source
    /// hands batches to the sink without waking another thread).
    #[serde(default = "default_worker_threads")]
    pub worker_threads: usize,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            shutdown_timeout_ms: DEFAULT_SHUTDOWN_TIMEOUT_MS,
            worker_threads: DEFAULT_WORKER_THREADS,
        }
    }
}

/// Default of `runtime.worker_threads`.
pub const DEFAULT_WORKER_THREADS: usize = 0;

fn default_worker_threads() -> usize {
    DEFAULT_WORKER_THREADS
}

/// Kafka Connect's `errors.tolerance`: what a bad event does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Tolerance {
    /// Stop without confirming past the event (the default).
    #[default]
    None,
    /// Send the event to `errors.dead_letter_topic` and go on.
    All,
}

/// The error policy: stop on a bad event, or dead-letter it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorsConfig {
    /// `none`: a bad event stops walrelay, nothing after it is confirmed.
    /// `all`: it goes to `dead_letter_topic` and the stream goes on
    /// (Kafka Connect's `errors.tolerance`).
    #[serde(default)]
    pub tolerance: Tolerance,
    /// Topic receiving bad events with `tolerance = "all"`; required then,
    /// because skipping an event would lose it
    /// (`errors.deadletterqueue.topic.name`).
    #[serde(default)]
    pub dead_letter_topic: Option<String>,
    /// Add the context headers (reason, LSNs, event id, intended topic) to
    /// dead-letter records (`errors.deadletterqueue.context.headers.enable`).
    #[serde(default = "default_true")]
    pub dead_letter_context_headers: bool,
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
    pub fn dead_letter(&self) -> Option<&str> {
        match self.tolerance {
            Tolerance::All => self.dead_letter_topic.as_deref(),
            Tolerance::None => None,
        }
    }

    /// Checks the section; the error names the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(topic) = &self.dead_letter_topic {
            crate::router::check_topic_name(topic).map_err(|reason| ConfigError::Invalid {
                key: "errors.dead_letter_topic".into(),
                reason: format!("{topic:?} is not a legal kafka topic name: {reason}"),
            })?;
        }
        if self.tolerance == Tolerance::All && self.dead_letter_topic.is_none() {
            return Err(ConfigError::Missing {
                key: "errors.dead_letter_topic".into(),
                reason: "errors.tolerance = \"all\" sends bad events there; without it they would be skipped and lost".into(),
            });
        }
        Ok(())
    }
}

/// Configuration errors; each names the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}")]
    Read {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// TOML syntax or an unknown/mistyped key.
    #[error("invalid config file {path}: {message}")]
    Parse {
        /// The path.
        path: PathBuf,
        /// What the parser said, with the key and position.
        message: String,
    },
    /// A value is present but unusable.
    #[error("invalid value for {key}: {reason}")]
    Invalid {
        /// The key.
        key: String,
        /// Why.
        reason: String,
    },
    /// A `.properties` or connector JSON file that does not parse.
    #[error("invalid config file {path}")]
    Syntax {
        /// The path.
        path: PathBuf,
        /// What is wrong, with the line.
        #[source]
        source: properties::PropertiesError,
    },
    /// A required key is absent.
    #[error("{key} is required: {reason}")]
    Missing {
        /// The key, as the file spells it.
        key: String,
        /// Why it is needed or what to set.
        reason: String,
    },
    /// A Debezium or Kafka setting walrelay does not implement and that
    /// would change what reaches Kafka, so walrelay refuses to start.
    #[error("{key} is not supported: {reason}")]
    Unsupported {
        /// The key, as the file spells it.
        key: String,
        /// Why, and what to do instead.
        reason: String,
    },
    /// An error in a specific file of a multi-file configuration.
    #[error("in {path}")]
    InFile {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: Box<ConfigError>,
    },
}

impl Config {
    /// Reads, parses and validates a configuration file, resolving secrets
    /// from the environment or files. The extension chooses the form:
    /// `.properties` is Debezium Server's `application.properties` (ignored
    /// keys are warned about here), anything else walrelay's TOML.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        if path.extension().is_some_and(|e| e == "properties") {
            let translation = debezium::load_server(path)?;
            translation.warn();
            return Ok(translation.config);
        }
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Config::from_toml(&text, path)
    }

    /// Parses and validates TOML text; `path` is only used in messages.
    pub fn from_toml(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let mut config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            message: parse_error_message(&e, text),
        })?;
        config.resolve_secrets()?;
        config.validate()?;
        Ok(config)
    }

    fn resolve_secrets(&mut self) -> Result<(), ConfigError> {
        let pg = &mut self.postgres;
        let sources = [
            pg.password.is_some(),
            pg.password_env.is_some(),
            pg.password_file.is_some(),
        ];
        if sources.iter().filter(|s| **s).count() > 1 {
            return Err(ConfigError::Invalid {
                key: "postgres.password".into(),
                reason: "set only one of password, password_env and password_file".into(),
            });
        }
        if let Some(var) = &pg.password_env {
            let value = std::env::var(var).map_err(|_| ConfigError::Invalid {
                key: "postgres.password_env".into(),
                reason: format!("environment variable {var} is not set"),
            })?;
            pg.password = Some(Secret::new(value));
        }
        if let Some(file) = &pg.password_file {
            let value = std::fs::read_to_string(file).map_err(|e| ConfigError::Invalid {
                key: "postgres.password_file".into(),
                reason: format!("cannot read {}: {e}", file.display()),
            })?;
            pg.password = Some(Secret::new(value.trim_end_matches(['\r', '\n'])));
        }
        pg.sslpassword = resolve_secret(
            "postgres.sslpassword",
            pg.sslpassword.take(),
            pg.sslpassword_env.as_deref(),
            pg.sslpassword_file.as_deref(),
        )?;
        let kafka = &mut self.kafka;
        let from_env = kafka
            .secrets_env
            .iter()
            .map(|(k, v)| (k, "kafka.secrets_env", Some(v.as_str()), None));
        let from_file = kafka
            .secrets_file
            .iter()
            .map(|(k, p)| (k, "kafka.secrets_file", None, Some(p.as_path())));
        for (name, table, env, file) in from_env.chain(from_file) {
            let key = format!("{table}.\"{name}\"");
            if kafka.secrets.contains_key(name) {
                return Err(ConfigError::Invalid {
                    key,
                    reason: format!(
                        "{name} is set more than once (kafka.secrets, secrets_env, secrets_file)"
                    ),
                });
            }
            let value = match (env, file) {
                (Some(var), _) => std::env::var(var).map_err(|_| ConfigError::Invalid {
                    key: key.clone(),
                    reason: format!("environment variable {var} is not set"),
                })?,
                (_, Some(path)) => std::fs::read_to_string(path)
                    .map_err(|e| ConfigError::Invalid {
                        key: key.clone(),
                        reason: format!("cannot read {}: {e}", path.display()),
                    })?
                    .trim_end_matches(['\r', '\n'])
                    .to_owned(),
                (None, None) => continue,
            };
            kafka.secrets.insert(name.clone(), Secret::new(value));
        }
        Ok(())
    }

    /// Checks every value; the error names the key and why.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, reason: &str| ConfigError::Invalid {
            key: key.into(),
            reason: reason.into(),
        };
        if self.postgres.host.is_empty() {
            return Err(invalid("postgres.host", "must not be empty"));
        }
        if self.postgres.user.is_empty() {
            return Err(invalid("postgres.user", "must not be empty"));
        }
        if self.postgres.dbname.is_empty() {
            return Err(invalid("postgres.dbname", "must not be empty"));
        }
        validate_postgres_tls(&self.postgres)?;
        validate_slot_name(&self.replication.slot)?;
        if self.replication.publication.is_empty() || self.replication.publication.len() > 63 {
            return Err(invalid("replication.publication", "must be 1 to 63 bytes"));
        }
        let interval = self.replication.status_interval_ms;
        if interval == 0 || interval > MAX_STATUS_INTERVAL_MS {
            return Err(invalid(
                "replication.status_interval_ms",
                &format!("must be between 1 and {MAX_STATUS_INTERVAL_MS}"),
            ));
        }
        if self.replication.read_coalesce_us > 100_000 {
            return Err(invalid(
                "replication.read_coalesce_us",
                "must be at most 100000 (0.1 s); it is added to every event's latency",
            ));
        }
        if self.replication.receive_timeout_ms < 2 * interval {
            return Err(invalid(
                "replication.receive_timeout_ms",
                "must be at least twice replication.status_interval_ms",
            ));
        }
        if self.replication.reconnect_min_ms == 0
            || self.replication.reconnect_min_ms > self.replication.reconnect_max_ms
        {
            return Err(invalid(
                "replication.reconnect_min_ms",
                "must be above 0 and at most replication.reconnect_max_ms",
            ));
        }
        self.outbox.qualified()?;
        self.lag.validate().map_err(|reason| ConfigError::Invalid {
            key: "lag".into(),
            reason,
        })?;
        self.router.validate().map_err(|e| ConfigError::Invalid {
            key: "router".into(),
            reason: e.to_string(),
        })?;
        if self.kafka.bootstrap_servers.trim().is_empty() {
            return Err(invalid("kafka.bootstrap_servers", "must not be empty"));
        }
        for key in ["bootstrap.servers", "enable.idempotence"] {
            if key == "enable.idempotence" {
                if let Some(v) = self.kafka.producer.get(key) {
                    if v != "true" {
                        return Err(invalid(
                            "kafka.producer.enable.idempotence",
                            "walrelay requires the idempotent producer (per-key order across retries)",
                        ));
                    }
                }
            } else if self.kafka.producer.contains_key(key) {
                return Err(invalid(
                    "kafka.producer.bootstrap.servers",
                    "set kafka.bootstrap_servers instead",
                ));
            }
        }
        for key in self.kafka.secrets.keys() {
            if self.kafka.producer.contains_key(key) {
                return Err(invalid(
                    &format!("kafka.secrets.{key}"),
                    "is also set in kafka.producer; set it once",
                ));
            }
        }
        if let Some(publish) = &self.replication.publish {
            validate_publish(publish)?;
        }
        if self.heartbeat.topic_prefix.trim().is_empty() {
            return Err(invalid("heartbeat.topic_prefix", "must not be empty"));
        }
        if self.debezium.topic_prefix.trim().is_empty() {
            return Err(invalid("debezium.topic_prefix", "must not be empty"));
        }
        self.errors.validate()?;
        if let Some(acks) = self.kafka.producer.get("acks") {
            if acks != "all" && acks != "-1" {
                return Err(invalid(
                    "kafka.producer.acks",
                    "must be all: an event is confirmed to PostgreSQL only once every in-sync replica has it",
                ));
            }
        }
        Ok(())
    }

    /// The standby status update interval.
    pub fn status_interval(&self) -> Duration {
        Duration::from_millis(self.replication.status_interval_ms)
    }
}

/// Checks a publication `publish` list: comma-separated `insert`, `update`,
/// `delete`, `truncate`, including `insert` (the outbox is inserts).
pub fn validate_publish(publish: &str) -> Result<(), ConfigError> {
    let ops: Vec<&str> = publish.split(',').map(str::trim).collect();
    let invalid = |reason: String| ConfigError::Invalid {
        key: "replication.publish".into(),
        reason,
    };
    for op in &ops {
        if !matches!(*op, "insert" | "update" | "delete" | "truncate") {
            return Err(invalid(format!(
                "{op:?} is not one of insert, update, delete, truncate"
            )));
        }
    }
    if !ops.contains(&"insert") {
        return Err(invalid(
            "must include insert: outbox events are inserts".into(),
        ));
    }
    Ok(())
}

/// Checks a replication slot name the way PostgreSQL does: 1 to 63
/// characters of `a-z`, `0-9` and `_`.
pub fn validate_slot_name(name: &str) -> Result<(), ConfigError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(ConfigError::Invalid {
            key: "replication.slot".into(),
            reason: format!(
                "{name:?} is not a valid slot name (1 to 63 characters of lower-case letters, digits and underscores)"
            ),
        })
    }
}

/// Parses `schema.table`, `table`, or quoted forms, folding unquoted parts
/// to lower case.
pub fn parse_qualified_name(name: &str) -> Option<(String, String)> {
    let mut parts = Vec::new();
    let mut chars = name.trim().chars().peekable();
    loop {
        let mut part = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next()? {
                    '"' if chars.peek() == Some(&'"') => {
                        chars.next();
                        part.push('"');
                    }
                    '"' => break,
                    c => part.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == '.' {
                    break;
                }
                part.extend(c.to_lowercase());
                chars.next();
            }
        }
        if part.is_empty() {
            return None;
        }
        parts.push(part);
        match chars.next() {
            None => break,
            Some('.') => continue,
            Some(_) => return None,
        }
    }
    match parts.len() {
        1 => Some(("public".into(), parts.remove(0))),
        2 => {
            let table = parts.pop()?;
            Some((parts.pop()?, table))
        }
        _ => None,
    }
}

fn default_pg_port() -> u16 {
    DEFAULT_PG_PORT
}

/// A TOML error as position and message, without the quoted source line
/// that `toml` adds: that line may hold a password.
fn parse_error_message(error: &toml::de::Error, text: &str) -> String {
    match error.span() {
        Some(span) => {
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("{} at line {line}, column {column}", error.message())
        }
        None => error.message().to_owned(),
    }
}

/// One secret given inline, by environment variable (`<key>_env`) or by
/// file (`<key>_file`, trailing newline ignored); errors name the key, never
/// the value.
fn resolve_secret(
    key: &str,
    inline: Option<Secret>,
    env: Option<&str>,
    file: Option<&Path>,
) -> Result<Option<Secret>, ConfigError> {
    let count = [inline.is_some(), env.is_some(), file.is_some()]
        .iter()
        .filter(|s| **s)
        .count();
    if count > 1 {
        return Err(ConfigError::Invalid {
            key: key.into(),
            reason: format!("set only one of {key}, {key}_env and {key}_file"),
        });
    }
    if let Some(var) = env {
        let value = std::env::var(var).map_err(|_| ConfigError::Invalid {
            key: format!("{key}_env"),
            reason: format!("environment variable {var} is not set"),
        })?;
        return Ok(Some(Secret::new(value)));
    }
    if let Some(file) = file {
        let value = std::fs::read_to_string(file).map_err(|e| ConfigError::Invalid {
            key: format!("{key}_file"),
            reason: format!("cannot read {}: {e}", file.display()),
        })?;
        return Ok(Some(Secret::new(value.trim_end_matches(['\r', '\n']))));
    }
    Ok(inline)
}

/// The `[postgres]` TLS keys: combinations libpq refuses, and files that
/// cannot be read (named by key, checked again when connecting).
fn validate_postgres_tls(pg: &PostgresConfig) -> Result<(), ConfigError> {
    let invalid = |key: &str, reason: String| ConfigError::Invalid {
        key: key.into(),
        reason,
    };
    if pg.channel_binding == ChannelBindingMode::Require && pg.sslmode == SslMode::Disable {
        return Err(invalid(
            "postgres.channel_binding",
            "require needs TLS, but postgres.sslmode is disable".into(),
        ));
    }
    match pg.sslrootcert.as_deref() {
        Some("system") if pg.sslmode != SslMode::VerifyFull => {
            return Err(invalid(
                "postgres.sslrootcert",
                format!(
                    "system needs postgres.sslmode = \"verify-full\" (it is {:?})",
                    pg.sslmode.as_str()
                ),
            ))
        }
        Some("system") => {}
        Some("") => return Err(invalid("postgres.sslrootcert", "must not be empty".into())),
        Some(path) => readable("postgres.sslrootcert", Path::new(path))?,
        None => {}
    }
    if let Some(cert) = &pg.sslcert {
        readable("postgres.sslcert", cert)?;
    }
    if let Some(key) = &pg.sslkey {
        readable("postgres.sslkey", key)?;
    }
    if pg.sslcert.is_some() != pg.sslkey.is_some() {
        let (key, other) = if pg.sslcert.is_some() {
            ("postgres.sslkey", "postgres.sslcert")
        } else {
            ("postgres.sslcert", "postgres.sslkey")
        };
        return Err(invalid(key, format!("must be set together with {other}")));
    }
    Ok(())
}

fn readable(key: &str, path: &Path) -> Result<(), ConfigError> {
    std::fs::File::open(path)
        .map(drop)
        .map_err(|e| ConfigError::Invalid {
            key: key.into(),
            reason: format!("cannot read {}: {e}", path.display()),
        })
}
fn default_connect_timeout_ms() -> u64 {
    DEFAULT_CONNECT_TIMEOUT_MS
}
fn default_application_name() -> String {
    "walrelay".into()
}
fn default_slot() -> String {
    DEFAULT_SLOT.into()
}
fn default_publication() -> String {
    DEFAULT_PUBLICATION.into()
}
fn default_true() -> bool {
    true
}
fn default_status_interval_ms() -> u64 {
    DEFAULT_STATUS_INTERVAL_MS
}
fn default_receive_timeout_ms() -> u64 {
    DEFAULT_RECEIVE_TIMEOUT_MS
}
fn default_reconnect_min_ms() -> u64 {
    DEFAULT_RECONNECT_MIN_MS
}
fn default_reconnect_max_ms() -> u64 {
    DEFAULT_RECONNECT_MAX_MS
}
fn default_outbox_table() -> String {
    DEFAULT_OUTBOX_TABLE.into()
}
fn default_shutdown_timeout_ms() -> u64 {
    DEFAULT_SHUTDOWN_TIMEOUT_MS
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
[postgres]
host = "127.0.0.1"
user = "app"
password = "hunter2"
dbname = "app"

[kafka]
bootstrap_servers = "127.0.0.1:9092"
"#;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml(text, Path::new("test.toml"))
    }

    /// Asserts that `MINIMAL` followed by `extra` is refused with an error
    /// naming `key`.
    fn assert_refused_naming(extra: &str, key: &str) {
        let err = parse(&format!("{MINIMAL}\n{extra}")).unwrap_err();
        assert!(err.to_string().contains(key), "{err}");
    }

    #[test]
    fn minimal_config_gets_defaults() {
        let c = parse(MINIMAL).unwrap();
        assert_eq!(c.replication.slot, DEFAULT_SLOT);
        assert_eq!(
            c.outbox.qualified().unwrap(),
            ("public".into(), "outbox".into())
        );
        assert_eq!(c.router.route_by_field, "aggregatetype");
        assert_eq!(c.postgres.port, 5432);
    }

    #[test]
    fn debug_never_shows_secrets() {
        let c = parse(&format!(
            "{}\n[kafka.producer]\n\"sasl.password\" = \"s3cr3t\"\n",
            MINIMAL
        ))
        .unwrap();
        let shown = format!("{c:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
    }

    #[test]
    fn runtime_read_coalescing_and_spill_settings() {
        let c = parse(MINIMAL).unwrap();
        assert_eq!(c.runtime.worker_threads, 0);
        assert_eq!(c.replication.read_coalesce_us, 1000);
        assert_eq!(c.replication.spill_dir, None);
        let c = parse(&format!(
            "{MINIMAL}\n[replication]\nread_coalesce_us = 0\nspill_dir = \"/var/spill\"\n\
             [runtime]\nworker_threads = 2\n"
        ))
        .unwrap();
        assert_eq!(c.replication.read_coalesce_us, 0);
        assert_eq!(
            c.replication.spill_dir.as_deref(),
            Some(Path::new("/var/spill"))
        );
        assert_eq!(c.runtime.worker_threads, 2);
        assert_refused_naming(
            "[replication]\nread_coalesce_us = 200000\n",
            "replication.read_coalesce_us",
        );
    }

    #[test]
    fn unknown_key_is_named() {
        assert_refused_naming("[replication]\nslott = \"x\"\n", "slott");
    }

    #[test]
    fn bad_slot_name_is_named() {
        assert_refused_naming("[replication]\nslot = \"Bad-Name\"\n", "replication.slot");
    }

    #[test]
    fn acks_must_be_all() {
        assert_refused_naming("[kafka.producer]\nacks = \"1\"\n", "kafka.producer.acks");
    }

    #[test]
    fn errors_section() {
        let c = parse(MINIMAL).unwrap();
        assert_eq!(c.errors.tolerance, Tolerance::None);
        assert_eq!(c.errors.dead_letter(), None);
        assert_refused_naming(
            "[errors]\ntolerance = \"all\"\n",
            "errors.dead_letter_topic",
        );
        assert_refused_naming(
            "[errors]\ntolerance = \"all\"\ndead_letter_topic = \"a b\"\n",
            "errors.dead_letter_topic",
        );
        let c = parse(&format!(
            "{MINIMAL}\n[errors]\ntolerance = \"all\"\ndead_letter_topic = \"dlq\"\n"
        ))
        .unwrap();
        assert_eq!(c.errors.dead_letter(), Some("dlq"));
        assert!(c.errors.dead_letter_context_headers);
    }

    #[test]
    fn qualified_names() {
        assert_eq!(
            parse_qualified_name("Outbox"),
            Some(("public".into(), "outbox".into()))
        );
        assert_eq!(
            parse_qualified_name("app.outbox"),
            Some(("app".into(), "outbox".into()))
        );
        assert_eq!(
            parse_qualified_name("\"My\"\"S\".\"T.x\""),
            Some(("My\"S".into(), "T.x".into()))
        );
        assert_eq!(parse_qualified_name("a.b.c"), None);
        assert_eq!(parse_qualified_name(""), None);
    }

    #[test]
    fn password_from_env() {
        std::env::set_var("WALRELAY_TEST_CONFIG_PW", "fromenv");
        let text = MINIMAL.replace(
            "password = \"hunter2\"",
            "password_env = \"WALRELAY_TEST_CONFIG_PW\"",
        );
        let c = parse(&text).unwrap();
        assert_eq!(c.postgres.password.unwrap().expose(), "fromenv");
        let text = MINIMAL.replace(
            "password = \"hunter2\"",
            "password_env = \"WALRELAY_TEST_CONFIG_UNSET\"",
        );
        let err = parse(&text).unwrap_err();
        assert!(err.to_string().contains("postgres.password_env"), "{err}");
    }
}
