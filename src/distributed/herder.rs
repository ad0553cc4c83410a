//! The REST API's [`Herder`], answered by a [`Node`]: reads from the
//! worker's view of the config and status topics, writes through the
//! config topic (any worker writes; every worker reads the topic, so the
//! owner of a connector acts on what another worker wrote), with
//! Connect's messages and status codes.
//!
//! Owns the checks a request goes through before a write: the name, the
//! configuration's translation (a configuration walrelay would refuse at
//! start is refused here, naming the key), existence.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::api::{
    ApiError, ConfigMap, ConnectorInfo, ConnectorOffsets, ConnectorStateInfo, Created, Herder,
    PartitionOffset, PluginInfo, ServerInfo, State, StateInfo, TaskId, TaskInfo, TaskState,
};
use super::configs::{self, TargetState};
use super::log::LogError;
use super::node::Node;
use super::offsets;
use super::statuses;
use crate::chain::DisplayChain;

/// Debezium's PostgreSQL connector class, the only connector walrelay runs.
pub(crate) const CONNECTOR_CLASS: &str = "io.debezium.connector.postgresql.PostgresConnector";
/// The Debezium version walrelay answers as.
pub(crate) const DEBEZIUM_VERSION: &str = "3.6.1.Final";
/// The Kafka Connect version walrelay answers as.
pub(crate) const CONNECT_VERSION: &str = "4.1.1";

/// The REST API's view of a worker.
pub(crate) struct NodeHerder {
    node: Arc<Node>,
    cluster_id: String,
}

impl NodeHerder {
    /// The herder of `node`, in the Kafka cluster `cluster_id`.
    pub(crate) fn new(node: Arc<Node>, cluster_id: String) -> NodeHerder {
        NodeHerder { node, cluster_id }
    }

    fn entry(&self, name: &str) -> Result<configs::ConnectorEntry, ApiError> {
        let state = self.node.configs.state().lock().expect("never poisoned");
        state
            .connectors
            .get(name)
            .cloned()
            .ok_or_else(|| ApiError::connector_not_found(name))
    }

    fn info(name: &str, entry: &configs::ConnectorEntry) -> ConnectorInfo {
        ConnectorInfo {
            name: name.to_owned(),
            config: entry.config.clone(),
            tasks: (0..entry.tasks.len() as i32)
                .map(|task| TaskId {
                    connector: name.to_owned(),
                    task,
                })
                .collect(),
            kind: Some("source"),
        }
    }

    /// Connect's checks of a configuration, then walrelay's translation.
    fn check_config(&self, name: &str, config: &ConfigMap) -> Result<(), ApiError> {
        if let Some(inner) = config.get("name") {
            if inner != name {
                return Err(ApiError::new(
                    400,
                    format!(
                        "Connector name configuration ({inner}) doesn't match connector name in the URL ({name})"
                    ),
                ));
            }
        }
        match config.get("connector.class").map(|c| c.trim()) {
            None | Some("") => {
                // Connect prints the whole configuration here, secrets
                // included; walrelay does not.
                return Err(ApiError::new(400, "Connector config contains no connector type"));
            }
            Some(CONNECTOR_CLASS | "PostgresConnector") => {}
            Some(other) => {
                return Err(ApiError::new(
                    400,
                    format!(
                        "Failed to find any class that implements Connector and which name matches {other}, available connectors are: {CONNECTOR_CLASS} (walrelay runs Debezium's PostgreSQL connector only)"
                    ),
                ))
            }
        }
        self.node.translate(name, config).map_err(|e| {
            ApiError::new(
                400,
                format!(
                    "Connector configuration is invalid and contains the following 1 error(s):\n{}\nYou can also find the above list of errors at the endpoint `/connector-plugins/{{connectorType}}/config/validate`",
                    DisplayChain(&e)
                ),
            )
        })?;
        Ok(())
    }

    async fn write(&self, records: &[(String, Option<Vec<u8>>)]) -> Result<(), ApiError> {
        self.node.write(records).await.map_err(write_error)
    }

    fn status_of(&self, name: &str) -> Option<ConnectorStateInfo> {
        let st = self.node.statuses.state().lock().expect("never poisoned");
        let connector = st.connectors.get(name)?;
        let tasks = st
            .tasks
            .range((name.to_owned(), i32::MIN)..=(name.to_owned(), i32::MAX))
            .map(|((_, id), s)| TaskState {
                id: *id,
                info: s.info.clone(),
            })
            .collect();
        let kind = self
            .node
            .configs
            .state()
            .lock()
            .expect("never poisoned")
            .connectors
            .contains_key(name)
            .then_some("source");
        Some(ConnectorStateInfo {
            name: name.to_owned(),
            connector: connector.info.clone(),
            tasks,
            kind,
        })
    }

