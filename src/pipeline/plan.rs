//! The validated plan of one pipeline: everything a session needs that can
//! be checked or built before connecting anywhere, built once.
//!
//! Owns the pre-flight checks that need more than one section (the router
//! compiled against the converters, the spill directory written to, the
//! heartbeat record encoded) and the one [`Router`] the pipeline's stages
//! copy. It never connects and never reads a file of configuration.

use std::sync::Arc;

use crate::chain::DisplayChain;
use crate::config::Config;
use crate::connect::pg::TableMeta;
use crate::connect::transaction::TransactionTopic;
use crate::heartbeat::HeartbeatRecord;
use crate::postgres::catalog::CatalogError;
use crate::postgres::catalog::PublicationPlan;
use crate::postgres::replication::ConnectParams;
use crate::router::{native_column_option, ColumnMapping, ColumnOverrides, RouteError, Router};
use crate::txn::metadata::Metadata;
use crate::txn::spill::SpillFile;
use crate::txn::{Assembler, OutboxTable};
use walrelay_proto::RelationInfo;

use super::PipelineError;

/// One outbox table of a plan: its name and the columns the router reads
/// from it (its own, or `[router]`'s).
#[derive(Debug, Clone)]
pub(crate) struct PlannedTable {
    pub(crate) schema: String,
    pub(crate) table: String,
    /// The columns the router reads.
    pub(crate) columns: Arc<ColumnMapping>,
    /// The table's own column names (empty: `[router]`'s).
    pub(crate) overrides: ColumnOverrides,
    /// The key naming the table: `outbox.table` or `outbox.tables[<i>]`.
    pub(crate) key: String,
}

impl PlannedTable {
    /// `schema.table`.
    pub(crate) fn qualified(&self) -> String {
        format!("{}.{}", self.schema, self.table)
    }

    /// Checks at start that every column this table's routing names is in
    /// its relation (read from the catalog), as the stream's binding will
    /// need; the error names the table, the column and the setting.
    /// Other layout problems (a type walrelay cannot map) stay per event,
    /// under the `[errors]` policy, as Debezium fails per record.
    pub(crate) fn require_columns(
        &self,
        router: &Router,
        relation: &Arc<RelationInfo>,
        meta: &TableMeta,
    ) -> Result<(), CatalogError> {
        match router.check_layout_with(relation, meta, &self.columns) {
            Err(RouteError::MissingColumn { column, key, .. }) => {
                let native = native_column_option(key).unwrap_or("router");
                let setting = if self.overrides.sets(native) {
                    format!("{}.{native}", self.key)
                } else {
                    format!("router.{native} ({key})")
                };
                Err(CatalogError::MissingOutboxColumn {
                    table: self.qualified(),
                    column,
                    setting,
                })
            }
            _ => Ok(()),
        }
    }

    /// The table for a session, with the catalog facts read at its start.
    pub(crate) fn with_meta(&self, meta: TableMeta) -> OutboxTable {
        OutboxTable {
            schema: self.schema.clone(),
            table: self.table.clone(),
            columns: Arc::clone(&self.columns),
            meta,
        }
    }
}

/// One pipeline's settings, checked, with the parts built from them.
pub(crate) struct Plan {
    config: Arc<Config>,
    router: Router,
    /// The outbox tables whose rows are events (none with messages only).
    tables: Vec<PlannedTable>,
    params: ConnectParams,
    heartbeat: Option<HeartbeatRecord>,
    /// Transaction metadata, when `outbox.transaction_metadata` is on.
    metadata: Option<Metadata>,
}

