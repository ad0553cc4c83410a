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
use tokio::time::{Instant, MissedTickBehavior};
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
use crate::source::{Frontier, Source, SourceFailure, StreamEnd};
use crate::txn::{Assembler, AssemblyStats, OutboxEvent, TxnError};

/// How long a failing stream waits to hand its last events to the sink.
const HANDOVER_ON_ERROR: Duration = Duration::from_secs(5);
/// Events per batch handed to the sink; bounds one channel slot's memory.
pub const BATCH_EVENTS: usize = 1024;
/// pgoutput protocol version that streams in-progress transactions.
pub const STREAMING_PROTO_VERSION: u32 = 2;
/// First server version (`server_version_num`) with protocol version 2.
pub const STREAMING_MIN_SERVER_VERSION: u32 = 140_000;
/// pgoutput protocol version that accepts `streaming 'parallel'`.
pub const PARALLEL_STREAMING_PROTO_VERSION: u32 = 4;
/// First server version (`server_version_num`) with protocol version 4.
pub const PARALLEL_STREAMING_MIN_SERVER_VERSION: u32 = 160_000;

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
pub fn proto_version_for(server_version_num: u32, streaming: bool, fallback: u32) -> u32 {
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
pub enum WalError {
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
    /// The sink stopped (its own error is reported separately).
    #[error("the kafka sink stopped")]
    SinkStopped,
    /// Exactly-once mode cannot go on from this slot (its message names
    /// both positions and the way out).
    #[error("exactly-once: {0}")]
    ExactlyOnce(String),
}

impl SourceFailure for WalError {
    fn is_transient(&self) -> bool {
        match self {
            WalError::Replication(e) => e.is_transient(),
            WalError::Catalog(e) => e.is_transient(),
            WalError::ReceiveTimeout(_) => true,
            WalError::Refused { capability, .. } => capability.is_transient(),
            WalError::Decode { .. }
            | WalError::Txn(_)
            | WalError::SlotGone(_)
            | WalError::ExactlyOnce(_)
            | WalError::SinkStopped => false,
        }
    }
}

/// Stream settings.
#[derive(Debug, Clone, Copy)]
pub struct StreamSettings {
    /// pgoutput protocol version requested.
    pub proto_version: u32,
    /// Interval between standby status updates.
    pub status_interval: Duration,
    /// Silence after which the connection is considered dead.
    pub receive_timeout: Duration,
}

impl WalError {
    /// `error` as [`WalError::Refused`] when the server refused for want of
    /// a capability ([`capability::refusal`]; `slot` is the slot being
    /// created), otherwise as it is.
    pub fn explain(error: ReplicationError, slot: &str) -> WalError {
        let found = match &error {
            ReplicationError::Server { code, message, .. } => {
                capability::refusal(code, message, slot)
            }
            _ => None,
        };
        match found {
            Some(capability) => WalError::Refused {
                capability,
                source: Box::new(error),
            },
            None => WalError::Replication(error),
        }
    }
}

/// Builds the status update for the current positions.
pub fn status_update(received: Lsn, confirmed: Lsn, reply_requested: bool) -> StandbyStatusUpdate {
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
pub fn choose_proto_version(server_version_num: u32, streaming: bool, fallback: u32) -> u32 {
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
pub struct WalSource {
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
    pub fn new(
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
    ) -> Result<StreamEnd, WalError> {
        let stream = self
            .stream
            .take()
            .expect("a replication session is streamed once");
        let settings = self.settings;
        match stream_wal(
            stream,
            &mut self.assembler,
            tracker,
            frontier,
            out,
            shutdown,
            settings,
            &self.metrics,
        )
        .await
        {
            Ok(writer) => {
                self.writer = Some(writer);
                Ok(StreamEnd::Shutdown)
            }
            Err(WalError::SinkStopped) => Ok(StreamEnd::SinkStopped),
            Err(e) => Err(e),
        }
    }

    async fn finish(self, durable: Lsn) -> Result<(), WalError> {
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

/// Reads the stream until shutdown or an error, handing events to `tx`;
/// shutdown hands the writer back for the final status update.
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
) -> Result<StreamWriter, WalError> {
    let (mut reader, mut writer) = stream;
    let mut decoder = DecoderState::new(settings.proto_version);
    let mut received = Lsn::ZERO;
    let mut batch: Vec<OutboxEvent> = Vec::with_capacity(BATCH_EVENTS);
    let mut ticker = tokio::time::interval(settings.status_interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut last_receive = Instant::now();
    // A status update asking for a reply is outstanding.
    let mut pinged = false;
    let mut last_reported = Lsn::ZERO;
    let mut last_stats = assembler.stats();

    loop {
        let mut reply_now = false;
        let mut full = false;
        if assembler.replaying() {
            // A committed streamed transaction: one batch from its spill
            // file per turn, handed over below with backpressure.
            if let Err(e) = assembler.replay(tracker, &mut batch, BATCH_EVENTS) {
                if !batch.is_empty() {
                    assembler.register_pending(tracker);
                    let ready = std::mem::take(&mut batch);
                    let _ = tokio::time::timeout(HANDOVER_ON_ERROR, tx.send(ready)).await;
                }
                return Err(e.into());
            }
            full = true;
        }
        // Drain the complete frames already buffered, up to a full batch.
        while !full {
            let Some(frame) = reader.try_next()? else {
                break;
            };
            match decode_replication_message(frame).map_err(|source| WalError::Decode {
                lsn: received,
                source,
            })? {
                ReplicationMessage::XLogData(x) => {
                    received = received.max(x.wal_end);
                    let msg = pgoutput::decode(&mut decoder, x.data).map_err(|source| {
                        WalError::Decode {
                            lsn: x.wal_start,
                            source,
                        }
                    })?;
                    // The commit read off the socket: how long the server
                    // took to decode and send it.
                    let received_us = reader.received_us();
                    if let pgoutput::LogicalMessage::Commit(pgoutput::Commit {
                        commit_time, ..
                    })
                    | pgoutput::LogicalMessage::StreamCommit(pgoutput::StreamCommit {
                        commit_time,
                        ..
                    }) = &msg
                    {
                        let since = received_us - (commit_time + PG_EPOCH_OFFSET_MICROS);
                        observe_micros(&metrics.stages.commit_to_receive, since);
                    }
                    let before = batch.len();
                    if let Err(e) = assembler.handle(msg, x.wal_start, tracker, &mut batch) {
                        // Hand over the events before the offending change,
                        // as Debezium produces the records before a failing
                        // one; their transaction is never confirmed.
                        if !batch.is_empty() {
                            assembler.register_pending(tracker);
                            let ready = std::mem::take(&mut batch);
                            let _ = tokio::time::timeout(HANDOVER_ON_ERROR, tx.send(ready)).await;
                        }
                        return Err(e.into());
                    }
                    for event in &mut batch[before..] {
                        event.meta.received_us = received_us;
                    }
                    if batch.len() >= BATCH_EVENTS || assembler.replaying() {
                        // Hand this batch over (or start reading back a
                        // streamed transaction) before decoding further.
                        full = true;
                        break;
                    }
                }
                ReplicationMessage::PrimaryKeepalive(k) => {
                    received = received.max(k.wal_end);
                    // Everything before this keepalive has been handed to
                    // the assembler, so if the tracker holds nothing, all of
                    // it is delivered (or carried no event).
                    if !assembler.in_transaction() {
                        tracker.keepalive(k.wal_end);
                    }
                    reply_now |= k.reply_requested;
                }
            }
        }
        // Anything the server sent, however it was taken, shows it alive.
        if reader.take_heard() {
            last_receive = Instant::now();
            pinged = false;
        }
        if !batch.is_empty() {
            assembler.register_pending(tracker);
            let ready = std::mem::replace(&mut batch, Vec::with_capacity(BATCH_EVENTS));
            if send_batch(
                ready,
                &tx,
                &mut writer,
                frontier,
                received,
                shutdown,
                &mut ticker,
            )
            .await?
            {
                return Ok(writer);
            }
        }
        if reply_now {
            let confirmed = frontier.durable();
            writer
                .send_status(&status_update(received, confirmed, false))
                .await?;
            last_reported = confirmed;
        }
        if full {
            // More frames may be buffered, or a spill file is being read
            // back: go on before waiting, but keep the feedback flowing
            // when the sink keeps up and we never wait below.
            if ticker.tick().now_or_never().is_some() {
                last_reported = report(
                    &mut writer,
                    received,
                    frontier,
                    (metrics, tracker),
                    assembler.stats(),
                    (&mut last_stats, last_reported),
                )
                .await?;
            }
            // We were busy, not the server silent.
            last_receive = Instant::now();
            pinged = false;
            continue;
        }

        tokio::select! {
            biased;
            // 1. shutdown
            _ = shutdown.changed() => {
                return Ok(writer);
            }
            // 2. the sink went away
            _ = tx.closed() => {
                // Confirm what was delivered before the sink stopped, so a
                // restart does not replay it.
                let _ = writer
                    .send_status(&status_update(received, frontier.durable(), false))
                    .await;
                return Err(WalError::SinkStopped);
            }
            // 3. feedback
            _ = ticker.tick() => {
                let confirmed = report(
                    &mut writer,
                    received,
                    frontier,
                    (metrics, tracker),
                    assembler.stats(),
                    (&mut last_stats, last_reported),
                )
                .await?;
                if confirmed != last_reported {
                    debug!(%confirmed, %received, "confirmed");
                    last_reported = confirmed;
                }
            }
            // 4. new WAL
            // (read on the reader thread, which also paces the reads)
            // (the next turn of the loop counts it as heard)
            r = reader.read_more() => {
                r?;
            }
            // Silence is normal: a walsender with nothing to send and
            // regular replies from us sends nothing. Halfway to the timeout
            // ask for a reply; a live server answers with a keepalive.
            _ = tokio::time::sleep_until(last_receive + settings.receive_timeout / 2), if !pinged => {
                writer.send_status(&status_update(received, frontier.durable(), true)).await?;
                pinged = true;
            }
            _ = tokio::time::sleep_until(last_receive + settings.receive_timeout), if pinged => {
                return Err(WalError::ReceiveTimeout(settings.receive_timeout));
            }
        }
    }
}

/// The periodic feedback: a status update with the frontier's durable
/// position, then the progress metrics. Returns the position reported.
async fn report<F: Frontier>(
    writer: &mut StreamWriter,
    received: Lsn,
    frontier: &F,
    (metrics, tracker): (&Metrics, &SharedTracker),
    stats: AssemblyStats,
    (last, last_reported): (&mut AssemblyStats, Lsn),
) -> Result<Lsn, WalError> {
    let confirmed = frontier.durable();
    writer
        .send_status(&status_update(received, confirmed, false))
        .await?;
    if confirmed > last_reported {
        if let Some(since) = tracker.take_completed_since() {
            observe_micros(&metrics.stages.ack_to_confirm, unix_now_micros() - since);
        }
    }
    publish_progress(metrics, received, confirmed, tracker, stats, last);
    Ok(confirmed)
}

/// Hands a batch to the sink, waiting for room while still sending status
/// updates so the walsender does not time us out during backpressure.
/// Returns true when shutdown was requested instead.
async fn send_batch<F: Frontier>(
    batch: Vec<OutboxEvent>,
    tx: &mpsc::Sender<Vec<OutboxEvent>>,
    writer: &mut StreamWriter,
    frontier: &F,
    received: Lsn,
    shutdown: &mut watch::Receiver<bool>,
    ticker: &mut tokio::time::Interval,
) -> Result<bool, WalError> {
    loop {
        tokio::select! {
            biased;
            _ = shutdown.changed() => return Ok(true),
            permit = tx.reserve() => {
                let permit = permit.map_err(|_| WalError::SinkStopped)?;
                permit.send(batch);
                return Ok(false);
            }
            _ = ticker.tick() => {
                writer.send_status(&status_update(received, frontier.durable(), false)).await?;
            }
        }
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
