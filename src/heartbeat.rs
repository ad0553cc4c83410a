//! Heartbeats: small writes to the source database on an interval, so a slot
//! on a quiet database keeps advancing while other databases on the same
//! cluster fill the WAL.
//!
//! A logical replication slot belongs to one database, but WAL is shared by
//! the whole cluster. When the outbox database is quiet, the walsender finds
//! nothing to send and the slot's position cannot advance, so the WAL of
//! every other database piles up behind it. A heartbeat gives the stream
//! something to confirm. By default it emits a transactional logical
//! decoding message (`pg_logical_emit_message`), which needs no table. With
//! Debezium's `heartbeat.action.query`, that query runs instead.
//!
//! This module owns only that periodic write. It never touches the stream
//! or the checkpoint: the resulting transaction flows through the normal
//! path and is confirmed like any other.

use std::time::Duration;

use tokio::sync::watch;
use tracing::{debug, warn};

use crate::config::HeartbeatConfig;
use crate::source::catalog;
use crate::source::replication::ConnectParams;

/// What a heartbeat runs when no `action_query` is configured: a
/// transactional logical decoding message, prefix `walrelay_heartbeat`.
pub const DEFAULT_HEARTBEAT_SQL: &str =
    "SELECT pg_logical_emit_message(true, 'walrelay_heartbeat', '')";

/// Runs heartbeats until shutdown. Failures are logged and retried on the
/// next tick; they never stop walrelay.
pub async fn run(cfg: HeartbeatConfig, params: ConnectParams, mut shutdown: watch::Receiver<bool>) {
    let sql = cfg
        .action_query
        .clone()
        .unwrap_or_else(|| DEFAULT_HEARTBEAT_SQL.to_owned());
    let mut ticker = tokio::time::interval(Duration::from_millis(cfg.interval_ms.max(1)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut client: Option<tokio_postgres::Client> = None;
    loop {
        tokio::select! {
            biased;
            _ = shutdown.changed() => return,
            _ = ticker.tick() => {}
        }
        if client.as_ref().is_none_or(|c| c.is_closed()) {
            client = match catalog::connect(&params).await {
                Ok(c) => Some(c),
                Err(e) => {
                    warn!(error = %e, "heartbeat cannot connect; retrying at the next interval");
                    None
                }
            };
        }
        let Some(c) = client.as_ref() else { continue };
        match c.batch_execute(&sql).await {
            Ok(()) => debug!("heartbeat"),
            Err(e) => {
                // The query text may be the user's; the error says what failed.
                warn!(error = %e, "heartbeat query failed; retrying at the next interval");
                client = None;
            }
        }
    }
}
