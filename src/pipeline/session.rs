//! One session of a pipeline: the WAL source opened (publication, slot,
//! snapshot, the start position agreed between the slot and the progress
//! store), then driven through the [`crate::source`] seam.
//!
//! Owns the order of a session's steps and its end: the sink finishes what
//! was handed over, the source reports the final durable position. It never
//! confirms a position other than the frontier's and never recreates a
//! slot it has been reading.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_postgres::Client;
use tracing::{error, info, warn, Instrument};
use walrelay_proto::Lsn;

use super::{snapshot, Plan, CHANNEL_BATCHES};
use crate::chain::DisplayChain;
use crate::checkpoint::SharedTracker;
use crate::connect::pg::TableMeta;
use crate::metrics::Metrics;
use crate::postgres::catalog::capability::ServerFacts;
use crate::postgres::catalog::snapshot as pg_snapshot;
use crate::postgres::catalog::{self, CatalogError, SlotState};
use crate::postgres::config::{SlotMissing, SnapshotMode};
use crate::postgres::reader::WalIo;
use crate::postgres::replication::{ReplicationConnection, ReplicationError};
use crate::postgres::slot;
use crate::postgres::wal::{self, StreamSettings, WalError, WalSource};
use crate::retry::Retry;
use crate::sink::choice::Sink;
use crate::sink::SinkError;
use crate::source::{Frontier, ProgressStore, SlotVerdict, Source, StreamEnd};

/// pgoutput protocol version requested when not streaming (1: whole
/// transactions after commit); with `replication.streaming` on,
/// [`wal::STREAMING_PROTO_VERSION`] (`streaming 'on'`) on PostgreSQL 14 and
/// 15 and [`wal::PARALLEL_STREAMING_PROTO_VERSION`] (`streaming
/// 'parallel'`) from 16 are requested instead ([`wal::proto_version_for`]).
pub(crate) const PROTO_VERSION: u32 = 1;

/// How a session failed, each side in its class.
pub(super) enum SessionError<E> {
    /// The source: reconnect with backoff when transient, stop when
    /// definite.
    Source(Retry<E>),
    /// The sink: a new session when transient (an aborted Kafka
    /// transaction), stop when definite.
    Sink(Retry<SinkError>),
    /// The sink went away without an error of its own.
    SinkGone,
}

impl<E> From<Retry<E>> for SessionError<E> {
    fn from(e: Retry<E>) -> Self {
        SessionError::Source(e)
    }
}
impl<E> From<SinkError> for SessionError<E> {
    fn from(e: SinkError) -> Self {
        SessionError::Sink(e.into())
    }
}
impl From<CatalogError> for SessionError<WalError> {
    fn from(e: CatalogError) -> Self {
        SessionError::Source(e.into())
    }
}
impl From<ReplicationError> for SessionError<WalError> {
    fn from(e: ReplicationError) -> Self {
        SessionError::Source(e.into())
    }
}

/// Why the slot's confirmed position can come back behind what this
/// process saw Kafka acknowledge. On every version the same thing is right:
/// start at the delivered position (the server skips what commits before
/// it), so what Kafka acknowledged is not produced again wherever the slot
/// lost or never got the confirmation.
fn behind_reason(saves_confirmed_at_shutdown: bool) -> &'static str {
    if saves_confirmed_at_shutdown {
        // PostgreSQL 17+ writes the position at a shutdown checkpoint: what
        // is missing is what never reached it (a crash, an immediate
        // shutdown, or Kafka acknowledgements after the connection broke).
        "the server did not get walrelay's last confirmations before it went away \
         (a crash or an immediate shutdown, or deliveries acknowledged after the \
         connection broke)"
    } else {
        "the server restarted, and before PostgreSQL 17 it does not save a logical \
         slot's confirmed position at shutdown, only now and then"
    }
}

