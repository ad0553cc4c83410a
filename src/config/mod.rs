//! Configuration: walrelay's native TOML, validated before anything connects.
//!
//! Owns the composition of the sections the stages define (each stage owns
//! its settings struct, defaults and `validate()`), the resolution of
//! secrets given by environment variable or file, and the checks only the
//! whole can make. Of its own it defines only `[runtime]` (the process:
//! worker threads, the shutdown bound); it never opens connections.
//! Debezium's property forms (Kafka Connect worker + connector
//! files, Debezium Server's `application.properties`) are translated into
//! this same [`Config`] by [`kafka_connect`] and [`debezium_server`], so the
//! engine has one shape to trust.

pub mod connector_json;
pub mod debezium_server;
pub mod kafka_connect;
pub(crate) mod process;

use self::process::validate_pipeline_name;
pub(crate) use self::process::ProcessConfig;

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::connect::config::ConvertersConfig;
use crate::heartbeat::HeartbeatConfig;
use crate::lag::LagConfig;
use crate::metrics::MetricsConfig;
use crate::postgres::config::{PostgresConfig, ReplicationConfig};
use crate::postgres::poll::config::{PollConfig, SourceConfig, SourceKind};
use crate::router::{DebeziumConfig, RouterConfig};
use crate::setting::SettingError;
use crate::sink::config::{ErrorsConfig, KafkaConfig};
use crate::txn::config::OutboxConfig;

/// Default bound on waiting for in-flight deliveries at shutdown.
pub(crate) const DEFAULT_SHUTDOWN_TIMEOUT_MS: u64 = 10_000;
/// Whole configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The pipeline's name: its `pipeline` label on every metric, its
    /// field in every log line, its row in `walrelay status`. The native
    /// TOML's `name` (default `default`), the connector's `name` in the
    /// Kafka Connect form.
    #[serde(default = "default_pipeline_name")]
    pub(crate) name: String,
    /// Connection to the database holding the outbox table.
    pub postgres: PostgresConfig,
    /// Which source the pipeline reads: the WAL (default) or polling.
    #[serde(default)]
    pub(crate) source: SourceConfig,
    /// Slot, publication and stream settings.
    #[serde(default)]
    pub replication: ReplicationConfig,
    /// The polling source (`source.kind = "poll"`).
    #[serde(default)]
    pub(crate) poll: PollConfig,
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
    /// Which broker the pipeline publishes to (`[sink]`; Kafka by
    /// default).
    #[serde(default)]
    pub(crate) sink: crate::sink::config::SinkConfig,
    /// Kafka producer (required when the sink is Kafka; with another
    /// broker, only for `kafka.exactly_once`, which is then refused).
    #[serde(default)]
    pub kafka: KafkaConfig,
    /// Process behaviour.
    #[serde(default)]
    pub(crate) runtime: RuntimeConfig,
    /// The `/metrics`, `/healthz` and `/readyz` listener.
    #[serde(default)]
    pub(crate) metrics: MetricsConfig,
    /// Slot lag monitor thresholds.
    #[serde(default)]
    pub(crate) lag: LagConfig,
    /// What happens to an event walrelay cannot route or Kafka rejects.
    #[serde(default)]
    pub(crate) errors: ErrorsConfig,
    /// Kafka Connect's transforms after the router (`[[transforms]]`, in
    /// order; Connect's `transforms=` after the EventRouter).
    #[serde(default)]
    pub(crate) transforms: Vec<crate::connect::transforms::config::TransformSpec>,
    /// The predicates the transforms name (`[[predicates]]`).
    #[serde(default)]
    pub(crate) predicates: Vec<crate::connect::transforms::config::PredicateSpec>,
    /// The CloudEvents value converter's options, named as Debezium names
    /// them (`converters.value = "cloud_events"`; the Kafka Connect forms'
    /// `value.converter.*`).
    #[serde(default)]
    pub(crate) cloudevents:
        std::collections::BTreeMap<String, crate::connect::transforms::config::OptionValue>,
}

