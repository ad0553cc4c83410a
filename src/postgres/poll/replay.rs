//! `walrelay replay`: the published rows of the polling source's outbox that
//! an operator names (`--where` a SQL condition, or `--since` a time) are
//! made unpublished again, so a running walrelay publishes them once more.
//!
//! Owns the refusal (only `source.kind = "poll"` with `poll.on_publish =
//! "mark"` keeps published rows to replay), the dry run and the one
//! transaction that resets the published column. Without confirmation it
//! only counts, inside a read-only transaction, so even a condition that
//! calls a writing function changes nothing. Its statements are
//! [`PollSql::replay_count`] and [`PollSql::replay`], sent with the extended
//! query protocol, which takes exactly one statement: a condition cannot
//! stack a second one. It never routes, produces or touches Kafka.

use std::fmt;

use super::config::{OnPublish, PollConfig, SourceConfig, SourceKind};
use super::sql::PollSql;
use crate::postgres::catalog::{self, CatalogError};
use crate::postgres::config::PostgresConfig;
use crate::postgres::replication::ConnectParams;
use crate::txn::config::OutboxConfig;

/// Which published rows to replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReplayCondition {
    /// An SQL condition on the outbox table's columns (`--where`).
    Where(String),
    /// Published at or after this time, as PostgreSQL parses a
    /// `timestamptz` (`--since`).
    Since(String),
}

impl ReplayCondition {
    /// The condition of `--where` or `--since`: exactly one must be given,
    /// and not empty.
    pub(crate) fn from_options(
        condition: Option<String>,
        since: Option<String>,
    ) -> Result<ReplayCondition, ReplayError> {
        let refuse = |reason: &str| {
            Err(ReplayError::Condition {
                reason: reason.to_owned(),
            })
        };
        match (condition, since) {
            (Some(_), Some(_)) => refuse("give either --where or --since, not both"),
            (None, None) => refuse(
                "name the rows to replay with --where \"<SQL condition>\" or --since \"<timestamp>\"",
            ),
            (Some(c), None) if c.trim().is_empty() => refuse("--where is empty"),
            (None, Some(t)) if t.trim().is_empty() => refuse("--since is empty"),
            (Some(c), None) => Ok(ReplayCondition::Where(c)),
            (None, Some(t)) => Ok(ReplayCondition::Since(t)),
        }
    }
}

/// Errors of `walrelay replay`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReplayError {
    /// The configuration reads the WAL: no published marker to reset.
    #[error(
        "walrelay replay needs source.kind = \"poll\": this configuration reads the WAL \
         (source.kind = \"{kind}\"), where no row is marked published"
    )]
    NotPoll {
        /// The configured source.
        kind: &'static str,
    },
    /// Published rows are deleted: nothing is left to replay.
    #[error(
        "walrelay replay needs poll.on_publish = \"mark\": with \"delete\" a published row \
         is deleted, so none is left to replay"
    )]
    DeleteMode,
    /// `--where` / `--since` missing, doubled or empty.
    #[error("{reason}")]
    Condition {
        /// What is wrong.
        reason: String,
    },
    /// `outbox.table` is not a table name.
    #[error("outbox.table is not a table name like schema.table")]
    Table(#[source] crate::setting::SettingError),
    /// Connecting failed.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// A statement failed (a bad condition or timestamp, a missing
    /// privilege); the transaction was rolled back.
    #[error("{context}")]
    Sql {
        /// What was being done.
        context: String,
        /// The driver's error.
        #[source]
        source: tokio_postgres::Error,
    },
}

impl ReplayError {
    /// Whether the request was refused before anything ran (a usage error,
    /// rather than a failure at the server).
    pub(crate) fn is_refusal(&self) -> bool {
        matches!(
            self,
            ReplayError::NotPoll { .. }
                | ReplayError::DeleteMode
                | ReplayError::Condition { .. }
                | ReplayError::Table(_)
        )
    }
}

/// What `walrelay replay` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReplayOutcome {
    /// The outbox table, `schema.table`.
    pub(crate) table: String,
    /// The published column.
    pub(crate) column: String,
    /// Published rows that match (without confirmation), or rows reset.
    pub(crate) rows: u64,
    /// Whether the rows were reset (`--yes`), or only counted.
    pub(crate) applied: bool,
}

impl fmt::Display for ReplayOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (table, column, rows) = (&self.table, &self.column, self.rows);
        if self.applied {
            write!(
                f,
                "set {column} back to NULL on {rows} row(s) of {table}: walrelay publishes them again"
            )
        } else {
            write!(
                f,
                "{rows} published row(s) of {table} match; nothing was changed (add --yes to set \
                 {column} back to NULL on them, so walrelay publishes them again)"
            )
        }
    }
}

/// A replay of one outbox, refused unless the configuration polls it in
/// mark mode.
#[derive(Debug, Clone)]
pub(crate) struct Replay {
    params: ConnectParams,
    sql: PollSql,
    table: String,
    column: String,
}

impl Replay {
    /// The replay for these sections of a validated configuration; refused
    /// unless `source.kind = "poll"` and `poll.on_publish = "mark"`.
    pub(crate) fn new(
        postgres: &PostgresConfig,
        outbox: &OutboxConfig,
        source: &SourceConfig,
        poll: &PollConfig,
    ) -> Result<Replay, ReplayError> {
        if source.kind != SourceKind::Poll {
            return Err(ReplayError::NotPoll {
                kind: source.kind.as_str(),
            });
        }
        if poll.on_publish != OnPublish::Mark {
            return Err(ReplayError::DeleteMode);
        }
        let (schema, table) = outbox.qualified().map_err(ReplayError::Table)?;
        // Replay's statements use neither the claimed columns nor the
        // shard column.
        let sql = PollSql::new(&schema, &table, &[], poll, &poll.shard_column);
        Ok(Replay {
            params: ConnectParams::from_config(postgres),
            sql,
            table: format!("{schema}.{table}"),
            column: poll.published_column.clone(),
        })
    }

