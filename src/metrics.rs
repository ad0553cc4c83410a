//! Prometheus metrics and the health endpoints.
//!
//! Owns the registries: one [`Metrics`] value per pipeline (made by the
//! process runner and handed to every stage of that pipeline: no stage
//! reaches it through a global), every sample of which carries the
//! pipeline's name as the `pipeline` label, and the [`Process`] that holds
//! them all with the process's own metrics and renders them as one
//! exposition; the small HTTP listener that serves `/metrics`, `/healthz`,
//! `/readyz` and the operator's page (`/` and `/api/state`, in [`page`],
//! from the samples of [`history`]), in plain HTTP or, with a web
//! configuration file, with TLS, HTTP/2 and basic auth ([`web`]).
//!
//! Each metric family is declared once, in the group of the stage that
//! emits it (`process.rs`, `wal.rs`, `poll.rs`, `sink.rs`,
//! `exactly_once.rs`, `lag.rs`): its name, help text, type, labels and
//! buckets together, from which `declare_metrics!` (`declare.rs`) makes
//! the `pub const` of the name (the text format adds `_total` to
//! counters), the field of [`Metrics`] and its registration. The groups
//! live here, below the stages, because [`Metrics`] is one struct that
//! every stage, the operator's page and `walrelay status` read.
//!
//! Pipeline stages update metrics per batch or per status interval, never
//! per event on the hot path (the commit-to-ack histogram is the one
//! per-delivery update). Labels are of low cardinality: topic, reason,
//! error code, slot status; never an aggregate id, key or payload. Nothing
//! here may block the pipeline.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use serde::Deserialize;
use std::sync::atomic::AtomicU64;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{debug, info};

// What the declarations of the groups name: they are read here.
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::exponential_buckets;
use sink::stage_buckets;

pub(crate) mod history;
pub mod page;
pub mod web;

// `declare_metrics!`, then the groups of declarations, one per stage.
#[macro_use]
mod declare;
#[macro_use]
mod exactly_once;
#[macro_use]
mod lag;
#[macro_use]
mod poll;
#[macro_use]
mod process;
#[macro_use]
mod sink;
#[macro_use]
mod wal;

pub(crate) use sink::Stages;

/// The pipeline label every pipeline metric carries.
pub(crate) const PIPELINE_LABEL: &str = "pipeline";

/// The pipeline name of a configuration that names none (the native TOML
/// without `name`).
pub(crate) const DEFAULT_PIPELINE: &str = "default";

/// Default listen address: loopback only.
pub(crate) const DEFAULT_LISTEN: &str = "127.0.0.1:9187";

/// Metrics listener settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MetricsConfig {
    /// Address of the `/metrics`, `/healthz`, `/readyz` and operator's page
    /// (`/`, `/api/state`) listener; empty disables it. Loopback by
    /// default: expose it deliberately.
    #[serde(default = "default_listen")]
    pub(crate) listen: String,
    /// A web configuration file in the Prometheus exporter-toolkit's
    /// format, the same file exporters take as `--web.config.file`: TLS
    /// (`tls_server_config`, with client certificates), HTTP/2 and extra
    /// headers (`http_server_config`), `basic_auth_users` (bcrypt hashes)
    /// and `rate_limit`. Unset: plain HTTP, no authentication. Read once at
    /// start; an error in it (or in a file it names) refuses the start.
    #[serde(default)]
    pub(crate) web_config_file: Option<std::path::PathBuf>,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            listen: default_listen(),
            web_config_file: None,
        }
    }
}

impl MetricsConfig {
    /// The listener's security: the web configuration file's, or plain
    /// HTTP for anyone without one.
    pub(crate) fn web(&self) -> Result<web::Web, web::WebConfigError> {
        match &self.web_config_file {
            Some(path) => web::Web::load(path),
            None => Ok(web::Web::default()),
        }
    }
}

fn default_listen() -> String {
    DEFAULT_LISTEN.into()
}

/// Label set `{topic}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct TopicLabel {
    /// Kafka topic.
    pub(crate) topic: String,
}

