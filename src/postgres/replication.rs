//! The replication connection: PostgreSQL's frontend/backend protocol spoken
//! with `replication=database`, from the startup packet to the CopyBoth
//! stream.
//!
//! Owns the socket, the SSLRequest and TLS upgrade (with libpq's `sslmode`
//! fallbacks; certificates are [`super::tls`]'s), authentication (trust,
//! cleartext, md5, SCRAM-SHA-256 and SCRAM-SHA-256-PLUS), replication commands (`IDENTIFY_SYSTEM`, `CREATE_REPLICATION_SLOT`, `ALTER_REPLICATION_SLOT`,
//! `START_REPLICATION`) and the framing of CopyData. It never interprets WAL
//! content (that is `walrelay_proto`'s job) and never decides what LSN to
//! confirm (that is the checkpoint's): it only carries the bytes.

use std::fmt;
use std::io;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use fallible_iterator::FallibleIterator;
use openssl::ssl::SslConnector;
use postgres_protocol::authentication::{md5_hash, sasl};
use postgres_protocol::message::backend::{AuthenticationSaslBody, Message};
use postgres_protocol::message::frontend;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use walrelay_proto::Lsn;

use super::hosts::{self, HostsError, Refusal, Reported};
use super::tls::{TlsError, TlsParams};
use crate::postgres::config::{
    ChannelBindingMode, Endpoint, PostgresConfig, SslMode, TargetSessionAttrs,
};
use crate::retry::{Class, Retry};
use crate::secret::Secret;

/// Read buffer growth step; large enough that one read usually holds many
/// XLogData frames.
pub(super) const READ_CHUNK: usize = 256 * 1024;

/// Anything we can speak the protocol over (plain TCP or TLS).
pub(crate) trait Transport: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static> Transport for T {}

pub(super) type BoxedTransport = Box<dyn Transport>;

/// Where and as whom to connect.
#[derive(Clone)]
pub struct ConnectParams {
    /// The servers to try, in order (at least one).
    pub hosts: Vec<Endpoint>,
    /// Which of them is acceptable (libpq's `target_session_attrs`).
    pub target_session_attrs: TargetSessionAttrs,
    /// Role name.
    pub user: String,
    /// Password, if the server asks for one.
    pub password: Option<Secret>,
    /// Database holding the slot and the outbox table.
    pub dbname: String,
    /// `application_name` shown in `pg_stat_replication`.
    pub application_name: String,
    /// Bound on TCP connect plus authentication.
    pub connect_timeout: Duration,
    /// TLS mode, certificates and channel binding.
    pub tls: TlsParams,
}

impl fmt::Debug for ConnectParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectParams")
            .field("hosts", &self.hosts)
            .field("target_session_attrs", &self.target_session_attrs)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("dbname", &self.dbname)
            .field("application_name", &self.application_name)
            .field("tls", &self.tls)
            .finish()
    }
}

