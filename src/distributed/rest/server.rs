//! The HTTP(S) listeners: hyper 1 over tokio, OpenSSL for HTTPS, and what
//! Jetty and Jersey do around Connect's resources: CORS (Jetty's
//! `CrossOriginHandler`), the basic auth filter (after matching, so an
//! unknown path is 404 before it is 401), 404/405/406/415 with Jersey's
//! bodies, HEAD and OPTIONS.
//!
//! Owns the accept loops and turning [`Reply`]s into HTTP responses.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use openssl::ssl::{Ssl, SslAcceptor};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{debug, info};

use crate::distributed::api::Herder;

use super::auth::{BasicAuth, Verdict, UNAUTHORIZED_BODY};
use super::config::{Cors, RestConfig, Scheme};
use super::handlers::{dispatch, Call, Ctx, KeyOrders, Reply};
use super::routes::{query_params, route};

/// The largest request body read (Connect's configs are small).
const MAX_BODY: usize = 16 * 1024 * 1024;

/// CORS with its origin patterns compiled.
#[derive(Debug)]
struct CorsRules {
    /// `*` was among the origins.
    any: bool,
    /// The other origins, as whole-match case-insensitive regexes.
    patterns: Vec<regex::Regex>,
    /// `Access-Control-Allow-Methods`.
    methods: String,
}

impl CorsRules {
    /// Compiles `cors`' patterns (Java regexes; Rust's syntax agrees for
    /// origins).
    fn new(cors: &Cors) -> io::Result<CorsRules> {
        let mut patterns = Vec::new();
        let mut any = false;
        for o in &cors.origins {
            if o == "*" {
                any = true;
                break;
            }
            let re = regex::Regex::new(&format!("(?i)^(?:{o})$")).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("access.control.allow.origin: {e}"),
                )
            })?;
            patterns.push(re);
        }
        Ok(CorsRules {
            any,
            patterns,
            methods: cors.methods.join(","),
        })
    }

    /// Jetty's headers for a request with these headers.
    fn headers(&self, method: &Method, req: &HeaderMap) -> Vec<(&'static str, String)> {
        let mut out = vec![("Vary", "Origin".to_owned())];
        let Some(origin) = req.get("origin").and_then(|v| v.to_str().ok()) else {
            return out;
        };
        let matches = self.any
            || origin
                .split(' ')
                .map(str::trim)
                .filter(|o| !o.is_empty())
                .any(|o| self.patterns.iter().any(|p| p.is_match(o)));
        if !matches {
            return out;
        }
        out.push(("Access-Control-Allow-Origin", origin.to_owned()));
        if method == Method::OPTIONS && req.contains_key("access-control-request-method") {
            if !self.methods.is_empty() {
                out.push(("Access-Control-Allow-Methods", self.methods.clone()));
            }
            out.push(("Access-Control-Allow-Headers", "Content-Type".into()));
            out.push(("Access-Control-Max-Age", "60".into()));
        }
        out
    }
}

/// Everything a connection needs.
struct Shared<H> {
    /// The herder and the handlers' state.
    ctx: Ctx<H>,
    /// CORS, when configured.
    cors: Option<CorsRules>,
    /// Basic auth, when configured.
    auth: Option<BasicAuth>,
}

/// Whether `Accept` admits `application/json`.
fn accepts_json(headers: &HeaderMap) -> bool {
    let values: Vec<&str> = headers
        .get_all("accept")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    if values.is_empty() {
        return true;
    }
    values.iter().flat_map(|v| v.split(',')).any(|range| {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let q_zero = parts.any(|p| {
            p.trim()
                .strip_prefix("q=")
                .and_then(|q| q.trim().parse::<f32>().ok())
                .is_some_and(|q| q <= 0.0)
        });
        !q_zero
            && matches!(
                media.as_str(),
                "*/*" | "application/*" | "application/json" | "*"
            )
    })
}

/// Whether the request's Content-Type (if any) is JSON.
fn json_content(headers: &HeaderMap) -> bool {
    match headers.get("content-type").and_then(|v| v.to_str().ok()) {
        None => true,
        Some(ct) => {
            let media = ct
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            media == "application/json" || media == "*/*" || media == "application/*"
        }
    }
}

/// The reply to one request, before CORS.
async fn reply<H: Herder>(shared: &Shared<H>, req: Request<Incoming>, scheme: Scheme) -> Reply {
    let (parts, body) = req.into_parts();
    let Some(route) = route(parts.uri.path()) else {
        return Reply::jersey(404, "Not Found");
    };
    let method = if parts.method == Method::HEAD {
        Method::GET
    } else {
        parts.method.clone()
    };
    if method == Method::OPTIONS {
        // Jersey's own OPTIONS answer (WADL disabled): the methods, as text.
        let allow = route.allow_header();
        return Reply {
            body: Some(allow.replace(',', ", ")),
            content_type: Some("text/plain"),
            allow: Some(allow),
            ..Reply::empty(200)
        };
    }
    if !route.methods().contains(&method) {
        return Reply::jersey(405, "Method Not Allowed");
    }
    if route.takes_body(&method) && !json_content(&parts.headers) {
        return Reply::jersey(415, "Unsupported Media Type");
    }
    if !accepts_json(&parts.headers) {
        return Reply::jersey(406, "Not Acceptable");
    }
    if let Some(auth) = &shared.auth {
        if !route.auth_exempt(&method) {
            match auth.check(
                parts
                    .headers
                    .get("authorization")
                    .map(HeaderValue::as_bytes),
            ) {
                Verdict::Allowed => {}
                Verdict::Denied => {
                    return Reply::json(401, UNAUTHORIZED_BODY.into());
                }
                Verdict::Failed(e) => return Reply::error(&e),
            }
        }
    }
    let body = match Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return Reply::jersey(413, "Payload Too Large"),
    };
    let host = parts
        .headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    let call = Call {
        method: &method,
        route,
        params: query_params(parts.uri.query()),
        body: &body,
        base: format!("{}://{host}", scheme.as_str()),
    };
    dispatch(&shared.ctx, &call).await
}

