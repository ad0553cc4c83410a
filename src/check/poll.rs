//! The polling source's rows (`source.kind = "poll"`), in their order: the
//! server (it takes writes; no pgoutput, slot, publication or logical WAL
//! needed), the outbox table bound to the router, the claim's rows (from
//! `claim`), the privileges its statements need and who holds each shard
//! lock. It must never write, claim a row or take a shard lock: every
//! statement is a catalog read from [`poll_sql`], and the locks are only
//! looked up in `pg_locks`.

use std::time::Duration;

use tokio_postgres::Client;

use super::claim::{claim_index_row, poll_column_rows};
use super::columns::{bind_columns, outbox_facts, read_route_values, RouteValues};
use super::report::{
    CheckReport, CLAIM_INDEX, CLAIM_ORDER, OUTBOX_PRIVILEGES, OUTBOX_TABLE, POLL_COLUMNS,
    POLL_SOURCE, PUBLISHED_COLUMN, SERVER_VERSION, SHARD_LOCKS,
};
use super::step::{read, CheckError};
use crate::chain::DisplayChain;
use crate::config::Config;
use crate::postgres::catalog::capability::ServerFacts;
use crate::postgres::catalog::preflight;
use crate::postgres::poll::config::{OnPublish, PollConfig};
use crate::postgres::poll::sql::{
    self as poll_sql, LockHolder, PollSql, TableColumn, TablePrivileges,
};
use crate::postgres::replication::quote_ident;
use crate::txn::config::OutboxTableSpec;

/// The PostgreSQL rows of the polling source (`source.kind = "poll"`): no
/// replication connection, slot, publication or `wal_level = logical`;
/// instead a server that takes writes, the outbox table and the router's
/// columns, the `[poll]` columns, the claim's order and index, the
/// privileges its statements need, and the shard locks. Returns the route
/// values for the topic check.
pub(super) async fn check_poll(
    report: &mut CheckReport,
    config: &Config,
    client: &Client,
    timeout: Duration,
    server: &Result<ServerFacts, CheckError>,
    spec: &OutboxTableSpec,
) -> RouteValues {
    let poll = &config.poll;
    let qualified = spec.qualified();
    let key_field = spec
        .columns
        .key_field
        .clone()
        .unwrap_or_else(|| config.router.key_field.clone());
    let shard_column = poll.shard_column_or(&key_field);
    let sql = PollSql::new(&spec.schema, &spec.table, &[], poll, shard_column);
    server_rows(report, config, client, timeout, server, &sql).await;
    let Some((table_oid, columns)) = table_columns(report, config, client, timeout, spec).await
    else {
        let after_table = [
            POLL_COLUMNS,
            PUBLISHED_COLUMN,
            CLAIM_ORDER,
            CLAIM_INDEX,
            OUTBOX_PRIVILEGES,
        ];
        for name in after_table {
            report.skip(name, "the outbox table was not found");
        }
        let holders = shard_holders(client, timeout, &sql).await;
        shard_locks_row(report, poll, &sql, holders);
        return None;
    };
    let route_values =
        route_values(report, config, client, timeout, spec, table_oid, &columns).await;
    let order_present = poll_column_rows(report, poll, shard_column, &columns, &qualified, &sql);
    let indexes = read(
        "the outbox table's indexes",
        timeout,
        poll_sql::table_indexes(client, table_oid, &poll.published_column),
    )
    .await;
    claim_index_row(report, poll, &sql, order_present, indexes);
    let privileges = read(
        "the role's privileges on the outbox",
        timeout,
        poll_sql::table_privileges(client, table_oid, &poll.published_column),
    )
    .await;
    let user = &config.postgres.user;
    poll_privileges_row(report, poll, privileges, user, &sql, &qualified);
    let holders = shard_holders(client, timeout, &sql).await;
    shard_locks_row(report, poll, &sql, holders);
    route_values
}

/// The server's rows: its version (no pgoutput needed) and whether it takes
/// the polling source's writes.
async fn server_rows(
    report: &mut CheckReport,
    config: &Config,
    client: &Client,
    timeout: Duration,
    server: &Result<ServerFacts, CheckError>,
    sql: &PollSql,
) {
    match server {
        Ok(f) => report.pass(
            SERVER_VERSION,
            format!(
                "PostgreSQL {}: the polling source reads the table (no pgoutput)",
                f.version
            ),
        ),
        Err(e) => report.fail(
            SERVER_VERSION,
            DisplayChain(e).to_string(),
            "run SHOW server_version_num as this role to see why it fails",
        ),
    }
    let role = read("the server's role", timeout, preflight::server_role(client)).await;
    let wal_level = server.as_ref().ok().map(|f| f.wal_level.as_str());
    poll_source_row(report, config, sql, wal_level, role);
}