/// Errors of the replication connection.
#[derive(Debug, thiserror::Error)]
pub enum ReplicationError {
    /// TCP connect failed.
    #[error("cannot connect to postgresql at {addr}")]
    Connect {
        /// `host:port`.
        addr: String,
        /// The socket error.
        #[source]
        source: io::Error,
    },
    /// Connect plus authentication took too long.
    #[error("connecting to postgresql at {addr} timed out after {timeout:?}")]
    ConnectTimeout {
        /// `host:port`.
        addr: String,
        /// The configured bound.
        timeout: Duration,
    },
    /// Reading or writing the socket failed.
    #[error("i/o error on the replication connection")]
    Io(#[from] io::Error),
    /// The server closed the connection.
    #[error("the server closed the replication connection")]
    Closed,
    /// The server reported an error.
    #[error("postgresql error {code}: {message}{}", detail.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Server {
        /// SQLSTATE.
        code: String,
        /// Primary message.
        message: String,
        /// DETAIL, if any.
        detail: Option<String>,
        /// What the SQLSTATE allows ([`sqlstate_class`]), judged when the
        /// error arrived.
        retry: Class,
    },
    /// The server asked for an authentication method we do not speak.
    #[error("the server asked for {0} authentication, which walrelay does not support")]
    UnsupportedAuth(&'static str),
    /// The server asked for a password and none is configured.
    #[error("the server asked for a password for role {user} but none is configured")]
    PasswordRequired {
        /// The role.
        user: String,
    },
    /// The server sent something the protocol does not allow here.
    #[error("protocol violation on the replication connection: {0}")]
    Protocol(String),
    /// TLS setup, certificates or the handshake.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// `channel_binding = "require"` and the server did not bind.
    #[error("postgres.channel_binding = \"require\", but {0}")]
    ChannelBindingRequired(&'static str),
    /// No host of `postgres.host` connected and passed
    /// `target_session_attrs`; names each host and why.
    #[error(transparent)]
    Hosts(Box<HostsError<ReplicationError>>),
}

impl ReplicationError {
    /// SQLSTATE of a server error.
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            ReplicationError::Server { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// Each variant's class, or the one it was created with: lost connections,
/// server shutdown and restarts, a slot held by another walrelay (hot
/// standby) are worth waiting for; a refused login, an authentication
/// walrelay cannot do or a protocol violation are not.
impl From<ReplicationError> for Retry<ReplicationError> {
    fn from(e: ReplicationError) -> Self {
        use ReplicationError as R;
        match e {
            e @ (R::Connect { .. } | R::ConnectTimeout { .. } | R::Io(_) | R::Closed) => {
                Retry::Transient(e)
            }
            e @ R::Server { retry, .. } => Retry::new(retry, e),
            R::Tls(tls) => Retry::from(tls).map(R::Tls),
            R::Hosts(hosts) => Retry::new(hosts.retry, R::Hosts(hosts)),
            e @ (R::UnsupportedAuth(_)
            | R::PasswordRequired { .. }
            | R::Protocol(_)
            | R::ChannelBindingRequired(_)) => Retry::Definite(e),
        }
    }
}

/// What a server error allows, by its SQLSTATE: a reconnect is worth
/// trying after a shutdown or restart, a lost connection, a resource taken
/// for now; every other error stays.
pub(crate) fn sqlstate_class(code: &str) -> Class {
    let transient = matches!(
        code,
        // admin_shutdown, crash_shutdown, cannot_connect_now
        "57P01" | "57P02" | "57P03"
        // object_in_use: the slot is active for another process
        | "55006"
        // too_many_connections, configuration_limit_exceeded (max_wal_senders)
        | "53300" | "53400"
        // idle_session_timeout, query_canceled (walsender timeout)
        | "57P05" | "57014"
    ) || code.starts_with("08");
    if transient {
        Class::Transient
    } else {
        Class::Definite
    }
}

/// What `IDENTIFY_SYSTEM` returns.
#[derive(Debug, Clone)]
pub struct SystemIdentity {
    /// `systemid`.
    pub system_id: String,
    /// Current timeline.
    pub timeline: u32,
    /// Current WAL flush location.
    pub xlogpos: Lsn,
    /// Connected database.
    pub dbname: Option<String>,
}

/// A replication connection before `START_REPLICATION`.
pub struct ReplicationConnection {
    io: BoxedTransport,
    read_buf: BytesMut,
    write_buf: BytesMut,
    /// The server connected to.
    endpoint: Endpoint,
    /// What the server reported about itself at startup.
    reported: Reported,
}

impl ReplicationConnection {
    /// Connects and authenticates to the first host of `params.hosts` that
    /// accepts and passes `params.target_session_attrs` (libpq's rules, see
    /// [`hosts`]); each host within `params.connect_timeout`.
    pub async fn connect(params: &ConnectParams) -> Result<Self, ReplicationError> {
        hosts::choose(
            "replication",
            &params.hosts,
            params.target_session_attrs,
            |endpoint, test| Self::connect_host(params, endpoint, test),
        )
        .await
        .map(|(conn, _)| conn)
        .map_err(|e| e.collapse(|e| ReplicationError::Hosts(Box::new(e))))
    }

    /// The server this connection is on.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// One host: connect, authenticate and apply `test`, all within the
    /// connect timeout (libpq bounds each host's attempt as a whole).
    async fn connect_host(
        params: &ConnectParams,
        endpoint: Endpoint,
        test: TargetSessionAttrs,
    ) -> Result<Self, Refusal<ReplicationError>> {
        let addr = endpoint.to_string();
        let timeout = params.connect_timeout;
        let attempt = async {
            let mut conn = Self::connect_inner(params, &endpoint, &addr).await?;
            let need = hosts::need(test);
            let yes = match conn.reported.answer(need) {
                Some(yes) => yes,
                None => conn.ask(need).await?,
            };
            Ok::<_, ReplicationError>((conn, yes))
        };
        let (conn, yes) = match tokio::time::timeout(timeout, attempt).await {
            Ok(Ok(done)) => done,
            Ok(Err(e)) => return Err(Refusal::Failed(e.into())),
            Err(_) => {
                return Err(Refusal::Failed(Retry::Transient(
                    ReplicationError::ConnectTimeout { addr, timeout },
                )))
            }
        };
        match hosts::verdict(test, yes) {
            Ok(()) => Ok(conn),
            Err(why) => {
                conn.terminate().await;
                Err(Refusal::Mismatch(why))
            }
        }
    }

    /// Asks what the startup parameters did not say (servers before 14).
    async fn ask(&mut self, need: hosts::Need) -> Result<bool, ReplicationError> {
        let Some(sql) = hosts::query(need) else {
            return Ok(false);
        };
        let rows = self.simple_query(sql).await?;
        let value = rows
            .first()
            .and_then(|r| r.first())
            .and_then(|v| v.as_deref());
        hosts::parse_answer(value)
            .ok_or_else(|| ReplicationError::Protocol(format!("unexpected answer to {sql}")))
    }

    /// Closes the connection politely (Terminate), as libpq does with a
    /// host that fails the `target_session_attrs` test.
    async fn terminate(mut self) {
        frontend::terminate(&mut self.write_buf);
        // Best effort, and never a wait on a server that stopped reading.
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            let _ = self.flush().await;
            let _ = self.io.shutdown().await;
        })
        .await;
    }

    async fn connect_inner(
        params: &ConnectParams,
        endpoint: &Endpoint,
        addr: &str,
    ) -> Result<Self, ReplicationError> {
        let connector = params.tls.connector()?;
        let Some(connector) = connector else {
            return Self::attempt(params, endpoint, addr, None).await;
        };
        match params.tls.mode {
            // libpq's allow: plain first, TLS if the server refuses that.
            SslMode::Allow => match Self::attempt(params, endpoint, addr, None).await {
                Err(ReplicationError::Server { .. }) => {
                    Self::attempt(params, endpoint, addr, Some((&connector, false))).await
                }
                other => other,
            },
            // libpq's prefer: TLS when offered; plain again when the TLS
            // handshake or the session over TLS is refused (a handshake the
            // network broke is no refusal).
            SslMode::Prefer => {
                match Self::attempt(params, endpoint, addr, Some((&connector, true))).await {
                    Err(e @ ReplicationError::Tls(TlsError::HandshakeLost { .. })) => Err(e),
                    Err(ReplicationError::Tls(e)) => {
                        tracing::debug!(error = %e, "tls refused, retrying without (sslmode prefer)");
                        Self::attempt(params, endpoint, addr, None).await
                    }
                    Err(ReplicationError::Server { .. }) => {
                        Self::attempt(params, endpoint, addr, None).await
                    }
                    other => other,
                }
            }
            _ => Self::attempt(params, endpoint, addr, Some((&connector, false))).await,
        }
    }

    /// One connection: TCP, then the SSLRequest when `tls` is given (the
    /// bool: a refusal means plain, as with sslmode prefer), then startup.
    async fn attempt(
        params: &ConnectParams,
        endpoint: &Endpoint,
        addr: &str,
        tls: Option<(&SslConnector, bool)>,
    ) -> Result<Self, ReplicationError> {
        let mut tcp = TcpStream::connect((endpoint.host.as_str(), endpoint.port))
            .await
            .map_err(|source| ReplicationError::Connect {
                addr: addr.to_owned(),
                source,
            })?;
        tcp.set_nodelay(true)?;
        let mut binding = None;
        let mut encrypted = false;
        let io: BoxedTransport = match tls {
            None => Box::new(tcp),
            Some((connector, plain_if_refused)) => {
                let mut request = BytesMut::with_capacity(8);
                frontend::ssl_request(&mut request);
                tcp.write_all(&request).await?;
                // Exactly one byte: anything the server sent after it would
                // be unauthenticated plaintext (CVE-2021-23222).
                let mut answer = [0u8; 1];
                if tcp.read(&mut answer).await? == 0 {
                    return Err(ReplicationError::Closed);
                }
                match answer[0] {
                    b'S' => {
                        let (stream, data) = params
                            .tls
                            .handshake(connector, &endpoint.host, addr, tcp)
                            .await?;
                        binding = data;
                        encrypted = true;
                        Box::new(stream)
                    }
                    b'N' if plain_if_refused => Box::new(tcp),
                    b'N' => {
                        return Err(TlsError::Refused {
                            addr: addr.to_owned(),
                            mode: params.tls.mode.as_str(),
                        }
                        .into())
                    }
                    other => {
                        return Err(ReplicationError::Protocol(format!(
                            "unexpected answer {:?} to the SSLRequest",
                            other as char
                        )))
                    }
                }
            }
        };
        let mut conn = ReplicationConnection {
            io,
            read_buf: BytesMut::with_capacity(READ_CHUNK),
            write_buf: BytesMut::with_capacity(1024),
            endpoint: endpoint.clone(),
            reported: Reported::default(),
        };
        conn.startup(params, encrypted, binding).await?;
        tracing::debug!(addr, tls = encrypted, "replication connection established");
        Ok(conn)
    }

    /// Startup and authentication; `binding` is the `tls-server-end-point`
    /// data when the connection is TLS.
    async fn startup(
        &mut self,
        params: &ConnectParams,
        encrypted: bool,
        binding: Option<Vec<u8>>,
    ) -> Result<(), ReplicationError> {
        let startup = [
            ("user", params.user.as_str()),
            ("database", params.dbname.as_str()),
            ("replication", "database"),
            ("application_name", params.application_name.as_str()),
            ("client_encoding", "UTF8"),
        ];
        frontend::startup_message(startup.iter().copied(), &mut self.write_buf)?;
        self.flush().await?;
        let mut auth = Auth::new(params, encrypted, binding);
        loop {
            match self.read_message().await? {
                Message::ParameterStatus(body) => {
                    if let (Ok(name), Ok(value)) = (body.name(), body.value()) {
                        self.reported.record(name, value);
                    }
                }
                Message::BackendKeyData(_) | Message::NoticeResponse(_) => {}
                Message::ReadyForQuery(_) => return Ok(()),
                Message::ErrorResponse(body) => return Err(server_error(&body)),
                other => self.authenticate(&mut auth, other).await?,
            }
        }
    }

    /// Answers one message of the authentication exchange.
    async fn authenticate(
        &mut self,
        auth: &mut Auth<'_>,
        message: Message,
    ) -> Result<(), ReplicationError> {
        match message {
            Message::AuthenticationOk => auth.accept_ok(),
            Message::AuthenticationCleartextPassword => {
                auth.refuse_unbound("the server asked for a cleartext password")?;
                let pw = auth.password()?;
                frontend::password_message(&pw, &mut self.write_buf)?;
                self.flush().await
            }
            Message::AuthenticationMd5Password(body) => {
                auth.refuse_unbound("the server asked for an md5 password")?;
                let pw = auth.password()?;
                let hash = md5_hash(auth.params.user.as_bytes(), &pw, body.salt());
                frontend::password_message(hash.as_bytes(), &mut self.write_buf)?;
                self.flush().await
            }
            Message::AuthenticationSasl(body) => {
                let (mechanism, channel) = auth.mechanism(&body)?;
                let s = sasl::ScramSha256::new(&auth.password()?, channel);
                frontend::sasl_initial_response(mechanism, s.message(), &mut self.write_buf)?;
                self.flush().await?;
                auth.bound = mechanism == sasl::SCRAM_SHA_256_PLUS;
                auth.scram = Some(s);
                Ok(())
            }
            Message::AuthenticationSaslContinue(body) => {
                let s = auth.scram.as_mut().ok_or_else(|| {
                    ReplicationError::Protocol("SASL continue without SASL start".into())
                })?;
                s.update(body.data())?;
                frontend::sasl_response(s.message(), &mut self.write_buf)?;
                self.flush().await
            }
            Message::AuthenticationSaslFinal(body) => {
                let s = auth.scram.as_mut().ok_or_else(|| {
                    ReplicationError::Protocol("SASL final without SASL start".into())
                })?;
                s.finish(body.data())?;
                auth.scram_done = true;
                Ok(())
            }
            Message::AuthenticationKerberosV5 => {
                Err(ReplicationError::UnsupportedAuth("Kerberos V5"))
            }
            Message::AuthenticationScmCredential => {
                Err(ReplicationError::UnsupportedAuth("SCM credential"))
            }
            Message::AuthenticationGss | Message::AuthenticationGssContinue(_) => {
                Err(ReplicationError::UnsupportedAuth("GSSAPI"))
            }
            Message::AuthenticationSspi => Err(ReplicationError::UnsupportedAuth("SSPI")),
            _ => Err(ReplicationError::Protocol(
                "unexpected message during startup".into(),
            )),
        }
    }

    /// Runs a replication command or SQL query with the simple query
    /// protocol and returns the rows as text.
    pub(crate) async fn simple_query(
        &mut self,
        sql: &str,
    ) -> Result<Vec<Vec<Option<String>>>, ReplicationError> {
        frontend::query(sql, &mut self.write_buf)?;
        self.flush().await?;
        let mut rows = Vec::new();
        let mut error = None;
        loop {
            match self.read_message().await? {
                Message::DataRow(row) => {
                    let buf = row.buffer();
                    let mut values = Vec::new();
                    let mut ranges = row.ranges();
                    while let Some(range) = ranges.next()? {
                        values.push(range.map(|r| String::from_utf8_lossy(&buf[r]).into_owned()));
                    }
                    rows.push(values);
                }
                Message::ErrorResponse(body) => error = Some(server_error(&body)),
                Message::ReadyForQuery(_) => break,
                _ => {}
            }
        }
        match error {
            Some(e) => Err(e),
            None => Ok(rows),
        }
    }

    /// `IDENTIFY_SYSTEM`.
    pub async fn identify_system(&mut self) -> Result<SystemIdentity, ReplicationError> {
        let rows = self.simple_query("IDENTIFY_SYSTEM").await?;
        let row = rows
            .first()
            .filter(|r| r.len() >= 4)
            .ok_or_else(|| ReplicationError::Protocol("IDENTIFY_SYSTEM returned no row".into()))?;
        let text = |i: usize| row[i].clone().unwrap_or_default();
        Ok(SystemIdentity {
            system_id: text(0),
            timeline: text(1).parse().map_err(|_| {
                ReplicationError::Protocol("bad timeline in IDENTIFY_SYSTEM".into())
            })?,
            xlogpos: text(2)
                .parse()
                .map_err(|_| ReplicationError::Protocol("bad xlogpos in IDENTIFY_SYSTEM".into()))?,
            dbname: row[3].clone(),
        })
    }

    /// `CREATE_REPLICATION_SLOT <slot> LOGICAL pgoutput NOEXPORT_SNAPSHOT`,
    /// or with `failover` the PostgreSQL 17 option form
    /// (see [`create_slot_command`]); returns the slot's consistent point.
    pub async fn create_logical_slot(
        &mut self,
        slot: &str,
        failover: bool,
    ) -> Result<Lsn, ReplicationError> {
        let rows = self
            .simple_query(&create_slot_command(slot, failover))
            .await?;
        rows.first()
            .and_then(|r| r.get(1).cloned().flatten())
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                ReplicationError::Protocol(
                    "CREATE_REPLICATION_SLOT returned no consistent point".into(),
                )
            })
    }

