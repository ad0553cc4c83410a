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
//! and the progress topic, and whether the metrics listener is open to the
//! network without TLS or authentication (`listener`). With the polling source (`source.kind = "poll"`)
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
//!
//! A check is a small function per row, grouped by what it checks:
//! `connection` (SQL and replication connections, the hosts), `server` (version,
//! pgoutput, `wal_level`, role, capacity, `max_slot_wal_keep_size`),
//! `columns` (each outbox table bound to the router, the route values),
//! `publication` (the publication, the privileges its setup needs, the
//! published operations), `messages` (logical decoding messages as
//! events), `slot` (the slot and failover slots), `poll` and `claim` (the
//! polling source), `kafka` and `exactly_once`. `report` is the model of
//! the report, `render` its table, `step` a bounded step. This file only
//! orchestrates: which rows run, in which order, and which are skipped when
//! an earlier step failed; it words no row itself beyond those skips.
//!
//! [`Router::check_layout_with`]: crate::router::Router::check_layout_with
//! [`catalog::preflight`]: crate::postgres::catalog::preflight
//! [`catalog::capability`]: crate::postgres::catalog::capability
//! [`poll_sql`]: crate::postgres::poll::sql

mod broker;
mod claim;
mod columns;
mod connection;
mod exactly_once;
mod kafka;
mod listener;
mod messages;
mod poll;
mod publication;
mod render;
mod report;
mod server;
mod slot;
mod step;

use std::time::Duration;

use tokio_postgres::Client;

use self::columns::RouteValues;
use self::step::{read, CheckError};
use crate::chain::DisplayChain;
use crate::config::Config;
use crate::postgres::catalog::capability::{self, ServerFacts};
use crate::postgres::poll::config::SourceKind;
use crate::postgres::replication::ConnectParams;
use crate::txn::config::OutboxTableSpec;

pub use self::kafka::KAFKA_TIMEOUT;
pub use self::report::{
    CheckReport, CheckRow, CheckStatus, BROKER_CONNECTION, BROKER_DESTINATIONS, CLAIM_INDEX,
    CLAIM_ORDER, CREATED_COLUMN, EXACTLY_ONCE, FAILOVER_SLOT, KAFKA_CONNECTION, KAFKA_TOPICS,
    MAX_SLOT_WAL_KEEP_SIZE, MESSAGES, METRICS_LISTENER, OUTBOX_PRIVILEGES, OUTBOX_TABLE,
    OUTPUT_PLUGIN, POLL_COLUMNS, POLL_SOURCE, POSTGRES_CONNECTION, POSTGRES_HOSTS, PROGRESS_TOPIC,
    PUBLICATION, PUBLISHED_COLUMN, PUBLISHED_OPERATIONS, REPLICATION_CONNECTION, ROLE,
    SERVER_VERSION, SHARD_LOCKS, SLOT, SLOT_CAPACITY, SLOT_SYNC, STANDBY_SLOTS, WAL_LEVEL,
    WAL_SENDERS,
};

/// Runs every check against the servers `config` names and returns the
/// report. Read-only; each step is bounded (PostgreSQL by
/// `postgres.connect_timeout_ms`, Kafka by [`KAFKA_TIMEOUT`]), and PostgreSQL
/// and Kafka are checked concurrently.
pub async fn run_check(config: &Config) -> CheckReport {
    if config.sink.kind != crate::sink::config::SinkKind::Kafka {
        let mut pg = check_postgres(config).await;
        let route_values = pg.route_values.take();
        let mut report = pg.report;
        broker::check_broker(config, route_values, &mut report).await;
        listener::check_listener(config, &mut report);
        return report;
    }
    let (mut pg, kafka) = tokio::join!(check_postgres(config), kafka::check_kafka(config));
    let route_values = pg.route_values.take();
    let mut report = pg.report;
    kafka.report_connection(&mut report);
    kafka::check_topics(config, route_values, &kafka, &mut report);
    if config.kafka.exactly_once {
        exactly_once::check_exactly_once(config, kafka.reachable(), &mut report).await;
    }
    listener::check_listener(config, &mut report);
    report
}