/// The outbox table's OID and columns, or a failed `outbox table` row.
async fn table_columns(
    report: &mut CheckReport,
    config: &Config,
    client: &Client,
    timeout: Duration,
    spec: &OutboxTableSpec,
) -> Option<(u32, Vec<TableColumn>)> {
    let facts = match outbox_facts(client, timeout, &spec.schema, &spec.table).await {
        Ok(Some(f)) => f,
        Ok(None) => {
            report.fail(
                OUTBOX_TABLE,
                format!(
                    "{} does not exist in database {} (or is not a table)",
                    spec.qualified(),
                    config.postgres.dbname
                ),
                "create the outbox table, or set outbox.table to the table your services write to (schema.table)",
            );
            return None;
        }
        Err(e) => {
            report.fail(
                OUTBOX_TABLE,
                DisplayChain(&e).to_string(),
                "make sure the role can read the catalog (pg_class, pg_attribute)",
            );
            return None;
        }
    };
    let columns = read(
        "the outbox table's columns",
        timeout,
        poll_sql::table_columns(client, facts.oid),
    )
    .await;
    match columns {
        Ok(columns) => Some((facts.oid, columns)),
        Err(e) => {
            report.fail(
                OUTBOX_TABLE,
                DisplayChain(&e).to_string(),
                "make sure the role can read pg_attribute",
            );
            None
        }
    }
}

/// The `outbox table` row (the router bound to every column: the claim
/// hands it all of them, generated ones included), and the route values
/// when the route column is usable.
async fn route_values(
    report: &mut CheckReport,
    config: &Config,
    client: &Client,
    timeout: Duration,
    spec: &OutboxTableSpec,
    table_oid: u32,
    columns: &[TableColumn],
) -> RouteValues {
    let rows = columns
        .iter()
        .map(|c| preflight::OutboxColumn {
            name: c.name.clone(),
            type_oid: c.type_oid,
            type_modifier: c.type_modifier,
            not_null: c.not_null,
            type_name: c.type_name.clone(),
            default_expr: c.default_expr.clone(),
        })
        .collect();
    let route = bind_columns(report, config, table_oid, rows, None, spec)?;
    let values = read_route_values(client, timeout, spec, &route).await;
    Some(values.map_err(|e| DisplayChain(&e).to_string()))
}

/// Who holds each shard's lock, read from `pg_locks`.
async fn shard_holders(
    client: &Client,
    timeout: Duration,
    sql: &PollSql,
) -> Result<Vec<LockHolder>, CheckError> {
    read(
        "the shard locks",
        timeout,
        poll_sql::lock_holders(client, sql),
    )
    .await
}

/// The polling source's needs of the server: it marks (or deletes) rows,
/// so the server must take writes; it needs no slot, publication, WAL
/// sender or `wal_level = logical`. `role`: `(in recovery, read-only)`.
fn poll_source_row(
    report: &mut CheckReport,
    config: &Config,
    sql: &PollSql,
    wal_level: Option<&str>,
    role: Result<(bool, bool), CheckError>,
) {
    let poll = &config.poll;
    let action = match poll.on_publish {
        OnPublish::Mark => format!("marks {} on published rows", poll.published_column),
        OnPublish::Delete => "deletes published rows".to_owned(),
    };
    if !writable(report, config, &action, role) {
        return;
    }
    let shards = match poll.shards {
        1 => "1 shard".to_owned(),
        n => format!("{n} shards"),
    };
    let wake = if poll.listen_channel.is_empty() {
        format!("polls every {} ms", poll.interval_ms)
    } else {
        format!(
            "woken by NOTIFY on {}, at least every {} ms",
            poll.listen_channel, poll.interval_ms
        )
    };
    report.pass(
        POLL_SOURCE,
        format!(
            "claims up to {} rows at a time, {wake}, {shards} under lock {}, and {action}; no \
             replication slot, publication or WAL sender, so wal_level {} is enough",
            poll.batch_size,
            sql.lock_name(),
            wal_level.unwrap_or("replica")
        ),
    );
}

