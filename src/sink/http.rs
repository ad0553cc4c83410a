//! HTTP behind the broker seam, as Debezium Server 3.6.1's `http` sink
//! sends (docs/debezium-server-sinks.md §7, §8.6): one `POST` per record to
//! one fixed URL (the topic appears nowhere), the record's value as the
//! body, `content-type` (`application/json` unless set), each record header
//! as `<headers_prefix><NAME IN UPPER CASE>: <base64 of its value>`
//! (`X-DEBEZIUM-ID: ...`), no key, and a record with a null value not sent
//! at all. A 2xx answer is the acknowledgement the tracker hears. With
//! `batch = true`, as Debezium Server's `batch.enabled`, up to
//! `batch_max_size` records go in one request whose body is `[` + their
//! values joined by `,` + `]`, with the first record's headers.
//! Authentication: HTTP basic, a static bearer token, and Debezium
//! Server's three (`jwt`, `oauth2` client credentials, `standard-webhooks`
//! signatures) with the headers it sends, `Bearer:` quirk included.
//!
//! Answers: 2xx acknowledges; 5xx, 408, 429, a timeout (`timeout_ms`) or a
//! connection error is sent again in place, up to `retries` attempts in all
//! with `retry_interval_ms` between them (Debezium Server's `retries` and
//! `retry.interval.ms`), then handed back to the worker as a retry (it
//! pauses, 100 ms doubling to 5 s, and sends again from that record, for
//! as long as it takes: where Debezium Server exits after its attempts,
//! walrelay holds the slot and keeps trying). Any other 4xx refuses the
//! record (`rejected_<status>`, so `[errors]` applies: stop, or its
//! dead-letter record), except 401 and 407, which are about walrelay's
//! credentials, not the record, and stop the sink (after a new token was
//! tried, for `jwt` and `oauth2`). A 3xx stops the sink too: no redirect
//! is followed (set `url` to the final location).
//!
//! The dead-letter destination: Debezium Server's URL is fixed and no topic
//! reaches the receiver, so a dead-letter record goes to the same URL,
//! told apart by `X-Walrelay-Dead-Letter: <errors.dead_letter_topic>`, its
//! `Idempotency-Key: dead-letter:<event id>` and (unless
//! `errors.dead_letter_context_headers = false`) the context headers, which
//! travel like every record header (`X-DEBEZIUM-WALRELAY.ERROR.KIND`, ...).
//!
//! What walrelay adds on purpose: `Idempotency-Key: <event id>` on every
//! record that has one (`idempotency_key = false` turns it off), so that a
//! receiver can drop an event delivered again after a crash or a retry; a
//! `standard-webhooks` `webhook-id` of `msg_<event id>` (Debezium Server's
//! is a random UUID per record, new after every restart) for the same
//! reason; `User-Agent: walrelay/<version>`; HTTP/1.1 only (no `h2c`
//! upgrade offer); header names in lower case (HTTP names are
//! case-insensitive).
//!
//! Order and concurrency: HTTP/1.1 keep-alive connections, at most
//! `max_in_flight` requests at once (default 4; 1 in the Debezium Server
//! form, whose sink sends one request at a time), each on a connection of
//! its own. Requests leave in the pipeline's order, and a request is only
//! sent when no earlier one for the same destination and record key is
//! still in flight: two requests for one aggregate are never in flight
//! together, so an earlier one can never fail and be sent again after a
//! later one succeeded. Across keys, requests overlap (with
//! `max_in_flight = 1` the receiver sees the commit order across keys too).
//! Answers are settled strictly in order: the worker hears a record's
//! outcome only after every earlier record's. A retry or a refusal stops
//! new requests of the batch (so a dead-letter record, or the retry, comes
//! before any later record of its key and anything not sent yet); those
//! already in flight (other keys) finish, and a retry resends from the
//! first record not acknowledged (a later one that was acknowledged
//! meanwhile may arrive twice: at least once, with its `Idempotency-Key`).
//!
//! TLS: OpenSSL through tokio-openssl, both already linked (PostgreSQL's
//! TLS uses them), under hyper's own HTTP/1.1 connection API: no new
//! crate, and walrelay keeps each connection in hand (one request in
//! flight on it, dropped after a timeout or a failure).

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures_util::stream::{FuturesUnordered, StreamExt};
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use openssl::pkey::{PKey, Private};
use openssl::ssl::{SslConnector, SslFiletype, SslMethod};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_openssl::SslStream;
use tracing::{info, warn};

use super::broker::{FailureClass, Guarantees};
use super::queued::{Outcome, Outgoing, Publisher};
use crate::secret::Secret;
use crate::setting::SettingError;

/// Debezium Server's `headers.prefix`.
pub(crate) const DEFAULT_HEADERS_PREFIX: &str = "X-DEBEZIUM-";
/// Debezium Server's `timeout.ms`.
const DEFAULT_TIMEOUT_MS: u64 = 60_000;
/// Debezium Server's `retries`: attempts in all.
const DEFAULT_RETRIES: u32 = 5;
/// Debezium Server's `retry.interval.ms`.
const DEFAULT_RETRY_INTERVAL_MS: u64 = 1_000;
/// Debezium Server's `batch.max-size`.
const DEFAULT_BATCH_MAX_SIZE: usize = 200;
/// Requests in flight at once (native form).
const DEFAULT_MAX_IN_FLIGHT: usize = 4;
/// Most requests in flight walrelay allows.
const MAX_IN_FLIGHT: usize = 64;
/// Debezium Server's `authentication.jwt.token_expiration`, minutes.
const DEFAULT_JWT_TOKEN_MINUTES: u64 = 60;
/// Debezium Server's `authentication.jwt.refresh_token_expiration`, minutes.
const DEFAULT_JWT_REFRESH_MINUTES: u64 = 1440;
/// A token is renewed at this share of its lifetime (Debezium Server's).
const TOKEN_LIFETIME_USED: f64 = 0.9;
/// The content type (Debezium Server's for `debezium.format.value=json`).
const DEFAULT_CONTENT_TYPE: &str = "application/json";
/// Most bytes of an answer's body read (the rest closes the connection).
const MAX_ANSWER: usize = 1 << 20;
/// Most bytes of an answer's body quoted in an error.
const QUOTED_ANSWER: usize = 300;
/// The largest record a dead-letter record may carry whole: HTTP sets no
/// limit of its own; a receiver's is answered with 413.
pub(crate) const MAX_BYTES: usize = 16 << 20;
/// walrelay's own headers.
const IDEMPOTENCY_KEY: &str = "idempotency-key";
const DEAD_LETTER: &str = "x-walrelay-dead-letter";