/// Process behaviour.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RuntimeConfig {
    /// Milliseconds to wait for in-flight deliveries on SIGTERM.
    #[serde(default = "default_shutdown_timeout_ms")]
    pub(crate) shutdown_timeout_ms: u64,
    /// Tokio worker threads; 0 runs every task, of every pipeline, on one
    /// thread (the source hands batches to the sink without waking another
    /// thread). 0 stays the default with several pipelines: four pipelines
    /// on one thread drained at 1.23 times four processes' rate, on two
    /// workers at 1.07, with 0.76 and 0.94 of their CPU per event
    /// (docs/benchmarks.md; the walsenders need the cores).
    #[serde(default = "default_worker_threads")]
    pub(crate) worker_threads: usize,
    /// What a pipeline's fatal error does to the process.
    #[serde(default)]
    pub(crate) on_pipeline_failure: OnPipelineFailure,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            shutdown_timeout_ms: DEFAULT_SHUTDOWN_TIMEOUT_MS,
            worker_threads: DEFAULT_WORKER_THREADS,
            on_pipeline_failure: OnPipelineFailure::default(),
        }
    }
}

/// What a pipeline's fatal error does to the process
/// (`runtime.on_pipeline_failure`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum OnPipelineFailure {
    /// The pipeline stops alone; the others keep running, `/readyz` and
    /// `walrelay status` name it, and the process exits (status 1) once
    /// no pipeline is left running.
    #[default]
    Continue,
    /// Every other pipeline is stopped gracefully and the process exits
    /// with status 1, for supervisors that restart on exit.
    Exit,
}

/// Default of `runtime.worker_threads`: one thread.
pub(crate) const DEFAULT_WORKER_THREADS: usize = 0;

fn default_worker_threads() -> usize {
    DEFAULT_WORKER_THREADS
}

/// The name of a pipeline that names none.
pub(crate) const DEFAULT_PIPELINE_NAME: &str = crate::metrics::DEFAULT_PIPELINE;
/// Longest pipeline name.
pub(crate) const MAX_PIPELINE_NAME: usize = 128;

fn default_pipeline_name() -> String {
    DEFAULT_PIPELINE_NAME.into()
}

/// Configuration errors; each names the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}")]
    Read {
        /// The file as it was named (`--config`, or an `include`).
        path: PathBuf,
        /// The operating system's reason (not found, permission, ...).
        #[source]
        source: std::io::Error,
    },
    /// TOML syntax or an unknown/mistyped key.
    #[error("invalid config file {path}: {message}")]
    Parse {
        /// The file as it was named.
        path: PathBuf,
        /// What the parser said, with the key and position.
        message: String,
    },
    /// A value is present but unusable.
    #[error("invalid value for {key}: {reason}")]
    Invalid {
        /// The key, as the file spells it (`sink.http.url`).
        key: String,
        /// What is wrong with the value, worded to follow "invalid value
        /// for <key>: ".
        reason: String,
    },
    /// A `.properties` or connector JSON file that does not parse.
    #[error("invalid config file {path}")]
    Syntax {
        /// The `.properties` or connector JSON file as it was named.
        path: PathBuf,
        /// What is wrong, with the line.
        #[source]
        source: connector_json::SyntaxError,
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
    /// An error in one pipeline of a multi-pipeline configuration.
    #[error("in pipeline {name}")]
    InPipeline {
        /// The pipeline's name (or `pipelines[i]` before it has one).
        name: String,
        /// What is wrong in that pipeline.
        #[source]
        source: Box<ConfigError>,
    },
    /// An error in a specific file of a multi-file configuration.
    #[error("in {path}")]
    InFile {
        /// The file of the configuration the error is in.
        path: PathBuf,
        /// What is wrong in that file.
        #[source]
        source: Box<ConfigError>,
    },
}

impl From<SettingError> for ConfigError {
    fn from(e: SettingError) -> Self {
        match e {
            SettingError::Invalid { key, reason } => ConfigError::Invalid { key, reason },
            SettingError::Missing { key, reason } => ConfigError::Missing { key, reason },
        }
    }
}

