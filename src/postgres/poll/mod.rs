//! The polling source: the outbox relayed without a replication slot, by
//! claiming unpublished rows, producing them, and marking them published
//! only once Kafka acknowledged every one.
//!
//! ```text
//!  shard worker k (own connection, holds advisory lock (hash(lock name), k))
//!    wait: LISTEN notification ─┐ or poll.interval_ms, or at once after a full batch
//!    BEGIN; SELECT … WHERE <unpublished> [AND hash(key) % N = k]
//!           ORDER BY <order_by> LIMIT n FOR UPDATE SKIP LOCKED   (rows locked, not marked)
//!      │ one tracker entry per claim, at the next position of a counter
//!      ▼
//!    Vec<OutboxEvent> ── bounded channel ──▶ sink ──▶ Kafka ──ack──▶ tracker
//!      │                                                              │
//!    wait until the tracker confirmed the claim's position ◀──────────┘
//!    UPDATE … SET <published> = clock_timestamp() WHERE ctid = ANY(…); COMMIT
//!    (or DELETE …; COMMIT with poll.on_publish = "delete")
//! ```
//!
//! Progress rules: a row is marked (or deleted) only in the transaction that
//! claimed it, and only after every record of its claim was acknowledged; a
//! crash, a lost connection or a rolled-back claim leaves it unpublished, so
//! it is published again (at least once). The claim's row locks keep other
//! instances off the rows it holds, and one session-level advisory lock per
//! shard (on the same connection, so losing the connection loses both the
//! lock and the claim) keeps a single publisher per shard: a second walrelay
//! waits as a hot standby and takes a shard over when its lock frees. A
//! claim that waits longer than `poll.ack_timeout_ms` for Kafka is rolled
//! back (no row locks or old snapshot held through a broker outage); its rows
//! are claimed again once the producer settled, which publishes them twice.
//!
//! Order: within a shard, rows go out in `poll.order_by` order among the rows
//! committed when the claim runs; per aggregate, as long as the shard column
//! is the aggregate's key and the order column follows the order in which an
//! aggregate's transactions commit (`docs/polling.md`).
//!
//! Every SQL statement is in [`sql`]. This module never routes or produces;
//! it hands events to the sink through the channel and reads acknowledgements
//! from the tracker.

pub(crate) mod config;
pub(crate) mod replay;
pub(crate) mod sql;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tracing::{info, warn, Instrument};
use walrelay_proto::Lsn;

use self::config::{OnPublish, PollConfig};
use self::sql::{ClaimedRow, PollSql};
use crate::chain::DisplayChain;
use crate::checkpoint::SharedTracker;
use crate::metrics::{KindLabel, Metrics, ResultLabel};
use crate::postgres::catalog::{self, CatalogError};
use crate::postgres::replication::{quote_ident, ConnectParams};
use crate::retry::Retry;
use crate::router::{BoundRelation, EventMeta};
use crate::source::{Batch, Frontier, Source, StreamEnd};
use crate::txn::OutboxEvent;

/// Errors of the polling source.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PollError {
    /// A statement or connection failed.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The mark touched other rows than the claim held: the table changed
    /// under the claim's locks, which PostgreSQL does not allow; stop.
    #[error(
        "marking the batch of shard {shard} touched {marked} rows of {table}, but {claimed} were claimed"
    )]
    MarkMismatch {
        shard: u32,
        table: String,
        /// Rows claimed.
        claimed: usize,
        /// Rows the mark touched.
        marked: u64,
    },
    /// The server answered a claim without a row's ctid or xmin.
    #[error("the claim on {table} returned a row without its ctid or xmin")]
    BadClaim { table: String },
    /// A task of the source ended abnormally.
    #[error("the polling task {task} ended abnormally")]
    Task {
        /// Which.
        task: String,
    },
    /// A column a `[poll]` key names is not in the table.
    #[error("{key} names column {column}, which {table} does not have")]
    MissingColumn {
        key: String,
        column: String,
        table: String,
    },
    /// The router cannot bind the table's columns.
    #[error("the router cannot use the columns of {table}")]
    Layout {
        table: String,
        /// Why.
        #[source]
        source: Box<crate::router::RouteError>,
    },
    /// The listening connection went away.
    #[error("the connection listening on channel {channel} ended")]
    ListenLost { channel: String },
}

