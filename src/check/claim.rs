//! The claim's rows of the polling source: the `[poll]` columns exist, the
//! published marker is a nullable time without a default, the created
//! column is a time, the leading order column follows insertion, and an
//! index serves the claim. It judges the columns and indexes it is handed
//! and must never read the server itself (`poll` reads them) or claim a
//! row.

use super::report::{
    CheckReport, CLAIM_INDEX, CLAIM_ORDER, CREATED_COLUMN, POLL_COLUMNS, PUBLISHED_COLUMN,
};
use super::step::CheckError;
use crate::chain::DisplayChain;
use crate::connect::pg::oid;
use crate::postgres::poll::config::{OnPublish, PollConfig};
use crate::postgres::poll::sql::{PollSql, TableColumn, TableIndex};
use crate::postgres::poll::PollError;
use crate::postgres::replication::quote_ident;

/// Why the order column must follow insertion order, for the claim order
/// warnings.
const ORDER_WHY: &str = "rows are claimed in poll.order_by order, so an aggregate's events reach \
     Kafka in that order; the leading order column must grow as rows are inserted, or an \
     aggregate's later event can sort (and be published) before its earlier one";

/// The `[poll]` columns against the table's: every column a key names
/// exists, the published and created columns are times, the order follows
/// insertion. Returns whether every `poll.order_by` column exists.
pub(super) fn poll_column_rows(
    report: &mut CheckReport,
    poll: &PollConfig,
    shard_column: &str,
    columns: &[TableColumn],
    qualified: &str,
    sql: &PollSql,
) -> bool {
    poll_columns_row(report, poll, shard_column, columns, qualified);
    let find = |name: &str| columns.iter().find(|c| c.name == name);
    match poll.on_publish {
        OnPublish::Delete => report.pass(
            PUBLISHED_COLUMN,
            "none: poll.on_publish = \"delete\" deletes each row once Kafka acknowledged it",
        ),
        OnPublish::Mark => match find(&poll.published_column) {
            None => report.skip(PUBLISHED_COLUMN, "poll.published_column is missing"),
            Some(c) => published_row(report, c, sql),
        },
    }
    if !poll.created_column.is_empty() {
        created_row(report, find(&poll.created_column));
    }
    claim_order_row(report, poll, columns, sql);
    poll.order_by.iter().all(|c| find(c).is_some())
}

/// Every column a `[poll]` key names exists.
fn poll_columns_row(
    report: &mut CheckReport,
    poll: &PollConfig,
    shard_column: &str,
    columns: &[TableColumn],
    qualified: &str,
) {
    let find = |name: &str| columns.iter().find(|c| c.name == name);
    let wanted = poll.named_columns(shard_column);
    let missing: Vec<(&String, &str)> = wanted
        .iter()
        .filter(|(_, column)| find(column).is_none())
        .map(|(key, column)| (key, *column))
        .collect();
    if missing.is_empty() {
        let found = wanted
            .iter()
            .filter_map(|(key, column)| {
                find(column).map(|c| format!("{key} {column} ({})", c.type_name))
            })
            .collect::<Vec<_>>()
            .join(", ");
        report.pass(POLL_COLUMNS, format!("{qualified}: {found}"));
        return;
    }
    let detail = missing
        .iter()
        .map(|(key, column)| {
            PollError::MissingColumn {
                key: (*key).clone(),
                column: (*column).to_owned(),
                table: qualified.to_owned(),
            }
            .to_string()
        })
        .collect::<Vec<_>>()
        .join("; ");
    let fix = missing
        .iter()
        .map(|(key, column)| {
            format!("add column {column} to {qualified}, or set {key} to a column it has")
        })
        .collect::<Vec<_>>()
        .join("; ");
    report.fail(POLL_COLUMNS, detail, fix);
}

