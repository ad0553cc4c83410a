//! The pipeline: one outbox relayed from start to end. A validated
//! [`Plan`] in, sessions out: the publication, the slot, the snapshot, the
//! stream, reconnects with backoff, graceful shutdown, and the monitors and
//! heartbeats that run beside them.
//!
//! Owns the order of things in a session and the decision between
//! reconnecting and stopping, taken by matching on the class each error
//! carries ([`Retry`]: transient, reconnect with backoff; definite, stop).
//! It drives its source through the [`crate::source`] seam and never
//! confirms a position other than the progress store's frontier; it never
//! recreates a slot it has been reading. Everything that belongs to one
//! pipeline (its plan, router, tracker, metrics handle) is a value held
//! here, never a global, so that one process can run several.

mod plan;
mod poll;
mod session;
mod snapshot;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio::sync::watch;
use tracing::{error, info, warn, Instrument};

use crate::postgres::catalog::{self, CatalogError};

pub(crate) use self::plan::Plan;
use self::session::SessionError;
pub(crate) use self::session::PROTO_VERSION;
use crate::chain::DisplayChain;
use crate::checkpoint::SharedTracker;
use crate::config::OnPipelineFailure;
use crate::lag::LagError;
use crate::metrics::{Metrics, MetricsConfig, Process};
use crate::postgres::wal::WalError;
use crate::retry::Retry;
use crate::sink::choice::Sink;
use crate::sink::transactional::KafkaProgress;
use crate::sink::SinkError;
use crate::source::{ProgressStore, TrackerProgress};

/// Batches in flight between the source and the sink. Every decoded
/// event held here keeps the run of WAL it was read in alive, so depth is
/// memory whenever the broker is slower than the slot; what it buys is
/// decoding ahead while the broker stalls. Across `lan`, W2's worst round
/// was 45-49 MB with 8 batches (six runs), 45-46 with 4 (three) and 43-45
/// with 2 (six); 4 drained W2 at 1.00-1.14 of 8's rate, 2 at 0.87-1.06
/// (docs/benchmarks.md, "The channel between the source and the sink").
pub(crate) const CHANNEL_BATCHES: usize = 4;