/// A failed statement or connection keeps the class it failed with.
impl From<CatalogError> for Retry<PollError> {
    fn from(e: CatalogError) -> Self {
        Retry::from(e).map(PollError::Catalog)
    }
}

/// What every task of one polling session shares.
struct Shared {
    config: PollConfig,
    sql: PollSql,
    bound: Arc<BoundRelation>,
    params: ConnectParams,
    metrics: Arc<Metrics>,
    /// The last position handed out (a claim's tracker entry ends there);
    /// taken under this lock together with the tracker registration, so
    /// entries are registered in position order across shards.
    position: Mutex<u64>,
    /// Bound on in-flight acknowledgements after shutdown was asked.
    shutdown_timeout: Duration,
}

/// One session of the polling source.
pub(crate) struct PollSource {
    shared: Arc<Shared>,
}

impl PollSource {
    /// A session over the outbox whose statements are `sql`, whose rows
    /// the router binds as `bound`.
    pub(crate) fn new(
        config: PollConfig,
        sql: PollSql,
        bound: Arc<BoundRelation>,
        params: ConnectParams,
        metrics: Arc<Metrics>,
        shutdown_timeout: Duration,
    ) -> PollSource {
        PollSource {
            shared: Arc::new(Shared {
                config,
                sql,
                bound,
                params,
                metrics,
                position: Mutex::new(0),
                shutdown_timeout,
            }),
        }
    }
}

impl Source for PollSource {
    type Error = PollError;

    fn start(&self) -> Lsn {
        Lsn::ZERO
    }

