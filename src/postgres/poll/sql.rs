//! Every SQL statement of the polling source, in one place, so another
//! database can follow by writing this module again: the claim, the mark
//! (or delete), the shard locks, the statistics, retention and replay, and
//! the catalog reads of `walrelay check`'s `[poll]` rows (columns, indexes,
//! privileges, lock holders).
//!
//! Owns the text of these statements and the parsing of their answers. It
//! runs nothing itself except through the small async helpers at the end,
//! and never decides when to run a statement.
//!
//! Rows are read with the simple query protocol, so every value arrives as
//! its type's text output, exactly as pgoutput sends it: the router sees
//! the same bytes from both sources. A claimed row is identified by its
//! `ctid` for the mark: the claim's `FOR UPDATE` lock keeps the row where it
//! is until the claiming transaction ends, and no key column is needed.

use bytes::Bytes;
use tokio_postgres::{Client, SimpleQueryMessage};
use walrelay_proto::pgoutput::{ColumnValue, TupleData};

use super::config::{OnPublish, PollConfig};
use crate::postgres::replication::{quote_ident, quote_literal};

/// How many of the next rows to be claimed the age of the oldest
/// unpublished row is read from.
pub(crate) const AGE_WINDOW: u32 = 1000;

/// Whether the server records commit times (`pg_xact_commit_timestamp`).
pub(crate) const COMMIT_TIMESTAMPS: &str = "SELECT current_setting('track_commit_timestamp')::bool";

/// The first of the two keys of the shard locks (`pg_try_advisory_lock(int,
/// int)`): a hash of this prefix and the lock name; the second key is the
/// shard number.
pub(crate) const LOCK_PREFIX: &str = "walrelay.poll:";

/// The statements of one outbox table and one `[poll]` section.
#[derive(Debug, Clone)]
pub(crate) struct PollSql {
    table: String,
    columns: String,
    unpublished: String,
    order: String,
    on_publish: OnPublish,
    published: String,
    shard_expr: String,
    shards: u32,
    batch_size: u32,
    lock_name: String,
    created: Option<String>,
}

/// One claimed row: its position for the mark, its inserting transaction,
/// and its values in the table's column order.
#[derive(Debug, Clone)]
pub(crate) struct ClaimedRow {
    /// `ctid` as text, `(page,item)`.
    pub(crate) ctid: String,
    /// `xmin`, the inserting transaction's id (32 bits, as pgoutput's xid).
    pub(crate) xmin: u32,
    /// The values, as text, in column order.
    pub(crate) tuple: TupleData,
}

impl PollSql {
    /// The statements for `schema.table` with `columns` (the table's
    /// columns in attribute order), `config`, and the shard column
    /// `shard_column`.
    pub(crate) fn new(
        schema: &str,
        table: &str,
        columns: &[String],
        config: &PollConfig,
        shard_column: &str,
    ) -> PollSql {
        let qualified = format!("{}.{}", quote_ident(schema), quote_ident(table));
        let published = quote_ident(&config.published_column);
        let unpublished = match config.on_publish {
            OnPublish::Mark => format!("{published} IS NULL"),
            OnPublish::Delete => "true".to_owned(),
        };
        let order = config
            .order_by
            .iter()
            .map(|c| quote_ident(c))
            .collect::<Vec<_>>()
            .join(", ");
        let lock_name = if config.lock_name.is_empty() {
            format!("{schema}.{table}")
        } else {
            config.lock_name.clone()
        };
        PollSql {
            columns: columns
                .iter()
                .map(|c| quote_ident(c))
                .collect::<Vec<_>>()
                .join(", "),
            table: qualified,
            unpublished,
            order,
            on_publish: config.on_publish,
            published,
            // A NULL key hashes to shard 0, so no row is left in no shard.
            shard_expr: format!(
                "abs(coalesce(hashtext({}::text), 0) % {})",
                quote_ident(shard_column),
                config.shards
            ),
            shards: config.shards,
            batch_size: config.batch_size,
            lock_name,
            created: (!config.created_column.is_empty())
                .then(|| quote_ident(&config.created_column)),
        }
    }

    /// The name the shard locks are derived from.
    pub(crate) fn lock_name(&self) -> &str {
        &self.lock_name
    }

    /// The quoted, qualified table.
    pub(crate) fn table(&self) -> &str {
        &self.table
    }