    /// `ALTER_REPLICATION_SLOT <slot> (FAILOVER <on>)` (PostgreSQL 17+): makes
    /// an existing logical slot a failover slot or a plain one. The server
    /// refuses while another walsender holds the slot (SQLSTATE 55006,
    /// transient) and on a standby.
    pub(crate) async fn set_slot_failover(
        &mut self,
        slot: &str,
        on: bool,
    ) -> Result<(), ReplicationError> {
        self.simple_query(&alter_slot_failover_command(slot, on))
            .await
            .map(drop)
    }

    /// `CREATE_REPLICATION_SLOT <slot> TEMPORARY LOGICAL pgoutput
    /// EXPORT_SNAPSHOT`: a slot that disappears with this connection, and
    /// the name of a snapshot consistent with its position, usable by other
    /// sessions while this connection stays open and idle. Returns the
    /// consistent point and the snapshot name.
    pub(crate) async fn create_temporary_slot_exporting_snapshot(
        &mut self,
        slot: &str,
    ) -> Result<(Lsn, String), ReplicationError> {
        let sql = format!(
            "CREATE_REPLICATION_SLOT {} TEMPORARY LOGICAL pgoutput EXPORT_SNAPSHOT",
            quote_ident(slot)
        );
        let rows = self.simple_query(&sql).await?;
        let row = rows.first().ok_or_else(|| {
            ReplicationError::Protocol("CREATE_REPLICATION_SLOT returned no row".into())
        })?;
        let lsn = row
            .get(1)
            .cloned()
            .flatten()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                ReplicationError::Protocol(
                    "CREATE_REPLICATION_SLOT returned no consistent point".into(),
                )
            })?;
        let snapshot = row.get(2).cloned().flatten().ok_or_else(|| {
            ReplicationError::Protocol("CREATE_REPLICATION_SLOT exported no snapshot".into())
        })?;
        Ok((lsn, snapshot))
    }

    /// `START_REPLICATION SLOT <slot> LOGICAL <lsn> (options)`; on success the
    /// connection is in CopyBoth mode and becomes a [`ReplicationStream`].
    pub async fn start_replication(
        mut self,
        slot: &str,
        start: Lsn,
        options: &[(&str, String)],
    ) -> Result<ReplicationStream, ReplicationError> {
        let opts = options
            .iter()
            .map(|(k, v)| format!("{} {}", quote_ident(k), quote_literal(v)))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "START_REPLICATION SLOT {} LOGICAL {} ({})",
            quote_ident(slot),
            start,
            opts
        );
        frontend::query(&sql, &mut self.write_buf)?;
        self.flush().await?;
        loop {
            self.fill_header().await?;
            match self.read_buf[0] {
                // CopyBothResponse, which postgres-protocol does not parse.
                b'W' => {
                    let len = frame_len(&self.read_buf)?;
                    self.fill(len).await?;
                    self.read_buf.advance(len);
                    break;
                }
                _ => match self.read_message().await? {
                    Message::ErrorResponse(body) => {
                        let err = server_error(&body);
                        // Drain to ReadyForQuery is pointless: the caller drops the connection.
                        return Err(err);
                    }
                    Message::NoticeResponse(_) | Message::ParameterStatus(_) => {}
                    _ => {
                        return Err(ReplicationError::Protocol(
                            "unexpected message in reply to START_REPLICATION".into(),
                        ))
                    }
                },
            }
        }
        let (reader, writer) = tokio::io::split(self.io);
        Ok(ReplicationStream {
            reader: StreamReader {
                io: reader,
                buf: self.read_buf,
            },
            writer: StreamWriter {
                io: writer,
                buf: self.write_buf,
            },
        })
    }

    async fn flush(&mut self) -> Result<(), ReplicationError> {
        self.io.write_all(&self.write_buf).await?;
        self.io.flush().await?;
        self.write_buf.clear();
        Ok(())
    }

    async fn fill_header(&mut self) -> Result<(), ReplicationError> {
        self.fill(5).await
    }

    async fn fill(&mut self, n: usize) -> Result<(), ReplicationError> {
        while self.read_buf.len() < n {
            self.read_buf
                .reserve(n.max(READ_CHUNK) - self.read_buf.len().min(n.max(READ_CHUNK)));
            if self.io.read_buf(&mut self.read_buf).await? == 0 {
                return Err(ReplicationError::Closed);
            }
        }
        Ok(())
    }

    async fn read_message(&mut self) -> Result<Message, ReplicationError> {
        loop {
            if let Some(msg) = Message::parse(&mut self.read_buf)? {
                return Ok(msg);
            }
            self.read_buf.reserve(READ_CHUNK);
            if self.io.read_buf(&mut self.read_buf).await? == 0 {
                return Err(ReplicationError::Closed);
            }
        }
    }
}