/// `[sink.http]`: HTTP (`debezium.sink.http.*`).
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HttpConfig {
    /// The URL every record is POSTed to (`http://` or `https://`).
    pub(crate) url: String,
    /// How long one attempt may take, connecting included (`timeout.ms`,
    /// default 60000).
    #[serde(default)]
    pub(crate) timeout_ms: Option<u64>,
    /// Attempts of one request before the worker pauses and sends again
    /// (`retries`, default 5).
    #[serde(default)]
    pub(crate) retries: Option<u32>,
    /// Pause between those attempts (`retry.interval.ms`, default 1000).
    #[serde(default)]
    pub(crate) retry_interval_ms: Option<u64>,
    /// Requests in flight at once, never two for one key (default 4).
    #[serde(default)]
    pub(crate) max_in_flight: Option<usize>,
    /// `content-type` of every request (default `application/json`).
    #[serde(default)]
    pub(crate) content_type: Option<String>,
    /// Prefix of the HTTP name of each record header (`headers.prefix`,
    /// default `X-DEBEZIUM-`).
    #[serde(default)]
    pub(crate) headers_prefix: Option<String>,
    /// Base64 of each record header's value (`headers.encode.base64`,
    /// default true); off, the value is sent as it is.
    #[serde(default)]
    pub(crate) headers_encode_base64: Option<bool>,
    /// More headers on every request (name → value); the values are
    /// treated as secrets (an API key is one).
    #[serde(default)]
    pub(crate) headers: BTreeMap<String, Secret>,
    /// `Idempotency-Key: <event id>` on each request (default true).
    #[serde(default)]
    pub(crate) idempotency_key: Option<bool>,
    /// Several records per request, as a JSON array (`batch.enabled`).
    #[serde(default)]
    pub(crate) batch: bool,
    /// Records per request with `batch` (`batch.max-size`, default 200).
    #[serde(default)]
    pub(crate) batch_max_size: Option<usize>,
    /// HTTP basic authentication: the user, with `password`.
    #[serde(default)]
    pub(crate) user: Option<String>,
    /// Password of `user`.
    #[serde(default)]
    pub(crate) password: Option<Secret>,
    /// `Authorization: Bearer <token>` on every request.
    #[serde(default)]
    pub(crate) bearer_token: Option<Secret>,
    /// Debezium Server's JWT flow: its base URL (`<url>auth/authenticate`,
    /// `<url>auth/refreshToken`).
    #[serde(default)]
    pub(crate) jwt_url: Option<String>,
    /// JWT user name.
    #[serde(default)]
    pub(crate) jwt_username: Option<String>,
    /// JWT password.
    #[serde(default)]
    pub(crate) jwt_password: Option<Secret>,
    /// Lifetime asked for the token, minutes (default 60).
    #[serde(default)]
    pub(crate) jwt_token_expiration_minutes: Option<u64>,
    /// Lifetime asked for the refresh token, minutes (default 1440).
    #[serde(default)]
    pub(crate) jwt_refresh_token_expiration_minutes: Option<u64>,
    /// OAuth2 client credentials: the token endpoint.
    #[serde(default)]
    pub(crate) oauth2_token_url: Option<String>,
    /// OAuth2 client id.
    #[serde(default)]
    pub(crate) oauth2_client_id: Option<String>,
    /// OAuth2 client secret.
    #[serde(default)]
    pub(crate) oauth2_client_secret: Option<Secret>,
    /// OAuth2 scope.
    #[serde(default)]
    pub(crate) oauth2_scope: Option<String>,
    /// Standard Webhooks signing secret (base64, optionally `whsec_`,
    /// 24 to 64 bytes).
    #[serde(default)]
    pub(crate) webhook_secret: Option<Secret>,
    /// CA certificates (PEM) that sign the receiver's; without it, the
    /// system's trust store.
    #[serde(default)]
    pub(crate) tls_ca_file: Option<PathBuf>,
    /// Client certificate (PEM), with `tls_key_file`.
    #[serde(default)]
    pub(crate) tls_cert_file: Option<PathBuf>,
    /// Client key (PEM).
    #[serde(default)]
    pub(crate) tls_key_file: Option<PathBuf>,
    /// The dead-letter topic (`errors.dead_letter_topic` when bad events go
    /// there), named in `X-Walrelay-Dead-Letter`; set by the sink, not a key.
    #[serde(skip)]
    pub(crate) dead_letter_topic: Option<String>,
}

impl fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redacted = |s: &Option<Secret>| s.as_ref().map(|_| "<redacted>");
        f.debug_struct("HttpConfig")
            .field("url", &self.url)
            .field("timeout_ms", &self.timeout_ms)
            .field("retries", &self.retries)
            .field("retry_interval_ms", &self.retry_interval_ms)
            .field("max_in_flight", &self.max_in_flight)
            .field("content_type", &self.content_type)
            .field("headers_prefix", &self.headers_prefix)
            .field("headers_encode_base64", &self.headers_encode_base64)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("idempotency_key", &self.idempotency_key)
            .field("batch", &self.batch)
            .field("batch_max_size", &self.batch_max_size)
            .field("user", &self.user)
            .field("password", &redacted(&self.password))
            .field("bearer_token", &redacted(&self.bearer_token))
            .field("jwt_url", &self.jwt_url)
            .field("jwt_username", &self.jwt_username)
            .field("jwt_password", &redacted(&self.jwt_password))
            .field(
                "jwt_token_expiration_minutes",
                &self.jwt_token_expiration_minutes,
            )
            .field(
                "jwt_refresh_token_expiration_minutes",
                &self.jwt_refresh_token_expiration_minutes,
            )
            .field("oauth2_token_url", &self.oauth2_token_url)
            .field("oauth2_client_id", &self.oauth2_client_id)
            .field(
                "oauth2_client_secret",
                &redacted(&self.oauth2_client_secret),
            )
            .field("oauth2_scope", &self.oauth2_scope)
            .field("webhook_secret", &redacted(&self.webhook_secret))
            .field("tls_ca_file", &self.tls_ca_file)
            .field("tls_cert_file", &self.tls_cert_file)
            .field("tls_key_file", &self.tls_key_file)
            .field("dead_letter_topic", &self.dead_letter_topic)
            .finish()
    }
}

/// Headers a `[sink.http] headers` entry may not set: HTTP's own framing,
/// and what walrelay sets itself.
const RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "content-type",
    IDEMPOTENCY_KEY,
    DEAD_LETTER,
];

impl HttpConfig {
    /// Checks the section; the error names the key.
    pub(crate) fn validate(&self) -> Result<(), SettingError> {
        let target =
            Target::parse(&self.url).map_err(|why| SettingError::invalid("sink.http.url", why))?;
        for (key, zero) in [
            ("sink.http.timeout_ms", self.timeout_ms == Some(0)),
            ("sink.http.retries", self.retries == Some(0)),
            ("sink.http.batch_max_size", self.batch_max_size == Some(0)),
            ("sink.http.max_in_flight", self.max_in_flight == Some(0)),
        ] {
            if zero {
                return Err(SettingError::invalid(key, "must be at least 1"));
            }
        }
        if self.max_in_flight.is_some_and(|n| n > MAX_IN_FLIGHT) {
            return Err(SettingError::invalid(
                "sink.http.max_in_flight",
                format!("must be at most {MAX_IN_FLIGHT}"),
            ));
        }
        if let Some(ct) = &self.content_type {
            if ct.trim().is_empty() || HeaderValue::from_str(ct).is_err() {
                return Err(SettingError::invalid(
                    "sink.http.content_type",
                    "must be a one-line header value",
                ));
            }
        }
        if HeaderName::from_bytes(format!("{}ID", self.prefix()).as_bytes()).is_err() {
            return Err(SettingError::invalid(
                "sink.http.headers_prefix",
                "must be the start of an HTTP header name (letters, digits, `-`, `_`, `.`, ...)",
            ));
        }
        self.validate_headers()?;
        self.validate_auth()?;
        let tls_keys = [
            ("sink.http.tls_ca_file", self.tls_ca_file.is_some()),
            ("sink.http.tls_cert_file", self.tls_cert_file.is_some()),
            ("sink.http.tls_key_file", self.tls_key_file.is_some()),
        ];
        if !target.tls {
            if let Some((key, _)) = tls_keys.iter().find(|(_, set)| *set) {
                return Err(SettingError::invalid(
                    *key,
                    "is a TLS setting and sink.http.url is http://; use https://",
                ));
            }
        }
        if self.tls_cert_file.is_some() != self.tls_key_file.is_some() {
            return Err(SettingError::invalid(
                "sink.http.tls_key_file",
                "tls_cert_file and tls_key_file go together",
            ));
        }
        Ok(())
    }

