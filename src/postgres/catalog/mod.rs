//! Catalog work on an ordinary SQL connection: the publication, the slot's
//! state, the outbox table's existence, and (in [`preflight`]) the read-only
//! statements of `walrelay check`.
//!
//! Owns every SQL statement walrelay runs against the source database: the
//! relay's and the monitors' (heartbeat, lag) here, the preflight's
//! (`walrelay check`) in [`preflight`]. Names from configuration only ever
//! reach SQL as bind parameters or through [`quote_ident`]; nothing here
//! touches the replication stream.

pub(crate) mod capability;
pub(crate) mod preflight;
pub(crate) mod snapshot;

use std::collections::BTreeSet;
use std::future::Future;
use std::time::Duration;

use tokio_postgres::config::{ChannelBinding, SslMode as PgSslMode};
use tokio_postgres::{Client, NoTls};
use tracing::{info, warn};
use walrelay_proto::Lsn;

use super::hosts::{self, HostsError, Refusal};
use super::replication::{quote_ident, sqlstate_class, ConnectParams};
use super::tls::{MakeTls, TlsError};
use crate::postgres::config::{
    ChannelBindingMode, Endpoint, PostgresConfig, PublicationMode, ReplicationConfig, SslMode,
    TargetSessionAttrs,
};
use crate::retry::{Class, Retry};

/// Errors of catalog work.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The SQL connection failed or a statement failed.
    #[error("{context}")]
    Sql {
        /// What was being done.
        context: String,
        /// The driver's error.
        #[source]
        source: tokio_postgres::Error,
        /// What the failure allows, judged from the driver's error when it
        /// arrived ([`sql`]).
        retry: Class,
    },
    /// An outbox table is missing.
    #[error("outbox table {schema}.{table} does not exist in database {dbname}")]
    NoOutboxTable {
        /// The outbox table's schema, as configured.
        schema: String,
        /// The outbox table's name, as configured.
        table: String,
        /// The database connected to, as configured.
        dbname: String,
    },
    /// A column an outbox table's routing names is not in the table at
    /// start (fatal: every event of the table would be refused).
    #[error("outbox table {table} has no column \"{column}\", which {setting} names; add the column to {table}, or set {setting} to the column that holds it")]
    MissingOutboxColumn {
        /// `schema.table`.
        table: String,
        /// The column named.
        column: String,
        /// The setting naming it (`router.key_field`, or a table's own
        /// `outbox.tables[<i>].key_field`), with Debezium's key.
        setting: String,
    },
    /// The publication is missing and creating it is disabled.
    #[error("publication {publication} does not exist and {setting}; create it with CREATE PUBLICATION {publication} FOR TABLE <outbox tables>")]
    NoPublication {
        /// The publication's name, as configured.
        publication: String,
        /// The setting that forbids creating it.
        setting: &'static str,
    },
    /// The publication exists but does not carry an outbox table's inserts.
    #[error("publication {publication} does not publish inserts of {schema}.{table}: {reason}; fix it with ALTER PUBLICATION or point walrelay at another publication")]
    PublicationMismatch {
        /// The publication's name, as configured.
        publication: String,
        /// The outbox table's schema, as configured.
        schema: String,
        /// The outbox table's name, as configured.
        table: String,
        /// What is wrong.
        reason: String,
    },
    /// TLS settings or certificate files are unusable.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The server did not answer in time: a black-holed network or a
    /// stalled server. The connection is dropped and work retried.
    #[error(
        "{what}: no answer from the server within {after:?}; the connection is considered dead"
    )]
    Timeout {
        /// What was being done.
        what: String,
        /// The bound that expired.
        after: Duration,
    },
    /// The server lacks something walrelay needs (its version, a setting,
    /// the role's REPLICATION attribute, capacity, pgoutput).
    #[error(transparent)]
    Unsupported(#[from] capability::Unsupported),
    /// A `target_session_attrs` query answered neither on nor off.
    #[error("unexpected answer to {query} on {host}")]
    UnexpectedAnswer {
        /// The `target_session_attrs` query, as sent.
        query: String,
        /// The host it was sent to, as the connection names it.
        host: String,
    },
    /// No host of `postgres.host` connected and passed
    /// `target_session_attrs`; names each host and why.
    #[error(transparent)]
    Hosts(Box<HostsError<CatalogError>>),
    /// `replication.failover` is on and the server has no failover slots.
    #[error(
        "replication.failover (Debezium slot.failover) is true, but the server is PostgreSQL {version} \
         (server_version_num {version_num}) and failover slots need PostgreSQL 17 or later; walrelay \
         does not create a plain slot in its place: set replication.failover = false (slot.failover=false) \
         or upgrade the primary"
    )]
    FailoverUnsupported {
        /// `server_version` as the server shows it.
        version: String,
        /// `server_version_num`, e.g. 160004 for 16.4.
        version_num: u32,
    },
    /// The slot is a standby's synchronized copy of a failover slot: the
    /// server refuses to decode from it until the standby is promoted.
    /// Transient: a switchover's new primary may be reached before its
    /// promotion completes.
    #[error(
        "replication slot {slot} is a synchronized copy on a standby (pg_is_in_recovery() is true): \
         usable once this server is promoted; retrying"
    )]
    SyncedOnStandby {
        /// The replication slot's name, as configured.
        slot: String,
    },
    /// The slot exists but is not a pgoutput slot of this database.
    #[error("replication slot {slot} is not usable: {reason}")]
    SlotMismatch {
        /// The replication slot's name, as configured.
        slot: String,
        /// What is wrong.
        reason: String,
    },
}