/// Where authentication stands during one startup.
struct Auth<'a> {
    params: &'a ConnectParams,
    /// The connection is TLS.
    encrypted: bool,
    /// The `tls-server-end-point` data of a TLS connection.
    binding: Option<Vec<u8>>,
    /// SCRAM, once the server asked for SASL.
    scram: Option<sasl::ScramSha256>,
    /// The server proved it knows the password (SASL final).
    scram_done: bool,
    /// SCRAM-SHA-256-PLUS was chosen.
    bound: bool,
}

impl<'a> Auth<'a> {
    fn new(params: &'a ConnectParams, encrypted: bool, binding: Option<Vec<u8>>) -> Self {
        Auth {
            params,
            encrypted,
            binding,
            scram: None,
            scram_done: false,
            bound: false,
        }
    }

    fn mode(&self) -> ChannelBindingMode {
        self.params.tls.channel_binding
    }

    /// The configured password, which the server asked for.
    fn password(&self) -> Result<Vec<u8>, ReplicationError> {
        self.params
            .password
            .as_ref()
            .map(|p| p.expose().as_bytes().to_vec())
            .ok_or_else(|| ReplicationError::PasswordRequired {
                user: self.params.user.clone(),
            })
    }

    /// A method without channel binding, refused when binding is required.
    fn refuse_unbound(&self, asked: &'static str) -> Result<(), ReplicationError> {
        if self.mode() == ChannelBindingMode::Require {
            return Err(ReplicationError::ChannelBindingRequired(asked));
        }
        Ok(())
    }

