//! The pipeline over the polling source (`[source] kind = "poll"`): the
//! outbox table's columns read and bound to the router, the shard workers
//! driven through the [`crate::source`] seam like the WAL source, the
//! backlog monitor beside them, reconnects with backoff.
//!
//! Owns the order of a polling session's steps. It never marks a row
//! itself: the source marks a claim only after its acknowledgements.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::{error, info, warn, Instrument};

use super::plan::PlannedTable;
use super::session::{drive, SessionError};
use super::{Backoff, PipelineError, Plan};
use crate::chain::DisplayChain;
use crate::checkpoint::SharedTracker;
use crate::metrics::Metrics;
use crate::postgres::catalog::snapshot as pg_snapshot;
use crate::postgres::catalog::{self, CatalogError};
use crate::postgres::poll::sql::PollSql;
use crate::postgres::poll::{self, PollError, PollSource};
use crate::retry::Retry;
use crate::sink::choice::Sink;
use crate::source::TrackerProgress;

/// Runs the polling pipeline of `plan` until shutdown (Ok) or a fatal error.
/// `sink`, its metrics listener and `backoff` are the pipeline's own
/// (`pipeline::start`).
pub(super) async fn run(
    plan: Plan,
    sink: Arc<Sink>,
    metrics: Arc<Metrics>,
    mut shutdown: watch::Receiver<bool>,
    mut backoff: Backoff,
) -> Result<(), PipelineError> {
    let config = plan.config();
    let outbox = polled_table(&plan)?;
    let stats_sql = PollSql::new(
        &outbox.schema,
        &outbox.table,
        &[],
        &config.poll,
        config.poll.shard_column_or(outbox.columns.key_field()),
    );
    tokio::spawn({
        let probe_sink = Arc::clone(&sink);
        poll::monitor(
            config.poll.clone(),
            stats_sql,
            plan.params().clone(),
            Arc::clone(&metrics),
            move || {
                let s = Arc::clone(&probe_sink);
                async move {
                    tokio::task::spawn_blocking(move || s.probe(Duration::from_secs(2)))
                        .await
                        .unwrap_or(false)
                }
            },
            shutdown.clone(),
        )
        .instrument(tracing::info_span!("poll_monitor"))
    });
    let mut progress = TrackerProgress::default();
    // No slot lag monitor reads it; drive() announces each session's tracker.
    let (tracker_tx, _tracker_rx) = watch::channel::<Option<SharedTracker>>(None);
    loop {
        let started = tokio::time::Instant::now();
        let result = match open(&plan, &metrics).await {
            Ok(source) => drive(
                &plan,
                &sink,
                &metrics,
                source,
                &mut progress,
                "poll",
                &mut shutdown,
                &tracker_tx,
            )
            .await
            .and_then(|stopped| stopped.map_err(SessionError::from)),
            Err(e) => Err(SessionError::Source(e)),
        };
        metrics.streaming.store(false, Ordering::Relaxed);
        match result {
            Ok(()) => return Ok(()),
            // The polling source has no Kafka transactions to resume from.
            Err(SessionError::Sink(e)) => return Err(e.into_inner().into()),
            Err(SessionError::SinkGone) => return Err(PipelineError::SinkStopped),
            Err(SessionError::Source(Retry::Transient(e))) => {
                metrics.reconnects.inc();
                if started.elapsed() > Duration::from_secs(30) {
                    backoff.reset();
                }
                let delay = backoff.next_delay();
                warn!(error = %DisplayChain(&e), retry_in = ?delay, "polling session ended; reconnecting");
                tokio::select! {
                    _ = shutdown.changed() => return Ok(()),
                    _ = tokio::time::sleep(delay) => {}
                }
            }
            Err(SessionError::Source(Retry::Definite(e))) => {
                error!(error = %DisplayChain(&e), "polling stopped");
                return Err(e.into());
            }
        }
    }
}

/// The one table the polling source claims from (the configuration
/// refuses several: `outbox.tables`).
fn polled_table(plan: &Plan) -> Result<&PlannedTable, PipelineError> {
    match plan.tables() {
        [one] => Ok(one),
        tables => Err(PipelineError::Config(format!(
            "outbox.tables: the polling source claims from one table, and {} are configured; \
             run one pipeline per table",
            tables.len()
        ))),
    }
}

/// Opens one polling session: the table's columns from the catalog, the
/// router bound to them, and the configured columns checked against them.
async fn open(plan: &Plan, metrics: &Arc<Metrics>) -> Result<PollSource, Retry<PollError>> {
    let config = plan.config();
    let params = plan.params();
    let outbox = plan
        .tables()
        .first()
        .expect("run() checked that the polling source has its one table");
    let (schema, table) = (outbox.schema.as_str(), outbox.table.as_str());
    let bound = catalog::sql_timeout(params);
    let client =
        catalog::bounded(bound, "opening a sql connection", catalog::connect(params)).await?;
    let relation = catalog::bounded(
        bound,
        "reading the outbox table's columns",
        pg_snapshot::relation_info(&client, schema, table),
    )
    .await?;
    if relation.columns.is_empty() {
        return Err(CatalogError::NoOutboxTable {
            schema: schema.to_owned(),
            table: table.to_owned(),
            dbname: params.dbname.clone(),
        }
        .into());
    }
    let poll = &config.poll;
    let shard_column = poll.shard_column_or(outbox.columns.key_field());
    for (key, column) in poll.named_columns(shard_column) {
        if !relation.columns.iter().any(|c| c.name == column) {
            return Err(Retry::Definite(PollError::MissingColumn {
                key,
                column: column.to_owned(),
                table: format!("{schema}.{table}"),
            }));
        }
    }
    let table_meta = catalog::bounded(
        bound,
        "reading the outbox table's columns",
        catalog::table_meta(&client, schema, table),
    )
    .await?;
    let relation = Arc::new(relation);
    let router = plan.router();
    outbox.require_columns(&router, &relation, &table_meta)?;
    let bound_relation = router
        .bind_with(&relation, &table_meta, &outbox.columns)
        .map_err(|source| {
            Retry::Definite(PollError::Layout {
                table: format!("{schema}.{table}"),
                source: Box::new(source),
            })
        })?;
    let columns: Vec<String> = relation.columns.iter().map(|c| c.name.clone()).collect();
    let sql = PollSql::new(schema, table, &columns, poll, shard_column);
    info!(
        table = %format!("{schema}.{table}"),
        shards = poll.shards,
        batch_size = poll.batch_size,
        listen = %poll.listen_channel,
        "polling the outbox table"
    );
    Ok(PollSource::new(
        poll.clone(),
        sql,
        Arc::new(bound_relation),
        params.clone(),
        Arc::clone(metrics),
        Duration::from_millis(config.runtime.shutdown_timeout_ms),
    ))
}