/// One replication session: opens the WAL source (publication, slot,
/// snapshot, `START_REPLICATION` at the right position), then drives it.
pub(super) async fn run<P: ProgressStore>(
    plan: &Plan,
    sink: &Arc<Sink>,
    metrics: &Arc<Metrics>,
    shutdown: &mut watch::Receiver<bool>,
    (slot_seen, progress): (&mut bool, &mut P),
    tracker_tx: &watch::Sender<Option<SharedTracker>>,
) -> Result<(), SessionError<WalError>> {
    let replication = &plan.config().replication;
    let slot = &replication.slot;
    let mut opening = Opening::prepare(plan, sink).await?;
    // The replication socket lives on a thread of its own (see
    // `postgres::reader`); declared before everything made on it, so it
    // outlives them.
    let wal_io = WalIo::start().map_err(ReplicationError::Io)?;
    let mut repl = wal_io
        .connect(plan.params())
        .await
        .map_err(|e| WalError::explain(e, slot))?;
    let identity = repl.identify_system().await?;
    // The same LSN on another server, or on a promoted standby's new
    // timeline, is other WAL.
    let origin = format!("{}/{}", identity.system_id, identity.timeline);
    let resume_at = opening
        .prepare_slot(&mut repl, &origin, (slot_seen, &*progress))
        .await?;
    let source = opening
        .start(&wal_io, repl, resume_at, metrics, identity.timeline)
        .await?;
    let stopped = drive(
        plan, sink, metrics, source, progress, &origin, shutdown, tracker_tx,
    )
    .await?;
    if replication.slot_drop_on_stop {
        slot::drop_slot_when_released(&opening.client, slot).await;
    }
    stopped.map_err(SessionError::from)
}

/// What the steps that open a session share.
struct Opening<'a> {
    plan: &'a Plan,
    sink: &'a Arc<Sink>,
    /// The SQL connection, held until the session ends.
    client: Client,
    /// The bound on every catalog round trip, so that a black-holed path
    /// ends the session (and is retried) instead of hanging it.
    bound: Duration,
    /// What the server is and has.
    server: ServerFacts,
    /// Each outbox table's columns, in [`Plan::tables`] order.
    table_metas: Vec<TableMeta>,
}

impl<'a> Opening<'a> {
    /// The catalog side, before anything is created: the server's
    /// capabilities, the publication, each outbox table's columns.
    async fn prepare(plan: &'a Plan, sink: &'a Arc<Sink>) -> Result<Self, SessionError<WalError>> {
        let params = plan.params();
        let bound = catalog::sql_timeout(params);
        let client = catalog::connect(params).await?;
        // Below 14, or without what logical decoding needs: stop with the fix.
        let server = catalog::require_capabilities(&client, bound).await?;
        // Before anything is created: a server without failover slots is
        // refused, never given a plain slot.
        slot::require_failover_support(&plan.config().replication, &server)?;
        catalog::bounded(
            bound,
            "preparing the publication",
            catalog::prepare_publication(&client, &plan.publication()),
        )
        .await?;
        let table_metas = table_metas(plan, &client, bound).await?;
        Ok(Opening {
            plan,
            sink,
            client,
            bound,
            server,
            table_metas,
        })
    }

    /// The slot as the progress store sees it, then made ready: an existing
    /// one checked, a missing one created (after the snapshot when there is
    /// one). Returns a position past the slot's that this process saw Kafka
    /// acknowledge, if any.
    async fn prepare_slot<P: ProgressStore>(
        &self,
        repl: &mut ReplicationConnection,
        origin: &str,
        (slot_seen, progress): (&mut bool, &P),
    ) -> Result<Option<Lsn>, SessionError<WalError>> {
        let replication = &self.plan.config().replication;
        let slot = &replication.slot;
        let mut slot_state = catalog::bounded(
            self.bound,
            "reading the slot's state",
            catalog::slot_state(&self.client, slot),
        )
        .await?;
        let verdict = self
            .verify(progress, origin, slot_state.as_ref())
            .map_err(|reason| Retry::Definite(WalError::ExactlyOnce(reason)))?;
        if verdict == SlotVerdict::RedoSnapshot {
            if let Some(state) = slot_state.take() {
                self.drop_unfinished_snapshot(&state).await?;
            }
        }
        match slot_state {
            Some(state) => {
                let resume_at = self
                    .resume_slot(repl, &state, origin, (slot_seen, progress))
                    .await?;
                Ok(resume_at)
            }
            None if *slot_seen => Err(Retry::Definite(WalError::SlotGone(slot.clone())).into()),
            None if replication.create_slot
                && replication.snapshot_mode != SnapshotMode::NoData =>
            {
                self.snapshot_then_slot(repl).await?;
                *slot_seen = true;
                Ok(None)
            }
            None if replication.create_slot => {
                self.create_slot(repl).await?;
                *slot_seen = true;
                Ok(None)
            }
            None => Err(CatalogError::SlotMismatch {
                slot: slot.clone(),
                reason: "it does not exist and replication.create_slot is false".into(),
            }
            .into()),
        }
    }