/// Whether the server takes writes (`role`: `(in recovery, read-only)`);
/// a failed (or, when unknown, a warning) `polling source` row otherwise.
fn writable(
    report: &mut CheckReport,
    config: &Config,
    action: &str,
    role: Result<(bool, bool), CheckError>,
) -> bool {
    match role {
        Ok((true, _)) => {
            report.fail(
                POLL_SOURCE,
                format!("the server is a standby (in recovery): the polling source {action}, which a standby refuses"),
                "point postgres.host at the primary (with several hosts: postgres.target_session_attrs = \"primary\")",
            );
            false
        }
        Ok((false, true)) => {
            report.fail(
                POLL_SOURCE,
                format!("sessions of {} are read-only (default_transaction_read_only): the polling source {action}", config.postgres.user),
                format!(
                    "ALTER ROLE {} SET default_transaction_read_only = off, or connect to a writable primary",
                    quote_ident(&config.postgres.user)
                ),
            );
            false
        }
        Ok((false, false)) => true,
        Err(e) => {
            report.warn(
                POLL_SOURCE,
                format!(
                    "cannot tell whether the server takes writes: {}",
                    DisplayChain(&e)
                ),
                "run SELECT pg_is_in_recovery() as this role to see why it fails",
            );
            false
        }
    }
}

/// The privileges the polling source's statements need: SELECT (the
/// claim), UPDATE (the mark; in delete mode the claim's `FOR UPDATE`),
/// DELETE (delete mode, retention).
fn poll_privileges_row(
    report: &mut CheckReport,
    poll: &PollConfig,
    privileges: Result<TablePrivileges, CheckError>,
    user: &str,
    sql: &PollSql,
    qualified: &str,
) {
    let p = match privileges {
        Ok(p) => p,
        Err(e) => {
            report.fail(
                OUTBOX_PRIVILEGES,
                DisplayChain(&e).to_string(),
                "run SELECT has_table_privilege('<outbox table>', 'SELECT') as this role to see why it fails",
            );
            return;
        }
    };
    let needed = needed_privileges(poll, &p);
    let missing: Vec<&(&str, String, bool)> = needed.iter().filter(|(_, _, has)| !has).collect();
    if missing.is_empty() {
        let mut names: Vec<&str> = needed.iter().map(|(n, _, _)| *n).collect();
        names.dedup();
        report.pass(
            OUTBOX_PRIVILEGES,
            format!("{} on {qualified}", names.join(", ")),
        );
        return;
    }
    let mut names: Vec<&str> = missing.iter().map(|(n, _, _)| *n).collect();
    names.dedup();
    let why = missing
        .iter()
        .map(|(n, why, _)| format!("{n}: {why}"))
        .collect::<Vec<_>>()
        .join("; ");
    report.fail(
        OUTBOX_PRIVILEGES,
        format!("{user} has no {} on {qualified} ({why})", names.join(", ")),
        format!(
            "GRANT {} ON {} TO {}",
            names.join(", "),
            sql.table(),
            quote_ident(user)
        ),
    );
}