    /// The translated configuration and slot of a WAL connector.
    fn slot_of(
        &self,
        name: &str,
        entry: &configs::ConnectorEntry,
    ) -> Result<(crate::config::Config, String), ApiError> {
        let config = self
            .node
            .translate(name, &entry.config)
            .map_err(|e| ApiError::new(400, DisplayChain(&e).to_string()))?;
        if config.kafka.exactly_once {
            return Err(ApiError::new(
                400,
                "with exactly-once, walrelay's position is its progress record in offset.storage.topic, kept with each transaction; the offsets API does not alter it",
            ));
        }
        let slot = config.replication.slot.clone();
        Ok((config, slot))
    }

    /// The slot's `confirmed_flush_lsn` (`None`: no slot yet).
    async fn slot_position(
        &self,
        name: &str,
        entry: &configs::ConnectorEntry,
    ) -> Result<Option<u64>, ApiError> {
        let config = self
            .node
            .translate(name, &entry.config)
            .map_err(|e| ApiError::new(400, DisplayChain(&e).to_string()))?;
        offsets::position(&config, &config.replication.slot).await
    }

    async fn set_target(&self, name: &str, target: TargetState) -> Result<(), ApiError> {
        // Connect's herder words these 404s its own way.
        self.entry(name)
            .map_err(|_| ApiError::new(404, format!("Unknown connector {name}")))?;
        self.write(&[configs::target_record(name, target)]).await
    }
}

/// Connect's answer to a successful `PATCH /connectors/{name}/offsets`.
const ALTERED: &str = "The Connect framework-managed offsets for this connector have been altered successfully. However, if this connector manages offsets externally, they will need to be manually altered in the system that the connector uses.";

/// Connect's refusal to touch the offsets of a connector not stopped.
fn require_stopped(name: &str, entry: &configs::ConnectorEntry) -> Result<(), ApiError> {
    if entry.target == TargetState::Stopped {
        return Ok(());
    }
    Err(ApiError::new(
        400,
        format!(
            "Connectors must be in the STOPPED state before their offsets can be modified. This can be done for the specified connector by issuing a 'PUT' request to the '/connectors/{name}/stop' endpoint"
        ),
    ))
}

/// Debezium PostgreSQL's one source partition: `{"server": <topic.prefix>}`.
fn partition(entry: &configs::ConnectorEntry) -> serde_json::Map<String, serde_json::Value> {
    let mut p = serde_json::Map::new();
    let prefix = entry
        .config
        .get("topic.prefix")
        .cloned()
        .unwrap_or_default();
    p.insert("server".into(), serde_json::Value::String(prefix));
    p
}

/// The offset of a position: Debezium's `lsn` key, the slot's
/// `confirmed_flush_lsn` as a number.
fn lsn_offset(lsn: u64) -> serde_json::Map<String, serde_json::Value> {
    let mut o = serde_json::Map::new();
    o.insert("lsn".into(), serde_json::Value::from(lsn));
    o
}

/// The LSN a `PATCH` asks for: one entry, the connector's partition, an
/// offset with a numeric `lsn`.
fn requested_lsn(
    entry: &configs::ConnectorEntry,
    offsets: &ConnectorOffsets,
) -> Result<u64, ApiError> {
    let ours = partition(entry);
    let bad = |why: String| ApiError::new(400, why);
    let [one] = offsets.offsets.as_slice() else {
        return Err(bad(format!(
            "walrelay's PostgreSQL connector has exactly one source partition, {}; give one offset for it",
            serde_json::Value::Object(ours.clone())
        )));
    };
    if one.partition != ours {
        return Err(bad(format!(
            "unknown source partition {}: this connector's is {}",
            serde_json::Value::Object(one.partition.clone()),
            serde_json::Value::Object(ours)
        )));
    }
    let Some(offset) = &one.offset else {
        return Err(bad(
            "a null offset resets the position, which walrelay cannot do: its position is the replication slot's confirmed_flush_lsn, which never moves back".into(),
        ));
    };
    offset
        .get("lsn")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| bad("the offset needs \"lsn\", a number (Debezium's key): the position to move the replication slot to".into()))
}

/// A failed write to the config topic: Connect's 500.
fn write_error(e: LogError) -> ApiError {
    ApiError::new(
        500,
        format!("Error writing to the config topic: {}", DisplayChain(&e)),
    )
}