    /// Exactly-once: the slot against the last committed progress (ahead
    /// of it: something else consumed it; an uncommitted snapshot: again).
    /// The error says why the session cannot go on.
    fn verify<P: ProgressStore>(
        &self,
        progress: &P,
        origin: &str,
        state: Option<&SlotState>,
    ) -> Result<SlotVerdict, String> {
        let replication = &self.plan.config().replication;
        let slot_at = state.map(|s| s.confirmed_flush_lsn.unwrap_or(Lsn::ZERO));
        match progress.verify(origin, slot_at) {
            Ok(verdict) => Ok(verdict),
            // The operator asked for a lost slot to be recreated.
            Err(reason) if slot_at.is_none() && replication.slot_missing == SlotMissing::Create => {
                warn!(
                    slot = replication.slot,
                    reason, "recreating the slot anyway (replication.slot_missing = \"create\")"
                );
                Ok(SlotVerdict::Proceed)
            }
            Err(reason) => Err(reason),
        }
    }

    /// Drops the slot of an initial snapshot that never committed to Kafka.
    async fn drop_unfinished_snapshot(
        &self,
        state: &SlotState,
    ) -> Result<(), SessionError<WalError>> {
        let slot = &self.plan.config().replication.slot;
        catalog::check_slot(slot, state, &self.plan.params().dbname)?;
        warn!(
            slot,
            "the last initial snapshot never committed to Kafka: dropping its slot \
             and snapshotting again (nothing of it is visible to read_committed consumers)"
        );
        catalog::bounded(
            self.bound,
            "dropping the unfinished snapshot's slot",
            catalog::drop_slot(&self.client, slot),
        )
        .await?;
        Ok(())
    }

    /// An existing slot: checked, usable on this server, its failover flag
    /// reconciled; the current rows published first with
    /// `snapshot_mode = always`. Returns where to resume past the slot's
    /// position, if this process saw Kafka acknowledge more.
    async fn resume_slot<P: ProgressStore>(
        &self,
        repl: &mut ReplicationConnection,
        state: &SlotState,
        origin: &str,
        (slot_seen, progress): (&mut bool, &P),
    ) -> Result<Option<Lsn>, SessionError<WalError>> {
        let replication = &self.plan.config().replication;
        let slot = &replication.slot;
        catalog::check_slot(slot, state, &self.plan.params().dbname)?;
        catalog::bounded(
            self.bound,
            "asking whether the server is a standby",
            slot::usable_here(&self.client, slot, state),
        )
        .await?;
        catalog::bounded(self.bound, "setting the slot's failover", async {
            slot::reconcile_failover(repl, slot, state, replication.failover)
                .await
                .map_err(Retry::<WalError>::from)
        })
        .await?;
        *slot_seen = true;
        let slot_at = state.confirmed_flush_lsn.unwrap_or(Lsn::ZERO);
        let resume_at = progress
            .resume_after(origin)
            .filter(|&delivered| delivered > slot_at);
        if let Some(delivered) = resume_at {
            warn!(
                slot,
                slot_confirmed = %slot_at,
                resume_at = %delivered,
                why = behind_reason(self.server.saves_confirmed_at_shutdown()),
                "the slot's confirmed position is behind what this walrelay delivered; \
                 asking the server to skip the transactions already delivered"
            );
        }
        if replication.snapshot_mode == SnapshotMode::Always {
            // Debezium's `always`: the current rows at every start, then
            // the stream from the slot's position (overlaps repeat).
            let published = snapshot::publish(
                self.plan,
                self.sink,
                &self.client,
                &self.table_metas,
                None,
                slot_at,
            )
            .await?;
            info!(
                rows = published,
                "snapshot delivered (snapshot_mode = always)"
            );
        }
        Ok(resume_at)
    }

