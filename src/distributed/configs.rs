//! The config topic (`config.storage.topic`) in Connect's own record
//! format, so that a walrelay group and a Connect group read each other's
//! records: `connector-<name>` → `{"properties": {...}}` (a tombstone
//! deletes), `target-state-<name>` → `{"state": ..., "state.v2": ...}`,
//! `task-<name>-<n>` → `{"properties": {...}}` applied when
//! `commit-<name>` → `{"tasks": N}` follows, and
//! `restart-connector-<name>` → `{"include-tasks": .., "only-failed": ..}`.
//! Values are JSON without schemas, as Connect's internal converter writes
//! them. Other keys (`session-key`, `tasks-fencing-`, `logger-cluster-`)
//! are read past.
//!
//! Owns the cluster's configuration state as read from the topic, and the
//! encoding of what walrelay writes to it. It never connects.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use tracing::warn;

use super::api::ConfigMap;
use super::log::Apply;

/// `connector-` records.
const CONNECTOR_PREFIX: &str = "connector-";
/// `target-state-` records.
const TARGET_STATE_PREFIX: &str = "target-state-";
/// `task-` records.
const TASK_PREFIX: &str = "task-";
/// `commit-` records.
const COMMIT_PREFIX: &str = "commit-";
/// `restart-connector-` records.
const RESTART_PREFIX: &str = "restart-connector-";

/// What a connector should be doing: Connect's `TargetState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum TargetState {
    /// `STARTED`.
    #[default]
    Started,
    /// `PAUSED`.
    Paused,
    /// `STOPPED`.
    Stopped,
}

impl TargetState {
    fn name(self) -> &'static str {
        match self {
            TargetState::Started => "STARTED",
            TargetState::Paused => "PAUSED",
            TargetState::Stopped => "STOPPED",
        }
    }
}

/// One connector as the config topic has it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ConnectorEntry {
    /// Its configuration, as written (provider references unresolved).
    pub(crate) config: ConfigMap,
    /// Its target state.
    pub(crate) target: TargetState,
    /// Its committed task configurations.
    pub(crate) tasks: Vec<ConfigMap>,
    /// The offset of the record that last changed its configuration.
    pub(crate) config_offset: i64,
}

/// A restart request read from the topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RestartRequest {
    /// The connector.
    pub(crate) connector: String,
    /// `include-tasks`.
    pub(crate) include_tasks: bool,
    /// `only-failed`.
    pub(crate) only_failed: bool,
    /// The record's offset (requests are handled once, in order).
    pub(crate) offset: i64,
}

/// The cluster's configuration state, as read from the config topic.
#[derive(Debug, Default)]
pub(crate) struct ClusterConfig {
    /// Connectors by name.
    pub(crate) connectors: BTreeMap<String, ConnectorEntry>,
    /// Target states read before their connector's config.
    early_targets: BTreeMap<String, TargetState>,
    /// Task configurations waiting for their `commit-` record.
    pending_tasks: BTreeMap<String, BTreeMap<i32, ConfigMap>>,
    /// Restart requests not yet taken.
    pub(crate) restarts: Vec<RestartRequest>,
    /// The offset of the last record applied (Connect's config offset);
    /// -1 before any.
    pub(crate) offset: i64,
}

impl ClusterConfig {
    /// An empty state.
    pub(crate) fn new() -> Self {
        ClusterConfig {
            offset: -1,
            ..ClusterConfig::default()
        }
    }

    fn apply_connector(&mut self, name: &str, value: Option<&Value>, offset: i64) {
        match value.and_then(properties) {
            None => {
                self.connectors.remove(name);
                self.pending_tasks.remove(name);
            }
            Some(config) => {
                let target = self.early_targets.remove(name);
                let entry = self.connectors.entry(name.to_owned()).or_default();
                entry.config = config;
                entry.config_offset = offset;
                if let Some(t) = target {
                    entry.target = t;
                }
            }
        }
    }

    fn apply_target(&mut self, name: &str, value: Option<&Value>) {
        let state = value.and_then(target_state);
        match (self.connectors.get_mut(name), state) {
            (Some(entry), Some(s)) => entry.target = s,
            (None, Some(s)) => {
                self.early_targets.insert(name.to_owned(), s);
            }
            (_, None) => {
                self.early_targets.remove(name);
            }
        }
    }

