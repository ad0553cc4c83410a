//! Kafka's group membership with Connect's protocol: walrelay workers join
//! one group (`protocol_type = "connect"`, protocol `"compatible"`, Connect's
//! incremental cooperative metadata and assignment format), so that they can
//! share a group with each other as Connect's distributed workers do.
//!
//! Owns the types the worker sees ([`GroupConfig`], [`JoinState`],
//! [`Assignment`], [`GroupEvent`], the [`Assignor`] trait and
//! [`LeaderAssignment`]) and [`spawn`]. The layers are its modules:
//! [`conn`] (one broker connection: framing, versions, TLS, SASL with
//! [`sasl`]), [`wire`] (Connect's metadata and assignment bytes),
//! [`member`] (coordinator discovery, join/sync/heartbeat/leave) and
//! [`assign`] (the incremental cooperative assignor, a pure function).

pub(crate) mod assign;
pub(crate) mod conn;
pub(crate) mod member;
pub(crate) mod sasl;
pub(crate) mod wire;

#[cfg(test)]
mod broker_tests;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch, Notify};
#[cfg(test)]
use tokio::task::AbortHandle;
use tokio::task::JoinHandle;

pub(crate) use conn::GroupSecurity;

/// What the group client needs to know (Connect's worker keys in brackets).
#[derive(Debug, Clone)]
pub(crate) struct GroupConfig {
    /// `bootstrap.servers`, each `host:port`.
    pub(crate) bootstrap: Vec<String>,
    /// `group.id`.
    pub(crate) group_id: String,
    /// `client.id`, sent in every request header.
    pub(crate) client_id: String,
    /// `session.timeout.ms` (Connect: 10000).
    pub(crate) session_timeout: Duration,
    /// `rebalance.timeout.ms` (Connect: 60000).
    pub(crate) rebalance_timeout: Duration,
    /// `heartbeat.interval.ms` (Connect: 3000).
    pub(crate) heartbeat_interval: Duration,
    /// `security.protocol`, `ssl.*`, `sasl.*`.
    pub(crate) security: GroupSecurity,
}

impl GroupConfig {
    /// A configuration with Connect's default timeouts and PLAINTEXT.
    pub(crate) fn new(bootstrap: Vec<String>, group_id: &str) -> GroupConfig {
        GroupConfig {
            bootstrap,
            group_id: group_id.to_string(),
            client_id: format!("walrelay-{group_id}"),
            session_timeout: Duration::from_millis(10_000),
            rebalance_timeout: Duration::from_millis(60_000),
            heartbeat_interval: Duration::from_millis(3_000),
            security: GroupSecurity::default(),
        }
    }
}

/// What this worker announces when it (re)joins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct JoinState {
    /// Its REST URL (the leader's is sent to every member).
    pub(crate) url: String,
    /// The config topic offset it has read to.
    pub(crate) config_offset: i64,
    /// The connectors it runs now (each with its one task, number 0). The
    /// group client announces these together with its last assignment, so
    /// that a connector still stopping is never handed to another member.
    pub(crate) running: Vec<String>,
}

/// One member as the leader sees it in JoinGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MemberInfo {
    /// Its member id.
    pub(crate) member_id: String,
    /// Its REST URL.
    pub(crate) url: String,
    /// The config offset it has read to.
    pub(crate) config_offset: i64,
    /// The connectors it runs (for a Connect worker: every connector of
    /// which it runs the connector or a task), sorted.
    pub(crate) running: Vec<String>,
}

/// This member's share after a rebalance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Assignment {
    /// The group generation.
    pub(crate) generation: i32,
    /// This member's id.
    pub(crate) member_id: String,
    /// The leader's member id.
    pub(crate) leader_id: String,
    /// The leader's REST URL.
    pub(crate) leader_url: String,
    /// The leader's config offset: read the config topic at least this far.
    pub(crate) config_offset: i64,
    /// 0, or [`wire::CONFIG_MISMATCH`] (then `assigned` is what this member
    /// announced, `revoked` is empty: read the config topic and rejoin).
    pub(crate) error: i16,
    /// Everything this member should run now (the whole set, sorted).
    pub(crate) assigned: Vec<String>,
    /// What it must stop; once stopped (and `JoinState::running` updated),
    /// call [`GroupHandle::rejoin`] so that they are handed on.
    pub(crate) revoked: Vec<String>,
    /// Connect's scheduled delay (walrelay's leader sends 0).
    pub(crate) delay_ms: i32,
}