impl Config {
    /// Reads, parses and validates a configuration file, resolving secrets
    /// from the environment or files. The extension chooses the form:
    /// `.properties` is Debezium Server's `application.properties` (ignored
    /// keys are warned about here), anything else walrelay's TOML.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        if path.extension().is_some_and(|e| e == "properties") {
            let translation = debezium_server::load_server(path)?;
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
        self.postgres.resolve_secrets()?;
        self.kafka.resolve_secrets()?;
        Ok(())
    }

    /// Whether the session asks pgoutput to stream large transactions:
    /// `replication.streaming`, unless logical decoding messages are
    /// events (a streamed message carries its top-level transaction's xid,
    /// so a rolled-back savepoint's messages could not be told apart).
    pub(crate) fn streaming(&self) -> bool {
        // Transaction metadata needs whole transactions too: Debezium's
        // BEGIN names the Begin message's position, which a streamed
        // transaction never has.
        self.replication.streaming
            && !self.outbox.messages_are_events()
            && !self.outbox.transaction_metadata
    }

    /// Checks every section, then what only the whole can check; the error
    /// names the key and why.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        validate_pipeline_name(&self.name)?;
        self.postgres.validate()?;
        self.replication.validate()?;
        self.outbox.validate_messages()?;
        self.outbox.validate_transaction_metadata()?;
        self.lag.validate().map_err(|reason| ConfigError::Invalid {
            key: "lag".into(),
            reason,
        })?;
        self.router.validate().map_err(|e| ConfigError::Invalid {
            key: "router".into(),
            reason: e.to_string(),
        })?;
        self.outbox.validate_tables(&self.router)?;
        self.sink.validate()?;
        if self.sink.kind == crate::sink::config::SinkKind::Kafka {
            self.kafka.validate()?;
        } else {
            self.validate_other_broker()?;
        }
        self.heartbeat.validate()?;
        if let Err(e) = self.metrics.web() {
            return Err(ConfigError::Invalid {
                key: "metrics.web_config_file".into(),
                reason: crate::chain::DisplayChain(&e).to_string(),
            });
        }
        self.debezium.validate()?;
        self.errors.validate()?;
        self.chain()?;
        self.cloudevents()?;
        if self.kafka.exactly_once
            && self.replication.snapshot_mode == crate::postgres::config::SnapshotMode::Always
        {
            return Err(ConfigError::Invalid {
                key: "replication.snapshot_mode".into(),
                reason: "\"always\" publishes the current rows again at every start, which \
                         kafka.exactly_once = true cannot allow; use \"initial\" (the snapshot \
                         is then one Kafka transaction) or \"no_data\""
                    .into(),
            });
        }
        if !self.outbox.source.table()
            && self.outbox.debezium_messages.is_none()
            && self.replication.snapshot_mode != crate::postgres::config::SnapshotMode::NoData
        {
            return Err(ConfigError::Invalid {
                key: "replication.snapshot_mode".into(),
                reason: "a snapshot publishes the rows of the outbox table, and with \
                         outbox.source = \"messages\" there is none: logical decoding messages \
                         are only in the WAL; use \"no_data\""
                    .into(),
            });
        }
        if self.source.kind == SourceKind::Poll {
            self.validate_poll()?;
        }
        if self.kafka.exactly_once && self.replication.slot_drop_on_stop {
            return Err(ConfigError::Invalid {
                key: "replication.slot_drop_on_stop".into(),
                reason: "dropping the slot at every stop loses the events written while \
                         walrelay is down, which kafka.exactly_once = true cannot allow"
                    .into(),
            });
        }
        Ok(())
    }
}

impl Config {
    /// The CloudEvents value converter, when `converters.value` is it; the
    /// error names the key. It reads its metadata from headers the header
    /// converter wrote.
    pub(crate) fn cloudevents(
        &self,
    ) -> Result<Option<crate::connect::cloudevents::CloudEventsConverter>, ConfigError> {
        use crate::connect::cloudevents::{
            CloudEventsConfig, CloudEventsContext, CloudEventsConverter,
        };
        use crate::connect::config::ConverterKind;
        if self.converters.key == ConverterKind::CloudEvents {
            return Err(ConfigError::Invalid {
                key: "converters.key".into(),
                reason: "walrelay runs the CloudEvents converter as the value converter only"
                    .into(),
            });
        }
        if self.converters.value != ConverterKind::CloudEvents {
            if let Some(k) = self.cloudevents.keys().next() {
                return Err(ConfigError::Invalid {
                    key: format!("cloudevents.{k}"),
                    reason: "set converters.value = \"cloud_events\" for the CloudEvents options to apply".into(),
                });
            }
            return Ok(None);
        }
        let options = self
            .cloudevents
            .iter()
            .map(|(k, v)| (k.clone(), v.text()))
            .collect();
        let cfg = CloudEventsConfig::from_options(&options).map_err(|e| ConfigError::Invalid {
            key: e
                .key()
                .map_or_else(|| "cloudevents".to_owned(), |k| format!("cloudevents.{k}")),
            reason: e.to_string(),
        })?;
        Ok(Some(CloudEventsConverter::new(
            cfg,
            CloudEventsContext {
                header_converter: self.converters.header,
                header_schemas_enable: self.converters.header_schemas_enable,
            },
        )))
    }