    fn apply_task(&mut self, rest: &str, value: Option<&Value>) {
        // `task-<connector>-<n>`: the connector's name may hold dashes.
        let Some((name, n)) = rest.rsplit_once('-') else {
            return;
        };
        let (Ok(n), Some(props)) = (n.parse::<i32>(), value.and_then(properties)) else {
            return;
        };
        self.pending_tasks
            .entry(name.to_owned())
            .or_default()
            .insert(n, props);
    }

    fn apply_commit(&mut self, name: &str, value: Option<&Value>) {
        let Some(count) = value.and_then(|v| v.get("tasks")).and_then(Value::as_i64) else {
            return;
        };
        let pending = self.pending_tasks.remove(name).unwrap_or_default();
        let Some(entry) = self.connectors.get_mut(name) else {
            return;
        };
        let tasks: Vec<ConfigMap> = (0..count as i32)
            .filter_map(|i| pending.get(&i).cloned())
            .collect();
        if tasks.len() as i64 == count {
            entry.tasks = tasks;
        } else {
            warn!(connector = %name, "a task commit without all its task configurations: kept the previous ones");
        }
    }

    fn apply_restart(&mut self, name: &str, value: Option<&Value>, offset: i64) {
        let Some(v) = value else { return };
        let flag = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
        self.restarts.push(RestartRequest {
            connector: name.to_owned(),
            include_tasks: flag("include-tasks"),
            only_failed: flag("only-failed"),
            offset,
        });
    }
}

impl Apply for ClusterConfig {
    fn apply(&mut self, key: &str, value: Option<&[u8]>, _partition: i32, offset: i64) {
        let parsed: Option<Value> = value.and_then(|v| serde_json::from_slice(v).ok());
        if value.is_some() && parsed.is_none() {
            warn!(key, offset, "config record that is not JSON: skipped");
        }
        let value = parsed.as_ref();
        if let Some(name) = key.strip_prefix(TARGET_STATE_PREFIX) {
            self.apply_target(name, value);
        } else if let Some(name) = key.strip_prefix(CONNECTOR_PREFIX) {
            self.apply_connector(name, value, offset);
        } else if let Some(name) = key.strip_prefix(COMMIT_PREFIX) {
            self.apply_commit(name, value);
        } else if let Some(name) = key.strip_prefix(RESTART_PREFIX) {
            self.apply_restart(name, value, offset);
        } else if let Some(rest) = key.strip_prefix(TASK_PREFIX) {
            self.apply_task(rest, value);
        }
        self.offset = self.offset.max(offset);
    }
}

/// `{"properties": {...}}` as a map (null values dropped).
fn properties(v: &Value) -> Option<ConfigMap> {
    let props = v.get("properties")?.as_object()?;
    Some(
        props
            .iter()
            .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
            .collect(),
    )
}

/// A target-state record: `state.v2` when present (Connect 3.5+), else
/// `state`.
fn target_state(v: &Value) -> Option<TargetState> {
    let s = v
        .get("state.v2")
        .and_then(Value::as_str)
        .or_else(|| v.get("state").and_then(Value::as_str))?;
    match s {
        "STARTED" => Some(TargetState::Started),
        "PAUSED" => Some(TargetState::Paused),
        "STOPPED" => Some(TargetState::Stopped),
        _ => None,
    }
}

/// The key and value of a connector's configuration record.
pub(crate) fn connector_record(name: &str, config: &ConfigMap) -> (String, Option<Vec<u8>>) {
    let value = json!({ "properties": config });
    (
        format!("{CONNECTOR_PREFIX}{name}"),
        Some(value.to_string().into_bytes()),
    )
}

/// The records that delete a connector: its configuration and target
/// state tombstones, as Connect writes them.
pub(crate) fn deletion_records(name: &str) -> Vec<(String, Option<Vec<u8>>)> {
    vec![
        (format!("{CONNECTOR_PREFIX}{name}"), None),
        (format!("{TARGET_STATE_PREFIX}{name}"), None),
    ]
}