/// Each variant's class, or the one it was created with: connection
/// problems, server restarts, a dead path, a slot waiting for its standby's
/// promotion are worth retrying; a missing table, publication or
/// capability, a mismatched slot are not.
impl From<CatalogError> for Retry<CatalogError> {
    fn from(e: CatalogError) -> Self {
        use CatalogError as C;
        match e {
            e @ C::Sql { retry, .. } => Retry::new(retry, e),
            C::Tls(tls) => Retry::from(tls).map(C::Tls),
            e @ (C::Timeout { .. } | C::SyncedOnStandby { .. }) => Retry::Transient(e),
            C::Unsupported(u) => Retry::from(u).map(C::Unsupported),
            C::Hosts(hosts) => Retry::new(hosts.retry, C::Hosts(hosts)),
            e @ (C::NoOutboxTable { .. }
            | C::MissingOutboxColumn { .. }
            | C::NoPublication { .. }
            | C::PublicationMismatch { .. }
            | C::UnexpectedAnswer { .. }
            | C::FailoverUnsupported { .. }
            | C::SlotMismatch { .. }) => Retry::Definite(e),
        }
    }
}

/// The bound on one catalog statement or connection attempt. TCP alone
/// never notices a black-holed path (the kernel or a proxy keeps accepting
/// bytes), so every SQL round trip walrelay waits on is bounded.
pub(crate) fn sql_timeout(params: &ConnectParams) -> Duration {
    params.connect_timeout.saturating_mul(3)
}

/// Runs `work` (a statement or a connection attempt) within `after`; an
/// expired bound is a transient [`CatalogError::Timeout`] naming `what`.
pub(crate) async fn bounded<T, E, F>(after: Duration, what: &str, work: F) -> Result<T, E>
where
    F: Future<Output = Result<T, E>>,
    E: From<CatalogError>,
{
    match tokio::time::timeout(after, work).await {
        Ok(result) => result,
        Err(_) => Err(CatalogError::Timeout {
            what: what.to_owned(),
            after,
        }
        .into()),
    }
}

/// A failed statement or connection as [`CatalogError::Sql`], with
/// `context` and its class: by SQLSTATE when the server answered
/// ([`sqlstate_class`]), definite when a certificate or the TLS handshake
/// was refused, transient when the connection itself failed.
pub(super) fn sql(
    context: impl Into<String>,
) -> impl FnOnce(tokio_postgres::Error) -> CatalogError {
    let context = context.into();
    move |source| {
        let retry = match source.code() {
            Some(code) => sqlstate_class(code.code()),
            None if is_tls_failure(&source) => Class::Definite,
            None => Class::Transient,
        };
        CatalogError::Sql {
            context,
            source,
            retry,
        }
    }
}

/// Whether the server answered a connection attempt with an error
/// (authentication, pg_hba), which another transport may not meet.
fn is_server_refusal(error: &CatalogError) -> bool {
    matches!(error, CatalogError::Sql { source, .. } if source.code().is_some())
}

/// Whether a connection attempt failed in the TLS handshake itself.
fn is_tls_refusal(error: &CatalogError) -> bool {
    match error {
        CatalogError::Sql { source, .. } => is_tls_failure(source),
        _ => false,
    }
}

/// Whether a driver error is a failed TLS handshake (certificate
/// verification, protocol) rather than a lost connection.
fn is_tls_failure(error: &tokio_postgres::Error) -> bool {
    let mut source = std::error::Error::source(error);
    while let Some(e) = source {
        if let Some(tls) = e.downcast_ref::<TlsError>() {
            return !matches!(tls, TlsError::HandshakeLost { .. });
        }
        source = e.source();
    }
    false
}

/// Opens an ordinary SQL connection with the same TLS settings and the
/// same choice of host as the replication connection; the connection task
/// is spawned and ends when the client is dropped.
pub async fn connect(params: &ConnectParams) -> Result<Client, CatalogError> {
    connect_with_host(params).await.map(|(client, _)| client)
}

/// [`connect`], also returning the host connected to. The hosts are tried
/// here one by one rather than by tokio-postgres (which knows several
/// hosts): its `target_session_attrs` has no `primary`, `standby` or
/// `prefer-standby`, its error keeps only the last host's, and the `sslmode`
/// fallbacks below are per host.
pub async fn connect_with_host(params: &ConnectParams) -> Result<(Client, Endpoint), CatalogError> {
    connect_choosing(params, None).await
}