/// Errors that end a pipeline.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PipelineError {
    /// The source failed fatally.
    #[error(transparent)]
    Source(#[from] WalError),
    /// The polling source failed fatally.
    #[error(transparent)]
    Poll(#[from] crate::postgres::poll::PollError),
    /// The sink failed fatally.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// Configuration could not be turned into a running pipeline.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The sink task ended without an error of its own.
    #[error("the kafka sink stopped")]
    SinkStopped,
    /// The slot lag monitor stopped walrelay.
    #[error(transparent)]
    Lag(#[from] LagError),
}

/// Errors that end a process.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProcessError {
    /// The metrics listener could not be opened.
    #[error("cannot listen on metrics.listen = {addr}")]
    MetricsListen {
        /// The configured address.
        addr: String,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
    /// The metrics listener's web configuration file cannot be used.
    #[error("cannot secure the metrics listener")]
    MetricsWeb(#[source] crate::metrics::web::WebConfigError),
    /// Pipelines stopped on fatal errors (each was logged with its cause
    /// when it stopped).
    #[error("pipeline(s) stopped on a fatal error: {}", .names.join(", "))]
    Failed {
        /// Their names.
        names: Vec<String>,
    },
}

/// Runs every pipeline of one process, each in its own task with its own
/// producer, tracker, backpressure and reconnects, until shutdown or until
/// none is left running; serves the metrics listener when
/// `metrics_config.listen` is set (secured as its web configuration file says).
/// A pipeline that stops on a fatal error stops alone (its state says why
/// on `/readyz` and in its metrics), unless `on_failure` is
/// [`OnPipelineFailure::Exit`]: then the others are stopped gracefully.
/// Returns an error naming the failed pipelines, if any failed.
pub(crate) async fn run_process(
    plans: Vec<Plan>,
    process: Arc<Process>,
    metrics_config: &MetricsConfig,
    on_failure: OnPipelineFailure,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), ProcessError> {
    let (stop_tx, stop_rx) = watch::channel(false);
    // Every pipeline's metrics first, then the listener (a port in use
    // fails the start before any pipeline connects), then the pipelines.
    let named: Vec<(Plan, Arc<Metrics>)> = plans
        .into_iter()
        .map(|plan| {
            let metrics = process.add_pipeline(&plan.config().name);
            (plan, metrics)
        })
        .collect();
    let listen = metrics_config.listen.as_str();
    if !listen.is_empty() {
        let web = Arc::new(metrics_config.web().map_err(ProcessError::MetricsWeb)?);
        crate::metrics::serve_with(listen, web, Arc::clone(&process), stop_rx.clone())
            .await
            .map_err(|source| ProcessError::MetricsListen {
                addr: listen.to_owned(),
                source,
            })?;
    }
    let mut pipelines = tokio::task::JoinSet::new();
    let mut names = std::collections::HashMap::new();
    for (plan, metrics) in named {
        let name = plan.config().name.clone();
        let span = tracing::info_span!("pipeline", pipeline = %name);
        let handle =
            pipelines.spawn(run(plan, Arc::clone(&metrics), stop_rx.clone()).instrument(span));
        names.insert(handle.id(), (name, metrics));
    }
    let mut failed = Vec::new();
    let mut stopping = false;
    loop {
        let joined = tokio::select! {
            changed = shutdown.changed(), if !stopping => {
                if changed.is_err() || *shutdown.borrow() {
                    stopping = true;
                    let _ = stop_tx.send(true);
                }
                continue;
            }
            joined = pipelines.join_next_with_id() => joined,
        };
        let Some(joined) = joined else { break };
        let (id, result) = match joined {
            Ok((id, result)) => (id, result.map_err(|e| DisplayChain(&e).to_string())),
            Err(e) => (e.id(), Err(format!("the pipeline's task panicked: {e}"))),
        };
        let (name, metrics) = names.remove(&id).expect("every task was named");
        match result {
            Ok(()) => {
                info!(pipeline = %name, "pipeline stopped");
                metrics.set_ended(None);
            }
            Err(e) => {
                error!(pipeline = %name, error = %e, "pipeline stopped on a fatal error");
                metrics.set_ended(Some(e));
                failed.push(name);
                if on_failure == OnPipelineFailure::Exit && !stopping {
                    warn!("runtime.on_pipeline_failure = \"exit\": stopping the other pipelines");
                    stopping = true;
                    let _ = stop_tx.send(true);
                }
            }
        }
    }
    // Every pipeline ended: the listener too.
    let _ = stop_tx.send(true);
    if failed.is_empty() {
        Ok(())
    } else {
        Err(ProcessError::Failed { names: failed })
    }
}

/// Reconnect delays: exponential with full jitter, reset after a session
/// that streamed for a while.
#[derive(Debug)]
pub(crate) struct Backoff {
    min: Duration,
    max: Duration,
    current: Duration,
}

impl Backoff {
    /// A backoff between `min` and `max`.
    pub(crate) fn new(min: Duration, max: Duration) -> Self {
        Backoff {
            min,
            max,
            current: min,
        }
    }

    /// The next delay: uniformly random in [current/2, current], then doubles.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let cur = self.current;
        self.current = (self.current * 2).min(self.max);
        let half = cur / 2;
        half + rand::thread_rng().gen_range(Duration::ZERO..=half)
    }

    /// Back to the minimum.
    pub(crate) fn reset(&mut self) {
        self.current = self.min;
    }
}

/// Runs the pipeline of `plan` until shutdown (Ok) or a fatal error,
/// counting into `metrics` and serving them when `metrics.listen` is set.
pub(crate) async fn run(
    plan: Plan,
    metrics: Arc<Metrics>,
    shutdown: watch::Receiver<bool>,
) -> Result<(), PipelineError> {
    let kind = plan.config().source.kind;
    metrics
        .source_info
        .get_or_create(&crate::metrics::KindLabel {
            kind: kind.as_str(),
        })
        .set(1);
    let (sink, backoff) = start(&plan, &metrics).await?;
    if kind == crate::postgres::poll::config::SourceKind::Poll {
        return poll::run(plan, sink, metrics, shutdown, backoff).await;
    }
    let config = plan.config();
    let (tracker_tx, tracker_rx) = watch::channel::<Option<SharedTracker>>(None);
    let monitor = Some(tokio::spawn({
        let probe_sink = Arc::clone(&sink);
        crate::lag::monitor(
            Arc::clone(&metrics),
            config.lag.clone(),
            plan.params().clone(),
            config.replication.slot.clone(),
            tracker_rx,
            move || probe_sink.probe(Duration::from_secs(2)),
            shutdown.clone(),
        )
        .instrument(tracing::info_span!("lag"))
    }));
    if let Some(record) = plan.heartbeat() {
        tokio::spawn(
            crate::heartbeat::run(
                config.heartbeat.clone(),
                record.clone(),
                Arc::clone(&sink),
                plan.params().clone(),
                shutdown.clone(),
            )
            .instrument(tracing::info_span!("heartbeat")),
        );
    }
    match sink.kafka().and_then(KafkaProgress::of) {
        Some(progress) => {
            sessions(
                &plan,
                &sink,
                &metrics,
                shutdown,
                progress,
                &tracker_tx,
                monitor,
                backoff,
            )
            .await
        }
        None => {
            sessions(
                &plan,
                &sink,
                &metrics,
                shutdown,
                TrackerProgress::default(),
                &tracker_tx,
                monitor,
                backoff,
            )
            .await
        }
    }
}

/// What every pipeline starts with, whatever its source: the Kafka sink
/// and the reconnect backoff.
async fn start(plan: &Plan, metrics: &Arc<Metrics>) -> Result<(Arc<Sink>, Backoff), PipelineError> {
    let config = plan.config();
    let sink = Arc::new(Sink::start(
        &config.sink,
        &config.kafka,
        &config.errors,
        config.replication.status_interval(),
        Arc::clone(metrics),
        &config.replication.slot,
    )?);
    let backoff = Backoff::new(
        Duration::from_millis(config.replication.reconnect_min_ms),
        Duration::from_millis(config.replication.reconnect_max_ms),
    );
    Ok((sink, backoff))
}

/// Runs sessions until shutdown or a fatal error, reconnecting after
/// transient ones.
#[allow(clippy::too_many_arguments)]
async fn sessions<P: ProgressStore>(
    plan: &Plan,
    sink: &Arc<Sink>,
    metrics: &Arc<Metrics>,
    mut shutdown: watch::Receiver<bool>,
    mut progress: P,
    tracker_tx: &watch::Sender<Option<SharedTracker>>,
    mut monitor: Option<tokio::task::JoinHandle<Result<(), LagError>>>,
    mut backoff: Backoff,
) -> Result<(), PipelineError> {
    let mut slot_seen = false;
    loop {
        // Exactly-once: before the first session, and after the producer
        // became unusable, take the transactional id (fencing any zombie)
        // and read where the pipeline left off.
        if !prepare_exactly_once(plan, sink, &mut shutdown).await? {
            return Ok(());
        }
        let started = tokio::time::Instant::now();
        let result = {
            let session = session::run(
                plan,
                sink,
                metrics,
                &mut shutdown,
                (&mut slot_seen, &mut progress),
                tracker_tx,
            );
            tokio::pin!(session);
            loop {
                match monitor.as_mut() {
                    Some(m) => tokio::select! {
                        r = &mut session => break r,
                        joined = m => {
                            monitor = None;
                            if let Ok(Err(e)) = joined {
                                error!(error = %DisplayChain(&e), "slot lag monitor stopped walrelay");
                                return Err(e.into());
                            }
                        }
                    },
                    None => break session.await,
                }
            }
        };
        metrics.streaming.store(false, Ordering::Relaxed);
        match result {
            Ok(()) => return Ok(()),
            Err(SessionError::Sink(Retry::Transient(e))) => {
                // An aborted Kafka transaction: a new session resumes from
                // the last committed progress.
                metrics.reconnects.inc();
                let delay = backoff.next_delay();
                warn!(error = %DisplayChain(&e), retry_in = ?delay, "session ended; resuming from the last committed progress");
                tokio::select! {
                    _ = shutdown.changed() => return Ok(()),
                    _ = tokio::time::sleep(delay) => {}
                }
            }
            Err(SessionError::Sink(Retry::Definite(e))) => return Err(e.into()),
            Err(SessionError::Source(Retry::Transient(e))) => {
                metrics.reconnects.inc();
                if started.elapsed() > Duration::from_secs(30) {
                    backoff.reset();
                }
                let delay = backoff.next_delay();
                warn!(error = %DisplayChain(&e), retry_in = ?delay, "replication session ended; reconnecting");
                tokio::select! {
                    _ = shutdown.changed() => return Ok(()),
                    _ = tokio::time::sleep(delay) => {}
                }
            }
            Err(SessionError::Source(Retry::Definite(e))) => return Err(e.into()),
            Err(SessionError::SinkGone) => return Err(PipelineError::SinkStopped),
        }
    }
}

/// Exactly-once's start, when due: waits until no other process holds the
/// slot (so a hot standby does not fence the active instance by starting),
/// then `init_transactions` and the last committed progress; Kafka or
/// PostgreSQL away is retried. Returns `false` on shutdown.
async fn prepare_exactly_once(
    plan: &Plan,
    sink: &Sink,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<bool, PipelineError> {
    let Some(eos) = sink.exactly_once() else {
        return Ok(true);
    };
    if !eos.needs_init() {
        return Ok(true);
    }
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
    let mut told = false;
    loop {
        let wait = match slot_held_elsewhere(plan, eos.slot()).await {
            Ok(false) => match sink
                .start_exactly_once()
                .await
                .map_err(Retry::<SinkError>::from)
            {
                Ok(()) => return Ok(true),
                Err(Retry::Transient(e)) => {
                    let delay = backoff.next_delay();
                    warn!(error = %DisplayChain(&e), retry_in = ?delay, "exactly-once start failed; retrying");
                    delay
                }
                Err(Retry::Definite(e)) => return Err(e.into()),
            },
            Ok(true) => {
                if !told {
                    info!(
                        slot = eos.slot(),
                        "the slot is in use by another process: waiting as a standby before \
                         taking the transactional id (taking it would fence the active instance)"
                    );
                    told = true;
                }
                Duration::from_secs(1)
            }
            Err(e) => {
                let delay = backoff.next_delay();
                warn!(error = %DisplayChain(&e), retry_in = ?delay, "cannot read the slot's state; retrying");
                delay
            }
        };
        tokio::select! {
            _ = shutdown.changed() => return Ok(false),
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// Whether a walsender of another process holds `slot` now.
async fn slot_held_elsewhere(plan: &Plan, slot: &str) -> Result<bool, CatalogError> {
    let params = plan.params();
    let bound = catalog::sql_timeout(params);
    let client = catalog::connect(params).await?;
    let state = catalog::bounded(
        bound,
        "reading the slot's state",
        catalog::slot_state(&client, slot),
    )
    .await?;
    Ok(state.is_some_and(|s| s.active))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_caps() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(800));
        let mut last_cap = Duration::ZERO;
        for i in 0..10 {
            let d = b.next_delay();
            let cap = Duration::from_millis((100u64 << i.min(3)).min(800));
            assert!(
                d <= cap && d >= cap / 2,
                "delay {d:?} outside [{:?}, {cap:?}]",
                cap / 2
            );
            assert!(cap >= last_cap);
            last_cap = cap;
        }
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(100));
    }
}