/// Observes a duration given in microseconds (two wall-clock readings
/// subtracted): a negative one, from a clock step or another host's clock
/// running ahead, counts as 0 rather than vanishing.
pub(crate) fn observe_micros(histogram: &Histogram, micros: i64) {
    histogram.observe(micros.max(0) as f64 / 1e6);
}

/// Label set `{broker}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct BrokerLabel {
    /// The broker the pipeline publishes to (`kafka`, `nats-jetstream`, ...).
    pub(crate) broker: &'static str,
}

/// Label set `{reason}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReasonLabel {
    /// Why the change was not relayed.
    pub(crate) reason: &'static str,
}

/// Label set `{code}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct CodeLabel {
    /// librdkafka error code name.
    pub(crate) code: String,
}

/// Label set `{status}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct StatusLabel {
    /// `reserved`, `extended`, `unreserved`, `lost`.
    pub(crate) status: String,
}

/// Label set `{kind}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct KindLabel {
    /// `retained_wal` or `lag_seconds`.
    pub(crate) kind: &'static str,
}

/// Label set `{result}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ResultLabel {
    /// `committed` or `aborted`.
    pub(crate) result: &'static str,
}

/// Label set `{version}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct VersionLabel {
    /// Crate version.
    pub(crate) version: &'static str,
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// Where a pipeline is in its life, as `/readyz`, `walrelay status` and
/// the operator's page show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PipelineState {
    /// Connecting, waiting for its slot or lock, or reconnecting.
    Starting,
    /// Streaming (WAL) or holding a shard (polling).
    Running,
    /// Stopped on a fatal error; the text is the error chain.
    Failed(String),
    /// Stopped at shutdown.
    Stopped,
}

declare_metrics! {
    /// Every metric of one pipeline: a field per family that the groups
    /// below declare (`metrics/process.rs`, `wal.rs`, `poll.rs`, `sink.rs`,
    /// `exactly_once.rs`, `lag.rs`, each the families of one stage),
    /// exposed in that order, and what the pipeline's readiness and state
    /// are made of.
    pub(crate) struct Metrics {
        registry: Registry,
        name: String,
        stopped: std::sync::Mutex<Option<PipelineState>>,
        /// Streaming from the slot right now (or, polling, holding a shard).
        pub(crate) streaming: AtomicBool,
        /// Kafka answered the last metadata request.
        pub(crate) kafka_reachable: AtomicBool,
        /// A lag threshold is at critical.
        pub(crate) lag_critical: AtomicBool,
    }
    with
        pipeline_metrics,
        wal_metrics,
        poll_metrics,
        sink_metrics,
        exactly_once_metrics,
        lag_metrics,
}

declare_metrics! {
    /// The process's own families, without a `pipeline` label.
    struct ProcessMetrics {}
    with process_metrics
}

impl Metrics {
    /// A fresh registry for a pipeline named `default`, every metric at
    /// zero (tests, and tools that look at one pipeline).
    pub(crate) fn new() -> Metrics {
        Metrics::for_pipeline(DEFAULT_PIPELINE)
    }

    /// A fresh registry for the pipeline `name`, every metric at zero and
    /// every sample labelled `pipeline="<name>"`. The process runner makes
    /// one per pipeline and hands it to that pipeline's stages.
    pub(crate) fn for_pipeline(name: &str) -> Metrics {
        let mut registry = Registry::with_labels(
            [(
                std::borrow::Cow::Borrowed(PIPELINE_LABEL),
                std::borrow::Cow::Owned(name.to_owned()),
            )]
            .into_iter(),
        );
        let m = Metrics::new_registered(&mut registry);
        m.pipeline_up.set(1);
        Metrics {
            registry,
            name: name.to_owned(),
            ..m
        }
    }

    /// Renders this pipeline's registry in the OpenMetrics text format.
    pub(crate) fn render(&self) -> String {
        self.update_ready();
        let mut out = String::with_capacity(8 * 1024);
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }

    /// The pipeline's name (its `pipeline` label).
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Whether the pipeline is ready: streaming, Kafka reachable, lag
    /// below critical.
    pub(crate) fn is_ready(&self) -> bool {
        self.streaming.load(Ordering::Relaxed)
            && self.kafka_reachable.load(Ordering::Relaxed)
            && !self.lag_critical.load(Ordering::Relaxed)
    }

    /// Where the pipeline is: stopped or failed once it ended, else
    /// running while it streams (or holds a shard), else starting.
    pub(crate) fn state(&self) -> PipelineState {
        if let Some(end) = self.stopped.lock().expect("never poisoned").clone() {
            return end;
        }
        if self.streaming.load(Ordering::Relaxed) {
            PipelineState::Running
        } else {
            PipelineState::Starting
        }
    }

    /// The topics the pipeline has produced events to.
    pub(crate) fn topics(&self) -> Vec<String> {
        history::series(self.events.clone())
            .into_iter()
            .filter(|s| s.value > 0.0)
            .filter_map(|s| s.label)
            .collect()
    }

    /// Records how the pipeline ended: `Some(error)` for a fatal error
    /// (then `walrelay_pipeline_up` drops to 0), `None` at shutdown.
    pub(crate) fn set_ended(&self, error: Option<String>) {
        self.streaming.store(false, Ordering::Relaxed);
        let state = match error {
            Some(e) => {
                self.pipeline_up.set(0);
                PipelineState::Failed(e)
            }
            None => PipelineState::Stopped,
        };
        *self.stopped.lock().expect("never poisoned") = Some(state);
    }

    /// Why the pipeline is not ready, for `/readyz`; `None` when it is.
    pub(crate) fn not_ready_reason(&self) -> Option<String> {
        match self.state() {
            PipelineState::Failed(e) => Some(format!("failed: {e}")),
            PipelineState::Stopped => Some("stopped".into()),
            _ if self.is_ready() => None,
            _ => Some(format!(
                "streaming={} kafka_reachable={} lag_critical={}",
                self.streaming.load(Ordering::Relaxed),
                self.kafka_reachable.load(Ordering::Relaxed),
                self.lag_critical.load(Ordering::Relaxed)
            )),
        }
    }