/// Where a listening connection's notifications go (`LISTEN`).
pub(crate) type NotificationSender =
    tokio::sync::mpsc::UnboundedSender<tokio_postgres::Notification>;

/// [`connect`] for a connection that `LISTEN`s: its notifications go to
/// `notifications`, which is dropped when the connection ends.
pub(crate) async fn connect_listening(
    params: &ConnectParams,
    notifications: NotificationSender,
) -> Result<Client, CatalogError> {
    connect_choosing(params, Some(&notifications))
        .await
        .map(|(client, _)| client)
}

async fn connect_choosing(
    params: &ConnectParams,
    notifications: Option<&NotificationSender>,
) -> Result<(Client, Endpoint), CatalogError> {
    hosts::choose(
        "catalog",
        &params.hosts,
        params.target_session_attrs,
        |endpoint, test| connect_host(params, endpoint, test, notifications),
    )
    .await
    .map_err(|e| e.collapse(|e| CatalogError::Hosts(Box::new(e))))
}

/// One host: connect and apply `test` within the connect timeout.
/// tokio-postgres does not show the startup ParameterStatus, so the test
/// always asks with libpq's query.
async fn connect_host(
    params: &ConnectParams,
    endpoint: Endpoint,
    test: TargetSessionAttrs,
    notifications: Option<&NotificationSender>,
) -> Result<Client, Refusal<CatalogError>> {
    let attempt = async {
        let client = connect_unbounded(params, &endpoint, notifications).await?;
        let yes = match hosts::query(hosts::need(test)) {
            None => false,
            Some(sql) => ask(&client, sql, &endpoint).await?,
        };
        Ok::<_, CatalogError>((client, yes))
    };
    // tokio-postgres bounds only the TCP connect; the startup and
    // authentication exchange must not hang on a dead path either.
    let what = format!(
        "opening a sql connection to {endpoint} database {}",
        params.dbname
    );
    let (client, yes) = bounded(params.connect_timeout, &what, attempt)
        .await
        .map_err(|e| Refusal::Failed(e.into()))?;
    // A mismatch drops the client, which closes the connection.
    hosts::verdict(test, yes).map_err(Refusal::Mismatch)?;
    Ok(client)
}

/// The one `on`/`off` or `t`/`f` value of a `target_session_attrs` query.
async fn ask(client: &Client, sql: &str, endpoint: &Endpoint) -> Result<bool, CatalogError> {
    let messages = client
        .simple_query(sql)
        .await
        .map_err(self::sql(format!("cannot run {sql} on {endpoint}")))?;
    let value = messages.iter().find_map(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(row) => Some(row.get(0).map(str::to_owned)),
        _ => None,
    });
    hosts::parse_answer(value.flatten().as_deref()).ok_or_else(|| CatalogError::UnexpectedAnswer {
        query: sql.to_owned(),
        host: endpoint.to_string(),
    })
}

async fn connect_unbounded(
    params: &ConnectParams,
    endpoint: &Endpoint,
    notifications: Option<&NotificationSender>,
) -> Result<Client, CatalogError> {
    let mut config = tokio_postgres::Config::new();
    config
        .host(&endpoint.host)
        .port(endpoint.port)
        .user(&params.user)
        .dbname(&params.dbname)
        .application_name(format!("{}-catalog", params.application_name))
        .connect_timeout(params.connect_timeout)
        // A peer that vanished shows up on an idle connection too.
        .keepalives(true)
        .keepalives_idle(Duration::from_secs(30))
        .tcp_user_timeout(sql_timeout(params));
    if let Some(pw) = &params.password {
        config.password(pw.expose());
    }
    let tls = &params.tls;
    config.channel_binding(match tls.channel_binding {
        ChannelBindingMode::Disable => ChannelBinding::Disable,
        ChannelBindingMode::Prefer => ChannelBinding::Prefer,
        ChannelBindingMode::Require => ChannelBinding::Require,
    });
    let context = || {
        format!(
            "cannot open a sql connection to {endpoint} database {} (postgres.sslmode = \"{}\")",
            params.dbname,
            tls.mode.as_str()
        )
    };
    let connector = match tls.connector()? {
        None => return attempt(&config, params, endpoint, None, &context, notifications).await,
        Some(connector) => connector,
    };
    match tls.mode {
        // libpq's allow: plain first, TLS when the server refuses that.
        SslMode::Allow => {
            match attempt(&config, params, endpoint, None, &context, notifications).await {
                Err(e) if is_server_refusal(&e) => {
                    tracing::debug!(error = %e, "plain refused, retrying over tls (sslmode allow)");
                    attempt(
                        &config,
                        params,
                        endpoint,
                        Some((connector, false)),
                        &context,
                        notifications,
                    )
                    .await
                }
                other => other,
            }
        }
        // libpq's prefer: TLS when offered; plain again when the handshake
        // or the session over TLS is refused.
        SslMode::Prefer => {
            match attempt(
                &config,
                params,
                endpoint,
                Some((connector, true)),
                &context,
                notifications,
            )
            .await
            {
                Err(e) if is_server_refusal(&e) || is_tls_refusal(&e) => {
                    tracing::debug!(error = %e, "tls refused, retrying without (sslmode prefer)");
                    attempt(&config, params, endpoint, None, &context, notifications).await
                }
                other => other,
            }
        }
        _ => {
            attempt(
                &config,
                params,
                endpoint,
                Some((connector, false)),
                &context,
                notifications,
            )
            .await
        }
    }
}

