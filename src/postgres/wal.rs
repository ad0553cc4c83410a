//! One replication session's WAL stream, from socket to assembled outbox
//! events, and the feedback that releases WAL: the first implementation of
//! [`Source`].
//!
//! Owns the read loop (decode, assemble, hand over in batches with
//! backpressure), the standby status updates and the receive timeout. It
//! never routes or produces, and never reports as flushed a position other
//! than the [`Frontier`]'s durable one. The data flow and the progress
//! rules are in the [module above](super).

use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, Interval, MissedTickBehavior};
use tracing::{debug, info, warn};
use walrelay_proto::frame::{decode_replication_message, ReplicationMessage, StandbyStatusUpdate};
use walrelay_proto::pgoutput::{self, DecoderState};
use walrelay_proto::{DecodeError, Lsn, PG_EPOCH_OFFSET_MICROS};

use super::catalog::capability::{self, Unsupported};
use super::catalog::CatalogError;
use super::reader::FrameReceiver;
use super::replication::{ReplicationError, StreamWriter};
use crate::checkpoint::SharedTracker;
use crate::clock::{pg_now_micros, unix_now_micros};
use crate::metrics::{observe_micros, Metrics, ReasonLabel};
use crate::retry::Retry;
use crate::source::{Frontier, Source, StreamEnd};
use crate::txn::{Assembler, AssemblyStats, OutboxEvent, TxnError};

/// How long a failing stream waits to hand its last events to the sink.
const HANDOVER_ON_ERROR: Duration = Duration::from_secs(5);
/// Events per batch handed to the sink; bounds one channel slot's memory.
pub(crate) const BATCH_EVENTS: usize = 1024;
/// pgoutput protocol version that streams in-progress transactions.
pub(crate) const STREAMING_PROTO_VERSION: u32 = 2;
/// First server version (`server_version_num`) with protocol version 2.
pub(crate) const STREAMING_MIN_SERVER_VERSION: u32 = 140_000;
/// pgoutput protocol version that accepts `streaming 'parallel'`.
pub(crate) const PARALLEL_STREAMING_PROTO_VERSION: u32 = 4;
/// First server version (`server_version_num`) with protocol version 4.
pub(crate) const PARALLEL_STREAMING_MIN_SERVER_VERSION: u32 = 160_000;

/// The `streaming` option of `START_REPLICATION` for a protocol version:
/// none below 2, `on` for 2 and 3, `parallel` from 4.
///
/// Why `parallel` from 4 (PostgreSQL 16's pgoutput.c and proto.c, the same
/// in 17 and 18): on the walsender side the mode changes exactly one thing,
/// `pgoutput_stream_abort` writes the Stream Abort message with the abort
/// LSN and the abort timestamp (`write_abort_info`); every other message,
/// the decoding and when transactions are streamed are the same as with
/// `on`. The parallel apply workers it is named after are a subscriber's
/// business, not the walsender's. walrelay uses the abort LSN to release the
/// aborted transaction's WAL at once ([`crate::txn`]) and counts the
/// aborts; with `on` the same position is only implied by the XLogData
/// header (logical.c sets the write location to the abort LSN), which is
/// what walrelay falls back to on 14 and 15.
pub fn streaming_option(proto_version: u32) -> Option<&'static str> {
    match proto_version {
        v if v >= PARALLEL_STREAMING_PROTO_VERSION => Some("parallel"),
        v if v >= STREAMING_PROTO_VERSION => Some("on"),
        _ => None,
    }
}

/// The pgoutput protocol version for a server: `fallback` (whole
/// transactions after their commit) when `streaming` is off or the server
/// predates PostgreSQL 14, 2 (`streaming 'on'`) on 14 and 15, 4
/// (`streaming 'parallel'`, see [`streaming_option`]) from 16. The same
/// choice PostgreSQL's own subscriber makes from the publisher's version.
/// No setting forces 2 on 16+: 4 decodes like 2 plus two fields of one
/// message, so there is nothing to fall back from.
pub(crate) fn proto_version_for(server_version_num: u32, streaming: bool, fallback: u32) -> u32 {
    if !streaming {
        fallback
    } else if server_version_num >= PARALLEL_STREAMING_MIN_SERVER_VERSION {
        PARALLEL_STREAMING_PROTO_VERSION
    } else if server_version_num >= STREAMING_MIN_SERVER_VERSION {
        STREAMING_PROTO_VERSION
    } else {
        fallback
    }
}