    /// The transforms after the router, built; the error names the key.
    pub(crate) fn chain(&self) -> Result<crate::connect::transforms::Chain, ConfigError> {
        crate::connect::transforms::config::build(&self.transforms, &self.predicates)
            .map(|(chain, _)| chain)
            .map_err(|e| ConfigError::Invalid {
                key: e.key,
                reason: e.reason,
            })
    }

    /// A broker other than Kafka: what only Kafka can do is refused by
    /// key (exactly-once asks for transactions), and `[kafka]` must not be
    /// mistaken for the broker's settings.
    fn validate_other_broker(&self) -> Result<(), ConfigError> {
        let broker = self.sink.kind.as_str();
        if self.kafka.exactly_once {
            return Err(ConfigError::Invalid {
                key: "kafka.exactly_once".into(),
                reason: format!(
                    "asks for transactional (exactly-once) delivery, which the {broker} broker \
                     cannot give (sink.type = \"{broker}\"); remove the key, or publish to Kafka"
                ),
            });
        }
        if !self.kafka.bootstrap_servers.is_empty() || !self.kafka.producer.is_empty() {
            return Err(ConfigError::Invalid {
                key: "kafka".into(),
                reason: format!(
                    "configures a Kafka producer, and sink.type = \"{broker}\" publishes to \
                     {broker}; remove [kafka] (the broker's settings are in [sink.*])"
                ),
            });
        }
        Ok(())
    }