    /// AuthenticationOk: only after SCRAM proved the server, and bound
    /// when binding is required.
    fn accept_ok(&self) -> Result<(), ReplicationError> {
        if self.scram.is_some() && !self.scram_done {
            return Err(ReplicationError::Protocol(
                "the server ended SCRAM without proving it knows the password".into(),
            ));
        }
        if self.mode() == ChannelBindingMode::Require && !self.bound {
            return Err(ReplicationError::ChannelBindingRequired(
                "the server authenticated walrelay without SCRAM channel binding",
            ));
        }
        Ok(())
    }

    /// The SASL mechanism and channel binding to answer the server's list
    /// with.
    fn mechanism(
        &self,
        body: &AuthenticationSaslBody,
    ) -> Result<(&'static str, sasl::ChannelBinding), ReplicationError> {
        let (mut has_scram, mut has_plus) = (false, false);
        let mut mechanisms = body.mechanisms();
        while let Some(m) = mechanisms.next()? {
            has_scram |= m == sasl::SCRAM_SHA_256;
            has_plus |= m == sasl::SCRAM_SHA_256_PLUS;
        }
        let mode = self.mode();
        let usable = self
            .binding
            .clone()
            .filter(|_| has_plus && mode != ChannelBindingMode::Disable);
        let (mechanism, channel) = match usable {
            Some(data) => (
                sasl::SCRAM_SHA_256_PLUS,
                sasl::ChannelBinding::tls_server_end_point(data),
            ),
            None if mode == ChannelBindingMode::Require => {
                return Err(ReplicationError::ChannelBindingRequired(
                    if self.encrypted {
                        "the server does not offer SCRAM-SHA-256-PLUS"
                    } else {
                        "the server did not accept tls (postgres.sslmode)"
                    },
                ))
            }
            // We could bind but the server did not offer it: say so ('y'),
            // which lets the server detect a downgrade.
            None if self.encrypted
                && self.binding.is_some()
                && mode != ChannelBindingMode::Disable =>
            {
                (sasl::SCRAM_SHA_256, sasl::ChannelBinding::unrequested())
            }
            None => (sasl::SCRAM_SHA_256, sasl::ChannelBinding::unsupported()),
        };
        if mechanism == sasl::SCRAM_SHA_256 && !has_scram {
            return Err(ReplicationError::UnsupportedAuth(
                "SASL without SCRAM-SHA-256",
            ));
        }
        Ok((mechanism, channel))
    }
}