    fn validate_headers(&self) -> Result<(), SettingError> {
        for (name, value) in &self.headers {
            let key = format!("sink.http.headers.\"{name}\"");
            let parsed = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| SettingError::invalid(key.clone(), "is not an HTTP header name"))?;
            if RESERVED_HEADERS.contains(&parsed.as_str()) {
                return Err(SettingError::invalid(
                    key,
                    "is set by walrelay itself (content_type sets content-type)",
                ));
            }
            if parsed == header::AUTHORIZATION && self.auth_keys().next().is_some() {
                return Err(SettingError::invalid(
                    key,
                    "authorization is set by the authentication configured in [sink.http]",
                ));
            }
            if HeaderValue::from_str(value.expose()).is_err() {
                return Err(SettingError::invalid(
                    key,
                    "its value must be a one-line header value",
                ));
            }
        }
        Ok(())
    }

    /// The authentication methods set, each named by one of its keys.
    fn auth_keys(&self) -> impl Iterator<Item = &'static str> + '_ {
        [
            (
                "sink.http.user",
                self.user.is_some() || self.password.is_some(),
            ),
            ("sink.http.bearer_token", self.bearer_token.is_some()),
            (
                "sink.http.jwt_url",
                self.jwt_url.is_some()
                    || self.jwt_username.is_some()
                    || self.jwt_password.is_some(),
            ),
            (
                "sink.http.oauth2_token_url",
                self.oauth2_token_url.is_some()
                    || self.oauth2_client_id.is_some()
                    || self.oauth2_client_secret.is_some(),
            ),
            ("sink.http.webhook_secret", self.webhook_secret.is_some()),
        ]
        .into_iter()
        .filter(|(_, set)| *set)
        .map(|(key, _)| key)
    }

    fn validate_auth(&self) -> Result<(), SettingError> {
        let methods: Vec<&str> = self.auth_keys().collect();
        if methods.len() > 1 {
            return Err(SettingError::invalid(
                methods[1],
                format!(
                    "one authentication at a time: {} is set too (Debezium Server's \
                     authentication.type also names one)",
                    methods[0]
                ),
            ));
        }
        if self.user.is_some() != self.password.is_some() {
            return Err(SettingError::invalid(
                "sink.http.password",
                "user and password go together",
            ));
        }
        let jwt = [
            ("sink.http.jwt_url", self.jwt_url.is_some()),
            ("sink.http.jwt_username", self.jwt_username.is_some()),
            ("sink.http.jwt_password", self.jwt_password.is_some()),
        ];
        if jwt.iter().any(|(_, s)| *s) {
            if let Some((key, _)) = jwt.iter().find(|(_, s)| !*s) {
                return Err(SettingError::Missing {
                    key: (*key).to_owned(),
                    reason: "jwt_url, jwt_username and jwt_password go together".into(),
                });
            }
            let url = format!("{}auth/authenticate", self.jwt_url.as_deref().unwrap_or(""));
            Target::parse(&url).map_err(|why| SettingError::invalid("sink.http.jwt_url", why))?;
        } else {
            for (key, set) in [
                (
                    "sink.http.jwt_token_expiration_minutes",
                    self.jwt_token_expiration_minutes.is_some(),
                ),
                (
                    "sink.http.jwt_refresh_token_expiration_minutes",
                    self.jwt_refresh_token_expiration_minutes.is_some(),
                ),
            ] {
                if set {
                    return Err(SettingError::invalid(
                        key,
                        "belongs to the JWT flow (jwt_url), which is not set",
                    ));
                }
            }
        }
        let oauth2 = [
            (
                "sink.http.oauth2_token_url",
                self.oauth2_token_url.is_some(),
            ),
            (
                "sink.http.oauth2_client_id",
                self.oauth2_client_id.is_some(),
            ),
            (
                "sink.http.oauth2_client_secret",
                self.oauth2_client_secret.is_some(),
            ),
        ];
        if oauth2.iter().any(|(_, s)| *s) {
            if let Some((key, _)) = oauth2.iter().find(|(_, s)| !*s) {
                return Err(SettingError::Missing {
                    key: (*key).to_owned(),
                    reason: "oauth2_token_url, oauth2_client_id and oauth2_client_secret go \
                             together"
                        .into(),
                });
            }
            Target::parse(self.oauth2_token_url.as_deref().unwrap_or(""))
                .map_err(|why| SettingError::invalid("sink.http.oauth2_token_url", why))?;
        } else if self.oauth2_scope.is_some() {
            return Err(SettingError::invalid(
                "sink.http.oauth2_scope",
                "belongs to OAuth2 (oauth2_token_url), which is not set",
            ));
        }
        if let Some(secret) = &self.webhook_secret {
            webhook_key(secret.expose())
                .map_err(|why| SettingError::invalid("sink.http.webhook_secret", why))?;
        }
        Ok(())
    }

    fn prefix(&self) -> &str {
        self.headers_prefix
            .as_deref()
            .unwrap_or(DEFAULT_HEADERS_PREFIX)
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS))
    }

    /// An OpenSSL connector: `tls_ca_file` (else the system's trust store)
    /// and the client certificate. `system_too`: trust the system's store
    /// besides `tls_ca_file` (token endpoints, often public).
    fn tls(&self, system_too: bool) -> Result<SslConnector, String> {
        let e = |what: &str, err: openssl::error::ErrorStack| format!("{what}: {err}");
        let mut b = SslConnector::builder(SslMethod::tls_client()).map_err(|x| e("TLS", x))?;
        if system_too || self.tls_ca_file.is_none() {
            b.set_default_verify_paths()
                .map_err(|x| e("the system's trust store", x))?;
        }
        if let Some(ca) = &self.tls_ca_file {
            b.set_ca_file(ca)
                .map_err(|x| e(&format!("sink.http.tls_ca_file {}", ca.display()), x))?;
        }
        if let (Some(cert), Some(key)) = (&self.tls_cert_file, &self.tls_key_file) {
            b.set_certificate_chain_file(cert)
                .map_err(|x| e(&format!("sink.http.tls_cert_file {}", cert.display()), x))?;
            b.set_private_key_file(key, SslFiletype::PEM)
                .map_err(|x| e(&format!("sink.http.tls_key_file {}", key.display()), x))?;
            b.check_private_key()
                .map_err(|x| e("sink.http.tls_key_file does not match tls_cert_file", x))?;
        }
        Ok(b.build())
    }
}

/// Where requests go: the URL taken apart.
#[derive(Debug, Clone)]
struct Target {
    tls: bool,
    /// Host name or address (an IPv6 address without brackets).
    host: String,
    port: u16,
    /// The `Host` header: the URL's authority.
    authority: HeaderValue,
    /// The request target (path and query).
    path: Uri,
    /// `scheme://authority`, for messages.
    origin: String,
}

impl Target {
    fn parse(url: &str) -> Result<Target, String> {
        let uri: Uri = url
            .trim()
            .parse()
            .map_err(|e| format!("{url:?} is not a URL: {e}"))?;
        let tls = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => {
                return Err(format!(
                    "{url:?}: the URL must start with http:// or https://"
                ))
            }
        };
        let authority = uri
            .authority()
            .ok_or_else(|| format!("{url:?} names no host"))?;
        if authority.as_str().contains('@') {
            return Err(format!(
                "{url:?} carries credentials; set sink.http.user and password instead"
            ));
        }
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        if host.is_empty() {
            return Err(format!("{url:?} names no host"));
        }
        let path = uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .parse::<Uri>()
            .map_err(|e| format!("{url:?}: {e}"))?;
        Ok(Target {
            tls,
            port: uri.port_u16().unwrap_or(if tls { 443 } else { 80 }),
            authority: HeaderValue::from_str(authority.as_str())
                .map_err(|e| format!("{url:?}: {e}"))?,
            origin: format!("{}://{}", if tls { "https" } else { "http" }, authority),
            host,
            path,
        })
    }
}

/// A socket, plain or TLS.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// One keep-alive HTTP/1.1 connection's sending half.
type Conn = SendRequest<Full<Bytes>>;