impl Plan {
    /// Checks what a session will need and builds the router once. The
    /// error names the setting.
    pub(crate) fn new(config: Config) -> Result<Plan, PipelineError> {
        // A bad regex or converter combination fails before connecting.
        let chain = config
            .chain()
            .map_err(|e| PipelineError::Config(e.to_string()))?;
        let mut router = Router::new(
            config.router.clone(),
            config.converters,
            config.debezium.clone(),
        )
        .map_err(|e| PipelineError::Config(e.to_string()))?
        .with_chain(chain)
        .with_envelope_headers(
            config
                .debezium
                .envelope_fields()
                .map_err(|e| PipelineError::Config(e.to_string()))?,
            &config.postgres.dbname,
        );
        if let Some(ce) = config
            .cloudevents()
            .map_err(|e| PipelineError::Config(e.to_string()))?
        {
            router = router.with_cloudevents(ce);
        }
        if let Some(selection) = config.outbox.message_selection() {
            router.set_message_form(
                config.debezium.message_form,
                selection.non_transactional,
                &config.postgres.dbname,
            );
        }
        // A spill directory walrelay cannot write to would fail only when the
        // first large transaction arrives, maybe weeks later: find out now.
        if let Some(dir) = &config.replication.spill_dir {
            SpillFile::new(0, Some(dir))
                .map_err(|e| PipelineError::Config(DisplayChain(&e).to_string()))?;
        }
        let heartbeat = if config.heartbeat.interval_ms > 0 {
            Some(
                HeartbeatRecord::new(&config.heartbeat, &config.debezium, config.converters)
                    .map_err(|e| PipelineError::Config(DisplayChain(&e).to_string()))?
                    .with_chain(&router),
            )
        } else {
            None
        };
        let metadata = transaction_metadata(&config)?;
        let mut tables = Vec::new();
        if config.outbox.source.table() {
            let specs = config
                .outbox
                .tables()
                .map_err(|e| PipelineError::Config(e.to_string()))?;
            for spec in specs {
                let columns = router.mapping(&spec.columns).map_err(|e| {
                    PipelineError::Config(format!("{}: {}", spec.key, DisplayChain(&e)))
                })?;
                tables.push(PlannedTable {
                    schema: spec.schema,
                    table: spec.table,
                    columns,
                    overrides: spec.columns,
                    key: spec.key,
                });
            }
        }
        let params = ConnectParams::from_config(&config.postgres);
        Ok(Plan {
            config: Arc::new(config),
            router,
            tables,
            params,
            heartbeat,
            metadata,
        })
    }

    /// The pipeline's settings.
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// A copy of the pipeline's router for one stage (its caches are its own).
    pub(crate) fn router(&self) -> Router {
        self.router.clone()
    }

    /// The outbox tables whose rows are events, in configuration order
    /// (none when events are logical decoding messages only).
    pub(crate) fn tables(&self) -> &[PlannedTable] {
        &self.tables
    }

    /// How to reach the database.
    pub(crate) fn params(&self) -> &ConnectParams {
        &self.params
    }

    /// The heartbeat record, when heartbeats are on.
    pub(crate) fn heartbeat(&self) -> Option<&HeartbeatRecord> {
        self.heartbeat.as_ref()
    }

    /// What the publication must look like.
    pub(crate) fn publication(&self) -> PublicationPlan {
        let tables = self
            .tables
            .iter()
            .map(|t| (t.schema.clone(), t.table.clone()))
            .collect();
        let mut plan =
            PublicationPlan::new(&self.config.postgres, &self.config.replication, tables);
        plan.messages_only = !self.config.outbox.source.table();
        plan.transaction_metadata = self.metadata.is_some();
        plan
    }

    /// Which logical decoding messages are events, if any.
    pub(crate) fn messages(&self) -> Option<crate::txn::config::MessageSelection> {
        self.config.outbox.message_selection()
    }

    /// A fresh assembler for one session over the outbox tables, whose
    /// columns' catalog facts `metas` holds in [`Plan::tables`] order.
    pub(crate) fn assembler(&self, metas: Vec<TableMeta>) -> Assembler {
        let tables = self
            .tables
            .iter()
            .zip(metas)
            .map(|(t, meta)| t.with_meta(meta))
            .collect();
        Assembler::new(
            tables,
            self.router(),
            self.config.outbox.op_invalid_behavior,
        )
        .with_spill_dir(self.config.replication.spill_dir.clone())
        .with_messages(self.messages())
        .with_transaction_metadata(self.metadata.clone())
    }
}

/// The transaction topic (`<debezium.topic_prefix>.<outbox.transaction_topic>`)
/// with its converters checked, when transaction metadata is on.
fn transaction_metadata(config: &Config) -> Result<Option<Metadata>, PipelineError> {
    let outbox = &config.outbox;
    if !outbox.transaction_metadata {
        return Ok(None);
    }
    let key = config.converters.key_converter();
    let value = config.converters.value_converter();
    let topic = format!(
        "{}.{}",
        config.debezium.topic_prefix, outbox.transaction_topic
    );
    let topic = TransactionTopic::new(&topic, key, value).map_err(|e| {
        PipelineError::Config(format!(
            "outbox.transaction_metadata: Debezium's BEGIN and END records are structs, which the \
             configured key or value converter cannot write (Debezium's task would fail at the \
             first transaction): {}",
            DisplayChain(&e)
        ))
    })?;
    Ok(Some(Metadata {
        topic: Arc::new(topic),
        count_updates: !outbox.skipped_operations.updates,
        count_deletes: !outbox.skipped_operations.deletes,
    }))
}