/// Total length (tag included) of the message at the start of `buf`, which
/// holds at least 5 bytes.
pub(super) fn frame_len(buf: &[u8]) -> Result<usize, ReplicationError> {
    let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
    if len < 4 {
        return Err(ReplicationError::Protocol(format!(
            "message length {len} below 4"
        )));
    }
    Ok(len + 1)
}

pub(super) fn server_error(
    body: &postgres_protocol::message::backend::ErrorResponseBody,
) -> ReplicationError {
    let mut code = String::new();
    let mut message = String::new();
    let mut detail = None;
    let mut fields = body.fields();
    while let Ok(Some(f)) = fields.next() {
        let value = String::from_utf8_lossy(f.value_bytes()).into_owned();
        match f.type_() {
            b'C' => code = value,
            b'M' => message = value,
            b'D' => detail = Some(value),
            _ => {}
        }
    }
    ReplicationError::Server {
        retry: sqlstate_class(&code),
        code,
        message,
        detail,
    }
}

/// A connection in CopyBoth mode, split so that one task can read while
/// status updates are written.
pub struct ReplicationStream {
    /// The WAL side.
    pub reader: StreamReader,
    /// The feedback side.
    pub writer: StreamWriter,
}

/// Reads CopyData payloads from the server.
pub struct StreamReader {
    io: ReadHalf<BoxedTransport>,
    buf: BytesMut,
}

