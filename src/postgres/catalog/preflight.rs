//! The statements `walrelay check` runs: server settings, the role's
//! attributes, slot and WAL sender capacity, the outbox table (its access,
//! its columns, its route values) and the publication, each read as the
//! preflight judges it.
//!
//! Never changes anything: every statement here is a read-only catalog
//! query, `SHOW` or bounded `SELECT`, except the session's own
//! `SET statement_timeout`, which touches only the preflight's connection.
//! Nothing here creates, alters or drops a slot, a publication, a table or a
//! setting; the statements that do belong to the relay and live in the
//! parent module. Each function hands back the driver's error as is: the
//! caller bounds the round trip and words the failure. Names from
//! configuration reach SQL as bind parameters or through [`quote_ident`].

use std::time::Duration;

use tokio_postgres::Client;

use crate::postgres::replication::quote_ident;

/// `server_version` as the server shows it, e.g. `16.4 (Debian 16.4-1)`.
pub(crate) async fn server_version(client: &Client) -> Result<String, tokio_postgres::Error> {
    Ok(client.query_one("SHOW server_version", &[]).await?.get(0))
}

/// Bounds every later statement of this session on the server side too:
/// `SET statement_timeout` to `after` in whole milliseconds, at least 1 (0
/// would lift the bound). Changes this connection's session only.
pub(crate) async fn set_statement_timeout(
    client: &Client,
    after: Duration,
) -> Result<(), tokio_postgres::Error> {
    client.batch_execute(&statement_timeout_sql(after)).await
}

fn statement_timeout_sql(after: Duration) -> String {
    let ms = after.as_millis().max(1);
    format!("SET statement_timeout = {ms}")
}

/// What the connected server is: `(pg_is_in_recovery(), transaction_read_only)`,
/// a standby and a read-only session respectively.
pub(crate) async fn server_role(client: &Client) -> Result<(bool, bool), tokio_postgres::Error> {
    let row = client
        .query_one(
            "SELECT pg_catalog.pg_is_in_recovery(), current_setting('transaction_read_only') = 'on'",
            &[],
        )
        .await?;
    Ok((row.get(0), row.get(1)))
}

/// `wal_level` as the server shows it (`replica`, `logical`, ...).
pub(crate) async fn wal_level(client: &Client) -> Result<String, tokio_postgres::Error> {
    Ok(client.query_one("SHOW wal_level", &[]).await?.get(0))
}

/// Whether the server's library directory (`PKGLIBDIR`) holds pgoutput.
/// Superuser only (`pg_config` and `pg_ls_dir`).
pub(crate) async fn pgoutput_installed(client: &Client) -> Result<bool, tokio_postgres::Error> {
    Ok(client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_ls_dir(
                 (SELECT setting FROM pg_catalog.pg_config WHERE name = 'PKGLIBDIR')) f
               WHERE f ~ '^pgoutput\\.')",
            &[],
        )
        .await?
        .get(0))
}

/// The attributes of the connected role that decide whether it may stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RoleAttributes {
    /// `rolreplication`: the role may start a walsender.
    pub(crate) replication: bool,
    /// `rolsuper`.
    pub(crate) superuser: bool,
}

/// The connected role's (`current_user`) attributes from `pg_roles`; `None`
/// when the role is not listed there.
pub(crate) async fn role_attributes(
    client: &Client,
) -> Result<Option<RoleAttributes>, tokio_postgres::Error> {
    let row = client
        .query_opt(
            "SELECT rolreplication, rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user",
            &[],
        )
        .await?;
    Ok(row.map(|r| RoleAttributes {
        replication: r.get(0),
        superuser: r.get(1),
    }))
}

