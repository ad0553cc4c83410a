//! The HTTP client of a running walrelay's listener: hyper's client, one
//! GET at a time, bounded by a timeout and a size; [`Client::state`] and
//! [`fetch_state`] read `/api/state` into the typed [`State`] the listener
//! writes.
//!
//! Owns the listener's URLs as an operator names them (`host:port`, or a
//! URL of the listener or of one of its pages) and the errors of reading
//! them. It never parses the Prometheus text: whoever reads figures takes
//! them from `/api/state`; `/metrics` comes back as text only for those
//! that look at the exposition itself. It only reads: a GET, nothing else.
//!
//! A listener secured by a web configuration file is read over `https://`
//! (rustls on ring; the platform's roots, or only the CA of
//! [`Access::ca_file`]), with a client certificate and basic-auth
//! credentials when [`Access`] has them. The password is a [`Secret`]: it
//! goes into the `Authorization` header (marked sensitive) and nowhere else.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, LengthLimitError, Limited};
use hyper::header::{HeaderValue, AUTHORIZATION};
use hyper::{Request, StatusCode, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::metrics::page::State;
use crate::secret::Secret;

/// Default bound on one request (connect, request and the whole answer).
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// The path of the typed state.
pub(crate) const STATE_PATH: &str = "/api/state";
/// The listener's pages, any of which may name it in a URL.
const PAGES: [&str; 5] = ["/api/state", "/metrics", "/readyz", "/healthz", "/"];
/// Largest answer accepted.
const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// Errors of reading the listener.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The URL does not parse.
    #[error("invalid url {url}")]
    InvalidUrl {
        /// The URL as given, which does not parse.
        url: String,
        /// Why it does not parse.
        #[source]
        source: hyper::http::uri::InvalidUri,
    },
    /// Neither `http://` nor `https://`.
    #[error("invalid url {url}: it must start with http:// or https://")]
    NotHttp {
        /// The URL asked for, as given.
        url: String,
    },
    /// A file of [`Access`] cannot be used for TLS.
    #[error("cannot use {option} {path}: {reason}")]
    Tls {
        /// The command-line option that names it (`--ca-file`, ...).
        option: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The listener wants credentials, or others.
    #[error("{url} answered 401: check --user and the password")]
    Unauthorized {
        /// The URL asked for, as given.
        url: String,
    },
    /// Nothing accepted the connection.
    #[error("cannot connect to {addr}; is walrelay running with [metrics] listen = \"{addr}\"?")]
    Connect {
        /// `host:port`.
        addr: String,
        /// The client's error.
        #[source]
        source: hyper_util::client::legacy::Error,
    },
    /// No whole answer within the bound.
    #[error("no answer from {url} within {timeout:?}")]
    Timeout {
        /// The URL asked for, as given.
        url: String,
        /// The bound.
        timeout: Duration,
    },
    /// The request failed after the connection was made.
    #[error("cannot read {url}")]
    Request {
        /// The URL asked for, as given.
        url: String,
        /// The client's error.
        #[source]
        source: hyper_util::client::legacy::Error,
    },
    /// The body could not be read.
    #[error("cannot read the answer of {url}")]
    Body {
        /// The URL asked for, as given.
        url: String,
        /// The body's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The body is larger than 16 MiB.
    #[error("the answer of {url} is larger than 16 MiB")]
    TooLarge {
        /// The URL asked for, as given.
        url: String,
    },
    /// The server answered with a status the caller does not take.
    #[error("{url} answered {status}")]
    HttpStatus {
        /// The URL asked for, as given.
        url: String,
        /// The status the server answered (not 200).
        status: StatusCode,
    },
    /// A text answer that is not UTF-8.
    #[error("the answer of {url} is not utf-8")]
    NotText {
        /// The URL asked for, as given.
        url: String,
    },
    /// A JSON answer that is not walrelay's state.
    #[error("the answer of {url} is not walrelay's state (a walrelay of another version?)")]
    NotState {
        /// The URL asked for, as given.
        url: String,
        /// What serde says.
        #[source]
        source: serde_json::Error,
    },
}

/// One answer: status, headers and the whole body.
#[derive(Debug, Clone)]
pub struct Response {
    /// The HTTP status line's code.
    pub status: StatusCode,
    #[cfg(test)]
    pub(crate) headers: hyper::header::HeaderMap,
    pub(crate) body: Bytes,
}

impl Response {
    /// The body as text.
    pub fn text(&self) -> Option<&str> {
        std::str::from_utf8(&self.body).ok()
    }
}

/// How to reach a secured listener: the CA to trust, a client
/// certificate, basic-auth credentials. The default is plain access
/// (https with the platform's roots).
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// Trust only the CA certificates (PEM) of this file.
    pub ca_file: Option<PathBuf>,
    /// Present this certificate (PEM chain) ...
    pub cert_file: Option<PathBuf>,
    /// ... with this private key (PEM).
    pub key_file: Option<PathBuf>,
    /// Basic auth: the user ...
    pub user: Option<String>,
    /// ... and the password.
    pub password: Option<Secret>,
}

/// The connector: plain HTTP, or TLS by rustls.
type Connector = HttpsConnector<HttpConnector>;

/// A client of the listener, each request bounded by its timeout. Cheap
/// to clone; clones share their idle connections (`--watch` reuses one).
#[derive(Debug, Clone)]
pub(crate) struct Client {
    http: hyper_util::client::legacy::Client<Connector, Empty<Bytes>>,
    /// `Basic ...`, marked sensitive.
    authorization: Option<HeaderValue>,
    timeout: Duration,
}

impl Client {
    /// A client whose requests each end within `timeout`, without
    /// credentials.
    pub(crate) fn new(timeout: Duration) -> Result<Client, ClientError> {
        Client::with_access(timeout, &Access::default())
    }

    /// A client whose requests each end within `timeout`, reaching the
    /// listener as `access` says.
    pub(crate) fn with_access(timeout: Duration, access: &Access) -> Result<Client, ClientError> {
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_config(access)?)
            .https_or_http()
            .enable_http1()
            .build();
        let authorization = access.user.as_ref().map(|user| {
            let password = access.password.as_ref().map_or("", |p| p.expose());
            let encoded =
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            let mut value = HeaderValue::try_from(format!("Basic {encoded}"))
                .unwrap_or_else(|_| HeaderValue::from_static("Basic"));
            value.set_sensitive(true);
            value
        });
        Ok(Client {
            http: hyper_util::client::legacy::Client::builder(TokioExecutor::new())
                .build(connector),
            authorization,
            timeout,
        })
    }

    /// GET `url`, whatever the status of the answer.
    pub(crate) async fn get(&self, url: &str) -> Result<Response, ClientError> {
        let uri: Uri = url.parse().map_err(|source| ClientError::InvalidUrl {
            url: url.to_owned(),
            source,
        })?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) {
            return Err(ClientError::NotHttp {
                url: url.to_owned(),
            });
        }
        let addr = uri.authority().map(ToString::to_string).unwrap_or_default();
        let mut request = Request::get(uri);
        if let Some(value) = &self.authorization {
            request = request.header(AUTHORIZATION, value.clone());
        }
        let request = request
            .body(Empty::new())
            .map_err(|_| ClientError::NotHttp {
                url: url.to_owned(),
            })?;
        let exchange = async {
            let answer = self.http.request(request).await.map_err(|source| {
                if source.is_connect() {
                    ClientError::Connect { addr, source }
                } else {
                    ClientError::Request {
                        url: url.to_owned(),
                        source,
                    }
                }
            })?;
            let (parts, body) = answer.into_parts();
            let body = Limited::new(body, MAX_RESPONSE_BYTES)
                .collect()
                .await
                .map_err(|source| {
                    if source.is::<LengthLimitError>() {
                        ClientError::TooLarge {
                            url: url.to_owned(),
                        }
                    } else {
                        ClientError::Body {
                            url: url.to_owned(),
                            source,
                        }
                    }
                })?
                .to_bytes();
            Ok(Response {
                status: parts.status,
                #[cfg(test)]
                headers: parts.headers,
                body,
            })
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| ClientError::Timeout {
                url: url.to_owned(),
                timeout: self.timeout,
            })?
    }

    #[cfg(test)]
    /// GET `url` as text; an answer other than 200 is an error.
    pub(crate) async fn text(&self, url: &str) -> Result<String, ClientError> {
        let answer = self.ok(url).await?;
        answer
            .text()
            .map(str::to_owned)
            .ok_or(ClientError::NotText {
                url: url.to_owned(),
            })
    }

    /// GET `url` (an `/api/state`) as the typed state.
    pub(crate) async fn state(&self, url: &str) -> Result<State, ClientError> {
        decode_state(url, &self.ok(url).await?.body)
    }

    /// GET `url`; an answer other than 200 is an error.
    async fn ok(&self, url: &str) -> Result<Response, ClientError> {
        let answer = self.get(url).await?;
        if answer.status == StatusCode::UNAUTHORIZED {
            return Err(ClientError::Unauthorized {
                url: url.to_owned(),
            });
        }
        if answer.status != StatusCode::OK {
            return Err(ClientError::HttpStatus {
                url: url.to_owned(),
                status: answer.status,
            });
        }
        Ok(answer)
    }
}

