//! `walrelay check`: a read-only preflight of everything walrelay needs from
//! PostgreSQL and Kafka, as a pass/warn/fail table with a fix for each failure.
//!
//! Owns the checks and their wording: connections and authentication (SQL and
//! replication), `wal_level`, slot and WAL sender capacity, the role's
//! attributes and privileges, each outbox table's columns against its
//! routing (through [`Router::check_layout_with`], so it judges the layout
//! exactly as the stream will; one `outbox table` and one `outbox
//! privileges` row per table, each naming it), the publication and the slot
//! as walrelay would find them (for an existing publication, a suggestion
//! to stop publishing the deletes walrelay drops), failover slots and the
//! standbys that keep them (PostgreSQL 17+),
//! `max_slot_wal_keep_size`, Kafka reachability and the topics the
//! router would produce to, and in exactly-once mode the transactional id
//! and the progress topic. With the polling source (`source.kind = "poll"`)
//! the WAL rows give way to the polling source's own: a server that takes
//! writes (no `wal_level = logical`, no slot, no publication), the `[poll]`
//! columns and their types, whether the order follows insertion, the index
//! a claim uses, the privileges its statements need, and who holds each
//! shard lock. It must never change anything: no slot, no
//! publication, no topic is created or altered (the progress topic is only
//! described, and `init_transactions` is never called: it would fence a
//! running instance; no shard lock is taken), and every statement it runs
//! is a catalog read or a bounded `SELECT`, all of them in
//! [`catalog::preflight`], [`catalog::capability`] and, for the polling
//! source, [`poll_sql`] (this module builds no SQL). What the server lacks is
//! worded by [`catalog::capability`], so
//! `walrelay check` and a refused start say the same thing. Every network step is
//! bounded by a timeout, so an unreachable server costs one row, not a hang.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use tokio_postgres::Client;
use walrelay_proto::{RelationColumnInfo, RelationInfo};

use crate::config::Config;

use crate::chain::DisplayChain;
use crate::connect::pg::oid;
use crate::human::human_bytes;
use crate::postgres::catalog::capability::{self, ServerFacts, Unsupported};
use crate::postgres::catalog::preflight::{self, OutboxTable};
use crate::postgres::catalog::{self, SlotState};
use crate::postgres::config::{PublicationMode, SlotMissing};
use crate::postgres::hosts::{HostsError, Refusal};
use crate::postgres::poll::config::{OnPublish, PollConfig, SourceKind};
use crate::postgres::poll::sql::{
    self as poll_sql, LockHolder, PollSql, TableColumn, TableIndex, TablePrivileges,
};
use crate::postgres::poll::PollError;
use crate::postgres::replication::{
    quote_ident, ConnectParams, ReplicationConnection, ReplicationError,
};
use crate::router::{
    native_column_option, ColumnMeta, RouteError, Router, TableMeta, KEY_HEADERS_FIELD,
    KEY_ROUTE_BY_FIELD,
};
use crate::sink::progress_topic::{self, ProgressTopicError, TopicFacts};
use crate::txn::config::OutboxTableSpec;

/// Row: an ordinary SQL connection with the configured credentials.
pub const POSTGRES_CONNECTION: &str = "postgres connection";
/// Row: with several hosts in `postgres.host`, what each one is.
pub const POSTGRES_HOSTS: &str = "postgres hosts";
/// Row: a replication connection and `IDENTIFY_SYSTEM`.
pub const REPLICATION_CONNECTION: &str = "replication connection";
/// Row: PostgreSQL 14 or later, and the pgoutput protocol walrelay will use.
pub const SERVER_VERSION: &str = "server version";
/// Row: the pgoutput output plugin is installed.
pub const OUTPUT_PLUGIN: &str = "output plugin";
/// Row: `wal_level = logical`.
pub const WAL_LEVEL: &str = "wal_level";
/// Row: the role's REPLICATION attribute.
pub const ROLE: &str = "role attributes";
/// Row: a free replication slot (or ours already exists).
pub const SLOT_CAPACITY: &str = "replication slots";
/// Row: a free WAL sender.
pub const WAL_SENDERS: &str = "wal senders";
/// Row: `max_slot_wal_keep_size`.
pub const MAX_SLOT_WAL_KEEP_SIZE: &str = "max_slot_wal_keep_size";
/// Row: an outbox table and the columns the router reads (one per table,
/// its detail naming the table).
pub const OUTBOX_TABLE: &str = "outbox table";
/// Row: SELECT on an outbox table, and ownership when walrelay creates the
/// publication (one per table); with the polling source, the privileges its statements
/// need (SELECT, UPDATE, and DELETE when rows are deleted).
pub const OUTBOX_PRIVILEGES: &str = "outbox privileges";
/// Row: the publication.
pub const PUBLICATION: &str = "publication";
/// Row: the operations an existing publication publishes, with a
/// suggestion when it sends deletes or truncates a table outbox drops.
pub const PUBLISHED_OPERATIONS: &str = "published operations";
/// Row: which logical decoding messages are events, and what that implies.
pub const MESSAGES: &str = "logical decoding messages";
/// Row: the replication slot.
pub const SLOT: &str = "replication slot";
/// Row: the slot as a failover slot (with `replication.failover`, or when
/// the slot is one).
pub const FAILOVER_SLOT: &str = "failover slot";
/// Row: the primary's `synchronized_standby_slots` (with a failover slot).
pub const STANDBY_SLOTS: &str = "synchronized_standby_slots";
/// Row: a standby that synchronizes slots (with a failover slot).
pub const SLOT_SYNC: &str = "slot sync standby";
/// Row: a Kafka metadata request.
pub const KAFKA_CONNECTION: &str = "kafka connection";
/// Row: the topics the router would produce to.
pub const KAFKA_TOPICS: &str = "kafka topics";
/// Row: exactly-once mode (with `kafka.exactly_once`): transactional id
/// and pipeline.
pub const EXACTLY_ONCE: &str = "exactly-once";
/// Row: the progress topic (with `kafka.exactly_once`): compacted, or
/// missing and created at start.
pub const PROGRESS_TOPIC: &str = "progress topic";
/// Row (polling source): the server takes the polling source's writes; no
/// replication slot, publication or `wal_level = logical` is needed.
pub const POLL_SOURCE: &str = "polling source";
/// Row (polling source): every column a `[poll]` key names exists.
pub const POLL_COLUMNS: &str = "poll columns";
/// Row (polling source): the published marker is a nullable time without a
/// default (mark mode), or there is none (delete mode).
pub const PUBLISHED_COLUMN: &str = "published column";
/// Row (polling source, with `poll.created_column`): a time.
pub const CREATED_COLUMN: &str = "created column";
/// Row (polling source): whether `poll.order_by` follows insertion order.
pub const CLAIM_ORDER: &str = "claim order";
/// Row (polling source): an index that serves the claim.
pub const CLAIM_INDEX: &str = "claim index";
/// Row (polling source): who holds each shard's lock now (read, never taken).
pub const SHARD_LOCKS: &str = "shard locks";

/// Why the order column must follow insertion order, for the claim order
/// warnings.
const ORDER_WHY: &str = "rows are claimed in poll.order_by order, so an aggregate's events reach \
     Kafka in that order; the leading order column must grow as rows are inserted, or an \
     aggregate's later event can sort (and be published) before its earlier one";

/// Most distinct route values read from the outbox to name topics.
pub const ROUTE_VALUE_LIMIT: i64 = 100;
/// Bound on each Kafka request (metadata, broker configuration).
pub const KAFKA_TIMEOUT: Duration = Duration::from_secs(10);
/// The broker setting that lets a producer create topics by writing to them.
pub const AUTO_CREATE_TOPICS: &str = "auto.create.topics.enable";

/// Outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CheckStatus {
    /// Fine.
    Pass,
    /// Works, but deserves attention.
    Warn,
    /// walrelay would not start or would stop.
    Fail,
    /// Not run because an earlier check failed.
    Skip,
}

impl CheckStatus {
    fn label(self) -> &'static str {
        match self {
            CheckStatus::Pass => "pass",
            CheckStatus::Warn => "WARN",
            CheckStatus::Fail => "FAIL",
            CheckStatus::Skip => "skip",
        }
    }
}

/// One row of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckRow {
    /// What was checked (one of the row constants of this module).
    pub name: &'static str,
    /// The outcome.
    pub status: CheckStatus,
    /// What was found.
    pub detail: String,
    /// How to fix it; set for every failure and for most warnings.
    pub fix: Option<String>,
}

/// Every row of one `walrelay check` run, in the order they are shown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// The rows.
    pub rows: Vec<CheckRow>,
}

impl CheckReport {
    /// Whether no check failed (warnings and skips after no failure pass).
    pub fn passed(&self) -> bool {
        self.rows.iter().all(|r| r.status != CheckStatus::Fail)
    }

    /// The row called `name`, if it was produced.
    pub fn row(&self, name: &str) -> Option<&CheckRow> {
        self.rows.iter().find(|r| r.name == name)
    }

    /// The failed rows.
    pub fn failures(&self) -> impl Iterator<Item = &CheckRow> {
        self.rows.iter().filter(|r| r.status == CheckStatus::Fail)
    }

    fn push(&mut self, name: &'static str, status: CheckStatus, detail: impl Into<String>) {
        self.rows.push(CheckRow {
            name,
            status,
            detail: detail.into(),
            fix: None,
        });
    }

    fn pass(&mut self, name: &'static str, detail: impl Into<String>) {
        self.push(name, CheckStatus::Pass, detail);
    }

    fn warn(&mut self, name: &'static str, detail: impl Into<String>, fix: impl Into<String>) {
        self.push(name, CheckStatus::Warn, detail);
        self.set_fix(fix);
    }

    fn fail(&mut self, name: &'static str, detail: impl Into<String>, fix: impl Into<String>) {
        self.push(name, CheckStatus::Fail, detail);
        self.set_fix(fix);
    }

    fn skip(&mut self, name: &'static str, why: &str) {
        self.push(name, CheckStatus::Skip, format!("not checked: {why}"));
    }

    fn set_fix(&mut self, fix: impl Into<String>) {
        if let Some(last) = self.rows.last_mut() {
            last.fix = Some(fix.into());
        }
    }
}

impl fmt::Display for CheckReport {
    /// The table: status, check, detail, and an indented `fix:` line under
    /// each row that has one; then a one-line summary.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self
            .rows
            .iter()
            .map(|r| r.name.len())
            .max()
            .unwrap_or(0)
            .max("CHECK".len());
        writeln!(f, "{:<6}  {:<width$}  DETAIL", "STATUS", "CHECK")?;
        for r in &self.rows {
            writeln!(
                f,
                "{:<6}  {:<width$}  {}",
                r.status.label(),
                r.name,
                r.detail
            )?;
            if let Some(fix) = &r.fix {
                writeln!(f, "{:<6}  {:<width$}  fix: {fix}", "", "")?;
            }
        }
        let count = |s: CheckStatus| self.rows.iter().filter(|r| r.status == s).count();
        write!(
            f,
            "{} passed, {} warnings, {} failed, {} skipped",
            count(CheckStatus::Pass),
            count(CheckStatus::Warn),
            count(CheckStatus::Fail),
            count(CheckStatus::Skip)
        )?;
        if self.passed() {
            writeln!(f, ": walrelay can start")
        } else {
            writeln!(f, ": fix the failures above before starting walrelay")
        }
    }
}