/// Replication slots and WAL senders: configured, in use, and whether the
/// slot walrelay uses is among the slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReplicationCapacity {
    /// `max_replication_slots`.
    pub(crate) max_slots: i32,
    /// Slots in `pg_replication_slots`.
    pub(crate) used_slots: i32,
    /// Whether the slot asked about is one of them.
    pub(crate) slot_exists: bool,
    pub(crate) max_wal_senders: i32,
    /// Walsenders in `pg_stat_replication`, without the one left out.
    pub(crate) used_wal_senders: i32,
}

/// Slot and WAL sender capacity in one round trip. `slot` is the slot to
/// look for; walsenders whose `application_name` is `except_application`
/// (the preflight's own replication connection, which may not have exited
/// yet) are not counted.
pub(crate) async fn replication_capacity(
    client: &Client,
    slot: &str,
    except_application: &str,
) -> Result<ReplicationCapacity, tokio_postgres::Error> {
    let row = client
        .query_one(
            "SELECT current_setting('max_replication_slots')::int4,
                    (SELECT count(*) FROM pg_catalog.pg_replication_slots)::int4,
                    EXISTS (SELECT 1 FROM pg_catalog.pg_replication_slots WHERE slot_name = $1),
                    current_setting('max_wal_senders')::int4,
                    (SELECT count(*) FROM pg_catalog.pg_stat_replication
                      WHERE application_name IS DISTINCT FROM $2)::int4",
            &[&slot, &except_application],
        )
        .await?;
    Ok(ReplicationCapacity {
        max_slots: row.get(0),
        used_slots: row.get(1),
        slot_exists: row.get(2),
        max_wal_senders: row.get(3),
        used_wal_senders: row.get(4),
    })
}

/// The outbox table as the catalog describes it, with what the connected
/// role may do with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OutboxTable {
    /// The table's OID (what pgoutput's Relation message carries).
    pub(crate) oid: u32,
    /// `SELECT` on the table.
    pub(crate) can_select: bool,
    /// Whether the role is (a member of) the table's owner.
    pub(crate) owns: bool,
    /// `CREATE` on the current database (needed to create a publication).
    pub(crate) can_create_in_db: bool,
}

/// The ordinary or partitioned table `schema.table`; `None` when there is
/// none (or the name is another kind of relation).
pub(crate) async fn outbox_table(
    client: &Client,
    schema: &str,
    table: &str,
) -> Result<Option<OutboxTable>, tokio_postgres::Error> {
    let row = client
        .query_opt(
            "SELECT c.oid, has_table_privilege(c.oid, 'SELECT'), pg_has_role(c.relowner, 'USAGE'),
                    has_database_privilege(current_database(), 'CREATE')
             FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')",
            &[&schema, &table],
        )
        .await?;
    Ok(row.map(|r| OutboxTable {
        oid: r.get(0),
        can_select: r.get(1),
        owns: r.get(2),
        can_create_in_db: r.get(3),
    }))
}

/// One column of the outbox table, as pgoutput would describe it plus what
/// it does not send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OutboxColumn {
    /// Column name.
    pub(crate) name: String,
    /// OID of its type.
    pub(crate) type_oid: u32,
    /// Type modifier, -1 when none.
    pub(crate) type_modifier: i32,
    pub(crate) not_null: bool,
    /// The declared type, `format_type`'s spelling.
    pub(crate) type_name: String,
    /// The default expression, if any.
    pub(crate) default_expr: Option<String>,
}

/// The columns of the table with OID `table_oid` that pgoutput publishes
/// (not dropped, not generated), in column order.
pub(crate) async fn outbox_columns(
    client: &Client,
    table_oid: u32,
) -> Result<Vec<OutboxColumn>, tokio_postgres::Error> {
    let rows = client
        .query(
            "SELECT a.attname::text, a.atttypid, a.atttypmod, a.attnotnull,
                    format_type(a.atttypid, a.atttypmod), pg_get_expr(d.adbin, d.adrelid)
             FROM pg_catalog.pg_attribute a
             LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
             WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
             ORDER BY a.attnum",
            &[&table_oid],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| OutboxColumn {
            name: r.get(0),
            type_oid: r.get(1),
            type_modifier: r.get(2),
            not_null: r.get(3),
            type_name: r.get(4),
            default_expr: r.get(5),
        })
        .collect())
}