    fn shard_filter(&self, shard: u32) -> String {
        if self.shards <= 1 {
            String::new()
        } else {
            format!(" AND {} = {shard}", self.shard_expr)
        }
    }

    /// Opens the claiming transaction and claims up to `batch_size`
    /// unpublished rows of `shard`, oldest first, skipping rows another
    /// transaction holds. One round trip; the transaction stays open.
    ///
    /// `enable_sort = off` for the claim: between `LIMIT` and the sort sits
    /// `LockRows`, so a sort cannot stop at the first n rows, and where the
    /// statistics underestimate the unpublished rows (a table never
    /// analysed) the planner reads and sorts every unpublished row for each
    /// claim (measured: 68 ms against 0.8 ms for 1,000 of 100,000 rows).
    /// Without a sort, the index on the order columns is walked in order
    /// and stops after n rows; with no such index the sort is still used.
    pub(crate) fn claim(&self, shard: u32) -> String {
        format!(
            "BEGIN; SET LOCAL enable_sort = off; SELECT ctid::text, xmin::text, {cols} FROM {table} WHERE {unpub}{shard} \
             ORDER BY {order} LIMIT {n} FOR UPDATE SKIP LOCKED",
            cols = self.columns,
            table = self.table,
            unpub = self.unpublished,
            shard = self.shard_filter(shard),
            order = self.order,
            n = self.batch_size,
        )
    }

    /// Marks (or deletes) the claimed rows at `ctids` and commits. One round
    /// trip.
    pub(crate) fn finish(&self, ctids: &[String]) -> String {
        let array = tid_array(ctids);
        match self.on_publish {
            OnPublish::Mark => format!(
                "UPDATE {table} SET {published} = clock_timestamp() WHERE ctid = ANY({array}); \
                 COMMIT",
                table = self.table,
                published = self.published,
            ),
            OnPublish::Delete => format!(
                "DELETE FROM {table} WHERE ctid = ANY({array}); COMMIT",
                table = self.table,
            ),
        }
    }

    /// Takes shard `shard`'s lock if it is free; answers `t` or `f`.
    pub(crate) fn try_lock(&self, shard: u32) -> String {
        format!(
            "SELECT pg_try_advisory_lock(hashtext({}), {shard})",
            quote_literal(&format!("{LOCK_PREFIX}{}", self.lock_name))
        )
    }

    /// The backends holding each shard's lock: rows of (shard, pid,
    /// application_name).
    pub(crate) fn lock_holders(&self) -> String {
        format!(
            "SELECT l.objid::int, l.pid, coalesce(a.application_name, '') \
             FROM pg_catalog.pg_locks l \
             LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid \
             WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 \
               AND l.database = (SELECT oid FROM pg_catalog.pg_database \
                                 WHERE datname = current_database()) \
               AND l.classid::int = hashtext({}) \
             ORDER BY 1",
            quote_literal(&format!("{LOCK_PREFIX}{}", self.lock_name))
        )
    }

    /// The unpublished rows: their count, the identity (`ctid/xmin`) of the
    /// oldest in claim order, and the age in seconds of the oldest among
    /// the next [`AGE_WINDOW`] to be claimed: by `poll.created_column`, or
    /// with `commit_timestamps` (`track_commit_timestamp = on`) by their
    /// transactions' commit times, or NULL (walrelay then measures from when
    /// it first saw the oldest row).
    pub(crate) fn stats(&self, commit_timestamps: bool) -> String {
        let time = match &self.created {
            Some(c) => Some(c.clone()),
            None if commit_timestamps => {
                Some("pg_catalog.pg_xact_commit_timestamp(xmin)".to_owned())
            }
            None => None,
        };
        // The window keeps the read bounded however long the backlog: the
        // oldest rows are at the front of the claim order.
        let age = match time {
            Some(time) => format!(
                "(SELECT extract(epoch FROM clock_timestamp() - min(t))::float8::text \
                 FROM (SELECT {time} AS t FROM {table} WHERE {u} ORDER BY {o} LIMIT {AGE_WINDOW}) w)",
                table = self.table,
                u = self.unpublished,
                o = self.order,
            ),
            None => "NULL".to_owned(),
        };
        format!(
            "SELECT (SELECT count(*) FROM {t} WHERE {u}), \
             (SELECT ctid::text || '/' || xmin::text FROM {t} WHERE {u} ORDER BY {o} LIMIT 1), \
             {age}",
            t = self.table,
            u = self.unpublished,
            o = self.order,
        )
    }