/// rustls's client settings for `access`: ring, TLS 1.2 and 1.3, the
/// roots of `ca_file` (else the platform's), the client certificate.
/// rustls 0.23.48 deprecates ring's provider for its lack of post-quantum
/// key exchange (aws-lc's alone); walrelay builds ring, not aws-lc, as
/// `sink::pubsub` explains.
#[allow(deprecated)]
fn tls_config(access: &Access) -> Result<rustls::ClientConfig, ClientError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ClientError::Tls {
            option: "tls",
            path: PathBuf::new(),
            reason: e.to_string(),
        })?
        .with_root_certificates(roots(access.ca_file.as_deref())?);
    let (Some(cert), Some(key)) = (&access.cert_file, &access.key_file) else {
        return Ok(builder.with_no_client_auth());
    };
    let tls = |option, path: &Path, reason: String| ClientError::Tls {
        option,
        path: path.to_owned(),
        reason,
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| tls("--cert-file", cert, e.to_string()))?;
    let pkey =
        PrivateKeyDer::from_pem_file(key).map_err(|e| tls("--key-file", key, e.to_string()))?;
    builder
        .with_client_auth_cert(chain, pkey)
        .map_err(|e| tls("--cert-file", cert, e.to_string()))
}

/// The roots: the certificates of `ca_file`, or the platform's.
fn roots(ca_file: Option<&Path>) -> Result<rustls::RootCertStore, ClientError> {
    let mut roots = rustls::RootCertStore::empty();
    let Some(path) = ca_file else {
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        return Ok(roots);
    };
    let tls = |reason: String| ClientError::Tls {
        option: "--ca-file",
        path: path.to_owned(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| tls(e.to_string()))?;
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(tls("holds no CA certificate".into()));
    }
    Ok(roots)
}

