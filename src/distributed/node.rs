//! One walrelay worker of a distributed group: the connectors the group
//! assigned to it, each run as a pipeline, kept in line with the config
//! topic (configuration, target state, restart requests), with its states
//! written to the status topic as Connect's workers write them.
//!
//! Owns the reconciliation: one task wakes on every change (a config
//! record, an assignment, a pipeline that ended) and starts, restarts or
//! stops pipelines so that exactly the assigned, started connectors run
//! with their latest configuration. A connector's one task (walrelay runs
//! each connector as one pipeline: Debezium's PostgreSQL connector has one
//! task) goes with it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, watch, Notify};
use tracing::{error, info, warn, Instrument};

use super::api::{ConfigMap, State, StateInfo};
use super::configs::{self, ClusterConfig, TargetState};
use super::log::{KafkaLog, LogError};
use super::statuses::{self, GroupStatus, Status};
use crate::chain::DisplayChain;
use crate::config::kafka_connect::from_connect;
use crate::metrics::{Metrics, Process};
use crate::pipeline::Plan;

/// The task class Connect adds to a Debezium PostgreSQL task's
/// configuration.
pub(crate) const TASK_CLASS: &str = "io.debezium.connector.postgresql.PostgresConnectorTask";

/// Tells the worker when a pipeline's session begins to stream.
async fn watch_streaming(
    metrics: Arc<Metrics>,
    tx: mpsc::UnboundedSender<(String, u64)>,
    name: String,
    epoch: u64,
) {
    loop {
        if metrics.streaming.load(std::sync::atomic::Ordering::Relaxed) {
            let _ = tx.send((name, epoch));
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// How often a worker records the topics its connectors produced to.
const TOPIC_TRACKING_INTERVAL: std::time::Duration = std::time::Duration::from_secs(2);

/// A connector running here.
struct Running {
    /// The configuration it runs with (as written, providers unresolved).
    config: ConfigMap,
    /// Asks the pipeline to stop.
    stop: watch::Sender<bool>,
    /// The pipeline's task.
    task: tokio::task::JoinHandle<()>,
    /// Which start this is (an ending pipeline names its start, so that
    /// the end of a replaced one is not taken for its successor's).
    epoch: u64,
}

/// What changes under the lock.
#[derive(Default)]
struct Inner {
    /// The group generation of the current assignment.
    generation: i32,
    /// Whether this worker leads the group.
    leader: bool,
    /// The connectors assigned here.
    assigned: BTreeSet<String>,
    /// The connectors the leader's assignor saw last time (leader only):
    /// a connector created or deleted since needs a rebalance.
    assigned_set: BTreeSet<String>,
    /// Pipelines running here.
    running: BTreeMap<String, Running>,
    /// Connectors whose pipeline failed, with why, and the configuration
    /// it failed with (a new configuration or a restart clears it).
    failed: BTreeMap<String, (ConfigMap, String)>,
    /// Connectors this worker stopped for their target state, with it.
    parked: BTreeMap<String, TargetState>,
    /// The offset of the last restart request taken.
    restarts_seen: i64,
}

/// A worker of the group.
pub(crate) struct Node {
    /// The worker's id: `host:port` of its REST listener.
    pub(crate) id: String,
    /// The worker part of every connector's translation.
    base_worker: BTreeMap<String, String>,
    /// The worker file, for messages.
    worker_path: PathBuf,
    /// The config topic.
    pub(crate) configs: KafkaLog<ClusterConfig>,
    /// The status topic.
    pub(crate) statuses: KafkaLog<GroupStatus>,
    /// The metrics of the pipelines.
    process: Arc<Process>,
    /// `topic.tracking.enable`: record each connector's topics in the
    /// status topic (`GET /connectors/{name}/topics`).
    pub(crate) track_topics: bool,
    /// Metrics per connector, kept across restarts.
    metrics: Mutex<BTreeMap<String, Arc<Metrics>>>,
    inner: Mutex<Inner>,
    /// Wakes the reconciliation.
    wake: Notify,
    /// Assignments received (bumped by [`Node::assigned`] and
    /// [`Node::lost`]) and the number the reconciliation has applied.
    requested: watch::Sender<u64>,
    applied: watch::Sender<u64>,
    /// Pipelines that ended: name, start epoch and why.
    ended_tx: mpsc::UnboundedSender<Ended>,
    ended_rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<Ended>>,
    /// The next start's epoch.
    epochs: std::sync::atomic::AtomicU64,
    /// Pipelines that began streaming: name and start epoch.
    streaming_tx: mpsc::UnboundedSender<(String, u64)>,
    streaming_rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<(String, u64)>>,
}

/// A pipeline's end: its connector, its start's epoch and its error.
type Ended = (String, u64, Option<String>);

impl Node {
    /// A worker over the two topics.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: String,
        track_topics: bool,
        base_worker: BTreeMap<String, String>,
        worker_path: PathBuf,
        configs: KafkaLog<ClusterConfig>,
        statuses: KafkaLog<GroupStatus>,
        process: Arc<Process>,
    ) -> Arc<Node> {
        let (ended_tx, ended_rx) = mpsc::unbounded_channel();
        let (streaming_tx, streaming_rx) = mpsc::unbounded_channel();
        // Restart requests already in the topic were for other workers'
        // lives: only those written from now on are acted upon.
        let restarts_seen = configs.state().lock().expect("never poisoned").offset;
        Arc::new(Node {
            id,
            base_worker,
            worker_path,
            configs,
            statuses,
            process,
            track_topics,
            metrics: Mutex::new(BTreeMap::new()),
            inner: Mutex::new(Inner {
                restarts_seen,
                ..Inner::default()
            }),
            wake: Notify::new(),
            requested: watch::channel(0).0,
            applied: watch::channel(0).0,
            ended_tx,
            ended_rx: tokio::sync::Mutex::new(ended_rx),
            epochs: std::sync::atomic::AtomicU64::new(0),
            streaming_tx,
            streaming_rx: tokio::sync::Mutex::new(streaming_rx),
        })
    }

    /// Translates a connector's configuration with this worker's file:
    /// what validation and every start do.
    pub(crate) fn translate(
        &self,
        name: &str,
        config: &ConfigMap,
    ) -> Result<crate::config::Config, crate::config::ConfigError> {
        let mut connector = config.clone();
        connector
            .entry("name".into())
            .or_insert_with(|| name.to_owned());
        let mut t = from_connect(
            self.base_worker.clone(),
            connector,
            &self.worker_path,
            &PathBuf::from(format!("connector {name}")),
        )?;
        t.config.name = name.to_owned();
        Ok(t.config)
    }

    /// The connectors this worker runs now (what it announces when it
    /// rejoins).
    pub(crate) fn running(&self) -> Vec<String> {
        let inner = self.inner.lock().expect("never poisoned");
        inner.assigned.iter().cloned().collect()
    }

    /// The group as the operator's page and `walrelay status` show it.
    pub(crate) fn group_view(&self, group_id: &str) -> crate::metrics::page::state::GroupView {
        use crate::metrics::page::state::{GroupView, WorkerView};
        let (generation, leader) = {
            let inner = self.inner.lock().expect("never poisoned");
            (inner.generation, inner.leader)
        };
        let mut workers = self
            .statuses
            .state()
            .lock()
            .expect("never poisoned")
            .workers();
        workers.entry(self.id.clone()).or_default();
        GroupView {
            group_id: group_id.to_owned(),
            worker_id: self.id.clone(),
            generation,
            leader,
            workers: workers
                .into_iter()
                .map(|(worker_id, connectors)| WorkerView {
                    worker_id,
                    connectors,
                })
                .collect(),
        }
    }

    /// The current generation.
    pub(crate) fn generation(&self) -> i32 {
        self.inner.lock().expect("never poisoned").generation
    }

    /// A new assignment from the group: the whole set of connectors this
    /// worker owns from now on.
    pub(crate) fn assigned(&self, generation: i32, leader: bool, connectors: &[String]) {
        {
            let mut inner = self.inner.lock().expect("never poisoned");
            inner.generation = generation;
            inner.leader = leader;
            inner.assigned = connectors.iter().cloned().collect();
        }
        self.requested.send_modify(|n| *n += 1);
        self.wake.notify_one();
    }

    /// Waits until the reconciliation has applied every assignment
    /// received so far (revoked pipelines stopped, new ones started).
    pub(crate) async fn settled(&self) {
        let wanted = *self.requested.borrow();
        let mut applied = self.applied.subscribe();
        let _ = applied.wait_for(|n| *n >= wanted).await;
    }

    /// The membership is lost: stop everything (another worker may take
    /// these connectors at any moment).
    pub(crate) fn lost(&self) {
        self.inner.lock().expect("never poisoned").assigned.clear();
        self.requested.send_modify(|n| *n += 1);
        self.wake.notify_one();
    }

    /// The connectors to assign, as the leader's assignor takes them;
    /// remembered, so that a connector created or deleted after this
    /// moment makes the leader rebalance again.
    pub(crate) fn names_to_assign(&self) -> Vec<String> {
        let names = self.connector_names();
        self.inner.lock().expect("never poisoned").assigned_set = names.iter().cloned().collect();
        names
    }

    /// Whether the leader should ask the group for a rebalance: the set of
    /// connectors changed since it last assigned them.
    fn needs_rebalance(&self) -> bool {
        let names: BTreeSet<String> = self.connector_names().into_iter().collect();
        let inner = self.inner.lock().expect("never poisoned");
        inner.leader && names != inner.assigned_set
    }

    /// Every connector's name, as the config topic has them.
    pub(crate) fn connector_names(&self) -> Vec<String> {
        let state = self.configs.state().lock().expect("never poisoned");
        state.connectors.keys().cloned().collect()
    }

    /// The config topic's offset as read here.
    pub(crate) fn config_offset(&self) -> i64 {
        self.configs.state().lock().expect("never poisoned").offset
    }

    /// Runs the reconciliation until shutdown, then stops every pipeline.
    /// `rebalance` is called when the leader needs the group to rebalance.
    pub(crate) async fn run(
        self: Arc<Self>,
        mut shutdown: watch::Receiver<bool>,
        rebalance: impl Fn() + Send + 'static,
    ) {
        let mut config_changes = self.configs.changes();
        let mut ended = self.ended_rx.lock().await;
        let mut streaming = self.streaming_rx.lock().await;
        let mut topics = tokio::time::interval(TOPIC_TRACKING_INTERVAL);
        loop {
            if *shutdown.borrow() {
                break;
            }
            if self.needs_rebalance() {
                rebalance();
            }
            let wanted = *self.requested.borrow();
            self.reconcile().await;
            self.applied.send_modify(|n| *n = (*n).max(wanted));
            tokio::select! {
                _ = shutdown.changed() => {}
                _ = config_changes.changed() => {}
                _ = self.wake.notified() => {}
                e = ended.recv() => if let Some((name, epoch, why)) = e {
                    self.pipeline_ended(&name, epoch, why).await;
                },
                s = streaming.recv() => if let Some((name, epoch)) = s {
                    self.pipeline_streaming(&name, epoch).await;
                },
                _ = topics.tick(), if self.track_topics => self.record_topics().await,
            }
        }
        let names: Vec<String> = {
            let inner = self.inner.lock().expect("never poisoned");
            inner.running.keys().cloned().collect()
        };
        for name in names {
            self.stop_pipeline(&name).await;
        }
    }

    /// One pass: for every connector assigned here or running here, what
    /// should be, done.
    async fn reconcile(&self) {
        self.take_restarts().await;
        let (connectors, names) = {
            let state = self.configs.state().lock().expect("never poisoned");
            let inner = self.inner.lock().expect("never poisoned");
            let names: BTreeSet<String> = inner
                .assigned
                .iter()
                .chain(inner.running.keys())
                .cloned()
                .collect();
            (state.connectors.clone(), names)
        };
        for name in names {
            let assigned = self
                .inner
                .lock()
                .expect("never poisoned")
                .assigned
                .contains(&name);
            match connectors.get(&name) {
                None => {
                    // Deleted: its statuses go too, written by the worker
                    // that owns it (once: the tombstones are read back).
                    self.stop_pipeline(&name).await;
                    if assigned && self.has_status(&name) {
                        self.forget_status(&name).await;
                    }
                }
                Some(_) if !assigned => {
                    self.stop_pipeline(&name).await;
                }
                Some(entry) => self.converge(&name, entry).await,
            }
        }
    }

    /// Brings an assigned connector to its target state and configuration.
    async fn converge(&self, name: &str, entry: &configs::ConnectorEntry) {
        match entry.target {
            TargetState::Paused | TargetState::Stopped => {
                let was = self.parked(name);
                self.stop_pipeline(name).await;
                if was != Some(entry.target) {
                    self.park(name, entry).await;
                }
            }
            TargetState::Started => {
                let (same, failed_same) = {
                    let inner = self.inner.lock().expect("never poisoned");
                    (
                        inner.running.get(name).map(|r| r.config == entry.config),
                        inner
                            .failed
                            .get(name)
                            .is_some_and(|(c, _)| *c == entry.config),
                    )
                };
                match same {
                    Some(true) => {}
                    Some(false) => {
                        info!(connector = %name, "configuration changed: restarting its pipeline");
                        self.stop_pipeline(name).await;
                        self.start_pipeline(name, entry).await;
                    }
                    None if failed_same => {}
                    None => self.start_pipeline(name, entry).await,
                }
            }
        }
    }

    fn parked(&self, name: &str) -> Option<TargetState> {
        self.inner
            .lock()
            .expect("never poisoned")
            .parked
            .get(name)
            .copied()
    }

    /// Writes the state of a connector stopped for its target state.
    async fn park(&self, name: &str, entry: &configs::ConnectorEntry) {
        self.inner
            .lock()
            .expect("never poisoned")
            .parked
            .insert(name.to_owned(), entry.target);
        let mut records = Vec::new();
        match entry.target {
            TargetState::Paused => {
                let s = self.status(State::Paused, None);
                records.push(statuses::connector_record(name, Some(&s)));
                records.push(statuses::task_record(name, 0, Some(&s)));
            }
            _ => {
                let s = self.status(State::Stopped, None);
                records.push(statuses::connector_record(name, Some(&s)));
                records.push(statuses::task_record(name, 0, None));
                if !entry.tasks.is_empty() {
                    // A stopped connector has no tasks (Connect writes an
                    // empty set of task configurations).
                    self.write_configs(&configs::task_records(name, &[])).await;
                }
            }
        }
        self.write_statuses(&records).await;
    }

    /// A status of this worker in the current generation.
    fn status(&self, state: State, trace: Option<String>) -> Status {
        Status {
            info: StateInfo {
                state,
                worker_id: self.id.clone(),
                trace,
            },
            generation: self.generation(),
        }
    }

    async fn write_statuses(&self, records: &[(String, Option<Vec<u8>>)]) {
        if let Err(e) = self.statuses.send_and_read(records).await {
            warn!(error = %DisplayChain(&e), "could not write to the status topic");
        }
    }

    async fn write_configs(&self, records: &[(String, Option<Vec<u8>>)]) {
        if let Err(e) = self.configs.send_and_read(records).await {
            warn!(error = %DisplayChain(&e), "could not write to the config topic");
        }
    }

    /// Starts a connector's pipeline; a configuration that does not
    /// translate fails its task with why.
    async fn start_pipeline(&self, name: &str, entry: &configs::ConnectorEntry) {
        self.inner
            .lock()
            .expect("never poisoned")
            .parked
            .remove(name);
        let plan = self
            .translate(name, &entry.config)
            .map_err(|e| DisplayChain(&e).to_string())
            .and_then(|c| Plan::new(c).map_err(|e| DisplayChain(&e).to_string()));
        let plan = match plan {
            Ok(plan) => plan,
            Err(why) => {
                error!(connector = %name, error = %why, "connector cannot start");
                self.fail(name, &entry.config, why).await;
                return;
            }
        };
        let metrics = self.metrics_of(name);
        let (stop, stop_rx) = watch::channel(false);
        let ended = self.ended_tx.clone();
        let owned = name.to_owned();
        let epoch = self
            .epochs
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let span = tracing::info_span!("pipeline", pipeline = %name);
        let watcher = tokio::spawn(watch_streaming(
            Arc::clone(&metrics),
            self.streaming_tx.clone(),
            name.to_owned(),
            epoch,
        ));
        let task = tokio::spawn(
            async move {
                let result = crate::pipeline::run(plan, Arc::clone(&metrics), stop_rx).await;
                watcher.abort();
                let why = result.err().map(|e| DisplayChain(&e).to_string());
                metrics.set_ended(why.clone());
                let _ = ended.send((owned, epoch, why));
            }
            .instrument(span),
        );
        info!(connector = %name, "pipeline started");
        self.inner.lock().expect("never poisoned").running.insert(
            name.to_owned(),
            Running {
                config: entry.config.clone(),
                stop,
                task,
                epoch,
            },
        );
        // The connector runs; its task is RUNNING once the pipeline
        // streams (its slot taken, its snapshot done), as Connect's task
        // is once started.
        let running = self.status(State::Running, None);
        let starting = self.status(State::Unassigned, None);
        self.write_statuses(&[
            statuses::connector_record(name, Some(&running)),
            statuses::task_record(name, 0, Some(&starting)),
        ])
        .await;
        let mut task_config = entry.config.clone();
        task_config.insert("task.class".into(), TASK_CLASS.into());
        if entry.tasks != [task_config.clone()] {
            self.write_configs(&configs::task_records(name, &[task_config]))
                .await;
        }
    }

    /// A pipeline began streaming: its task is RUNNING (unless it has
    /// been replaced since).
    async fn pipeline_streaming(&self, name: &str, epoch: u64) {
        let current = self
            .inner
            .lock()
            .expect("never poisoned")
            .running
            .get(name)
            .is_some_and(|r| r.epoch == epoch);
        if current {
            let s = self.status(State::Running, None);
            self.write_statuses(&[statuses::task_record(name, 0, Some(&s))])
                .await;
        }
    }

    /// Records a failed task: Connect keeps the connector `RUNNING` and
    /// fails its task, with the trace.
    async fn fail(&self, name: &str, config: &ConfigMap, why: String) {
        self.inner
            .lock()
            .expect("never poisoned")
            .failed
            .insert(name.to_owned(), (config.clone(), why.clone()));
        let running = self.status(State::Running, None);
        let failed = self.status(State::Failed, Some(why));
        self.write_statuses(&[
            statuses::connector_record(name, Some(&running)),
            statuses::task_record(name, 0, Some(&failed)),
        ])
        .await;
    }

    /// A pipeline ended without being asked to.
    async fn pipeline_ended(&self, name: &str, epoch: u64, why: Option<String>) {
        let running = {
            let mut inner = self.inner.lock().expect("never poisoned");
            match inner.running.get(name) {
                Some(r) if r.epoch == epoch => inner.running.remove(name),
                // Asked to stop (`stop_pipeline` took it), or replaced.
                _ => None,
            }
        };
        let Some(running) = running else {
            return;
        };
        let why = why.unwrap_or_else(|| "the pipeline stopped".into());
        error!(connector = %name, error = %why, "pipeline stopped on a fatal error");
        self.fail(name, &running.config, why).await;
    }

    /// Stops a connector's pipeline, if it runs here, and waits for it to
    /// drain. Returns whether one ran.
    async fn stop_pipeline(&self, name: &str) -> bool {
        let running = self
            .inner
            .lock()
            .expect("never poisoned")
            .running
            .remove(name);
        let Some(running) = running else {
            return false;
        };
        let _ = running.stop.send(true);
        if let Err(e) = running.task.await {
            warn!(connector = %name, error = %e, "pipeline task");
        }
        info!(connector = %name, "pipeline stopped");
        true
    }

    /// Whether the status topic still has a status of the connector.
    fn has_status(&self, name: &str) -> bool {
        let st = self.statuses.state().lock().expect("never poisoned");
        st.connectors.contains_key(name) || st.tasks.contains_key(&(name.to_owned(), 0))
    }

    /// Removes a deleted connector's statuses and metrics.
    async fn forget_status(&self, name: &str) {
        {
            let mut inner = self.inner.lock().expect("never poisoned");
            inner.failed.remove(name);
            inner.parked.remove(name);
        }
        if let Some(m) = self.metrics.lock().expect("never poisoned").remove(name) {
            self.process.remove_pipeline(&m);
        }
        self.write_statuses(&[
            statuses::connector_record(name, None),
            statuses::task_record(name, 0, None),
        ])
        .await;
    }

    /// The connector's metrics, made once.
    fn metrics_of(&self, name: &str) -> Arc<Metrics> {
        let mut all = self.metrics.lock().expect("never poisoned");
        Arc::clone(
            all.entry(name.to_owned())
                .or_insert_with(|| self.process.add_pipeline(name)),
        )
    }

    /// Writes a `status-topic-` record for each topic a connector running
    /// here has produced to and the status topic does not have yet.
    async fn record_topics(&self) {
        let running: Vec<String> = self
            .inner
            .lock()
            .expect("never poisoned")
            .running
            .keys()
            .cloned()
            .collect();
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let mut records = Vec::new();
        for name in running {
            let Some(m) = self
                .metrics
                .lock()
                .expect("never poisoned")
                .get(&name)
                .cloned()
            else {
                continue;
            };
            let known = self
                .statuses
                .state()
                .lock()
                .expect("never poisoned")
                .topics
                .get(&name)
                .cloned()
                .unwrap_or_default();
            for topic in m.topics() {
                if !known.contains_key(&topic) {
                    records.push(statuses::topic_record(&name, &topic, 0, now_ms));
                }
            }
        }
        if !records.is_empty() {
            self.write_statuses(&records).await;
        }
    }

    /// Takes the restart requests of connectors assigned here.
    async fn take_restarts(&self) {
        let requests: Vec<configs::RestartRequest> = {
            let mut state = self.configs.state().lock().expect("never poisoned");
            let seen = self.inner.lock().expect("never poisoned").restarts_seen;
            let new: Vec<_> = state
                .restarts
                .iter()
                .filter(|r| r.offset > seen)
                .cloned()
                .collect();
            // Every worker reads every request; only the owner acts.
            state.restarts.retain(|r| r.offset > seen);
            new
        };
        for r in requests {
            self.inner.lock().expect("never poisoned").restarts_seen = r.offset;
            let owned = self
                .inner
                .lock()
                .expect("never poisoned")
                .assigned
                .contains(&r.connector);
            if owned {
                self.restart(&r).await;
            }
        }
    }

    /// Handles one restart request: with tasks, the pipeline restarts
    /// (only if failed, with `only-failed`); the connector alone has no
    /// work of its own in walrelay, so its status is written again.
    async fn restart(&self, r: &configs::RestartRequest) {
        let failed = self
            .inner
            .lock()
            .expect("never poisoned")
            .failed
            .contains_key(&r.connector);
        if r.include_tasks && (!r.only_failed || failed) {
            info!(connector = %r.connector, "restarting its pipeline, as requested");
            self.stop_pipeline(&r.connector).await;
            self.inner
                .lock()
                .expect("never poisoned")
                .failed
                .remove(&r.connector);
            // The next pass starts it again.
        } else if !r.only_failed {
            let s = self.status(State::Running, None);
            self.write_statuses(&[statuses::connector_record(&r.connector, Some(&s))])
                .await;
        }
    }

    /// Whether the write of a config record failed: the error for the
    /// REST API.
    pub(crate) async fn write(
        &self,
        records: &[(String, Option<Vec<u8>>)],
    ) -> Result<(), LogError> {
        let r = self.configs.send_and_read(records).await;
        self.wake.notify_one();
        r
    }
}