/// Errors of a replication session.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WalError {
    /// The replication connection failed.
    #[error(transparent)]
    Replication(#[from] ReplicationError),
    /// Catalog work failed.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// A frame or pgoutput message could not be decoded.
    #[error("cannot decode the replication message at lsn {lsn}")]
    Decode {
        /// XLogData start of the message.
        lsn: Lsn,
        /// What was wrong.
        #[source]
        source: DecodeError,
    },
    /// The server refused for want of a capability (a free WAL sender or
    /// slot, the pgoutput plugin); the capability says how to fix it.
    #[error("{capability}")]
    Refused {
        /// What is missing, with its fix.
        capability: Unsupported,
        /// The server's own error.
        #[source]
        source: Box<ReplicationError>,
    },
    /// Transaction assembly refused a message.
    #[error(transparent)]
    Txn(#[from] TxnError),
    /// The server did not answer a request for a reply within the receive
    /// timeout.
    #[error("no message from the server for {0:?}, not even an answer to a request for a reply; the connection is considered dead")]
    ReceiveTimeout(Duration),
    /// The slot that existed when walrelay started is gone.
    #[error("replication slot {0} no longer exists; walrelay never recreates a slot it was reading (that would skip events); recreate it deliberately and restart")]
    SlotGone(String),
    /// Exactly-once mode cannot go on from this slot (its message names
    /// both positions and the way out).
    #[error("exactly-once: {0}")]
    ExactlyOnce(String),
}

/// A failed replication connection keeps the class it failed with.
impl From<ReplicationError> for Retry<WalError> {
    fn from(e: ReplicationError) -> Self {
        Retry::from(e).map(WalError::Replication)
    }
}

/// Failed catalog work keeps the class it failed with.
impl From<CatalogError> for Retry<WalError> {
    fn from(e: CatalogError) -> Self {
        Retry::from(e).map(WalError::Catalog)
    }
}

/// Stream settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StreamSettings {
    /// pgoutput protocol version requested.
    pub(crate) proto_version: u32,
    /// Interval between standby status updates.
    pub(crate) status_interval: Duration,
    /// Silence after which the connection is considered dead.
    pub(crate) receive_timeout: Duration,
}

impl WalError {
    /// `error` as [`WalError::Refused`], in the capability's class, when
    /// the server refused for want of a capability
    /// ([`capability::refusal`]; `slot` is the slot being created),
    /// otherwise as it is.
    pub(crate) fn explain(error: ReplicationError, slot: &str) -> Retry<WalError> {
        let found = match &error {
            ReplicationError::Server { code, message, .. } => {
                capability::refusal(code, message, slot)
            }
            _ => None,
        };
        match found {
            Some(capability) => Retry::from(capability).map(|capability| WalError::Refused {
                capability,
                source: Box::new(error),
            }),
            None => error.into(),
        }
    }
}

/// Builds the status update for the current positions.
pub(crate) fn status_update(
    received: Lsn,
    confirmed: Lsn,
    reply_requested: bool,
) -> StandbyStatusUpdate {
    StandbyStatusUpdate {
        write: received.max(confirmed),
        flush: confirmed,
        apply: confirmed,
        client_time: pg_now_micros(),
        reply_requested,
    }
}

/// The pgoutput protocol version to request from a server of
/// `server_version_num` ([`proto_version_for`]), logged with what it means.
pub(crate) fn choose_proto_version(server_version_num: u32, streaming: bool, fallback: u32) -> u32 {
    let proto_version = proto_version_for(server_version_num, streaming, fallback);
    match streaming_option(proto_version) {
        Some(mode) => info!(
            proto_version,
            mode, server_version_num, "large transactions arrive while they run"
        ),
        None if !streaming => info!(
            proto_version,
            "large transactions arrive only after their commit (replication.streaming = false, or logical decoding messages are events)"
        ),
        None => warn!(
            proto_version,
            server_version_num,
            "server older than PostgreSQL 14: large transactions arrive only after their commit"
        ),
    }
    proto_version
}