impl Herder for NodeHerder {
    fn server_info(&self) -> ServerInfo {
        ServerInfo {
            version: CONNECT_VERSION.into(),
            commit: format!("walrelay-{}", env!("CARGO_PKG_VERSION")),
            kafka_cluster_id: self.cluster_id.clone(),
        }
    }

    fn connector_names(&self) -> Result<Vec<String>, ApiError> {
        Ok(self.node.connector_names())
    }

    fn connector_info(&self, name: &str) -> Result<ConnectorInfo, ApiError> {
        let entry = self.entry(name)?;
        Ok(Self::info(name, &entry))
    }

    fn connector_config(&self, name: &str) -> Result<ConfigMap, ApiError> {
        Ok(self.entry(name)?.config)
    }

    fn connector_status(&self, name: &str) -> Result<ConnectorStateInfo, ApiError> {
        self.status_of(name)
            .ok_or_else(|| ApiError::new(404, format!("No status found for connector {name}")))
    }

    fn task_configs(&self, name: &str) -> Result<Vec<TaskInfo>, ApiError> {
        let entry = self.entry(name)?;
        Ok(entry
            .tasks
            .iter()
            .enumerate()
            .map(|(i, config)| TaskInfo {
                id: TaskId {
                    connector: name.to_owned(),
                    task: i as i32,
                },
                config: config.clone(),
            })
            .collect())
    }

    fn task_status(&self, name: &str, task: i32) -> Result<TaskState, ApiError> {
        let st = self.node.statuses.state().lock().expect("never poisoned");
        st.tasks
            .get(&(name.to_owned(), task))
            .map(|s| TaskState {
                id: task,
                info: s.info.clone(),
            })
            .ok_or_else(|| ApiError::new(404, format!("No status found for task {name}-{task}")))
    }

    fn active_topics(&self, name: &str) -> Result<Vec<String>, ApiError> {
        self.entry(name)?;
        let st = self.node.statuses.state().lock().expect("never poisoned");
        Ok(st
            .topics
            .get(name)
            .map(|t| t.keys().cloned().collect())
            .unwrap_or_default())
    }

    fn plugins(&self, connectors_only: bool) -> Vec<PluginInfo> {
        let mut out = vec![PluginInfo {
            class: CONNECTOR_CLASS.into(),
            kind: "source",
            version: Some(DEBEZIUM_VERSION.into()),
        }];
        if !connectors_only {
            out.push(PluginInfo {
                class: "io.debezium.transforms.outbox.EventRouter".into(),
                kind: "transformation",
                version: Some(DEBEZIUM_VERSION.into()),
            });
            for class in [
                "org.apache.kafka.connect.json.JsonConverter",
                "org.apache.kafka.connect.storage.StringConverter",
            ] {
                out.push(PluginInfo {
                    class: class.into(),
                    kind: "converter",
                    version: Some(CONNECT_VERSION.into()),
                });
            }
        }
        out
    }

    async fn put_config(
        &self,
        name: &str,
        mut config: ConfigMap,
        allow_replace: bool,
    ) -> Result<Created<ConnectorInfo>, ApiError> {
        self.check_config(name, &config)?;
        config
            .entry("name".into())
            .or_insert_with(|| name.to_owned());
        let _ = self.node.configs.read_to_end().await;
        let existing = self.entry(name).ok();
        if existing.is_some() && !allow_replace {
            return Err(ApiError::new(
                409,
                format!("Connector {name} already exists"),
            ));
        }
        self.write(&[configs::connector_record(name, &config)])
            .await?;
        let created = existing.is_none();
        let tasks = existing.map(|e| e.tasks).unwrap_or_default();
        let entry = configs::ConnectorEntry {
            config,
            tasks,
            ..Default::default()
        };
        Ok(Created {
            created,
            value: Self::info(name, &entry),
        })
    }

    async fn patch_config(
        &self,
        name: &str,
        patch: BTreeMap<String, Option<String>>,
    ) -> Result<ConnectorInfo, ApiError> {
        let entry = self.entry(name)?;
        let mut config = entry.config.clone();
        for (k, v) in patch {
            match v {
                Some(v) => config.insert(k, v),
                None => config.remove(&k),
            };
        }
        // Connect checks the name only against the URL on PUT; a PATCH
        // renaming it is refused here: the record is keyed by the name.
        self.check_config(name, &config)?;
        self.write(&[configs::connector_record(name, &config)])
            .await?;
        Ok(Self::info(
            name,
            &configs::ConnectorEntry { config, ..entry },
        ))
    }