/// A URL with its TLS settings, that opens connections.
struct Endpoint {
    target: Target,
    tls: Option<SslConnector>,
}

impl Endpoint {
    fn new(url: &str, tls: impl FnOnce() -> Result<SslConnector, String>) -> Result<Self, String> {
        let target = Target::parse(url)?;
        let tls = if target.tls { Some(tls()?) } else { None };
        Ok(Endpoint { target, tls })
    }

    /// Opens a connection (TCP, TLS when `https://`, the HTTP/1.1
    /// handshake); its driver runs on a task of its own until it closes.
    async fn open(&self) -> Result<Conn, String> {
        let t = &self.target;
        let tcp = TcpStream::connect((t.host.as_str(), t.port))
            .await
            .map_err(|e| format!("cannot connect to {}: {e}", t.origin))?;
        let _ = tcp.set_nodelay(true);
        let io: Box<dyn Io> = match &self.tls {
            None => Box::new(tcp),
            Some(tls) => {
                let ssl = tls
                    .configure()
                    .and_then(|c| c.into_ssl(&t.host))
                    .map_err(|e| format!("TLS to {}: {e}", t.origin))?;
                let mut stream =
                    SslStream::new(ssl, tcp).map_err(|e| format!("TLS to {}: {e}", t.origin))?;
                if let Err(e) = Pin::new(&mut stream).connect().await {
                    let verdict = stream.ssl().verify_result();
                    return Err(format!(
                        "TLS handshake with {} failed: {e} (certificate verification: {})",
                        t.origin,
                        verdict.error_string()
                    ));
                }
                Box::new(stream)
            }
        };
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .map_err(|e| format!("HTTP handshake with {}: {e}", t.origin))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(sender)
    }

    /// One request and its answer (the body read up to [`MAX_ANSWER`]) on
    /// `conn` when it is still usable, else on a new connection, which is
    /// left in `conn` for the next request when it can take one.
    async fn exchange(
        &self,
        conn: &mut Option<Conn>,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<(StatusCode, Bytes), String> {
        let reused = match conn.take() {
            Some(mut c) => c.ready().await.is_ok().then_some(c),
            None => None,
        };
        let (mut sender, fresh) = match reused {
            Some(c) => (c, false),
            None => (self.open().await?, true),
        };
        let request = |headers: HeaderMap, body: Bytes| {
            let mut r = Request::new(Full::new(body));
            *r.method_mut() = Method::POST;
            *r.uri_mut() = self.target.path.clone();
            *r.headers_mut() = headers;
            r
        };
        let answer = match sender
            .send_request(request(headers.clone(), body.clone()))
            .await
        {
            Ok(answer) => answer,
            // A kept-alive connection the receiver closed meanwhile: the
            // request did not leave, so it goes once more on a new one.
            Err(e) if !fresh && (e.is_canceled() || e.is_closed()) => {
                sender = self.open().await?;
                sender
                    .send_request(request(headers, body))
                    .await
                    .map_err(|e| format!("{}: {e}", self.target.origin))?
            }
            Err(e) => return Err(format!("{}: {e}", self.target.origin)),
        };
        let status = answer.status();
        match Limited::new(answer.into_body(), MAX_ANSWER).collect().await {
            Ok(body) => {
                *conn = Some(sender);
                Ok((status, body.to_bytes()))
            }
            // The status stands; the connection is not reused.
            Err(_) => Ok((status, Bytes::new())),
        }
    }

    /// A one-shot request on a connection of its own (token endpoints).
    async fn fetch(
        &self,
        mut headers: HeaderMap,
        body: Bytes,
        timeout: Duration,
    ) -> Result<(StatusCode, Bytes), String> {
        headers.insert(header::HOST, self.target.authority.clone());
        headers.insert(header::USER_AGENT, user_agent());
        let mut conn = None;
        tokio::time::timeout(timeout, self.exchange(&mut conn, headers, body))
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "no answer from {} within {} ms",
                    self.target.origin,
                    timeout.as_millis()
                ))
            })
    }
}

fn user_agent() -> HeaderValue {
    HeaderValue::from_static(concat!("walrelay/", env!("CARGO_PKG_VERSION")))
}

/// The Standard Webhooks key from its secret: base64 after an optional
/// `whsec_`, 24 to 64 bytes (Debezium Server's check).
fn webhook_key(secret: &str) -> Result<PKey<Private>, String> {
    let b64 = secret.strip_prefix("whsec_").unwrap_or(secret);
    let key = openssl::base64::decode_block(b64)
        .map_err(|_| "is not base64 (optionally after whsec_)".to_owned())?;
    if !(24..=64).contains(&key.len()) {
        return Err(format!(
            "decodes to {} bytes; a Standard Webhooks secret has 24 to 64",
            key.len()
        ));
    }
    PKey::hmac(&key).map_err(|e| e.to_string())
}

/// `v1,<base64 of HMAC-SHA256 of "<id>.<timestamp>.<body>">`.
fn webhook_signature(
    key: &PKey<Private>,
    id: &str,
    timestamp: u64,
    body: &[u8],
) -> Result<String, String> {
    let mut signer = openssl::sign::Signer::new(openssl::hash::MessageDigest::sha256(), key)
        .map_err(|e| e.to_string())?;
    let mut signed = Vec::with_capacity(id.len() + body.len() + 24);
    signed.extend_from_slice(id.as_bytes());
    signed.push(b'.');
    signed.extend_from_slice(timestamp.to_string().as_bytes());
    signed.push(b'.');
    signed.extend_from_slice(body);
    let mac = signer
        .sign_oneshot_to_vec(&signed)
        .map_err(|e| e.to_string())?;
    Ok(format!("v1,{}", openssl::base64::encode_block(&mac)))
}

/// A random (version 4) UUID.
fn random_uuid() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// Java's `URLEncoder.encode(s, UTF_8)`: what OAuth2's form body holds.
fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'*' | b'_' => {
                out.push(char::from(b));
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A token of the `jwt` or `oauth2` flow.
struct Token {
    /// The whole `Authorization` value.
    header: HeaderValue,
    /// When to get a new one.
    renew_at: Instant,
    /// JWT: the refresh token.
    refresh: Option<String>,
    /// A request carrying it was acknowledged.
    proven: bool,
    /// Told apart from the token a request carried.
    generation: u64,
}

/// Debezium Server's JWT request bodies: snake case
/// (`@JsonNaming(SnakeCaseStrategy)`), fields in Jackson's order.
#[derive(Serialize)]
struct JwtLogin<'a> {
    username: &'a str,
    password: &'a str,
    token_expiry_in_minutes: u64,
    refresh_token_expiry_in_minutes: u64,
}

#[derive(Serialize)]
struct JwtRefresh<'a> {
    jwt_refresh_token: &'a str,
    token_expiry_in_minutes: u64,
    refresh_token_expiry_in_minutes: u64,
}

/// Its answer, snake case too (unknown fields are ignored, where Jackson
/// would fail on them).
#[derive(Deserialize)]
struct JwtAnswer {
    jwt: String,
    #[serde(default)]
    jwt_refresh_token: Option<String>,
    /// Milliseconds.
    #[serde(default)]
    expires_in: u64,
}

#[derive(Deserialize)]
struct OAuth2Answer {
    access_token: Option<String>,
    /// Seconds.
    #[serde(default)]
    expires_in: u64,
}

/// How requests are authenticated.
enum Auth {
    None,
    /// A fixed `Authorization` value (basic, bearer).
    Fixed(HeaderValue),
    Jwt {
        endpoint: Endpoint,
        refresh_endpoint: Endpoint,
        username: String,
        password: Secret,
        minutes: u64,
        refresh_minutes: u64,
        token: Option<Token>,
    },
    OAuth2 {
        endpoint: Endpoint,
        client_id: String,
        client_secret: Secret,
        scope: Option<String>,
        token: Option<Token>,
    },
    /// Standard Webhooks: signed per request (in [`deliver`]).
    Webhook,
}

