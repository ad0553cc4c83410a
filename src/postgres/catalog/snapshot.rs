//! The initial snapshot: the rows already in the outbox tables, read
//! consistently with the position where the slot starts (several tables
//! in one snapshot, one after the other, in configuration order).
//!
//! Debezium's `snapshot.mode` `initial` publishes the outbox rows that exist
//! when the connector first starts, then streams. walrelay does the same
//! when it creates the slot. The order matters, because a crash must never
//! leave a slot behind whose snapshot was not delivered:
//!
//! 1. a *temporary* slot is created with `EXPORT_SNAPSHOT` (it vanishes if
//!    walrelay dies);
//! 2. the rows are read in that snapshot through a cursor, in batches, and
//!    handed to the sink like any other events;
//! 3. once Kafka acknowledged all of them, the temporary slot is copied into
//!    the permanent one (`pg_copy_logical_replication_slot`), which starts at
//!    exactly the snapshot's position.
//!
//! A crash before step 3 leaves no slot, so the next start snapshots again
//! (duplicates, never loss). This module reads; it never produces or
//! confirms anything.

use std::sync::Arc;

use bytes::Bytes;
use tokio_postgres::{Client, SimpleQueryMessage};
use walrelay_proto::pgoutput::{ColumnValue, TupleData};
use walrelay_proto::{Lsn, RelationColumnInfo, RelationInfo};

use super::{sql, CatalogError};
use crate::postgres::replication::{
    quote_ident, quote_literal, ConnectParams, ReplicationConnection, ReplicationError,
};

/// Rows fetched per cursor round trip.
pub(crate) const FETCH_ROWS: usize = 1000;

/// A temporary slot and the snapshot it exported; dropping it closes the
/// replication connection, which drops the temporary slot.
pub(crate) struct ExportedSnapshot {
    _conn: ReplicationConnection,
    /// The temporary slot's name.
    pub(crate) temporary_slot: String,
    /// Where the slot (and its copy) starts.
    pub(crate) consistent_point: Lsn,
    /// The exported snapshot, for `SET TRANSACTION SNAPSHOT`.
    pub(crate) snapshot_name: String,
}

/// Step 1: a temporary slot exporting a snapshot.
pub(crate) async fn export(
    params: &ConnectParams,
    slot: &str,
) -> Result<ExportedSnapshot, ReplicationError> {
    let mut conn = ReplicationConnection::connect(params).await?;
    // At most 63 bytes, unique per process.
    let mut temporary_slot = format!("{slot}_snap_{}", std::process::id());
    temporary_slot.truncate(63);
    let (consistent_point, snapshot_name) = conn
        .create_temporary_slot_exporting_snapshot(&temporary_slot)
        .await?;
    Ok(ExportedSnapshot {
        _conn: conn,
        temporary_slot,
        consistent_point,
        snapshot_name,
    })
}

/// The outbox relation as the catalog describes it (pgoutput's Relation
/// message is not available before streaming).
pub(crate) async fn relation_info(
    client: &Client,
    schema: &str,
    table: &str,
) -> Result<RelationInfo, CatalogError> {
    let rows = client
        .query(
            "SELECT c.oid, a.attname::text, a.atttypid, a.atttypmod \
             FROM pg_catalog.pg_attribute a \
             JOIN pg_catalog.pg_class c ON c.oid = a.attrelid \
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped \
             ORDER BY a.attnum",
            &[&schema, &table],
        )
        .await
        .map_err(sql(format!("cannot read the columns of {schema}.{table}")))?;
    let id: u32 = rows.first().map(|r| r.get(0)).unwrap_or_default();
    Ok(RelationInfo {
        id,
        namespace: schema.to_owned(),
        name: table.to_owned(),
        replica_identity: b'd',
        columns: rows
            .iter()
            .map(|r| RelationColumnInfo {
                name: r.get(1),
                type_oid: r.get(2),
                type_modifier: r.get(3),
                is_key: false,
            })
            .collect(),
    })
}