/// One connection attempt: plain when `tls` is `None`, else TLS (the bool:
/// a server without TLS means plain, as with sslmode prefer).
async fn attempt(
    config: &tokio_postgres::Config,
    params: &ConnectParams,
    endpoint: &Endpoint,
    tls: Option<(openssl::ssl::SslConnector, bool)>,
    context: &(dyn Fn() -> String + Sync),
    notifications: Option<&NotificationSender>,
) -> Result<Client, CatalogError> {
    let mut config = config.clone();
    match tls {
        None => {
            config.ssl_mode(PgSslMode::Disable);
            let (client, connection) = config.connect(NoTls).await.map_err(sql(context()))?;
            drive_connection(connection, notifications.cloned());
            Ok(client)
        }
        Some((connector, plain_if_refused)) => {
            config.ssl_mode(if plain_if_refused {
                PgSslMode::Prefer
            } else {
                PgSslMode::Require
            });
            let make = MakeTls::new(params.tls.clone(), connector, endpoint.to_string());
            let (client, connection) = config.connect(make).await.map_err(sql(context()))?;
            drive_connection(connection, notifications.cloned());
            Ok(client)
        }
    }
}

/// Spawns the task that drives a SQL connection; with `notifications`, its
/// `LISTEN` notifications are forwarded there.
fn drive_connection<S, T>(
    mut connection: tokio_postgres::Connection<S, T>,
    notifications: Option<NotificationSender>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let Some(tx) = notifications else {
        tokio::spawn(tracing::Instrument::in_current_span(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "catalog connection ended");
            }
        }));
        return;
    };
    tokio::spawn(tracing::Instrument::in_current_span(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = futures_util::StreamExt::next(&mut messages).await {
            match message {
                Ok(tokio_postgres::AsyncMessage::Notification(n)) => {
                    if tx.send(n).is_err() {
                        break;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(error = %e, "listening connection ended");
                    break;
                }
            }
        }
    }));
}

/// A replication slot as `pg_replication_slots` shows it.
#[derive(Debug, Clone)]
pub(crate) struct SlotState {
    /// Output plugin.
    pub(crate) plugin: Option<String>,
    /// `logical` or `physical`.
    pub(crate) slot_type: String,
    /// Database of a logical slot.
    pub(crate) database: Option<String>,
    /// Whether a walsender holds it.
    pub(crate) active: bool,
    /// PID of that walsender.
    pub(crate) active_pid: Option<i32>,
    /// Position confirmed by the consumer.
    pub(crate) confirmed_flush_lsn: Option<Lsn>,
    /// `reserved`, `extended`, `unreserved` or `lost`.
    pub(crate) wal_status: Option<String>,
    /// Whether it is a failover slot (`None` before PostgreSQL 17, which
    /// has no such column).
    pub(crate) failover: Option<bool>,
    /// Whether it was synchronized from a primary (`None` before 17). On a
    /// standby such a slot cannot be used until the standby is promoted.
    pub(crate) synced: Option<bool>,
}

/// Reads a slot's state; `None` when it does not exist.
pub(crate) async fn slot_state(
    client: &Client,
    slot: &str,
) -> Result<Option<SlotState>, CatalogError> {
    // `failover` and `synced` exist from PostgreSQL 17 on; read through
    // the row's JSON so that older servers answer NULL instead of an error.
    let row = client
        .query_opt(
            "SELECT plugin::text, slot_type::text, database::text, active, active_pid, \
                    confirmed_flush_lsn::text, restart_lsn::text, wal_status::text, \
                    (to_jsonb(s) ->> 'failover')::bool, (to_jsonb(s) ->> 'synced')::bool \
             FROM pg_replication_slots s WHERE slot_name = $1",
            &[&slot],
        )
        .await
        .map_err(sql(format!(
            "cannot read the state of replication slot {slot}"
        )))?;
    Ok(row.map(|r| {
        let lsn = |i: usize| r.get::<_, Option<String>>(i).and_then(|s| s.parse().ok());
        SlotState {
            plugin: r.get(0),
            slot_type: r.get(1),
            database: r.get(2),
            active: r.get(3),
            active_pid: r.get(4),
            confirmed_flush_lsn: lsn(5),
            wal_status: r.get(7),
            failover: r.get(8),
            synced: r.get(9),
        }
    }))
}