/// Why no token could be had.
enum TokenError {
    /// The endpoint may answer later (unreachable, 5xx, 408, 429).
    Passing(String),
    /// It refused or answered something unusable.
    Refused(String),
}

impl Auth {
    fn of(c: &HttpConfig) -> Result<Auth, String> {
        let tls = || c.tls(true);
        if let (Some(user), Some(password)) = (&c.user, &c.password) {
            let pair = format!("{user}:{}", password.expose());
            let value = format!("Basic {}", openssl::base64::encode_block(pair.as_bytes()));
            return fixed(value);
        }
        if let Some(token) = &c.bearer_token {
            return fixed(format!("Bearer {}", token.expose()));
        }
        if let (Some(base), Some(username), Some(password)) =
            (&c.jwt_url, &c.jwt_username, &c.jwt_password)
        {
            // Debezium Server appends the paths to the base as it is.
            return Ok(Auth::Jwt {
                endpoint: Endpoint::new(&format!("{base}auth/authenticate"), tls)?,
                refresh_endpoint: Endpoint::new(&format!("{base}auth/refreshToken"), tls)?,
                username: username.clone(),
                password: password.clone(),
                minutes: c
                    .jwt_token_expiration_minutes
                    .unwrap_or(DEFAULT_JWT_TOKEN_MINUTES),
                refresh_minutes: c
                    .jwt_refresh_token_expiration_minutes
                    .unwrap_or(DEFAULT_JWT_REFRESH_MINUTES),
                token: None,
            });
        }
        if let (Some(url), Some(id), Some(secret)) = (
            &c.oauth2_token_url,
            &c.oauth2_client_id,
            &c.oauth2_client_secret,
        ) {
            return Ok(Auth::OAuth2 {
                endpoint: Endpoint::new(url, tls)?,
                client_id: id.clone(),
                client_secret: secret.clone(),
                scope: c.oauth2_scope.clone().filter(|s| !s.is_empty()),
                token: None,
            });
        }
        if c.webhook_secret.is_some() {
            return Ok(Auth::Webhook);
        }
        Ok(Auth::None)
    }

    fn token(&mut self) -> Option<&mut Option<Token>> {
        match self {
            Auth::Jwt { token, .. } | Auth::OAuth2 { token, .. } => Some(token),
            _ => None,
        }
    }

    /// The `Authorization` value for the next request and the generation
    /// of its token (0: none), getting a token first when needed.
    async fn authorization(
        &mut self,
        timeout: Duration,
        generation: &mut u64,
    ) -> Result<Option<(HeaderValue, u64)>, TokenError> {
        let now = Instant::now();
        match self {
            Auth::None | Auth::Webhook => Ok(None),
            Auth::Fixed(v) => Ok(Some((v.clone(), 0))),
            Auth::Jwt {
                endpoint,
                refresh_endpoint,
                username,
                password,
                minutes,
                refresh_minutes,
                token,
            } => {
                if let Some(t) = token.as_ref().filter(|t| t.renew_at > now) {
                    return Ok(Some((t.header.clone(), t.generation)));
                }
                // An expired token is refreshed with its refresh token
                // (Debezium Server's order); a refused refresh logs in.
                let refresh = token.as_ref().and_then(|t| t.refresh.clone());
                *token = None;
                let mut answer = Err(TokenError::Refused(String::new()));
                if let Some(refresh) = refresh {
                    let body = serde_json::to_vec(&JwtRefresh {
                        jwt_refresh_token: &refresh,
                        token_expiry_in_minutes: *minutes,
                        refresh_token_expiry_in_minutes: *refresh_minutes,
                    })
                    .expect("a JSON object");
                    answer =
                        token_call(refresh_endpoint, json_headers(), Bytes::from(body), timeout)
                            .await;
                }
                if matches!(answer, Err(TokenError::Refused(_))) {
                    let body = serde_json::to_vec(&JwtLogin {
                        username,
                        password: password.expose(),
                        token_expiry_in_minutes: *minutes,
                        refresh_token_expiry_in_minutes: *refresh_minutes,
                    })
                    .expect("a JSON object");
                    answer = token_call(endpoint, json_headers(), Bytes::from(body), timeout).await;
                }
                let parsed: JwtAnswer = serde_json::from_slice(&answer?).map_err(|e| {
                    TokenError::Refused(format!("the JWT endpoint's answer is unusable: {e}"))
                })?;
                // Debezium Server's JWTAuthenticator: "Bearer:" with a colon.
                let header = HeaderValue::from_str(&format!("Bearer: {}", parsed.jwt))
                    .map_err(|_| TokenError::Refused("the JWT is not a header value".into()))?;
                *generation += 1;
                let t = Token {
                    header: header.clone(),
                    renew_at: now + lifetime(parsed.expires_in as f64 / 1000.0),
                    refresh: parsed.jwt_refresh_token,
                    proven: false,
                    generation: *generation,
                };
                *token = Some(t);
                Ok(Some((header, *generation)))
            }
            Auth::OAuth2 {
                endpoint,
                client_id,
                client_secret,
                scope,
                token,
            } => {
                if let Some(t) = token.as_ref().filter(|t| t.renew_at > now) {
                    return Ok(Some((t.header.clone(), t.generation)));
                }
                *token = None;
                let mut body = String::from("grant_type=client_credentials");
                if let Some(scope) = scope {
                    body.push_str("&scope=");
                    body.push_str(&form_encode(scope));
                }
                let mut headers = HeaderMap::new();
                headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/x-www-form-urlencoded"),
                );
                let pair = format!("{client_id}:{}", client_secret.expose());
                let basic = format!("Basic {}", openssl::base64::encode_block(pair.as_bytes()));
                headers.insert(
                    header::AUTHORIZATION,
                    HeaderValue::from_str(&basic).map_err(|_| {
                        TokenError::Refused("the client credentials are not a header value".into())
                    })?,
                );
                let answer = token_call(endpoint, headers, Bytes::from(body), timeout).await?;
                let parsed: OAuth2Answer = serde_json::from_slice(&answer).map_err(|e| {
                    TokenError::Refused(format!(
                        "the OAuth2 token endpoint's answer is unusable: {e}"
                    ))
                })?;
                let access = parsed
                    .access_token
                    .filter(|t| !t.is_empty())
                    .ok_or_else(|| {
                        TokenError::Refused("the OAuth2 token answer has no access_token".into())
                    })?;
                let header = HeaderValue::from_str(&format!("Bearer {access}")).map_err(|_| {
                    TokenError::Refused("the access token is not a header value".into())
                })?;
                *generation += 1;
                *token = Some(Token {
                    header: header.clone(),
                    renew_at: now + lifetime(parsed.expires_in as f64),
                    refresh: None,
                    proven: false,
                    generation: *generation,
                });
                Ok(Some((header, *generation)))
            }
        }
    }
}

fn fixed(value: String) -> Result<Auth, String> {
    HeaderValue::from_str(&value)
        .map(|mut v| {
            v.set_sensitive(true);
            Auth::Fixed(v)
        })
        .map_err(|_| "the credentials are not a header value".to_owned())
}

fn json_headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h
}

/// 90 % of a lifetime of `seconds` (Debezium Server renews then).
fn lifetime(seconds: f64) -> Duration {
    Duration::from_secs_f64((seconds * TOKEN_LIFETIME_USED).max(0.0))
}