    fn update_ready(&self) {
        self.ready.set(i64::from(self.is_ready()));
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// The process: its own metrics (`walrelay_up`, `walrelay_build_info`)
/// and every pipeline's [`Metrics`], rendered as one exposition and served
/// by [`serve`]. Pipelines are added at start and never removed (a failed
/// pipeline stays, with its state, until the process ends).
pub(crate) struct Process {
    registry: Registry,
    pipelines: std::sync::RwLock<Vec<Arc<Metrics>>>,
    /// The group view of a `connect-distributed` worker.
    group: std::sync::RwLock<Option<GroupViewFn>>,
}

/// What makes a distributed worker's [`page::state::GroupView`].
pub(crate) type GroupViewFn = Box<dyn Fn() -> page::state::GroupView + Send + Sync>;

impl Process {
    /// A process with no pipeline yet.
    pub(crate) fn new() -> Process {
        let mut registry = Registry::default();
        let own = ProcessMetrics::new_registered(&mut registry);
        own.build_info
            .get_or_create(&VersionLabel {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        own.up.set(1);
        Process {
            registry,
            pipelines: std::sync::RwLock::new(Vec::new()),
            group: std::sync::RwLock::new(None),
        }
    }

    /// Adds the pipeline `name` and returns its metrics.
    pub(crate) fn add_pipeline(&self, name: &str) -> Arc<Metrics> {
        let m = Arc::new(Metrics::for_pipeline(name));
        self.pipelines
            .write()
            .expect("never poisoned")
            .push(Arc::clone(&m));
        m
    }

    /// Makes the operator's page and `walrelay status` show the group
    /// `view` describes.
    pub(crate) fn set_group_view(&self, view: GroupViewFn) {
        *self.group.write().expect("never poisoned") = Some(view);
    }

    /// The group's view, for a distributed worker.
    pub(crate) fn group_view(&self) -> Option<page::state::GroupView> {
        self.group
            .read()
            .expect("never poisoned")
            .as_ref()
            .map(|f| f())
    }

    /// Removes a pipeline's metrics (a connector deleted from a
    /// distributed group).
    pub(crate) fn remove_pipeline(&self, metrics: &Arc<Metrics>) {
        self.pipelines
            .write()
            .expect("never poisoned")
            .retain(|m| !Arc::ptr_eq(m, metrics));
    }

    /// Every pipeline's metrics, in the order they were added.
    pub(crate) fn pipelines(&self) -> Vec<Arc<Metrics>> {
        self.pipelines.read().expect("never poisoned").clone()
    }

    /// Renders the process's and every pipeline's metrics as one
    /// OpenMetrics exposition: each metric family once, with one series
    /// per pipeline.
    pub(crate) fn render(&self) -> String {
        let mut parts = Vec::new();
        let mut own = String::with_capacity(512);
        prometheus_client::encoding::text::encode(&mut own, &self.registry)
            .expect("writing to a String cannot fail");
        parts.push(own);
        for m in self.pipelines() {
            parts.push(m.render());
        }
        merge_expositions(&parts)
    }

    /// `None` when every pipeline is ready, else one line per pipeline
    /// that is not, naming it and why.
    pub(crate) fn not_ready(&self) -> Option<String> {
        let pipelines = self.pipelines();
        if pipelines.is_empty() {
            return Some("no pipeline started yet\n".into());
        }
        let mut why = String::new();
        for m in pipelines {
            if let Some(reason) = m.not_ready_reason() {
                why.push_str(&format!("pipeline {}: {reason}\n", m.name()));
            }
        }
        (!why.is_empty()).then_some(why)
    }
}

impl Default for Process {
    fn default() -> Self {
        Process::new()
    }
}

/// Joins OpenMetrics texts so that each family appears once: a family's
/// descriptor (`# HELP`, `# TYPE`, `# UNIT`) from its first text, then its
/// samples from every text in order. prometheus-client writes one
/// descriptor per registry, and a registry per pipeline is what gives every
/// sample its `pipeline` label; the exposition format needs each family's
/// samples together under one descriptor.
fn merge_expositions(parts: &[String]) -> String {
    // Family name -> (descriptor lines, sample lines), in first-seen order.
    let mut families: Vec<(Vec<&str>, Vec<&str>)> = Vec::new();
    let mut index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for part in parts {
        let mut new_here = std::collections::HashSet::new();
        let mut current: Option<usize> = None;
        for line in part.lines() {
            if line == "# EOF" || line.is_empty() {
                continue;
            }
            let Some(rest) = line.strip_prefix("# ") else {
                match current {
                    Some(i) => families[i].1.push(line),
                    // prometheus-client never writes a sample before its
                    // descriptor; keep one anyway rather than drop it.
                    None => families.push((Vec::new(), vec![line])),
                }
                continue;
            };
            let name = rest.split(' ').nth(1).unwrap_or("");
            let i = *index.entry(name).or_insert_with(|| {
                families.push((Vec::new(), Vec::new()));
                new_here.insert(name);
                families.len() - 1
            });
            if new_here.contains(name) {
                families[i].0.push(line);
            }
            current = Some(i);
        }
    }
    let mut out = String::with_capacity(parts.iter().map(String::len).sum());
    for (descriptor, samples) in &families {
        for line in descriptor.iter().chain(samples) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push_str("# EOF\n");
    out
}

/// Serves `/metrics`, `/healthz`, `/readyz`, the operator's page (`/`) and
/// its data (`/api/state`) on `addr` in plain HTTP, to anyone, until
/// `shutdown` changes (see [`serve_with`]). The tests' listener: every
/// command goes through [`serve_with`] and the configured web file.
#[cfg(test)]
pub(crate) async fn serve(
    addr: &str,
    process: Arc<Process>,
    shutdown: watch::Receiver<bool>,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    serve_with(addr, Arc::new(web::Web::default()), process, shutdown).await
}

/// Serves the listener's pages on `addr` as `web` says (TLS, HTTP/2,
/// basic auth, headers) until `shutdown` changes. Returns the bound
/// address (useful with port 0).
pub(crate) async fn serve_with(
    addr: &str,
    web: Arc<web::Web>,
    process: Arc<Process>,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    info!(listen = %local, tls = web.acceptor().is_some(), basic_auth = web.has_basic_auth(),
        "metrics and health endpoints");
    let history = Arc::new(history::History::new(
        history::SAMPLE_INTERVAL,
        history::HISTORY_WINDOW,
    ));
    history::start(Arc::clone(&history), Arc::clone(&process), shutdown.clone());
    let handle = tokio::spawn(async move {
        loop {
            tokio::select! {
                biased;
                _ = shutdown.changed() => break,
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    let site = Site {
                        process: Arc::clone(&process),
                        history: Arc::clone(&history),
                        web: Arc::clone(&web),
                    };
                    tokio::spawn(connection(stream, site));
                }
            }
        }
    });
    Ok((local, handle))
}

/// What every request of the listener reads.
#[derive(Clone)]
struct Site {
    process: Arc<Process>,
    history: Arc<history::History>,
    web: Arc<web::Web>,
}

/// Bound on reading a request's headers, and on a TLS handshake.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves one accepted connection: plain HTTP/1.1, or TLS and then
/// HTTP/2 when ALPN chose `h2`, HTTP/1.1 otherwise.
async fn connection(stream: tokio::net::TcpStream, site: Site) {
    let web = Arc::clone(&site.web);
    let Some(acceptor) = web.acceptor() else {
        return http1(stream, site).await;
    };
    let Ok(ssl) = openssl::ssl::Ssl::new(acceptor.context()) else {
        return;
    };
    let Ok(mut tls) = tokio_openssl::SslStream::new(ssl, stream) else {
        return;
    };
    match tokio::time::timeout(HEADER_TIMEOUT, std::pin::Pin::new(&mut tls).accept()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return debug!(error = %e, "metrics tls handshake"),
        Err(_) => return debug!("metrics tls handshake timed out"),
    }
    if tls.ssl().selected_alpn_protocol() == Some(b"h2") {
        let conn = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .timer(hyper_util::rt::TokioTimer::new())
            .serve_connection(
                TokioIo::new(tls),
                service_fn(move |req| respond(site.clone(), req)),
            );
        if let Err(e) = conn.await {
            debug!(error = %e, "metrics connection");
        }
    } else {
        http1(tls, site).await;
    }
}

/// Serves HTTP/1.1 on `io`.
async fn http1<S>(io: S, site: Site)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(
            TokioIo::new(io),
            service_fn(move |req| respond(site.clone(), req)),
        );
    if let Err(e) = conn.await {
        debug!(error = %e, "metrics connection");
    }
}

/// The rate limit and basic auth first, then the page; the configured
/// headers on every answer but a 429 (as the toolkit).
async fn respond(site: Site, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    if let Some(refused) = site.web.refuse(req.headers()).await {
        if refused.status() == StatusCode::TOO_MANY_REQUESTS {
            return Ok(refused);
        }
        return Ok(site.web.finish(refused));
    }
    let resp = handle(site.process, site.history, req).await?;
    Ok(site.web.finish(resp))
}

async fn handle(
    p: Arc<Process>,
    history: Arc<history::History>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (status, content_type, body) = match req.uri().path() {
        "/" => return Ok(page::page()),
        "/api/state" => return Ok(page::state(&p, &history)),
        "/metrics" => (
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            p.render(),
        ),
        "/healthz" => (
            StatusCode::OK,
            "text/plain; charset=utf-8",
            "ok\n".to_owned(),
        ),
        "/readyz" => match p.not_ready() {
            None => (
                StatusCode::OK,
                "text/plain; charset=utf-8",
                "ready\n".to_owned(),
            ),
            Some(why) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain; charset=utf-8",
                format!("not ready\n{why}"),
            ),
        },
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "not found\n".to_owned(),
        ),
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sample in every family of a pipeline, each value its own, so that
    /// a family registered under another's name or help shows.
    fn sample_every_family(m: &Metrics) {
        let topic = |t: &str| TopicLabel { topic: t.into() };
        m.events.get_or_create(&topic("t1")).inc_by(1);
        m.events.get_or_create(&topic("t2")).inc_by(2);
        m.transactions.inc_by(3);
        m.filtered
            .get_or_create(&ReasonLabel { reason: "delete" })
            .inc_by(4);
        m.filtered
            .get_or_create(&ReasonLabel { reason: "update" })
            .inc_by(5);
        m.delivery_errors
            .get_or_create(&CodeLabel {
                code: "MsgSizeTooLarge".into(),
            })
            .inc_by(6);
        m.reconnects.inc_by(7);
        m.in_flight.set(8);
        m.oldest_unacked_age.set(9.5);
        m.commit_to_ack.observe(0.0007);
        m.commit_to_ack.observe(3.0);
        m.stages.commit_to_receive.observe(0.0009);
        m.stages.receive_to_produce.observe(0.00012);
        m.stages.produce_to_ack.observe(0.004);
        m.stages.produce_to_ack.observe(0.3);
        m.stages.ack_to_confirm.observe(20.0);
        m.received_lsn.set(10);
        m.confirmed_lsn.set(11);
        m.slot_retained_wal.set(12);
        m.slot_confirmed_lag.set(13);
        m.slot_safe_wal_size.set(14);
        m.slot_wal_status
            .get_or_create(&StatusLabel {
                status: "reserved".into(),
            })
            .set(1);
        m.slot_active.set(1);
        m.slot_alert_level
            .get_or_create(&KindLabel {
                kind: "retained_wal",
            })
            .set(2);
        m.slot_alert_level
            .get_or_create(&KindLabel {
                kind: "lag_seconds",
            })
            .set(1);
        m.replication_lag.set(15.25);
        m.streaming.store(true, Ordering::Relaxed);
        m.kafka_reachable.store(true, Ordering::Relaxed);
        let broker = BrokerLabel {
            broker: "nats-jetstream",
        };
        m.broker_info.get_or_create(&broker).set(1);
        m.broker_acked.get_or_create(&broker).inc_by(41);
        m.broker_refused.get_or_create(&broker).inc_by(2);
        m.broker_retries.get_or_create(&broker).inc_by(3);
        m.dead_lettered
            .get_or_create(&ReasonLabel { reason: "route" })
            .inc_by(16);
        m.streamed_transactions.inc_by(17);
        m.stream_aborts.inc_by(18);
        m.subxact_aborts.inc_by(19);
        m.stream_abort_lsn.set(20);
        m.proto_version.set(4);
        m.spilled_bytes.inc_by(21);
        m.spill_bytes.set(22);
        m.exactly_once.set(1);
        m.kafka_transactions
            .get_or_create(&ResultLabel {
                result: "committed",
            })
            .inc_by(23);
        m.kafka_transactions
            .get_or_create(&ResultLabel { result: "aborted" })
            .inc_by(24);
        m.kafka_transaction_records.observe(25.0);
        m.kafka_transaction_commit.observe(0.026);
        m.producer_fenced.set(1);
        m.progress_committed_lsn.set(27);
        m.progress_committed_events.set(28);
        m.source_info
            .get_or_create(&KindLabel { kind: "wal" })
            .set(1);
        m.poll_unpublished.set(29);
        m.poll_oldest_unpublished_age.set(30.5);
        m.poll_published.inc_by(31);
        m.poll_batches
            .get_or_create(&ResultLabel {
                result: "published",
            })
            .inc_by(32);
        m.poll_claim.observe(0.0033);
        m.poll_mark.observe(0.034);
        m.poll_errors
            .get_or_create(&KindLabel { kind: "claim" })
            .inc_by(35);
        m.poll_shards_held.set(36);
        m.poll_retention_deleted.inc_by(37);
        m.poll_notifications.inc_by(38);
    }

    /// An exposition with its families in name order and each family's
    /// series in label order: the two orders that carry no meaning (a
    /// family's series come from a HashMap; Prometheus and `walrelay
    /// status` read families by name), so that only names, help, types,
    /// units, labels, bucket bounds and values are compared, every byte of
    /// them.
    fn canonical(text: &str) -> String {
        // Family -> (descriptor lines, series: label set without `le` -> lines).
        type Series<'a> = std::collections::BTreeMap<String, Vec<&'a str>>;
        let mut families: std::collections::BTreeMap<&str, (Vec<&str>, Series)> =
            std::collections::BTreeMap::new();
        let mut current = "";
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# ") {
                if rest != "EOF" {
                    current = rest.split(' ').nth(1).unwrap_or("");
                    families.entry(current).or_default().0.push(line);
                }
                continue;
            }
            let labels = line
                .split_once('{')
                .and_then(|(_, l)| l.split_once('}'))
                .map_or("", |(l, _)| l);
            let key: Vec<&str> = labels
                .split(',')
                .filter(|l| !l.starts_with("le="))
                .collect();
            let family = families.entry(current).or_default();
            family.1.entry(key.join(",")).or_default().push(line);
        }
        let mut out = String::new();
        for (descriptor, series) in families.values() {
            for line in descriptor.iter().chain(series.values().flatten()) {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }

    /// Every family of a pipeline, with a sample in each, renders exactly
    /// as `exposition.txt` records: the guard of the declarations (a name,
    /// help text, type, label or bucket bound changed shows here).
    /// `WALRELAY_BLESS=1 cargo test --lib metrics::tests::exposition`
    /// writes the file anew after an intended change.
    #[test]
    fn exposition_of_every_family_is_unchanged() {
        let p = Process::new();
        let m = p.add_pipeline("p");
        sample_every_family(&m);
        let version = format!("version=\"{}\"", env!("CARGO_PKG_VERSION"));
        let text = p.render().replace(&version, "version=\"VERSION\"");
        // Every family has a series: none was left out of the samples.
        let mut without = Vec::new();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.starts_with("# TYPE ") {
                let unit = lines[i + 1..]
                    .iter()
                    .take_while(|l| l.starts_with("# UNIT "));
                let next = lines.get(i + 1 + unit.count());
                if next.is_none_or(|l| l.starts_with("# ")) {
                    without.push(*line);
                }
            }
        }
        assert!(without.is_empty(), "families without a sample: {without:?}");
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/metrics/exposition.txt");
        let got = canonical(&text);
        if std::env::var_os("WALRELAY_BLESS").is_some() {
            std::fs::write(path, &got).unwrap();
        }
        let want = std::fs::read_to_string(path).unwrap();
        let first = got.lines().zip(want.lines()).position(|(g, w)| g != w);
        assert!(
            got == want,
            "{path} differs from line {:?} on; got:\n{got}",
            first.map(|i| i + 1)
        );
    }

    #[test]
    fn renders_names_with_units_and_suffixes() {
        let m = Metrics::new();
        m.events
            .get_or_create(&TopicLabel {
                topic: "outbox.event.Test".into(),
            })
            .inc_by(3);
        m.commit_to_ack.observe(0.004);
        let text = m.render();
        assert!(
            text.contains(
                "walrelay_events_total{pipeline=\"default\",topic=\"outbox.event.Test\"} 3"
            ),
            "{text}"
        );
        assert!(
            text.contains("walrelay_commit_to_ack_seconds_bucket"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn process_renders_each_family_once_with_a_series_per_pipeline() {
        let p = Process::new();
        let a = p.add_pipeline("orders");
        let b = p.add_pipeline("billing");
        a.events
            .get_or_create(&TopicLabel { topic: "t1".into() })
            .inc_by(3);
        b.events
            .get_or_create(&TopicLabel { topic: "t2".into() })
            .inc_by(5);
        a.commit_to_ack.observe(0.004);
        b.confirmed_lsn.set(42);
        let text = p.render();
        assert!(text.contains("walrelay_up 1"), "{text}");
        assert!(text.contains("walrelay_build_info{version="), "{text}");
        assert!(
            text.contains("walrelay_events_total{pipeline=\"orders\",topic=\"t1\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("walrelay_events_total{pipeline=\"billing\",topic=\"t2\"} 5"),
            "{text}"
        );
        assert!(
            text.contains("walrelay_confirmed_lsn_bytes{pipeline=\"billing\"} 42"),
            "{text}"
        );
        for family in [
            "walrelay_events",
            "walrelay_commit_to_ack_seconds",
            "walrelay_up",
        ] {
            let help = format!("# HELP {family} ");
            assert_eq!(text.matches(&help).count(), 1, "{family}: {text}");
        }
        // A family's samples are contiguous: both pipelines' events lines
        // follow the one descriptor.
        let lines: Vec<&str> = text.lines().collect();
        let at = |needle: &str| lines.iter().position(|l| l.starts_with(needle)).unwrap();
        let help = at("# HELP walrelay_events ");
        let first = at("walrelay_events_total{pipeline=\"orders\"");
        let second = at("walrelay_events_total{pipeline=\"billing\"");
        assert!(help < first && first + 1 == second, "{text}");
        assert_eq!(text.matches("# EOF").count(), 1);
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn stage_histograms_share_the_family_and_read_cleanly() {
        let p = Process::new();
        let m = p.add_pipeline("orders");
        m.stages.produce_to_ack.observe(0.004);
        m.stages.produce_to_ack.observe(0.3);
        m.stages.commit_to_receive.observe(0.0009);
        let text = p.render();
        assert_eq!(
            text.matches("# HELP walrelay_stage_seconds ").count(),
            1,
            "{text}"
        );
        assert!(
            text.contains(
                "walrelay_stage_seconds_count{pipeline=\"orders\",stage=\"produce_to_ack\"} 2"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "walrelay_stage_seconds_count{pipeline=\"orders\",stage=\"commit_to_receive\"} 1"
            ),
            "{text}"
        );
        // 4 significant digits: 0.1 ms × √2 is 0.0001414.
        assert!(text.contains("le=\"0.0001414\""), "{text}");
        assert!(!text.contains("le=\"0.00014142"), "{text}");
        assert!(text.contains("le=\"0.0004\""), "{text}");
    }

    #[test]
    fn readiness_names_the_pipelines_that_are_not_ready() {
        let p = Process::new();
        assert!(p.not_ready().is_some());
        let a = p.add_pipeline("orders");
        let b = p.add_pipeline("billing");
        for m in [&a, &b] {
            m.streaming.store(true, Ordering::Relaxed);
            m.kafka_reachable.store(true, Ordering::Relaxed);
        }
        assert_eq!(p.not_ready(), None);
        assert_eq!(a.state(), PipelineState::Running);
        b.set_ended(Some("the slot \"b\" was dropped".into()));
        let why = p.not_ready().unwrap();
        assert!(why.contains("pipeline billing: failed: the slot"), "{why}");
        assert!(!why.contains("orders"), "{why}");
        assert_eq!(b.pipeline_up.get(), 0);
        assert!(p
            .render()
            .contains("walrelay_pipeline_up{pipeline=\"billing\"} 0"));
    }

    #[tokio::test]
    async fn serves_health_and_metrics() {
        let (tx, rx) = watch::channel(false);
        let p = Arc::new(Process::new());
        let m = p.add_pipeline("default");
        let (addr, handle) = serve("127.0.0.1:0", Arc::clone(&p), rx).await.unwrap();
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
            out
        };
        assert!(get("/healthz").await.starts_with("HTTP/1.1 200"));
        m.streaming.store(false, Ordering::Relaxed);
        assert!(get("/readyz").await.starts_with("HTTP/1.1 503"));
        assert!(get("/metrics").await.contains("walrelay_up 1"));
        assert!(get("/nope").await.starts_with("HTTP/1.1 404"));
        tx.send(true).unwrap();
        handle.await.unwrap();
    }
}