    /// The shard workers, the listener and retention, until shutdown, the
    /// sink's departure or the first error. The polling source reads its
    /// acknowledgements from `tracker` itself (a claim waits for its own);
    /// it runs at-least-once only, where the frontier is the tracker.
    async fn stream<F: Frontier>(
        &mut self,
        tracker: &SharedTracker,
        _frontier: &F,
        out: mpsc::Sender<Batch>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<StreamEnd, Retry<PollError>> {
        let shared = &self.shared;
        // Ready only while this process holds a shard.
        shared.metrics.streaming.store(false, Ordering::Relaxed);
        let (wake_tx, wake_rx) = watch::channel(0u64);
        // The listener and retention; their end at shutdown ends nothing.
        let mut helpers = JoinSet::new();
        // The shard workers: the session ends when they have.
        let mut workers = JoinSet::new();
        // Without a listener the sender stays here, so the workers' wake-up
        // stays open and they wait on their interval.
        let mut _unused_wake = None;
        if !shared.config.listen_channel.is_empty() {
            let s = Arc::clone(shared);
            let stop = shutdown.clone();
            helpers.spawn(
                async move { listen(s, wake_tx, stop).await }
                    .instrument(tracing::info_span!("poll_listen")),
            );
        } else {
            _unused_wake = Some(wake_tx);
        }
        for shard in 0..shared.config.shards {
            let s = Arc::clone(shared);
            let worker = Worker {
                shard,
                ack_timeout: Duration::from_millis(shared.config.ack_timeout_ms),
                tracker: tracker.clone(),
                out: out.clone(),
                wake: wake_rx.clone(),
                shutdown: shutdown.clone(),
            };
            workers.spawn(
                async move { worker.run(s).await }
                    .instrument(tracing::info_span!("poll_shard", shard)),
            );
        }
        if shared.config.retention_seconds > 0 && shared.config.on_publish == OnPublish::Mark {
            let s = Arc::clone(shared);
            let stop = shutdown.clone();
            helpers.spawn(
                async move { retention(s, stop).await }
                    .instrument(tracing::info_span!("poll_retention")),
            );
        }
        drop(out);
        loop {
            // A worker still waiting for its last acknowledgements at
            // shutdown finishes (and marks) before the session ends.
            let joined = tokio::select! {
                joined = workers.join_next() => match joined {
                    Some(joined) => joined,
                    None => break,
                },
                Some(joined) = helpers.join_next() => match joined {
                    Ok(Ok(StreamEnd::Shutdown)) => continue,
                    other => other,
                },
            };
            match joined {
                Ok(Ok(StreamEnd::Shutdown)) => {}
                Ok(Ok(StreamEnd::SinkStopped)) => return Ok(StreamEnd::SinkStopped),
                Ok(Err(e)) => return Err(e),
                Err(e) => {
                    return Err(Retry::Definite(PollError::Task {
                        task: if e.is_panic() {
                            "panicked"
                        } else {
                            "was cancelled"
                        }
                        .to_owned(),
                    }))
                }
            }
        }
        Ok(StreamEnd::Shutdown)
    }

    async fn finish(self, _durable: Lsn) -> Result<(), Retry<PollError>> {
        // Each claim marked its own rows; nothing is left to report.
        Ok(())
    }
}

/// One shard's publisher.
struct Worker {
    shard: u32,
    /// The bound on a claim's acknowledgements: `poll.ack_timeout_ms`,
    /// doubled after each claim rolled back for it (up to
    /// [`MAX_ACK_TIMEOUT_GROWTH`] times), back to the setting once a claim
    /// is acknowledged in time, so a broker that acknowledges, only slowly,
    /// still gets each batch through instead of seeing it claimed again
    /// and again.
    ack_timeout: Duration,
    tracker: SharedTracker,
    out: mpsc::Sender<Batch>,
    wake: watch::Receiver<u64>,
    shutdown: watch::Receiver<bool>,
}

/// How far a shard's acknowledgement bound grows past `poll.ack_timeout_ms`
/// after consecutive rollbacks.
pub(crate) const MAX_ACK_TIMEOUT_GROWTH: u32 = 16;

/// How waiting for a claim's acknowledgements ended.
enum Acks {
    /// Every record of the claim is acknowledged.
    Done,
    /// The sink stopped (its own error says why) or failed a record.
    SinkStopped,
    /// `poll.ack_timeout_ms` (or the shutdown bound) passed.
    TimedOut,
}

/// Leaves the shard-held gauge right however the worker ends.
struct HeldShard<'a>(&'a Metrics);

impl Drop for HeldShard<'_> {
    fn drop(&mut self) {
        self.0.poll_shards_held.dec();
        if self.0.poll_shards_held.get() <= 0 {
            self.0.streaming.store(false, Ordering::Relaxed);
        }
    }
}

