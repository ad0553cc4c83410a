//! The metrics listener's security, read from a web configuration file in
//! the Prometheus exporter-toolkit's format (`[metrics] web_config_file`,
//! the file exporters take as `--web.config.file`): TLS with the toolkit's
//! client certificate policies, HTTP/2 through ALPN, extra response
//! headers, basic auth with bcrypt hashes, and a rate limit.
//!
//! Owns [`Web`], what the listener applies to each connection and request,
//! loaded once at start: `file` reads the YAML, `tls` builds the OpenSSL
//! acceptor, `auth` verifies credentials, `rate` is the token bucket. Any
//! error refuses the start and names the file and the key. Unlike the
//! toolkit, the file is not read again on each request: a changed file
//! (or certificate) takes a restart. It never logs or shows a secret: the
//! inline key and the hashes are [`crate::secret::Secret`]s, and `Debug`
//! shows what is enabled, not what it is made of.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::{HeaderMap, Response, StatusCode};

mod auth;
mod file;
mod rate;
pub(crate) mod tls;

pub(crate) use tls::ClientAuth;

/// The body of a 401: Go's `http.Error` text, nothing about why.
pub(crate) const UNAUTHORIZED_BODY: &str = "Unauthorized\n";
/// The body of a 429.
const TOO_MANY_REQUESTS_BODY: &str = "Too Many Requests\n";

/// Errors of the web configuration file; each names the file, and the key
/// when one is at fault.
#[derive(Debug, thiserror::Error)]
pub enum WebConfigError {
    /// The file cannot be read.
    #[error("cannot read the web configuration file {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Not YAML of the format (an unknown key is named here).
    #[error("invalid web configuration file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The YAML reader's message, with the key and line.
        message: String,
    },
    /// A key's value cannot be used.
    #[error("invalid web configuration file {path}: {key}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The key, dotted from the top (`tls_server_config.cert_file`).
        key: String,
        /// Why, naming the file the key names when it is at fault.
        reason: String,
    },
}

/// What the listener does with each connection and request.
#[derive(Default)]
pub(crate) struct Web {
    /// TLS; `None`: plain HTTP.
    tls: Option<tls::Tls>,
    /// Basic auth; `None`: anyone.
    auth: Option<Arc<auth::BasicAuth>>,
    /// Added to every answer that does not set them itself.
    headers: Vec<(HeaderName, HeaderValue)>,
    /// The token bucket; `None`: no limit.
    rate: Option<rate::RateLimiter>,
}

impl fmt::Debug for Web {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Web")
            .field("tls", &self.tls.as_ref().map(|t| t.client_auth))
            .field("basic_auth_users", &self.auth.as_ref().map(|a| a.len()))
            .field(
                "headers",
                &self.headers.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .field("rate_limit", &self.rate.is_some())
            .finish()
    }
}

impl Web {
    /// Reads the web configuration file at `path` and everything it names.
    pub(crate) fn load(path: &Path) -> Result<Web, WebConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| WebConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Web::from_yaml(&text, path)
    }

    /// The listener of `text`, the file at `path`.
    fn from_yaml(text: &str, path: &Path) -> Result<Web, WebConfigError> {
        let parsed = file::parse(text, path)?;
        let http2 = parsed.http_server_config.http2;
        let tls = match parsed.tls_server_config {
            Some(t) if t.is_enabled() => Some(tls::acceptor(&t, http2, path)?),
            _ => None,
        };
        Ok(Web {
            tls,
            auth: auth::BasicAuth::new(parsed.basic_auth_users, path)?,
            headers: headers(&parsed.http_server_config.headers, path)?,
            rate: parsed
                .rate_limit
                .map(|r| rate_limiter(&r, path))
                .transpose()?
                .flatten(),
        })
    }

    /// The TLS acceptor, if the listener speaks TLS.
    pub(crate) fn acceptor(&self) -> Option<&openssl::ssl::SslAcceptor> {
        self.tls.as_ref().map(|t| &*t.acceptor)
    }

    /// The client auth type, if the listener speaks TLS.
    pub(crate) fn client_auth(&self) -> Option<ClientAuth> {
        self.tls.as_ref().map(|t| t.client_auth)
    }

    /// Whether basic auth is required.
    pub(crate) fn has_basic_auth(&self) -> bool {
        self.auth.is_some()
    }

    /// The answer to give instead of serving the request: 429 when the
    /// bucket is empty, 401 without valid credentials; `None` to serve it.
    pub(crate) async fn refuse(&self, headers: &HeaderMap) -> Option<Response<Full<Bytes>>> {
        if let Some(rate) = &self.rate {
            if !rate.allow_at(std::time::Instant::now()) {
                return Some(plain(StatusCode::TOO_MANY_REQUESTS, TOO_MANY_REQUESTS_BODY));
            }
        }
        let auth = self.auth.as_ref()?;
        if auth.allows(headers).await {
            return None;
        }
        let mut resp = plain(StatusCode::UNAUTHORIZED, UNAUTHORIZED_BODY);
        resp.headers_mut()
            .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Basic"));
        Some(resp)
    }

    /// `resp` with the configured headers it does not set itself (the
    /// operator's page keeps its own Content-Security-Policy).
    pub(crate) fn finish(&self, mut resp: Response<Full<Bytes>>) -> Response<Full<Bytes>> {
        for (name, value) in &self.headers {
            if !resp.headers().contains_key(name) {
                resp.headers_mut().insert(name.clone(), value.clone());
            }
        }
        resp
    }
}

/// A plain-text answer.
fn plain(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// The configured headers as HTTP headers; blank ones are left out.
fn headers(
    configured: &std::collections::BTreeMap<String, String>,
    path: &Path,
) -> Result<Vec<(HeaderName, HeaderValue)>, WebConfigError> {
    let mut out = Vec::with_capacity(configured.len());
    for (name, value) in configured.iter().filter(|(_, v)| !v.is_empty()) {
        let invalid = || WebConfigError::Invalid {
            path: path.to_owned(),
            key: format!("http_server_config.headers.{name}"),
            reason: "not a valid header value".into(),
        };
        let name = HeaderName::try_from(name.as_str()).map_err(|_| invalid())?;
        let value = HeaderValue::try_from(value.as_str()).map_err(|_| invalid())?;
        out.push((name, value));
    }
    Ok(out)
}

/// `rate_limit`'s bucket; `None` when `interval` is 0 (or negative: Go's
/// limit is then infinite).
fn rate_limiter(
    r: &file::RateLimit,
    path: &Path,
) -> Result<Option<rate::RateLimiter>, WebConfigError> {
    let nanos = match &r.interval {
        None => 0,
        Some(file::GoDuration::Nanos(n)) => i128::from(*n),
        Some(file::GoDuration::Text(t)) => {
            file::go_duration_nanos(t).ok_or_else(|| WebConfigError::Invalid {
                path: path.to_owned(),
                key: "rate_limit.interval".into(),
                reason: format!("{t:?} is not a duration such as 1s or 250ms"),
            })?
        }
    };
    if nanos <= 0 {
        return Ok(None);
    }
    let interval = std::time::Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
    Ok(Some(rate::RateLimiter::new(interval, r.burst)))
}

#[cfg(test)]
mod tests;