/// A target-state record: `state` is `PAUSED` for `STOPPED`, for workers
/// older than Connect 3.5, as Connect writes it.
pub(crate) fn target_record(name: &str, state: TargetState) -> (String, Option<Vec<u8>>) {
    let v1 = match state {
        TargetState::Stopped => TargetState::Paused,
        s => s,
    };
    let value = json!({ "state": v1.name(), "state.v2": state.name() });
    (
        format!("{TARGET_STATE_PREFIX}{name}"),
        Some(value.to_string().into_bytes()),
    )
}

/// The task records and their commit.
pub(crate) fn task_records(name: &str, tasks: &[ConfigMap]) -> Vec<(String, Option<Vec<u8>>)> {
    let mut out: Vec<(String, Option<Vec<u8>>)> = tasks
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let value = json!({ "properties": t });
            (
                format!("{TASK_PREFIX}{name}-{i}"),
                Some(value.to_string().into_bytes()),
            )
        })
        .collect();
    let commit = json!({ "tasks": tasks.len() });
    out.push((
        format!("{COMMIT_PREFIX}{name}"),
        Some(commit.to_string().into_bytes()),
    ));
    out
}

/// A restart request record.
pub(crate) fn restart_record(
    name: &str,
    include_tasks: bool,
    only_failed: bool,
) -> (String, Option<Vec<u8>>) {
    let value = json!({ "include-tasks": include_tasks, "only-failed": only_failed });
    (
        format!("{RESTART_PREFIX}{name}"),
        Some(value.to_string().into_bytes()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(state: &mut ClusterConfig, offset: i64, record: &(String, Option<Vec<u8>>)) {
        state.apply(&record.0, record.1.as_deref(), 0, offset);
    }

    fn config(pairs: &[(&str, &str)]) -> ConfigMap {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn connector_target_tasks_and_deletion_round_trip() {
        let mut s = ClusterConfig::new();
        let c = config(&[("name", "my-conn"), ("topic.prefix", "p")]);
        // A target state before its connector (Connect writes it first).
        apply(&mut s, 0, &target_record("my-conn", TargetState::Stopped));
        apply(&mut s, 1, &connector_record("my-conn", &c));
        assert_eq!(s.connectors["my-conn"].target, TargetState::Stopped);
        assert_eq!(s.connectors["my-conn"].config, c);
        let tasks = task_records("my-conn", std::slice::from_ref(&c));
        apply(&mut s, 2, &tasks[0]);
        assert!(
            s.connectors["my-conn"].tasks.is_empty(),
            "not before the commit"
        );
        apply(&mut s, 3, &tasks[1]);
        assert_eq!(s.connectors["my-conn"].tasks, vec![c.clone()]);
        apply(&mut s, 4, &restart_record("my-conn", true, false));
        assert_eq!(s.restarts.len(), 1);
        assert!(s.restarts[0].include_tasks && !s.restarts[0].only_failed);
        for (i, r) in deletion_records("my-conn").iter().enumerate() {
            apply(&mut s, 5 + i as i64, r);
        }
        assert!(s.connectors.is_empty());
        assert_eq!(s.offset, 6);
    }

    #[test]
    fn connect_written_records_are_read() {
        // As Connect 4.1.1 writes them (JsonConverter, schemas disabled).
        let mut s = ClusterConfig::new();
        s.apply(
            "connector-n1",
            Some(br#"{"properties":{"connector.class":"io.debezium.connector.postgresql.PostgresConnector","name":"n1"}}"#),
            0,
            7,
        );
        s.apply(
            "target-state-n1",
            Some(br#"{"state":"PAUSED","state.v2":"PAUSED"}"#),
            0,
            8,
        );
        s.apply(
            "session-key",
            Some(br#"{"key":"x","algorithm":"HmacSHA256","creation-timestamp":1}"#),
            0,
            9,
        );
        assert_eq!(s.connectors["n1"].target, TargetState::Paused);
        assert_eq!(s.connectors["n1"].config_offset, 7);
        assert_eq!(s.offset, 9);
        // A pre-3.5 record without state.v2.
        s.apply("target-state-n1", Some(br#"{"state":"STARTED"}"#), 0, 10);
        assert_eq!(s.connectors["n1"].target, TargetState::Started);
    }
}