/// The state in `body`, the answer of `url`.
pub(crate) fn decode_state(url: &str, body: &[u8]) -> Result<State, ClientError> {
    serde_json::from_slice(body).map_err(|source| ClientError::NotState {
        url: url.to_owned(),
        source,
    })
}

/// The URL of the listener's page `path` (`/api/state`, `/metrics`, ...)
/// for `addr`: a listen address (`127.0.0.1:9187`), or a URL of the
/// listener (`http://proxy/walrelay/`) or of any of its pages
/// (`http://127.0.0.1:9187/metrics`).
pub(crate) fn page_url(addr: &str, path: &str) -> String {
    if !addr.contains("://") {
        return format!("http://{addr}{path}");
    }
    let (scheme, rest) = addr.split_once("://").unwrap_or(("http", addr));
    let base = match rest.find('/') {
        Some(i) => {
            let (authority, at) = rest.split_at(i);
            let root = PAGES
                .iter()
                .find_map(|page| at.strip_suffix(page))
                .unwrap_or(at);
            format!("{authority}{}", root.trim_end_matches('/'))
        }
        None => rest.to_owned(),
    };
    format!("{scheme}://{base}{path}")
}

/// The `/api/state` URL of `addr` (see [`page_url`]).
pub fn state_url(addr: &str) -> String {
    page_url(addr, STATE_PATH)
}

/// The state of the walrelay listening at `addr` (see [`page_url`]),
/// within [`DEFAULT_TIMEOUT`].
pub async fn fetch_state(addr: &str) -> Result<State, ClientError> {
    fetch_state_with(addr, &Access::default()).await
}

/// The state of the walrelay listening at `addr`, reached as `access`
/// says, within [`DEFAULT_TIMEOUT`].
pub async fn fetch_state_with(addr: &str, access: &Access) -> Result<State, ClientError> {
    Client::with_access(DEFAULT_TIMEOUT, access)?
        .state(&state_url(addr))
        .await
}

/// GET the page `path` of the walrelay listening at `addr`, whatever its
/// status, within [`DEFAULT_TIMEOUT`].
pub async fn get(addr: &str, path: &str) -> Result<Response, ClientError> {
    get_with(addr, path, &Access::default()).await
}