/// Publishes stream progress to the metrics: positions, in-flight work and
/// the assembler's counters since the last call.
fn publish_progress(
    m: &Metrics,
    received: Lsn,
    durable: Lsn,
    tracker: &SharedTracker,
    stats: AssemblyStats,
    last: &mut AssemblyStats,
) {
    m.received_lsn.set(received.0 as i64);
    m.confirmed_lsn.set(durable.0 as i64);
    m.in_flight.set(tracker.in_flight_events() as i64);
    let age = tracker.pending_age_seconds(crate::clock::unix_now_micros());
    m.oldest_unacked_age.set(age);
    m.replication_lag.set(age);
    m.transactions
        .inc_by(stats.relayed_transactions - last.relayed_transactions);
    for (reason, now, before) in [
        ("delete", stats.deletes_dropped, last.deletes_dropped),
        ("update", stats.updates_dropped, last.updates_dropped),
        ("other_table", stats.other_ignored, last.other_ignored),
        ("truncate", stats.truncates_ignored, last.truncates_ignored),
        (
            "message_prefix",
            stats.messages_ignored,
            last.messages_ignored,
        ),
        (
            "non_transactional",
            stats.non_transactional_skipped,
            last.non_transactional_skipped,
        ),
    ] {
        if now > before {
            m.filtered
                .get_or_create(&ReasonLabel { reason })
                .inc_by(now - before);
        }
    }
    m.streamed_transactions
        .inc_by(stats.streamed_transactions - last.streamed_transactions);
    m.stream_aborts
        .inc_by(stats.stream_aborts - last.stream_aborts);
    m.subxact_aborts
        .inc_by(stats.subxact_aborts - last.subxact_aborts);
    if stats.sent_abort_lsn != 0 {
        m.stream_abort_lsn.set(stats.sent_abort_lsn as i64);
    }
    m.spilled_bytes
        .inc_by(stats.spilled_bytes - last.spilled_bytes);
    m.spill_bytes.set(stats.spill_bytes as i64);
    *last = stats;
}

/// A started replication stream with its assembler: one session of the
/// WAL source.
pub(crate) struct WalSource {
    start: Lsn,
    stream: Option<(FrameReceiver, StreamWriter)>,
    writer: Option<StreamWriter>,
    assembler: Assembler,
    settings: StreamSettings,
    metrics: Arc<Metrics>,
}

impl WalSource {
    /// A source over a stream the server started at `start`: its reading
    /// side on the reader thread ([`super::reader::WalIo::receive`]) and
    /// its writing side.
    pub(crate) fn new(
        start: Lsn,
        stream: (FrameReceiver, StreamWriter),
        assembler: Assembler,
        settings: StreamSettings,
        metrics: Arc<Metrics>,
    ) -> Self {
        WalSource {
            start,
            stream: Some(stream),
            writer: None,
            assembler,
            settings,
            metrics,
        }
    }
}

impl Source for WalSource {
    type Error = WalError;

    fn start(&self) -> Lsn {
        self.start
    }