/// Each privilege a statement needs: its name, why, and whether the role
/// has it.
fn needed_privileges(poll: &PollConfig, p: &TablePrivileges) -> Vec<(&'static str, String, bool)> {
    let published = &poll.published_column;
    let mut needed: Vec<(&'static str, String, bool)> =
        vec![("SELECT", "the claim reads the rows".to_owned(), p.select)];
    match poll.on_publish {
        OnPublish::Mark => needed.push((
            "UPDATE",
            format!("the mark sets {published}"),
            p.update_published.unwrap_or(p.update_any),
        )),
        OnPublish::Delete => {
            needed.push((
                "UPDATE",
                "the claim locks its rows with SELECT ... FOR UPDATE, which needs it".to_owned(),
                p.update_any,
            ));
            needed.push((
                "DELETE",
                "acknowledged rows are deleted (poll.on_publish = \"delete\")".to_owned(),
                p.delete,
            ));
        }
    }
    if poll.retention_seconds > 0 {
        needed.push((
            "DELETE",
            "poll.retention_seconds deletes expired published rows".to_owned(),
            p.delete,
        ));
    }
    needed
}

/// Who holds each shard's lock now, read from `pg_locks`; the lock is never
/// taken.
fn shard_locks_row(
    report: &mut CheckReport,
    poll: &PollConfig,
    sql: &PollSql,
    holders: Result<Vec<LockHolder>, CheckError>,
) {
    let holders = match holders {
        Ok(h) => h,
        Err(e) => {
            report.warn(
                SHARD_LOCKS,
                DisplayChain(&e).to_string(),
                "make sure the role can read pg_locks and pg_stat_activity",
            );
            return;
        }
    };
    let mut held = 0;
    let shards = (0..poll.shards)
        .map(|shard| match holders.iter().find(|h| h.shard == shard) {
            Some(h) => {
                held += 1;
                let app = if h.application_name.is_empty() {
                    "no application_name"
                } else {
                    h.application_name.as_str()
                };
                format!("shard {shard}: held by pid {} ({app})", h.pid)
            }
            None => format!("shard {shard}: free"),
        })
        .collect::<Vec<_>>()
        .join("; ");
    let meaning = if held == 0 {
        "no walrelay publishes this outbox now"
    } else if held == poll.shards {
        "a walrelay started now waits as a hot standby"
    } else {
        "a walrelay started now takes the free shards"
    };
    report.pass(
        SHARD_LOCKS,
        format!("lock {}: {shards}; {meaning}", sql.lock_name()),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::claim::tests::{poll_config, poll_sql};
    use crate::check::report::CheckStatus;

    #[test]
    fn poll_privileges_follow_the_mode() {
        let judge = |poll: &PollConfig, p: TablePrivileges| {
            let mut r = CheckReport::default();
            poll_privileges_row(
                &mut r,
                poll,
                Ok(p),
                "relay",
                &poll_sql(poll),
                "public.outbox",
            );
            r.row(OUTBOX_PRIVILEGES).expect("row").clone()
        };
        let all = TablePrivileges {
            select: true,
            delete: true,
            update_any: true,
            update_published: Some(true),
        };
        let select_only = TablePrivileges {
            select: true,
            delete: false,
            update_any: false,
            update_published: Some(false),
        };
        let mark = poll_config(&["seq"]);
        assert_eq!(judge(&mark, all).status, CheckStatus::Pass);
        let row = judge(&mark, select_only);
        assert_eq!(row.status, CheckStatus::Fail, "{row:?}");
        assert!(
            row.detail
                .starts_with("relay has no UPDATE on public.outbox")
                && row.detail.contains("the mark sets published_at"),
            "{row:?}"
        );
        assert_eq!(
            row.fix.as_deref(),
            Some("GRANT UPDATE ON \"public\".\"outbox\" TO \"relay\"")
        );

        let retention = PollConfig {
            retention_seconds: 3600,
            ..mark.clone()
        };
        let row = judge(
            &retention,
            TablePrivileges {
                delete: false,
                ..all
            },
        );
        assert_eq!(row.status, CheckStatus::Fail);
        assert!(
            row.detail.contains("no DELETE") && row.detail.contains("retention"),
            "{row:?}"
        );

        let delete = PollConfig {
            on_publish: OnPublish::Delete,
            ..mark
        };
        let row = judge(&delete, select_only);
        assert_eq!(row.status, CheckStatus::Fail);
        assert!(
            row.detail.contains("no UPDATE, DELETE") && row.detail.contains("FOR UPDATE"),
            "{row:?}"
        );
        assert_eq!(
            judge(
                &delete,
                TablePrivileges {
                    update_published: None,
                    ..all
                }
            )
            .status,
            CheckStatus::Pass
        );
    }

    #[test]
    fn shard_locks_are_reported_never_taken() {
        let poll = PollConfig {
            shards: 3,
            ..poll_config(&["seq"])
        };
        let mut r = CheckReport::default();
        let holders = vec![LockHolder {
            shard: 1,
            pid: 4242,
            application_name: "walrelay".into(),
        }];
        shard_locks_row(&mut r, &poll, &poll_sql(&poll), Ok(holders));
        let row = r.row(SHARD_LOCKS).expect("row");
        assert_eq!(row.status, CheckStatus::Pass);
        assert_eq!(
            row.detail,
            "lock public.outbox: shard 0: free; shard 1: held by pid 4242 (walrelay); shard 2: \
             free; a walrelay started now takes the free shards"
        );
    }

    #[test]
    fn the_polling_source_needs_a_writable_server_not_logical_wal() {
        let config = poll_source_config();
        let sql = poll_sql(&config.poll);
        let mut r = CheckReport::default();
        poll_source_row(&mut r, &config, &sql, Some("replica"), Ok((false, false)));
        let row = r.row(POLL_SOURCE).expect("row");
        assert_eq!(row.status, CheckStatus::Pass, "{r}");
        assert!(row.detail.contains("wal_level replica is enough"), "{r}");

        let mut r = CheckReport::default();
        poll_source_row(&mut r, &config, &sql, Some("replica"), Ok((true, true)));
        let row = r.row(POLL_SOURCE).expect("row");
        assert_eq!(row.status, CheckStatus::Fail, "{r}");
        assert!(row.detail.contains("standby"), "{r}");
    }

    fn poll_source_config() -> Config {
        let text = "[source]\nkind = \"poll\"\n\n[poll]\norder_by = [\"seq\"]\n\n\
             [postgres]\nhost = \"127.0.0.1\"\nuser = \"walrelay\"\ndbname = \"app\"\n\n\
             [outbox]\ntable = \"public.outbox\"\n\n\
             [kafka]\nbootstrap_servers = \"127.0.0.1:9092\"\n";
        Config::from_toml(text, std::path::Path::new("poll.toml")).expect("valid config")
    }
}
