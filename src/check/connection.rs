//! The connection rows: an SQL connection with the configured credentials
//! (and, with several hosts, what each one is), and a replication
//! connection with `IDENTIFY_SYSTEM`; each failure with the fix its cause
//! calls for (SQLSTATE, TLS, `target_session_attrs`, pg_hba.conf). It must
//! never keep a replication connection open or run anything on it but
//! `IDENTIFY_SYSTEM`, and never wait on a server without a bound.

use tokio_postgres::Client;

use super::report::{
    CheckReport, CheckRow, CheckStatus, POSTGRES_CONNECTION, POSTGRES_HOSTS, REPLICATION_CONNECTION,
};
use super::step::{bounded, read, sqlstate, CheckError};
use crate::chain::DisplayChain;
use crate::config::Config;
use crate::postgres::catalog::{self, preflight};
use crate::postgres::config::Endpoint;
use crate::postgres::hosts::{HostsError, Refusal};
use crate::postgres::poll::config::SourceKind;
use crate::postgres::replication::{ConnectParams, ReplicationConnection, ReplicationError};

/// The connection rows, in their order: `postgres connection`, `postgres
/// hosts` (several hosts only) and `replication connection` (not for the
/// polling source, which opens none). The replication connection runs as
/// `check_app`. Returns the SQL connection, its statements bounded on the
/// server side by the connect timeout.
pub(super) async fn connect(
    report: &mut CheckReport,
    config: &Config,
    params: &ConnectParams,
    check_app: &str,
) -> Option<Client> {
    let poll = config.source.kind == SourceKind::Poll;
    let addr = params.hosts_label();
    let mut repl_params = params.clone();
    repl_params.application_name = check_app.to_owned();
    // Both connections (and, with several hosts, a look at each) at once:
    // an unreachable server costs one timeout. The polling source opens no
    // replication connection.
    let (client, replication, hosts) = tokio::join!(
        bounded(
            "the sql connection",
            params.connect_bound(),
            catalog::connect_with_host(params)
        ),
        async {
            if poll {
                None
            } else {
                Some(check_replication_connection(&repl_params, &addr).await)
            }
        },
        describe_hosts(params)
    );
    let client = match client {
        Ok((client, on)) => {
            connected_row(report, config, params, &client, &on).await;
            report.rows.extend(hosts.map(|row| row.finish(Some(&on))));
            // Bounds every later statement on the server side as well.
            let timeout = params.connect_timeout;
            let _ =
                tokio::time::timeout(timeout, preflight::set_statement_timeout(&client, timeout))
                    .await;
            Some(client)
        }
        Err(e) => {
            let fix = connect_fix(&e, config, &addr);
            report.fail(POSTGRES_CONNECTION, DisplayChain(&e).to_string(), fix);
            report.rows.extend(hosts.map(|row| row.finish(None)));
            None
        }
    };
    report.rows.extend(replication);
    client
}

/// The passing `postgres connection` row: the host walrelay chose, the
/// database, the role and the server's version.
async fn connected_row(
    report: &mut CheckReport,
    config: &Config,
    params: &ConnectParams,
    client: &Client,
    on: &Endpoint,
) {
    let pg = &config.postgres;
    let version =
        match tokio::time::timeout(params.connect_timeout, preflight::server_version(client)).await
        {
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
}

/// How to fix a failed SQL connection: the host list, TLS, or by SQLSTATE.
fn connect_fix(e: &CheckError, config: &Config, addr: &str) -> String {
    let target = match e {
        CheckError::Catalog(catalog::CatalogError::Hosts(hosts)) => target_fix(hosts),
        _ => None,
    };
    if let Some(fix) = target {
        fix
    } else if tls_refused(e) {
        TLS_FIX.to_owned()
    } else {
        let pg = &config.postgres;
        connection_fix(sqlstate(e), &pg.user, addr, &pg.dbname)
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
            // A handshake the network broke is not a refusal.
            return !matches!(tls, crate::postgres::tls::TlsError::HandshakeLost { .. });
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
    fn finish(self, chosen: Option<&Endpoint>) -> CheckRow {
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

/// `IDENTIFY_SYSTEM` on a replication connection: what walrelay needs
/// before it can stream (pg_hba.conf's replication line, REPLICATION, a
/// free WAL sender).
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

/// How to fix a failed replication connection, by its cause.
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
        ReplicationError::Tls(e) if !matches!(e, crate::postgres::tls::TlsError::HandshakeLost { .. }) => {
            TLS_FIX.to_owned()
        }
        ReplicationError::Hosts(hosts) => {
            target_fix(hosts).unwrap_or_else(|| connection_fix(None, user, addr, dbname))
        }
        _ => connection_fix(None, user, addr, dbname),
    }
}