/// GET the page `path` of the walrelay at `addr`, reached as `access`
/// says, whatever the status of the answer, within [`DEFAULT_TIMEOUT`].
pub async fn get_with(addr: &str, path: &str, access: &Access) -> Result<Response, ClientError> {
    Client::with_access(DEFAULT_TIMEOUT, access)?
        .get(&page_url(addr, path))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn urls_of_the_listener() {
        for (addr, url) in [
            ("127.0.0.1:9187", "http://127.0.0.1:9187/api/state"),
            ("[::1]:9187", "http://[::1]:9187/api/state"),
            ("http://127.0.0.1:9187", "http://127.0.0.1:9187/api/state"),
            ("http://127.0.0.1:9187/", "http://127.0.0.1:9187/api/state"),
            (
                "http://127.0.0.1:9187/metrics",
                "http://127.0.0.1:9187/api/state",
            ),
            (
                "http://127.0.0.1:9187/api/state",
                "http://127.0.0.1:9187/api/state",
            ),
            ("http://proxy/walrelay/", "http://proxy/walrelay/api/state"),
            (
                "http://proxy/walrelay/metrics",
                "http://proxy/walrelay/api/state",
            ),
            ("https://x/metrics", "https://x/api/state"),
        ] {
            assert_eq!(state_url(addr), url, "{addr}");
        }
        assert_eq!(
            page_url("127.0.0.1:9187", "/metrics"),
            "http://127.0.0.1:9187/metrics"
        );
    }

    #[test]
    fn an_answer_that_is_not_the_state_is_named() {
        let err = decode_state("http://x/api/state", br#"{"version": "0.1.0"}"#).unwrap_err();
        assert!(matches!(err, ClientError::NotState { .. }), "{err}");
        assert!(
            crate::chain::DisplayChain(&err)
                .to_string()
                .contains("missing field"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn basic_auth_credentials_are_sent_and_a_401_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let web = dir.path().join("web.yml");
        let hash = bcrypt::hash("pw", 4).unwrap();
        std::fs::write(&web, format!("basic_auth_users:\n  ops: '{hash}'\n")).unwrap();
        let web = Arc::new(crate::metrics::web::Web::load(&web).unwrap());
        let (tx, rx) = tokio::sync::watch::channel(false);
        let p = Arc::new(crate::metrics::Process::new());
        p.add_pipeline("orders");
        let (addr, handle) = crate::metrics::serve_with("127.0.0.1:0", web, p, rx)
            .await
            .unwrap();
        let addr = addr.to_string();
        let access = |password: &str| Access {
            user: Some("ops".into()),
            password: Some(Secret::new(password)),
            ..Access::default()
        };
        let state = fetch_state_with(&addr, &access("pw")).await.unwrap();
        assert_eq!(state.pipelines[0].name, "orders");
        for refused in [access("nope"), Access::default()] {
            let err = fetch_state_with(&addr, &refused).await.unwrap_err();
            assert!(matches!(err, ClientError::Unauthorized { .. }), "{err}");
            assert_eq!(
                err.to_string(),
                format!("http://{addr}/api/state answered 401: check --user and the password")
            );
        }
        // The password is in no Debug output of the client or its access.
        let client = Client::with_access(DEFAULT_TIMEOUT, &access("hunter2")).unwrap();
        assert!(!format!("{client:?}{:?}", access("hunter2")).contains("hunter2"));
        tx.send(true).unwrap();
        handle.await.unwrap();
    }

    #[tokio::test]
    async fn reads_the_live_listener() {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let p = Arc::new(crate::metrics::Process::new());
        p.add_pipeline("orders");
        let (addr, handle) = crate::metrics::serve("127.0.0.1:0", p, rx).await.unwrap();
        let addr = addr.to_string();
        let state = fetch_state(&addr).await.unwrap();
        assert_eq!(state.version, env!("CARGO_PKG_VERSION"));
        assert_eq!(state.pipelines[0].name, "orders");
        let client = Client::new(DEFAULT_TIMEOUT).unwrap();
        let metrics = client.text(&page_url(&addr, "/metrics")).await.unwrap();
        assert!(metrics.contains("walrelay_up 1"), "{metrics}");
        let readyz = get(&addr, "/readyz").await.unwrap();
        assert_eq!(readyz.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(readyz.text().unwrap().contains("pipeline orders: "));
        let err = client.text(&page_url(&addr, "/nope")).await.unwrap_err();
        assert!(matches!(err, ClientError::HttpStatus { .. }), "{err}");
        let err = client.state("ftp://x/api/state").await.unwrap_err();
        assert!(matches!(err, ClientError::NotHttp { .. }), "{err}");
        tx.send(true).unwrap();
        handle.await.unwrap();
        // Nothing listens any more.
        let err = fetch_state(&addr).await.unwrap_err();
        assert!(matches!(err, ClientError::Connect { .. }), "{err}");
        assert!(err.to_string().starts_with("cannot connect to 127.0.0.1:"));
    }
}