impl Worker {
    async fn run(mut self, s: Arc<Shared>) -> Result<StreamEnd, Retry<PollError>> {
        let bound = catalog::sql_timeout(&s.params);
        let client = catalog::bounded(
            bound,
            "opening the polling connection",
            catalog::connect(&s.params),
        )
        .await?;
        let shard = self.shard;
        // The shard's lock, held by this connection for its whole life.
        let mut told = false;
        loop {
            let answer = catalog::bounded(bound, "taking the shard lock", async {
                sql::run(&client, &s.sql.try_lock(shard))
                    .await
                    .map_err(|e| sql_error("cannot take the shard lock", e))
            })
            .await
            .inspect_err(|_| error_kind(&s.metrics, "lock"))?;
            let taken = sql::first_value(&answer)
                .and_then(|row| row.into_iter().next().flatten())
                .is_some_and(|v| v == "t");
            if taken {
                break;
            }
            if !told {
                info!(
                    shard,
                    lock = s.sql.lock_name(),
                    "another walrelay publishes this shard: waiting as a hot standby"
                );
                told = true;
            }
            tokio::select! {
                biased;
                _ = self.shutdown.changed() => return Ok(StreamEnd::Shutdown),
                _ = self.out.closed() => return Ok(StreamEnd::SinkStopped),
                _ = tokio::time::sleep(Duration::from_millis(s.config.lock_retry_ms)) => {}
            }
        }
        s.metrics.poll_shards_held.inc();
        s.metrics.streaming.store(true, Ordering::Relaxed);
        let _held = HeldShard(&s.metrics);
        info!(
            shard,
            lock = s.sql.lock_name(),
            table = s.sql.table(),
            "took the shard lock: publishing"
        );

        let claim_sql = s.sql.claim(shard);
        let interval = Duration::from_millis(s.config.interval_ms);
        // Claim at once at start, and again at once after a full batch.
        let mut again = true;
        loop {
            if *self.shutdown.borrow() {
                return Ok(StreamEnd::Shutdown);
            }
            if !again {
                tokio::select! {
                    biased;
                    _ = self.shutdown.changed() => return Ok(StreamEnd::Shutdown),
                    _ = self.out.closed() => return Ok(StreamEnd::SinkStopped),
                    _ = self.wake.changed() => {}
                    _ = tokio::time::sleep(interval) => {}
                }
            }
            let started = Instant::now();
            let answer = catalog::bounded(bound, "claiming a batch", async {
                sql::run(&client, &claim_sql)
                    .await
                    .map_err(|e| sql_error("cannot claim a batch of unpublished rows", e))
            })
            .await
            .inspect_err(|_| error_kind(&s.metrics, "claim"))?;
            s.metrics
                .poll_claim
                .observe(started.elapsed().as_secs_f64());
            let rows = sql::claimed_rows(answer).ok_or_else(|| {
                Retry::Definite(PollError::BadClaim {
                    table: s.sql.table().to_owned(),
                })
            })?;
            if rows.is_empty() {
                end_transaction(&client, bound, "COMMIT").await?;
                batch_result(&s.metrics, "empty");
                again = false;
                continue;
            }
            again = rows.len() >= s.config.batch_size as usize;
            match self.publish(&s, &client, bound, rows).await? {
                Some(end) => return Ok(end),
                None => continue,
            }
        }
    }

