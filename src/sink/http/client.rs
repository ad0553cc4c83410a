//! The connection side of the HTTP sink: the URL taken apart, TCP, TLS
//! when `https://`, hyper's HTTP/1.1 handshake, and one request with its
//! answer on a kept-alive connection. Knows nothing of records, batches or
//! authentication.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use openssl::ssl::SslConnector;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// Most bytes of an answer's body read (the rest closes the connection).
const MAX_ANSWER: usize = 1 << 20;

/// Where requests go: the URL taken apart.
#[derive(Debug, Clone)]
pub(super) struct Target {
    pub(super) tls: bool,
    /// Host name or address (an IPv6 address without brackets).
    host: String,
    port: u16,
    /// The `Host` header: the URL's authority.
    pub(super) authority: HeaderValue,
    /// The request target (path and query).
    path: Uri,
    /// `scheme://authority`, for messages.
    pub(super) origin: String,
}

impl Target {
    pub(super) fn parse(url: &str) -> Result<Target, String> {
        // Every message shows the URL without its user information: a
        // refused URL may carry a password.
        let shown = crate::secret::redact_userinfo(url.trim());
        let uri: Uri = url
            .trim()
            .parse()
            .map_err(|e| format!("{shown:?} is not a URL: {e}"))?;
        let tls = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => {
                return Err(format!(
                    "{shown:?}: the URL must start with http:// or https://"
                ))
            }
        };
        let authority = uri
            .authority()
            .ok_or_else(|| format!("{shown:?} names no host"))?;
        if authority.as_str().contains('@') {
            return Err(format!(
                "{shown:?} carries credentials; set sink.http.user and password instead"
            ));
        }
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        if host.is_empty() {
            return Err(format!("{shown:?} names no host"));
        }
        let path = uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .parse::<Uri>()
            .map_err(|e| format!("{shown:?}: {e}"))?;
        Ok(Target {
            tls,
            port: uri.port_u16().unwrap_or(if tls { 443 } else { 80 }),
            authority: HeaderValue::from_str(authority.as_str())
                .map_err(|e| format!("{shown:?}: {e}"))?,
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
pub(super) type Conn = SendRequest<Full<Bytes>>;

/// A URL with its TLS settings, that opens connections.
pub(super) struct Endpoint {
    pub(super) target: Target,
    tls: Option<SslConnector>,
}

impl Endpoint {
    pub(super) fn new(
        url: &str,
        tls: impl FnOnce() -> Result<SslConnector, String>,
    ) -> Result<Self, String> {
        let target = Target::parse(url)?;
        let tls = if target.tls { Some(tls()?) } else { None };
        Ok(Endpoint { target, tls })
    }

    /// Opens a connection (TCP, TLS when `https://`, the HTTP/1.1
    /// handshake); its driver runs on a task of its own until it closes.
    pub(super) async fn open(&self) -> Result<Conn, String> {
        let t = &self.target;
        let tcp = TcpStream::connect((t.host.as_str(), t.port))
            .await
            .map_err(|e| format!("cannot connect to {}: {e}", t.origin))?;
        let _ = tcp.set_nodelay(true);
        let io: Box<dyn Io> = match &self.tls {
            None => Box::new(tcp),
            Some(tls) => {
                let stream = crate::sink::tls::handshake(tls, &t.host, tcp, &t.origin).await?;
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
    pub(super) async fn exchange(
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
            let length = body.len();
            let mut r = Request::new(Full::new(body));
            *r.method_mut() = Method::POST;
            *r.uri_mut() = self.target.path.clone();
            *r.headers_mut() = jdk_order(headers, length);
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
    pub(super) async fn fetch(
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

/// The headers in the order Debezium Server's JDK client writes them
/// (observed side by side, `tests/integration/compatibility_server.rs`):
/// the client's own (`Content-Length`, `Host`, `User-Agent`), then the
/// request's, each group by name, case-insensitively. hyper writes a
/// `HeaderMap` in insertion order and `Content-Length` last unless it is
/// there.
fn jdk_order(headers: HeaderMap, content_length: usize) -> HeaderMap {
    let own = [header::CONTENT_LENGTH, header::HOST, header::USER_AGENT];
    let mut out = HeaderMap::with_capacity(headers.len() + 1);
    out.insert(header::CONTENT_LENGTH, HeaderValue::from(content_length));
    for name in &own[1..] {
        if let Some(v) = headers.get(name) {
            out.insert(name.clone(), v.clone());
        }
    }
    let mut rest: Vec<_> = headers.iter().filter(|(n, _)| !own.contains(n)).collect();
    rest.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
    for (name, value) in rest {
        out.append(name.clone(), value.clone());
    }
    out
}

pub(super) fn user_agent() -> HeaderValue {
    HeaderValue::from_static(concat!("walrelay/", env!("CARGO_PKG_VERSION")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_taken_apart() {
        let t = Target::parse("https://[::1]:8443/a/b?c=d").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.path.to_string().as_str()),
            ("::1", 8443, "/a/b?c=d")
        );
        assert_eq!(Target::parse("http://h").unwrap().path.to_string(), "/");
        assert_eq!(Target::parse("https://h").unwrap().port, 443);
    }

    #[test]
    fn a_refused_url_never_shows_its_password() {
        for url in [
            "https://alice:hunter2@h/x",
            "ftp://alice:hunter2@h/x",
            "https://alice:hunter2@/x",
        ] {
            let e = Target::parse(url).expect_err("refused");
            assert!(!e.contains("hunter2") && e.contains("<redacted>"), "{e}");
        }
    }
}
