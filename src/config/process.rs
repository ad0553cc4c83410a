//! A process's configuration: the pipelines it runs and what they share.
//!
//! Owns the native TOML's multi-pipeline form (`[[pipelines]]` entries
//! over shared top-level sections, merged key by key), the Kafka Connect
//! form with several connector files, and the checks only the set of
//! pipelines can make: unique names, and no two pipelines on the same slot,
//! polling lock or transactional id. Each pipeline is an ordinary,
//! validated [`Config`]; the process-wide sections (`[metrics]`,
//! `[runtime]`) are the same in all of them.

use std::path::{Path, PathBuf};

use super::kafka_connect::{load_connect, Translation};
use super::{parse_error_message, Config, ConfigError, RuntimeConfig};
use crate::metrics::MetricsConfig;
use crate::postgres::poll::config::SourceKind;

/// The sections that belong to the process, not to one pipeline.
const PROCESS_SECTIONS: &[&str] = &["metrics", "runtime"];

/// Every pipeline of one process.
#[derive(Debug, Clone)]
pub(crate) struct ProcessConfig {
    /// The pipelines, in the order the configuration gives them; never
    /// empty, names unique.
    pub(crate) pipelines: Vec<Config>,
}

impl ProcessConfig {
    /// A process of one pipeline.
    pub(crate) fn single(config: Config) -> ProcessConfig {
        ProcessConfig {
            pipelines: vec![config],
        }
    }

    /// Reads a configuration file of either form: Debezium Server's
    /// `application.properties` (one pipeline, its model) or walrelay's
    /// TOML, with one pipeline or several (`[[pipelines]]`).
    pub(crate) fn load(path: &Path) -> Result<ProcessConfig, ConfigError> {
        if path.extension().is_some_and(|e| e == "properties") {
            return Config::load(path).map(ProcessConfig::single);
        }
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        ProcessConfig::from_toml(&text, path)
    }

