//! The relay: replication sessions from start to end, reconnects with
//! backoff, graceful shutdown.
//!
//! Owns the order of things in a session (publication, slot, replication
//! connection, tracker, sink task, stream) and the decision between
//! reconnecting (transient errors) and stopping (fatal ones). It never
//! confirms an LSN other than the tracker's, and never recreates a slot it
//! has been reading.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio::sync::{mpsc, watch};
use tracing::{error, info, warn, Instrument};
use walrelay_proto::Lsn;

use crate::chain::DisplayChain;
use crate::checkpoint::SharedTracker;
use crate::config::Config;
use crate::router::Router;
use crate::sink::{KafkaSink, SinkError};
use crate::source::catalog::{self, CatalogError};
use crate::source::config::{SlotMissing, SnapshotMode};
use crate::source::replication::{ConnectParams, ReplicationConnection, SystemIdentity};
use crate::source::{self, snapshot, status_update, SourceError, StreamEnd, StreamSettings};
use crate::txn::Assembler;

/// pgoutput protocol version requested when not streaming (1: whole
/// transactions after commit); with `replication.streaming` on a PostgreSQL
/// 14+ server, [`source::STREAMING_PROTO_VERSION`] is requested instead.
pub const PROTO_VERSION: u32 = 1;
/// Batches in flight between the source and the sink.
pub const CHANNEL_BATCHES: usize = 8;

/// Errors that end the relay.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// The source failed fatally.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The sink failed fatally.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// Configuration could not be turned into a running relay.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The slot lag monitor stopped walrelay.
    #[error(transparent)]
    Lag(#[from] crate::lag::LagError),
    /// The metrics listener could not be opened.
    #[error("cannot listen on metrics.listen = {addr}")]
    MetricsListen {
        /// The configured address.
        addr: String,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
}

/// Reconnect delays: exponential with full jitter, reset after a session
/// that streamed for a while.
#[derive(Debug)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    current: Duration,
}

impl Backoff {
    /// A backoff between `min` and `max`.
    pub fn new(min: Duration, max: Duration) -> Self {
        Backoff {
            min,
            max,
            current: min,
        }
    }

    /// The next delay: uniformly random in [current/2, current], then doubles.
    pub fn next_delay(&mut self) -> Duration {
        let cur = self.current;
        self.current = (self.current * 2).min(self.max);
        let half = cur / 2;
        half + rand::thread_rng().gen_range(Duration::ZERO..=half)
    }

    /// Back to the minimum.
    pub fn reset(&mut self) {
        self.current = self.min;
    }
}

/// Connection parameters from the config.
pub fn connect_params(config: &Config) -> ConnectParams {
    let pg = &config.postgres;
    ConnectParams {
        host: pg.host.clone(),
        port: pg.port,
        user: pg.user.clone(),
        password: pg.password.clone(),
        dbname: pg.dbname.clone(),
        application_name: pg.application_name.clone(),
        connect_timeout: Duration::from_millis(pg.connect_timeout_ms),
        tls: crate::source::tls::TlsParams::from_config(pg),
    }
}