/// `poll.created_column` (`None`: missing) is a time.
fn created_row(report: &mut CheckReport, column: Option<&TableColumn>) {
    match column {
        None => report.skip(CREATED_COLUMN, "poll.created_column is missing"),
        Some(c) if is_time(c) => report.pass(
            CREATED_COLUMN,
            format!(
                "{} ({}): the age of the oldest unpublished row is measured from it",
                c.name, c.type_name
            ),
        ),
        Some(c) => report.fail(
            CREATED_COLUMN,
            format!(
                "poll.created_column {} is {}, not a timestamp: the age of the oldest \
                 unpublished row is now minus its value",
                c.name, c.type_name
            ),
            "set poll.created_column to a timestamptz column, or leave it unset (the age \
             is then measured from when walrelay first saw the row)",
        ),
    }
}

/// Whether a column holds a time (with or without time zone).
fn is_time(c: &TableColumn) -> bool {
    matches!(c.type_oid, oid::TIMESTAMPTZ | oid::TIMESTAMP)
}

/// The published marker: a nullable time, NULL when a row is inserted.
fn published_row(report: &mut CheckReport, c: &TableColumn, sql: &PollSql) {
    let column = quote_ident(&c.name);
    let table = sql.table();
    let mut problems = Vec::new();
    let mut fixes = Vec::new();
    if !is_time(c) {
        problems.push(format!(
            "is {}, not timestamptz: walrelay writes clock_timestamp() into it, and retention \
             and replay --since compare it with a time",
            c.type_name
        ));
        fixes.push(format!(
            "ALTER TABLE {table} ALTER COLUMN {column} TYPE timestamptz USING <conversion>, or \
             set poll.published_column to a nullable timestamptz column"
        ));
    }
    if c.not_null {
        problems.push(
            "is NOT NULL: a row is unpublished while its published column is NULL".to_owned(),
        );
        fixes.push(format!(
            "ALTER TABLE {table} ALTER COLUMN {column} DROP NOT NULL"
        ));
    }
    if let Some(default) = c
        .default_expr
        .as_deref()
        .filter(|d| !d.trim_start().to_ascii_uppercase().starts_with("NULL"))
    {
        problems.push(format!(
            "defaults to {default}: a row inserted without naming it is born published and \
             never relayed"
        ));
        fixes.push(format!(
            "ALTER TABLE {table} ALTER COLUMN {column} DROP DEFAULT"
        ));
    }
    if problems.is_empty() {
        report.pass(
            PUBLISHED_COLUMN,
            format!(
                "{} ({}), nullable, NULL until walrelay marks the row published",
                c.name, c.type_name
            ),
        );
    } else {
        report.fail(
            PUBLISHED_COLUMN,
            format!(
                "poll.published_column {} {}",
                c.name,
                problems.join("; it ")
            ),
            fixes.join("; "),
        );
    }
}

/// Whether a default expression is the transaction's start time, which
/// every row of a transaction shares.
fn is_transaction_time(default: &str) -> bool {
    let d = default.trim().to_ascii_lowercase();
    [
        "now()",
        "transaction_timestamp()",
        "current_timestamp",
        "localtimestamp",
    ]
    .iter()
    .any(|f| d.starts_with(f))
}

/// Whether the leading order column follows insertion order.
fn claim_order_row(
    report: &mut CheckReport,
    poll: &PollConfig,
    columns: &[TableColumn],
    sql: &PollSql,
) {
    let Some(first) = poll.order_by.first() else {
        return;
    };
    let Some(c) = columns.iter().find(|c| c.name == *first) else {
        report.skip(CLAIM_ORDER, "poll.order_by[0] is missing");
        return;
    };
    let filled = match (&c.default_expr, c.identity) {
        (_, true) => ", identity".to_owned(),
        (Some(d), false) => format!(", default {d}"),
        (None, false) => String::new(),
    };
    let subject = format!("poll.order_by[0] {} ({}{filled})", c.name, c.type_name);
    let ties = if poll.order_by.len() > 1 {
        format!("; ties are broken by {}", poll.order_by[1..].join(", "))
    } else {
        String::new()
    };
    let Some(problem) = order_problem(c) else {
        report.pass(
            CLAIM_ORDER,
            format!("{subject}: a sequence hands out growing values as rows are inserted{ties}"),
        );
        return;
    };
    report.warn(
        CLAIM_ORDER,
        format!("{subject}: {problem}; {ORDER_WHY}{ties}"),
        format!(
            "order by a column a sequence fills: ALTER TABLE {} ADD COLUMN seq bigint GENERATED \
             ALWAYS AS IDENTITY, then poll.order_by = [\"seq\"]",
            sql.table()
        ),
    );
}

