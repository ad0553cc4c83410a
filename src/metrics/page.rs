//! The operator's page: `GET /` answers a self-contained HTML page
//! (`page.html`: inline CSS and JS, no other asset) that shows every
//! pipeline's state, source, positions, lag and throughput, with charts of
//! the last [`super::history::HISTORY_WINDOW`], refreshing itself from
//! `GET /api/state` (this module's JSON of the process's pipelines and
//! their [`History`]).
//!
//! Owns the JSON's shape and the headers that keep the page harmless: a
//! Content-Security-Policy that allows nothing but the page's own inline
//! script and style and requests to its own origin, and `nosniff`. The
//! page writes every pipeline-provided string (names, error texts) as
//! text, never as markup. It must never show configuration values: the
//! state carries only what `/metrics` and `/readyz` already show.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use hyper::{Response, StatusCode};
use serde::Serialize;
use tokio::time::Instant;

use super::history::{self, History, Reading, SampleView};
use super::{PipelineState, Process};

/// The page, built into the binary.
pub const PAGE: &str = include_str!("page.html");

/// What the page may do: run its inline script and style, fetch from its
/// own origin, show `data:` images; nothing else (no other script, frame,
/// form target or base URL).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; \
     style-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// The answer of `GET /api/state`.
#[derive(Debug, Serialize)]
pub struct State {
    /// walrelay's version.
    pub version: &'static str,
    /// Every pipeline ready (`/readyz` would answer 200).
    pub ready: bool,
    /// Seconds between two history samples.
    pub sample_interval_seconds: f64,
    /// Seconds of history kept.
    pub window_seconds: f64,
    /// The pipelines, in the order the configuration gives them.
    pub pipelines: Vec<PipelineView>,
}

/// One pipeline now, and its history.
#[derive(Debug, Serialize)]
pub struct PipelineView {
    /// Its name (user data: the page writes it as text).
    pub name: String,
    /// `starting`, `running`, `failed` or `stopped`.
    pub state: &'static str,
    /// The error chain that stopped it, when `failed`.
    pub error: Option<String>,
    /// Streaming (or holding a shard), Kafka reachable, lag below critical.
    pub ready: bool,
    /// `wal` or `poll`; `null` until the pipeline said.
    pub source: Option<&'static str>,
    /// Events produced, over every topic.
    pub events_total: u64,
    /// Events per second over the last sample interval; `null` before two
    /// samples.
    pub events_per_second: Option<f64>,
    /// Events handed to Kafka and not yet acknowledged.
    pub in_flight: i64,
    /// The highest WAL position received, `X/Y`; `null` for polling.
    pub received_lsn: Option<String>,
    /// The position confirmed to the slot, `X/Y`; `null` for polling.
    pub confirmed_lsn: Option<String>,
    /// `pg_current_wal_lsn() - confirmed_flush_lsn`; `null` for polling.
    pub confirmed_lag_bytes: Option<i64>,
    /// `pg_current_wal_lsn() - restart_lsn`; `null` for polling.
    pub retained_wal_bytes: Option<i64>,
    /// Now minus the commit time of the oldest unconfirmed event; `null`
    /// for polling.
    pub replication_lag_seconds: Option<f64>,
    /// Unpublished rows in the outbox table; `null` for the WAL.
    pub unpublished_rows: Option<i64>,
    /// Age of the oldest unpublished row; `null` for the WAL.
    pub oldest_unpublished_age_seconds: Option<f64>,
    /// Samples, oldest first, over the last window.
    pub history: Vec<SampleView>,
}