/// Checks that an existing slot is a logical pgoutput slot of `dbname` that
/// has not been invalidated.
pub(crate) fn check_slot(slot: &str, state: &SlotState, dbname: &str) -> Result<(), CatalogError> {
    let mismatch = |reason: String| CatalogError::SlotMismatch {
        slot: slot.to_owned(),
        reason,
    };
    if state.slot_type != "logical" {
        return Err(mismatch(format!(
            "it is a {} slot, not a logical one",
            state.slot_type
        )));
    }
    if state.plugin.as_deref() != Some("pgoutput") {
        return Err(mismatch(format!(
            "it uses output plugin {}, walrelay needs pgoutput",
            state.plugin.as_deref().unwrap_or("<none>")
        )));
    }
    if state.database.as_deref() != Some(dbname) {
        return Err(mismatch(format!(
            "it belongs to database {}, not {dbname}",
            state.database.as_deref().unwrap_or("<none>")
        )));
    }
    if state.wal_status.as_deref() == Some("lost") {
        return Err(mismatch(
            "it has been invalidated (wal_status = lost): the WAL it needed was removed, so events were lost; \
             drop it, recreate it and re-publish what the outbox wrote since the last delivered event"
                .to_owned(),
        ));
    }
    Ok(())
}

/// The `publish` list of a publication walrelay creates in mode `table`
/// when `replication.publish` is unset: inserts are the events, and updates
/// meet `outbox.op_invalid_behavior` (Debezium's `table.op.invalid.behavior`).
/// Deletes are left out: assembly drops every outbox delete, so the
/// walsender would encode and send each deleted row for nothing.
pub(crate) const TABLE_PUBLISH: &str = "insert, update";

/// [`TABLE_PUBLISH`] with transaction metadata on: Debezium's BEGIN and END
/// records count an outbox table's deletes, and a transaction that only
/// deletes still gets its pair, so the deletes must keep arriving.
pub(crate) const TABLE_PUBLISH_WITH_METADATA: &str = "insert, update, delete";

/// The `publish` list walrelay gives a publication it creates in mode
/// `table` when `replication.publish` is unset.
pub(crate) fn table_publish(transaction_metadata: bool) -> &'static str {
    if transaction_metadata {
        TABLE_PUBLISH_WITH_METADATA
    } else {
        TABLE_PUBLISH
    }
}

/// What the publication must look like, from the configuration.
#[derive(Debug, Clone)]
pub(crate) struct PublicationPlan {
    /// Publication name.
    pub(crate) publication: String,
    /// How it is created or checked.
    pub(crate) mode: PublicationMode,
    /// With mode `table`: whether a missing publication may be created.
    pub(crate) create: bool,
    /// The `publish` option for a publication walrelay creates.
    pub(crate) publish: Option<String>,
    /// The outbox tables as (schema, table), in configuration order.
    pub(crate) tables: Vec<(String, String)>,
    /// Database (for messages).
    pub(crate) dbname: String,
    /// Events come from logical decoding messages only: no outbox table
    /// is needed, and a publication without tables is what is wanted.
    pub(crate) messages_only: bool,
    /// Transaction metadata is on, so a publication created in mode
    /// `table` keeps publishing deletes ([`table_publish`]).
    pub(crate) transaction_metadata: bool,
}

impl PublicationPlan {
    /// The plan validated settings ask for, for the outbox `tables`
    /// (schema, table).
    pub(crate) fn new(
        postgres: &PostgresConfig,
        replication: &ReplicationConfig,
        tables: Vec<(String, String)>,
    ) -> Self {
        PublicationPlan {
            publication: replication.publication.clone(),
            mode: replication.publication_mode,
            create: replication.create_publication,
            publish: replication.publish.clone(),
            tables,
            dbname: postgres.dbname.clone(),
            messages_only: false,
            transaction_metadata: false,
        }
    }
}

/// Makes sure every outbox table exists and the publication publishes
/// their inserts, creating or altering the publication as the plan's mode
/// allows (Debezium's `publication.autocreate.mode` semantics, plus
/// `table`).
pub(crate) async fn prepare_publication(
    client: &Client,
    plan: &PublicationPlan,
) -> Result<(), CatalogError> {
    if plan.messages_only {
        return prepare_message_publication(client, plan).await;
    }
    require_outbox_tables(client, plan).await?;
    // Errors about the publication as a whole name the first table.
    let first = plan
        .tables
        .first()
        .expect("a plan that is not messages-only names an outbox table");
    let publication = &plan.publication;
    let row = client
        .query_opt(
            "SELECT pubinsert, puballtables FROM pg_catalog.pg_publication WHERE pubname = $1",
            &[publication],
        )
        .await
        .map_err(sql(format!("cannot look up publication {publication}")))?;
    let Some(row) = row else {
        create_publication(client, plan, first).await?;
        return Ok(());
    };
    let pubinsert: bool = row.get(0);
    let puballtables: bool = row.get(1);
    if !pubinsert {
        return Err(plan.mismatch(first, "it does not publish inserts"));
    }
    if puballtables {
        return accept_all_tables(plan, first);
    }
    require_publication_tables(client, plan).await
}