    async fn validate(
        &self,
        plugin: &str,
        config: ConfigMap,
    ) -> Result<serde_json::Value, ApiError> {
        let name = config
            .get("name")
            .cloned()
            .unwrap_or_else(|| "validate".into());
        let errors: Vec<String> = match self.node.translate(&name, &config) {
            Ok(_) => Vec::new(),
            Err(e) => vec![DisplayChain(&e).to_string()],
        };
        let class = if plugin.contains('.') {
            plugin.to_owned()
        } else {
            CONNECTOR_CLASS.to_owned()
        };
        Ok(serde_json::json!({
            "name": class,
            "error_count": errors.len(),
            "groups": [],
            "configs": errors.iter().map(|e| serde_json::json!({
                "definition": null,
                "value": {"name": "", "value": null, "recommended_values": [], "errors": [e], "visible": true}
            })).collect::<Vec<_>>(),
        }))
    }

    async fn delete_connector(&self, name: &str) -> Result<(), ApiError> {
        self.entry(name)?;
        self.write(&configs::deletion_records(name)).await
    }

    async fn restart_connector(
        &self,
        name: &str,
        include_tasks: bool,
        only_failed: bool,
    ) -> Result<Option<ConnectorStateInfo>, ApiError> {
        if self.entry(name).is_err() {
            return Err(ApiError::new(404, format!("Unknown connector: {name}")));
        }
        let before = self.status_of(name);
        self.write(&[configs::restart_record(name, include_tasks, only_failed)])
            .await?;
        if !include_tasks && !only_failed {
            return Ok(None);
        }
        Ok(before.map(|mut s| {
            let restarting = |info: &mut StateInfo| {
                if !only_failed || info.state == State::Failed {
                    info.state = State::Restarting;
                    info.trace = None;
                }
            };
            restarting(&mut s.connector);
            if include_tasks {
                for t in &mut s.tasks {
                    restarting(&mut t.info);
                }
            }
            s
        }))
    }

    async fn restart_task(&self, name: &str, task: i32) -> Result<(), ApiError> {
        let entry = self
            .entry(name)
            .map_err(|_| ApiError::new(404, format!("Unknown connector: {name}")))?;
        if task < 0 || task as usize >= entry.tasks.len() {
            return Err(ApiError::new(404, format!("Unknown task: {name}-{task}")));
        }
        self.write(&[configs::restart_record(name, true, false)])
            .await
    }

    async fn pause(&self, name: &str) -> Result<(), ApiError> {
        self.set_target(name, TargetState::Paused).await
    }

    async fn resume(&self, name: &str) -> Result<(), ApiError> {
        self.set_target(name, TargetState::Started).await
    }

    async fn stop(&self, name: &str) -> Result<(), ApiError> {
        self.set_target(name, TargetState::Stopped).await
    }

    async fn reset_active_topics(&self, name: &str) -> Result<(), ApiError> {
        let topics = self.active_topics(name)?;
        let records: Vec<_> = topics
            .iter()
            .map(|t| statuses::topic_tombstone(name, t))
            .collect();
        if records.is_empty() {
            return Ok(());
        }
        self.node
            .statuses
            .send_and_read(&records)
            .await
            .map_err(write_error)
    }

    async fn offsets(&self, name: &str) -> Result<ConnectorOffsets, ApiError> {
        let entry = self.entry(name)?;
        let position = self.slot_position(name, &entry).await?;
        Ok(ConnectorOffsets {
            offsets: position
                .map(|lsn| PartitionOffset {
                    partition: partition(&entry),
                    offset: Some(lsn_offset(lsn)),
                })
                .into_iter()
                .collect(),
        })
    }

    async fn alter_offsets(
        &self,
        name: &str,
        offsets: ConnectorOffsets,
    ) -> Result<String, ApiError> {
        let entry = self.entry(name)?;
        require_stopped(name, &entry)?;
        let target = requested_lsn(&entry, &offsets)?;
        let (config, slot) = self.slot_of(name, &entry)?;
        offsets::advance(&config, &slot, target).await?;
        Ok(ALTERED.into())
    }

    async fn reset_offsets(&self, name: &str) -> Result<String, ApiError> {
        let entry = self.entry(name)?;
        require_stopped(name, &entry)?;
        let (_, slot) = self.slot_of(name, &entry)?;
        Err(ApiError::new(
            400,
            format!(
                "walrelay's position is replication slot {slot}'s confirmed_flush_lsn, which cannot be reset (a slot never moves back); to start over, drop the slot while the connector is stopped"
            ),
        ))
    }
}