impl StreamReader {
    /// The socket's reading half and what was read past the last message
    /// taken (see [`super::reader::WalIo::receive`]).
    pub(super) fn into_parts(self) -> (ReadHalf<BoxedTransport>, BytesMut) {
        (self.io, self.buf)
    }

    #[cfg(test)]
    pub(super) fn from_parts(io: ReadHalf<BoxedTransport>, buf: BytesMut) -> Self {
        StreamReader { io, buf }
    }

    /// Returns the next complete CopyData payload already buffered, without
    /// reading the socket. `Ok(None)` means the buffer holds no complete
    /// frame.
    pub fn try_next(&mut self) -> Result<Option<Bytes>, ReplicationError> {
        loop {
            if self.buf.len() < 5 {
                return Ok(None);
            }
            let total = frame_len(&self.buf)?;
            if self.buf.len() < total {
                return Ok(None);
            }
            match self.buf[0] {
                b'd' => {
                    let mut frame = self.buf.split_to(total);
                    frame.advance(5);
                    return Ok(Some(frame.freeze()));
                }
                // CopyDone, or CommandComplete/ReadyForQuery after it: the
                // server ended the stream (e.g. at shutdown).
                b'c' | b'C' | b'Z' => return Err(ReplicationError::Closed),
                b'E' => {
                    return match Message::parse(&mut self.buf)? {
                        Some(Message::ErrorResponse(body)) => Err(server_error(&body)),
                        _ => Err(ReplicationError::Protocol(
                            "malformed error response".into(),
                        )),
                    }
                }
                // NoticeResponse, ParameterStatus: skip.
                b'N' | b'S' => self.buf.advance(total),
                tag => {
                    return Err(ReplicationError::Protocol(format!(
                        "unexpected message tag {:?} in CopyBoth mode",
                        tag as char
                    )))
                }
            }
        }
    }

    /// Waits until the socket delivers more bytes. Cancel-safe.
    pub async fn read_more(&mut self) -> Result<usize, ReplicationError> {
        if self.buf.capacity() - self.buf.len() < READ_CHUNK / 4 {
            self.buf.reserve(READ_CHUNK);
        }
        match self.io.read_buf(&mut self.buf).await? {
            0 => Err(ReplicationError::Closed),
            n => Ok(n),
        }
    }
}

/// Writes standby status updates.
pub struct StreamWriter {
    io: WriteHalf<BoxedTransport>,
    buf: BytesMut,
}

impl StreamWriter {
    /// Sends one standby status update.
    pub async fn send_status(
        &mut self,
        update: &walrelay_proto::frame::StandbyStatusUpdate,
    ) -> Result<(), ReplicationError> {
        let mut payload = BytesMut::with_capacity(34);
        update.encode(&mut payload);
        self.buf.clear();
        frontend::CopyData::new(payload.freeze())?.write(&mut self.buf);
        self.io.write_all(&self.buf).await?;
        self.io.flush().await?;
        Ok(())
    }

    /// Ends the stream politely (CopyDone then Terminate).
    pub async fn close(mut self) -> Result<(), ReplicationError> {
        self.buf.clear();
        frontend::copy_done(&mut self.buf);
        frontend::terminate(&mut self.buf);
        self.io.write_all(&self.buf).await?;
        self.io.flush().await?;
        self.io.shutdown().await?;
        Ok(())
    }
}