/// Runs until shutdown (Ok) or a fatal error.
pub async fn run(
    config: Arc<Config>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), RelayError> {
    let sink = Arc::new(KafkaSink::with_errors(
        &config.kafka,
        &config.errors,
        config.status_interval(),
    )?);
    // Fail on a bad regex before connecting anywhere.
    Router::new(
        config.router.clone(),
        config.converters,
        config.debezium.clone(),
    )
    .map_err(|e| RelayError::Config(e.to_string()))?;
    // A spill directory walrelay cannot write to would fail only when the
    // first large transaction arrives, maybe weeks later: find out now.
    if let Some(dir) = &config.replication.spill_dir {
        crate::txn::spill::SpillFile::new(0, Some(dir))
            .map_err(|e| RelayError::Config(DisplayChain(&e).to_string()))?;
    }
    let mut backoff = Backoff::new(
        Duration::from_millis(config.replication.reconnect_min_ms),
        Duration::from_millis(config.replication.reconnect_max_ms),
    );
    if !config.metrics.listen.is_empty() {
        crate::metrics::serve(&config.metrics.listen, shutdown.clone())
            .await
            .map_err(|source| RelayError::MetricsListen {
                addr: config.metrics.listen.clone(),
                source,
            })?;
    }
    let (tracker_tx, tracker_rx) = watch::channel::<Option<SharedTracker>>(None);
    let mut monitor = Some(tokio::spawn({
        let probe_sink = Arc::clone(&sink);
        crate::lag::monitor(
            config.lag.clone(),
            connect_params(&config),
            config.replication.slot.clone(),
            tracker_rx,
            move || probe_sink.probe(Duration::from_secs(2)),
            shutdown.clone(),
        )
        .instrument(tracing::info_span!("lag"))
    }));
    if config.heartbeat.interval_ms > 0 {
        let record = crate::heartbeat::HeartbeatRecord::new(
            &config.heartbeat,
            &config.debezium,
            config.converters,
        )
        .map_err(|e| RelayError::Config(DisplayChain(&e).to_string()))?;
        tokio::spawn(
            crate::heartbeat::run(
                config.heartbeat.clone(),
                record,
                Arc::clone(&sink),
                connect_params(&config),
                shutdown.clone(),
            )
            .instrument(tracing::info_span!("heartbeat")),
        );
    }
    let mut slot_seen = false;
    let mut resume = None;
    loop {
        let started = tokio::time::Instant::now();
        let result = {
            let session = session(
                &config,
                &sink,
                &mut shutdown,
                (&mut slot_seen, &mut resume),
                &tracker_tx,
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
        crate::metrics::metrics()
            .streaming
            .store(false, std::sync::atomic::Ordering::Relaxed);
        match result {
            Ok(()) => return Ok(()),
            Err(SessionError::Sink(e)) => return Err(e.into()),
            Err(SessionError::Source(e)) if e.is_transient() => {
                crate::metrics::metrics().reconnects.inc();
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
            Err(SessionError::Source(e)) => return Err(e.into()),
        }
    }
}

enum SessionError {
    Source(SourceError),
    Sink(SinkError),
}

/// What this process delivered in its previous sessions, to resume after.
/// Before PostgreSQL 17 a server restart can move a slot's confirmed
/// position back to its last checkpoint (a clean shutdown does not write
/// it); the next session then asks the server to skip the transactions this
/// process already had acknowledged by Kafka, as PostgreSQL's own apply
/// worker does with its replication origin.
struct Resume {
    /// The server's system identifier and timeline when it was recorded:
    /// on another server or after a promotion the same LSNs mean other WAL.
    system_id: String,
    timeline: u32,
    /// The previous session's tracker; it keeps settling the deliveries
    /// that were in flight when that session ended.
    tracker: SharedTracker,
}

impl Resume {
    /// The position every event before which Kafka acknowledged, if it
    /// applies to the server behind `identity`.
    fn position_for(&self, identity: &SystemIdentity) -> Option<Lsn> {
        (self.system_id == identity.system_id && self.timeline == identity.timeline)
            .then(|| self.tracker.confirmed())
    }
}

impl From<SourceError> for SessionError {
    fn from(e: SourceError) -> Self {
        SessionError::Source(e)
    }
}
impl From<CatalogError> for SessionError {
    fn from(e: CatalogError) -> Self {
        SessionError::Source(e.into())
    }
}
impl From<crate::source::replication::ReplicationError> for SessionError {
    fn from(e: crate::source::replication::ReplicationError) -> Self {
        SessionError::Source(e.into())
    }
}

async fn session(
    config: &Arc<Config>,
    sink: &Arc<KafkaSink>,
    shutdown: &mut watch::Receiver<bool>,
    (slot_seen, resume): (&mut bool, &mut Option<Resume>),
    tracker_tx: &watch::Sender<Option<SharedTracker>>,
) -> Result<(), SessionError> {
    let params = connect_params(config);
    let (schema, table) = config
        .outbox
        .qualified()
        .expect("outbox.table was validated at load time");
    let slot = &config.replication.slot;
    let publication = &config.replication.publication;

    // Every catalog round trip is bounded, so a black-holed path ends the
    // session (and is retried) instead of hanging it.
    let bound = catalog::sql_timeout(&params);
    let client = catalog::connect(&params).await?;
    catalog::bounded(
        bound,
        "preparing the publication",
        catalog::prepare_publication(
            &client,
            &catalog::PublicationPlan::new(
                &config.postgres,
                &config.replication,
                (&schema, &table),
            ),
        ),
    )
    .await?;
    let table_meta = catalog::bounded(
        bound,
        "reading the outbox table's columns",
        catalog::table_meta(&client, &schema, &table),
    )
    .await?;

    let mut repl = ReplicationConnection::connect(&params).await?;
    let identity = repl.identify_system().await?;
    // A position past the slot's that this process saw Kafka acknowledge.
    let mut resume_at = None;
    match catalog::bounded(
        bound,
        "reading the slot's state",
        catalog::slot_state(&client, slot),
    )
    .await?
    {
        Some(state) => {
            catalog::check_slot(slot, &state, &params.dbname)?;
            *slot_seen = true;
            let slot_at = state.confirmed_flush_lsn.unwrap_or(Lsn::ZERO);
            resume_at = resume
                .as_ref()
                .and_then(|r| r.position_for(&identity))
                .filter(|&delivered| delivered > slot_at);
            if let Some(delivered) = resume_at {
                warn!(
                    slot,
                    slot_confirmed = %slot_at,
                    resume_at = %delivered,
                    "the slot's confirmed position is behind what this walrelay delivered \
                     (the server restarted: before PostgreSQL 17 it does not save the position \
                     at shutdown); asking the server to skip the transactions already delivered"
                );
            }
            if config.replication.snapshot_mode == SnapshotMode::Always {
                // Debezium's `always`: the current rows at every start, then
                // the stream from the slot's position (overlaps repeat).
                let start = state.confirmed_flush_lsn.unwrap_or(Lsn::ZERO);
                let published = publish_snapshot(
                    config,
                    sink,
                    &client,
                    (&schema, &table),
                    &table_meta,
                    None,
                    start,
                )
                .await?;
                info!(
                    rows = published,
                    "snapshot delivered (snapshot_mode = always)"
                );
            }
        }
        None if *slot_seen => return Err(SourceError::SlotGone(slot.clone()).into()),
        None if config.replication.create_slot
            && config.replication.snapshot_mode != SnapshotMode::NoData =>
        {
            catalog::bounded(
                bound,
                "reading the publication's comment",
                may_create_slot(config, &client),
            )
            .await?;
            // Snapshot first, slot second: a crash in between leaves no slot.
            let exported = snapshot::export(&params, slot).await?;
            info!(slot, consistent_point = %exported.consistent_point, "snapshotting the outbox table");
            let published = publish_snapshot(
                config,
                sink,
                &client,
                (&schema, &table),
                &table_meta,
                Some(&exported.snapshot_name),
                exported.consistent_point,
            )
            .await?;
            snapshot::persist(&client, &exported, slot).await?;
            drop(exported);
            info!(
                slot,
                rows = published,
                "snapshot delivered; created replication slot at its position"
            );
            *slot_seen = true;
        }
        None if config.replication.create_slot => {
            catalog::bounded(
                bound,
                "reading the publication's comment",
                may_create_slot(config, &client),
            )
            .await?;
            let at = repl.create_logical_slot(slot).await?;
            info!(slot, consistent_point = %at, "created replication slot");
            *slot_seen = true;
        }
        None => {
            return Err(SourceError::Catalog(CatalogError::SlotMismatch {
                slot: slot.clone(),
                reason: "it does not exist and replication.create_slot is false".into(),
            })
            .into())
        }
    }
    // Best effort; a dead connection shows in the next bounded step.
    let _ = tokio::time::timeout(bound, record_slot(&client, publication, slot)).await;
    let proto_version = catalog::bounded(bound, "reading server_version_num", async {
        Ok::<_, SessionError>(
            source::choose_proto_version(&client, config.replication.streaming, PROTO_VERSION)
                .await,
        )
    })
    .await?;
    let mut options = vec![
        ("proto_version", proto_version.to_string()),
        ("publication_names", publication.clone()),
        ("messages", "true".to_string()),
    ];
    if proto_version >= source::STREAMING_PROTO_VERSION {
        options.push(("streaming", "on".to_string()));
    }
    let stream = repl
        .start_replication(slot, resume_at.unwrap_or(Lsn::ZERO), &options)
        .await?;
    // The server starts at the slot's confirmed_flush_lsn, or at resume_at
    // when that is later; read the slot back now that we hold it, so the
    // tracker starts exactly there.
    let state = catalog::bounded(
        bound,
        "reading the slot's state",
        catalog::slot_state(&client, slot),
    )
    .await?
    .ok_or_else(|| SourceError::SlotGone(slot.clone()))?;
    let start = state
        .confirmed_flush_lsn
        .unwrap_or(Lsn::ZERO)
        .max(resume_at.unwrap_or(Lsn::ZERO));
    info!(slot, publication, start = %start, timeline = identity.timeline, "streaming");

    let tracker = SharedTracker::new(start);
    *resume = Some(Resume {
        system_id: identity.system_id.clone(),
        timeline: identity.timeline,
        tracker: tracker.clone(),
    });
    sink.begin_session(tracker.clone());
    tracker_tx.send_replace(Some(tracker.clone()));
    crate::metrics::metrics()
        .streaming
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let (tx, rx) = mpsc::channel(CHANNEL_BATCHES);
    let mut sink_task = {
        let sink = Arc::clone(sink);
        let router_cfg = config.router.clone();
        let converters = config.converters;
        let debezium = config.debezium.clone();
        tokio::spawn(
            async move {
                let mut router = Router::new(router_cfg, converters, debezium)
                    .expect("router config was validated at start");
                sink.run(&mut router, rx).await
            }
            .instrument(tracing::info_span!("sink")),
        )
    };
    let router = Router::new(
        config.router.clone(),
        config.converters,
        config.debezium.clone(),
    )
    .expect("router config was validated at start");
    let mut assembler = Assembler::new(
        schema,
        table,
        router,
        table_meta,
        config.outbox.op_invalid_behavior,
    )
    .with_spill_dir(config.replication.spill_dir.clone());
    let settings = StreamSettings {
        proto_version,
        status_interval: config.status_interval(),
        receive_timeout: Duration::from_millis(config.replication.receive_timeout_ms),
        read_coalesce: Duration::from_micros(config.replication.read_coalesce_us),
    };
    let streamed =
        source::stream_wal(stream, &mut assembler, &tracker, tx, shutdown, settings).await;
    // The sender is gone now: the sink finishes what is queued, then ends.
    let shutdown_timeout = Duration::from_millis(config.runtime.shutdown_timeout_ms);
    match streamed {
        Ok(StreamEnd::Shutdown(mut writer)) => {
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
            let confirmed = tracker.confirmed();
            writer
                .send_status(&status_update(confirmed, confirmed, false))
                .await?;
            let _ = writer.close().await;
            info!(%confirmed, in_flight = tracker.in_flight_events(), "final status sent");
            if config.replication.slot_drop_on_stop {
                drop_slot_when_released(&client, slot).await;
            }
            sink_result.map_err(SessionError::Sink)
        }
        Err(SourceError::SinkStopped) => {
            let err = match sink_task.await {
                Ok(Err(e)) => e,
                _ => return Err(SourceError::SinkStopped.into()),
            };
            error!(error = %DisplayChain(&err), "sink failed; nothing after the failed event is confirmed");
            Err(SessionError::Sink(err))
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
            Err(e.into())
        }
    }
}

/// The line walrelay adds to its publication's comment once `slot` exists:
/// PostgreSQL keeps no trace of a dropped slot, this does.
fn slot_marker(slot: &str) -> String {
    format!("walrelay: replication slot {slot} was created for this publication")
}

/// Whether the publication's comment says `slot` existed. A failed lookup
/// counts as no (and is an error only where it decides).
pub(crate) async fn slot_recorded(
    client: &tokio_postgres::Client,
    publication: &str,
    slot: &str,
) -> Result<bool, CatalogError> {
    let comment = catalog::publication_comment(client, publication).await?;
    let marker = slot_marker(slot);
    Ok(comment.is_some_and(|c| c.lines().any(|l| l.trim() == marker)))
}

/// Records in the publication's comment that `slot` exists, once, so that
/// a later start can tell a dropped slot from a first start. Best effort:
/// COMMENT needs ownership of the publication; without it walrelay warns
/// that it cannot guard against recreating a dropped slot.
async fn record_slot(client: &tokio_postgres::Client, publication: &str, slot: &str) {
    let marker = slot_marker(slot);
    let result = async {
        let comment = catalog::publication_comment(client, publication).await?;
        if comment
            .as_deref()
            .is_some_and(|c| c.lines().any(|l| l.trim() == marker))
        {
            return Ok(());
        }
        let text = match comment {
            Some(c) if !c.is_empty() => format!("{c}\n{marker}"),
            _ => marker.clone(),
        };
        catalog::set_publication_comment(client, publication, &text).await
    }
    .await;
    if let Err(e) = result {
        warn!(
            slot,
            publication,
            error = %DisplayChain(&e),
            "cannot record the slot in the publication's comment: if the slot is ever dropped, \
             the next start cannot tell and creates a new one (skipping events); \
             set replication.slot_missing = \"fail\" once the slot exists"
        );
    }
}

/// Decides whether a slot missing at start may be created
/// (`replication.slot_missing`). A new slot starts at the current WAL
/// position and skips everything written since a dropped one's position,
/// so by default it is created only when the publication's comment does
/// not record that this slot existed.
async fn may_create_slot(
    config: &Config,
    client: &tokio_postgres::Client,
) -> Result<(), SourceError> {
    let slot = &config.replication.slot;
    let publication = &config.replication.publication;
    let refuse = |reason: String| {
        Err(SourceError::Catalog(CatalogError::SlotMismatch {
            slot: slot.clone(),
            reason,
        }))
    };
    match config.replication.slot_missing {
        SlotMissing::Fail => refuse(
            "it does not exist and replication.slot_missing = \"fail\"; create it with \
             SELECT pg_create_logical_replication_slot('<slot>', 'pgoutput')"
                .replace("<slot>", slot),
        ),
        SlotMissing::IfNew => {
            if slot_recorded(client, publication, slot).await? {
                return refuse(format!(
                    "it does not exist, but the comment of publication {publication} records that it did: \
                     it was dropped, and a new slot would silently skip every event written since its \
                     last confirmed position. Re-publish those events, then create the slot deliberately \
                     (SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')) or start once with \
                     replication.slot_missing = \"create\""
                ));
            }
            Ok(())
        }
        SlotMissing::Create => {
            if slot_recorded(client, publication, slot)
                .await
                .unwrap_or(false)
            {
                warn!(
                    slot,
                    publication,
                    "CREATING A NEW REPLICATION SLOT in place of a dropped one \
                     (replication.slot_missing = \"create\"): every event written since the old \
                     slot's last confirmed position is skipped and must be re-published"
                );
            }
            Ok(())
        }
    }
}

/// Publishes every row of the outbox table, read in `snapshot` (or a fresh
/// one), and waits until Kafka acknowledged them all. Returns the row count.
async fn publish_snapshot(
    config: &Arc<Config>,
    sink: &Arc<KafkaSink>,
    client: &tokio_postgres::Client,
    (schema, table): (&str, &str),
    table_meta: &crate::connect::pg::TableMeta,
    snapshot_name: Option<&str>,
    start: Lsn,
) -> Result<u64, SessionError> {
    let relation = Arc::new(snapshot::relation_info(client, schema, table).await?);
    let new_router = || {
        Router::new(
            config.router.clone(),
            config.converters,
            config.debezium.clone(),
        )
        .expect("router config was validated at start")
    };
    let bound =
        Arc::new(new_router().bind(&relation, table_meta).map_err(|source| {
            SourceError::Txn(crate::txn::TxnError::Layout { lsn: start, source })
        })?);
    let tracker = SharedTracker::new(start);
    sink.begin_session(tracker.clone());
    let (tx, rx) = mpsc::channel(CHANNEL_BATCHES);
    let sink_task = {
        let sink = Arc::clone(sink);
        let mut router = new_router();
        tokio::spawn(
            async move { sink.run(&mut router, rx).await }.instrument(tracing::info_span!("sink")),
        )
    };
    let now_us = crate::clock::unix_now_micros();
    let seq = tracker.begin(now_us);
    let read = snapshot::read_rows(client, snapshot_name, &relation, |rows| {
        let events: Vec<crate::txn::OutboxEvent> = rows
            .into_iter()
            .map(|row| crate::txn::OutboxEvent {
                seq,
                meta: crate::router::EventMeta {
                    lsn: start,
                    commit_lsn: start,
                    xid: 0,
                    commit_time_us: now_us,
                },
                bound: Arc::clone(&bound),
                row,
            })
            .collect();
        tracker.add_events(seq, events.len() as u32);
        let tx = tx.clone();
        async move { tx.send(events).await.map_err(|_| ()) }
    })
    .await;
    tracker.commit(seq, start);
    drop(tx);
    let sink_result = sink_task.await.unwrap_or(Ok(()));
    let rows = match read {
        Ok(rows) => rows,
        Err(snapshot::SnapshotError::Catalog(e)) => return Err(e.into()),
        Err(snapshot::SnapshotError::Sink(())) => 0,
    };
    sink_result.map_err(SessionError::Sink)?;
    // Every row is with librdkafka; wait for its acknowledgements.
    while tracker.in_flight_events() > 0 {
        if let Some(e) = sink.take_failure() {
            return Err(SessionError::Sink(e));
        }
        let s = Arc::clone(sink);
        let _ = tokio::task::spawn_blocking(move || s.flush(Duration::from_millis(500))).await;
    }
    if let Some(e) = sink.take_failure() {
        return Err(SessionError::Sink(e));
    }
    Ok(rows)
}

/// `slot.drop.on.stop`: waits (bounded) until the walsender released the
/// slot, then drops it. Failures are logged: the stop itself succeeded.
async fn drop_slot_when_released(client: &tokio_postgres::Client, slot: &str) {
    for _ in 0..50 {
        match catalog::slot_state(client, slot).await {
            Ok(Some(state)) if state.active => tokio::time::sleep(Duration::from_millis(100)).await,
            Ok(Some(_)) => {
                match catalog::drop_slot(client, slot).await {
                    Ok(()) => info!(slot, "dropped replication slot (slot_drop_on_stop)"),
                    Err(e) => {
                        warn!(slot, error = %DisplayChain(&e), "cannot drop the replication slot")
                    }
                }
                return;
            }
            Ok(None) => return,
            Err(e) => {
                warn!(slot, error = %DisplayChain(&e), "cannot drop the replication slot");
                return;
            }
        }
    }
    warn!(slot, "replication slot still active after 5 s; not dropped");
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