impl PublicationPlan {
    /// [`CatalogError::PublicationMismatch`] about `table`.
    fn mismatch(&self, (schema, table): &(String, String), reason: &str) -> CatalogError {
        CatalogError::PublicationMismatch {
            publication: self.publication.clone(),
            schema: schema.clone(),
            table: table.clone(),
            reason: reason.to_owned(),
        }
    }

    /// The outbox tables as `FOR TABLE` lists them.
    fn table_list(&self) -> String {
        self.tables
            .iter()
            .map(|(s, t)| format!("{}.{}", quote_ident(s), quote_ident(t)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The `WITH (publish = ...)` of a publication walrelay creates:
    /// `replication.publish`, else `default`, else none.
    fn with_publish(&self, default: Option<&str>) -> String {
        match self.publish.as_deref().or(default) {
            // The list was validated to be operation names only.
            Some(publish) => format!(" WITH (publish = '{publish}')"),
            None => String::new(),
        }
    }
}

/// Every outbox table exists (a table or a partitioned table).
async fn require_outbox_tables(
    client: &Client,
    plan: &PublicationPlan,
) -> Result<(), CatalogError> {
    for (schema, table) in &plan.tables {
        let exists = client
            .query_opt(
                "SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')",
                &[schema, table],
            )
            .await
            .map_err(sql(format!("cannot look up the outbox table {schema}.{table}")))?;
        if exists.is_none() {
            return Err(CatalogError::NoOutboxTable {
                schema: schema.clone(),
                table: table.clone(),
                dbname: plan.dbname.clone(),
            });
        }
    }
    Ok(())
}

/// Creates the missing publication as the plan's mode says, or refuses
/// when the mode forbids it; `no_tables` creates one and stops, for the
/// operator to add the tables.
async fn create_publication(
    client: &Client,
    plan: &PublicationPlan,
    first: &(String, String),
) -> Result<(), CatalogError> {
    let publication = &plan.publication;
    let outbox = plan.table_list();
    let target = match plan.mode {
        PublicationMode::Table if plan.create => {
            let default = table_publish(plan.transaction_metadata);
            format!("FOR TABLE {outbox}{}", plan.with_publish(Some(default)))
        }
        PublicationMode::Table => {
            return Err(CatalogError::NoPublication {
                publication: publication.clone(),
                setting: "replication.create_publication is false",
            })
        }
        PublicationMode::Disabled => {
            return Err(CatalogError::NoPublication {
                publication: publication.clone(),
                setting: "publication.autocreate.mode is disabled",
            })
        }
        PublicationMode::AllTables => format!("FOR ALL TABLES{}", plan.with_publish(None)),
        PublicationMode::Filtered => format!("FOR TABLE {outbox}{}", plan.with_publish(None)),
        PublicationMode::NoTables => plan.with_publish(None),
    };
    let stmt = format!("CREATE PUBLICATION {} {target}", quote_ident(publication));
    client
        .batch_execute(&stmt)
        .await
        .map_err(sql(format!("cannot create publication {publication}")))?;
    info!(publication = %publication, mode = plan.mode.as_str(), "created publication");
    if plan.mode != PublicationMode::NoTables {
        return Ok(());
    }
    Err(plan.mismatch(
        first,
        "it was just created without tables (publication.autocreate.mode=no_tables); \
         add the outbox tables with ALTER PUBLICATION ... ADD TABLE and start walrelay again",
    ))
}

/// A publication `FOR ALL TABLES` carries the outbox tables, at a cost;
/// mode `filtered` wants a `FOR TABLE` one.
fn accept_all_tables(plan: &PublicationPlan, first: &(String, String)) -> Result<(), CatalogError> {
    if plan.mode == PublicationMode::Filtered {
        return Err(plan.mismatch(
            first,
            "it is FOR ALL TABLES, but publication.autocreate.mode=filtered needs a FOR TABLE publication; \
             drop it or use all_tables",
        ));
    }
    warn!(
        publication = %plan.publication,
        "publication is FOR ALL TABLES: the walsender decodes and sends every table's changes; \
         a publication FOR TABLE <outbox tables> is cheaper"
    );
    Ok(())
}

/// Every outbox table is in the publication's list; mode `filtered` makes
/// the list the outbox tables instead (Debezium's filtered mode: the
/// publication's tables become the include list's).
async fn require_publication_tables(
    client: &Client,
    plan: &PublicationPlan,
) -> Result<(), CatalogError> {
    let publication = &plan.publication;
    let rows = client
        .query(
            "SELECT schemaname::text, tablename::text FROM pg_catalog.pg_publication_tables WHERE pubname = $1",
            &[publication],
        )
        .await
        .map_err(sql(format!("cannot list the tables of publication {publication}")))?;
    let listed: BTreeSet<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let wanted: BTreeSet<(String, String)> = plan.tables.iter().cloned().collect();
    if plan.mode == PublicationMode::Filtered && listed != wanted {
        let stmt = format!(
            "ALTER PUBLICATION {} SET TABLE {}",
            quote_ident(publication),
            plan.table_list()
        );
        client
            .batch_execute(&stmt)
            .await
            .map_err(sql(format!("cannot alter publication {publication}")))?;
        info!(publication = %publication, tables = wanted.len(), "set the publication's tables to the outbox tables");
        return Ok(());
    }
    if let Some(missing) = plan.tables.iter().find(|t| !listed.contains(*t)) {
        return Err(plan.mismatch(missing, "the table is not in it"));
    }
    Ok(())
}

/// [`prepare_publication`] for a pipeline whose events are logical decoding
/// messages only. pgoutput sends messages whatever the publication holds,
/// but needs one to exist; every table in it only costs decoding.
async fn prepare_message_publication(
    client: &Client,
    plan: &PublicationPlan,
) -> Result<(), CatalogError> {
    let publication = &plan.publication;
    let mismatch = |reason: &str| CatalogError::PublicationMismatch {
        publication: publication.clone(),
        schema: String::new(),
        table: String::new(),
        reason: reason.to_owned(),
    };
    let row = client
        .query_opt(
            "SELECT puballtables FROM pg_catalog.pg_publication WHERE pubname = $1",
            &[publication],
        )
        .await
        .map_err(sql(format!("cannot look up publication {publication}")))?;
    let Some(row) = row else {
        let target =
            match plan.mode {
                PublicationMode::Table if plan.create => "",
                PublicationMode::Table => {
                    return Err(CatalogError::NoPublication {
                        publication: publication.clone(),
                        setting: "replication.create_publication is false",
                    })
                }
                PublicationMode::NoTables => "",
                PublicationMode::Disabled => {
                    return Err(CatalogError::NoPublication {
                        publication: publication.clone(),
                        setting: "publication.autocreate.mode is disabled",
                    })
                }
                PublicationMode::AllTables => "FOR ALL TABLES",
                PublicationMode::Filtered => return Err(mismatch(
                    "publication.autocreate.mode=filtered needs tables, and this pipeline reads \
                     logical decoding messages only (Debezium fails the same way: \"No table \
                     filters found for filtered publication\"); use no_tables",
                )),
            };
        let stmt = format!("CREATE PUBLICATION {} {target}", quote_ident(publication));
        client
            .batch_execute(&stmt)
            .await
            .map_err(sql(format!("cannot create publication {publication}")))?;
        info!(publication = %publication, mode = plan.mode.as_str(), "created publication for logical decoding messages");
        return Ok(());
    };
    let all: bool = row.get(0);
    let tables: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_catalog.pg_publication_tables WHERE pubname = $1",
            &[publication],
        )
        .await
        .map_err(sql(format!(
            "cannot list the tables of publication {publication}"
        )))?
        .get(0);
    if all || tables > 0 {
        warn!(
            publication = %publication,
            tables,
            all_tables = all,
            "the publication publishes tables, but this pipeline's events are logical decoding \
             messages only: the walsender decodes and sends those tables' changes for nothing"
        );
    }
    Ok(())
}

/// Reads what pgoutput does not send about the outbox table's columns:
/// NOT NULL, the declared type and defaults (they shape Debezium's schemas).
pub(crate) async fn table_meta(
    client: &Client,
    schema: &str,
    table: &str,
) -> Result<crate::connect::pg::TableMeta, CatalogError> {
    let rows = client
        .query(
            "SELECT a.attname::text, a.attnotnull, format_type(a.atttypid, a.atttypmod), \
                    pg_get_expr(d.adbin, d.adrelid) \
             FROM pg_catalog.pg_attribute a \
             JOIN pg_catalog.pg_class c ON c.oid = a.attrelid \
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum \
             WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped \
             ORDER BY a.attnum",
            &[&schema, &table],
        )
        .await
        .map_err(sql(format!("cannot read the columns of {schema}.{table}")))?;
    Ok(crate::connect::pg::TableMeta::new(
        rows.iter()
            .map(|r| crate::connect::pg::ColumnMeta {
                name: r.get(0),
                not_null: r.get(1),
                type_name: r.get(2),
                default_expr: r.get(3),
            })
            .collect(),
    ))
}

/// Drops a slot (`slot.drop.on.stop`); only called on an orderly stop, after
/// the replication connection released it.
pub(crate) async fn drop_slot(client: &Client, slot: &str) -> Result<(), CatalogError> {
    client
        .execute("SELECT pg_drop_replication_slot($1)", &[&slot])
        .await
        .map_err(sql(format!("cannot drop replication slot {slot}")))?;
    Ok(())
}

/// The comment of a publication (walrelay records its slots there).
pub(crate) async fn publication_comment(
    client: &Client,
    publication: &str,
) -> Result<Option<String>, CatalogError> {
    let row = client
        .query_opt(
            "SELECT obj_description(oid, 'pg_publication') FROM pg_catalog.pg_publication WHERE pubname = $1",
            &[&publication],
        )
        .await
        .map_err(sql(format!(
            "cannot read the comment of publication {publication}"
        )))?;
    Ok(row.and_then(|r| r.get(0)))
}

/// Replaces a publication's comment; needs ownership of the publication.
pub(crate) async fn set_publication_comment(
    client: &Client,
    publication: &str,
    text: &str,
) -> Result<(), CatalogError> {
    client
        .batch_execute(&format!(
            "COMMENT ON PUBLICATION {} IS {}",
            quote_ident(publication),
            super::replication::quote_literal(text)
        ))
        .await
        .map_err(sql(format!("cannot comment on publication {publication}")))
}

/// One poll's view of the slot.
#[derive(Debug, Clone, Default)]
pub(crate) struct SlotLag {
    /// Whether a walsender holds the slot.
    pub(crate) active: bool,
    /// `wal_status`.
    pub(crate) wal_status: Option<String>,
    /// `safe_wal_size`; `None` when `max_slot_wal_keep_size` is unlimited.
    pub(crate) safe_wal_size: Option<i64>,
    /// `pg_current_wal_lsn() - restart_lsn` (on a standby, its last
    /// replayed position instead of `pg_current_wal_lsn()`).
    pub(crate) retained_bytes: Option<i64>,
    /// `pg_current_wal_lsn() - confirmed_flush_lsn` (the same on a standby).
    pub(crate) confirmed_lag_bytes: Option<i64>,
    /// `confirmed_flush_lsn` as text.
    pub(crate) confirmed: Option<String>,
}

/// Reads the slot's lag; `None` when the slot does not exist.
pub(crate) async fn poll_slot(
    client: &Client,
    slot: &str,
) -> Result<Option<SlotLag>, tokio_postgres::Error> {
    let row = client
        .query_opt(
            // On a standby (decoding there, 16+) pg_current_wal_lsn()
            // fails: the WAL position there is what it replayed.
            "SELECT active, wal_status::text, safe_wal_size,
                    pg_wal_lsn_diff(w.now_lsn, restart_lsn)::int8,
                    pg_wal_lsn_diff(w.now_lsn, confirmed_flush_lsn)::int8,
                    confirmed_flush_lsn::text
             FROM pg_replication_slots,
                  LATERAL (SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()
                                       ELSE pg_current_wal_lsn() END AS now_lsn) w
             WHERE slot_name = $1",
            &[&slot],
        )
        .await?;
    Ok(row.map(|r| SlotLag {
        active: r.get(0),
        wal_status: r.get(1),
        safe_wal_size: r.get(2),
        retained_bytes: r.get(3),
        confirmed_lag_bytes: r.get(4),
        confirmed: r.get(5),
    }))
}

/// `max_slot_wal_keep_size` as the server shows it (`-1`: unlimited).
pub(crate) async fn max_slot_wal_keep_size(
    client: &Client,
) -> Result<String, tokio_postgres::Error> {
    Ok(client
        .query_one("SHOW max_slot_wal_keep_size", &[])
        .await?
        .get(0))
}

/// Whether the server is a standby (`pg_is_in_recovery()`).
pub(crate) async fn in_recovery(client: &Client) -> Result<bool, CatalogError> {
    Ok(client
        .query_one("SELECT pg_is_in_recovery()", &[])
        .await
        .map_err(sql("cannot ask the server whether it is a standby"))?
        .get(0))
}

/// First server version (`server_version_num`) with failover slots.
pub(crate) const FAILOVER_MIN_SERVER_VERSION: u32 = 170_000;

/// What walrelay needs from the server ([`capability::server_facts`]),
/// bounded by `after`: an error naming the first missing capability when
/// it cannot stream from this server at all.
pub(crate) async fn require_capabilities(
    client: &Client,
    after: Duration,
) -> Result<capability::ServerFacts, CatalogError> {
    let facts = bounded(after, "reading the server's version and settings", async {
        capability::server_facts(client)
            .await
            .map_err(sql("cannot read the server's version and settings"))
    })
    .await?;
    match facts.problems().into_iter().next() {
        Some(problem) => Err(problem.into()),
        None => Ok(facts),
    }
}

/// What a heartbeat runs when no `action_query` is configured: a
/// transactional logical decoding message, prefix `walrelay_heartbeat`.
pub(crate) const DEFAULT_HEARTBEAT_SQL: &str =
    "SELECT pg_logical_emit_message(true, 'walrelay_heartbeat', '')";

/// Runs a heartbeat statement: [`DEFAULT_HEARTBEAT_SQL`], or the user's
/// `heartbeat.action_query` as written (Debezium runs it as is too).
pub(crate) async fn run_heartbeat(client: &Client, sql: &str) -> Result<(), tokio_postgres::Error> {
    client.batch_execute(sql).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_mode_publishes_no_deletes_unless_metadata_counts_them() {
        assert_eq!(table_publish(false), "insert, update");
        assert_eq!(table_publish(true), "insert, update, delete");
        for publish in [table_publish(false), table_publish(true)] {
            crate::postgres::config::validate_publish(publish).expect("a valid publish list");
        }
    }
}