/// A token endpoint's answer body, or why there is none.
async fn token_call(
    endpoint: &Endpoint,
    headers: HeaderMap,
    body: Bytes,
    timeout: Duration,
) -> Result<Bytes, TokenError> {
    let origin = &endpoint.target.origin;
    match endpoint.fetch(headers, body, timeout).await {
        Err(e) => Err(TokenError::Passing(e)),
        Ok((status, body)) if status.is_success() => Ok(body),
        Ok((status, body)) => {
            let text = format!(
                "the token endpoint {origin} answered {status}{}",
                quote(&body)
            );
            if transient(status) {
                Err(TokenError::Passing(text))
            } else {
                Err(TokenError::Refused(text))
            }
        }
    }
}

/// Whether a status passes (sent again after a pause).
fn transient(status: StatusCode) -> bool {
    matches!(status.as_u16(), 408 | 429 | 500..=599)
}

/// `: <the answer's first bytes>`, or nothing for an empty answer.
fn quote(body: &[u8]) -> String {
    if body.is_empty() {
        return String::new();
    }
    let text = String::from_utf8_lossy(&body[..body.len().min(QUOTED_ANSWER)]);
    let more = if body.len() > QUOTED_ANSWER {
        "..."
    } else {
        ""
    };
    format!(": {}{more}", text.trim())
}

/// What one request came to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Acked,
    /// Sent again (5xx, 408, 429, timeouts, connections).
    Passing(String),
    /// 401 or 407: walrelay's credentials.
    Unauthorized(u16, String),
    /// Another 4xx: the record's own.
    Rejected(u16, String),
    /// Something else (a redirect, a status out of range): stops.
    Broken(String, String),
}

fn classify(status: StatusCode, body: &[u8]) -> Verdict {
    let code = status.as_u16();
    let text = format!("the receiver answered {status}{}", quote(body));
    match code {
        200..=299 => Verdict::Acked,
        _ if transient(status) => Verdict::Passing(text),
        401 | 407 => Verdict::Unauthorized(code, text),
        400..=499 => Verdict::Rejected(code, text),
        300..=399 => Verdict::Broken(
            format!("redirect_{code}"),
            format!(
                "{text}; walrelay follows no redirect: set sink.http.url to the final location"
            ),
        ),
        _ => Verdict::Broken(format!("unexpected_{code}"), text),
    }
}

/// The kind (a metric label) of a 4xx refusal.
fn rejected_kind(code: u16) -> &'static str {
    match code {
        400 => "rejected_400",
        402 => "rejected_402",
        403 => "rejected_403",
        404 => "rejected_404",
        405 => "rejected_405",
        406 => "rejected_406",
        409 => "rejected_409",
        410 => "rejected_410",
        411 => "rejected_411",
        412 => "rejected_412",
        413 => "rejected_413",
        414 => "rejected_414",
        415 => "rejected_415",
        416 => "rejected_416",
        417 => "rejected_417",
        418 => "rejected_418",
        421 => "rejected_421",
        422 => "rejected_422",
        423 => "rejected_423",
        424 => "rejected_424",
        425 => "rejected_425",
        426 => "rejected_426",
        428 => "rejected_428",
        431 => "rejected_431",
        451 => "rejected_451",
        _ => "rejected_4xx",
    }
}

fn refused(kind: &'static str, too_large: bool, code: String, error: String) -> Outcome {
    Outcome::Failed {
        class: FailureClass::Record { kind, too_large },
        code,
        error,
    }
}

fn broken(code: impl Into<String>, error: String) -> Outcome {
    Outcome::Failed {
        class: FailureClass::Broker,
        code: code.into(),
        error,
    }
}

/// Records that must not be in flight together: a destination and a key.
type OrderKey = (Arc<str>, Option<Bytes>);

/// One request: the records it carries (indices into the batch, in order),
/// their order keys, its headers and body.
struct Unit {
    records: Vec<usize>,
    keys: Vec<OrderKey>,
    headers: HeaderMap,
    body: Bytes,
    /// Standard Webhooks `webhook-id`.
    webhook_id: Option<String>,
    /// The token generation it carried (0: none).
    generation: u64,
}

/// What every request needs, shared with the tasks sending them.
struct Ctx {
    endpoint: Endpoint,
    timeout: Duration,
    attempts: u32,
    retry_interval: Duration,
    webhook: Option<PKey<Private>>,
}

/// A request that ended: its unit, its verdict, its connection if reusable.
struct Done {
    unit: Unit,
    verdict: Verdict,
    conn: Option<Conn>,
}

/// Sends `unit` until it is acknowledged, refused, or its attempts are
/// spent, pausing `retry_interval` between attempts.
async fn deliver(ctx: Arc<Ctx>, unit: Unit, mut conn: Option<Conn>) -> Done {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut headers = unit.headers.clone();
        if let (Some(key), Some(id)) = (&ctx.webhook, &unit.webhook_id) {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            match webhook_signature(key, id, now, &unit.body) {
                Ok(signature) => {
                    for (name, value) in [
                        ("webhook-id", id.clone()),
                        ("webhook-signature", signature),
                        ("webhook-timestamp", now.to_string()),
                    ] {
                        if let Ok(v) = HeaderValue::from_str(&value) {
                            headers.insert(name, v);
                        }
                    }
                }
                Err(e) => {
                    return Done {
                        unit,
                        verdict: Verdict::Broken("signature".into(), e),
                        conn,
                    }
                }
            }
        }
        let verdict = match tokio::time::timeout(
            ctx.timeout,
            ctx.endpoint.exchange(&mut conn, headers, unit.body.clone()),
        )
        .await
        {
            Err(_) => Verdict::Passing(format!(
                "no answer from {} within {} ms",
                ctx.endpoint.target.origin,
                ctx.timeout.as_millis()
            )),
            Ok(Err(e)) => Verdict::Passing(e),
            Ok(Ok((status, body))) => classify(status, &body),
        };
        match verdict {
            Verdict::Passing(why) if attempt < ctx.attempts => {
                warn!(broker = "http", attempt, error = %why, "the receiver did not take the request; sending it again");
                tokio::time::sleep(ctx.retry_interval).await;
            }
            verdict => {
                return Done {
                    unit,
                    verdict,
                    conn,
                }
            }
        }
    }
}

/// A connected HTTP publisher: kept-alive connections to the URL.
pub(crate) struct Http {
    ctx: Arc<Ctx>,
    idle: Vec<Conn>,
    auth: Auth,
    generation: u64,
    content_type: HeaderValue,
    prefix: String,
    base64: bool,
    extra: HeaderMap,
    idempotency_key: bool,
    dead_letter: Option<(String, HeaderValue)>,
    batch: Option<usize>,
    max_in_flight: usize,
}

impl Publisher for Http {
    const NAME: &'static str = "http";
    /// One request in flight per key keeps the order per key; HTTP has no
    /// transactions, and deduplication (by `Idempotency-Key`) is the
    /// receiver's.
    const GUARANTEES: Guarantees = Guarantees {
        idempotent: false,
        transactional: false,
        dedup_by_id: false,
        per_key_order: true,
    };
    const ERROR_CLASS: &'static str = "walrelay::sink::http::Rejected";
    type Config = HttpConfig;

