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

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, LengthLimitError, Limited};
use hyper::{StatusCode, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::metrics::page::State;

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
    /// Not `http://` (the listener speaks plain HTTP).
    #[error(
        "invalid url {url}: it must start with http://; the metrics listener speaks plain http"
    )]
    NotHttp {
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

/// A client of the listener, each request bounded by its timeout. Cheap
/// to clone; clones share their idle connections (`--watch` reuses one).
#[derive(Debug, Clone)]
pub(crate) struct Client {
    http: hyper_util::client::legacy::Client<HttpConnector, Empty<Bytes>>,
    timeout: Duration,
}

impl Client {
    /// A client whose requests each end within `timeout`.
    pub(crate) fn new(timeout: Duration) -> Client {
        Client {
            http: hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build_http(),
            timeout,
        }
    }

    /// GET `url`, whatever the status of the answer.
    pub(crate) async fn get(&self, url: &str) -> Result<Response, ClientError> {
        let uri: Uri = url.parse().map_err(|source| ClientError::InvalidUrl {
            url: url.to_owned(),
            source,
        })?;
        if uri.scheme_str() != Some("http") {
            return Err(ClientError::NotHttp {
                url: url.to_owned(),
            });
        }
        let addr = uri.authority().map(ToString::to_string).unwrap_or_default();
        let exchange = async {
            let answer = self.http.get(uri).await.map_err(|source| {
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
        if answer.status != StatusCode::OK {
            return Err(ClientError::HttpStatus {
                url: url.to_owned(),
                status: answer.status,
            });
        }
        Ok(answer)
    }
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
    Client::new(DEFAULT_TIMEOUT).state(&state_url(addr)).await
}

/// GET the page `path` of the walrelay listening at `addr`, whatever its
/// status, within [`DEFAULT_TIMEOUT`].
pub async fn get(addr: &str, path: &str) -> Result<Response, ClientError> {
    Client::new(DEFAULT_TIMEOUT)
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
    async fn reads_the_live_listener() {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let p = Arc::new(crate::metrics::Process::new());
        p.add_pipeline("orders");
        let (addr, handle) = crate::metrics::serve("127.0.0.1:0", p, rx).await.unwrap();
        let addr = addr.to_string();
        let state = fetch_state(&addr).await.unwrap();
        assert_eq!(state.version, env!("CARGO_PKG_VERSION"));
        assert_eq!(state.pipelines[0].name, "orders");
        let client = Client::new(DEFAULT_TIMEOUT);
        let metrics = client.text(&page_url(&addr, "/metrics")).await.unwrap();
        assert!(metrics.contains("walrelay_up 1"), "{metrics}");
        let readyz = get(&addr, "/readyz").await.unwrap();
        assert_eq!(readyz.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(readyz.text().unwrap().contains("pipeline orders: "));
        let err = client.text(&page_url(&addr, "/nope")).await.unwrap_err();
        assert!(matches!(err, ClientError::HttpStatus { .. }), "{err}");
        let err = client.state("https://x/api/state").await.unwrap_err();
        assert!(matches!(err, ClientError::NotHttp { .. }), "{err}");
        tx.send(true).unwrap();
        handle.await.unwrap();
        // Nothing listens any more.
        let err = fetch_state(&addr).await.unwrap_err();
        assert!(matches!(err, ClientError::Connect { .. }), "{err}");
        assert!(err.to_string().starts_with("cannot connect to 127.0.0.1:"));
    }
}