    /// Hands one claim to the sink, waits for its acknowledgements, then
    /// marks and commits. `Some` ends the worker.
    async fn publish(
        &mut self,
        s: &Shared,
        client: &tokio_postgres::Client,
        bound: Duration,
        rows: Vec<ClaimedRow>,
    ) -> Result<Option<StreamEnd>, Retry<PollError>> {
        let n = rows.len();
        let claimed_at = crate::clock::unix_now_micros();
        let (seq, position) = {
            let mut last = s
                .position
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *last += 1;
            let position = Lsn(*last);
            let seq = self.tracker.begin(claimed_at);
            self.tracker.add_and_commit(seq, n as u32, position);
            (seq, position)
        };
        let mut ctids = Vec::with_capacity(n);
        let mut events = Vec::with_capacity(n);
        for row in rows {
            ctids.push(row.ctid);
            events.push(OutboxEvent::row(
                seq,
                EventMeta {
                    lsn: position,
                    commit_lsn: position,
                    xid: row.xmin,
                    // The commit time is not known without
                    // track_commit_timestamp: the claim's time stands in.
                    commit_time_us: claimed_at,
                    received_us: 0,
                    last_commit_lsn: None,
                },
                Arc::clone(&s.bound),
                row.tuple,
            ));
        }
        if self.out.send(events).await.is_err() {
            // The sink is gone: nothing of this claim is marked.
            let _ = end_transaction(client, bound, "ROLLBACK").await;
            return Ok(Some(StreamEnd::SinkStopped));
        }
        let configured = Duration::from_millis(s.config.ack_timeout_ms);
        match self.wait_acks(s, position).await {
            Acks::Done => self.ack_timeout = configured,
            Acks::SinkStopped => {
                let _ = end_transaction(client, bound, "ROLLBACK").await;
                batch_result(&s.metrics, "rolled_back");
                return Ok(Some(StreamEnd::SinkStopped));
            }
            Acks::TimedOut => {
                // Release the rows and the snapshot; they stay unpublished.
                end_transaction(client, bound, "ROLLBACK").await?;
                batch_result(&s.metrics, "rolled_back");
                error_kind(&s.metrics, "ack_timeout");
                if *self.shutdown.borrow() {
                    warn!(
                        shard = self.shard,
                        rows = n,
                        "stopping before Kafka acknowledged the last batch; its rows stay \
                         unpublished and are published again at the next start"
                    );
                    return Ok(Some(StreamEnd::Shutdown));
                }
                warn!(
                    shard = self.shard,
                    rows = n,
                    waited_ms = self.ack_timeout.as_millis() as u64,
                    "kafka did not acknowledge the batch in time: rolled back its claim; \
                     its rows are claimed again once the producer settled (they may be \
                     published twice), with twice the wait"
                );
                self.ack_timeout = (self.ack_timeout * 2).min(configured * MAX_ACK_TIMEOUT_GROWTH);
                // Claim nothing new until the producer has settled what it
                // holds, so a broker outage does not pile up claims.
                tokio::select! {
                    biased;
                    _ = self.shutdown.changed() => return Ok(Some(StreamEnd::Shutdown)),
                    _ = self.out.closed() => return Ok(Some(StreamEnd::SinkStopped)),
                    ok = self.tracker.wait_confirmed(position) => {
                        if !ok {
                            return Ok(Some(StreamEnd::SinkStopped));
                        }
                    }
                }
                return Ok(None);
            }
        }
        let started = Instant::now();
        let answer = catalog::bounded(bound, "marking a batch published", async {
            sql::run(client, &s.sql.finish(&ctids))
                .await
                .map_err(|e| sql_error("cannot mark the acknowledged batch published", e))
        })
        .await
        .inspect_err(|_| error_kind(&s.metrics, "mark"))?;
        let marked = sql::affected(&answer);
        if marked != n as u64 {
            return Err(Retry::Definite(PollError::MarkMismatch {
                shard: self.shard,
                table: s.sql.table().to_owned(),
                claimed: n,
                marked,
            }));
        }
        s.metrics.poll_mark.observe(started.elapsed().as_secs_f64());
        s.metrics.poll_published.inc_by(n as u64);
        batch_result(&s.metrics, "published");
        Ok(None)
    }

    /// Waits until the tracker confirmed `position` (every record of the
    /// claim acknowledged), the sink stopped, or the bound passed. After a
    /// shutdown request the bound is the shutdown timeout.
    async fn wait_acks(&mut self, s: &Shared, position: Lsn) -> Acks {
        let deadline = tokio::time::Instant::now() + self.ack_timeout;
        let acked = self.tracker.wait_confirmed(position);
        tokio::pin!(acked);
        let mut shutdown_seen = *self.shutdown.borrow();
        let mut until = if shutdown_seen {
            deadline.min(tokio::time::Instant::now() + s.shutdown_timeout)
        } else {
            deadline
        };
        loop {
            tokio::select! {
                biased;
                ok = &mut acked => return if ok { Acks::Done } else { Acks::SinkStopped },
                _ = self.out.closed() => return Acks::SinkStopped,
                _ = tokio::time::sleep_until(until) => return Acks::TimedOut,
                changed = self.shutdown.changed(), if !shutdown_seen => {
                    shutdown_seen = true;
                    if changed.is_ok() {
                        until = until.min(tokio::time::Instant::now() + s.shutdown_timeout);
                    }
                }
            }
        }
    }
}

/// Ends the open claim with `statement` (`COMMIT` or `ROLLBACK`).
async fn end_transaction(
    client: &tokio_postgres::Client,
    bound: Duration,
    statement: &'static str,
) -> Result<(), CatalogError> {
    catalog::bounded(bound, "ending a claim", async {
        sql::run(client, statement)
            .await
            .map(|_| ())
            .map_err(|e| sql_error("cannot end the claiming transaction", e))
    })
    .await
}