/// What the group client tells the worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GroupEvent {
    /// A rebalance completed.
    Assigned(Assignment),
    /// The membership is lost (fenced, or no heartbeat for a session
    /// timeout): stop every connector now; the client rejoins by itself.
    Lost {
        /// Why, for the log.
        reason: String,
    },
}

/// One member's part of the leader's decision.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct MemberAssignment {
    /// Everything it should run after this rebalance.
    pub(crate) assigned: Vec<String>,
    /// What it must stop.
    pub(crate) revoked: Vec<String>,
}

/// The leader's decision for the whole group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LeaderAssignment {
    /// 0, or [`wire::CONFIG_MISMATCH`].
    pub(crate) error: i16,
    /// The leader's config offset.
    pub(crate) config_offset: i64,
    /// Per member id (a member missing here gets nothing new).
    pub(crate) members: BTreeMap<String, MemberAssignment>,
}

/// The leader's decision, made by the worker (it knows the connectors);
/// [`assign::assign`] is the rule walrelay uses.
pub(crate) trait Assignor: Send + Sync + 'static {
    /// Decides who runs what, from every member's announcement.
    fn assign(&self, members: &[MemberInfo]) -> LeaderAssignment;
}

/// What [`GroupHandle`] shares with the member task.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// Wakes the task to rejoin.
    pub(crate) rejoin: Notify,
    /// The member id while in a completed generation.
    pub(crate) member_id: Mutex<Option<String>>,
}

/// The worker's handle on its membership task (clones share the task).
#[derive(Debug, Clone)]
pub(crate) struct GroupHandle {
    /// Shared with the task.
    shared: Arc<Shared>,
    /// Stops the task without LeaveGroup (tests of a crash).
    #[cfg(test)]
    abort: AbortHandle,
    /// The task, until someone waits for it.
    task: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl GroupHandle {
    /// Asks for a rebalance (the leader saw a connector added, a member
    /// finished revoking, the config topic moved).
    pub(crate) fn rejoin(&self) {
        self.shared.rejoin.notify_one();
    }

    /// The member id, while the member is in a completed generation.
    #[cfg(test)]
    pub(crate) fn member_id(&self) -> Option<String> {
        self.shared
            .member_id
            .lock()
            .map(|g| g.clone())
            .unwrap_or_default()
    }

    /// Waits until the task has ended (after shutdown it has left the
    /// group); returns at once for the clones that did not get the task.
    pub(crate) async fn finished(&self) {
        let task = self.task.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task {
            if let Err(e) = task.await {
                if !e.is_cancelled() {
                    tracing::warn!(error = %e, "the group membership task ended abnormally");
                }
            }
        }
    }

    /// Kills the task without LeaveGroup (the coordinator drops this
    /// member after its session timeout); tests use it as a crash.
    #[cfg(test)]
    pub(crate) fn abort(&self) {
        self.abort.abort();
    }
}

/// Starts the membership task: it joins `config.group_id`, reports every
/// rebalance and loss on the returned channel (read it promptly: the task
/// waits while it is full), and leaves the group when `shutdown` turns true.
pub(crate) fn spawn(
    config: GroupConfig,
    state: watch::Receiver<JoinState>,
    assignor: Arc<dyn Assignor>,
    shutdown: watch::Receiver<bool>,
) -> (GroupHandle, mpsc::Receiver<GroupEvent>) {
    let (tx, rx) = mpsc::channel(64);
    let shared = Arc::new(Shared::default());
    let member = member::Member::new(config, state, assignor, shutdown, tx, shared.clone());
    let task = tokio::spawn(member.run());
    let handle = GroupHandle {
        shared,
        #[cfg(test)]
        abort: task.abort_handle(),
        task: Arc::new(Mutex::new(Some(task))),
    };
    (handle, rx)
}