/// Step 2: reads every row of each relation in `snapshot` (or, with
/// `None`, in one fresh repeatable-read snapshot), one relation after the
/// other, `FETCH_ROWS` at a time, as text values in the relation's column
/// order; `on_rows` gets each batch with the index of its relation.
pub(crate) async fn read_tables<F, Fut, E>(
    client: &Client,
    snapshot: Option<&str>,
    relations: &[Arc<RelationInfo>],
    mut on_rows: F,
) -> Result<u64, SnapshotError<E>>
where
    F: FnMut(usize, Vec<TupleData>) -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
{
    let mut begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;".to_owned();
    if let Some(name) = snapshot {
        begin.push_str(&format!(
            " SET TRANSACTION SNAPSHOT {};",
            quote_literal(name)
        ));
    }
    client
        .batch_execute(&begin)
        .await
        .map_err(|e| SnapshotError::Catalog(sql("cannot open the snapshot")(e)))?;
    let mut total = 0u64;
    for (index, relation) in relations.iter().enumerate() {
        total += read_relation(client, relation, |rows| on_rows(index, rows)).await?;
    }
    client
        .batch_execute("COMMIT")
        .await
        .map_err(|e| SnapshotError::Catalog(sql("cannot close the snapshot")(e)))?;
    Ok(total)
}

/// One relation of [`read_tables`], inside its transaction: a cursor over
/// every row, fetched `FETCH_ROWS` at a time, closed at the end.
async fn read_relation<F, Fut, E>(
    client: &Client,
    relation: &Arc<RelationInfo>,
    mut on_rows: F,
) -> Result<u64, SnapshotError<E>>
where
    F: FnMut(Vec<TupleData>) -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
{
    let schema = &relation.namespace;
    let table = &relation.name;
    let context = || format!("cannot read the snapshot of {schema}.{table}");
    let columns = relation
        .columns
        .iter()
        .map(|c| quote_ident(&c.name))
        .collect::<Vec<_>>()
        .join(", ");
    client
        .batch_execute(&format!(
            "DECLARE walrelay_snapshot NO SCROLL CURSOR FOR SELECT {columns} FROM {}.{}",
            quote_ident(schema),
            quote_ident(table)
        ))
        .await
        .map_err(|e| SnapshotError::Catalog(sql(context())(e)))?;
    let mut total = 0u64;
    loop {
        let messages = client
            .simple_query(&format!("FETCH {FETCH_ROWS} FROM walrelay_snapshot"))
            .await
            .map_err(|e| SnapshotError::Catalog(sql(context())(e)))?;
        let mut rows = Vec::with_capacity(FETCH_ROWS);
        for m in messages {
            if let SimpleQueryMessage::Row(row) = m {
                let columns = (0..row.len())
                    .map(|i| match row.get(i) {
                        Some(text) => ColumnValue::Text(Bytes::copy_from_slice(text.as_bytes())),
                        None => ColumnValue::Null,
                    })
                    .collect();
                rows.push(TupleData { columns });
            }
        }
        if rows.is_empty() {
            break;
        }
        total += rows.len() as u64;
        on_rows(rows).await.map_err(SnapshotError::Sink)?;
    }
    client
        .batch_execute("CLOSE walrelay_snapshot")
        .await
        .map_err(|e| SnapshotError::Catalog(sql(context())(e)))?;
    Ok(total)
}

/// Step 3: the permanent slot, a copy of the temporary one.
pub(crate) async fn persist(
    client: &Client,
    exported: &ExportedSnapshot,
    slot: &str,
) -> Result<(), CatalogError> {
    client
        .query_one(
            "SELECT pg_copy_logical_replication_slot($1, $2, false)",
            &[&exported.temporary_slot, &slot],
        )
        .await
        .map_err(sql(format!(
            "cannot create replication slot {slot} from the snapshot's temporary slot"
        )))?;
    Ok(())
}

/// Errors of reading a snapshot.
#[derive(Debug)]
pub(crate) enum SnapshotError<E> {
    /// The database side failed.
    Catalog(CatalogError),
    /// Handing rows on failed.
    Sink(E),
}