fn sql_error(context: &str, source: tokio_postgres::Error) -> CatalogError {
    catalog::sql(context)(source)
}

fn error_kind(metrics: &Metrics, kind: &'static str) {
    metrics.poll_errors.get_or_create(&KindLabel { kind }).inc();
}

fn batch_result(metrics: &Metrics, result: &'static str) {
    metrics
        .poll_batches
        .get_or_create(&ResultLabel { result })
        .inc();
}

/// `LISTEN`s on `poll.listen_channel` and wakes the workers on every
/// notification (several at once wake them once).
async fn listen(
    s: Arc<Shared>,
    wake: watch::Sender<u64>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<StreamEnd, Retry<PollError>> {
    let channel = &s.config.listen_channel;
    let bound = catalog::sql_timeout(&s.params);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let client = catalog::bounded(
        bound,
        "opening the listening connection",
        catalog::connect_listening(&s.params, tx),
    )
    .await
    .inspect_err(|_| error_kind(&s.metrics, "listen"))?;
    catalog::bounded(bound, "listening", async {
        client
            .batch_execute(&format!("LISTEN {}", quote_ident(channel)))
            .await
            .map_err(|e| sql_error(&format!("cannot LISTEN on channel {channel}"), e))
    })
    .await
    .inspect_err(|_| error_kind(&s.metrics, "listen"))?;
    info!(channel, "listening for new outbox rows");
    loop {
        tokio::select! {
            biased;
            _ = shutdown.changed() => return Ok(StreamEnd::Shutdown),
            n = rx.recv() => match n {
                Some(_) => {
                    let mut count = 1u64;
                    while rx.try_recv().is_ok() {
                        count += 1;
                    }
                    s.metrics.poll_notifications.inc_by(count);
                    wake.send_modify(|v| *v = v.wrapping_add(1));
                }
                None => {
                    error_kind(&s.metrics, "listen");
                    return Err(Retry::Transient(PollError::ListenLost {
                        channel: channel.clone(),
                    }));
                }
            }
        }
    }
}

/// Deletes published rows older than `poll.retention_seconds`, in bounded
/// statements, every `poll.retention_interval_ms`, while this process holds
/// a shard (a hot standby leaves it to the active instance).
async fn retention(
    s: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<StreamEnd, Retry<PollError>> {
    let interval = Duration::from_millis(s.config.retention_interval_ms);
    let statement = s
        .sql
        .retention(s.config.retention_seconds, s.config.retention_batch);
    let bound = catalog::sql_timeout(&s.params);
    let mut client = None;
    loop {
        if s.metrics.poll_shards_held.get() > 0 {
            match retention_pass(&s, &mut client, &statement, bound).await {
                Ok(0) => {}
                Ok(deleted) => info!(rows = deleted, "retention deleted published rows"),
                Err(e) => {
                    // Housekeeping never stops publishing; try again later.
                    client = None;
                    error_kind(&s.metrics, "retention");
                    warn!(error = %DisplayChain(&e), "retention pass failed; retrying at the next interval");
                }
            }
        }
        tokio::select! {
            biased;
            _ = shutdown.changed() => return Ok(StreamEnd::Shutdown),
            _ = tokio::time::sleep(interval) => {}
        }
    }
}

async fn retention_pass(
    s: &Shared,
    client: &mut Option<tokio_postgres::Client>,
    statement: &str,
    bound: Duration,
) -> Result<u64, PollError> {
    if client.is_none() {
        *client = Some(
            catalog::bounded(
                bound,
                "opening the retention connection",
                catalog::connect(&s.params),
            )
            .await?,
        );
    }
    let Some(c) = client.as_ref() else {
        return Ok(0);
    };
    let mut total = 0;
    loop {
        let answer = catalog::bounded(bound, "deleting expired published rows", async {
            sql::run(c, statement)
                .await
                .map_err(|e| sql_error("cannot delete expired published rows", e))
        })
        .await?;
        let deleted = sql::affected(&answer);
        total += deleted;
        s.metrics.poll_retention_deleted.inc_by(deleted);
        if deleted < u64::from(s.config.retention_batch) {
            return Ok(total);
        }
    }
}

/// The backlog monitor: every `poll.stats_interval_ms`, the unpublished
/// count and the age of the oldest unpublished row into the metrics, in
/// every instance (a hot standby reports the backlog its active peer leaves),
/// and whether Kafka answers (`probe`), for readiness. Runs until shutdown;
/// failures are counted and retried, never fatal.
pub(crate) async fn monitor<P, Fut>(
    config: PollConfig,
    sql: PollSql,
    params: ConnectParams,
    metrics: Arc<Metrics>,
    probe: P,
    mut shutdown: watch::Receiver<bool>,
) where
    P: Fn() -> Fut + Send,
    Fut: std::future::Future<Output = bool> + Send,
{
    let interval = Duration::from_millis(config.stats_interval_ms);
    let bound = catalog::sql_timeout(&params);
    let mut statement = sql.stats(false);
    let mut client: Option<tokio_postgres::Client> = None;
    // The oldest row's identity and when it was first seen unpublished.
    let mut oldest: Option<(String, Instant)> = None;
    loop {
        metrics
            .kafka_reachable
            .store(probe().await, Ordering::Relaxed);
        if client
            .as_ref()
            .is_none_or(tokio_postgres::Client::is_closed)
        {
            client = catalog::bounded(
                bound,
                "opening the statistics connection",
                catalog::connect(&params),
            )
            .await
            .inspect_err(|e| {
                error_kind(&metrics, "stats");
                warn!(error = %DisplayChain(e), "cannot read the outbox backlog");
            })
            .ok();
            // Commit times, when the server keeps them, date the oldest row
            // without poll.created_column.
            if let Some(c) = &client {
                let on = catalog::bounded(bound, "asking for commit timestamps", async {
                    sql::run(c, sql::COMMIT_TIMESTAMPS)
                        .await
                        .map_err(|e| sql_error("cannot read track_commit_timestamp", e))
                })
                .await
                .ok()
                .and_then(|a| sql::first_value(&a))
                .and_then(|row| row.into_iter().next().flatten())
                .is_some_and(|v| v == "t");
                statement = sql.stats(on);
            }
        }
        if let Some(c) = &client {
            let answer = catalog::bounded(bound, "reading the outbox backlog", async {
                sql::run(c, &statement)
                    .await
                    .map_err(|e| sql_error("cannot read the outbox backlog", e))
            })
            .await;
            match answer.map(|a| sql::first_value(&a)) {
                Ok(Some(row)) => {
                    let count = row.first().cloned().flatten().and_then(|v| v.parse().ok());
                    let identity = row.get(1).cloned().flatten();
                    let created_age = row
                        .get(2)
                        .cloned()
                        .flatten()
                        .and_then(|v| v.parse::<f64>().ok());
                    metrics.poll_unpublished.set(count.unwrap_or(0));
                    let age = match (identity, created_age) {
                        (None, _) => {
                            oldest = None;
                            0.0
                        }
                        (Some(_), Some(age)) => age.max(0.0),
                        (Some(id), None) => {
                            let seen = match &oldest {
                                Some((known, since)) if *known == id => *since,
                                _ => Instant::now(),
                            };
                            oldest = Some((id, seen));
                            seen.elapsed().as_secs_f64()
                        }
                    };
                    metrics.poll_oldest_unpublished_age.set(age);
                }
                Ok(None) => {}
                Err(e) => {
                    client = None;
                    error_kind(&metrics, "stats");
                    warn!(error = %DisplayChain(&e), "cannot read the outbox backlog");
                }
            }
        }
        tokio::select! {
            biased;
            _ = shutdown.changed() => return,
            _ = tokio::time::sleep(interval) => {}
        }
    }
}