impl State {
    /// The state of `process` with `history`, as of `now`.
    pub fn of(process: &Process, history: &History, now: Instant) -> State {
        let pipelines = process
            .pipelines()
            .iter()
            .map(|m| {
                let samples = history.samples(m.name());
                let reading = Reading::of(m);
                let source = history::source_kind(m);
                let wal = source != Some("poll");
                let poll = source == Some("poll");
                let (state, error) = match m.state() {
                    PipelineState::Failed(e) => ("failed", Some(e)),
                    s => (s.as_str(), None),
                };
                PipelineView {
                    name: m.name().to_owned(),
                    state,
                    error,
                    ready: m.is_ready(),
                    source,
                    events_total: reading.events_total,
                    events_per_second: samples.last().and_then(|s| s.events_per_second),
                    in_flight: reading.in_flight,
                    received_lsn: wal.then(|| reading.received_lsn.to_string()),
                    confirmed_lsn: wal.then(|| reading.confirmed_lsn.to_string()),
                    confirmed_lag_bytes: wal.then_some(reading.confirmed_lag_bytes),
                    retained_wal_bytes: wal.then_some(reading.retained_wal_bytes),
                    replication_lag_seconds: wal.then_some(reading.replication_lag_seconds),
                    unpublished_rows: poll.then_some(reading.unpublished_rows),
                    oldest_unpublished_age_seconds: poll
                        .then_some(reading.oldest_unpublished_age_seconds),
                    history: samples.iter().map(|s| s.view(now)).collect(),
                }
            })
            .collect();
        State {
            version: env!("CARGO_PKG_VERSION"),
            ready: process.not_ready().is_none(),
            sample_interval_seconds: history.interval().as_secs_f64(),
            window_seconds: history.window().as_secs_f64(),
            pipelines,
        }
    }
}

