//! What Connect's REST API asks of a worker, as plain data and one trait:
//! the REST layer ([`super::rest`]) turns requests into calls of
//! [`Herder`] and its answers into Connect's JSON; the worker implements
//! it. Nothing here knows HTTP or JSON.

use std::collections::BTreeMap;
use std::future::Future;

/// A connector's configuration: Connect's `Map<String, String>`, in key
/// order (Connect's JSON writes a `HashMap`'s order; the REST layer
/// decides the order it renders).
pub(crate) type ConfigMap = BTreeMap<String, String>;

/// An error the REST API answers with: Connect's `ErrorMessage`
/// (`{"error_code": N, "message": "..."}`) and its HTTP status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiError {
    /// The HTTP status, also `error_code`.
    pub(crate) status: u16,
    /// Connect's message, word for word where Connect has one.
    pub(crate) message: String,
}

impl ApiError {
    /// An error with this status and message.
    pub(crate) fn new(status: u16, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }

    /// Connect's 404 for an unknown connector.
    pub(crate) fn connector_not_found(name: &str) -> ApiError {
        ApiError::new(404, format!("Connector {name} not found"))
    }
}

/// `GET /`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerInfo {
    /// The Kafka Connect version walrelay answers as (`4.1.1`).
    pub(crate) version: String,
    /// The commit (walrelay's).
    pub(crate) commit: String,
    /// The Kafka cluster's id.
    pub(crate) kafka_cluster_id: String,
}

/// A connector's task id: `{"connector": ..., "task": N}`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct TaskId {
    /// The connector's name.
    pub(crate) connector: String,
    /// The task's number.
    pub(crate) task: i32,
}

/// `GET /connectors/{name}`: Connect's `ConnectorInfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConnectorInfo {
    /// The connector's name.
    pub(crate) name: String,
    /// Its configuration.
    pub(crate) config: ConfigMap,
    /// Its tasks.
    pub(crate) tasks: Vec<TaskId>,
    /// `source` (every walrelay connector), or `None` when not yet known.
    pub(crate) kind: Option<&'static str>,
}

/// A `PUT /connectors/{name}/config` or `POST /connectors` answer: whether
/// the connector was created (201) or updated (200).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Created<T> {
    /// `true`: 201 Created; `false`: 200 OK.
    pub(crate) created: bool,
    /// The body.
    pub(crate) value: T,
}

/// The state of a connector or task, as Connect names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// `UNASSIGNED`.
    Unassigned,
    /// `RUNNING`.
    Running,
    /// `PAUSED`.
    Paused,
    /// `STOPPED`.
    Stopped,
    /// `FAILED`.
    Failed,
    /// `RESTARTING`.
    Restarting,
}

impl State {
    /// Connect's name of the state.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            State::Unassigned => "UNASSIGNED",
            State::Running => "RUNNING",
            State::Paused => "PAUSED",
            State::Stopped => "STOPPED",
            State::Failed => "FAILED",
            State::Restarting => "RESTARTING",
        }
    }

    /// The state named `s` (Connect's names).
    pub(crate) fn parse(s: &str) -> Option<State> {
        Some(match s {
            "UNASSIGNED" => State::Unassigned,
            "RUNNING" => State::Running,
            "PAUSED" => State::Paused,
            "STOPPED" => State::Stopped,
            "FAILED" => State::Failed,
            "RESTARTING" => State::Restarting,
            _ => return None,
        })
    }
}

/// The state of a connector or of one task: Connect's
/// `AbstractState` (`state`, `worker_id`, and `trace` when failed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StateInfo {
    /// The state.
    pub(crate) state: State,
    /// The worker that reported it (`host:port` of its REST listener).
    pub(crate) worker_id: String,
    /// Why it failed (`FAILED` only).
    pub(crate) trace: Option<String>,
}

/// A task's state (`GET /connectors/{name}/tasks/{id}/status`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TaskState {
    /// The task's number.
    pub(crate) id: i32,
    /// Its state.
    pub(crate) info: StateInfo,
}

/// `GET /connectors/{name}/status`: Connect's `ConnectorStateInfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConnectorStateInfo {
    /// The connector's name.
    pub(crate) name: String,
    /// The connector's own state.
    pub(crate) connector: StateInfo,
    /// Its tasks' states, by task number.
    pub(crate) tasks: Vec<TaskState>,
    /// `source`, or `None` when not yet known.
    pub(crate) kind: Option<&'static str>,
}

/// `GET /connectors/{name}/tasks`: one task's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TaskInfo {
    /// The task's id.
    pub(crate) id: TaskId,
    /// The task's configuration.
    pub(crate) config: ConfigMap,
}

/// One source partition's offset (KIP-875), as JSON values: for a
/// Debezium PostgreSQL connector the partition is `{"server": <prefix>}`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PartitionOffset {
    /// The source partition.
    pub(crate) partition: serde_json::Map<String, serde_json::Value>,
    /// Its offset; `None` (JSON `null`) resets it.
    pub(crate) offset: Option<serde_json::Map<String, serde_json::Value>>,
}