    /// Deletes up to `batch` published rows marked more than `seconds`
    /// ago, skipping rows in use; answers with the rows deleted.
    pub(crate) fn retention(&self, seconds: u64, batch: u32) -> String {
        format!(
            "DELETE FROM {t} WHERE ctid = ANY(ARRAY(SELECT ctid FROM {t} \
             WHERE {p} < clock_timestamp() - make_interval(secs => {seconds}) \
             LIMIT {batch} FOR UPDATE SKIP LOCKED))",
            t = self.table,
            p = self.published,
        )
    }

    /// The published rows matching `condition` (an operator's SQL
    /// condition, in parentheses): counted.
    pub(crate) fn replay_count(&self, condition: &str) -> String {
        format!(
            "SELECT count(*) FROM {t} WHERE {p} IS NOT NULL AND ({condition})",
            t = self.table,
            p = self.published,
        )
    }

    /// The published rows matching `condition`: unpublished again.
    pub(crate) fn replay(&self, condition: &str) -> String {
        format!(
            "UPDATE {t} SET {p} = NULL WHERE {p} IS NOT NULL AND ({condition})",
            t = self.table,
            p = self.published,
        )
    }

    /// The condition `--since` stands for: published at or after `since`
    /// (a timestamp PostgreSQL parses).
    pub(crate) fn since_condition(&self, since: &str) -> String {
        format!(
            "{} >= {}::timestamptz",
            self.published,
            quote_literal(since)
        )
    }

    /// The index a claim wants: on the order columns, and in mark mode only
    /// over the unpublished rows, so a claim reads no published row. Built
    /// `CONCURRENTLY`, so writers to the outbox are not blocked meanwhile.
    pub(crate) fn claim_index(&self) -> String {
        let predicate = match self.on_publish {
            OnPublish::Mark => format!(" WHERE {}", self.unpublished),
            OnPublish::Delete => String::new(),
        };
        format!(
            "CREATE INDEX CONCURRENTLY ON {t} ({o}){predicate}",
            t = self.table,
            o = self.order,
        )
    }
}

/// The columns of the table with OID `$1` (not dropped), in column order:
/// name, type OID, type modifier, `NOT NULL`, `format_type`'s spelling, the
/// default expression, and whether it is an identity column. Generated
/// columns are included: the claim reads them like any other.
pub(crate) const TABLE_COLUMNS: &str =
    "SELECT a.attname::text, a.atttypid, a.atttypmod, a.attnotnull, \
     format_type(a.atttypid, a.atttypmod), pg_get_expr(d.adbin, d.adrelid), a.attidentity <> '' \
     FROM pg_catalog.pg_attribute a \
     LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum \
     WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped \
     ORDER BY a.attnum";

/// The valid btree indexes of the table with OID `$1`: name, key columns in
/// order (NULL for an expression; `INCLUDE` columns left out), the
/// predicate of a partial index, and whether that predicate is exactly
/// `<$2> IS NULL` (`$2` the published column; `format`'s `%I` quotes as
/// `pg_get_expr` does).
pub(crate) const TABLE_INDEXES: &str = "SELECT c.relname::text, \
     ARRAY(SELECT a.attname::text FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, n) \
           LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum \
           WHERE k.n <= i.indnkeyatts ORDER BY k.n), \
     pg_get_expr(i.indpred, i.indrelid), \
     coalesce(pg_get_expr(i.indpred, i.indrelid) = format('(%I IS NULL)', $2::text), false) \
     FROM pg_catalog.pg_index i \
     JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid \
     JOIN pg_catalog.pg_am am ON am.oid = c.relam \
     WHERE i.indrelid = $1 AND i.indisvalid AND am.amname = 'btree' \
     ORDER BY 1";