    /// Counts the published rows matching `condition` (in a read-only
    /// transaction), or with `confirm` sets their published column back to
    /// NULL in one transaction.
    pub(crate) async fn run(
        &self,
        condition: &ReplayCondition,
        confirm: bool,
    ) -> Result<ReplayOutcome, ReplayError> {
        let condition = match condition {
            ReplayCondition::Where(c) => c.clone(),
            ReplayCondition::Since(t) => self.sql.since_condition(t),
        };
        let mut client = catalog::bounded(
            self.params.connect_bound(),
            "connecting",
            catalog::connect(&self.params),
        )
        .await?;
        let sql_error = |context: &str| {
            let context = context.to_owned();
            move |source| ReplayError::Sql { context, source }
        };
        let rows = if confirm {
            let tx = client
                .transaction()
                .await
                .map_err(sql_error("cannot begin the replay transaction"))?;
            let rows = tx
                .execute(&self.sql.replay(&condition), &[])
                .await
                .map_err(sql_error(&format!(
                    "cannot set {} back to NULL on the matching rows of {}",
                    self.column, self.table
                )))?;
            tx.commit()
                .await
                .map_err(sql_error("cannot commit the replay"))?;
            rows
        } else {
            let tx = client
                .build_transaction()
                .read_only(true)
                .start()
                .await
                .map_err(sql_error("cannot begin a read-only transaction"))?;
            let count: i64 = tx
                .query_one(&self.sql.replay_count(&condition), &[])
                .await
                .map_err(sql_error(&format!(
                    "cannot count the matching published rows of {}",
                    self.table
                )))?
                .get(0);
            tx.rollback()
                .await
                .map_err(sql_error("cannot end the read-only transaction"))?;
            u64::try_from(count).unwrap_or(0)
        };
        Ok(ReplayOutcome {
            table: self.table.clone(),
            column: self.column.clone(),
            rows,
            applied: confirm,
        })
    }
}

/// `walrelay replay`: [`Replay::new`] then [`Replay::run`].
pub(crate) async fn replay(
    postgres: &PostgresConfig,
    outbox: &OutboxConfig,
    source: &SourceConfig,
    poll: &PollConfig,
    condition: &ReplayCondition,
    confirm: bool,
) -> Result<ReplayOutcome, ReplayError> {
    Replay::new(postgres, outbox, source, poll)?
        .run(condition, confirm)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sections(kind: SourceKind, on_publish: OnPublish) -> (SourceConfig, PollConfig) {
        (
            SourceConfig { kind },
            PollConfig {
                on_publish,
                order_by: vec!["seq".into()],
                ..PollConfig::default()
            },
        )
    }

    fn postgres() -> PostgresConfig {
        toml::from_str("host = \"127.0.0.1\"\nuser = \"walrelay\"\ndbname = \"app\"\n")
            .expect("postgres section")
    }

    fn outbox() -> OutboxConfig {
        toml::from_str("table = \"public.outbox\"\n").expect("outbox section")
    }

    #[test]
    fn refused_unless_polling_in_mark_mode() {
        let (source, poll) = sections(SourceKind::Wal, OnPublish::Mark);
        let err = Replay::new(&postgres(), &outbox(), &source, &poll).unwrap_err();
        assert!(err.is_refusal(), "{err}");
        assert!(err.to_string().contains("source.kind = \"poll\""), "{err}");

        let (source, poll) = sections(SourceKind::Poll, OnPublish::Delete);
        let err = Replay::new(&postgres(), &outbox(), &source, &poll).unwrap_err();
        assert!(err.is_refusal(), "{err}");
        assert!(
            err.to_string().contains("poll.on_publish = \"mark\""),
            "{err}"
        );

        let (source, poll) = sections(SourceKind::Poll, OnPublish::Mark);
        let replay = Replay::new(&postgres(), &outbox(), &source, &poll).expect("mark mode");
        assert_eq!(replay.table, "public.outbox");
        assert_eq!(replay.column, "published_at");
    }

    #[test]
    fn exactly_one_condition() {
        let both = ReplayCondition::from_options(Some("id = 1".into()), Some("2026-01-01".into()));
        assert!(both.is_err_and(|e| e.is_refusal() && e.to_string().contains("not both")));
        let neither = ReplayCondition::from_options(None, None);
        assert!(neither.is_err_and(|e| e.to_string().contains("--where")));
        let empty = ReplayCondition::from_options(Some("  ".into()), None);
        assert!(empty.is_err_and(|e| e.to_string().contains("--where is empty")));
        assert_eq!(
            ReplayCondition::from_options(None, Some("2026-01-01".into())).unwrap(),
            ReplayCondition::Since("2026-01-01".into())
        );
        assert_eq!(
            ReplayCondition::from_options(Some("seq > 10".into()), None).unwrap(),
            ReplayCondition::Where("seq > 10".into())
        );
    }

    #[test]
    fn outcome_says_whether_anything_changed() {
        let mut outcome = ReplayOutcome {
            table: "public.outbox".into(),
            column: "published_at".into(),
            rows: 3,
            applied: false,
        };
        let text = outcome.to_string();
        assert!(
            text.starts_with("3 published row(s) of public.outbox match; nothing was changed"),
            "{text}"
        );
        assert!(text.contains("--yes"), "{text}");
        outcome.applied = true;
        assert_eq!(
            outcome.to_string(),
            "set published_at back to NULL on 3 row(s) of public.outbox: walrelay publishes them again"
        );
    }
}