    /// A new slot with the initial snapshot. At-least-once: snapshot
    /// first, slot second, so a crash in between leaves no slot.
    /// Exactly-once: a committed marker first, then the slot, then the
    /// snapshot as one Kafka transaction; a crash before it commits leaves
    /// the marker, and the next start drops the slot and begins again.
    async fn snapshot_then_slot(
        &self,
        repl: &mut ReplicationConnection,
    ) -> Result<(), SessionError<WalError>> {
        let replication = &self.plan.config().replication;
        let slot = &replication.slot;
        let exactly_once = self.sink.exactly_once().is_some();
        catalog::bounded(
            self.bound,
            "reading the publication's comment",
            slot::may_create_slot(replication, &self.client),
        )
        .await?;
        self.sink.mark_snapshot_started().await?;
        let exported = pg_snapshot::export(self.plan.params(), slot)
            .await
            .map_err(|e| WalError::explain(e, slot))?;
        if exactly_once {
            pg_snapshot::persist(&self.client, &exported, slot).await?;
        }
        info!(slot, consistent_point = %exported.consistent_point, tables = self.plan.tables().len(), "snapshotting the outbox tables");
        let published = snapshot::publish(
            self.plan,
            self.sink,
            &self.client,
            &self.table_metas,
            Some(&exported.snapshot_name),
            exported.consistent_point,
        )
        .await?;
        if !exactly_once {
            pg_snapshot::persist(&self.client, &exported, slot).await?;
        }
        drop(exported);
        // The copy is never a failover slot (PostgreSQL does not copy the
        // flag); a crash before this leaves a plain slot, which the next
        // start turns on as any existing one.
        if replication.failover {
            catalog::bounded(self.bound, "setting the slot's failover", async {
                repl.set_slot_failover(slot, true)
                    .await
                    .map_err(Retry::<WalError>::from)
            })
            .await?;
        }
        info!(
            slot,
            rows = published,
            "snapshot delivered; created replication slot at its position"
        );
        Ok(())
    }

    /// A new slot without a snapshot (`snapshot_mode = no_data`).
    async fn create_slot(
        &self,
        repl: &mut ReplicationConnection,
    ) -> Result<(), SessionError<WalError>> {
        let replication = &self.plan.config().replication;
        let slot = &replication.slot;
        catalog::bounded(
            self.bound,
            "reading the publication's comment",
            slot::may_create_slot(replication, &self.client),
        )
        .await?;
        let failover = replication.failover;
        let at = repl
            .create_logical_slot(slot, failover)
            .await
            .map_err(|e| WalError::explain(e, slot))?;
        info!(slot, consistent_point = %at, failover, "created replication slot");
        Ok(())
    }

    /// `START_REPLICATION` at the slot's position (or `resume_at`, when
    /// later), and the WAL source over the stream, its tracker starting
    /// exactly where the server does.
    async fn start(
        &mut self,
        wal_io: &WalIo,
        repl: ReplicationConnection,
        resume_at: Option<Lsn>,
        metrics: &Arc<Metrics>,
        timeline: u32,
    ) -> Result<WalSource, SessionError<WalError>> {
        let config = self.plan.config();
        let slot = &config.replication.slot;
        let publication = &config.replication.publication;
        // Best effort; a dead connection shows in the next bounded step.
        let _ = tokio::time::timeout(
            self.bound,
            slot::record_slot(&self.client, publication, slot),
        )
        .await;
        // No streaming while messages are events (`Config::streaming`): the
        // server then sends each transaction whole at its commit, without
        // its rolled-back subtransactions, and walrelay relays it as it
        // arrives.
        let proto_version =
            wal::choose_proto_version(self.server.version_num, config.streaming(), PROTO_VERSION);
        let mut options = vec![
            ("proto_version", proto_version.to_string()),
            ("publication_names", publication.clone()),
            ("messages", "true".to_string()),
        ];
        // ("streaming", "on") from protocol 2, ("streaming", "parallel") from 4.
        if let Some(mode) = wal::streaming_option(proto_version) {
            options.push(("streaming", mode.to_string()));
        }
        let stream = repl
            .start_replication(slot, resume_at.unwrap_or(Lsn::ZERO), &options)
            .await?;
        metrics.proto_version.set(i64::from(proto_version));
        // The server starts at the slot's confirmed_flush_lsn, or at
        // resume_at when that is later; read the slot back now that we hold
        // it, so the tracker starts exactly there.
        let state = catalog::bounded(
            self.bound,
            "reading the slot's state",
            catalog::slot_state(&self.client, slot),
        )
        .await?
        .ok_or_else(|| Retry::Definite(WalError::SlotGone(slot.clone())))?;
        let start = state
            .confirmed_flush_lsn
            .unwrap_or(Lsn::ZERO)
            .max(resume_at.unwrap_or(Lsn::ZERO));
        info!(slot, publication, start = %start, timeline, "streaming");
        let settings = StreamSettings {
            proto_version,
            status_interval: config.replication.status_interval(),
            receive_timeout: Duration::from_millis(config.replication.receive_timeout_ms),
        };
        let reader = wal_io.receive(
            stream.reader,
            Duration::from_micros(config.replication.read_coalesce_us),
        );
        Ok(WalSource::new(
            start,
            (reader, stream.writer),
            self.plan.assembler(std::mem::take(&mut self.table_metas)),
            settings,
            Arc::clone(metrics),
        ))
    }
}