/// The current role's privileges on the table with OID `$1`: `SELECT`,
/// `DELETE`, `UPDATE` on any column (what the claim's `FOR UPDATE` needs),
/// and `UPDATE` on column `$2` (the published column; NULL when the table
/// has no such column).
pub(crate) const TABLE_PRIVILEGES: &str = "SELECT has_table_privilege($1::oid, 'SELECT'), \
     has_table_privilege($1::oid, 'DELETE'), has_any_column_privilege($1::oid, 'UPDATE'), \
     (SELECT has_column_privilege($1::oid, a.attnum, 'UPDATE') FROM pg_catalog.pg_attribute a \
      WHERE a.attrelid = $1::oid AND a.attname = $2::text AND a.attnum > 0 \
        AND NOT a.attisdropped)";

/// One column of the outbox table, as `walrelay check` judges the `[poll]`
/// columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableColumn {
    /// Column name.
    pub(crate) name: String,
    /// OID of its type.
    pub(crate) type_oid: u32,
    /// Type modifier, -1 when none.
    pub(crate) type_modifier: i32,
    pub(crate) not_null: bool,
    /// The declared type, `format_type`'s spelling.
    pub(crate) type_name: String,
    /// The default expression, if any (`nextval(...)`, `now()`, ...).
    pub(crate) default_expr: Option<String>,
    /// `GENERATED ... AS IDENTITY`.
    pub(crate) identity: bool,
}

/// One valid btree index of the outbox table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableIndex {
    /// Index name.
    pub(crate) name: String,
    /// Key columns in order; `None` for an expression.
    pub(crate) columns: Vec<Option<String>>,
    /// The predicate of a partial index, as `pg_get_expr` prints it.
    pub(crate) predicate: Option<String>,
    /// Whether the predicate is exactly "the published column IS NULL".
    pub(crate) unpublished_only: bool,
}

/// The connected role's privileges on the outbox table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TablePrivileges {
    /// `SELECT` on the table.
    pub(crate) select: bool,
    /// `DELETE` on the table.
    pub(crate) delete: bool,
    /// `UPDATE` on at least one column.
    pub(crate) update_any: bool,
    /// `UPDATE` on the published column; `None` when it does not exist.
    pub(crate) update_published: Option<bool>,
}

/// A backend holding one shard's lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LockHolder {
    pub(crate) shard: u32,
    /// The backend's pid.
    pub(crate) pid: i32,
    /// Its `application_name` (empty when unset or not visible).
    pub(crate) application_name: String,
}

/// `'{"(0,1)","(0,2)"}'::tid[]` from the server's own ctid texts.
fn tid_array(ctids: &[String]) -> String {
    let mut array = String::with_capacity(ctids.len() * 12 + 16);
    array.push('{');
    for (i, ctid) in ctids.iter().enumerate() {
        if i > 0 {
            array.push(',');
        }
        array.push('"');
        array.push_str(ctid);
        array.push('"');
    }
    array.push('}');
    format!("{}::tid[]", quote_literal(&array))
}

/// The rows of a claim's answer. `None`: a row without its ctid or xmin,
/// which the server never sends for this statement.
pub(crate) fn claimed_rows(messages: Vec<SimpleQueryMessage>) -> Option<Vec<ClaimedRow>> {
    let mut rows = Vec::new();
    for m in messages {
        if let SimpleQueryMessage::Row(row) = m {
            let ctid = row.get(0)?.to_owned();
            let xmin = row.get(1)?.parse().ok()?;
            let columns = (2..row.len())
                .map(|i| match row.get(i) {
                    Some(text) => ColumnValue::Text(Bytes::copy_from_slice(text.as_bytes())),
                    None => ColumnValue::Null,
                })
                .collect();
            rows.push(ClaimedRow {
                ctid,
                xmin,
                tuple: TupleData { columns },
            });
        }
    }
    Some(rows)
}

/// The row count of the last command of a simple query's answer.
pub(crate) fn affected(messages: &[SimpleQueryMessage]) -> u64 {
    messages
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::CommandComplete(n) => Some(*n),
            _ => None,
        })
        .next()
        .unwrap_or(0)
}

/// The first value of the first row, if any.
pub(crate) fn first_value(messages: &[SimpleQueryMessage]) -> Option<Vec<Option<String>>> {
    messages.iter().find_map(|m| match m {
        SimpleQueryMessage::Row(row) => Some(
            (0..row.len())
                .map(|i| row.get(i).map(str::to_owned))
                .collect(),
        ),
        _ => None,
    })
}

/// Runs one simple query.
pub(crate) async fn run(
    client: &Client,
    sql: &str,
) -> Result<Vec<SimpleQueryMessage>, tokio_postgres::Error> {
    client.simple_query(sql).await
}