    async fn connect(config: &HttpConfig) -> Result<Http, String> {
        let endpoint = Endpoint::new(&config.url, || config.tls(false))?;
        let timeout = config.timeout();
        let auth = Auth::of(config)?;
        let webhook = match &config.webhook_secret {
            Some(s) => {
                Some(webhook_key(s.expose()).map_err(|e| format!("sink.http.webhook_secret {e}"))?)
            }
            None => None,
        };
        let mut extra = HeaderMap::new();
        for (name, value) in &config.headers {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| e.to_string())?;
            let mut value = HeaderValue::from_str(value.expose()).map_err(|e| e.to_string())?;
            value.set_sensitive(true);
            extra.insert(name, value);
        }
        extra.insert(header::HOST, endpoint.target.authority.clone());
        extra.insert(header::USER_AGENT, user_agent());
        // The first connection now: the receiver answers, or /readyz says
        // it does not.
        let first = tokio::time::timeout(timeout, endpoint.open())
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "cannot connect to {} within {} ms",
                    endpoint.target.origin,
                    timeout.as_millis()
                ))
            })?;
        let content_type = config
            .content_type
            .as_deref()
            .unwrap_or(DEFAULT_CONTENT_TYPE);
        Ok(Http {
            ctx: Arc::new(Ctx {
                endpoint,
                timeout,
                attempts: config.retries.unwrap_or(DEFAULT_RETRIES).max(1),
                retry_interval: Duration::from_millis(
                    config
                        .retry_interval_ms
                        .unwrap_or(DEFAULT_RETRY_INTERVAL_MS),
                ),
                webhook,
            }),
            idle: vec![first],
            auth,
            generation: 0,
            content_type: HeaderValue::from_str(content_type).map_err(|e| e.to_string())?,
            prefix: config.prefix().to_owned(),
            base64: config.headers_encode_base64.unwrap_or(true),
            extra,
            idempotency_key: config.idempotency_key.unwrap_or(true),
            dead_letter: config
                .dead_letter_topic
                .as_ref()
                .and_then(|t| HeaderValue::from_str(t).ok().map(|v| (t.clone(), v))),
            batch: config
                .batch
                .then(|| config.batch_max_size.unwrap_or(DEFAULT_BATCH_MAX_SIZE)),
            max_in_flight: config.max_in_flight.unwrap_or(DEFAULT_MAX_IN_FLIGHT),
        })
    }

    async fn publish(&mut self, batch: &[Outgoing]) -> Vec<Outcome> {
        let mut outcomes: Vec<Option<Outcome>> = vec![None; batch.len()];
        let units = self.plan(batch, &mut outcomes);
        let mut running = FuturesUnordered::new();
        let mut busy: HashSet<OrderKey> = HashSet::new();
        let mut halted = false;
        for mut unit in units {
            while running.len() >= self.max_in_flight || unit.keys.iter().any(|k| busy.contains(k))
            {
                let Some(done) = running.next().await else {
                    break;
                };
                halted |= self.finish(done, &mut outcomes, &mut busy);
            }
            if halted {
                break;
            }
            match self
                .auth
                .authorization(self.ctx.timeout, &mut self.generation)
                .await
            {
                Ok(None) => {}
                Ok(Some((value, generation))) => {
                    unit.headers.insert(header::AUTHORIZATION, value);
                    unit.generation = generation;
                }
                Err(e) => {
                    let outcome = match e {
                        TokenError::Passing(why) => Outcome::Retry(why),
                        TokenError::Refused(why) => broken("auth_refused", why),
                    };
                    for &i in &unit.records {
                        outcomes[i] = Some(outcome.clone());
                    }
                    break;
                }
            }
            busy.extend(unit.keys.iter().cloned());
            let conn = self.idle.pop();
            running.push(deliver(Arc::clone(&self.ctx), unit, conn));
        }
        while let Some(done) = running.next().await {
            self.finish(done, &mut outcomes, &mut busy);
        }
        let mut settled = Vec::with_capacity(batch.len());
        for outcome in outcomes {
            let Some(outcome) = outcome else { break };
            let retry = matches!(outcome, Outcome::Retry(_));
            settled.push(outcome);
            if retry {
                break;
            }
        }
        settled
    }
}

impl Http {
    /// The requests of `batch`, in order; records sent by none (a null
    /// value, a header HTTP cannot carry) have their outcome already.
    fn plan(&self, batch: &[Outgoing], outcomes: &mut [Option<Outcome>]) -> Vec<Unit> {
        let mut units = Vec::new();
        let mut chunk: Vec<usize> = Vec::new();
        for (i, record) in batch.iter().enumerate() {
            // Debezium Server sends nothing for a null value.
            if record.value.is_none() {
                outcomes[i] = Some(Outcome::Acked);
                continue;
            }
            match self.batch {
                None => match self.unit(batch, vec![i]) {
                    Ok(unit) => units.push(unit),
                    Err(outcome) => outcomes[i] = Some(outcome),
                },
                Some(max) => {
                    // A record for another destination (a dead-letter
                    // record) never shares a request.
                    if chunk
                        .first()
                        .is_some_and(|&f| batch[f].destination != record.destination)
                    {
                        self.push_chunk(batch, &mut chunk, &mut units, outcomes);
                    }
                    chunk.push(i);
                    if chunk.len() >= max {
                        self.push_chunk(batch, &mut chunk, &mut units, outcomes);
                    }
                }
            }
        }
        self.push_chunk(batch, &mut chunk, &mut units, outcomes);
        units
    }

    fn push_chunk(
        &self,
        batch: &[Outgoing],
        chunk: &mut Vec<usize>,
        units: &mut Vec<Unit>,
        outcomes: &mut [Option<Outcome>],
    ) {
        if chunk.is_empty() {
            return;
        }
        let records = std::mem::take(chunk);
        match self.unit(batch, records.clone()) {
            Ok(unit) => units.push(unit),
            Err(outcome) => {
                for i in records {
                    outcomes[i] = Some(outcome.clone());
                }
            }
        }
    }

    /// The request carrying `records` (one, or a batch-mode chunk: the
    /// values as a JSON array, the first record's headers).
    fn unit(&self, batch: &[Outgoing], records: Vec<usize>) -> Result<Unit, Outcome> {
        let first = &batch[records[0]];
        let body = if self.batch.is_none() {
            first.value.clone().unwrap_or_default()
        } else {
            let mut b = BytesMut::new();
            b.extend_from_slice(b"[");
            for (n, &i) in records.iter().enumerate() {
                if n > 0 {
                    b.extend_from_slice(b",");
                }
                b.extend_from_slice(batch[i].value.as_deref().unwrap_or_default());
            }
            b.extend_from_slice(b"]");
            b.freeze()
        };
        let ids: Vec<&str> = records
            .iter()
            .filter_map(|&i| batch[i].dedup_id.as_deref())
            .collect();
        let id = match ids.as_slice() {
            [] => None,
            [one] => Some((*one).to_owned()),
            [first, .., last] => Some(format!("{first}..{last}")),
        };
        let mut headers = self.extra.clone();
        headers.insert(header::CONTENT_TYPE, self.content_type.clone());
        for h in &first.headers {
            let Some(value) = &h.value else { continue };
            let name = format!("{}{}", self.prefix, h.name.to_uppercase());
            let Ok(name) = HeaderName::from_bytes(name.as_bytes()) else {
                return Err(invalid_header(&h.name, "its name"));
            };
            let value = if self.base64 {
                HeaderValue::from_str(&openssl::base64::encode_block(value))
            } else {
                HeaderValue::from_bytes(value)
            };
            let Ok(value) = value else {
                return Err(invalid_header(&h.name, "its value"));
            };
            // Debezium Server collects them in a map: the last one wins.
            headers.insert(name, value);
        }
        if let (true, Some(id)) = (self.idempotency_key, &id) {
            if let Ok(v) = HeaderValue::from_str(id) {
                headers.insert(IDEMPOTENCY_KEY, v);
            }
        }
        if let Some((topic, value)) = &self.dead_letter {
            if *first.destination == **topic {
                headers.insert(DEAD_LETTER, value.clone());
            }
        }
        Ok(Unit {
            keys: records
                .iter()
                .map(|&i| (Arc::clone(&batch[i].destination), batch[i].key.clone()))
                .collect::<HashSet<_>>()
                .into_iter()
                .collect(),
            webhook_id: self
                .ctx
                .webhook
                .as_ref()
                .map(|_| format!("msg_{}", id.clone().unwrap_or_else(random_uuid))),
            records,
            headers,
            body,
            generation: 0,
        })
    }

