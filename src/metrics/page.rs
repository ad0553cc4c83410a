//! The operator's page: `GET /` answers a self-contained HTML page
//! (`page.html`: inline CSS and JS, no other asset) that shows every
//! pipeline's state, source, positions, lag and throughput, with charts of
//! the last [`super::history::HISTORY_WINDOW`], refreshing itself from
//! `GET /api/state` (this module's JSON of the process's pipelines and
//! their [`History`]).
//!
//! Owns the page, the answers of both (the JSON's shape is [`mod@state`]'s)
//! and the headers that keep the page harmless: a Content-Security-Policy
//! that allows nothing but the page's own inline script and style and
//! requests to its own origin, and `nosniff`. The
//! page writes every pipeline-provided string (names, error texts) as
//! text, never as markup. It must never show configuration values: the
//! state carries only what `/metrics` and `/readyz` already show.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use hyper::{Response, StatusCode};
use tokio::time::Instant;

use super::history::History;
use super::Process;

pub mod state;

pub use state::{PipelineView, State};

/// The page, built into the binary.
pub(crate) const PAGE: &str = include_str!("page.html");

/// What the page may do: run its inline script and style, fetch from its
/// own origin, show `data:` images; nothing else (no other script, frame,
/// form target or base URL).
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; \
     style-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// `GET /`: the page.
pub(crate) fn page() -> Response<Full<Bytes>> {
    let mut resp = respond(StatusCode::OK, "text/html; charset=utf-8", PAGE.into());
    resp.headers_mut().insert(
        hyper::header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    resp
}

/// `GET /api/state`: [`State`] as JSON.
pub(crate) fn state(process: &Process, history: &History) -> Response<Full<Bytes>> {
    let state = State::of(process, history, Instant::now());
    match serde_json::to_vec(&state) {
        Ok(body) => respond(StatusCode::OK, "application/json", body.into()),
        // Only a non-finite float could fail, and none is ever set.
        Err(e) => respond(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain; charset=utf-8",
            format!("cannot encode the state: {e}\n").into(),
        ),
    }
}

/// A response that is never cached or sniffed.
fn respond(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(body));
    *resp.status_mut() = status;
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_page_is_self_contained_and_writes_data_as_text() {
        // No markup from data: every string the state carries goes in as
        // text (textContent, setAttribute), never through an HTML parser.
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
        ] {
            assert!(!PAGE.contains(sink), "page.html uses {sink}");
        }
        // No asset from anywhere: the SVG namespace is the one URL.
        assert_eq!(
            PAGE.matches("://").count(),
            1,
            "a URL besides the SVG namespace"
        );
        assert!(PAGE.contains("\"http://www.w3.org/2000/svg\""));
        for asset in ["<link", " src=", "@import", "url("] {
            assert!(!PAGE.contains(asset), "page.html loads {asset}");
        }
        // Its own origin only: the state's URL is relative to the page.
        assert!(PAGE.contains("new URL(\"api/state\", document.baseURI)"));
        assert!(PAGE.contains("fetch(STATE_URL, "));
    }

    #[tokio::test]
    async fn serves_the_page_and_the_state_with_their_headers() {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let p = Arc::new(Process::new());
        p.add_pipeline("orders");
        let (addr, handle) = super::super::serve("127.0.0.1:0", Arc::clone(&p), rx)
            .await
            .unwrap();
        // Through the client `walrelay status` uses (test code only: the
        // listener itself never imports a layer above its own).
        let addr = addr.to_string();
        let header = |answer: &crate::status::client::Response, name: &str| {
            answer
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let page = crate::status::client::get(&addr, "/").await.unwrap();
        assert_eq!(page.status, StatusCode::OK);
        assert_eq!(
            header(&page, "content-type").as_deref(),
            Some("text/html; charset=utf-8")
        );
        assert_eq!(
            header(&page, "content-security-policy").as_deref(),
            Some(CONTENT_SECURITY_POLICY)
        );
        assert_eq!(
            header(&page, "x-content-type-options").as_deref(),
            Some("nosniff")
        );
        assert!(page.text().unwrap().starts_with("<!doctype html>"));
        let state = crate::status::client::get(&addr, "/api/state")
            .await
            .unwrap();
        assert_eq!(state.status, StatusCode::OK);
        assert_eq!(
            header(&state, "content-type").as_deref(),
            Some("application/json")
        );
        assert_eq!(
            header(&state, "x-content-type-options").as_deref(),
            Some("nosniff")
        );
        assert_eq!(header(&state, "cache-control").as_deref(), Some("no-store"));
        let v: serde_json::Value = serde_json::from_slice(&state.body).unwrap();
        assert_eq!(v["pipelines"][0]["name"], "orders");
        assert_eq!(v["pipelines"][0]["state"], "starting");
        // The sampler took its first sample when the listener started.
        assert_eq!(v["pipelines"][0]["history"].as_array().unwrap().len(), 1);
        tx.send(true).unwrap();
        handle.await.unwrap();
    }
}