/// The names of the columns publication `publication` sends for
/// `schema.table` (`attnames` of `pg_publication_tables`); `None` when the
/// table is not in the publication or no names are listed. Servers before
/// PostgreSQL 15 have no `attnames` and answer with an error.
pub(crate) async fn published_columns(
    client: &Client,
    publication: &str,
    schema: &str,
    table: &str,
) -> Result<Option<Vec<String>>, tokio_postgres::Error> {
    let row = client
        .query_opt(
            "SELECT attnames::text[] FROM pg_catalog.pg_publication_tables
             WHERE pubname = $1 AND schemaname = $2 AND tablename = $3",
            &[&publication, &schema, &table],
        )
        .await?;
    Ok(row.and_then(|r| r.get::<_, Option<Vec<String>>>(0)))
}

/// Distinct non-null values of column `column` in `schema.table`, as text,
/// at most `limit` of them. The three names are quoted into the statement
/// with [`quote_ident`].
pub(crate) async fn route_values(
    client: &Client,
    schema: &str,
    table: &str,
    column: &str,
    limit: i64,
) -> Result<Vec<String>, tokio_postgres::Error> {
    let rows = client
        .query(&route_values_sql(schema, table, column, limit), &[])
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

fn route_values_sql(schema: &str, table: &str, column: &str, limit: i64) -> String {
    let route = quote_ident(column);
    format!(
        "SELECT DISTINCT {route}::text FROM {}.{} WHERE {route} IS NOT NULL LIMIT {limit}",
        quote_ident(schema),
        quote_ident(table)
    )
}

/// A publication as the preflight judges it against the outbox table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PublicationState {
    /// `pubinsert`: it publishes inserts.
    pub(crate) publishes_inserts: bool,
    /// `pubupdate`: it publishes updates.
    pub(crate) publishes_updates: bool,
    /// `pubdelete`: it publishes deletes.
    pub(crate) publishes_deletes: bool,
    /// `pubtruncate`: it publishes truncates.
    pub(crate) publishes_truncates: bool,
    /// `puballtables`: it is `FOR ALL TABLES`.
    pub(crate) all_tables: bool,
    /// Whether the role is (a member of) its owner.
    pub(crate) owned: bool,
    /// Whether the table asked about is among its tables.
    pub(crate) includes_table: bool,
    /// How many tables it publishes.
    pub(crate) table_count: i32,
}

/// Publication `publication` and whether it carries `schema.table`; `None`
/// when it does not exist.
pub(crate) async fn publication_state(
    client: &Client,
    publication: &str,
    schema: &str,
    table: &str,
) -> Result<Option<PublicationState>, tokio_postgres::Error> {
    let row = client
        .query_opt(
            "SELECT p.pubinsert, p.puballtables, pg_has_role(p.pubowner, 'USAGE'),
                    EXISTS (SELECT 1 FROM pg_catalog.pg_publication_tables t
                            WHERE t.pubname = p.pubname AND t.schemaname = $2 AND t.tablename = $3),
                    (SELECT count(*) FROM pg_catalog.pg_publication_tables t WHERE t.pubname = p.pubname)::int4,
                    p.pubupdate, p.pubdelete, p.pubtruncate
             FROM pg_catalog.pg_publication p WHERE p.pubname = $1",
            &[&publication, &schema, &table],
        )
        .await?;
    Ok(row.map(|r| PublicationState {
        publishes_inserts: r.get(0),
        publishes_updates: r.get(5),
        publishes_deletes: r.get(6),
        publishes_truncates: r.get(7),
        all_tables: r.get(1),
        owned: r.get(2),
        includes_table: r.get(3),
        table_count: r.get(4),
    }))
}