    async fn stream<F: Frontier>(
        &mut self,
        tracker: &SharedTracker,
        frontier: &F,
        out: mpsc::Sender<Vec<OutboxEvent>>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<StreamEnd, Retry<WalError>> {
        let stream = self
            .stream
            .take()
            .expect("a replication session is streamed once");
        let settings = self.settings;
        let (end, writer) = stream_wal(
            stream,
            &mut self.assembler,
            tracker,
            frontier,
            out,
            shutdown,
            settings,
            &self.metrics,
        )
        .await?;
        if end == StreamEnd::Shutdown {
            self.writer = Some(writer);
        }
        Ok(end)
    }

    async fn finish(self, durable: Lsn) -> Result<(), Retry<WalError>> {
        let Some(mut writer) = self.writer else {
            return Ok(());
        };
        writer
            .send_status(&status_update(durable, durable, false))
            .await?;
        let _ = writer.close().await;
        Ok(())
    }
}

/// Reads the stream until shutdown, the sink's departure or an error,
/// handing events to `tx`; hands the writer back for the final status
/// update.
#[allow(clippy::too_many_arguments)]
async fn stream_wal<F: Frontier>(
    stream: (FrameReceiver, StreamWriter),
    assembler: &mut Assembler,
    tracker: &SharedTracker,
    frontier: &F,
    tx: mpsc::Sender<Vec<OutboxEvent>>,
    shutdown: &mut watch::Receiver<bool>,
    settings: StreamSettings,
    metrics: &Metrics,
) -> Result<(StreamEnd, StreamWriter), Retry<WalError>> {
    let (reader, writer) = stream;
    let mut ticker = tokio::time::interval(settings.status_interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let read_loop = ReadLoop {
        reader,
        writer,
        decoder: DecoderState::new(settings.proto_version),
        last_stats: assembler.stats(),
        assembler,
        tracker,
        frontier,
        tx,
        settings,
        metrics,
        received: Lsn::ZERO,
        batch: Vec::with_capacity(BATCH_EVENTS),
        ticker,
        last_receive: Instant::now(),
        pinged: false,
        last_reported: Lsn::ZERO,
    };
    read_loop.run(shutdown).await
}

/// The read loop of one session and what it carries from turn to turn.
struct ReadLoop<'a, F> {
    reader: FrameReceiver,
    writer: StreamWriter,
    decoder: DecoderState,
    assembler: &'a mut Assembler,
    tracker: &'a SharedTracker,
    frontier: &'a F,
    tx: mpsc::Sender<Vec<OutboxEvent>>,
    settings: StreamSettings,
    metrics: &'a Metrics,
    /// The highest WAL end the server sent.
    received: Lsn,
    /// Events not handed to the sink yet.
    batch: Vec<OutboxEvent>,
    /// When the next standby status update is due.
    ticker: Interval,
    /// When the server was last heard (or we were last busy).
    last_receive: Instant,
    /// A status update asking for a reply is outstanding.
    pinged: bool,
    /// The durable position last reported to the server.
    last_reported: Lsn,
    /// The assembler's counters at the last report.
    last_stats: AssemblyStats,
}

/// What one turn's decoding left to do.
#[derive(Default)]
struct Turn {
    /// A batch is full, or a streamed transaction is being read back: go
    /// on without waiting.
    full: bool,
    /// The server asked for a reply.
    reply_now: bool,
}

impl<F: Frontier> ReadLoop<'_, F> {
    /// Turns until shutdown, the sink's departure or an error: decode what
    /// is buffered, hand it over, answer the server, then wait.
    async fn run(
        mut self,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<(StreamEnd, StreamWriter), Retry<WalError>> {
        loop {
            let turn = if self.assembler.replaying() {
                // A committed streamed transaction: one batch from its
                // spill file per turn, handed over below with backpressure.
                self.replay().await?;
                Turn {
                    full: true,
                    reply_now: false,
                }
            } else {
                self.drain().await?
            };
            // Anything the server sent, however it was taken, shows it alive.
            if self.reader.take_heard() {
                self.heard();
            }
            if !self.batch.is_empty() {
                if let Some(end) = self.hand_over(shutdown).await? {
                    return Ok((end, self.writer));
                }
            }
            if turn.reply_now {
                let confirmed = self.frontier.durable();
                self.writer
                    .send_status(&status_update(self.received, confirmed, false))
                    .await?;
                self.last_reported = confirmed;
            }
            if turn.full {
                // More frames may be buffered, or a spill file is being
                // read back: go on before waiting, but keep the feedback
                // flowing when the sink keeps up and we never wait below.
                if self.ticker.tick().now_or_never().is_some() {
                    self.last_reported = self.report().await?;
                }
                // We were busy, not the server silent.
                self.heard();
                continue;
            }
            if let Some(end) = self.wait(shutdown).await? {
                return Ok((end, self.writer));
            }
        }
    }

    fn heard(&mut self) {
        self.last_receive = Instant::now();
        self.pinged = false;
    }

    /// Decodes the complete frames already buffered, up to a full batch
    /// or the start of a streamed transaction's read-back.
    async fn drain(&mut self) -> Result<Turn, Retry<WalError>> {
        let mut turn = Turn::default();
        while let Some(frame) = self.reader.try_next()? {
            let message = decode_replication_message(frame).map_err(|source| {
                Retry::Definite(WalError::Decode {
                    lsn: self.received,
                    source,
                })
            })?;
            match message {
                ReplicationMessage::XLogData(x) => {
                    self.received = self.received.max(x.wal_end);
                    let msg = pgoutput::decode(&mut self.decoder, x.data).map_err(|source| {
                        Retry::Definite(WalError::Decode {
                            lsn: x.wal_start,
                            source,
                        })
                    })?;
                    match self.assemble(msg, x.wal_start) {
                        Ok(false) => {}
                        Ok(true) => {
                            turn.full = true;
                            break;
                        }
                        Err(e) => return Err(self.fail(e).await),
                    }
                }
                ReplicationMessage::PrimaryKeepalive(k) => {
                    self.received = self.received.max(k.wal_end);
                    // Everything before this keepalive has been handed to
                    // the assembler, so if the tracker holds nothing, all
                    // of it is delivered (or carried no event).
                    if !self.assembler.in_transaction() {
                        self.tracker.keepalive(k.wal_end);
                    }
                    turn.reply_now |= k.reply_requested;
                }
            }
        }
        Ok(turn)
    }

    /// One decoded message into the assembler, its events stamped with the
    /// time it was read. Returns whether to hand the batch over (it is
    /// full, or a streamed transaction is to be read back) before decoding
    /// further.
    fn assemble(&mut self, msg: pgoutput::LogicalMessage, at: Lsn) -> Result<bool, TxnError> {
        // The commit read off the socket: how long the server took to
        // decode and send it.
        let received_us = self.reader.received_us();
        if let pgoutput::LogicalMessage::Commit(pgoutput::Commit { commit_time, .. })
        | pgoutput::LogicalMessage::StreamCommit(pgoutput::StreamCommit {
            commit_time, ..
        }) = &msg
        {
            let since = received_us - (commit_time + PG_EPOCH_OFFSET_MICROS);
            observe_micros(&self.metrics.stages.commit_to_receive, since);
        }
        let before = self.batch.len();
        self.assembler
            .handle(msg, at, self.tracker, &mut self.batch)?;
        for event in &mut self.batch[before..] {
            event.meta.received_us = received_us;
        }
        Ok(self.batch.len() >= BATCH_EVENTS || self.assembler.replaying())
    }

    /// One batch of a committed streamed transaction from its spill file.
    async fn replay(&mut self) -> Result<(), Retry<WalError>> {
        match self
            .assembler
            .replay(self.tracker, &mut self.batch, BATCH_EVENTS)
        {
            Ok(()) => Ok(()),
            Err(e) => Err(self.fail(e).await),
        }
    }

    /// Ends the loop on an assembly error, after handing over the events
    /// before the offending change (bounded), as Debezium produces the
    /// records before a failing one; their transaction is never confirmed.
    async fn fail(&mut self, e: TxnError) -> Retry<WalError> {
        if !self.batch.is_empty() {
            self.assembler.register_pending(self.tracker);
            let ready = std::mem::take(&mut self.batch);
            let _ = tokio::time::timeout(HANDOVER_ON_ERROR, self.tx.send(ready)).await;
        }
        Retry::Definite(WalError::Txn(e))
    }

    /// Hands the batch to the sink, waiting for room while still sending
    /// status updates so the walsender does not time us out during
    /// backpressure. `Some` ends the loop.
    async fn hand_over(
        &mut self,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<Option<StreamEnd>, Retry<WalError>> {
        self.assembler.register_pending(self.tracker);
        let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH_EVENTS));
        loop {
            tokio::select! {
                biased;
                // 1. shutdown
                _ = shutdown.changed() => return Ok(Some(StreamEnd::Shutdown)),
                // 2. room in the channel (or the sink gone)
                permit = self.tx.reserve() => {
                    let Ok(permit) = permit else {
                        return Ok(Some(StreamEnd::SinkStopped));
                    };
                    permit.send(batch);
                    return Ok(None);
                }
                // 3. feedback
                _ = self.ticker.tick() => {
                    let durable = self.frontier.durable();
                    self.writer
                        .send_status(&status_update(self.received, durable, false))
                        .await?;
                }
            }
        }
    }