    /// Settles a request that ended; whether later requests of the batch
    /// must wait (a retry, a refusal).
    fn finish(
        &mut self,
        done: Done,
        outcomes: &mut [Option<Outcome>],
        busy: &mut HashSet<OrderKey>,
    ) -> bool {
        let Done {
            unit,
            verdict,
            conn,
        } = done;
        for k in &unit.keys {
            busy.remove(k);
        }
        if let Some(conn) = conn {
            if !conn.is_closed() {
                self.idle.push(conn);
            }
        }
        let token = self.auth.token();
        let outcome = match verdict {
            Verdict::Acked => {
                if let Some(Some(t)) = token {
                    if t.generation == unit.generation {
                        t.proven = true;
                    }
                }
                Outcome::Acked
            }
            Verdict::Passing(why) => Outcome::Retry(why),
            Verdict::Unauthorized(code, text) => match token {
                // A token that worked before has expired early (or was
                // revoked): a new one, and the request again.
                Some(slot) if slot.as_ref().is_some_and(|t| t.proven) => {
                    info!(
                        broker = "http",
                        "the receiver refused the token; getting a new one"
                    );
                    *slot = None;
                    Outcome::Retry(text)
                }
                _ => broken(
                    format!("unauthorized_{code}"),
                    format!("{text}: the receiver refused walrelay's credentials"),
                ),
            },
            Verdict::Rejected(code, text) => refused(
                rejected_kind(code),
                code == 413,
                format!("rejected_{code}"),
                text,
            ),
            Verdict::Broken(code, text) => broken(code, text),
        };
        let halt = !matches!(outcome, Outcome::Acked);
        for &i in &unit.records {
            outcomes[i] = Some(outcome.clone());
        }
        halt
    }
}

fn invalid_header(name: &str, what: &str) -> Outcome {
    refused(
        "invalid_header",
        false,
        "invalid_header".into(),
        format!("header {name:?} cannot be an HTTP header ({what})"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str) -> HttpConfig {
        HttpConfig {
            url: url.into(),
            ..HttpConfig::default()
        }
    }

    fn err(c: &HttpConfig) -> String {
        c.validate().unwrap_err().to_string()
    }

    #[test]
    fn the_url_is_checked_by_key() {
        assert!(config("http://127.0.0.1:8080/events").validate().is_ok());
        assert!(config("https://[::1]/e?x=1").validate().is_ok());
        for bad in ["", "127.0.0.1:8080", "ftp://h/x", "http://u:p@h/x"] {
            assert!(err(&config(bad)).contains("sink.http.url"), "{bad}");
        }
        let t = Target::parse("https://[::1]:8443/a/b?c=d").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.path.to_string().as_str()),
            ("::1", 8443, "/a/b?c=d")
        );
        assert_eq!(Target::parse("http://h").unwrap().path.to_string(), "/");
        assert_eq!(Target::parse("https://h").unwrap().port, 443);
    }

    #[test]
    fn settings_are_refused_by_key() {
        let with = |f: &dyn Fn(&mut HttpConfig)| {
            let mut c = config("http://h/e");
            f(&mut c);
            err(&c)
        };
        assert!(with(&|c| c.timeout_ms = Some(0)).contains("sink.http.timeout_ms"));
        assert!(with(&|c| c.retries = Some(0)).contains("sink.http.retries"));
        assert!(with(&|c| c.max_in_flight = Some(1000)).contains("sink.http.max_in_flight"));
        assert!(
            with(&|c| c.headers_prefix = Some("X DBZ".into())).contains("sink.http.headers_prefix")
        );
        assert!(with(&|c| c.tls_ca_file = Some("/ca.pem".into())).contains("sink.http.tls_ca_file"));
        assert!(with(&|c| c.user = Some("u".into())).contains("sink.http.password"));
        assert!(with(&|c| {
            c.user = Some("u".into());
            c.password = Some(Secret::new("p"));
            c.bearer_token = Some(Secret::new("t"));
        })
        .contains("sink.http.bearer_token"));
        assert!(
            with(&|c| c.jwt_url = Some("http://auth/".into())).contains("sink.http.jwt_username")
        );
        assert!(with(&|c| c.oauth2_scope = Some("s".into())).contains("sink.http.oauth2_scope"));
        assert!(
            with(&|c| c.webhook_secret = Some(Secret::new("whsec_c2hvcnQ=")))
                .contains("sink.http.webhook_secret")
        );
        assert!(with(&|c| {
            c.headers.insert("Content-Length".into(), Secret::new("1"));
        })
        .contains("sink.http.headers.\"Content-Length\""));
        assert!(with(&|c| {
            c.headers.insert("X-Ok".into(), Secret::new("a\nb"));
        })
        .contains("sink.http.headers.\"X-Ok\""));
        let mut c = config("https://h/e");
        c.tls_cert_file = Some("/c.pem".into());
        assert!(err(&c).contains("sink.http.tls_key_file"));
    }

    #[test]
    fn secrets_stay_out_of_debug() {
        let c = HttpConfig {
            url: "https://h/e".into(),
            user: Some("app".into()),
            password: Some(Secret::new("hunter2")),
            bearer_token: Some(Secret::new("tok-secret")),
            jwt_password: Some(Secret::new("jwt-secret")),
            oauth2_client_secret: Some(Secret::new("oauth-secret")),
            webhook_secret: Some(Secret::new("whsec-secret")),
            headers: [("X-Api-Key".to_owned(), Secret::new("api-secret"))].into(),
            ..HttpConfig::default()
        };
        let shown = format!("{c:?}");
        for secret in [
            "hunter2",
            "tok-secret",
            "jwt-secret",
            "oauth-secret",
            "whsec-secret",
            "api-secret",
        ] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(
            shown.contains("X-Api-Key") && shown.contains("app"),
            "{shown}"
        );
    }

    #[test]
    fn statuses_are_classified() {
        let v = |code: u16| classify(StatusCode::from_u16(code).unwrap(), b"why");
        assert_eq!(v(200), Verdict::Acked);
        assert_eq!(v(204), Verdict::Acked);
        for passing in [500, 502, 503, 504, 408, 429] {
            assert!(matches!(v(passing), Verdict::Passing(_)), "{passing}");
        }
        assert!(
            matches!(v(400), Verdict::Rejected(400, t) if t.contains("400") && t.contains("why"))
        );
        assert!(matches!(v(422), Verdict::Rejected(422, _)));
        assert!(matches!(v(401), Verdict::Unauthorized(401, _)));
        assert!(matches!(v(301), Verdict::Broken(code, _) if code == "redirect_301"));
        assert_eq!(rejected_kind(404), "rejected_404");
        assert_eq!(rejected_kind(499), "rejected_4xx");
    }

    /// The Standard Webhooks specification's own example.
    #[test]
    fn webhook_signatures_follow_the_specification() {
        let key = webhook_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let sig = webhook_signature(
            &key,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1_614_265_330,
            br#"{"test": 2432232314}"#,
        )
        .unwrap();
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        assert!(webhook_key("whsec_c2hvcnQ=").is_err(), "5 bytes");
    }

    #[test]
    fn form_values_are_encoded_as_java_does() {
        assert_eq!(form_encode("read write:all"), "read+write%3Aall");
        assert_eq!(form_encode("a.b-c*d_e~"), "a.b-c*d_e%7E");
    }

    #[test]
    fn jwt_requests_are_snake_case_in_jacksons_order() {
        let body = serde_json::to_string(&JwtLogin {
            username: "u",
            password: "p",
            token_expiry_in_minutes: 60,
            refresh_token_expiry_in_minutes: 1440,
        })
        .unwrap();
        assert_eq!(
            body,
            r#"{"username":"u","password":"p","token_expiry_in_minutes":60,"refresh_token_expiry_in_minutes":1440}"#
        );
    }

    #[test]
    fn uuids_are_version_4() {
        let u = random_uuid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert!(matches!(&u[19..20], "8" | "9" | "a" | "b"), "{u}");
    }
}