/// [`TABLE_COLUMNS`] of the table with OID `table_oid`.
pub(crate) async fn table_columns(
    client: &Client,
    table_oid: u32,
) -> Result<Vec<TableColumn>, tokio_postgres::Error> {
    let rows = client.query(TABLE_COLUMNS, &[&table_oid]).await?;
    Ok(rows
        .iter()
        .map(|r| TableColumn {
            name: r.get(0),
            type_oid: r.get(1),
            type_modifier: r.get(2),
            not_null: r.get(3),
            type_name: r.get(4),
            default_expr: r.get(5),
            identity: r.get(6),
        })
        .collect())
}

/// [`TABLE_INDEXES`] of the table with OID `table_oid`, judged against the
/// published column `published`.
pub(crate) async fn table_indexes(
    client: &Client,
    table_oid: u32,
    published: &str,
) -> Result<Vec<TableIndex>, tokio_postgres::Error> {
    let rows = client
        .query(TABLE_INDEXES, &[&table_oid, &published])
        .await?;
    Ok(rows
        .iter()
        .map(|r| TableIndex {
            name: r.get(0),
            columns: r.get(1),
            predicate: r.get(2),
            unpublished_only: r.get(3),
        })
        .collect())
}

/// [`TABLE_PRIVILEGES`] of the current role on the table with OID
/// `table_oid`, with `published` as the published column.
pub(crate) async fn table_privileges(
    client: &Client,
    table_oid: u32,
    published: &str,
) -> Result<TablePrivileges, tokio_postgres::Error> {
    let row = client
        .query_one(TABLE_PRIVILEGES, &[&table_oid, &published])
        .await?;
    Ok(TablePrivileges {
        select: row.get(0),
        delete: row.get(1),
        update_any: row.get(2),
        update_published: row.get(3),
    })
}

