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
    pub fn validate(&self) -> Result<(), SettingError> {
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
    pub fn resolve_secrets(&mut self) -> Result<(), SettingError> {
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
    pub fn validate(&self) -> Result<(), SettingError> {
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