/// Why a step of a check could not be completed.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// A step did not finish within its bound.
    #[error("{what} did not answer within {timeout:?}")]
    Timeout {
        /// The step.
        what: String,
        /// The bound.
        timeout: Duration,
    },
    /// A catalog query failed.
    #[error("{context}")]
    Sql {
        /// What was being read.
        context: String,
        /// The driver's error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// Catalog work shared with the relay failed.
    #[error(transparent)]
    Catalog(#[from] catalog::CatalogError),
    /// A Kafka request failed.
    #[error("{context}")]
    Kafka {
        /// What was being asked.
        context: String,
        /// librdkafka's error.
        #[source]
        source: KafkaError,
    },
}

/// Runs `fut`, failing with [`CheckError::Timeout`] after `timeout`.
async fn bounded<T, E>(
    what: &str,
    timeout: Duration,
    fut: impl Future<Output = Result<T, E>>,
) -> Result<T, CheckError>
where
    E: Into<CheckError>,
{
    match tokio::time::timeout(timeout, fut).await {
        Ok(result) => result.map_err(Into::into),
        Err(_) => Err(CheckError::Timeout {
            what: what.to_owned(),
            timeout,
        }),
    }
}

/// A catalog read with its context.
async fn read<T>(
    what: &str,
    timeout: Duration,
    fut: impl Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, CheckError> {
    let fut = async {
        fut.await.map_err(|source| CheckError::Sql {
            context: format!("cannot read {what}"),
            source,
        })
    };
    bounded(what, timeout, fut).await
}

/// The SQLSTATE behind a [`CheckError`], if the server sent one.
fn sqlstate(e: &CheckError) -> Option<&str> {
    match e {
        CheckError::Sql { source, .. }
        | CheckError::Catalog(catalog::CatalogError::Sql { source, .. }) => {
            source.code().map(|c| c.code())
        }
        _ => None,
    }
}

/// Runs every check against the servers `config` names and returns the
/// report. Read-only; each step is bounded (PostgreSQL by
/// `postgres.connect_timeout_ms`, Kafka by [`KAFKA_TIMEOUT`]), and PostgreSQL
/// and Kafka are checked concurrently.
pub async fn run_check(config: &Config) -> CheckReport {
    let (mut pg, kafka) = tokio::join!(check_postgres(config), check_kafka(config));
    let route_values = pg.route_values.take();
    let mut report = pg.report;
    kafka.report_connection(&mut report);
    check_topics(config, route_values, &kafka, &mut report);
    if config.kafka.exactly_once {
        let progress = match &kafka.metadata {
            Ok(_) => Some(
                progress_topic::inspect(
                    &kafka_client_config(config),
                    &config.kafka.transactions.progress_topic,
                )
                .await,
            ),
            Err(_) => None,
        };
        exactly_once_rows(config, progress, &mut report);
    }
    report
}

/// The client configuration of the producer's brokers and security
/// settings.
fn kafka_client_config(config: &Config) -> ClientConfig {
    let kafka = &config.kafka;
    let mut cc = ClientConfig::new();
    for (k, v) in kafka.properties() {
        cc.set(k, v);
    }
    cc.set("bootstrap.servers", &kafka.bootstrap_servers);
    cc
}

/// The exactly-once rows: the mode, and the progress topic as
/// [`progress_topic::inspect`] found it (`None`: Kafka unreachable).
fn exactly_once_rows(
    config: &Config,
    progress: Option<Result<Option<TopicFacts>, ProgressTopicError>>,
    report: &mut CheckReport,
) {
    let t = &config.kafka.transactions;
    let slot = &config.replication.slot;
    report.pass(
        EXACTLY_ONCE,
        format!(
            "on: transactional id {}, pipeline {}; a Kafka transaction commits at {} events, {} \
             or {} ms, timeout {} ms",
            t.transactional_id_for(slot),
            t.pipeline_name(slot),
            t.max_events,
            human_bytes(t.max_bytes),
            t.interval_ms,
            t.timeout_ms
        ),
    );
    let topic = &t.progress_topic;
    match progress {
        None => report.skip(PROGRESS_TOPIC, "kafka unreachable"),
        Some(Ok(None)) => {
            let rf = match t.progress_topic_replication_factor {
                -1 => "the broker's default replication factor".to_owned(),
                n => format!("replication factor {n}"),
            };
            report.pass(
                PROGRESS_TOPIC,
                format!(
                    "{topic} missing: walrelay creates it at start with {} partition(s), {rf}, \
                     cleanup.policy=compact",
                    t.progress_topic_partitions
                ),
            );
        }
        Some(Ok(Some(facts))) if facts.compacted() => report.pass(
            PROGRESS_TOPIC,
            format!(
                "{topic}: {} partition(s), replication factor {}, cleanup.policy={}",
                facts.partitions, facts.replication_factor, facts.cleanup_policy
            ),
        ),
        Some(Ok(Some(facts))) => report.fail(
            PROGRESS_TOPIC,
            format!(
                "{topic} has cleanup.policy={}, without compact: its progress records would be \
                 deleted, and walrelay refuses to start",
                facts.cleanup_policy
            ),
            format!(
                "kafka-configs.sh --alter --entity-type topics --entity-name {topic} \
                 --add-config cleanup.policy=compact, or name another topic in \
                 kafka.transactions.progress_topic"
            ),
        ),
        Some(Err(e)) => report.fail(
            PROGRESS_TOPIC,
            format!("cannot describe {topic}: {}", DisplayChain(&e)),
            format!(
                "walrelay needs DESCRIBE and DESCRIBE_CONFIGS on topic {topic} (and CREATE while \
                 it does not exist)"
            ),
        ),
    }
}

/// What the PostgreSQL checks found that the Kafka checks need.
struct PgOutcome {
    report: CheckReport,
    /// Distinct route values in the outbox (`None`: could not be read).
    route_values: Option<Result<Vec<String>, String>>,
}

/// What walrelay would do about the publication at start.
enum PublicationAction {
    /// Nothing: it exists and fits.
    None,
    /// `CREATE PUBLICATION ...` (the statement, for messages).
    Create { statement: String, all_tables: bool },
    /// `ALTER PUBLICATION ... SET TABLE` (mode `filtered`).
    Alter { owner_ok: bool },
}

async fn check_postgres(config: &Config) -> PgOutcome {
    let mut report = CheckReport::default();
    let params = ConnectParams::from_config(&config.postgres);
    let timeout = params.connect_timeout;
    let pg = &config.postgres;
    let addr = params.hosts_label();
    let tables = match config.outbox.tables() {
        Ok(tables) => tables,
        Err(e) => {
            report.fail(
                OUTBOX_TABLE,
                DisplayChain(&e).to_string(),
                "set outbox.table, or each outbox.tables entry's name, to schema.table",
            );
            return PgOutcome {
                report,
                route_values: None,
            };
        }
    };

    let poll = config.source.kind == SourceKind::Poll;
    // Under its own application_name, so the WAL sender count below can
    // leave it out if its walsender has not exited yet.
    let check_app = format!("{}-check", params.application_name);
    let mut repl_params = params.clone();
    repl_params.application_name = check_app.clone();
    // Both connections (and, with several hosts, a look at each) at once:
    // an unreachable server costs one timeout. The polling source opens no
    // replication connection.
    let (client, replication, hosts) = tokio::join!(
        bounded(
            "the sql connection",
            params.connect_bound(),
            catalog::connect_with_host(&params)
        ),
        async {
            if poll {
                None
            } else {
                Some(check_replication_connection(&repl_params, &addr).await)
            }
        },
        describe_hosts(&params)
    );
    let client = match client {
        Ok((c, on)) => {
            let version = match tokio::time::timeout(timeout, preflight::server_version(&c)).await {
                Ok(Ok(version)) => format!(", PostgreSQL {version}"),
                _ => String::new(),
            };
            let target = if params.hosts.len() > 1 {
                format!(" (target_session_attrs = {})", params.target_session_attrs)
            } else {
                String::new()
            };
            report.pass(
                POSTGRES_CONNECTION,
                format!(
                    "{on}{target} database {} as {}{version}",
                    pg.dbname, pg.user
                ),
            );
            if let Some(row) = hosts {
                report.rows.push(row.finish(Some(&on)));
            }
            // Bounds every later statement on the server side as well.
            let _ =
                tokio::time::timeout(timeout, preflight::set_statement_timeout(&c, timeout)).await;
            Some(c)
        }
        Err(e) => {
            let target = match &e {
                CheckError::Catalog(catalog::CatalogError::Hosts(hosts)) => target_fix(hosts),
                _ => None,
            };
            let fix = if let Some(fix) = target {
                fix
            } else if tls_refused(&e) {
                TLS_FIX.to_owned()
            } else {
                connection_fix(sqlstate(&e), &config.postgres.user, &addr, &pg.dbname)
            };
            report.fail(POSTGRES_CONNECTION, DisplayChain(&e).to_string(), fix);
            if let Some(row) = hosts {
                report.rows.push(row.finish(None));
            }
            None
        }
    };
    if let Some(row) = replication {
        report.rows.push(row);
    }

    let Some(client) = client else {
        if poll {
            for name in [
                SERVER_VERSION,
                POLL_SOURCE,
                OUTBOX_TABLE,
                POLL_COLUMNS,
                PUBLISHED_COLUMN,
                CLAIM_ORDER,
                CLAIM_INDEX,
                OUTBOX_PRIVILEGES,
                SHARD_LOCKS,
            ] {
                report.skip(name, "no sql connection");
            }
            return PgOutcome {
                report,
                route_values: None,
            };
        }
        for name in [
            SERVER_VERSION,
            WAL_LEVEL,
            ROLE,
            SLOT_CAPACITY,
            WAL_SENDERS,
            MAX_SLOT_WAL_KEEP_SIZE,
            OUTBOX_TABLE,
            OUTBOX_PRIVILEGES,
            PUBLICATION,
            SLOT,
        ] {
            report.skip(name, "no sql connection");
        }
        if config.replication.failover {
            report.skip(FAILOVER_SLOT, "no sql connection");
        }
        return PgOutcome {
            report,
            route_values: None,
        };
    };

    let server = read(
        "the server's version and settings",
        timeout,
        capability::server_facts(&client),
    )
    .await;
    if poll {
        // The configuration allows the polling source one table.
        let route_values =
            check_poll(&mut report, config, &client, timeout, &server, &tables[0]).await;
        return PgOutcome {
            report,
            route_values,
        };
    }
    check_server_version(&mut report, config, &server);
    check_wal_level(&mut report, &client, timeout).await;
    let superuser = check_role(&mut report, &client, timeout, &pg.user).await;
    check_output_plugin(&mut report, &client, timeout, superuser).await;
    check_capacity(&mut report, config, &client, timeout, &check_app).await;
    check_keep_size(&mut report, &client, timeout).await;

    check_messages(&mut report, config);
    if !config.outbox.source.table() {
        // A messages-only pipeline reads no table.
        for name in [OUTBOX_TABLE, OUTBOX_PRIVILEGES] {
            report.skip(name, "outbox.source = \"messages\": events come from logical decoding messages, no table is read");
        }
        check_message_publication(&mut report, config, &client, timeout).await;
        check_slot(&mut report, config, &client, timeout).await;
        check_failover(&mut report, config, &client, timeout, &server).await;
        return PgOutcome {
            report,
            route_values: None,
        };
    }
    // One table row per outbox table, then one privileges row per table,
    // then the publication (which names them all).
    let mut all_facts = Vec::with_capacity(tables.len());
    let mut route_values: Option<Result<Vec<String>, String>> = None;
    for spec in &tables {
        let qualified = spec.qualified();
        let facts = match outbox_facts(&client, timeout, &spec.schema, &spec.table).await {
            Ok(Some(f)) => Some(f),
            Ok(None) => {
                report.fail(
                    OUTBOX_TABLE,
                    format!(
                        "{qualified} does not exist in database {} (or is not a table)",
                        pg.dbname
                    ),
                    format!(
                        "create the outbox table, or set {} to the table your services write to (schema.table)",
                        table_key(spec)
                    ),
                );
                None
            }
            Err(e) => {
                report.fail(
                    OUTBOX_TABLE,
                    format!("{qualified}: {}", DisplayChain(&e)),
                    "make sure the role can read the catalog (pg_class, pg_attribute)",
                );
                None
            }
        };
        if let Some(f) = &facts {
            if let Some(route) = check_columns(&mut report, config, &client, timeout, f, spec).await
            {
                let values = read_route_values(&client, timeout, spec, &route)
                    .await
                    .map_err(|e| DisplayChain(&e).to_string());
                route_values = Some(match (route_values.take(), values) {
                    (None, v) => v,
                    (Some(Err(e)), _) | (Some(Ok(_)), Err(e)) => Err(e),
                    (Some(Ok(mut all)), Ok(more)) => {
                        for v in more {
                            if !all.contains(&v) {
                                all.push(v);
                            }
                        }
                        Ok(all)
                    }
                });
            }
        }
        all_facts.push(facts);
    }

    let (action, state) = check_publication(&mut report, config, &client, timeout, &tables).await;
    let publication_row = report
        .rows
        .iter()
        .rposition(|r| r.name == PUBLICATION)
        .map(|i| report.rows.remove(i));
    for (spec, facts) in tables.iter().zip(&all_facts) {
        check_privileges(
            &mut report,
            facts.as_ref(),
            action.as_ref(),
            superuser,
            &pg.user,
            &spec.qualified(),
        );
    }
    // Keep the table order stable: privileges right after the tables.
    report.rows.extend(publication_row);
    if let Some(state) = state {
        check_published_operations(&mut report, config, &state);
    }
    check_slot(&mut report, config, &client, timeout).await;
    check_failover(&mut report, config, &client, timeout, &server).await;
    PgOutcome {
        report,
        route_values,
    }
}

/// What the pipeline does with logical decoding messages, said plainly:
/// the prefixes that are events, that large transactions then arrive
/// whole, and what a non-transactional message becomes.
fn check_messages(report: &mut CheckReport, config: &Config) {
    use crate::txn::config::{NonTransactional, PrefixRule};
    let Some(sel) = config.outbox.message_selection() else {
        return;
    };
    let prefixes = match &sel.rule {
        PrefixRule::Exact(list) => format!("prefix {}", list.join(", ")),
        PrefixRule::Include(res) => format!(
            "prefixes matching {} (message.prefix.include.list, case-insensitive)",
            res.iter()
                .map(|r| r.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        PrefixRule::Exclude(res) => format!(
            "every prefix except those matching {} (message.prefix.exclude.list)",
            res.iter()
                .map(|r| r.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        PrefixRule::All => "every prefix (no message.prefix.include.list)".to_owned(),
    };
    if config.debezium.message_form == crate::router::MessageForm::Envelope {
        report.pass(
            MESSAGES,
            format!(
                "logical decoding messages with {prefixes} go to {}.message as Debezium's message \
                 records (no decode transform: the EventRouter passes them through), \
                 non-transactional ones too; large transactions arrive whole at their commit",
                config.debezium.topic_prefix
            ),
        );
        return;
    }
    let mut detail = format!(
        "events from pg_logical_emit_message(true, ...) with {prefixes}, besides {}; large \
         transactions arrive whole at their commit (pgoutput cannot tell a rolled-back \
         savepoint's messages apart while streaming)",
        if config.outbox.source.table() {
            "the outbox table's rows"
        } else {
            "no table"
        }
    );
    match sel.non_transactional {
        NonTransactional::Error => {
            detail.push_str(
                "; a non-transactional message with such a prefix is refused as bad input ([errors] applies)",
            );
            report.pass(MESSAGES, detail);
        }
        NonTransactional::Skip => {
            detail.push_str("; a non-transactional message with such a prefix is dropped (outbox.non_transactional = \"skip\")");
            report.pass(MESSAGES, detail);
        }
        NonTransactional::Deliver => {
            detail.push_str(
                "; a non-transactional message (pg_logical_emit_message(false, ...)) is published \
                 even when its transaction rolls back, as Debezium publishes it",
            );
            report.warn(
                MESSAGES,
                detail,
                "write outbox events with pg_logical_emit_message(true, ...) only (the \
                 deploy/postgresql/outbox_emit.sql helper does), or narrow \
                 message.prefix.include.list to the prefixes your services write transactionally",
            );
        }
    }
}

/// The publication of a messages-only pipeline: it must exist (or be
/// creatable); tables in it only cost decoding.
async fn check_message_publication(
    report: &mut CheckReport,
    config: &Config,
    client: &Client,
    timeout: Duration,
) {
    let publication = &config.replication.publication;
    let state = read(
        "the publication",
        timeout,
        preflight::publication_state(client, publication, "", ""),
    )
    .await
    .map(|state| state.map(|p| (p.all_tables, i64::from(p.table_count))));
    match state {
        Err(e) => report.fail(
            PUBLICATION,
            DisplayChain(&e).to_string(),
            "make sure the role can read pg_publication",
        ),
        Ok(None) => {
            let creatable = match config.replication.publication_mode {
                crate::postgres::config::PublicationMode::Table => config.replication.create_publication,
                crate::postgres::config::PublicationMode::NoTables
                | crate::postgres::config::PublicationMode::AllTables => true,
                _ => false,
            };
            if creatable {
                report.pass(
                    PUBLICATION,
                    format!("{publication} does not exist yet; walrelay creates it without tables at start (messages need no table)"),
                );
            } else {
                report.fail(
                    PUBLICATION,
                    format!("{publication} does not exist, and the configuration does not let walrelay create it"),
                    format!("CREATE PUBLICATION {} (no tables: pgoutput sends messages whatever it publishes)", quote_ident(publication)),
                );
            }
        }
        Ok(Some((all, 0))) if !all => report.pass(
            PUBLICATION,
            format!("{publication} exists and publishes no table (messages need none)"),
        ),
        Ok(Some((all, tables))) => report.warn(
            PUBLICATION,
            if all {
                format!("{publication} is FOR ALL TABLES; this pipeline reads logical decoding messages only")
            } else {
                format!("{publication} publishes {tables} table(s); this pipeline reads logical decoding messages only")
            },
            "the walsender decodes and sends those tables' changes for nothing: use a publication without tables",
        ),
    }
}

/// How to fix a refused TLS handshake or certificate.
const TLS_FIX: &str = "the TLS handshake or a certificate was refused: check postgres.sslmode, \
     postgres.sslrootcert (the CA that signed the server's certificate; \"system\" for the system's \
     trust store), that postgres.host is a name the server's certificate carries (verify-full), and \
     postgres.sslcert / sslkey when the server asks for a client certificate";

/// Whether `error` is, somewhere in its chain, a TLS failure that a retry
/// does not fix (a refused certificate or handshake).
fn tls_refused(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(error);
    while let Some(e) = source {
        if let Some(tls) = e.downcast_ref::<crate::postgres::tls::TlsError>() {
            return !tls.is_transient();
        }
        source = e.source();
    }
    false
}

/// How to fix a host list none of whose servers fits
/// `target_session_attrs`, when at least one answered but failed the test.
fn target_fix<E>(error: &HostsError<E>) -> Option<String> {
    error
        .attempts
        .iter()
        .any(|a| matches!(a.refusal, Refusal::Mismatch(_)))
        .then(|| {
            format!(
                "no host that answered is what postgres.target_session_attrs = {} asks for: list the server walrelay should stream from in postgres.host, correct postgres.target_session_attrs, or wait for the failover to finish (walrelay retries)",
                error.target
            )
        })
}

/// How to fix a failed connection, by SQLSTATE.
fn connection_fix(code: Option<&str>, user: &str, addr: &str, dbname: &str) -> String {
    match code {
        Some("28P01") => format!(
            "the password of role {user} was rejected: check postgres.password / password_env / password_file"
        ),
        Some("28000") => format!(
            "pg_hba.conf has no line that lets role {user} connect to database {dbname} from this host, or the role may not log in: add a host line for it (and ALTER ROLE {user} LOGIN), then reload PostgreSQL"
        ),
        Some("3D000") => format!("database {dbname} does not exist: check postgres.dbname"),
        Some("53300") => "the server has no free connection slots: raise max_connections or close idle connections".to_owned(),
        Some(_) => format!("check postgres.user ({user}), the password and postgres.dbname ({dbname})"),
        None => format!(
            "check postgres.host and postgres.port ({addr}), that PostgreSQL listens there (listen_addresses) and that nothing blocks the port; raise postgres.connect_timeout_ms for a slow network"
        ),
    }
}

/// The [`POSTGRES_HOSTS`] row before the host walrelay chose is known.
struct HostsRow {
    /// Each host and what it is.
    hosts: Vec<(String, String)>,
    /// The unreachable ones.
    unreachable: Vec<String>,
}

impl HostsRow {
    /// The row, with `chosen` marked as the host walrelay is on.
    fn finish(self, chosen: Option<&crate::postgres::config::Endpoint>) -> CheckRow {
        let chosen = chosen.map(ToString::to_string);
        let detail = self
            .hosts
            .iter()
            .map(|(host, what)| {
                if chosen.as_deref() == Some(host.as_str()) {
                    format!("{host} {what} (walrelay's choice)")
                } else {
                    format!("{host} {what}")
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        let (status, fix) = if self.unreachable.is_empty() {
            (CheckStatus::Pass, None)
        } else {
            (
                CheckStatus::Warn,
                Some(format!(
                    "walrelay cannot fail over to {}: check that it runs and that this host reaches it, or remove it from postgres.host",
                    self.unreachable.join(", ")
                )),
            )
        };
        CheckRow {
            name: POSTGRES_HOSTS,
            status,
            detail,
            fix,
        }
    }
}

/// With several hosts in `postgres.host`: connects to each (any server,
/// each within the connect timeout, all at once) and says whether it is a
/// primary, a standby or unreachable. `None` for one host.
async fn describe_hosts(params: &ConnectParams) -> Option<HostsRow> {
    if params.hosts.len() < 2 {
        return None;
    }
    let timeout = params.connect_timeout;
    let looks = params.hosts.iter().map(|endpoint| async move {
        let one = params.only(endpoint);
        let look = async {
            let client = catalog::connect(&one).await?;
            read(
                "the server's role",
                timeout,
                preflight::server_role(&client),
            )
            .await
        };
        (
            endpoint.to_string(),
            bounded("the sql connection", timeout, look).await,
        )
    });
    let mut row = HostsRow {
        hosts: Vec::new(),
        unreachable: Vec::new(),
    };
    for (host, look) in futures_util::future::join_all(looks).await {
        let what = match look {
            Ok((true, _)) => "standby".to_owned(),
            Ok((false, true)) => "primary (read-only)".to_owned(),
            Ok((false, false)) => "primary".to_owned(),
            Err(e) => {
                row.unreachable.push(host.clone());
                format!("unreachable ({})", DisplayChain(&e))
            }
        };
        row.hosts.push((host, what));
    }
    Some(row)
}

async fn check_replication_connection(params: &ConnectParams, addr: &str) -> CheckRow {
    let timeout = params.connect_bound() + params.connect_timeout;
    let attempt = async {
        let mut conn = ReplicationConnection::connect(params).await?;
        let on = conn.endpoint().to_string();
        conn.identify_system().await.map(|id| (on, id))
    };
    let row = |status, detail: String, fix: Option<String>| CheckRow {
        name: REPLICATION_CONNECTION,
        status,
        detail,
        fix,
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(Ok((on, id))) => row(
            CheckStatus::Pass,
            format!(
                "{on} IDENTIFY_SYSTEM: system {}, timeline {}, wal at {}",
                id.system_id, id.timeline, id.xlogpos
            ),
            None,
        ),
        Ok(Err(e)) => row(
            CheckStatus::Fail,
            DisplayChain(&e).to_string(),
            Some(replication_fix(&e, &params.user, addr, &params.dbname)),
        ),
        Err(_) => row(
            CheckStatus::Fail,
            format!("no answer from {addr} within {timeout:?}"),
            Some(connection_fix(None, &params.user, addr, &params.dbname)),
        ),
    }
}

fn replication_fix(e: &ReplicationError, user: &str, addr: &str, dbname: &str) -> String {
    match e {
        ReplicationError::Server { code, message, .. } => {
            if code == "42501" {
                format!(
                    "role {user} may not start a walsender: ALTER ROLE {user} REPLICATION (or use a role that has it)"
                )
            } else if code == "28000" && message.contains("replication") {
                format!(
                    "pg_hba.conf has no replication line for role {user}: add `host replication {user} <walrelay's address> <method>` (the database `all` does not cover replication connections), then reload PostgreSQL"
                )
            } else if code == "53300" || code == "53400" {
                "no free WAL sender: raise max_wal_senders (restart needed) or stop an unused replication client".to_owned()
            } else {
                connection_fix(Some(code), user, addr, dbname)
            }
        }
        ReplicationError::PasswordRequired { .. } => {
            "the server asks for a password: set postgres.password_env or postgres.password_file"
                .to_owned()
        }
        ReplicationError::UnsupportedAuth(_) => {
            "use md5, scram-sha-256, password or trust for this role in pg_hba.conf".to_owned()
        }
        ReplicationError::ChannelBindingRequired(_) => {
            "the server did not use channel binding: connect over TLS (postgres.sslmode = \"require\" or stricter) to a role with scram-sha-256 in pg_hba.conf, or relax postgres.channel_binding".to_owned()
        }
        ReplicationError::Tls(e) if !e.is_transient() => TLS_FIX.to_owned(),
        ReplicationError::Hosts(hosts) => {
            target_fix(hosts).unwrap_or_else(|| connection_fix(None, user, addr, dbname))
        }
        _ => connection_fix(None, user, addr, dbname),
    }
}

/// The server version row: PostgreSQL 14 or later, and the pgoutput
/// protocol a start would request from it.
fn check_server_version(
    report: &mut CheckReport,
    config: &Config,
    facts: &Result<ServerFacts, CheckError>,
) {
    match facts {
        Ok(f) if f.version_num < capability::MIN_SERVER_VERSION_NUM => {
            let problem = Unsupported::ServerVersion {
                version: f.version.clone(),
            };
            report.fail(SERVER_VERSION, problem.problem(), problem.fix());
        }
        Ok(f) => report.pass(SERVER_VERSION, server_version_detail(f, config)),
        Err(e) => report.fail(
            SERVER_VERSION,
            DisplayChain(e).to_string(),
            "run SHOW server_version_num as this role to see why it fails",
        ),
    }
}

/// "PostgreSQL 16.4: pgoutput protocol 4, streaming 'parallel'".
fn server_version_detail(facts: &ServerFacts, config: &Config) -> String {
    let messages = config.outbox.messages_are_events();
    let proto = crate::postgres::wal::proto_version_for(
        facts.version_num,
        config.streaming(),
        crate::pipeline::PROTO_VERSION,
    );
    let streaming = match crate::postgres::wal::streaming_option(proto) {
        Some(mode) => format!("streaming '{mode}'"),
        None if messages => {
            "whole transactions after their commit (logical decoding messages are events)".into()
        }
        None => "whole transactions after their commit (replication.streaming = false)".into(),
    };
    format!(
        "PostgreSQL {}: pgoutput protocol {proto}, {streaming}",
        facts.version
    )
}

/// Whether the server has pgoutput. Only a superuser may list the library
/// directory; for any other role a missing plugin shows when walrelay
/// creates its slot, which then names the fix.
async fn check_output_plugin(
    report: &mut CheckReport,
    client: &Client,
    timeout: Duration,
    superuser: bool,
) {
    if !superuser {
        report.pass(
            OUTPUT_PLUGIN,
            "pgoutput not verified (listing the server's library directory needs a superuser); it ships with PostgreSQL",
        );
        return;
    }
    match read(
        "the server's library directory",
        timeout,
        preflight::pgoutput_installed(client),
    )
    .await
    {
        Ok(true) => report.pass(OUTPUT_PLUGIN, "pgoutput is installed"),
        Ok(false) => {
            let problem = Unsupported::NoPgoutput;
            report.fail(OUTPUT_PLUGIN, problem.problem(), problem.fix());
        }
        Err(e) => report.warn(
            OUTPUT_PLUGIN,
            DisplayChain(&e).to_string(),
            "list the server's library directory (pg_config --pkglibdir) for pgoutput",
        ),
    }
}

async fn check_wal_level(report: &mut CheckReport, client: &Client, timeout: Duration) {
    match read("wal_level", timeout, preflight::wal_level(client)).await {
        Ok(level) => {
            if level == "logical" {
                report.pass(WAL_LEVEL, "logical");
            } else {
                let problem = Unsupported::WalLevel { level };
                report.fail(WAL_LEVEL, problem.problem(), problem.fix());
            }
        }
        Err(e) => report.fail(
            WAL_LEVEL,
            DisplayChain(&e).to_string(),
            "run SHOW wal_level as this role to see why it fails",
        ),
    }
}

/// Returns whether the role is a superuser.
async fn check_role(
    report: &mut CheckReport,
    client: &Client,
    timeout: Duration,
    user: &str,
) -> bool {
    let row = read(
        "the role's attributes",
        timeout,
        preflight::role_attributes(client),
    )
    .await;
    match row {
        Ok(Some(attributes)) => {
            let (replication, superuser) = (attributes.replication, attributes.superuser);
            if superuser {
                report.pass(ROLE, format!("{user} is a superuser"));
            } else if replication {
                report.pass(ROLE, format!("{user} has REPLICATION"));
            } else {
                let problem = Unsupported::NoReplicationRole {
                    user: user.to_owned(),
                };
                report.fail(ROLE, problem.problem(), problem.fix());
            }
            superuser
        }
        Ok(None) => {
            report.fail(
                ROLE,
                format!("role {user} is not in pg_roles"),
                "check postgres.user",
            );
            false
        }
        Err(e) => {
            report.fail(
                ROLE,
                DisplayChain(&e).to_string(),
                "make sure the role can read pg_roles",
            );
            false
        }
    }
}

async fn check_capacity(
    report: &mut CheckReport,
    config: &Config,
    client: &Client,
    timeout: Duration,
    check_app: &str,
) {
    let slot = &config.replication.slot;
    let row = read(
        "slot and wal sender capacity",
        timeout,
        preflight::replication_capacity(client, slot, check_app),
    )
    .await;
    let row = match row {
        Ok(r) => r,
        Err(e) => {
            let detail = DisplayChain(&e).to_string();
            report.fail(
                SLOT_CAPACITY,
                detail.clone(),
                "make sure the role can read pg_replication_slots",
            );
            report.fail(
                WAL_SENDERS,
                detail,
                "make sure the role can read pg_stat_replication",
            );
            return;
        }
    };
    let (max_slots, used_slots, ours, max_senders, used_senders) = (
        row.max_slots,
        row.used_slots,
        row.slot_exists,
        row.max_wal_senders,
        row.used_wal_senders,
    );
    let free_slots = max_slots - used_slots;
    if ours {
        report.pass(
            SLOT_CAPACITY,
            format!("{used_slots} of {max_slots} in use, slot {slot} among them"),
        );
    } else if free_slots > 0 {
        report.pass(
            SLOT_CAPACITY,
            format!("{used_slots} of {max_slots} in use, {free_slots} free for slot {slot}"),
        );
    } else {
        let problem = if max_slots <= 0 {
            Unsupported::NoReplicationSlots
        } else {
            Unsupported::SlotsExhausted { slot: slot.clone() }
        };
        report.fail(
            SLOT_CAPACITY,
            format!("{} ({used_slots} of {max_slots})", problem.problem()),
            problem.fix(),
        );
    }
    let free_senders = max_senders - used_senders;
    if free_senders > 0 {
        report.pass(
            WAL_SENDERS,
            format!("{used_senders} of {max_senders} in use, {free_senders} free"),
        );
    } else {
        let problem = if max_senders <= 0 {
            Unsupported::NoWalSenders
        } else {
            Unsupported::WalSendersExhausted
        };
        report.fail(
            WAL_SENDERS,
            format!("{} ({used_senders} of {max_senders})", problem.problem()),
            problem.fix(),
        );
    }
}

async fn check_keep_size(report: &mut CheckReport, client: &Client, timeout: Duration) {
    match read(
        MAX_SLOT_WAL_KEEP_SIZE,
        timeout,
        catalog::max_slot_wal_keep_size(client),
    )
    .await
    {
        Ok(value) => {
            if value == "-1" {
                report.warn(
                    MAX_SLOT_WAL_KEEP_SIZE,
                    "-1 (unlimited): a stuck or abandoned slot can fill the primary's disk",
                    "bound it, e.g. ALTER SYSTEM SET max_slot_wal_keep_size = '50GB'; SELECT pg_reload_conf(); \
                     walrelay stops cleanly if its slot is ever invalidated",
                );
            } else {
                report.pass(MAX_SLOT_WAL_KEEP_SIZE, value);
            }
        }
        Err(e) => report.warn(
            MAX_SLOT_WAL_KEEP_SIZE,
            DisplayChain(&e).to_string(),
            "run SHOW max_slot_wal_keep_size as this role to see why it fails",
        ),
    }
}

async fn outbox_facts(
    client: &Client,
    timeout: Duration,
    schema: &str,
    table: &str,
) -> Result<Option<OutboxTable>, CheckError> {
    read(
        "the outbox table",
        timeout,
        preflight::outbox_table(client, schema, table),
    )
    .await
}

/// The config key of a Debezium router key for the table `spec`, for
/// messages: the table's own (`outbox.tables[<i>].key_field`) where it
/// sets one, else `[router]`'s; `router.headers_field` is native only.
fn native_key(debezium_key: &str, spec: &OutboxTableSpec) -> String {
    if debezium_key == KEY_HEADERS_FIELD {
        return KEY_HEADERS_FIELD.to_owned();
    }
    match native_column_option(debezium_key) {
        Some(native) if spec.columns.sets(native) => format!("{}.{native}", spec.key),
        Some(native) => format!("router.{native}"),
        None => "router".to_owned(),
    }
}

/// The key that names an outbox table, for fixes.
fn table_key(spec: &OutboxTableSpec) -> String {
    if spec.key == crate::txn::config::KEY_TABLE {
        spec.key.clone()
    } else {
        format!("{}.name", spec.key)
    }
}

/// The config key of a router key for a fix, with its Debezium key when
/// it has one.
fn key_for_fix(key: &str, spec: &OutboxTableSpec) -> String {
    match native_key(key, spec) {
        native if native == key => native,
        native => format!("{native} (Debezium {key})"),
    }
}

/// Binds the router to the table's published columns, as the stream will on
/// the first Relation message. Returns the route column when it is usable.
async fn check_columns(
    report: &mut CheckReport,
    config: &Config,
    client: &Client,
    timeout: Duration,
    facts: &OutboxTable,
    spec: &OutboxTableSpec,
) -> Option<String> {
    let (schema, table) = (spec.schema.as_str(), spec.table.as_str());
    let rows = read(
        "the outbox table's columns",
        timeout,
        preflight::outbox_columns(client, facts.oid),
    )
    .await;
    let rows = match rows {
        Ok(r) => r,
        Err(e) => {
            report.fail(
                OUTBOX_TABLE,
                format!("{}: {}", spec.qualified(), DisplayChain(&e)),
                "make sure the role can read pg_attribute",
            );
            return None;
        }
    };
    // A publication with a column list sends only those columns.
    let published: Option<BTreeSet<String>> =
        preflight::published_columns(client, &config.replication.publication, schema, table)
            .await
            .ok()
            .flatten()
            .map(|names| names.into_iter().collect());
    bind_columns(report, config, facts.oid, rows, published, spec)
}

/// Binds the router to `rows`, the columns the source will hand it (of
/// those, only the ones in `published` when a publication lists columns),
/// with the table's own columns. Returns the route column when it is
/// usable.
fn bind_columns(
    report: &mut CheckReport,
    config: &Config,
    table_oid: u32,
    rows: Vec<preflight::OutboxColumn>,
    published: Option<BTreeSet<String>>,
    spec: &OutboxTableSpec,
) -> Option<String> {
    let (schema, table) = (spec.schema.as_str(), spec.table.as_str());
    let mut columns = Vec::new();
    let mut metas = Vec::new();
    let mut types = BTreeMap::new();
    for r in rows {
        let name = r.name;
        if published.as_ref().is_some_and(|p| !p.contains(&name)) {
            continue;
        }
        let type_name = r.type_name;
        columns.push(RelationColumnInfo {
            name: name.clone(),
            type_oid: r.type_oid,
            type_modifier: r.type_modifier,
            is_key: false,
        });
        metas.push(ColumnMeta {
            name: name.clone(),
            not_null: r.not_null,
            type_name: Some(type_name.clone()),
            default_expr: r.default_expr,
        });
        types.insert(name, type_name);
    }
    let relation = Arc::new(RelationInfo {
        id: table_oid,
        namespace: schema.to_owned(),
        name: table.to_owned(),
        replica_identity: b'd',
        columns,
    });
    let qualified = relation.qualified_name();
    let routing = Router::new(
        config.router.clone(),
        config.converters,
        config.debezium.clone(),
    )
    .and_then(|router| {
        let columns = router.mapping(&spec.columns)?;
        Ok((router, columns))
    });
    let (router, columns) = match routing {
        Ok(r) => r,
        Err(e) => {
            report.fail(
                OUTBOX_TABLE,
                format!(
                    "{qualified}: the routing configuration is invalid: {}",
                    DisplayChain(&e)
                ),
                "fix the [router] / [converters] settings it names",
            );
            return None;
        }
    };
    let route = columns.route_by_field().to_owned();
    match router.check_layout_with(&relation, &TableMeta::new(metas), &columns) {
        Ok(_) => {
            let shown = |c: &str| format!("{c} ({})", types.get(c).map_or("?", String::as_str));
            let headers = config
                .router
                .headers_field
                .as_deref()
                .map(|c| format!(", headers {}", shown(c)))
                .unwrap_or_default();
            let own = if spec.columns.is_empty() {
                ""
            } else {
                " (its own columns)"
            };
            report.pass(
                OUTBOX_TABLE,
                format!(
                    "{qualified}{own}: id {}, key {}, payload {}, route by {}{headers}",
                    shown(columns.id_field()),
                    shown(columns.key_field()),
                    shown(columns.payload_field()),
                    shown(&route)
                ),
            );
            Some(route)
        }
        Err(e) => {
            let fix = match &e {
                RouteError::MissingColumn { column, key, .. } => {
                    let filtered = if published.is_some() && types.is_empty() {
                        String::new()
                    } else if published.is_some() {
                        format!(" (publication {} lists only some columns: add it there too)", config.replication.publication)
                    } else {
                        String::new()
                    };
                    format!(
                        "add column \"{column}\" to {qualified}, or set {} to the column that holds it{filtered}",
                        key_for_fix(key, spec)
                    )
                }
                RouteError::WrongColumnType { column, key, expected, .. } => format!(
                    "make \"{column}\" {expected}, or set {} to a column that is",
                    key_for_fix(key, spec)
                ),
                RouteError::UnmappableType { column, key, .. } => format!(
                    "change the type of \"{column}\" (text, varchar, uuid, jsonb, integers ... map), or set {} to another column",
                    key_for_fix(key, spec)
                ),
                _ => "fix the outbox table or the [router] settings".to_owned(),
            };
            report.fail(OUTBOX_TABLE, DisplayChain(&e).to_string(), fix);
            // The route column alone may still name topics.
            let usable = types.contains_key(&route)
                && !matches!(&e, RouteError::WrongColumnType { key, .. } if *key == KEY_ROUTE_BY_FIELD);
            usable.then_some(route)
        }
    }
}

/// Distinct values of the route column `route` currently in the outbox
/// table `spec`, at most [`ROUTE_VALUE_LIMIT`].
async fn read_route_values(
    client: &Client,
    timeout: Duration,
    spec: &OutboxTableSpec,
    route: &str,
) -> Result<Vec<String>, CheckError> {
    read(
        "the outbox's route values",
        timeout,
        preflight::route_values(client, &spec.schema, &spec.table, route, ROUTE_VALUE_LIMIT),
    )
    .await
}

/// Checks the publication as `catalog::prepare_publication` would find it
/// for the outbox `tables`, without creating or altering anything. Returns
/// what walrelay would do, and the publication's state when it exists and
/// walrelay would read it as it is.
async fn check_publication(
    report: &mut CheckReport,
    config: &Config,
    client: &Client,
    timeout: Duration,
    tables: &[OutboxTableSpec],
) -> (
    Option<PublicationAction>,
    Option<preflight::PublicationState>,
) {
    let plan = &config.replication;
    let publication = &plan.publication;
    let outbox = tables
        .iter()
        .map(|t| format!("{}.{}", quote_ident(&t.schema), quote_ident(&t.table)))
        .collect::<Vec<_>>()
        .join(", ");
    let qualified = tables
        .iter()
        .map(OutboxTableSpec::qualified)
        .collect::<Vec<_>>()
        .join(", ");
    // The publication's own facts, and whether it includes each table.
    let mut state = None;
    let mut unlisted = Vec::new();
    for t in tables {
        let row = read(
            "the publication",
            timeout,
            preflight::publication_state(client, publication, &t.schema, &t.table),
        )
        .await;
        match row {
            Ok(Some(row)) => {
                if !row.includes_table {
                    unlisted.push(t);
                }
                state = Some(row);
            }
            Ok(None) => {
                state = None;
                break;
            }
            Err(e) => {
                report.fail(
                    PUBLICATION,
                    DisplayChain(&e).to_string(),
                    "make sure the role can read pg_publication",
                );
                return (None, None);
            }
        }
    }
    let with = |default: Option<&str>| match plan.publish.as_deref().or(default) {
        Some(p) => format!(" WITH (publish = '{p}')"),
        None => String::new(),
    };
    let default_publish = catalog::table_publish(config.outbox.transaction_metadata);
    let create_fix = format!(
        "CREATE PUBLICATION {} FOR TABLE {outbox} WITH (publish = '{default_publish}')",
        quote_ident(publication)
    );
    let Some(row) = state else {
        let (statement, all_tables) = match plan.publication_mode {
            PublicationMode::Table if plan.create_publication => (
                format!("FOR TABLE {outbox}{}", with(Some(default_publish))),
                false,
            ),
            PublicationMode::Filtered => (format!("FOR TABLE {outbox}{}", with(None)), false),
            PublicationMode::AllTables => (format!("FOR ALL TABLES{}", with(None)), true),
            PublicationMode::Table => {
                report.fail(
                    PUBLICATION,
                    format!(
                        "{publication} does not exist and replication.create_publication is false"
                    ),
                    create_fix,
                );
                return (None, None);
            }
            PublicationMode::Disabled => {
                report.fail(
                    PUBLICATION,
                    format!(
                        "{publication} does not exist and publication.autocreate.mode is disabled"
                    ),
                    create_fix,
                );
                return (None, None);
            }
            PublicationMode::NoTables => {
                report.fail(
                    PUBLICATION,
                    format!(
                        "{publication} does not exist; publication.autocreate.mode=no_tables would create it without tables and walrelay would stop"
                    ),
                    create_fix,
                );
                return (None, None);
            }
        };
        let statement = format!(
            "CREATE PUBLICATION {} {statement}",
            quote_ident(publication)
        );
        report.pass(
            PUBLICATION,
            format!("{publication} does not exist; walrelay will create it at start: {statement}"),
        );
        return (
            Some(PublicationAction::Create {
                statement,
                all_tables,
            }),
            None,
        );
    };
    let (pubinsert, all_tables, owner_ok, count) = (
        row.publishes_inserts,
        row.all_tables,
        row.owned,
        row.table_count,
    );
    let alter = format!("ALTER PUBLICATION {}", quote_ident(publication));
    if !pubinsert {
        report.fail(
            PUBLICATION,
            format!("{publication} exists but does not publish inserts"),
            format!("{alter} SET (publish = '{default_publish}')"),
        );
        return (None, None);
    }
    if all_tables {
        if plan.publication_mode == PublicationMode::Filtered {
            report.fail(
                PUBLICATION,
                format!("{publication} is FOR ALL TABLES, but publication.autocreate.mode=filtered needs a FOR TABLE publication"),
                format!("DROP PUBLICATION {} (walrelay recreates it), or use mode all_tables", quote_ident(publication)),
            );
            return (None, None);
        }
        report.warn(
            PUBLICATION,
            format!("{publication} exists and is FOR ALL TABLES: the walsender decodes and sends every table's changes"),
            format!("a publication FOR TABLE {outbox} is cheaper"),
        );
        return (Some(PublicationAction::None), Some(row));
    }
    let exact = unlisted.is_empty() && usize::try_from(count).is_ok_and(|n| n == tables.len());
    if plan.publication_mode == PublicationMode::Filtered && !exact {
        report.pass(
            PUBLICATION,
            format!("{publication} exists; walrelay will set its tables to {qualified} at start (mode filtered)"),
        );
        return (Some(PublicationAction::Alter { owner_ok }), Some(row));
    }
    if !unlisted.is_empty() {
        let missing = unlisted
            .iter()
            .map(|t| t.qualified())
            .collect::<Vec<_>>()
            .join(", ");
        let add = unlisted
            .iter()
            .map(|t| format!("{}.{}", quote_ident(&t.schema), quote_ident(&t.table)))
            .collect::<Vec<_>>()
            .join(", ");
        report.fail(
            PUBLICATION,
            format!("{publication} exists but does not include {missing}"),
            format!(
                "{alter} ADD TABLE {add}, or point replication.publication at another publication"
            ),
        );
        return (None, None);
    }
    report.pass(
        PUBLICATION,
        format!("{publication} exists and publishes inserts of {qualified}"),
    );
    (Some(PublicationAction::None), Some(row))
}

/// The `published operations` row for an existing publication a table
/// outbox reads as it is: a suggestion (a warning, never a failure) when it
/// publishes deletes or truncates walrelay would drop.
fn check_published_operations(
    report: &mut CheckReport,
    config: &Config,
    state: &preflight::PublicationState,
) {
    let advice = publish_advice(
        &config.replication.publication,
        state,
        config.outbox.transaction_metadata,
        config.replication.publication_mode != PublicationMode::Table,
    );
    match advice {
        PublishAdvice::Keep(detail) => report.pass(PUBLISHED_OPERATIONS, detail),
        PublishAdvice::Suggest { detail, fix } => report.warn(PUBLISHED_OPERATIONS, detail, fix),
    }
}

/// What `walrelay check` says about the operations an existing publication
/// of a table outbox publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublishAdvice {
    /// Nothing to change; what it publishes and why that is right.
    Keep(String),
    /// Publish fewer operations: what it publishes, and the statement with
    /// why and what else it changes.
    Suggest {
        /// What the publication publishes and what that costs.
        detail: String,
        /// The `ALTER PUBLICATION` statement, its measured effect and who
        /// else it concerns.
        fix: String,
    },
}

/// The advice for publication `publication` in `state`, read by a table
/// outbox. Assembly drops every outbox delete (and truncate), so a
/// publication that publishes them makes the walsender encode and send each
/// one for nothing; the statement keeps inserts and, if published, updates
/// (`outbox.op_invalid_behavior` acts on those). With transaction metadata
/// on, Debezium's BEGIN and END records count deletes, and a transaction
/// that only deletes or truncates still gets its pair: nothing is
/// suggested. `debezium` (a Debezium form: a `publication.autocreate.mode`)
/// adds that Debezium reads the same publication without deletes and emits
/// the same records: its EventRouter drops deletes and their tombstones,
/// and walrelay refuses the chains where a tombstone would reach anything
/// else.
pub fn publish_advice(
    publication: &str,
    state: &preflight::PublicationState,
    transaction_metadata: bool,
    debezium: bool,
) -> PublishAdvice {
    let ops = [
        (state.publishes_inserts, "insert"),
        (state.publishes_updates, "update"),
        (state.publishes_deletes, "delete"),
        (state.publishes_truncates, "truncate"),
    ];
    let list = |kept: &[&str]| {
        ops.iter()
            .filter(|(on, op)| *on && kept.contains(op))
            .map(|(_, op)| *op)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let published = list(&["insert", "update", "delete", "truncate"]);
    let dropped = match (state.publishes_deletes, state.publishes_truncates) {
        (false, false) => {
            return PublishAdvice::Keep(format!(
                "{publication} publishes {published}: no deletes or truncates, which walrelay would drop"
            ))
        }
        (true, false) => "deletes",
        (false, true) => "truncates",
        (true, true) => "deletes and truncates",
    };
    if transaction_metadata {
        return PublishAdvice::Keep(format!(
            "{publication} publishes {published}; walrelay drops the {dropped}, but transaction \
             metadata (outbox.transaction_metadata, Debezium's provide.transaction.metadata) \
             needs them: Debezium's BEGIN and END records count deletes, and a transaction that \
             only deletes or truncates still gets its pair"
        ));
    }
    let target = list(&["insert", "update"]);
    let mut fix = format!(
        "ALTER PUBLICATION {} SET (publish = '{target}'); measured effect, W1 (insert and delete \
         of an outbox row in one transaction): the walsender drained it 1.14-1.27x as fast, \
         walrelay 1.09-1.18x (docs/benchmarks.md, 'Levers, one by one (issue 19)'). It applies \
         to every reader of {publication}{}: run it only if no reader needs deletes",
        quote_ident(publication),
        if state.all_tables {
            " and to every table (FOR ALL TABLES)"
        } else {
            ""
        }
    );
    if debezium {
        fix.push_str(
            "; Debezium reads the same publication without deletes and emits the same records \
             (its EventRouter drops deletes and their tombstones)",
        );
    }
    let which = if state.publishes_deletes {
        " (each outbox row deleted after its insert)"
    } else {
        ""
    };
    PublishAdvice::Suggest {
        detail: format!(
            "{publication} publishes {published}; walrelay drops the outbox's {dropped}, yet the \
             walsender encodes and sends every one{which}"
        ),
        fix,
    }
}

fn check_privileges(
    report: &mut CheckReport,
    facts: Option<&OutboxTable>,
    action: Option<&PublicationAction>,
    superuser: bool,
    user: &str,
    qualified: &str,
) {
    let Some(facts) = facts else {
        report.skip(OUTBOX_PRIVILEGES, "the outbox table was not found");
        return;
    };
    let role = quote_ident(user);
    if !facts.can_select {
        report.fail(
            OUTBOX_PRIVILEGES,
            format!("{user} has no SELECT on {qualified}"),
            format!("GRANT SELECT ON {qualified} TO {role}"),
        );
        return;
    }
    match action {
        Some(PublicationAction::Create {
            statement,
            all_tables: true,
        }) if !superuser => report.fail(
            OUTBOX_PRIVILEGES,
            format!("walrelay would run {statement}, which needs a superuser"),
            "create the publication as a superuser before starting walrelay",
        ),
        Some(PublicationAction::Create {
            statement,
            all_tables: false,
        }) if !(facts.owns && facts.can_create_in_db) => {
            let missing = match (facts.owns, facts.can_create_in_db) {
                (false, false) => format!("does not own {qualified} and has no CREATE on the database"),
                (false, true) => format!("does not own {qualified}"),
                _ => "has no CREATE on the database".to_owned(),
            };
            report.fail(
                OUTBOX_PRIVILEGES,
                format!("walrelay would run {statement}, but {user} {missing}"),
                format!(
                    "create the publication as the table's owner before starting walrelay, or ALTER TABLE {qualified} OWNER TO {role} and GRANT CREATE ON DATABASE <db> TO {role}"
                ),
            );
        }
        Some(PublicationAction::Alter { owner_ok: false }) => report.fail(
            OUTBOX_PRIVILEGES,
            format!("walrelay would alter the publication's tables, but {user} does not own it"),
            "set the publication's tables to the outbox as its owner, or ALTER PUBLICATION ... OWNER TO the walrelay role",
        ),
        Some(PublicationAction::Create { .. }) | Some(PublicationAction::Alter { .. }) => {
            report.pass(
                OUTBOX_PRIVILEGES,
                format!("SELECT on {qualified}, and enough to set up the publication"),
            );
        }
        _ => report.pass(OUTBOX_PRIVILEGES, format!("SELECT on {qualified}")),
    }
}

async fn check_slot(report: &mut CheckReport, config: &Config, client: &Client, timeout: Duration) {
    let slot = &config.replication.slot;
    let dbname = &config.postgres.dbname;
    let state = bounded("the replication slot", timeout, async {
        catalog::slot_state(client, slot)
            .await
            .map_err(CheckError::from)
    })
    .await;
    let state: Option<SlotState> = match state {
        Ok(s) => s,
        Err(e) => {
            report.fail(
                SLOT,
                DisplayChain(&e).to_string(),
                "make sure the role can read pg_replication_slots",
            );
            return;
        }
    };
    let Some(state) = state else {
        if config.replication.create_slot {
            check_missing_slot(report, config, client, timeout).await;
        } else {
            report.fail(
                SLOT,
                format!("{slot} does not exist and replication.create_slot is false"),
                format!(
                    "set replication.create_slot = true, or SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')"
                ),
            );
        }
        return;
    };
    if let Err(e) = catalog::check_slot(slot, &state, dbname) {
        report.fail(
            SLOT,
            DisplayChain(&e).to_string(),
            format!(
                "use another replication.slot, or drop this one (SELECT pg_drop_replication_slot('{slot}')) if nothing else uses it"
            ),
        );
        return;
    }
    let lag = read("the slot's lag", timeout, catalog::poll_slot(client, slot)).await;
    let mut detail = format!(
        "{slot}: pgoutput on {dbname}, confirmed at {}",
        state
            .confirmed_flush_lsn
            .map_or_else(|| "?".to_owned(), |l| l.to_string())
    );
    if let Some(status) = &state.wal_status {
        detail.push_str(&format!(", wal_status {status}"));
    }
    if let Ok(Some(l)) = &lag {
        if let Some(b) = l.retained_bytes {
            detail.push_str(&format!(", retains {}", human_bytes(b.max(0) as u64)));
        }
        if let Some(b) = l.confirmed_lag_bytes {
            detail.push_str(&format!(", {} behind", human_bytes(b.max(0) as u64)));
        }
    }
    if state.wal_status.as_deref() == Some("unreserved") {
        report.fail(
            SLOT,
            format!("{detail}: the WAL it needs exceeds max_slot_wal_keep_size and goes at the next checkpoint"),
            "raise max_slot_wal_keep_size (or free disk) and start walrelay at once",
        );
    } else if state.active {
        let pid = state
            .active_pid
            .map_or_else(String::new, |p| format!(" (pid {p})"));
        report.warn(
            SLOT,
            format!("{detail}; held by another walsender{pid}: this walrelay would wait as a hot standby"),
            "expected when another walrelay runs on this slot; otherwise find the holder in pg_stat_replication",
        );
    } else if state.wal_status.as_deref() == Some("extended") {
        report.warn(
            SLOT,
            detail,
            "the slot retains more than max_wal_size: start walrelay soon so it catches up",
        );
    } else {
        report.pass(SLOT, detail);
    }
}

/// Failover slots (PostgreSQL 17+), with `replication.failover` or when
/// the slot already is one: the slot's `failover` and `synced` columns,
/// whether the primary holds walrelay back for its standbys
/// (`synchronized_standby_slots`) and whether any standby synchronizes
/// slots. No rows otherwise.
async fn check_failover(
    report: &mut CheckReport,
    config: &Config,
    client: &Client,
    timeout: Duration,
    server: &Result<ServerFacts, CheckError>,
) {
    let slot = &config.replication.slot;
    let wanted = config.replication.failover;
    let state = bounded("the replication slot", timeout, async {
        catalog::slot_state(client, slot)
            .await
            .map_err(CheckError::from)
    })
    .await
    .ok()
    .flatten();
    let is_failover_slot = state.as_ref().and_then(|s| s.failover) == Some(true);
    if !wanted && !is_failover_slot {
        return;
    }
    let (version_num, version) = match server {
        Ok(f) => (f.version_num, f.version.as_str()),
        Err(e) => {
            report.fail(
                FAILOVER_SLOT,
                DisplayChain(e).to_string(),
                "run SHOW server_version_num as this role to see why it fails",
            );
            return;
        }
    };
    if crate::postgres::slot::failover_supported(version_num, version).is_err() {
        report.fail(
            FAILOVER_SLOT,
            format!(
                "replication.failover (Debezium slot.failover) is true, but the server is PostgreSQL {version}: \
                 failover slots need 17 or later, and walrelay refuses to start (it never creates a plain slot instead)"
            ),
            "set replication.failover = false (slot.failover=false in a Debezium connector file) to run with \
             a plain slot, or upgrade the primary to PostgreSQL 17 or later",
        );
        return;
    }
    match &state {
        None => report.pass(
            FAILOVER_SLOT,
            format!("{slot} does not exist; walrelay will create it as a failover slot (FAILOVER)"),
        ),
        Some(s) => {
            let shown = |v: Option<bool>| v.map_or("?", |b| if b { "true" } else { "false" });
            let mut detail = format!(
                "{slot}: failover {}, synced {}",
                shown(s.failover),
                shown(s.synced)
            );
            match crate::postgres::slot::failover_action(wanted, s.failover) {
                crate::postgres::slot::FailoverAction::TurnOn => detail.push_str(&format!(
                    "; walrelay turns failover on at start (ALTER_REPLICATION_SLOT {} (FAILOVER true))",
                    quote_ident(slot)
                )),
                crate::postgres::slot::FailoverAction::LeaveOn => detail.push_str(
                    "; replication.failover is false and walrelay leaves it a failover slot",
                ),
                crate::postgres::slot::FailoverAction::Keep => {}
            }
            report.pass(FAILOVER_SLOT, detail);
        }
    }
    let facts = read(
        "the standbys' slot synchronization",
        timeout,
        preflight::failover_readiness(client),
    )
    .await;
    let facts = match facts {
        Ok(f) => f,
        Err(e) => {
            let detail = DisplayChain(&e).to_string();
            let fix = "make sure the role can read pg_replication_slots and pg_stat_activity";
            report.warn(STANDBY_SLOTS, detail.clone(), fix);
            report.warn(SLOT_SYNC, detail, fix);
            return;
        }
    };
    check_standby_slots(report, &facts);
    check_slot_sync(report, &facts, slot, &config.postgres.dbname);
}

/// `synchronized_standby_slots`: set, and every slot it names exists and is
/// streaming.
fn check_standby_slots(report: &mut CheckReport, facts: &preflight::FailoverReadiness) {
    let listed = parse_slot_list(facts.standby_slots.as_deref().unwrap_or(""));
    let reload = "SELECT pg_reload_conf();";
    if listed.is_empty() {
        let candidates: Vec<&str> = facts
            .physical_slots
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        let value = if candidates.is_empty() {
            "<the physical slot of each standby that synchronizes slots>".to_owned()
        } else {
            candidates.join(",")
        };
        report.warn(
            STANDBY_SLOTS,
            "empty on the primary: walrelay (a logical consumer) can receive, and deliver to Kafka, changes that no \
             standby has received yet; after a promotion Kafka may hold events the new primary never had, and the \
             standby's copy of the slot may stand behind what walrelay confirmed",
            format!(
                "on the primary: ALTER SYSTEM SET synchronized_standby_slots = '{value}'; {reload} \
                 (failover slots' changes then wait until those standbys have the WAL)"
            ),
        );
        return;
    }
    let mut problems = Vec::new();
    for name in &listed {
        match facts.physical_slots.iter().find(|p| &p.name == name) {
            None => problems.push(format!("{name} does not exist")),
            Some(p) if !p.active => problems.push(format!(
                "{name} is not active (its standby is not streaming)"
            )),
            Some(_) => {}
        }
    }
    if problems.is_empty() {
        report.pass(
            STANDBY_SLOTS,
            format!(
                "{}: every listed physical slot exists and is streaming",
                listed.join(", ")
            ),
        );
    } else {
        report.warn(
            STANDBY_SLOTS,
            format!(
                "{}: the primary holds back failover slots' changes until every slot listed there has the WAL, \
                 so walrelay's stream stalls (nothing reaches Kafka) while this lasts",
                problems.join("; ")
            ),
            format!(
                "on the primary: create the missing slot (SELECT pg_create_physical_replication_slot('<name>')) and \
                 start its standby with primary_slot_name = '<name>', or remove it from the list \
                 (ALTER SYSTEM SET synchronized_standby_slots = '<streaming slots>'; {reload})"
            ),
        );
    }
}

/// A standby whose slot sync worker is connected to this primary.
fn check_slot_sync(
    report: &mut CheckReport,
    facts: &preflight::FailoverReadiness,
    slot: &str,
    dbname: &str,
) {
    if !facts.slot_sync_connections.is_empty() {
        report.pass(
            SLOT_SYNC,
            format!(
                "slot sync worker connection(s) from a standby: {}",
                facts.slot_sync_connections.join(", ")
            ),
        );
        return;
    }
    let streaming = facts.physical_slots.iter().filter(|p| p.active).count();
    let seen = if streaming == 0 {
        "none streams from the primary through a physical slot, and no slot sync worker is connected".to_owned()
    } else {
        format!(
            "{streaming} standby(s) stream through a physical slot, but no slot sync worker is connected to the primary"
        )
    };
    report.warn(
        SLOT_SYNC,
        format!(
            "no standby synchronizes slots: {seen}; after a promotion the new primary has no copy of {slot}, and walrelay cannot continue there"
        ),
        format!(
            "on each standby: sync_replication_slots = on, hot_standby_feedback = on, primary_slot_name = '<its \
             physical slot on the primary>' and dbname={dbname} in primary_conninfo, then SELECT pg_reload_conf() \
             on that standby"
        ),
    );
}

/// The slot names of a `synchronized_standby_slots` value: comma-separated
/// identifiers, lower-cased unless double-quoted (as PostgreSQL splits it).
pub fn parse_slot_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(
            |n| match n.strip_prefix('"').and_then(|n| n.strip_suffix('"')) {
                Some(quoted) => quoted.replace("\"\"", "\""),
                None => n.to_lowercase(),
            },
        )
        .collect()
}

/// A missing slot that walrelay may create: whether
/// `replication.slot_missing` lets it, given what the publication's comment
/// records (a slot that existed and was dropped).
async fn check_missing_slot(
    report: &mut CheckReport,
    config: &Config,
    client: &Client,
    timeout: Duration,
) {
    let slot = &config.replication.slot;
    let publication = &config.replication.publication;
    let create_by_hand = format!("SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')");
    if config.replication.slot_missing == SlotMissing::Fail {
        report.fail(
            SLOT,
            format!("{slot} does not exist and replication.slot_missing = \"fail\""),
            format!("create it ({create_by_hand}) or set replication.slot_missing = \"if_new\""),
        );
        return;
    }
    let recorded = bounded("the publication's comment", timeout, async {
        crate::postgres::slot::slot_recorded(client, publication, slot)
            .await
            .map_err(CheckError::from)
    })
    .await;
    let recorded = match recorded {
        Ok(r) => r,
        Err(e) => {
            report.fail(
                SLOT,
                format!(
                    "{slot} does not exist, and whether it existed before is unknown: {}",
                    DisplayChain(&e)
                ),
                "make sure the role can read pg_publication and pg_description",
            );
            return;
        }
    };
    match (recorded, config.replication.slot_missing) {
        (false, _) => report.pass(
            SLOT,
            format!("{slot} does not exist; walrelay will create it (pgoutput) at first start"),
        ),
        (true, SlotMissing::Create) => report.warn(
            SLOT,
            format!(
                "{slot} does not exist but publication {publication} records that it did: it was dropped; \
                 with replication.slot_missing = \"create\" walrelay creates a new one, skipping every \
                 event written since the old slot's last confirmed position"
            ),
            "re-publish those events, and set replication.slot_missing back to \"if_new\" once the slot exists",
        ),
        (true, _) => report.fail(
            SLOT,
            format!(
                "{slot} does not exist but publication {publication} records that it did: it was dropped, \
                 and walrelay refuses to start (a new slot would skip every event written since then)"
            ),
            format!(
                "re-publish the events written since the old slot's last confirmed position, then create \
                 the slot deliberately ({create_by_hand}) or start once with replication.slot_missing = \"create\""
            ),
        ),
    }
}

/// The PostgreSQL rows of the polling source (`source.kind = "poll"`): no
/// replication connection, slot, publication or `wal_level = logical`;
/// instead a server that takes writes, the outbox table and the router's
/// columns, the `[poll]` columns, the claim's order and index, the
/// privileges its statements need, and the shard locks. Returns the route
/// values for the topic check.
async fn check_poll(
    report: &mut CheckReport,
    config: &Config,
    client: &Client,
    timeout: Duration,
    server: &Result<ServerFacts, CheckError>,
    spec: &OutboxTableSpec,
) -> Option<Result<Vec<String>, String>> {
    let poll = &config.poll;
    let (schema, table) = (spec.schema.as_str(), spec.table.as_str());
    let qualified = spec.qualified();
    let key_field = spec
        .columns
        .key_field
        .clone()
        .unwrap_or_else(|| config.router.key_field.clone());
    let shard_column = poll.shard_column_or(&key_field);
    let sql = PollSql::new(schema, table, &[], poll, shard_column);
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
    poll_source_row(
        report,
        config,
        &sql,
        server.as_ref().ok().map(|f| f.wal_level.as_str()),
        role,
    );

    let after_table = [
        POLL_COLUMNS,
        PUBLISHED_COLUMN,
        CLAIM_ORDER,
        CLAIM_INDEX,
        OUTBOX_PRIVILEGES,
    ];
    let facts = match outbox_facts(client, timeout, schema, table).await {
        Ok(Some(f)) => Some(f),
        Ok(None) => {
            report.fail(
                OUTBOX_TABLE,
                format!(
                    "{qualified} does not exist in database {} (or is not a table)",
                    config.postgres.dbname
                ),
                "create the outbox table, or set outbox.table to the table your services write to (schema.table)",
            );
            None
        }
        Err(e) => {
            report.fail(
                OUTBOX_TABLE,
                DisplayChain(&e).to_string(),
                "make sure the role can read the catalog (pg_class, pg_attribute)",
            );
            None
        }
    };
    let columns = match &facts {
        None => None,
        Some(f) => match read(
            "the outbox table's columns",
            timeout,
            poll_sql::table_columns(client, f.oid),
        )
        .await
        {
            Ok(columns) => Some((f.oid, columns)),
            Err(e) => {
                report.fail(
                    OUTBOX_TABLE,
                    DisplayChain(&e).to_string(),
                    "make sure the role can read pg_attribute",
                );
                None
            }
        },
    };
    let Some((table_oid, columns)) = columns else {
        for name in after_table {
            report.skip(name, "the outbox table was not found");
        }
        shard_locks_row(
            report,
            poll,
            &sql,
            shard_holders(client, timeout, &sql).await,
        );
        return None;
    };

    // The claim hands the router every column, generated ones included.
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
    let route = bind_columns(report, config, table_oid, rows, None, spec);
    let route_values = match route {
        Some(route) => Some(
            read_route_values(client, timeout, spec, &route)
                .await
                .map_err(|e| DisplayChain(&e).to_string()),
        ),
        None => None,
    };

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
    poll_privileges_row(
        report,
        poll,
        privileges,
        &config.postgres.user,
        &sql,
        &qualified,
    );
    shard_locks_row(
        report,
        poll,
        &sql,
        shard_holders(client, timeout, &sql).await,
    );
    route_values
}

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
    match role {
        Ok((true, _)) => {
            report.fail(
                POLL_SOURCE,
                format!("the server is a standby (in recovery): the polling source {action}, which a standby refuses"),
                "point postgres.host at the primary (with several hosts: postgres.target_session_attrs = \"primary\")",
            );
            return;
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
            return;
        }
        Ok((false, false)) => {}
        Err(e) => {
            report.warn(
                POLL_SOURCE,
                format!(
                    "cannot tell whether the server takes writes: {}",
                    DisplayChain(&e)
                ),
                "run SELECT pg_is_in_recovery() as this role to see why it fails",
            );
            return;
        }
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

/// The `[poll]` columns against the table's: every column a key names
/// exists, the published and created columns are times, the order follows
/// insertion. Returns whether every `poll.order_by` column exists.
fn poll_column_rows(
    report: &mut CheckReport,
    poll: &PollConfig,
    shard_column: &str,
    columns: &[TableColumn],
    qualified: &str,
    sql: &PollSql,
) -> bool {
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
    } else {
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
        match find(&poll.created_column) {
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
    claim_order_row(report, poll, columns, sql);
    poll.order_by.iter().all(|c| find(c).is_some())
}

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
    let default = c.default_expr.as_deref().unwrap_or("");
    let sequence = c.identity || default.trim_start().starts_with("nextval(");
    let integer = matches!(c.type_oid, oid::INT2 | oid::INT4 | oid::INT8);
    let problem = match c.type_oid {
        _ if integer && sequence => {
            report.pass(
                CLAIM_ORDER,
                format!(
                    "{subject}: a sequence hands out growing values as rows are inserted{ties}"
                ),
            );
            return;
        }
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
fn claim_index_row(
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
    let order = poll.order_by.join(", ");
    let leading: Vec<&TableIndex> = indexes
        .iter()
        .filter(|i| leads_with(i, &poll.order_by))
        .collect();
    let whole = leading.iter().find(|i| i.predicate.is_none());
    match poll.on_publish {
        OnPublish::Mark => {
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
    let published = &poll.published_column;
    let mut needed: Vec<(&str, String, bool)> =
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

/// What Kafka answered.
struct KafkaOutcome {
    /// Brokers and topics, or why not.
    metadata: Result<KafkaMetadata, (String, String)>,
    /// `auto.create.topics.enable` of the first broker, or why it is unknown.
    auto_create: Result<bool, String>,
}

struct KafkaMetadata {
    brokers: Vec<String>,
    topics: BTreeSet<String>,
}

impl KafkaOutcome {
    fn report_connection(&self, report: &mut CheckReport) {
        match &self.metadata {
            Ok(md) => report.pass(
                KAFKA_CONNECTION,
                format!(
                    "{} broker(s): {}; {} topics visible",
                    md.brokers.len(),
                    md.brokers.join(", "),
                    md.topics.len()
                ),
            ),
            Err((detail, fix)) => report.fail(KAFKA_CONNECTION, detail.clone(), fix.clone()),
        }
    }
}

async fn check_kafka(config: &Config) -> KafkaOutcome {
    let kafka = &config.kafka;
    let fix_reach = format!(
        "check kafka.bootstrap_servers ({}) and the security settings in kafka.producer / kafka.secrets \
         (security.protocol, sasl.*, ssl.*); the brokers' advertised listeners must be reachable from this host",
        kafka.bootstrap_servers
    );
    let cc = kafka_client_config(config);
    let admin: AdminClient<DefaultClientContext> = match cc.create() {
        Ok(a) => a,
        Err(e) => {
            return KafkaOutcome {
                metadata: Err((
                    format!("cannot create a kafka client: {e}"),
                    "fix the librdkafka property it names in kafka.producer".to_owned(),
                )),
                auto_create: Err("kafka client not created".to_owned()),
            }
        }
    };
    let admin = Arc::new(admin);
    let probe = Arc::clone(&admin);
    // librdkafka's metadata call blocks its thread until the timeout.
    let md = tokio::task::spawn_blocking(move || {
        probe.inner().fetch_metadata(None, KAFKA_TIMEOUT).map(|md| {
            let brokers: Vec<(i32, String)> = md
                .brokers()
                .iter()
                .map(|b| (b.id(), format!("{}:{} (id {})", b.host(), b.port(), b.id())))
                .collect();
            let topics = md.topics().iter().map(|t| t.name().to_owned()).collect();
            (brokers, topics)
        })
    })
    .await;
    let (brokers, topics): (Vec<(i32, String)>, BTreeSet<String>) = match md {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            release(admin);
            return KafkaOutcome {
                metadata: Err((
                    format!(
                        "no metadata from {} within {KAFKA_TIMEOUT:?}: {}",
                        kafka.bootstrap_servers, e
                    ),
                    fix_reach,
                )),
                auto_create: Err("kafka unreachable".to_owned()),
            };
        }
        Err(e) => {
            release(admin);
            return KafkaOutcome {
                metadata: Err((format!("metadata request failed: {e}"), fix_reach)),
                auto_create: Err("kafka unreachable".to_owned()),
            };
        }
    };
    let auto_create = match brokers.first() {
        None => Err("the cluster listed no broker".to_owned()),
        Some((id, _)) => {
            let opts = AdminOptions::new().request_timeout(Some(KAFKA_TIMEOUT));
            let resource = ResourceSpecifier::Broker(*id);
            let fut = async {
                admin
                    .describe_configs([&resource], &opts)
                    .await
                    .map_err(|source| CheckError::Kafka {
                        context: format!("cannot describe broker {id}"),
                        source,
                    })
            };
            match bounded(
                "describe configs",
                KAFKA_TIMEOUT + Duration::from_secs(1),
                fut,
            )
            .await
            {
                Ok(results) => match results.into_iter().next() {
                    Some(Ok(resource)) => match resource.get(AUTO_CREATE_TOPICS) {
                        Some(entry) => match entry.value.as_deref() {
                            Some("true") => Ok(true),
                            Some("false") => Ok(false),
                            other => Err(format!("{AUTO_CREATE_TOPICS} = {other:?}")),
                        },
                        None => Err(format!("broker {id} did not report {AUTO_CREATE_TOPICS}")),
                    },
                    Some(Err(code)) => Err(format!("broker {id}: {code}")),
                    None => Err(format!("broker {id} returned no configuration")),
                },
                // librdkafka's error repeats its code as the source: show it once.
                Err(CheckError::Kafka { context, source }) => Err(format!("{context}: {source}")),
                Err(e) => Err(DisplayChain(&e).to_string()),
            }
        }
    };
    release(admin);
    KafkaOutcome {
        metadata: Ok(KafkaMetadata {
            brokers: brokers.into_iter().map(|(_, s)| s).collect(),
            topics,
        }),
        auto_create,
    }
}

/// Drops the client off the runtime: librdkafka's destroy joins its threads.
fn release(admin: Arc<AdminClient<DefaultClientContext>>) {
    tokio::task::spawn_blocking(move || drop(admin));
}

fn check_topics(
    config: &Config,
    route_values: Option<Result<Vec<String>, String>>,
    kafka: &KafkaOutcome,
    report: &mut CheckReport,
) {
    let Ok(md) = &kafka.metadata else {
        report.skip(KAFKA_TOPICS, "kafka unreachable");
        return;
    };
    let rewrite = match config.router.compile() {
        Ok((rewrite, _)) => rewrite,
        Err(e) => {
            report.fail(
                KAFKA_TOPICS,
                format!("the routing configuration is invalid: {}", DisplayChain(&e)),
                "fix router.route_topic_regex / router.route_topic_replacement",
            );
            return;
        }
    };
    let mut wanted: BTreeSet<String> = BTreeSet::new();
    let mut source = String::new();
    match &route_values {
        Some(Ok(values)) => {
            wanted.extend(values.iter().map(|v| rewrite.apply(v)));
            // Each table's own route column, where one sets it.
            let mut fields = vec![config.router.route_by_field.as_str()];
            for t in &config.outbox.tables {
                if let Some(f) = t.columns.route_by_field.as_deref() {
                    if !fields.contains(&f) {
                        fields.push(f);
                    }
                }
            }
            source = format!(
                "{} distinct {} value(s) in the outbox{}",
                values.len(),
                fields.join("/"),
                if values.len() as i64 >= ROUTE_VALUE_LIMIT {
                    " (first ones only)"
                } else {
                    ""
                }
            );
        }
        Some(Err(e)) => source = format!("route values unreadable ({e})"),
        None => source.push_str("route values not checked"),
    }
    if config.heartbeat.interval_ms > 0 {
        wanted.insert(config.heartbeat.topic(&config.debezium.topic_prefix));
    }
    let missing: Vec<&String> = wanted.iter().filter(|t| !md.topics.contains(*t)).collect();
    let existing = wanted.len() - missing.len();
    let example = rewrite.apply("<aggregatetype>");
    let create_fix = |topics: &str| {
        format!(
            "create them before events arrive (kafka-topics.sh --create --topic {topics} ...), or set {AUTO_CREATE_TOPICS}=true on the brokers"
        )
    };
    match (&kafka.auto_create, missing.is_empty(), wanted.is_empty()) {
        (_, true, false) => report.pass(
            KAFKA_TOPICS,
            format!("{source}: all {existing} topic(s) exist"),
        ),
        (Ok(true), _, true) => report.pass(
            KAFKA_TOPICS,
            format!("{source}; topics are named like {example}; the broker auto-creates them ({AUTO_CREATE_TOPICS}=true)"),
        ),
        (Ok(true), false, false) => report.pass(
            KAFKA_TOPICS,
            format!(
                "{source}: {existing} topic(s) exist, {} will be auto-created ({AUTO_CREATE_TOPICS}=true): {}",
                missing.len(),
                list(&missing)
            ),
        ),
        (Ok(false), _, true) => report.warn(
            KAFKA_TOPICS,
            format!("{source}; topics are named like {example} and {AUTO_CREATE_TOPICS}=false"),
            create_fix(&example),
        ),
        (Ok(false), false, false) => report.fail(
            KAFKA_TOPICS,
            format!(
                "{source}: missing topic(s) {} and {AUTO_CREATE_TOPICS}=false, so deliveries to them fail",
                list(&missing)
            ),
            create_fix(&list(&missing)),
        ),
        (Err(why), _, true) => report.warn(
            KAFKA_TOPICS,
            format!("{source}; topics are named like {example}; cannot tell whether the broker auto-creates them: {why}"),
            create_fix(&example),
        ),
        (Err(why), false, false) => report.warn(
            KAFKA_TOPICS,
            format!(
                "{source}: missing topic(s) {}; cannot tell whether the broker auto-creates them: {why}",
                list(&missing)
            ),
            create_fix(&list(&missing)),
        ),
    }
}

fn list(topics: &[&String]) -> String {
    const SHOWN: usize = 10;
    let mut s = topics
        .iter()
        .take(SHOWN)
        .map(|t| t.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    if topics.len() > SHOWN {
        s.push_str(&format!(" and {} more", topics.len() - SHOWN));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_fails_only_on_fail_rows() {
        let mut r = CheckReport::default();
        r.pass(WAL_LEVEL, "logical");
        r.warn(MAX_SLOT_WAL_KEEP_SIZE, "-1", "bound it");
        assert!(r.passed());
        r.fail(ROLE, "no REPLICATION", "ALTER ROLE x REPLICATION");
        assert!(!r.passed());
        let text = r.to_string();
        assert!(text.contains("FAIL    role attributes"), "{text}");
        assert!(text.contains("fix: ALTER ROLE x REPLICATION"), "{text}");
        assert!(text.contains("1 passed, 1 warnings, 1 failed"), "{text}");
    }

    fn publication(update: bool, delete: bool, truncate: bool) -> preflight::PublicationState {
        preflight::PublicationState {
            publishes_inserts: true,
            publishes_updates: update,
            publishes_deletes: delete,
            publishes_truncates: truncate,
            all_tables: false,
            owned: true,
            includes_table: true,
            table_count: 1,
        }
    }

    #[test]
    fn a_publication_with_deletes_gets_the_statement_that_keeps_the_rest() {
        let PublishAdvice::Suggest { detail, fix } =
            publish_advice("p", &publication(true, true, true), false, false)
        else {
            panic!("no suggestion for a publication with deletes");
        };
        assert_eq!(
            detail,
            "p publishes insert, update, delete, truncate; walrelay drops the outbox's deletes and \
             truncates, yet the walsender encodes and sends every one (each outbox row deleted \
             after its insert)"
        );
        assert!(
            fix.starts_with("ALTER PUBLICATION \"p\" SET (publish = 'insert, update'); "),
            "{fix}"
        );
        assert!(
            fix.contains("docs/benchmarks.md, 'Levers, one by one (issue 19)'"),
            "{fix}"
        );
        assert!(fix.contains("every reader of p"), "{fix}");
        assert!(!fix.contains("Debezium"), "{fix}");
        // Updates stay as they were: none are added.
        let PublishAdvice::Suggest { fix, .. } =
            publish_advice("p", &publication(false, true, false), false, false)
        else {
            panic!("no suggestion for insert, delete");
        };
        assert!(
            fix.starts_with("ALTER PUBLICATION \"p\" SET (publish = 'insert'); "),
            "{fix}"
        );
        // Truncates alone are worth it too.
        let PublishAdvice::Suggest { detail, fix } =
            publish_advice("p", &publication(true, false, true), false, false)
        else {
            panic!("no suggestion for insert, update, truncate");
        };
        assert_eq!(
            detail,
            "p publishes insert, update, truncate; walrelay drops the outbox's truncates, yet the \
             walsender encodes and sends every one"
        );
        assert!(
            fix.starts_with("ALTER PUBLICATION \"p\" SET (publish = 'insert, update'); "),
            "{fix}"
        );
    }

    #[test]
    fn the_debezium_forms_hear_that_debezium_reads_it_the_same() {
        let mut all = publication(true, true, true);
        all.all_tables = true;
        let PublishAdvice::Suggest { fix, .. } =
            publish_advice("dbz_publication", &all, false, true)
        else {
            panic!("no suggestion for a Debezium publication with deletes");
        };
        assert!(
            fix.contains("every reader of dbz_publication and to every table (FOR ALL TABLES)")
                && fix.ends_with(
                    "Debezium reads the same publication without deletes and emits the same records \
                     (its EventRouter drops deletes and their tombstones)"
                ),
            "{fix}"
        );
    }

    #[test]
    fn nothing_is_suggested_without_deletes_or_with_transaction_metadata() {
        for (update, truncate) in [(true, false), (false, false)] {
            let advice = publish_advice("p", &publication(update, false, truncate), false, true);
            assert!(
                matches!(&advice, PublishAdvice::Keep(d) if d.contains("no deletes or truncates")),
                "{advice:?}"
            );
        }
        let advice = publish_advice("p", &publication(true, true, false), true, false);
        assert!(
            matches!(&advice, PublishAdvice::Keep(d) if d.contains("BEGIN and END records count deletes")),
            "{advice:?}"
        );
    }

    #[test]
    fn standby_slot_lists_split_as_postgresql_does() {
        assert!(parse_slot_list("").is_empty());
        assert!(parse_slot_list(" , ").is_empty());
        assert_eq!(parse_slot_list("standby_1"), vec!["standby_1"]);
        assert_eq!(
            parse_slot_list(" Standby_A , \"b\"\"q\" "),
            vec!["standby_a", "b\"q"]
        );
    }

    fn readiness(
        listed: &str,
        slots: &[(&str, bool)],
        syncing: &[&str],
    ) -> preflight::FailoverReadiness {
        preflight::FailoverReadiness {
            standby_slots: Some(listed.to_owned()),
            physical_slots: slots
                .iter()
                .map(|(n, a)| preflight::PhysicalSlot {
                    name: (*n).to_owned(),
                    active: *a,
                })
                .collect(),
            slot_sync_connections: syncing.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn failover_warnings_name_the_setting_and_the_server() {
        let mut r = CheckReport::default();
        let facts = readiness("", &[("standby_1", true)], &[]);
        check_standby_slots(&mut r, &facts);
        check_slot_sync(&mut r, &facts, "walrelay", "app");
        let standby = r.row(STANDBY_SLOTS).expect("row");
        assert_eq!(standby.status, CheckStatus::Warn);
        assert!(standby.detail.contains("never had"), "{r}");
        let fix = standby.fix.as_deref().expect("fix");
        assert!(
            fix.contains("on the primary")
                && fix.contains("synchronized_standby_slots = 'standby_1'"),
            "{fix}"
        );
        let sync = r.row(SLOT_SYNC).expect("row");
        assert_eq!(sync.status, CheckStatus::Warn);
        let fix = sync.fix.as_deref().expect("fix");
        assert!(
            fix.contains("on each standby") && fix.contains("sync_replication_slots = on"),
            "{fix}"
        );

        let mut r = CheckReport::default();
        let facts = readiness("gone, idle", &[("idle", false)], &["slotsync worker"]);
        check_standby_slots(&mut r, &facts);
        check_slot_sync(&mut r, &facts, "walrelay", "app");
        let standby = r.row(STANDBY_SLOTS).expect("row");
        assert_eq!(standby.status, CheckStatus::Warn, "{r}");
        assert!(
            standby.detail.contains("gone does not exist")
                && standby.detail.contains("idle is not active")
                && standby.detail.contains("stalls"),
            "{r}"
        );
        assert_eq!(r.row(SLOT_SYNC).expect("row").status, CheckStatus::Pass);

        let mut r = CheckReport::default();
        let facts = readiness("standby_1", &[("standby_1", true)], &["standby_1"]);
        check_standby_slots(&mut r, &facts);
        check_slot_sync(&mut r, &facts, "walrelay", "app");
        assert!(
            r.rows.iter().all(|row| row.status == CheckStatus::Pass),
            "{r}"
        );
    }

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

    fn poll_config(order_by: &[&str]) -> PollConfig {
        PollConfig {
            order_by: order_by.iter().map(|c| (*c).to_owned()).collect(),
            ..PollConfig::default()
        }
    }

    fn poll_sql(poll: &PollConfig) -> PollSql {
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

    fn exactly_once_config(extra: &str) -> Config {
        let text = format!(
            "[postgres]\nhost = \"127.0.0.1\"\nuser = \"walrelay\"\ndbname = \"app\"\n\n\
             [outbox]\ntable = \"public.outbox\"\n\n\
             [replication]\nslot = \"orders\"\n\n\
             [kafka]\nbootstrap_servers = \"127.0.0.1:9092\"\nexactly_once = true\n{extra}"
        );
        Config::from_toml(&text, std::path::Path::new("f.toml")).expect("valid config")
    }

    fn facts(policy: &str) -> TopicFacts {
        TopicFacts {
            topic: "walrelay-progress".into(),
            partitions: 1,
            replication_factor: 3,
            cleanup_policy: policy.into(),
            created: false,
        }
    }

    #[test]
    fn exactly_once_rows_name_the_id_and_the_topic_state() {
        let config = exactly_once_config("");
        let mut r = CheckReport::default();
        exactly_once_rows(&config, Some(Ok(None)), &mut r);
        let mode = r.row(EXACTLY_ONCE).expect("row");
        assert_eq!(mode.status, CheckStatus::Pass);
        assert!(
            mode.detail.contains("transactional id walrelay-orders")
                && mode.detail.contains("pipeline orders"),
            "{r}"
        );
        let topic = r.row(PROGRESS_TOPIC).expect("row");
        assert_eq!(topic.status, CheckStatus::Pass, "{r}");
        assert!(
            topic
                .detail
                .contains("walrelay-progress missing: walrelay creates it at start")
                && topic
                    .detail
                    .contains("the broker's default replication factor")
                && topic.detail.contains("cleanup.policy=compact"),
            "{r}"
        );

        let mut r = CheckReport::default();
        exactly_once_rows(&config, Some(Ok(Some(facts("compact,delete")))), &mut r);
        let topic = r.row(PROGRESS_TOPIC).expect("row");
        assert_eq!(topic.status, CheckStatus::Pass, "{r}");
        assert!(topic.detail.contains("replication factor 3"), "{r}");

        let mut r = CheckReport::default();
        exactly_once_rows(&config, Some(Ok(Some(facts("delete")))), &mut r);
        let topic = r.row(PROGRESS_TOPIC).expect("row");
        assert_eq!(topic.status, CheckStatus::Fail, "{r}");
        assert!(!r.passed());
        let fix = topic.fix.as_deref().expect("fix");
        assert!(
            fix.contains("--entity-name walrelay-progress")
                && fix.contains("cleanup.policy=compact")
                && fix.contains("kafka.transactions.progress_topic"),
            "{fix}"
        );

        let mut r = CheckReport::default();
        exactly_once_rows(&config, None, &mut r);
        assert_eq!(
            r.row(PROGRESS_TOPIC).expect("row").status,
            CheckStatus::Skip
        );

        let config = exactly_once_config(
            "\n[kafka.transactions]\npipeline = \"shop\"\ntransactional_id = \"tx-1\"\n\
             progress_topic = \"shop-progress\"\nprogress_topic_replication_factor = 3\n",
        );
        let mut r = CheckReport::default();
        exactly_once_rows(&config, Some(Ok(None)), &mut r);
        let mode = r.row(EXACTLY_ONCE).expect("row");
        assert!(
            mode.detail.contains("transactional id tx-1") && mode.detail.contains("pipeline shop"),
            "{r}"
        );
        let topic = r.row(PROGRESS_TOPIC).expect("row");
        assert!(
            topic.detail.contains("shop-progress missing")
                && topic.detail.contains("replication factor 3"),
            "{r}"
        );
    }
}