/// Who holds the shard locks of `sql` now ([`PollSql::lock_holders`]);
/// reads `pg_locks`, takes no lock.
pub(crate) async fn lock_holders(
    client: &Client,
    sql: &PollSql,
) -> Result<Vec<LockHolder>, tokio_postgres::Error> {
    let rows = client.query(&sql.lock_holders(), &[]).await?;
    Ok(rows
        .iter()
        .filter_map(|r| {
            Some(LockHolder {
                shard: u32::try_from(r.get::<_, i32>(0)).ok()?,
                pid: r.get(1),
                application_name: r.get(2),
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sql(config: PollConfig) -> PollSql {
        PollSql::new(
            "public",
            "Outbox",
            &["id".into(), "aggregateid".into(), "published_at".into()],
            &config,
            "aggregateid",
        )
    }

    fn ordered() -> PollConfig {
        PollConfig {
            order_by: vec!["seq".into(), "id".into()],
            ..PollConfig::default()
        }
    }

    #[test]
    fn claim_orders_locks_and_skips() {
        let s = sql(ordered()).claim(0);
        assert_eq!(
            s,
            "BEGIN; SET LOCAL enable_sort = off; \
             SELECT ctid::text, xmin::text, \"id\", \"aggregateid\", \"published_at\" \
             FROM \"public\".\"Outbox\" WHERE \"published_at\" IS NULL \
             ORDER BY \"seq\", \"id\" LIMIT 1000 FOR UPDATE SKIP LOCKED"
        );
    }

    #[test]
    fn shards_filter_by_hash_of_the_key() {
        let s = sql(PollConfig {
            shards: 4,
            ..ordered()
        })
        .claim(3);
        assert!(
            s.contains("AND abs(coalesce(hashtext(\"aggregateid\"::text), 0) % 4) = 3"),
            "{s}"
        );
    }

    #[test]
    fn finish_marks_or_deletes_by_ctid_and_commits() {
        let ctids = vec!["(0,1)".to_owned(), "(12,40)".to_owned()];
        assert_eq!(
            sql(ordered()).finish(&ctids),
            "UPDATE \"public\".\"Outbox\" SET \"published_at\" = clock_timestamp() \
             WHERE ctid = ANY('{\"(0,1)\",\"(12,40)\"}'::tid[]); COMMIT"
        );
        let delete = sql(PollConfig {
            on_publish: OnPublish::Delete,
            ..ordered()
        });
        assert_eq!(
            delete.finish(&ctids),
            "DELETE FROM \"public\".\"Outbox\" WHERE ctid = ANY('{\"(0,1)\",\"(12,40)\"}'::tid[]); COMMIT"
        );
        assert!(delete.claim(0).contains("WHERE true"));
    }

    #[test]
    fn the_age_comes_from_the_created_column_or_commit_times() {
        let plain = sql(ordered());
        let no_time = plain.stats(false);
        assert!(no_time.ends_with(", NULL"), "{no_time}");
        assert!(no_time.contains(
            "(SELECT count(*) FROM \"public\".\"Outbox\" WHERE \"published_at\" IS NULL)"
        ));
        let commit = plain.stats(true);
        assert!(
            commit.contains(
                "min(t))::float8::text FROM (SELECT pg_catalog.pg_xact_commit_timestamp(xmin) AS t \
                 FROM \"public\".\"Outbox\" WHERE \"published_at\" IS NULL ORDER BY \"seq\", \"id\" LIMIT 1000) w"
            ),
            "{commit}"
        );
        // The created column wins over commit times.
        let created = sql(PollConfig {
            created_column: "created_at".into(),
            ..ordered()
        })
        .stats(true);
        assert!(
            created.contains("(SELECT \"created_at\" AS t FROM"),
            "{created}"
        );
        assert!(!created.contains("pg_xact_commit_timestamp"), "{created}");
    }

    #[test]
    fn lock_keys_quote_the_name() {
        let s = sql(PollConfig {
            lock_name: "it's".into(),
            ..ordered()
        });
        assert_eq!(
            s.try_lock(2),
            "SELECT pg_try_advisory_lock(hashtext('walrelay.poll:it''s'), 2)"
        );
        assert_eq!(sql(ordered()).lock_name(), "public.Outbox");
    }

    #[test]
    fn claim_index_covers_the_claim() {
        assert_eq!(
            sql(ordered()).claim_index(),
            "CREATE INDEX CONCURRENTLY ON \"public\".\"Outbox\" (\"seq\", \"id\") \
             WHERE \"published_at\" IS NULL"
        );
        let delete = sql(PollConfig {
            on_publish: OnPublish::Delete,
            ..ordered()
        });
        assert_eq!(
            delete.claim_index(),
            "CREATE INDEX CONCURRENTLY ON \"public\".\"Outbox\" (\"seq\", \"id\")"
        );
    }

    #[test]
    fn catalog_reads_take_their_names_as_parameters() {
        // Names reach these statements as bind parameters, never as text.
        for (statement, params) in [
            (TABLE_COLUMNS, 1),
            (TABLE_INDEXES, 2),
            (TABLE_PRIVILEGES, 2),
        ] {
            assert!(statement.contains(&format!("${params}")), "{statement}");
            assert!(
                !statement.contains(&format!("${}", params + 1)),
                "{statement}"
            );
            assert!(!statement.contains(';'), "{statement}");
        }
        assert!(TABLE_INDEXES.contains("format('(%I IS NULL)', $2::text)"));
        assert!(TABLE_INDEXES.contains("k.n <= i.indnkeyatts"));
        assert!(TABLE_PRIVILEGES.contains("has_any_column_privilege($1::oid, 'UPDATE')"));
    }

    #[test]
    fn lock_holders_read_the_shard_locks_of_the_lock_name() {
        let s = sql(PollConfig {
            lock_name: "orders".into(),
            ..ordered()
        })
        .lock_holders();
        assert!(s.contains("hashtext('walrelay.poll:orders')"), "{s}");
        assert!(s.contains("l.locktype = 'advisory' AND l.granted"), "{s}");
        assert!(
            !s.contains("pg_try_advisory_lock") && !s.contains("pg_advisory_lock"),
            "{s}"
        );
    }

    #[test]
    fn replay_since_quotes_the_timestamp() {
        let s = sql(ordered());
        let cond = s.since_condition("2026-01-01'; DROP TABLE x; --");
        assert_eq!(
            cond,
            "\"published_at\" >= '2026-01-01''; DROP TABLE x; --'::timestamptz"
        );
        assert!(s.replay(&cond).starts_with(
            "UPDATE \"public\".\"Outbox\" SET \"published_at\" = NULL WHERE \"published_at\" IS NOT NULL AND ("
        ));
    }
}