/// The replication command that creates walrelay's permanent slot. Without
/// failover the legacy spelling every supported server reads; with it the
/// option list of PostgreSQL 15+ (the legacy keywords cannot be combined
/// with options), `SNAPSHOT 'nothing'` being `NOEXPORT_SNAPSHOT`'s
/// equivalent (the default there would export one).
pub(crate) fn create_slot_command(slot: &str, failover: bool) -> String {
    if failover {
        format!(
            "CREATE_REPLICATION_SLOT {} LOGICAL pgoutput (SNAPSHOT 'nothing', FAILOVER true)",
            quote_ident(slot)
        )
    } else {
        format!(
            "CREATE_REPLICATION_SLOT {} LOGICAL pgoutput NOEXPORT_SNAPSHOT",
            quote_ident(slot)
        )
    }
}

/// `ALTER_REPLICATION_SLOT <slot> (FAILOVER true|false)`.
pub(crate) fn alter_slot_failover_command(slot: &str, on: bool) -> String {
    format!(
        "ALTER_REPLICATION_SLOT {} (FAILOVER {on})",
        quote_ident(slot)
    )
}

/// Quotes an identifier for PostgreSQL (`"` doubled).
pub(crate) fn quote_ident(ident: &str) -> String {
    let mut out = String::with_capacity(ident.len() + 2);
    out.push('"');
    for c in ident.chars() {
        if c == '"' {
            out.push('"');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// Quotes a string literal for PostgreSQL (`'` doubled; standard strings).
pub(crate) fn quote_literal(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('\'');
    for c in value.chars() {
        if c == '\'' {
            out.push('\'');
        }
        out.push(c);
    }
    out.push('\'');
    out
}

impl ConnectParams {
    /// The parameters a validated `[postgres]` section gives (an invalid
    /// host or port list, which validation refuses, gives no hosts, and
    /// every connection fails naming `postgres.host`).
    pub fn from_config(pg: &PostgresConfig) -> Self {
        ConnectParams {
            hosts: pg.endpoints().unwrap_or_default(),
            target_session_attrs: pg.effective_target_session_attrs(),
            user: pg.user.clone(),
            password: pg.password.clone(),
            dbname: pg.dbname.clone(),
            application_name: pg.application_name.clone(),
            connect_timeout: Duration::from_millis(pg.connect_timeout_ms),
            tls: super::tls::TlsParams::from_config(pg),
        }
    }

    /// The same parameters for `endpoint` alone, accepting any server
    /// (`walrelay check` asks each host what it is).
    pub(crate) fn only(&self, endpoint: &Endpoint) -> Self {
        ConnectParams {
            hosts: vec![endpoint.clone()],
            target_session_attrs: TargetSessionAttrs::Any,
            ..self.clone()
        }
    }

    /// The configured hosts as `host:port,...`, for messages.
    pub(crate) fn hosts_label(&self) -> String {
        self.hosts
            .iter()
            .map(Endpoint::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The longest a connection attempt may take: every host of every pass
    /// within the connect timeout.
    pub(crate) fn connect_bound(&self) -> Duration {
        let attempts = self.hosts.len().max(1) * hosts::passes(self.target_session_attrs).len();
        self.connect_timeout
            .saturating_mul(u32::try_from(attempts).unwrap_or(u32::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_doubles_delimiters() {
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(quote_literal("it's"), "'it''s'");
    }

    #[test]
    fn slot_commands_spell_failover_as_postgresql_17_reads_it() {
        assert_eq!(
            create_slot_command("walrelay", false),
            "CREATE_REPLICATION_SLOT \"walrelay\" LOGICAL pgoutput NOEXPORT_SNAPSHOT"
        );
        assert_eq!(
            create_slot_command("walrelay", true),
            "CREATE_REPLICATION_SLOT \"walrelay\" LOGICAL pgoutput (SNAPSHOT 'nothing', FAILOVER true)"
        );
        assert_eq!(
            alter_slot_failover_command("a\"b", true),
            "ALTER_REPLICATION_SLOT \"a\"\"b\" (FAILOVER true)"
        );
        assert_eq!(
            alter_slot_failover_command("s", false),
            "ALTER_REPLICATION_SLOT \"s\" (FAILOVER false)"
        );
    }

    #[test]
    fn transient_classification() {
        assert_eq!(sqlstate_class("57P01"), Class::Transient);
        assert_eq!(sqlstate_class("55006"), Class::Transient);
        assert_eq!(sqlstate_class("08006"), Class::Transient);
        assert_eq!(sqlstate_class("28P01"), Class::Definite);
        assert_eq!(sqlstate_class("42704"), Class::Definite);
        let server = |code: &str| ReplicationError::Server {
            code: code.into(),
            message: "m".into(),
            detail: None,
            retry: sqlstate_class(code),
        };
        let class = |e: ReplicationError| Retry::<ReplicationError>::from(e).class();
        assert_eq!(class(server("57P01")), Class::Transient);
        assert_eq!(class(server("28P01")), Class::Definite);
        assert_eq!(class(ReplicationError::Closed), Class::Transient);
        assert_eq!(
            class(ReplicationError::PasswordRequired { user: "u".into() }),
            Class::Definite
        );
    }
}
