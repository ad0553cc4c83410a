//! One NATS connection for publishing: TCP (TLS when the URL says
//! `tls://`, a CA or client certificate is set, or the server requires
//! it), the handshake (`INFO`, `CONNECT` with the credentials, `PING` →
//! `PONG`), one subscription for every `PubAck`, and a reader task that
//! hands the acknowledgements over and answers the server's `PING`s
//! (without waiting for a batch being written to finish: the writer is
//! shared behind a lock).
//!
//! Each publish's reply subject is the connection's inbox plus a sequence
//! number, so an answer finds its record without a future per message.
//! walrelay does not reconnect a connection: when it breaks, the queued
//! sink's worker connects a new one and publishes again from the first
//! record not acknowledged.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::{Bytes, BytesMut};
use rand::distributions::{Alphanumeric, DistString};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Mutex};
use tokio::task::JoinHandle;

use super::wire::{self, Op, ServerInfo};
use super::NatsConfig;

/// Longest wait for a server's `INFO`, TLS and `PONG` at connect.
const HANDSHAKE: Duration = Duration::from_secs(5);

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

type Writer = Arc<Mutex<WriteHalf<Box<dyn Io>>>>;

/// What the reader task hands over.
pub(super) enum Event {
    /// The answer to the publish with this sequence number.
    Answer { seq: u64, answer: Answer },
    /// The server's `-ERR` (most close the connection).
    ServerError(String),
    /// The connection is gone; why.
    Closed(String),
}

/// An answer to a publish.
pub(super) enum Answer {
    /// JetStream's JSON (`PubAck` or an error).
    Json(Bytes),
    /// A status without a body: 503 is "no responders" (no stream captures
    /// the subject).
    Status(u16),
}

/// One server URL taken apart.
struct Server {
    tls: bool,
    host: String,
    port: u16,
    user: Option<String>,
    password: Option<String>,
    /// `nats://host:port`, for messages (never the credentials).
    origin: String,
}