    /// The polling source: its section, and what it cannot do refused by
    /// name.
    fn validate_poll(&self) -> Result<(), ConfigError> {
        self.poll.validate()?;
        let refuse = |key: &str, reason: &str| {
            Err(ConfigError::Unsupported {
                key: key.to_owned(),
                reason: reason.to_owned(),
            })
        };
        if self.kafka.exactly_once {
            return refuse(
                "kafka.exactly_once",
                "with source.kind = \"poll\" the published marker is in PostgreSQL and the \
                 records in Kafka, and no transaction spans both: a crash between Kafka's \
                 commit and the mark publishes the batch again, so walrelay cannot promise \
                 exactly-once here; use the WAL source for exactly-once, or consumers that \
                 deduplicate by the id header",
            );
        }
        if self.outbox.table_count() > 1 {
            return refuse(
                crate::txn::config::KEY_TABLES,
                "the polling source claims from one table; run one pipeline per table \
                 (source.kind = \"wal\" relays several tables in one pipeline)",
            );
        }
        if self.outbox.source != crate::txn::config::OutboxSource::Table {
            return refuse(
                "outbox.source",
                "logical decoding messages exist only in the WAL; the polling source reads \
                 rows of the outbox table (source.kind = \"wal\" relays messages)",
            );
        }
        if self.outbox.transaction_metadata {
            return refuse(
                "outbox.transaction_metadata",
                "Debezium's BEGIN/END records describe WAL transactions, which the polling \
                 source does not see",
            );
        }
        if self.heartbeat.interval_ms > 0 {
            return refuse(
                "heartbeat.interval_ms",
                "heartbeats keep a replication slot moving, and the polling source has none",
            );
        }
        Ok(())
    }
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

fn default_shutdown_timeout_ms() -> u64 {
    DEFAULT_SHUTDOWN_TIMEOUT_MS
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::postgres::config::{PortSetting, DEFAULT_SLOT};
    use crate::sink::config::Tolerance;
    use crate::txn::config::parse_qualified_name;

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
    fn exactly_once_refuses_what_would_republish_or_lose_events() {
        let on = "[kafka.transactions]\n";
        let base = MINIMAL.replace(
            "bootstrap_servers = \"127.0.0.1:9092\"",
            "bootstrap_servers = \"127.0.0.1:9092\"\nexactly_once = true",
        );
        let c = Config::from_toml(&format!("{base}\n{on}"), Path::new("t.toml")).unwrap();
        assert!(c.kafka.exactly_once);
        assert_eq!(
            c.kafka.transactions.transactional_id_for("s1"),
            "walrelay-s1"
        );
        for (extra, key) in [
            (
                "[replication]\nsnapshot_mode = \"always\"\n",
                "replication.snapshot_mode",
            ),
            (
                "[replication]\nslot_drop_on_stop = true\n",
                "replication.slot_drop_on_stop",
            ),
            (
                "[kafka.transactions]\nprogress_topic = \"bad topic\"\n",
                "kafka.transactions.progress_topic",
            ),
            (
                "[kafka.transactions]\ntimeout_ms = 10\n",
                "kafka.transactions.timeout_ms",
            ),
        ] {
            let err =
                Config::from_toml(&format!("{base}\n{extra}"), Path::new("t.toml")).unwrap_err();
            assert!(err.to_string().contains(key), "{extra}: {err}");
        }
        // The producer's own transactional keys are refused in any mode.
        assert_refused_naming(
            "[kafka.producer]\n\"transactional.id\" = \"x\"\n",
            "kafka.producer.transactional.id",
        );
        // Without exactly_once the same snapshot mode is fine.
        parse(&format!(
            "{MINIMAL}\n[replication]\nsnapshot_mode = \"always\"\n"
        ))
        .unwrap();
    }

    #[test]
    fn poll_source_refuses_what_needs_the_wal() {
        let poll = "[source]\nkind = \"poll\"\n[poll]\norder_by = [\"seq\"]\n";
        let c = parse(&format!("{MINIMAL}\n{poll}")).unwrap();
        assert_eq!(c.source.kind, SourceKind::Poll);
        assert_eq!(c.poll.order_by, ["seq"]);
        // The WAL stays the default, and [poll] is not checked for it.
        assert_eq!(parse(MINIMAL).unwrap().source.kind, SourceKind::Wal);
        assert_refused_naming("[source]\nkind = \"poll\"\n", "poll.order_by");
        assert_refused_naming("[source]\nkind = \"trigger\"\n", "expected `wal` or `poll`");
        for (extra, key) in [
            (
                "[outbox]\nsource = \"messages\"\nmessage_prefixes = [\"outbox\"]\n",
                "outbox.source",
            ),
            (
                "[outbox]\ntransaction_metadata = true\n",
                "outbox.transaction_metadata",
            ),
            ("[heartbeat]\ninterval_ms = 1000\n", "heartbeat.interval_ms"),
        ] {
            let err = parse(&format!("{MINIMAL}\n{poll}{extra}")).unwrap_err();
            assert!(
                matches!(err, ConfigError::Unsupported { .. }) && err.to_string().contains(key),
                "{extra}: {err}"
            );
        }
        let eos = MINIMAL.replace(
            "bootstrap_servers = \"127.0.0.1:9092\"",
            "bootstrap_servers = \"127.0.0.1:9092\"\nexactly_once = true",
        );
        let err = parse(&format!("{eos}\n{poll}")).unwrap_err();
        assert!(err.to_string().contains("kafka.exactly_once"), "{err}");
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
        assert_eq!(c.postgres.port, PortSetting::One(5432));
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

    /// `[sink] type = "http"` with `[sink.http]`: parsed, secrets kept out
    /// of Debug, bad keys named, another broker's section refused.
    #[test]
    fn http_sink_section() {
        let base = MINIMAL.replace("[kafka]\nbootstrap_servers = \"127.0.0.1:9092\"\n", "");
        let c = parse(&format!(
            "{base}\n[sink]\ntype = \"http\"\n\n[sink.http]\nurl = \"https://hooks.example/in\"\n\
             user = \"relay\"\npassword = \"s3cret-pw\"\ntimeout_ms = 2000\n\
             headers = {{ \"X-Api-Key\" = \"key-s3cret\" }}\n"
        ))
        .unwrap();
        let http = c.sink.http.as_ref().unwrap();
        assert_eq!(http.timeout_ms, Some(2000));
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("s3cret-pw") && !shown.contains("key-s3cret"),
            "{shown}"
        );
        let err = parse(&format!(
            "{base}\n[sink]\ntype = \"http\"\n\n[sink.http]\nurl = \"https://h/\"\nretries = 0\n"
        ))
        .unwrap_err();
        assert!(err.to_string().contains("sink.http.retries"), "{err}");
        let err = parse(&format!("{base}\n[sink]\ntype = \"http\"\n")).unwrap_err();
        assert!(err.to_string().contains("sink.http"), "{err}");
        let err = parse(&format!(
            "{base}\n[sink]\ntype = \"redis\"\n\n[sink.redis]\naddress = \"h:1\"\n\n\
             [sink.http]\nurl = \"http://h/\"\n"
        ))
        .unwrap_err();
        assert!(err.to_string().contains("sink.http"), "{err}");
    }
}