/// `GET /`: the page.
pub fn page() -> Response<Full<Bytes>> {
    let mut resp = respond(StatusCode::OK, "text/html; charset=utf-8", PAGE.into());
    resp.headers_mut().insert(
        hyper::header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    resp
}

/// `GET /api/state`: [`State`] as JSON.
pub fn state(process: &Process, history: &History) -> Response<Full<Bytes>> {
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
    use crate::metrics::{KindLabel, TopicLabel};
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn the_state_has_every_pipeline_its_values_and_its_history() {
        let p = Process::new();
        let wal = p.add_pipeline("orders");
        let poll = p.add_pipeline("billing <i>&</i>");
        wal.source_info
            .get_or_create(&KindLabel { kind: "wal" })
            .set(1);
        poll.source_info
            .get_or_create(&KindLabel { kind: "poll" })
            .set(1);
        for m in [&wal, &poll] {
            m.streaming.store(true, Ordering::Relaxed);
            m.kafka_reachable.store(true, Ordering::Relaxed);
        }
        let h = History::new(Duration::from_secs(5), Duration::from_secs(600));
        let t0 = Instant::now();
        h.sample(&p, t0, 1_000);
        wal.events
            .get_or_create(&TopicLabel { topic: "a".into() })
            .inc_by(30);
        wal.events
            .get_or_create(&TopicLabel { topic: "b".into() })
            .inc_by(20);
        wal.received_lsn.set(0x16B_3748);
        wal.confirmed_lsn.set(0x16B_3700);
        wal.slot_confirmed_lag.set(72);
        wal.slot_retained_wal.set(4096);
        wal.replication_lag.set(0.25);
        poll.poll_unpublished.set(17);
        poll.poll_oldest_unpublished_age.set(3.5);
        h.sample(&p, t0 + Duration::from_secs(5), 6_000);
        poll.set_ended(Some("the outbox table \"public.outbox\" is gone".into()));

        let state = State::of(&p, &h, t0 + Duration::from_secs(7));
        let v = serde_json::to_value(&state).unwrap();
        assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(v["ready"], false);
        assert_eq!(v["sample_interval_seconds"], 5.0);
        assert_eq!(v["window_seconds"], 600.0);
        let pipelines = v["pipelines"].as_array().unwrap();
        assert_eq!(pipelines.len(), 2);

        let o = &pipelines[0];
        assert_eq!(o["name"], "orders");
        assert_eq!(o["state"], "running");
        assert_eq!(o["error"], serde_json::Value::Null);
        assert_eq!(o["ready"], true);
        assert_eq!(o["source"], "wal");
        assert_eq!(o["events_total"], 50);
        assert_eq!(o["events_per_second"], 10.0);
        assert_eq!(o["received_lsn"], "0/16B3748");
        assert_eq!(o["confirmed_lsn"], "0/16B3700");
        assert_eq!(o["confirmed_lag_bytes"], 72);
        assert_eq!(o["retained_wal_bytes"], 4096);
        assert_eq!(o["replication_lag_seconds"], 0.25);
        assert_eq!(o["unpublished_rows"], serde_json::Value::Null);
        let hist = o["history"].as_array().unwrap();
        assert_eq!(hist.len(), 2);
        assert_eq!(hist[0]["age_seconds"], 7.0);
        assert_eq!(hist[0]["unix_ms"], 1_000);
        assert_eq!(hist[0]["events_per_second"], serde_json::Value::Null);
        assert_eq!(hist[1]["age_seconds"], 2.0);
        assert_eq!(hist[1]["events_total"], 50);
        assert_eq!(hist[1]["events_per_second"], 10.0);
        assert_eq!(hist[1]["confirmed_lag_bytes"], 72);
        assert_eq!(hist[1]["retained_wal_bytes"], 4096);
        assert_eq!(hist[1]["replication_lag_seconds"], 0.25);
        assert_eq!(hist[1]["received_lsn"], "0/16B3748");
        assert_eq!(hist[1]["confirmed_lsn"], "0/16B3700");

        let b = &pipelines[1];
        assert_eq!(b["name"], "billing <i>&</i>");
        assert_eq!(b["state"], "failed");
        assert_eq!(b["error"], "the outbox table \"public.outbox\" is gone");
        assert_eq!(b["ready"], false);
        assert_eq!(b["source"], "poll");
        assert_eq!(b["received_lsn"], serde_json::Value::Null);
        assert_eq!(b["confirmed_lag_bytes"], serde_json::Value::Null);
        assert_eq!(b["unpublished_rows"], 17);
        assert_eq!(b["oldest_unpublished_age_seconds"], 3.5);
        assert_eq!(b["history"][1]["unpublished_rows"], 17);
        assert_eq!(b["events_per_second"], 0.0);
    }

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
        assert!(PAGE.contains("fetch(\"api/state\""));
    }

    #[tokio::test]
    async fn serves_the_page_and_the_state_with_their_headers() {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let p = Arc::new(Process::new());
        p.add_pipeline("orders");
        let (addr, handle) = super::super::serve("127.0.0.1:0", Arc::clone(&p), rx)
            .await
            .unwrap();
        let get = |path: &'static str| async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            s.write_all(
                format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
            )
            .await
            .unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).await.unwrap();
            out.to_ascii_lowercase()
        };
        let page = get("/").await;
        assert!(page.starts_with("http/1.1 200"), "{page}");
        assert!(page.contains("content-type: text/html; charset=utf-8\r\n"));
        assert!(page.contains(&format!(
            "content-security-policy: {}\r\n",
            CONTENT_SECURITY_POLICY.to_ascii_lowercase()
        )));
        assert!(page.contains("x-content-type-options: nosniff\r\n"));
        assert!(page.contains("<!doctype html>"));
        let state = get("/api/state").await;
        assert!(state.starts_with("http/1.1 200"), "{state}");
        assert!(state.contains("content-type: application/json\r\n"));
        assert!(state.contains("x-content-type-options: nosniff\r\n"));
        assert!(state.contains("cache-control: no-store\r\n"));
        let body = state.split("\r\n\r\n").nth(1).unwrap();
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["pipelines"][0]["name"], "orders");
        assert_eq!(v["pipelines"][0]["state"], "starting");
        // The sampler took its first sample when the listener started.
        assert_eq!(v["pipelines"][0]["history"].as_array().unwrap().len(), 1);
        tx.send(true).unwrap();
        handle.await.unwrap();
    }
}