/// Each outbox table's columns: the facts pgoutput does not send, and
/// every column its routing names checked before anything is created.
async fn table_metas(
    plan: &Plan,
    client: &Client,
    bound: Duration,
) -> Result<Vec<TableMeta>, SessionError<WalError>> {
    let mut table_metas = Vec::with_capacity(plan.tables().len());
    for t in plan.tables() {
        let (meta, relation) =
            catalog::bounded(bound, "reading an outbox table's columns", async {
                let meta = catalog::table_meta(client, &t.schema, &t.table).await?;
                let relation = pg_snapshot::relation_info(client, &t.schema, &t.table).await?;
                Ok::<_, CatalogError>((meta, relation))
            })
            .await?;
        t.require_columns(&plan.router(), &Arc::new(relation), &meta)?;
        table_metas.push(meta);
    }
    Ok(table_metas)
}
/// Drives one opened source until shutdown or an error: a tracker at the
/// source's start, the sink task with its own copy of the router, the
/// stream, and the end of the session. On shutdown returns the sink's own
/// result once the final durable position went to the origin.
#[allow(clippy::too_many_arguments)]
pub(super) async fn drive<S: Source, P: ProgressStore>(
    plan: &Plan,
    sink: &Arc<Sink>,
    metrics: &Metrics,
    mut source: S,
    progress: &mut P,
    origin: &str,
    shutdown: &mut watch::Receiver<bool>,
    tracker_tx: &watch::Sender<Option<SharedTracker>>,
) -> Result<Result<(), SinkError>, SessionError<S::Error>> {
    let tracker = SharedTracker::new(source.start());
    let frontier = progress.begin_session(origin, &tracker);
    sink.begin_session(tracker.clone());
    tracker_tx.send_replace(Some(tracker.clone()));
    metrics.streaming.store(true, Ordering::Relaxed);
    let (tx, rx) = mpsc::channel(CHANNEL_BATCHES);
    let mut sink_task = {
        let sink = Arc::clone(sink);
        let mut router = plan.router();
        tokio::spawn(
            async move { sink.run(&mut router, rx).await }.instrument(tracing::info_span!("sink")),
        )
    };
    let streamed = source.stream(&tracker, &frontier, tx, shutdown).await;
    // The sender is gone now: the sink finishes what is queued, then ends.
    let shutdown_timeout = Duration::from_millis(plan.config().runtime.shutdown_timeout_ms);
    match streamed {
        Ok(StreamEnd::Shutdown) => {
            info!("shutting down: waiting for in-flight deliveries");
            let sink_result = match tokio::time::timeout(shutdown_timeout, sink_task).await {
                Ok(joined) => joined.unwrap_or(Ok(())),
                Err(_) => {
                    warn!(
                        ?shutdown_timeout,
                        "in-flight deliveries did not finish in time"
                    );
                    Ok(())
                }
            };
            // Let librdkafka report what it still holds, within the bound.
            let s = Arc::clone(sink);
            let _ = tokio::task::spawn_blocking(move || s.flush(Duration::from_secs(2))).await;
            let durable = frontier.durable();
            source.finish(durable).await.map_err(SessionError::Source)?;
            info!(confirmed = %durable, in_flight = tracker.in_flight_events(), "final status sent");
            Ok(sink_result)
        }
        Ok(StreamEnd::SinkStopped) => {
            let err = match sink_task.await {
                Ok(Err(e)) => e,
                _ => return Err(SessionError::SinkGone),
            };
            error!(error = %DisplayChain(&err), "sink failed; nothing after the failed event is confirmed");
            Err(err.into())
        }
        Err(e) => {
            // The sink still produces what the source handed over before the
            // error (as Debezium delivers the records before a failing one),
            // within the shutdown bound; none of it is confirmed unless its
            // whole transaction was.
            if tokio::time::timeout(shutdown_timeout, &mut sink_task)
                .await
                .is_err()
            {
                sink_task.abort();
            }
            let s = Arc::clone(sink);
            let _ = tokio::task::spawn_blocking(move || s.flush(Duration::from_secs(5))).await;
            Err(SessionError::Source(e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_a_slot_is_behind_fits_the_server_version() {
        let before_17 = behind_reason(false);
        assert!(before_17.contains("before PostgreSQL 17"), "{before_17}");
        let from_17 = behind_reason(true);
        assert!(!from_17.contains("does not save"), "{from_17}");
        assert!(from_17.contains("crash"), "{from_17}");
    }
}