/// A physical replication slot on the primary (a standby's, normally).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PhysicalSlot {
    /// Slot name.
    pub(crate) name: String,
    /// Whether a walsender (the standby's walreceiver) holds it.
    pub(crate) active: bool,
}

/// What the primary shows about keeping failover slots on standbys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FailoverReadiness {
    /// `synchronized_standby_slots` as set (`None` before PostgreSQL 17).
    pub(crate) standby_slots: Option<String>,
    /// The physical slots, by name.
    pub(crate) physical_slots: Vec<PhysicalSlot>,
    /// `application_name` of every standby's slot sync worker connected to
    /// this server.
    pub(crate) slot_sync_connections: Vec<String>,
}

/// Recognises a standby's slot sync worker among this server's sessions.
/// It is an ordinary (not walsender) connection to the database named in
/// the standby's `primary_conninfo`, called `slotsync worker` or
/// `<cluster_name>_slotsync worker` (PostgreSQL 17 and 18; `slotsyncworker`
/// in early 17 builds) unless `primary_conninfo` sets an application_name,
/// which then equals that of the standby's walreceiver holding a physical
/// slot. `application_name`, `datname` and `pg_replication_slots` are
/// visible to every role.
const SLOT_SYNC_CONNECTIONS_SQL: &str = "\
    SELECT a.application_name::text FROM pg_catalog.pg_stat_activity a
     WHERE a.datname IS NOT NULL AND a.pid <> pg_backend_pid()
       AND a.backend_type IS DISTINCT FROM 'walsender'
       AND (a.application_name ~ '(^|_)slotsync ?worker$'
            OR (a.application_name <> '' AND a.application_name IN (
                  SELECT w.application_name FROM pg_catalog.pg_stat_activity w
                    JOIN pg_catalog.pg_replication_slots s ON s.active_pid = w.pid
                   WHERE s.slot_type = 'physical')))
     ORDER BY 1";

/// `synchronized_standby_slots`, the physical slots and the standbys'
/// slot sync connections, as the primary sees them.
pub(crate) async fn failover_readiness(
    client: &Client,
) -> Result<FailoverReadiness, tokio_postgres::Error> {
    let standby_slots: Option<String> = client
        .query_one(
            "SELECT current_setting('synchronized_standby_slots', true)",
            &[],
        )
        .await?
        .get(0);
    let physical_slots = client
        .query(
            "SELECT slot_name::text, active FROM pg_catalog.pg_replication_slots
              WHERE slot_type = 'physical' ORDER BY 1",
            &[],
        )
        .await?
        .iter()
        .map(|r| PhysicalSlot {
            name: r.get(0),
            active: r.get(1),
        })
        .collect();
    let slot_sync_connections = client
        .query(SLOT_SYNC_CONNECTIONS_SQL, &[])
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    Ok(FailoverReadiness {
        standby_slots,
        physical_slots,
        slot_sync_connections,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statement_timeout_is_whole_milliseconds_and_never_zero() {
        assert_eq!(
            statement_timeout_sql(Duration::from_secs(5)),
            "SET statement_timeout = 5000"
        );
        assert_eq!(
            statement_timeout_sql(Duration::from_micros(1500)),
            "SET statement_timeout = 1"
        );
        assert_eq!(
            statement_timeout_sql(Duration::ZERO),
            "SET statement_timeout = 1"
        );
    }

    #[test]
    fn route_values_quote_every_name() {
        assert_eq!(
            route_values_sql("public", "outbox", "aggregatetype", 100),
            "SELECT DISTINCT \"aggregatetype\"::text FROM \"public\".\"outbox\" \
             WHERE \"aggregatetype\" IS NOT NULL LIMIT 100"
        );
        assert_eq!(
            route_values_sql("My Schema", "out\"box", "Route", 7),
            "SELECT DISTINCT \"Route\"::text FROM \"My Schema\".\"out\"\"box\" \
             WHERE \"Route\" IS NOT NULL LIMIT 7"
        );
    }
}
