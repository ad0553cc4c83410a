//! Snapshot publishing: every row of each outbox table, read in the slot's
//! exported snapshot (or a fresh one), through the sink, waited for until
//! Kafka acknowledged them all.
//!
//! Owns the hand-off of snapshot rows (every table's, in configuration
//! order) as one transaction at the slot's position. It never confirms anything: the slot is created (or the
//! stream started) only after this returns.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tracing::Instrument;
use walrelay_proto::Lsn;

use super::session::SessionError;
use super::{Plan, CHANNEL_BATCHES};
use crate::checkpoint::SharedTracker;
use crate::connect::pg::TableMeta;
use crate::postgres::catalog::snapshot as pg_snapshot;
use crate::postgres::wal::WalError;
use crate::retry::Retry;
use crate::router::EventMeta;
use crate::sink::choice::Sink;
use crate::txn::{OutboxEvent, TxnError};

/// Publishes every row of each outbox table, read in `snapshot` (or a
/// fresh one), and waits until Kafka acknowledged them all. `table_metas`
/// are the tables' catalog facts in [`Plan::tables`] order. Returns the
/// row count.
pub(super) async fn publish(
    plan: &Plan,
    sink: &Arc<Sink>,
    client: &tokio_postgres::Client,
    table_metas: &[TableMeta],
    snapshot_name: Option<&str>,
    start: Lsn,
) -> Result<u64, SessionError<WalError>> {
    let router = plan.router();
    let mut relations = Vec::with_capacity(plan.tables().len());
    let mut bindings = Vec::with_capacity(plan.tables().len());
    for (t, meta) in plan.tables().iter().zip(table_metas) {
        let relation = Arc::new(pg_snapshot::relation_info(client, &t.schema, &t.table).await?);
        let bound = router
            .bind_with(&relation, meta, &t.columns)
            .map_err(|source| {
                Retry::Definite(WalError::Txn(TxnError::Layout { lsn: start, source }))
            })?;
        relations.push(relation);
        bindings.push(Arc::new(bound));
    }
    let tracker = SharedTracker::new(start);
    sink.begin_session(tracker.clone());
    let (tx, rx) = mpsc::channel(CHANNEL_BATCHES);
    let sink_task = {
        let sink = Arc::clone(sink);
        let mut router = plan.router();
        tokio::spawn(
            async move { sink.run(&mut router, rx).await }.instrument(tracing::info_span!("sink")),
        )
    };
    let now_us = crate::clock::unix_now_micros();
    let seq = tracker.begin(now_us);
    let read = pg_snapshot::read_tables(client, snapshot_name, &relations, |index, rows| {
        let bound = &bindings[index];
        let events: Vec<OutboxEvent> = rows
            .into_iter()
            .map(|row| {
                OutboxEvent::row(
                    seq,
                    EventMeta {
                        lsn: start,
                        commit_lsn: start,
                        xid: 0,
                        commit_time_us: now_us,
                        received_us: 0,
                        last_commit_lsn: None,
                    },
                    Arc::clone(bound),
                    row,
                )
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
        Err(pg_snapshot::SnapshotError::Catalog(e)) => return Err(e.into()),
        Err(pg_snapshot::SnapshotError::Sink(())) => 0,
    };
    sink_result?;
    // Every row is with librdkafka; wait for its acknowledgements.
    while tracker.in_flight_events() > 0 {
        if let Some(e) = sink.take_failure() {
            return Err(e.into());
        }
        let s = Arc::clone(sink);
        let _ = tokio::task::spawn_blocking(move || s.flush(Duration::from_millis(500))).await;
    }
    if let Some(e) = sink.take_failure() {
        return Err(e.into());
    }
    Ok(rows)
}