/// Why the leading order column `c` need not follow insertion order;
/// `None` for an integer a sequence (or identity) fills.
fn order_problem(c: &TableColumn) -> Option<String> {
    let default = c.default_expr.as_deref().unwrap_or("");
    let sequence = c.identity || default.trim_start().starts_with("nextval(");
    let integer = matches!(c.type_oid, oid::INT2 | oid::INT4 | oid::INT8);
    let problem = match c.type_oid {
        _ if integer && sequence => return None,
        oid::UUID => "uuid values follow insertion order only when they are time-ordered \
                      (UUIDv7) and taken by the inserting transaction; gen_random_uuid() and \
                      other v4 ids are random"
            .to_owned(),
        oid::TIMESTAMPTZ | oid::TIMESTAMP if is_transaction_time(default) => format!(
            "{default} is the start time of the inserting transaction: the rows of one \
             transaction share it, and a transaction that started earlier can insert and \
             commit later"
        ),
        oid::TIMESTAMPTZ | oid::TIMESTAMP => "a time taken when (or before) a row is inserted \
             does not follow the order in which rows are inserted and committed"
            .to_owned(),
        _ if integer => "no sequence or identity default fills it, so nothing says its values \
                         grow as rows are inserted"
            .to_owned(),
        _ => format!(
            "a {} column does not say whether its values grow as rows are inserted",
            c.type_name
        ),
    };
    Some(problem)
}

/// Whether `index` leads with the `poll.order_by` columns.
fn leads_with(index: &TableIndex, order_by: &[String]) -> bool {
    index.columns.len() >= order_by.len()
        && index
            .columns
            .iter()
            .zip(order_by)
            .all(|(c, o)| c.as_deref() == Some(o.as_str()))
}

/// The index a claim uses: on the order columns, over the unpublished rows
/// only in mark mode.
pub(super) fn claim_index_row(
    report: &mut CheckReport,
    poll: &PollConfig,
    sql: &PollSql,
    order_present: bool,
    indexes: Result<Vec<TableIndex>, CheckError>,
) {
    if !order_present {
        report.skip(CLAIM_INDEX, "a poll.order_by column is missing");
        return;
    }
    let indexes = match indexes {
        Ok(i) => i,
        Err(e) => {
            report.warn(
                CLAIM_INDEX,
                DisplayChain(&e).to_string(),
                "make sure the role can read pg_index",
            );
            return;
        }
    };
    let leading: Vec<&TableIndex> = indexes
        .iter()
        .filter(|i| leads_with(i, &poll.order_by))
        .collect();
    let whole = leading.iter().copied().find(|i| i.predicate.is_none());
    let order = poll.order_by.join(", ");
    match poll.on_publish {
        OnPublish::Mark => mark_index_row(report, poll, sql, &order, &leading, whole),
        OnPublish::Delete => match whole {
            Some(i) => report.pass(
                CLAIM_INDEX,
                format!(
                    "{} on ({order}): a claim reads the oldest rows first",
                    i.name
                ),
            ),
            None => report.warn(
                CLAIM_INDEX,
                format!(
                    "no index on ({order}): every claim reads the whole table to find the \
                     oldest rows"
                ),
                sql.claim_index(),
            ),
        },
    }
}