impl Server {
    fn parse(url: &str) -> Result<Server, String> {
        let shown = crate::secret::redact_userinfo(url);
        let with_scheme = if url.contains("://") {
            url.to_owned()
        } else {
            format!("nats://{url}")
        };
        let u =
            url::Url::parse(&with_scheme).map_err(|e| format!("sink.nats.url {shown:?}: {e}"))?;
        let tls = match u.scheme() {
            "nats" => false,
            "tls" => true,
            other => {
                return Err(format!(
                    "sink.nats.url {shown:?}: scheme {other:?} is neither nats:// nor tls://"
                ))
            }
        };
        let host = u
            .host_str()
            .ok_or_else(|| format!("sink.nats.url {shown:?}: no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = u.port().unwrap_or(4222);
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8()
                .map(std::borrow::Cow::into_owned)
                .map_err(|_| format!("sink.nats.url {shown:?}: user information that is not UTF-8"))
        };
        let user = (!u.username().is_empty())
            .then(|| decode(u.username()))
            .transpose()?;
        let password = u.password().map(decode).transpose()?;
        Ok(Server {
            tls,
            origin: format!(
                "{}://{}:{port}",
                u.scheme(),
                u.host_str().unwrap_or_default()
            ),
            host,
            port,
            user,
            password,
        })
    }
}

/// A connected, subscribed publisher's connection.
pub(super) struct Conn {
    writer: Writer,
    events: mpsc::UnboundedReceiver<Event>,
    reader: JoinHandle<()>,
    /// `_INBOX.<random>.`: a publish's reply subject is this plus its
    /// sequence number.
    inbox: String,
    next: u64,
    pub(super) info: ServerInfo,
    pub(super) origin: String,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Conn {
    /// Connects to the first of the section's servers that answers.
    pub(super) async fn open(config: &NatsConfig) -> Result<Conn, String> {
        let mut errors = Vec::new();
        for url in config.servers() {
            let server = Server::parse(&url)?;
            match tokio::time::timeout(HANDSHAKE * 2, Conn::open_one(config, &server)).await {
                Ok(Ok(conn)) => return Ok(conn),
                Ok(Err(e)) => errors.push(e),
                Err(_) => errors.push(format!(
                    "{}: no handshake within {:?}",
                    server.origin,
                    HANDSHAKE * 2
                )),
            }
        }
        Err(errors.join("; "))
    }

    async fn open_one(config: &NatsConfig, server: &Server) -> Result<Conn, String> {
        let origin = &server.origin;
        let tcp = TcpStream::connect((server.host.as_str(), server.port))
            .await
            .map_err(|e| format!("cannot connect to {origin}: {e}"))?;
        let _ = tcp.set_nodelay(true);
        let mut io: Box<dyn Io> = Box::new(tcp);
        let mut buf = BytesMut::with_capacity(16 * 1024);
        let info = match next_op(&mut io, &mut buf, origin).await? {
            Op::Info(json) => ServerInfo::parse(&json)?,
            other => return Err(format!("{origin} did not start with INFO: {other:?}")),
        };
        let wants_tls =
            server.tls || config.tls_ca_file.is_some() || config.tls_cert_file.is_some();
        let tls = wants_tls || info.tls_required;
        if tls {
            if !buf.is_empty() {
                return Err(format!("{origin} sent data before the TLS handshake"));
            }
            let connector = crate::sink::tls::ClientTls {
                section: "sink.nats",
                ca: config.tls_ca_file.as_deref(),
                client: config
                    .tls_cert_file
                    .as_deref()
                    .zip(config.tls_key_file.as_deref()),
            }
            .connector(false)?;
            let stream = crate::sink::tls::handshake(&connector, &server.host, io, origin).await?;
            io = Box::new(stream);
        }
        if !info.headers {
            return Err(format!(
                "{origin} (nats-server {}) does not take headers; walrelay needs nats-server 2.2 or later",
                info.version
            ));
        }
        let connect = connect_line(config, server, &info, tls)?;
        io.write_all(connect.as_bytes())
            .await
            .map_err(|e| format!("writing CONNECT to {origin}: {e}"))?;
        io.write_all(b"PING\r\n")
            .await
            .map_err(|e| format!("writing to {origin}: {e}"))?;
        io.flush()
            .await
            .map_err(|e| format!("writing to {origin}: {e}"))?;
        loop {
            match next_op(&mut io, &mut buf, origin).await? {
                Op::Pong => break,
                Op::Ok | Op::Info(_) => {}
                Op::Ping => io
                    .write_all(b"PONG\r\n")
                    .await
                    .map_err(|e| format!("writing to {origin}: {e}"))?,
                Op::Err(text) => return Err(format!("{origin} refused the connection: {text}")),
                Op::Msg { .. } => {}
            }
        }
        let inbox = format!(
            "_INBOX.{}.",
            Alphanumeric.sample_string(&mut rand::thread_rng(), 22)
        );
        io.write_all(format!("SUB {inbox}* 1\r\n").as_bytes())
            .await
            .map_err(|e| format!("writing to {origin}: {e}"))?;
        io.flush()
            .await
            .map_err(|e| format!("writing to {origin}: {e}"))?;
        let (read, write) = tokio::io::split(io);
        let writer: Writer = Arc::new(Mutex::new(write));
        let (tx, events) = mpsc::unbounded_channel();
        let reader = tokio::spawn(read_loop(read, buf, Arc::clone(&writer), tx, inbox.clone()));
        Ok(Conn {
            writer,
            events,
            reader,
            inbox,
            next: 1,
            info,
            origin: origin.clone(),
        })
    }

    /// The reply subject of the next publish, and its sequence number.
    pub(super) fn reply(&mut self) -> (String, u64) {
        let seq = self.next;
        self.next += 1;
        (format!("{}{seq}", self.inbox), seq)
    }

    /// Writes `bytes` (whole publishes) and flushes them.
    pub(super) async fn write(&self, bytes: &[u8]) -> Result<(), String> {
        let mut w = self.writer.lock().await;
        w.write_all(bytes)
            .await
            .map_err(|e| format!("writing to {}: {e}", self.origin))?;
        w.flush()
            .await
            .map_err(|e| format!("writing to {}: {e}", self.origin))
    }

    /// The next event, or `None` once `deadline` passed.
    pub(super) async fn event(&mut self, deadline: tokio::time::Instant) -> Option<Event> {
        match tokio::time::timeout_at(deadline, self.events.recv()).await {
            Ok(Some(event)) => Some(event),
            Ok(None) => Some(Event::Closed("the connection's reader ended".to_owned())),
            Err(_) => None,
        }
    }
}

/// The `CONNECT` line: no `+OK`s, headers and no-responders on, and the
/// credentials (the section's, else the URL's).
fn connect_line(
    config: &NatsConfig,
    server: &Server,
    info: &ServerInfo,
    tls: bool,
) -> Result<String, String> {
    let mut c = serde_json::json!({
        "verbose": false,
        "pedantic": false,
        "tls_required": tls,
        "name": "walrelay",
        "lang": "rust",
        "version": env!("CARGO_PKG_VERSION"),
        "protocol": 1,
        "echo": false,
        "headers": true,
        "no_responders": true,
    });
    let user = config.user.clone().or_else(|| server.user.clone());
    let password = config
        .password
        .as_ref()
        .map(|p| p.expose().to_owned())
        .or_else(|| server.password.clone());
    match (user, password) {
        (Some(user), Some(password)) => {
            c["user"] = user.into();
            c["pass"] = password.into();
        }
        // `nats://token@host`: a token in the URL.
        (Some(token), None) if config.token.is_none() => c["auth_token"] = token.into(),
        _ => {}
    }
    if let Some(token) = &config.token {
        c["auth_token"] = token.expose().into();
    }
    if let (Some(jwt), Some(seed)) = (&config.jwt, &config.seed) {
        let nonce = info.nonce.as_deref().ok_or_else(|| {
            format!(
                "{} sent no nonce to sign: it does not take JWT authentication",
                server.origin
            )
        })?;
        let key = nkeys::KeyPair::from_seed(seed.expose().trim())
            .map_err(|e| format!("sink.nats.seed is not an NKey seed: {e}"))?;
        let sig = key
            .sign(nonce.as_bytes())
            .map_err(|e| format!("signing the server's nonce with sink.nats.seed: {e}"))?;
        c["jwt"] = jwt.expose().trim().into();
        c["sig"] = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(sig)
            .into();
    }
    Ok(format!("CONNECT {c}\r\n"))
}

/// Reads until one whole operation is in `buf`, within [`HANDSHAKE`].
async fn next_op(io: &mut Box<dyn Io>, buf: &mut BytesMut, origin: &str) -> Result<Op, String> {
    let deadline = tokio::time::Instant::now() + HANDSHAKE;
    loop {
        if let Some(op) = wire::parse(buf).map_err(|e| format!("{origin}: {e}"))? {
            return Ok(op);
        }
        match tokio::time::timeout_at(deadline, io.read_buf(buf)).await {
            Err(_) => return Err(format!("{origin} did not answer within {HANDSHAKE:?}")),
            Ok(Ok(0)) => return Err(format!("{origin} closed the connection")),
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(format!("reading from {origin}: {e}")),
        }
    }
}

/// The reader task: answers to publishes go to `tx`; `PING`s are answered.
async fn read_loop(
    mut read: ReadHalf<Box<dyn Io>>,
    mut buf: BytesMut,
    writer: Writer,
    tx: mpsc::UnboundedSender<Event>,
    inbox: String,
) {
    let why = loop {
        loop {
            let op = match wire::parse(&mut buf) {
                Ok(Some(op)) => op,
                Ok(None) => break,
                Err(e) => {
                    let _ = tx.send(Event::Closed(e));
                    return;
                }
            };
            match op {
                Op::Msg {
                    subject,
                    headers,
                    payload,
                } => {
                    let Some(seq) = subject
                        .strip_prefix(inbox.as_bytes())
                        .and_then(|s| std::str::from_utf8(s).ok())
                        .and_then(|s| s.parse::<u64>().ok())
                    else {
                        continue;
                    };
                    let answer = match headers.as_deref().and_then(wire::status) {
                        Some(code) if payload.is_empty() => Answer::Status(code),
                        _ => Answer::Json(payload),
                    };
                    let _ = tx.send(Event::Answer { seq, answer });
                }
                Op::Ping => {
                    let mut w = writer.lock().await;
                    if w.write_all(b"PONG\r\n").await.is_err() || w.flush().await.is_err() {
                        let _ = tx.send(Event::Closed("cannot answer the server's PING".into()));
                        return;
                    }
                }
                Op::Err(text) => {
                    let _ = tx.send(Event::ServerError(text));
                }
                Op::Pong | Op::Ok | Op::Info(_) => {}
            }
        }
        match read.read_buf(&mut buf).await {
            Ok(0) => break "the server closed the connection".to_owned(),
            Ok(_) => {}
            Err(e) => break format!("reading from the server: {e}"),
        }
    };
    let _ = tx.send(Event::Closed(why));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::Secret;

    #[test]
    fn urls_give_tls_host_port_and_credentials() {
        let s = Server::parse("tls://al%40ce:p%3Ass@[::1]:4443").expect("valid");
        assert!(s.tls);
        assert_eq!((s.host.as_str(), s.port), ("::1", 4443));
        assert_eq!(s.user.as_deref(), Some("al@ce"));
        assert_eq!(s.password.as_deref(), Some("p:ss"));
        assert_eq!(s.origin, "tls://[::1]:4443");
        let s = Server::parse("n1").expect("valid");
        assert!(!s.tls && s.port == 4222 && s.user.is_none());
        let e = Server::parse("http://u:hunter2@h").err().expect("refused");
        assert!(e.contains("http") && !e.contains("hunter2"), "{e}");
    }

    #[test]
    fn connect_carries_the_credentials_asked_for() {
        let info = ServerInfo {
            nonce: Some("n0nce".into()),
            ..ServerInfo::default()
        };
        let server = Server::parse("nats://tok3n@h").expect("valid");
        let line = connect_line(&NatsConfig::default(), &server, &info, false).expect("line");
        assert!(line.contains(r#""auth_token":"tok3n""#), "{line}");
        let config = NatsConfig {
            user: Some("u".into()),
            password: Some(Secret::new("pw")),
            ..NatsConfig::default()
        };
        let line = connect_line(&config, &server, &info, true).expect("line");
        assert!(
            line.contains(r#""user":"u""#) && line.contains(r#""pass":"pw""#),
            "{line}"
        );
        assert!(line.starts_with("CONNECT {") && line.ends_with("}\r\n"));
        let user = nkeys::KeyPair::new_user();
        let config = NatsConfig {
            jwt: Some(Secret::new("eyJ.jwt")),
            seed: Some(Secret::new(user.seed().expect("seed"))),
            ..NatsConfig::default()
        };
        let line =
            connect_line(&config, &Server::parse("h").expect("valid"), &info, false).expect("line");
        let json: serde_json::Value =
            serde_json::from_str(line.trim_start_matches("CONNECT ").trim()).expect("json");
        let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(json["sig"].as_str().expect("sig"))
            .expect("base64url");
        user.verify(b"n0nce", &sig)
            .expect("the nonce signed by the seed");
        assert_eq!(json["jwt"], "eyJ.jwt");
    }
}