/// What the PostgreSQL checks found that the Kafka checks need.
struct PgOutcome {
    report: CheckReport,
    /// Distinct route values in the outbox (`None`: could not be read).
    route_values: RouteValues,
}

/// The PostgreSQL rows: the connections, then the WAL source's rows or the
/// polling source's.
async fn check_postgres(config: &Config) -> PgOutcome {
    let mut report = CheckReport::default();
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
    let params = ConnectParams::from_config(&config.postgres);
    let timeout = params.connect_timeout;
    // Under its own application_name, so the WAL sender count below can
    // leave it out if its walsender has not exited yet.
    let check_app = format!("{}-check", params.application_name);
    let Some(client) = connection::connect(&mut report, config, &params, &check_app).await else {
        skip_without_sql(&mut report, config);
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
    let route_values = if config.source.kind == SourceKind::Poll {
        // The configuration allows the polling source one table.
        let spec = &tables[0];
        poll::check_poll(&mut report, config, &client, timeout, &server, spec).await
    } else {
        let wal = Wal {
            config,
            client: &client,
            timeout,
            server: &server,
        };
        wal.check(&mut report, &check_app, &tables).await
    };
    PgOutcome {
        report,
        route_values,
    }
}

/// Without an SQL connection every later PostgreSQL row is skipped.
fn skip_without_sql(report: &mut CheckReport, config: &Config) {
    let why = "no sql connection";
    if config.source.kind == SourceKind::Poll {
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
            report.skip(name, why);
        }
        return;
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
        report.skip(name, why);
    }
    if config.replication.failover {
        report.skip(FAILOVER_SLOT, why);
    }
}

/// The WAL source's rows after the connections, on the SQL connection.
struct Wal<'a> {
    config: &'a Config,
    client: &'a Client,
    timeout: Duration,
    server: &'a Result<ServerFacts, CheckError>,
}

impl Wal<'_> {
    /// The server's rows, the messages row, the outbox tables' rows (or
    /// their skips for a messages-only pipeline) and the publication's, then
    /// the slot's. `check_app`: this check's replication connection, left out
    /// of the WAL sender count. Returns the route values.
    async fn check(
        &self,
        report: &mut CheckReport,
        check_app: &str,
        tables: &[OutboxTableSpec],
    ) -> RouteValues {
        let (config, client, timeout) = (self.config, self.client, self.timeout);
        server::check_server_version(report, config, self.server);
        server::check_wal_level(report, client, timeout).await;
        let superuser = server::check_role(report, client, timeout, &config.postgres.user).await;
        server::check_output_plugin(report, client, timeout, superuser).await;
        server::check_capacity(report, config, client, timeout, check_app).await;
        server::check_keep_size(report, client, timeout).await;
        messages::check_messages(report, config);
        let route_values = if config.outbox.source.table() {
            self.tables(report, tables, superuser).await
        } else {
            // A messages-only pipeline reads no table.
            for name in [OUTBOX_TABLE, OUTBOX_PRIVILEGES] {
                report.skip(name, "outbox.source = \"messages\": events come from logical decoding messages, no table is read");
            }
            messages::check_message_publication(report, config, client, timeout).await;
            None
        };
        slot::check_slot(report, config, client, timeout).await;
        slot::check_failover(report, config, client, timeout, self.server).await;
        route_values
    }

    /// One table row per outbox table, then one privileges row per table,
    /// then the publication (which names them all).
    async fn tables(
        &self,
        report: &mut CheckReport,
        tables: &[OutboxTableSpec],
        superuser: bool,
    ) -> RouteValues {
        let (config, client, timeout) = (self.config, self.client, self.timeout);
        let (facts, route_values) =
            columns::check_tables(report, config, client, timeout, tables).await;
        publication::check_publication_rows(
            report, config, client, timeout, tables, &facts, superuser,
        )
        .await;
        route_values
    }
}