/// `GET /connectors/{name}/offsets` and the body of `PATCH`.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct ConnectorOffsets {
    /// Every partition's offset.
    pub(crate) offsets: Vec<PartitionOffset>,
}

/// `GET /connector-plugins`: one plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PluginInfo {
    /// Its class.
    pub(crate) class: String,
    /// `source`, `sink`, `transformation`, `predicate`, `converter`,
    /// `header_converter`.
    pub(crate) kind: &'static str,
    /// Its version, when it has one.
    pub(crate) version: Option<String>,
}

/// What a worker does for the REST API. Reads answer from the worker's
/// view of the config and status topics; writes go through the config
/// topic and return once the worker has read them back.
pub(crate) trait Herder: Send + Sync + 'static {
    /// `GET /`.
    fn server_info(&self) -> ServerInfo;

    /// `GET /connectors`: every connector's name.
    fn connector_names(&self) -> Result<Vec<String>, ApiError>;

    /// `GET /connectors/{name}`.
    fn connector_info(&self, name: &str) -> Result<ConnectorInfo, ApiError>;

    /// `GET /connectors/{name}/config`.
    fn connector_config(&self, name: &str) -> Result<ConfigMap, ApiError>;

    /// `GET /connectors/{name}/status`.
    fn connector_status(&self, name: &str) -> Result<ConnectorStateInfo, ApiError>;

    /// `GET /connectors/{name}/tasks`.
    fn task_configs(&self, name: &str) -> Result<Vec<TaskInfo>, ApiError>;

    /// `GET /connectors/{name}/tasks/{task}/status`.
    fn task_status(&self, name: &str, task: i32) -> Result<TaskState, ApiError>;

    /// `GET /connectors/{name}/topics`: the topics the connector has
    /// produced to since it was created or its topics were reset.
    fn active_topics(&self, name: &str) -> Result<Vec<String>, ApiError>;

    /// `GET /connector-plugins` (`connectors_only`: only connectors).
    fn plugins(&self, connectors_only: bool) -> Vec<PluginInfo>;

    /// `POST /connectors` (`allow_replace` false) and
    /// `PUT /connectors/{name}/config` (true): validates, then writes the
    /// configuration.
    fn put_config(
        &self,
        name: &str,
        config: ConfigMap,
        allow_replace: bool,
    ) -> impl Future<Output = Result<Created<ConnectorInfo>, ApiError>> + Send;

    /// `PATCH /connectors/{name}/config`: a `None` value removes the key.
    fn patch_config(
        &self,
        name: &str,
        patch: BTreeMap<String, Option<String>>,
    ) -> impl Future<Output = Result<ConnectorInfo, ApiError>> + Send;

    /// `PUT /connector-plugins/{plugin}/config/validate`: Connect's
    /// `ConfigInfos` as JSON.
    fn validate(
        &self,
        plugin: &str,
        config: ConfigMap,
    ) -> impl Future<Output = Result<serde_json::Value, ApiError>> + Send;

    /// `DELETE /connectors/{name}`.
    fn delete_connector(&self, name: &str) -> impl Future<Output = Result<(), ApiError>> + Send;

    /// `POST /connectors/{name}/restart`: `None` when Connect answers 204
    /// (no `includeTasks`/`onlyFailed`), else the state after the request
    /// (202).
    fn restart_connector(
        &self,
        name: &str,
        include_tasks: bool,
        only_failed: bool,
    ) -> impl Future<Output = Result<Option<ConnectorStateInfo>, ApiError>> + Send;

    /// `POST /connectors/{name}/tasks/{task}/restart`.
    fn restart_task(
        &self,
        name: &str,
        task: i32,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;

    /// `PUT /connectors/{name}/pause`.
    fn pause(&self, name: &str) -> impl Future<Output = Result<(), ApiError>> + Send;

    /// `PUT /connectors/{name}/resume`.
    fn resume(&self, name: &str) -> impl Future<Output = Result<(), ApiError>> + Send;

    /// `PUT /connectors/{name}/stop`.
    fn stop(&self, name: &str) -> impl Future<Output = Result<(), ApiError>> + Send;

    /// `PUT /connectors/{name}/topics/reset`.
    fn reset_active_topics(&self, name: &str) -> impl Future<Output = Result<(), ApiError>> + Send;

    /// `GET /connectors/{name}/offsets`.
    fn offsets(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<ConnectorOffsets, ApiError>> + Send;

    /// `PATCH /connectors/{name}/offsets`: Connect's success message.
    fn alter_offsets(
        &self,
        name: &str,
        offsets: ConnectorOffsets,
    ) -> impl Future<Output = Result<String, ApiError>> + Send;

    /// `DELETE /connectors/{name}/offsets`: Connect's success message.
    fn reset_offsets(&self, name: &str) -> impl Future<Output = Result<String, ApiError>> + Send;
}