    /// Parses and validates TOML text of either native form; `path` is
    /// only used in messages.
    pub(crate) fn from_toml(text: &str, path: &Path) -> Result<ProcessConfig, ConfigError> {
        let mut top: toml::Table = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            message: parse_error_message(&e, text),
        })?;
        let Some(entries) = top.remove("pipelines") else {
            return Config::from_toml(text, path).map(ProcessConfig::single);
        };
        let toml::Value::Array(entries) = entries else {
            return Err(ConfigError::Invalid {
                key: "pipelines".into(),
                reason: "must be an array of tables: one [[pipelines]] section per pipeline".into(),
            });
        };
        if entries.is_empty() {
            return Err(ConfigError::Invalid {
                key: "pipelines".into(),
                reason: "names no pipeline".into(),
            });
        }
        if top.contains_key("name") {
            return Err(ConfigError::Invalid {
                key: "name".into(),
                reason: "with [[pipelines]] each entry names its pipeline; remove the top-level \
                         name"
                    .into(),
            });
        }
        let mut pipelines = Vec::with_capacity(entries.len());
        for (i, entry) in entries.into_iter().enumerate() {
            let toml::Value::Table(entry) = entry else {
                return Err(ConfigError::Invalid {
                    key: format!("pipelines[{i}]"),
                    reason: "must be a table ([[pipelines]])".into(),
                });
            };
            let label = match entry.get("name") {
                Some(toml::Value::String(n)) => n.clone(),
                Some(_) => {
                    return Err(ConfigError::Invalid {
                        key: format!("pipelines[{i}].name"),
                        reason: "must be a string".into(),
                    })
                }
                None => {
                    return Err(ConfigError::Missing {
                        key: format!("pipelines[{i}].name"),
                        reason: "each pipeline needs a name: it labels its metrics, logs and \
                                 status"
                            .into(),
                    })
                }
            };
            for section in PROCESS_SECTIONS {
                if entry.contains_key(*section) {
                    return Err(ConfigError::Invalid {
                        key: format!("pipelines[{i}].{section}"),
                        reason: format!(
                            "[{section}] belongs to the process, not to one pipeline: set it at \
                             the top level"
                        ),
                    });
                }
            }
            let mut merged = top.clone();
            merge(&mut merged, entry);
            let in_pipeline = |e: ConfigError| ConfigError::InPipeline {
                name: label.clone(),
                source: Box::new(e),
            };
            let mut config: Config =
                toml::Value::Table(merged)
                    .try_into()
                    .map_err(|e: toml::de::Error| ConfigError::Parse {
                        path: path.to_owned(),
                        message: format!("pipelines[{i}] ({label}): {}", e.message()),
                    })?;
            config.resolve_secrets().map_err(in_pipeline)?;
            config.validate().map_err(in_pipeline)?;
            pipelines.push(config);
        }
        let process = ProcessConfig { pipelines };
        process.check_together()?;
        Ok(process)
    }

    /// Translates a Kafka Connect worker file and any number of connector
    /// files (`.properties` and REST `.json`, mixed), one pipeline each,
    /// as `connect-standalone` takes them.
    pub(crate) fn from_connect(
        worker: &Path,
        connectors: &[PathBuf],
    ) -> Result<(ProcessConfig, Vec<Translation>), ConfigError> {
        let mut translations = Vec::with_capacity(connectors.len());
        for connector in connectors {
            translations.push(load_connect(worker, connector)?);
        }
        let process = ProcessConfig {
            pipelines: translations.iter().map(|t| t.config.clone()).collect(),
        };
        process.check_together()?;
        Ok((process, translations))
    }

    /// The process's metrics listener (the same in every pipeline).
    pub(crate) fn metrics(&self) -> &MetricsConfig {
        &self.pipelines[0].metrics
    }

    /// The process's runtime settings (the same in every pipeline).
    pub(crate) fn runtime(&self) -> &RuntimeConfig {
        &self.pipelines[0].runtime
    }

    /// Sets the metrics listener of the process (the command line's
    /// `--metrics-addr`).
    pub(crate) fn set_metrics_listen(&mut self, addr: &str) {
        for p in &mut self.pipelines {
            p.metrics.listen = addr.to_owned();
        }
    }

    /// Sets the metrics listener's web configuration file of every
    /// pipeline (they share the process's one listener).
    pub(crate) fn set_metrics_web_config_file(&mut self, file: &std::path::Path) {
        for p in &mut self.pipelines {
            p.metrics.web_config_file = Some(file.to_owned());
        }
    }

    /// Sets what a pipeline's fatal error does to the process.
    pub(crate) fn set_on_pipeline_failure(&mut self, policy: super::OnPipelineFailure) {
        for p in &mut self.pipelines {
            p.runtime.on_pipeline_failure = policy;
        }
    }

    /// The pipeline named `name`.
    pub(crate) fn pipeline(&self, name: &str) -> Option<&Config> {
        self.pipelines.iter().find(|p| p.name == name)
    }

    /// What only the set can check: names unique, and no two pipelines
    /// competing for one slot, polling lock or transactional id (the
    /// second would wait for the first forever, or fence it).
    fn check_together(&self) -> Result<(), ConfigError> {
        for (i, a) in self.pipelines.iter().enumerate() {
            for b in &self.pipelines[..i] {
                let clash = |key: &str, what: String| ConfigError::InPipeline {
                    name: a.name.clone(),
                    source: Box::new(ConfigError::Invalid {
                        key: key.into(),
                        reason: format!(
                            "{what} is also pipeline {:?}'s; give each its own",
                            b.name
                        ),
                    }),
                };
                if a.name == b.name {
                    return Err(ConfigError::Invalid {
                        key: "name".into(),
                        reason: format!(
                            "two pipelines are named {:?}; each needs its own name",
                            a.name
                        ),
                    });
                }
                let same_db = same_database(a, b);
                match (a.source.kind, b.source.kind) {
                    (SourceKind::Wal, SourceKind::Wal)
                        if same_db && a.replication.slot == b.replication.slot =>
                    {
                        return Err(clash(
                            "replication.slot",
                            format!(
                                "slot {:?} on database {:?}",
                                a.replication.slot, a.postgres.dbname
                            ),
                        ));
                    }
                    (SourceKind::Poll, SourceKind::Poll)
                        if same_db && poll_lock(a) == poll_lock(b) =>
                    {
                        return Err(clash(
                            "poll.lock_name",
                            format!(
                                "the polling lock {:?} on database {:?}",
                                poll_lock(a),
                                a.postgres.dbname
                            ),
                        ));
                    }
                    _ => {}
                }
                if a.kafka.exactly_once && b.kafka.exactly_once {
                    let ta = a
                        .kafka
                        .transactions
                        .transactional_id_for(&a.replication.slot);
                    let tb = b
                        .kafka
                        .transactions
                        .transactional_id_for(&b.replication.slot);
                    if ta == tb && a.kafka.bootstrap_servers == b.kafka.bootstrap_servers {
                        return Err(clash(
                            "kafka.transactions.transactional_id",
                            format!("the transactional id {ta:?}"),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Whether two pipelines read the same database (same hosts, ports and
/// name, as configured).
fn same_database(a: &Config, b: &Config) -> bool {
    a.postgres.host == b.postgres.host
        && a.postgres.port == b.postgres.port
        && a.postgres.dbname == b.postgres.dbname
}

/// The name a polling pipeline's advisory locks derive from:
/// `poll.lock_name`, else the outbox table.
fn poll_lock(c: &Config) -> String {
    if c.poll.lock_name.is_empty() {
        c.outbox.table_names().join(",")
    } else {
        c.poll.lock_name.clone()
    }
}

/// Merges `over` into `base`: tables key by key, recursively; any other
/// value replaces the base's.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// Checks a pipeline name: non-empty, printable, at most
/// [`super::MAX_PIPELINE_NAME`] bytes (it is a metric label and a log
/// field).
pub(super) fn validate_pipeline_name(name: &str) -> Result<(), ConfigError> {
    let reason = if name.trim().is_empty() {
        "must not be empty"
    } else if name.len() > super::MAX_PIPELINE_NAME {
        "is longer than 128 bytes"
    } else if name.chars().any(char::is_control) {
        "must not contain control characters"
    } else {
        return Ok(());
    };
    Err(ConfigError::Invalid {
        key: "name".into(),
        reason: format!("{name:?} {reason}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::DisplayChain;

    const SHARED: &str = r#"
[kafka]
bootstrap_servers = "127.0.0.1:9092"

[postgres]
host = "127.0.0.1"
user = "app"
password = "hunter2"
dbname = "app"
"#;

    fn parse(text: &str) -> Result<ProcessConfig, ConfigError> {
        ProcessConfig::from_toml(text, Path::new("test.toml"))
    }

    fn refused(text: &str, needle: &str) {
        let err = parse(text).unwrap_err();
        let shown = DisplayChain(&err).to_string();
        assert!(shown.contains(needle), "{needle}: {shown}");
    }

    #[test]
    fn one_pipeline_without_pipelines() {
        let p = parse(SHARED).unwrap();
        assert_eq!(p.pipelines.len(), 1);
        assert_eq!(p.pipelines[0].name, "default");
        let p = parse(&format!("name = \"orders\"\n{SHARED}")).unwrap();
        assert_eq!(p.pipelines[0].name, "orders");
    }

    #[test]
    fn pipelines_share_the_top_level_and_override_it_key_by_key() {
        let text = format!(
            r#"{SHARED}
[kafka.producer]
"linger.ms" = "5"
"compression.type" = "lz4"

[metrics]
listen = "127.0.0.1:0"

[runtime]
on_pipeline_failure = "exit"

[[pipelines]]
name = "orders"
[pipelines.replication]
slot = "orders"

[[pipelines]]
name = "billing"
[pipelines.postgres]
dbname = "billing"
[pipelines.kafka.producer]
"linger.ms" = "0"
[pipelines.outbox]
table = "billing.outbox"
"#
        );
        let p = parse(&text).unwrap();
        let [orders, billing] = p.pipelines.as_slice() else {
            panic!("{p:?}")
        };
        assert_eq!(orders.name, "orders");
        assert_eq!(orders.replication.slot, "orders");
        assert_eq!(orders.postgres.dbname, "app");
        assert_eq!(billing.postgres.dbname, "billing");
        // The password came from the shared section.
        assert_eq!(
            billing.postgres.password.as_ref().unwrap().expose(),
            "hunter2"
        );
        assert_eq!(billing.outbox.table.as_deref(), Some("billing.outbox"));
        assert_eq!(billing.kafka.producer["linger.ms"], "0");
        // Merged key by key: the shared compression stays.
        assert_eq!(billing.kafka.producer["compression.type"], "lz4");
        assert_eq!(orders.kafka.producer["linger.ms"], "5");
        assert_eq!(p.metrics().listen, "127.0.0.1:0");
        assert_eq!(
            p.runtime().on_pipeline_failure,
            super::super::OnPipelineFailure::Exit
        );
        assert_eq!(p.pipeline("billing").unwrap().postgres.dbname, "billing");
    }

    #[test]
    fn refusals_name_the_key_and_the_pipeline() {
        let two = |a: &str, b: &str| {
            format!(
                "{SHARED}\n[[pipelines]]\nname = \"a\"\n{a}\n[[pipelines]]\nname = \"b\"\n{b}\n"
            )
        };
        // Both on the default slot of the same database.
        refused(&two("", ""), "replication.slot");
        refused(
            &two(
                "[pipelines.replication]\nslot = \"s1\"\n",
                "[pipelines.replication]\nslot = \"s1\"\n",
            ),
            "is also pipeline \"a\"'s",
        );
        // The same slot name in another database is fine.
        parse(&two("", "[pipelines.postgres]\ndbname = \"other\"\n")).unwrap();
        refused(
            &format!("{SHARED}\n[[pipelines]]\nname = \"a\"\n[[pipelines]]\nname = \"a\"\n[pipelines.replication]\nslot = \"s2\"\n"),
            "two pipelines are named \"a\"",
        );
        refused(
            &format!("{SHARED}\n[[pipelines]]\n[pipelines.replication]\nslot = \"x\"\n"),
            "pipelines[0].name",
        );
        refused(
            &two("[pipelines.metrics]\nlisten = \"\"\n", ""),
            "pipelines[0].metrics",
        );
        refused(
            &two("[pipelines.runtime]\nworker_threads = 2\n", ""),
            "pipelines[0].runtime",
        );
        refused(
            &format!("name = \"x\"\n{}", two("", "")),
            "remove the top-level name",
        );
        refused(&format!("pipelines = []\n{SHARED}"), "names no pipeline");
        refused(&format!("pipelines = 3\n{SHARED}"), "array of tables");
        // An error inside one pipeline names it and the key.
        refused(
            &two("[pipelines.replication]\nslot = \"Bad-Name\"\n", ""),
            "in pipeline a",
        );
        refused(
            &two("[pipelines.replication]\nslot = \"Bad-Name\"\n", ""),
            "replication.slot",
        );
        refused(
            &two("[pipelines.replication]\nslott = \"x\"\n", ""),
            "slott",
        );
        refused(
            &format!("{SHARED}\n[[pipelines]]\nname = \"\"\n"),
            "must not be empty",
        );
        // Two polling pipelines on one lock.
        let poll = "[pipelines.source]\nkind = \"poll\"\n[pipelines.poll]\norder_by = [\"seq\"]\n";
        refused(&two(poll, poll), "poll.lock_name");
    }

    #[test]
    fn debug_of_a_process_never_shows_secrets() {
        let text = format!("{SHARED}\n[[pipelines]]\nname = \"a\"\n");
        let shown = format!("{:?}", parse(&text).unwrap());
        assert!(!shown.contains("hunter2"), "{shown}");
    }
}