    /// Waits for the first of shutdown, the sink's departure, the next
    /// status update, new WAL or the server's silence. `Some` ends the loop.
    async fn wait(
        &mut self,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<Option<StreamEnd>, Retry<WalError>> {
        let timeout = self.settings.receive_timeout;
        tokio::select! {
            biased;
            // 1. shutdown
            _ = shutdown.changed() => Ok(Some(StreamEnd::Shutdown)),
            // 2. the sink went away
            _ = self.tx.closed() => {
                // Confirm what was delivered before the sink stopped, so a
                // restart does not replay it.
                let durable = self.frontier.durable();
                let _ = self
                    .writer
                    .send_status(&status_update(self.received, durable, false))
                    .await;
                Ok(Some(StreamEnd::SinkStopped))
            }
            // 3. feedback
            _ = self.ticker.tick() => {
                let confirmed = self.report().await?;
                if confirmed != self.last_reported {
                    debug!(%confirmed, received = %self.received, "confirmed");
                    self.last_reported = confirmed;
                }
                Ok(None)
            }
            // 4. new WAL
            // (read on the reader thread, which also paces the reads)
            // (the next turn of the loop counts it as heard)
            r = self.reader.read_more() => {
                r?;
                Ok(None)
            }
            // 5. silence, which is normal: a walsender with nothing to send
            // and regular replies from us sends nothing. Halfway to the
            // timeout ask for a reply; a live server answers with a
            // keepalive.
            _ = tokio::time::sleep_until(self.last_receive + timeout / 2), if !self.pinged => {
                let durable = self.frontier.durable();
                self.writer
                    .send_status(&status_update(self.received, durable, true))
                    .await?;
                self.pinged = true;
                Ok(None)
            }
            // 6. no answer to that request either
            _ = tokio::time::sleep_until(self.last_receive + timeout), if self.pinged => {
                Err(Retry::Transient(WalError::ReceiveTimeout(timeout)))
            }
        }
    }

    /// The periodic feedback: a status update with the frontier's durable
    /// position, then the progress metrics. Returns the position reported.
    async fn report(&mut self) -> Result<Lsn, Retry<WalError>> {
        let confirmed = self.frontier.durable();
        self.writer
            .send_status(&status_update(self.received, confirmed, false))
            .await?;
        if confirmed > self.last_reported {
            if let Some(since) = self.tracker.take_completed_since() {
                observe_micros(
                    &self.metrics.stages.ack_to_confirm,
                    unix_now_micros() - since,
                );
            }
        }
        publish_progress(
            self.metrics,
            self.received,
            confirmed,
            self.tracker,
            self.assembler.stats(),
            &mut self.last_stats,
        );
        Ok(confirmed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_per_server_version() {
        // streaming off: the fallback everywhere
        for v in [130_012, 140_000, 150_004, 160_002, 170_000, 180_001] {
            assert_eq!(proto_version_for(v, false, 1), 1, "{v}");
        }
        assert_eq!(proto_version_for(130_012, true, 1), 1);
        assert_eq!(proto_version_for(140_000, true, 1), 2);
        assert_eq!(proto_version_for(150_013, true, 1), 2);
        assert_eq!(proto_version_for(160_000, true, 1), 4);
        assert_eq!(proto_version_for(170_004, true, 1), 4);
        assert_eq!(proto_version_for(180_001, true, 1), 4);
    }

    #[test]
    fn streaming_option_per_protocol() {
        assert_eq!(streaming_option(1), None);
        assert_eq!(streaming_option(2), Some("on"));
        assert_eq!(streaming_option(3), Some("on"));
        assert_eq!(streaming_option(4), Some("parallel"));
    }
}