/// The claim index in mark mode: partial over the unpublished rows, or a
/// warning with the statement that creates one. `leading`: the indexes
/// that lead with the order columns; `whole`: one of them without a
/// predicate.
fn mark_index_row(
    report: &mut CheckReport,
    poll: &PollConfig,
    sql: &PollSql,
    order: &str,
    leading: &[&TableIndex],
    whole: Option<&TableIndex>,
) {
    let published = &poll.published_column;
    if let Some(i) = leading.iter().find(|i| i.unpublished_only) {
        report.pass(
            CLAIM_INDEX,
            format!(
                "{} on ({order}) WHERE {published} IS NULL: a claim reads only unpublished rows",
                i.name
            ),
        );
    } else if let Some(i) = whole {
        report.warn(
            CLAIM_INDEX,
            format!(
                "{} on ({order}) has no WHERE {published} IS NULL: every claim reads past \
                 the published rows ahead of the first unpublished one, more as the \
                 table grows",
                i.name
            ),
            sql.claim_index(),
        );
    } else {
        report.warn(
            CLAIM_INDEX,
            format!(
                "no index on ({order}) WHERE {published} IS NULL: every claim reads the \
                 whole table to find the oldest unpublished rows"
            ),
            sql.claim_index(),
        );
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::check::report::CheckStatus;

    fn column(name: &str, type_oid: u32, type_name: &str, default: Option<&str>) -> TableColumn {
        TableColumn {
            name: name.into(),
            type_oid,
            type_modifier: -1,
            not_null: false,
            type_name: type_name.into(),
            default_expr: default.map(str::to_owned),
            identity: false,
        }
    }

    /// The columns of the usual polling outbox.
    fn poll_table() -> Vec<TableColumn> {
        vec![
            TableColumn {
                not_null: true,
                ..column(
                    "seq",
                    oid::INT8,
                    "bigint",
                    Some("nextval('outbox_seq_seq'::regclass)"),
                )
            },
            column("id", oid::UUID, "uuid", Some("gen_random_uuid()")),
            column("aggregateid", oid::TEXT, "text", None),
            column(
                "published_at",
                oid::TIMESTAMPTZ,
                "timestamp with time zone",
                None,
            ),
            column(
                "created_at",
                oid::TIMESTAMPTZ,
                "timestamp with time zone",
                Some("now()"),
            ),
        ]
    }

    pub(in crate::check) fn poll_config(order_by: &[&str]) -> PollConfig {
        PollConfig {
            order_by: order_by.iter().map(|c| (*c).to_owned()).collect(),
            ..PollConfig::default()
        }
    }

    pub(in crate::check) fn poll_sql(poll: &PollConfig) -> PollSql {
        PollSql::new("public", "outbox", &[], poll, "aggregateid")
    }

    fn poll_rows(poll: &PollConfig, columns: &[TableColumn]) -> (CheckReport, bool) {
        let mut r = CheckReport::default();
        let present = poll_column_rows(
            &mut r,
            poll,
            poll.shard_column_or("aggregateid"),
            columns,
            "public.outbox",
            &poll_sql(poll),
        );
        (r, present)
    }

    #[test]
    fn poll_columns_name_the_key_and_the_missing_column() {
        let (r, present) = poll_rows(&poll_config(&["seq"]), &poll_table());
        assert!(present && r.passed(), "{r}");
        assert!(
            row_detail(&r, POLL_COLUMNS)
                .contains("poll.order_by[0] seq (bigint), poll.published_column published_at"),
            "{r}"
        );

        let poll = PollConfig {
            shards: 4,
            shard_column: "tenant".into(),
            created_column: "born".into(),
            ..poll_config(&["sequence"])
        };
        let (r, present) = poll_rows(&poll, &poll_table());
        assert!(!present);
        let columns = r.row(POLL_COLUMNS).expect("row");
        assert_eq!(columns.status, CheckStatus::Fail, "{r}");
        for text in [
            "poll.order_by[0] names column sequence, which public.outbox does not have",
            "poll.shard_column names column tenant, which public.outbox does not have",
            "poll.created_column names column born, which public.outbox does not have",
        ] {
            assert!(columns.detail.contains(text), "{text}: {r}");
        }
        let fix = columns.fix.as_deref().expect("fix");
        assert!(
            fix.contains("add column sequence to public.outbox, or set poll.order_by[0]"),
            "{fix}"
        );
        assert_eq!(r.row(CLAIM_ORDER).expect("row").status, CheckStatus::Skip);
        assert_eq!(
            r.row(CREATED_COLUMN).expect("row").status,
            CheckStatus::Skip
        );

        // The shard column only matters with shards, and defaults to the key.
        let poll = PollConfig {
            shards: 2,
            ..poll_config(&["seq"])
        };
        let (r, _) = poll_rows(&poll, &poll_table()[..2]);
        let detail = row_detail(&r, POLL_COLUMNS);
        assert!(
            detail.contains("poll.shard_column (unset: router.key_field) names column aggregateid")
                && detail.contains("poll.published_column names column published_at"),
            "{r}"
        );
    }

    fn row_detail<'a>(r: &'a CheckReport, name: &str) -> &'a str {
        &r.row(name)
            .unwrap_or_else(|| panic!("no row {name}:\n{r}"))
            .detail
    }

    #[test]
    fn the_published_column_is_a_nullable_time_without_default() {
        let mut table = poll_table();
        table[3] = TableColumn {
            not_null: true,
            default_expr: Some("now()".into()),
            ..column("published_at", oid::TEXT, "text", None)
        };
        let (r, _) = poll_rows(&poll_config(&["seq"]), &table);
        let published = r.row(PUBLISHED_COLUMN).expect("row");
        assert_eq!(published.status, CheckStatus::Fail, "{r}");
        for text in [
            "is text, not timestamptz",
            "is NOT NULL",
            "defaults to now()",
        ] {
            assert!(published.detail.contains(text), "{text}: {r}");
        }
        let fix = published.fix.as_deref().expect("fix");
        assert!(
            fix.contains(
                "ALTER TABLE \"public\".\"outbox\" ALTER COLUMN \"published_at\" DROP NOT NULL"
            ) && fix.contains("DROP DEFAULT"),
            "{fix}"
        );

        // A plain timestamp is fine; a NULL default is no default.
        table[3] = column(
            "published_at",
            oid::TIMESTAMP,
            "timestamp without time zone",
            Some("NULL::timestamp without time zone"),
        );
        let (r, _) = poll_rows(&poll_config(&["seq"]), &table);
        assert_eq!(
            r.row(PUBLISHED_COLUMN).expect("row").status,
            CheckStatus::Pass,
            "{r}"
        );

        // Delete mode has none, and needs none.
        let poll = PollConfig {
            on_publish: OnPublish::Delete,
            ..poll_config(&["seq"])
        };
        let (r, _) = poll_rows(&poll, &table[..3]);
        assert!(r.passed(), "{r}");
        assert!(
            row_detail(&r, PUBLISHED_COLUMN).contains("deletes each row"),
            "{r}"
        );

        // created_column must be a time.
        let poll = PollConfig {
            created_column: "aggregateid".into(),
            ..poll_config(&["seq"])
        };
        let (r, _) = poll_rows(&poll, &poll_table());
        assert_eq!(
            r.row(CREATED_COLUMN).expect("row").status,
            CheckStatus::Fail,
            "{r}"
        );
        let poll = PollConfig {
            created_column: "created_at".into(),
            ..poll_config(&["seq"])
        };
        let (r, _) = poll_rows(&poll, &poll_table());
        assert_eq!(
            r.row(CREATED_COLUMN).expect("row").status,
            CheckStatus::Pass,
            "{r}"
        );
    }

    #[test]
    fn the_claim_order_must_follow_insertion() {
        let order = |order_by: &[&str], table: &[TableColumn]| {
            let (r, _) = poll_rows(&poll_config(order_by), table);
            r.row(CLAIM_ORDER).expect("row").clone()
        };
        let seq = order(&["seq", "id"], &poll_table());
        assert_eq!(seq.status, CheckStatus::Pass, "{seq:?}");
        assert!(
            seq.detail.contains("nextval") && seq.detail.contains("ties are broken by id"),
            "{seq:?}"
        );

        let mut identity = poll_table();
        identity[0] = TableColumn {
            identity: true,
            ..column("seq", oid::INT8, "bigint", None)
        };
        assert_eq!(order(&["seq"], &identity).status, CheckStatus::Pass);

        let uuid = order(&["id"], &poll_table());
        assert_eq!(uuid.status, CheckStatus::Warn, "{uuid:?}");
        assert!(
            uuid.detail.contains("random") && uuid.detail.contains(ORDER_WHY),
            "{uuid:?}"
        );
        assert!(uuid
            .fix
            .as_deref()
            .is_some_and(|f| f.contains("GENERATED ALWAYS AS IDENTITY")));

        for default in ["now()", "CURRENT_TIMESTAMP", "transaction_timestamp()"] {
            let mut table = poll_table();
            table[4].default_expr = Some(default.into());
            let at = order(&["created_at"], &table);
            assert_eq!(at.status, CheckStatus::Warn, "{at:?}");
            assert!(
                at.detail.contains("rows of one transaction share it")
                    && at
                        .detail
                        .contains("started earlier can insert and commit later")
                    && at.detail.contains("must grow as rows are inserted"),
                "{at:?}"
            );
        }
        let mut table = poll_table();
        table[4].default_expr = Some("clock_timestamp()".into());
        let at = order(&["created_at"], &table);
        assert_eq!(at.status, CheckStatus::Warn);
        assert!(at.detail.contains("does not follow the order"), "{at:?}");

        let mut table = poll_table();
        table[0].default_expr = None;
        let plain = order(&["seq"], &table);
        assert_eq!(plain.status, CheckStatus::Warn);
        assert!(
            plain.detail.contains("no sequence or identity default"),
            "{plain:?}"
        );
        let text = order(&["aggregateid"], &poll_table());
        assert_eq!(text.status, CheckStatus::Warn);
        assert!(text.detail.contains("a text column"), "{text:?}");
    }

    fn index(name: &str, columns: &[&str], predicate: Option<&str>) -> TableIndex {
        TableIndex {
            name: name.into(),
            columns: columns.iter().map(|c| Some((*c).to_owned())).collect(),
            predicate: predicate.map(str::to_owned),
            unpublished_only: predicate == Some("(published_at IS NULL)"),
        }
    }

    #[test]
    fn the_claim_index_is_partial_over_the_order() {
        let judge = |poll: &PollConfig, indexes: Vec<TableIndex>| {
            let mut r = CheckReport::default();
            claim_index_row(&mut r, poll, &poll_sql(poll), true, Ok(indexes));
            r.row(CLAIM_INDEX).expect("row").clone()
        };
        let mark = poll_config(&["seq"]);
        let partial = index("outbox_seq_idx", &["seq"], Some("(published_at IS NULL)"));
        let whole = index("outbox_seq_all", &["seq", "id"], None);
        let other = index("outbox_id", &["id", "seq"], Some("(published_at IS NULL)"));

        let pass = judge(&mark, vec![whole.clone(), partial.clone()]);
        assert_eq!(pass.status, CheckStatus::Pass, "{pass:?}");
        assert!(pass
            .detail
            .starts_with("outbox_seq_idx on (seq) WHERE published_at IS NULL"));

        let warn = judge(&mark, vec![whole.clone(), other.clone()]);
        assert_eq!(warn.status, CheckStatus::Warn, "{warn:?}");
        assert!(
            warn.detail
                .contains("every claim reads past the published rows"),
            "{warn:?}"
        );

        let none = judge(&mark, vec![other]);
        assert_eq!(none.status, CheckStatus::Warn, "{none:?}");
        assert_eq!(
            none.fix.as_deref(),
            Some("CREATE INDEX CONCURRENTLY ON \"public\".\"outbox\" (\"seq\") WHERE \"published_at\" IS NULL")
        );

        let delete = PollConfig {
            on_publish: OnPublish::Delete,
            ..mark
        };
        assert_eq!(judge(&delete, vec![whole]).status, CheckStatus::Pass);
        let missing = judge(&delete, vec![partial]);
        assert_eq!(missing.status, CheckStatus::Warn);
        assert_eq!(
            missing.fix.as_deref(),
            Some("CREATE INDEX CONCURRENTLY ON \"public\".\"outbox\" (\"seq\")")
        );

        let mut r = CheckReport::default();
        claim_index_row(&mut r, &delete, &poll_sql(&delete), false, Ok(vec![]));
        assert_eq!(r.row(CLAIM_INDEX).expect("row").status, CheckStatus::Skip);
    }
}
