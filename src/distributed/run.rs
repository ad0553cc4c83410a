//! `walrelay connect-distributed worker.properties`: start-up and the
//! worker's life. Reads the worker file, creates the storage topics when
//! missing, reads the config and status topics, serves Connect's REST API,
//! joins the group and runs what it is assigned until SIGTERM/SIGINT;
//! then stops its pipelines (draining them) and leaves the group, so that
//! the others take its connectors at once.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::ClientConfig;
use tokio::sync::watch;
use tracing::{info, warn, Instrument};

use super::configs::ClusterConfig;
use super::group::{self, Assignor, GroupEvent, JoinState, LeaderAssignment, MemberInfo};
use super::herder::NodeHerder;
use super::log::KafkaLog;
use super::node::Node;
use super::rest::RestConfig;
use super::statuses::GroupStatus;
use super::topics;
use super::worker::DistributedConfig;
use crate::config::ConfigError;
use crate::metrics::Process;

/// Keys of the REST listener, read by [`RestConfig`] and not part of a
/// connector's translation.
const REST_PREFIXES: &[&str] = &[
    "listeners",
    "rest.",
    "access.control.",
    "topic.tracking.",
    "admin.listeners",
];

/// Why the worker could not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StartError {
    /// The worker file.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The REST keys.
    #[error("{0}")]
    Rest(String),
    /// A storage topic.
    #[error(transparent)]
    Topic(#[from] topics::TopicError),
    /// Reading a storage topic.
    #[error(transparent)]
    Log(#[from] super::log::LogError),
    /// The REST listener.
    #[error("cannot listen for the REST API: {0}")]
    Listen(std::io::Error),
    /// The metrics listener.
    #[error("cannot listen on {addr} for metrics: {source}")]
    Metrics {
        /// The address.
        addr: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The metrics listener's web configuration file (`--web-config-file`).
    #[error("--web-config-file")]
    MetricsWeb(#[source] crate::metrics::web::WebConfigError),
}

/// The leader's rule over the connectors this worker has read.
struct NodeAssignor(Arc<Node>);

impl Assignor for NodeAssignor {
    fn assign(&self, members: &[MemberInfo]) -> LeaderAssignment {
        let offset = self.0.config_offset();
        let names = self.0.names_to_assign();
        group::assign::assign(members, &names, offset)
    }
}

/// Runs a distributed worker until `shutdown`.
pub(crate) async fn run(
    worker_path: &Path,
    mut worker: BTreeMap<String, String>,
    metrics: &crate::metrics::MetricsConfig,
    shutdown: watch::Receiver<bool>,
) -> Result<(), StartError> {
    let dist = DistributedConfig::take(&mut worker)?;
    for (key, why) in &dist.ignored {
        warn!(key = %key, "{why}");
    }
    let env = |name: &str| std::env::var(name).ok();
    let rest =
        RestConfig::from_worker(&worker, &env).map_err(|e| StartError::Rest(e.to_string()))?;
    worker.retain(|k, _| !REST_PREFIXES.iter().any(|p| k.starts_with(p)));
    let own = super::clients::worker_clients(&worker, &dist)?;
    let clients = own.rdkafka;
    topics::ensure(&clients, &dist).await?;
    let configs = KafkaLog::start(
        &clients,
        &dist.config_topic.name,
        ClusterConfig::new(),
        shutdown.clone(),
    )
    .await?;
    topics::check_config_partitions(&dist.config_topic.name, configs.partitions())?;
    let statuses = KafkaLog::start(
        &clients,
        &dist.status_topic.name,
        GroupStatus::default(),
        shutdown.clone(),
    )
    .await?;
    configs.read_to_end().await?;
    statuses.read_to_end().await?;
    let cluster_id = cluster_id(&clients).await;

    // The worker's id is its advertised `host:port`.
    let process = Arc::new(Process::new());
    let url = rest.advertised_url(&[]);
    let id = rest.worker_id(&[]);
    let node = Node::new(
        id.clone(),
        rest.topic_tracking,
        worker,
        worker_path.to_owned(),
        configs,
        statuses,
        Arc::clone(&process),
    );
    process.set_group_view(Box::new({
        let node = Arc::clone(&node);
        let group = dist.group_id.clone();
        move || node.group_view(&group)
    }));
    let herder = Arc::new(NodeHerder::new(Arc::clone(&node), cluster_id));
    super::rest::serve(rest, herder, shutdown.clone())
        .await
        .map_err(StartError::Listen)?;
    info!(worker_id = %id, url = %url, group = %dist.group_id, "connect-distributed worker");
    let addr = metrics.listen.as_str();
    if !addr.is_empty() {
        let web = Arc::new(metrics.web().map_err(StartError::MetricsWeb)?);
        crate::metrics::serve_with(addr, web, Arc::clone(&process), shutdown.clone())
            .await
            .map_err(|source| StartError::Metrics {
                addr: addr.to_owned(),
                source,
            })?;
    }

    // The group.
    let (state_tx, state_rx) = watch::channel(JoinState {
        url: url.clone(),
        config_offset: node.config_offset(),
        running: Vec::new(),
    });
    let mut gc = group::GroupConfig::new(
        dist.bootstrap
            .split(',')
            .map(|s| s.trim().to_owned())
            .collect(),
        &dist.group_id,
    );
    gc.session_timeout = dist.session_timeout;
    gc.heartbeat_interval = dist.heartbeat_interval;
    gc.rebalance_timeout = dist.rebalance_timeout;
    if let Some(client_id) = &dist.client_id {
        gc.client_id = client_id.clone();
    }
    gc.security = own.group;
    let (handle, mut events) = group::spawn(
        gc,
        state_rx,
        Arc::new(NodeAssignor(Arc::clone(&node))),
        shutdown.clone(),
    );
    let reconcile = tokio::spawn({
        let node = Arc::clone(&node);
        let handle = handle.clone();
        node.run(shutdown.clone(), move || handle.rejoin())
            .instrument(tracing::info_span!("worker"))
    });
    let mut shutdown_rx = shutdown.clone();
    loop {
        let event = tokio::select! {
            _ = shutdown_rx.changed() => break,
            e = events.recv() => match e { Some(e) => e, None => break },
        };
        handle_event(&node, &handle, &state_tx, event).await;
    }
    // The worker's pipelines stop (drained) before it leaves the group.
    let _ = reconcile.await;
    handle.finished().await;
    Ok(())
}

/// Applies one group event; after revoking connectors, rejoins so that
/// the leader hands them on.
async fn handle_event(
    node: &Arc<Node>,
    handle: &group::GroupHandle,
    state: &watch::Sender<JoinState>,
    event: GroupEvent,
) {
    match event {
        GroupEvent::Assigned(a) => {
            info!(
                generation = a.generation,
                leader = a.leader_id == a.member_id,
                assigned = ?a.assigned,
                revoked = ?a.revoked,
                error = a.error,
                "assignment"
            );
            if a.error != 0 {
                // The leader is behind or ahead: read on, then rejoin.
                let _ = node.configs.read_to_end().await;
                state.send_modify(|s| s.config_offset = node.config_offset());
                tokio::time::sleep(Duration::from_millis(200)).await;
                handle.rejoin();
                return;
            }
            node.assigned(a.generation, a.leader_id == a.member_id, &a.assigned);
            node.settled().await;
            state.send_modify(|s| {
                s.running = node.running();
                s.config_offset = node.config_offset();
            });
            if !a.revoked.is_empty() {
                handle.rejoin();
            }
        }
        GroupEvent::Lost { reason } => {
            warn!(reason = %reason, "group membership lost: stopping every pipeline");
            node.lost();
            node.settled().await;
            state.send_modify(|s| s.running = node.running());
        }
    }
}

/// The Kafka cluster's id, for `GET /` (empty when it cannot be read).
async fn cluster_id(clients: &ClientConfig) -> String {
    let clients = clients.clone();
    tokio::task::spawn_blocking(move || {
        let consumer: rdkafka::consumer::BaseConsumer = clients.create().ok()?;
        use rdkafka::consumer::Consumer;
        consumer
            .client()
            .fetch_cluster_id(rdkafka::util::Timeout::After(Duration::from_secs(10)))
    })
    .await
    .ok()
    .flatten()
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::kafka_connect::{from_connect, read_properties};

    /// The example worker file starts a worker: its group keys, its REST
    /// keys and its clients read, and with the example connector the rest
    /// of it translates as a connector's worker part.
    #[test]
    fn the_example_worker_file_reads_and_translates() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/debezium");
        let mut worker = read_properties(&root.join("connect-distributed.properties")).unwrap();
        let dist = DistributedConfig::take(&mut worker).unwrap();
        assert_eq!(dist.group_id, "connect-cluster");
        assert_eq!(dist.config_topic.name, "connect-configs");
        let rest = RestConfig::from_worker(&worker, &|_| None).unwrap();
        // A wildcard listener: the worker is known by its host's name.
        let id = rest.worker_id(&[]);
        assert!(id.ends_with(":8083") && !id.starts_with("0.0.0.0"), "{id}");
        worker.retain(|k, _| !REST_PREFIXES.iter().any(|p| k.starts_with(p)));
        super::super::clients::worker_clients(&worker, &dist).unwrap();
        let connector = read_properties(&root.join("outbox-connector.properties")).unwrap();
        let t = from_connect(worker, connector, Path::new("w"), Path::new("c")).unwrap();
        assert!(
            t.ignored.iter().all(|i| !i.key.starts_with("listeners")),
            "REST keys reach the translation: {:?}",
            t.ignored
        );
    }
}