/// Answers one request.
async fn handle<H: Herder>(
    shared: Arc<Shared<H>>,
    req: Request<Incoming>,
    scheme: Scheme,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let cors = shared
        .cors
        .as_ref()
        .map(|c| c.headers(req.method(), req.headers()))
        .unwrap_or_default();
    let r = reply(&shared, req, scheme).await;
    let mut b = Response::builder().status(r.status);
    if let (Some(_), Some(ct)) = (&r.body, r.content_type) {
        b = b.header("Content-Type", ct);
    }
    if let Some(l) = &r.location {
        b = b.header("Location", l);
    }
    if let Some(a) = &r.allow {
        b = b.header("Allow", a);
    }
    for (k, v) in cors {
        b = b.header(k, v);
    }
    let body = Full::new(Bytes::from(r.body.unwrap_or_default()));
    Ok(b.body(body.clone()).unwrap_or_else(|_| {
        let mut resp = Response::new(Full::new(Bytes::new()));
        *resp.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
        resp
    }))
}

/// Serves one connection (plain or TLS).
async fn serve_connection<H: Herder, S>(shared: Arc<Shared<H>>, io: S, scheme: Scheme)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(Duration::from_secs(30))
        .title_case_headers(true)
        .serve_connection(
            TokioIo::new(io),
            service_fn(move |req| handle(Arc::clone(&shared), req, scheme)),
        );
    if let Err(e) = conn.await {
        debug!(error = %e, "REST connection");
    }
}

/// Accepts on `listener` until `shutdown` changes.
fn spawn_accept_loop<H: Herder>(
    listener: TcpListener,
    shared: Arc<Shared<H>>,
    tls: Option<Arc<SslAcceptor>>,
    mut shutdown: watch::Receiver<bool>,
) {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                biased;
                _ = shutdown.changed() => break,
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    let shared = Arc::clone(&shared);
                    let tls = tls.clone();
                    tokio::spawn(async move {
                        let Some(acceptor) = tls else {
                            return serve_connection(shared, stream, Scheme::Http).await;
                        };
                        let Ok(ssl) = Ssl::new(acceptor.context()) else { return };
                        let Ok(mut s) = tokio_openssl::SslStream::new(ssl, stream) else { return };
                        if let Err(e) = Pin::new(&mut s).accept().await {
                            debug!(error = %e, "REST TLS handshake");
                            return;
                        }
                        serve_connection(shared, s, Scheme::Https).await;
                    });
                }
            }
        }
    });
}

/// Serves Connect's REST API over `herder` on every listener of `config`
/// until `shutdown` changes; returns the bound addresses, in the order of
/// `config.listeners`.
pub(crate) async fn serve<H: Herder>(
    config: RestConfig,
    herder: Arc<H>,
    shutdown: watch::Receiver<bool>,
) -> io::Result<Vec<SocketAddr>> {
    let invalid = |e: super::config::RestConfigError| {
        io::Error::new(io::ErrorKind::InvalidInput, e.to_string())
    };
    let tls = match &config.tls {
        Some(t) if config.listeners.iter().any(|l| l.scheme == Scheme::Https) => {
            Some(Arc::new(super::tls::acceptor(t).map_err(invalid)?))
        }
        None if config.listeners.iter().any(|l| l.scheme == Scheme::Https) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "listeners: an https listener needs ssl.keystore.* settings",
            ))
        }
        _ => None,
    };
    let shared = Arc::new(Shared {
        ctx: Ctx {
            herder,
            topic_tracking: config.topic_tracking,
            topic_tracking_reset: config.topic_tracking_reset,
            log_level: config.log_level.clone(),
            orders: KeyOrders::default(),
        },
        cors: config.cors.as_ref().map(CorsRules::new).transpose()?,
        auth: config.basic_auth.clone(),
    });
    let mut bound = Vec::with_capacity(config.listeners.len());
    let mut listeners = Vec::with_capacity(config.listeners.len());
    for l in &config.listeners {
        let listener = TcpListener::bind(l.bind_addr()).await?;
        let addr = listener.local_addr()?;
        info!(listen = %addr, scheme = l.scheme.as_str(), "Connect REST API");
        bound.push(addr);
        listeners.push((listener, l.scheme));
    }
    for (listener, scheme) in listeners {
        let tls = if scheme == Scheme::Https {
            tls.clone()
        } else {
            None
        };
        spawn_accept_loop(listener, Arc::clone(&shared), tls, shutdown.clone());
    }
    Ok(bound)
}
