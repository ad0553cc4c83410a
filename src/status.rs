//! `walrelay status`: a human-readable view of a running walrelay, read from
//! its `/metrics` endpoint.
//!
//! Owns the plain HTTP/1.1 GET of the metrics page (one request, bounded by
//! a timeout), the parsing of the Prometheus/OpenMetrics text format into a
//! [`Snapshot`], rates between two snapshots, and the rendering of the
//! view, including the catch-up line the source logs while it drains a
//! backlog; for the polling source, its shards, backlog, batches and errors
//! instead of the slot and WAL lines. A process runs one pipeline or
//! several: every pipeline sample carries the `pipeline` label, and the view
//! has a section per pipeline (with a table of them all first when there are
//! several), its state read from `walrelay_pipeline_up` and
//! `walrelay_ready`, and, when one is not ready, the reason `/readyz` gives.
//! It only reads: it never talks to PostgreSQL or Kafka and never changes
//! the process it looks at. The metric names are the constants of
//! [`crate::metrics`].

use std::fmt::Write as _;
use std::io::{self, Write};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::signal::unix::{signal, SignalKind};
use walrelay_proto::Lsn;

use crate::human::{catch_up_line, human_bytes, human_duration};
use crate::metrics::{
    BUILD_INFO, COMMIT_TO_ACK, CONFIRMED_LSN, DELIVERY_ERRORS, EVENTS, EVENTS_FILTERED,
    EVENTS_IN_FLIGHT, OLDEST_UNACKED_AGE, READY, RECEIVED_LSN, RECONNECTS, REPLICATION_LAG,
    SLOT_ACTIVE, SLOT_ALERT_LEVEL, SLOT_CONFIRMED_LAG, SLOT_RETAINED_WAL, SLOT_SAFE_WAL_SIZE,
    SLOT_WAL_STATUS, SOURCE_INFO, TRANSACTIONS, UP,
};
use crate::metrics::{
    EXACTLY_ONCE, KAFKA_TRANSACTIONS, PRODUCER_FENCED, PROGRESS_COMMITTED_EVENTS,
    PROGRESS_COMMITTED_LSN,
};
use crate::metrics::{
    PGOUTPUT_PROTO_VERSION, STREAMED_TRANSACTIONS, STREAM_ABORTS, SUBTRANSACTION_ABORTS,
};
use crate::metrics::{PIPELINE_LABEL, PIPELINE_UP};
use crate::metrics::{
    POLL_BATCHES, POLL_ERRORS, POLL_NOTIFICATIONS, POLL_OLDEST_UNPUBLISHED_AGE, POLL_PUBLISHED,
    POLL_RETENTION_DELETED, POLL_SHARDS_HELD, POLL_UNPUBLISHED,
};
use crate::postgres::wal::streaming_option;

/// Default bound on one scrape (connect, request and response).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// Time between the two scrapes of a one-shot `status`, for the rates.
pub const RATE_WINDOW: Duration = Duration::from_secs(1);
/// Largest metrics page accepted.
const MAX_RESPONSE_BYTES: usize = 16 << 20;
/// Confirmed lag below which no catch-up line is shown: one WAL segment.
/// The lag gauge is polled (every `lag.poll_interval_ms`), so smaller values
/// are mostly its staleness, not a backlog.
pub const CATCH_UP_THRESHOLD_BYTES: i64 = 16 << 20;
/// ANSI: clear the screen and move the cursor home.
const CLEAR_SCREEN: &str = "\x1b[2J\x1b[H";

/// Errors of `walrelay status`.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// The URL is not `http://host:port/path`.
    #[error("invalid metrics url {url}: {reason}")]
    InvalidUrl {
        /// The URL.
        url: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// TCP connect failed.
    #[error("cannot connect to {addr}; is walrelay running with [metrics] listen = \"{addr}\"?")]
    Connect {
        /// `host:port`.
        addr: String,
        /// The socket error.
        #[source]
        source: io::Error,
    },
    /// The scrape took too long.
    #[error("no answer from {url} within {timeout:?}")]
    Timeout {
        /// The URL.
        url: String,
        /// The bound.
        timeout: Duration,
    },
    /// Reading or writing the socket failed.
    #[error("i/o error while reading {url}")]
    Io {
        /// The URL.
        url: String,
        /// The socket error.
        #[source]
        source: io::Error,
    },
    /// The server answered with something other than 200.
    #[error("{url} answered {status}")]
    HttpStatus {
        /// The URL.
        url: String,
        /// The status line.
        status: String,
    },
    /// The response is not HTTP or too large.
    #[error("malformed response from {url}: {reason}")]
    Malformed {
        /// The URL.
        url: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// A line of the metrics page does not parse.
    #[error("metrics line {line} does not parse: {reason}")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: &'static str,
    },
    /// The Ctrl-C handler of `--watch` could not be installed.
    #[error("cannot install the interrupt handler")]
    Signal(#[source] io::Error),
    /// Writing the view failed (closed stdout).
    #[error("cannot write the status view")]
    Output(#[source] io::Error),
    /// `--pipeline` names a pipeline the process does not run.
    #[error("walrelay at {url} runs no pipeline {name:?}; it runs {known}")]
    NoSuchPipeline {
        /// The metrics page.
        url: String,
        /// The name asked for.
        name: String,
        /// The pipelines it runs, comma-separated.
        known: String,
    },
}

/// What `walrelay status` reads and how.
#[derive(Debug, Clone)]
pub struct StatusOptions {
    /// The metrics page, e.g. `http://127.0.0.1:9187/metrics`.
    pub url: String,
    /// Refresh every this often until Ctrl-C; `None` shows the view once.
    pub watch: Option<Duration>,
    /// Bound on each scrape.
    pub timeout: Duration,
    /// Show only this pipeline; `None` shows every pipeline.
    pub pipeline: Option<String>,
}

impl StatusOptions {
    /// One view of `url`, every pipeline, with the default timeout.
    pub fn new(url: impl Into<String>) -> Self {
        StatusOptions {
            url: url.into(),
            watch: None,
            timeout: DEFAULT_TIMEOUT,
            pipeline: None,
        }
    }

    /// The options for a `[metrics] listen` address such as `127.0.0.1:9187`.
    pub fn for_addr(addr: &str) -> Self {
        StatusOptions::new(metrics_url(addr))
    }
}

/// The `/metrics` URL of a listen address (`host:port`, or a URL as is).
pub fn metrics_url(addr: &str) -> String {
    if addr.starts_with("http://") || addr.starts_with("https://") {
        addr.to_owned()
    } else {
        format!("http://{addr}/metrics")
    }
}

/// One sample of the metrics page.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Metric name as written (`_total`, `_sum`, `_count`, `_bucket` included).
    pub name: String,
    /// Labels in page order.
    pub labels: Vec<(String, String)>,
    /// The value.
    pub value: f64,
    /// The value when it is written as an integer (exact beyond 2^53,
    /// which LSNs need).
    pub integer: Option<i64>,
}

impl Sample {
    /// The value of label `name`.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One scrape of the metrics page.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Where it came from.
    pub url: String,
    /// When it was taken (for rates).
    pub taken: Instant,
    /// Every sample.
    pub samples: Vec<Sample>,
    /// The body of `/readyz` read next to this scrape (when a pipeline was
    /// not ready), which says why for each pipeline that is not.
    pub readiness: Option<String>,
}

impl Snapshot {
    /// Parses a Prometheus or OpenMetrics text page.
    pub fn parse(url: &str, text: &str) -> Result<Snapshot, StatusError> {
        let mut samples = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            samples.push(parse_sample(line).map_err(|reason| StatusError::Parse {
                line: i + 1,
                reason,
            })?);
        }
        Ok(Snapshot {
            url: url.to_owned(),
            taken: Instant::now(),
            samples,
            readiness: None,
        })
    }

    /// The pipelines of the process, in the order of the page (the order
    /// the process started them); empty for a walrelay older than the
    /// `pipeline` label, whose whole page is its one pipeline.
    pub fn pipelines(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for s in &self.samples {
            if let Some(name) = s.label(PIPELINE_LABEL) {
                if !names.iter().any(|n| n == name) {
                    names.push(name.to_owned());
                }
            }
        }
        names
    }

    /// The samples of pipeline `name` only (taken at the same time, so
    /// rates between two of them are the pipeline's).
    pub fn for_pipeline(&self, name: &str) -> Snapshot {
        Snapshot {
            url: self.url.clone(),
            taken: self.taken,
            samples: self
                .samples
                .iter()
                .filter(|s| s.label(PIPELINE_LABEL) == Some(name))
                .cloned()
                .collect(),
            readiness: None,
        }
    }

    /// Where a pipeline is, from its own samples (see [`for_pipeline`]):
    /// failed once `walrelay_pipeline_up` is 0, running while
    /// `walrelay_ready` is 1, otherwise what the metrics can tell of why
    /// not.
    ///
    /// [`for_pipeline`]: Snapshot::for_pipeline
    pub fn state(&self) -> PipelineState {
        if self.flag(PIPELINE_UP) == Some(false) {
            return PipelineState::Failed;
        }
        match self.flag(READY) {
            Some(true) => return PipelineState::Running,
            None => return PipelineState::Unknown,
            Some(false) => {}
        }
        if self.is_poll() {
            return if self.value(POLL_SHARDS_HELD).unwrap_or(0.0) > 0.0 {
                PipelineState::NotReady
            } else {
                PipelineState::Standby
            };
        }
        if self.lag_critical() {
            return PipelineState::NotReady;
        }
        if self.integer(PGOUTPUT_PROTO_VERSION).unwrap_or(0) > 0 {
            PipelineState::NotReady
        } else {
            PipelineState::Starting
        }
    }

    /// Whether a lag threshold of the slot is at critical.
    fn lag_critical(&self) -> bool {
        self.named(SLOT_ALERT_LEVEL).any(|s| s.value >= 2.0)
    }

    /// Why pipeline `name` is not ready, as `/readyz` said it (`failed:
    /// <error>` for a failed one); `None` when no `/readyz` was read or it
    /// did not name the pipeline.
    pub fn not_ready_reason(&self, name: &str) -> Option<&str> {
        let body = self.readiness.as_deref()?;
        body.lines()
            .find_map(|l| {
                l.strip_prefix("pipeline ")?
                    .strip_prefix(name)?
                    .strip_prefix(": ")
            })
            .map(str::trim)
    }

    fn named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| s.name == name)
    }

    /// The value of the first sample called `name`.
    pub fn value(&self, name: &str) -> Option<f64> {
        self.named(name).next().map(|s| s.value)
    }

    /// The exact integer value of the first sample called `name`.
    pub fn integer(&self, name: &str) -> Option<i64> {
        self.named(name).next().and_then(|s| s.integer)
    }

    /// The sum over every label set of `name`; `None` when absent.
    pub fn sum(&self, name: &str) -> Option<f64> {
        let mut found = false;
        let total = self
            .named(name)
            .inspect(|_| found = true)
            .map(|s| s.value)
            .sum();
        found.then_some(total)
    }

    /// Events produced (acknowledged or in flight), over every topic.
    pub fn events(&self) -> Option<f64> {
        self.sum(&counter(EVENTS))
    }

    /// Events by topic, largest first.
    pub fn events_by_topic(&self) -> Vec<(String, f64)> {
        let name = counter(EVENTS);
        let mut v: Vec<(String, f64)> = self
            .named(&name)
            .map(|s| (s.label("topic").unwrap_or("?").to_owned(), s.value))
            .collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    }

    /// The position confirmed to the server.
    pub fn confirmed_lsn(&self) -> Option<Lsn> {
        self.lsn(CONFIRMED_LSN)
    }

    /// The highest position received from the server.
    pub fn received_lsn(&self) -> Option<Lsn> {
        self.lsn(RECEIVED_LSN)
    }

    fn lsn(&self, name: &str) -> Option<Lsn> {
        let s = self.named(name).next()?;
        let v = match s.integer {
            Some(i) => u64::try_from(i).ok()?,
            None if s.value >= 0.0 => s.value as u64,
            None => return None,
        };
        Some(Lsn(v))
    }

    /// The slot's `wal_status` (the label whose gauge is 1).
    pub fn wal_status(&self) -> Option<String> {
        self.named(SLOT_WAL_STATUS)
            .find(|s| s.value == 1.0)
            .and_then(|s| s.label("status").map(str::to_owned))
    }

    /// The running version (`walrelay_build_info`).
    pub fn version(&self) -> Option<String> {
        self.named(BUILD_INFO)
            .next()
            .and_then(|s| s.label("version").map(str::to_owned))
    }

    fn flag(&self, name: &str) -> Option<bool> {
        self.value(name).map(|v| v != 0.0)
    }

    /// Whether the process runs exactly-once (`None`: it does not say, an
    /// older walrelay).
    pub fn exactly_once(&self) -> Option<bool> {
        self.flag(EXACTLY_ONCE)
    }

    /// The source position of the last committed progress record.
    pub fn progress_lsn(&self) -> Option<Lsn> {
        self.lsn(PROGRESS_COMMITTED_LSN)
    }

    /// Kafka transactions that ended with `result` (`committed`, `aborted`).
    pub fn kafka_transactions(&self, result: &str) -> f64 {
        self.named(&counter(KAFKA_TRANSACTIONS))
            .filter(|s| s.label("result") == Some(result))
            .map(|s| s.value)
            .sum()
    }

    /// Whether the process runs the polling source: `walrelay_source_info`
    /// says so. A walrelay without that metric (older) runs it when it
    /// exports the poll metrics and shows nothing of a replication session
    /// (no pgoutput protocol, no received WAL position, no slot read by the
    /// lag monitor); there a WAL instance that has not streamed yet looks
    /// like a polling one.
    pub fn is_poll(&self) -> bool {
        // Since walrelay_source_info, the process says so.
        if let Some(s) = self.named(SOURCE_INFO).find(|s| s.value > 0.0) {
            return s.label("kind") == Some("poll");
        }
        let wal_seen = self.integer(PGOUTPUT_PROTO_VERSION).is_some_and(|v| v > 0)
            || self.received_lsn().is_some_and(|l| l.0 > 0)
            || self.named(SLOT_WAL_STATUS).next().is_some()
            || self.named(SLOT_ALERT_LEVEL).next().is_some();
        self.value(POLL_SHARDS_HELD).is_some() && !wal_seen
    }

    /// The values of `name` by the value of its label `label`, ordered by
    /// label.
    pub fn by_label(&self, name: &str, label: &str) -> Vec<(String, f64)> {
        let mut v: Vec<(String, f64)> = self
            .named(name)
            .map(|s| (s.label(label).unwrap_or("?").to_owned(), s.value))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }
}

/// Where a pipeline is, as its metrics tell it ([`Snapshot::state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PipelineState {
    /// Ready: streaming (WAL) or holding a shard (polling), Kafka
    /// reachable, lag below critical.
    Running,
    /// No replication session has started yet: connecting, or waiting for
    /// a slot another walrelay holds (a hot standby).
    Starting,
    /// Polling, no shard lock held: a hot standby, or not connected yet.
    Standby,
    /// Up but not ready for another reason: reconnecting, Kafka
    /// unreachable, or lag at critical.
    NotReady,
    /// Stopped on a fatal error (`walrelay_pipeline_up` 0); the process
    /// keeps its other pipelines running.
    Failed,
    /// The page has no `walrelay_ready` sample.
    Unknown,
}

impl PipelineState {
    /// One word for the table of pipelines.
    pub fn as_str(self) -> &'static str {
        match self {
            PipelineState::Running => "running",
            PipelineState::Starting => "starting",
            PipelineState::Standby => "standby",
            PipelineState::NotReady => "not ready",
            PipelineState::Failed => "FAILED",
            PipelineState::Unknown => "unknown",
        }
    }
}

/// Rates between two snapshots of the same process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    /// Events per second.
    pub events_per_s: Option<f64>,
    /// Confirmed WAL bytes per second.
    pub confirmed_bytes_per_s: Option<f64>,
    /// Rows the polling source published per second.
    pub published_rows_per_s: Option<f64>,
}

impl Rates {
    /// Rates from `previous` to `current`; `None` fields when a counter went
    /// backwards (a restart) or no time passed.
    pub fn between(previous: &Snapshot, current: &Snapshot) -> Rates {
        let secs = current
            .taken
            .saturating_duration_since(previous.taken)
            .as_secs_f64();
        if secs <= 0.0 {
            return Rates::default();
        }
        let rate = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b >= a => Some((b - a) / secs),
            _ => None,
        };
        Rates {
            events_per_s: rate(previous.events(), current.events()),
            confirmed_bytes_per_s: rate(
                previous.confirmed_lsn().map(|l| l.0 as f64),
                current.confirmed_lsn().map(|l| l.0 as f64),
            ),
            published_rows_per_s: rate(
                previous.value(&counter(POLL_PUBLISHED)),
                current.value(&counter(POLL_PUBLISHED)),
            ),
        }
    }
}

fn counter(name: &str) -> String {
    format!("{name}_total")
}

/// `name{labels} value [timestamp] [# exemplar]`.
fn parse_sample(line: &str) -> Result<Sample, &'static str> {
    let name_end = line
        .find(|c: char| c == '{' || c.is_ascii_whitespace())
        .ok_or("no value")?;
    let name = &line[..name_end];
    if name.is_empty() {
        return Err("no metric name");
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        let mut chars = after.char_indices().peekable();
        let end;
        loop {
            while chars.peek().is_some_and(|(_, c)| *c == ',' || *c == ' ') {
                chars.next();
            }
            match chars.peek() {
                Some((i, '}')) => {
                    end = *i + 1;
                    break;
                }
                None => return Err("unterminated label set"),
                _ => {}
            }
            let mut key = String::new();
            loop {
                match chars.next() {
                    Some((_, '=')) => break,
                    Some((_, c)) => key.push(c),
                    None => return Err("label without value"),
                }
            }
            if chars.next().map(|(_, c)| c) != Some('"') {
                return Err("label value not quoted");
            }
            let mut value = String::new();
            loop {
                match chars.next() {
                    Some((_, '"')) => break,
                    Some((_, '\\')) => match chars.next() {
                        Some((_, 'n')) => value.push('\n'),
                        Some((_, c)) => value.push(c),
                        None => return Err("unterminated label value"),
                    },
                    Some((_, c)) => value.push(c),
                    None => return Err("unterminated label value"),
                }
            }
            labels.push((key.trim().to_owned(), value));
        }
        rest = &after[end..];
    }
    let token = rest.split_ascii_whitespace().next().ok_or("no value")?;
    let integer = token.parse::<i64>().ok();
    let value = match token {
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        t => t.parse::<f64>().map_err(|_| "value is not a number")?,
    };
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value,
        integer,
    })
}

/// Fetches and parses `url` (plain HTTP), bounded by [`DEFAULT_TIMEOUT`].
pub async fn scrape(url: &str) -> Result<Snapshot, StatusError> {
    scrape_with_timeout(url, DEFAULT_TIMEOUT).await
}

/// Fetches and parses `url` (plain HTTP), bounded by `timeout`.
pub async fn scrape_with_timeout(url: &str, timeout: Duration) -> Result<Snapshot, StatusError> {
    let body = match tokio::time::timeout(timeout, http_get(url)).await {
        Ok(result) => result?,
        Err(_) => {
            return Err(StatusError::Timeout {
                url: url.to_owned(),
                timeout,
            })
        }
    };
    Snapshot::parse(url, &body)
}

/// The `/readyz` page beside a metrics page whose path ends in `/metrics`.
fn readyz_url(metrics_url: &str) -> Option<String> {
    let (addr, path) = split_url(metrics_url).ok()?;
    let prefix = path.strip_suffix("/metrics")?;
    Some(format!("http://{addr}{prefix}/readyz"))
}

/// Reads `/readyz` into `snapshot.readiness` when a pipeline of it is not
/// ready, so the view can say why. Best effort: a page that cannot be read
/// leaves the view without the reasons, never fails it.
pub async fn read_readiness(snapshot: &mut Snapshot, timeout: Duration) {
    let names = snapshot.pipelines();
    let all_ready = names
        .iter()
        .all(|n| snapshot.for_pipeline(n).state() == PipelineState::Running);
    if names.is_empty() || all_ready {
        return;
    }
    let Some(url) = readyz_url(&snapshot.url) else {
        return;
    };
    // 503 is /readyz's answer while something is not ready.
    if let Ok(Ok(body)) =
        tokio::time::timeout(timeout, http_get_accepting(&url, &["200", "503"])).await
    {
        snapshot.readiness = Some(body);
    }
}

/// `(host:port, path)` of an `http://` URL.
fn split_url(url: &str) -> Result<(String, String), StatusError> {
    let invalid = |reason| StatusError::InvalidUrl {
        url: url.to_owned(),
        reason,
    };
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        invalid(if url.starts_with("https://") {
            "https is not supported; the metrics listener speaks plain http"
        } else {
            "it must start with http://"
        })
    })?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/metrics"),
    };
    if authority.is_empty() {
        return Err(invalid("no host"));
    }
    let has_port = match authority.rfind(':') {
        Some(i) => !authority[i..].contains(']'),
        None => false,
    };
    let addr = if has_port {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    Ok((addr, path.to_owned()))
}

async fn http_get(url: &str) -> Result<String, StatusError> {
    http_get_accepting(url, &["200"]).await
}

/// GET `url`; an answer whose status code is not one of `accepted` is
/// [`StatusError::HttpStatus`].
async fn http_get_accepting(url: &str, accepted: &[&str]) -> Result<String, StatusError> {
    let (addr, path) = split_url(url)?;
    let io_err = |source| StatusError::Io {
        url: url.to_owned(),
        source,
    };
    let malformed = |reason| StatusError::Malformed {
        url: url.to_owned(),
        reason,
    };
    let mut stream = TcpStream::connect(&addr)
        .await
        .map_err(|source| StatusError::Connect {
            addr: addr.clone(),
            source,
        })?;
    let host = addr.clone();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: text/plain\r\nConnection: close\r\nUser-Agent: walrelay-status\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.map_err(io_err)?;
    let mut raw = Vec::new();
    let mut limited = (&mut stream).take(MAX_RESPONSE_BYTES as u64 + 1);
    limited.read_to_end(&mut raw).await.map_err(io_err)?;
    if raw.len() > MAX_RESPONSE_BYTES {
        return Err(malformed("larger than 16 MiB"));
    }
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| malformed("no end of headers"))?;
    let head =
        std::str::from_utf8(&raw[..split]).map_err(|_| malformed("headers are not utf-8"))?;
    let body = &raw[split + 4..];
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or_default();
    let code = status.split_ascii_whitespace().nth(1);
    if !status.starts_with("HTTP/") || code.is_none() {
        return Err(malformed("no http status line"));
    }
    if !code.is_some_and(|c| accepted.contains(&c)) {
        return Err(StatusError::HttpStatus {
            url: url.to_owned(),
            status: status.to_owned(),
        });
    }
    let chunked = lines.any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let body = if chunked {
        dechunk(body).ok_or_else(|| malformed("bad chunked encoding"))?
    } else {
        body.to_vec()
    };
    String::from_utf8(body).map_err(|_| malformed("body is not utf-8"))
}

/// Decodes a `Transfer-Encoding: chunked` body.
fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(body.len());
    loop {
        let eol = body.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&body[..eol]).ok()?;
        let size_text = size_text.split(';').next()?.trim();
        let size = usize::from_str_radix(size_text, 16).ok()?;
        body = body.get(eol + 2..)?;
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(body.get(..size)?);
        body = body.get(size + 2..)?;
    }
}

/// The human-readable view of `current`, every pipeline, with rates
/// against `previous` (a scrape of the same process a moment earlier) when
/// given.
pub fn render(current: &Snapshot, previous: Option<&Snapshot>) -> String {
    render_pipelines(current, previous, &current.pipelines())
}

/// The view of `current` as [`render`] writes it, or of the pipeline
/// `only` alone; an error when the process runs no such pipeline.
pub fn render_view(
    current: &Snapshot,
    previous: Option<&Snapshot>,
    only: Option<&str>,
) -> Result<String, StatusError> {
    let names = current.pipelines();
    let Some(name) = only else {
        return Ok(render_pipelines(current, previous, &names));
    };
    if names.iter().any(|n| n == name) {
        return Ok(render_pipelines(current, previous, &[name.to_owned()]));
    }
    Err(StatusError::NoSuchPipeline {
        url: current.url.clone(),
        name: name.to_owned(),
        known: if names.is_empty() {
            "no named pipeline (a walrelay without the pipeline label)".to_owned()
        } else {
            names.join(", ")
        },
    })
}

/// The header, then for one pipeline its lines as they always were (its
/// name added), for several a table of them all and a section each.
fn render_pipelines(current: &Snapshot, previous: Option<&Snapshot>, names: &[String]) -> String {
    let s = current;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "walrelay {} at {}",
        s.version().unwrap_or_else(|| "?".to_owned()),
        s.url
    );
    let process_up = s.flag(UP) == Some(true);
    let views: Vec<PipelineView> = if names.is_empty() {
        // A walrelay without the pipeline label: its page is its pipeline.
        vec![PipelineView::new(None, s.clone(), previous.cloned())]
    } else {
        names
            .iter()
            .map(|n| {
                PipelineView::new(
                    Some(n.clone()),
                    s.for_pipeline(n),
                    previous.map(|p| p.for_pipeline(n)),
                )
            })
            .collect()
    };
    if let [view] = views.as_slice() {
        if let Some(name) = &view.name {
            let _ = writeln!(out, "{:<12} {name}", "pipeline");
        }
        let state = if process_up {
            match view.phrase(current) {
                Some(phrase) => format!("up, {phrase}"),
                None => "up".to_owned(),
            }
        } else {
            "unknown (no walrelay_up sample)".to_owned()
        };
        let _ = writeln!(out, "{:<12} {state}", "state");
        view.render_body(&mut out);
        return out;
    }
    let process = if process_up {
        "up"
    } else {
        "unknown (no walrelay_up sample)"
    };
    let _ = writeln!(
        out,
        "{:<12} {process}; {} pipelines: {}",
        "state",
        views.len(),
        state_counts(&views)
    );
    render_table(&views, &mut out);
    for view in &views {
        let name = view.name.as_deref().unwrap_or("?");
        let _ = writeln!(out, "\npipeline {name}");
        let phrase = view.phrase(current).unwrap_or_else(|| "unknown".to_owned());
        let _ = writeln!(out, "{:<12} {phrase}", "state");
        view.render_body(&mut out);
    }
    out
}

/// One pipeline's samples, its rates and its state.
struct PipelineView {
    name: Option<String>,
    snap: Snapshot,
    rates: Rates,
    state: PipelineState,
}

impl PipelineView {
    fn new(name: Option<String>, snap: Snapshot, previous: Option<Snapshot>) -> PipelineView {
        let rates = previous
            .as_ref()
            .map(|p| Rates::between(p, &snap))
            .unwrap_or_default();
        let state = snap.state();
        PipelineView {
            name,
            snap,
            rates,
            state,
        }
    }

    /// The lines after the state; for a failed pipeline, first a word that
    /// its figures stopped with it.
    fn render_body(&self, out: &mut String) {
        if self.state == PipelineState::Failed {
            let _ = writeln!(
                out,
                "{:<12} (the figures below are the last it reported before it stopped)",
                ""
            );
        }
        render_pipeline_body(&self.snap, &self.rates, out);
    }

    /// The state in words, with `/readyz`'s reason when `page` carries it;
    /// `None` when the page says nothing of readiness.
    fn phrase(&self, page: &Snapshot) -> Option<String> {
        let reason = self.name.as_deref().and_then(|n| page.not_ready_reason(n));
        let why = |reason: Option<&str>| match reason {
            Some(r) => format!(" ({r})"),
            None => " (see /readyz for why)".to_owned(),
        };
        Some(match self.state {
            PipelineState::Unknown => return None,
            PipelineState::Running => "ready".to_owned(),
            PipelineState::Failed => match reason.and_then(|r| r.strip_prefix("failed: ")) {
                Some(error) => format!("FAILED: stopped on a fatal error: {error}"),
                None => "FAILED: stopped on a fatal error (the log says which)".to_owned(),
            },
            PipelineState::Starting => format!(
                "NOT READY: starting, no replication session yet (connecting, or waiting for \
                 the slot){}",
                why(reason)
            ),
            PipelineState::Standby => format!(
                "NOT READY: no shard held (a hot standby, or not connected yet){}",
                reason.map(|r| format!(" ({r})")).unwrap_or_default()
            ),
            PipelineState::NotReady if self.snap.lag_critical() => {
                format!("NOT READY: lag critical{}", why(reason))
            }
            PipelineState::NotReady => format!("NOT READY{}", why(reason)),
        })
    }
}

/// `1 running, 1 FAILED`: how many pipelines are in each state.
fn state_counts(views: &[PipelineView]) -> String {
    use PipelineState::*;
    [Running, Starting, Standby, NotReady, Failed, Unknown]
        .into_iter()
        .filter_map(|state| {
            let n = views.iter().filter(|v| v.state == state).count();
            (n > 0).then(|| format!("{n} {}", state.as_str()))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A row per pipeline: source, state, events per second, and how far
/// behind it is (replication lag and unconfirmed WAL, or the backlog).
fn render_table(views: &[PipelineView], out: &mut String) {
    let na = || "n/a".to_owned();
    let rows: Vec<[String; 5]> = views
        .iter()
        .map(|v| {
            let s = &v.snap;
            let poll = s.is_poll();
            // A failed pipeline's gauges stopped with it: its lag is not 0,
            // it is unknown (and growing).
            let behind = if v.state == PipelineState::Failed {
                "(stopped)".to_owned()
            } else if poll {
                let rows = s
                    .value(POLL_UNPUBLISHED)
                    .map_or_else(na, |n| format!("{n:.0} unpublished rows"));
                match (
                    s.value(POLL_UNPUBLISHED),
                    s.value(POLL_OLDEST_UNPUBLISHED_AGE),
                ) {
                    (Some(n), Some(age)) if n > 0.0 => {
                        format!("{rows}, the oldest {}", human_duration(age))
                    }
                    _ => rows,
                }
            } else {
                let lag = s
                    .value(REPLICATION_LAG)
                    .map_or_else(na, |v| format!("{v:.1} s"));
                let unconfirmed = s
                    .integer(SLOT_CONFIRMED_LAG)
                    .map_or_else(na, |b| human_bytes(b.max(0) as u64));
                format!("lag {lag}, {unconfirmed} unconfirmed")
            };
            [
                v.name.clone().unwrap_or_else(|| "?".to_owned()),
                if poll { "poll" } else { "wal" }.to_owned(),
                v.state.as_str().to_owned(),
                v.rates.events_per_s.map_or_else(na, |r| format!("{r:.1}")),
                behind,
            ]
        })
        .collect();
    let header = ["pipeline", "source", "state", "events/s", "behind"];
    let width = |i: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain([header[i].len()])
            .max()
            .unwrap_or(0)
    };
    let (w0, w1, w2, w3) = (width(0), width(1), width(2), width(3));
    for row in std::iter::once(header.map(str::to_owned)).chain(rows) {
        let _ = writeln!(
            out,
            "{:<w0$}  {:<w1$}  {:<w2$}  {:>w3$}  {}",
            row[0], row[1], row[2], row[3], row[4]
        );
    }
}

/// One pipeline's lines after its state: mode, source (slot and positions,
/// or the polling view), events, in flight, latency, errors, protocol,
/// topics.
fn render_pipeline_body(s: &Snapshot, rates: &Rates, out: &mut String) {
    let na = || "n/a".to_owned();
    render_mode(s, out);
    let poll = s.is_poll();
    if poll {
        render_poll(s, rates, out);
    } else {
        render_slot(s, rates, out);
    }
    let events = s.events().map_or_else(na, |v| format!("{v:.0}"));
    let per_s = rates
        .events_per_s
        .map_or_else(|| "rate n/a".to_owned(), |r| format!("{r:.1}/s"));
    let txns = s
        .value(&counter(TRANSACTIONS))
        .map_or_else(na, |v| format!("{v:.0}"));
    let _ = writeln!(
        out,
        "{:<12} {events} total, {per_s}; {txns} transactions",
        "events"
    );
    let in_flight = s
        .value(EVENTS_IN_FLIGHT)
        .map_or_else(na, |v| format!("{v:.0}"));
    let oldest = s
        .value(OLDEST_UNACKED_AGE)
        .map_or_else(na, |v| format!("{v:.1} s"));
    let _ = writeln!(
        out,
        "{:<12} {in_flight} events, oldest unacked {oldest}",
        "in flight"
    );
    if let (Some(sum), Some(count)) = (
        s.value(&format!("{COMMIT_TO_ACK}_sum")),
        s.value(&format!("{COMMIT_TO_ACK}_count")),
    ) {
        if count > 0.0 {
            let _ = writeln!(
                out,
                "{:<12} mean {:.1} ms over {count:.0} deliveries",
                "commit-ack",
                sum / count * 1000.0
            );
        }
    }
    let count = |name: &str| {
        s.sum(&counter(name))
            .map_or_else(|| "0".to_owned(), |v| format!("{v:.0}"))
    };
    let _ = writeln!(
        out,
        "{:<12} {} delivery errors, {} reconnects, {} filtered changes",
        "errors",
        count(DELIVERY_ERRORS),
        count(RECONNECTS),
        count(EVENTS_FILTERED)
    );
    if !poll {
        render_protocol(s, out);
    }
    let topics = s.events_by_topic();
    if !topics.is_empty() {
        const SHOWN: usize = 10;
        let mut shown: Vec<String> = topics
            .iter()
            .take(SHOWN)
            .map(|(t, n)| format!("{t} {n:.0}"))
            .collect();
        if topics.len() > SHOWN {
            shown.push(format!("{} more", topics.len() - SHOWN));
        }
        let _ = writeln!(out, "{:<12} {}", "topics", shown.join(", "));
    }
}

/// The polling source: the shards this process holds, the backlog and its
/// oldest row, rows published, batches by result, errors by kind.
fn render_poll(s: &Snapshot, rates: &Rates, out: &mut String) {
    let na = || "n/a".to_owned();
    let source = match s.value(POLL_SHARDS_HELD).map(|v| v.max(0.0) as u64) {
        // The shard workers ended with the pipeline, their connections and
        // so their session locks with them.
        _ if s.flag(PIPELINE_UP) == Some(false) => {
            "polling; stopped, its shard locks released with its connections".to_owned()
        }
        Some(0) | None => "polling; no shard held: a hot standby (another walrelay holds the \
                           shard locks), or not connected yet"
            .to_owned(),
        Some(1) => "polling; 1 shard held: publishing".to_owned(),
        Some(n) => format!("polling; {n} shards held: publishing"),
    };
    let _ = writeln!(out, "{:<12} {source}", "source");
    let unpublished = s.value(POLL_UNPUBLISHED);
    let mut backlog = unpublished.map_or_else(na, |v| format!("{v:.0} unpublished rows"));
    match (unpublished, s.value(POLL_OLDEST_UNPUBLISHED_AGE)) {
        (Some(n), Some(age)) if n > 0.0 => {
            let _ = write!(backlog, ", the oldest waiting {}", human_duration(age));
        }
        _ => {}
    }
    if let (Some(n), Some(rate)) = (unpublished.filter(|n| *n > 0.0), rates.published_rows_per_s) {
        if rate > 0.0 {
            let _ = write!(
                backlog,
                "; about {} to publish at {rate:.1} rows/s",
                human_duration(n / rate)
            );
        }
    }
    let _ = writeln!(out, "{:<12} {backlog}", "backlog");
    let published = s
        .value(&counter(POLL_PUBLISHED))
        .map_or_else(na, |v| format!("{v:.0} rows"));
    let per_s = rates
        .published_rows_per_s
        .map_or_else(|| "rate n/a".to_owned(), |r| format!("{r:.1}/s"));
    let mut line = format!("{published}, {per_s}");
    if let Some(deleted) = s
        .value(&counter(POLL_RETENTION_DELETED))
        .filter(|v| *v > 0.0)
    {
        let _ = write!(line, "; {deleted:.0} deleted by retention");
    }
    let _ = writeln!(out, "{:<12} {line}", "published");
    let joined = |pairs: Vec<(String, f64)>| {
        pairs
            .iter()
            .map(|(label, n)| format!("{n:.0} {label}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let batches = s.by_label(&counter(POLL_BATCHES), "result");
    let mut line = if batches.is_empty() {
        "none yet".to_owned()
    } else {
        joined(batches)
    };
    if let Some(n) = s.value(&counter(POLL_NOTIFICATIONS)).filter(|v| *v > 0.0) {
        let _ = write!(line, "; {n:.0} notifications");
    }
    let _ = writeln!(out, "{:<12} {line}", "batches");
    let errors = s.by_label(&counter(POLL_ERRORS), "kind");
    let line = if errors.iter().all(|(_, n)| *n == 0.0) {
        "none".to_owned()
    } else {
        joined(errors.into_iter().filter(|(_, n)| *n > 0.0).collect())
    };
    let _ = writeln!(out, "{:<12} {line}", "poll errors");
}

/// The replication slot, the confirmed and received positions, the lag and
/// the catch-up line.
fn render_slot(s: &Snapshot, rates: &Rates, out: &mut String) {
    let na = || "n/a".to_owned();
    // The slot name is not a metric label; show what the metrics know.
    let slot = match (s.flag(SLOT_ACTIVE), s.wal_status()) {
        (Some(active), status) => format!(
            "{}, wal_status {}",
            if active { "active" } else { "inactive" },
            status.unwrap_or_else(|| "unknown".to_owned())
        ),
        (None, _) => "not polled yet".to_owned(),
    };
    let _ = writeln!(out, "{:<12} {slot}", "slot");
    let _ = writeln!(
        out,
        "{:<12} {}   received {}",
        "confirmed",
        s.confirmed_lsn().map_or_else(na, |l| l.to_string()),
        s.received_lsn().map_or_else(na, |l| l.to_string())
    );
    let bytes = |name: &str| {
        s.integer(name)
            .map_or_else(na, |b| human_bytes(b.max(0) as u64))
    };
    let lag_s = s
        .value(REPLICATION_LAG)
        .map_or_else(na, |v| format!("{v:.1} s"));
    let _ = writeln!(
        out,
        "{:<12} retained {}, confirmed lag {}, replication lag {}",
        "lag",
        bytes(SLOT_RETAINED_WAL),
        bytes(SLOT_CONFIRMED_LAG),
        lag_s
    );
    if let Some(safe) = s.integer(SLOT_SAFE_WAL_SIZE).filter(|v| *v > 0) {
        let _ = writeln!(
            out,
            "{:<12} {} of WAL before the slot is invalidated",
            "",
            human_bytes(safe as u64)
        );
    }
    if let (Some(behind), Some(rate)) = (
        s.integer(SLOT_CONFIRMED_LAG)
            .filter(|b| *b >= CATCH_UP_THRESHOLD_BYTES),
        rates.confirmed_bytes_per_s,
    ) {
        let _ = writeln!(out, "{:<12} {}", "", catch_up_line(behind as u64, rate));
    }
}

/// The pgoutput protocol of the session and the slot's lag alerts.
fn render_protocol(s: &Snapshot, out: &mut String) {
    let count = |name: &str| {
        s.sum(&counter(name))
            .map_or_else(|| "0".to_owned(), |v| format!("{v:.0}"))
    };
    if let Some(proto) = s
        .integer(PGOUTPUT_PROTO_VERSION)
        .and_then(|v| u32::try_from(v).ok())
        .filter(|v| *v > 0)
    {
        let mode = streaming_option(proto).map_or_else(
            || "whole transactions after their commit".to_owned(),
            |m| format!("streaming '{m}'"),
        );
        let _ = writeln!(
            out,
            "{:<12} pgoutput {proto}, {mode}; {} streamed, {} aborted, {} subtransactions rolled back",
            "protocol",
            count(STREAMED_TRANSACTIONS),
            count(STREAM_ABORTS),
            count(SUBTRANSACTION_ABORTS)
        );
    }
    let alerts: Vec<String> = s
        .named(SLOT_ALERT_LEVEL)
        .map(|a| {
            let level = match a.value as i64 {
                0 => "ok",
                1 => "WARNING",
                _ => "CRITICAL",
            };
            format!("{} {level}", a.label("kind").unwrap_or("?"))
        })
        .collect();
    if !alerts.is_empty() {
        let _ = writeln!(out, "{:<12} {}", "alerts", alerts.join(", "));
    }
}

/// The delivery mode, and in exactly-once mode the last committed position,
/// the transactions and whether the producer was fenced.
fn render_mode(s: &Snapshot, out: &mut String) {
    match s.exactly_once() {
        None => {}
        Some(false) => {
            let _ = writeln!(out, "{:<12} at-least-once (idempotent producer)", "mode");
        }
        Some(true) => {
            let _ = writeln!(out, "{:<12} exactly-once (transactional producer)", "mode");
            let position = match s.progress_lsn().filter(|l| l.0 > 0) {
                None => "nothing committed yet".to_owned(),
                Some(lsn) => match s.integer(PROGRESS_COMMITTED_EVENTS).filter(|n| *n > 0) {
                    Some(n) => format!(
                        "committed {lsn} (inside the transaction ending there: {n} events committed)"
                    ),
                    None => format!("committed {lsn}"),
                },
            };
            let _ = writeln!(
                out,
                "{:<12} {position}; {:.0} kafka transactions committed, {:.0} aborted",
                "progress",
                s.kafka_transactions("committed"),
                s.kafka_transactions("aborted")
            );
            if s.flag(PRODUCER_FENCED) == Some(true) {
                let _ = writeln!(
                    out,
                    "{:<12} FENCED: another instance with the same transactional id took over; \
                     this one commits nothing more",
                    ""
                );
            }
        }
    }
}

/// `walrelay status`: prints the view to stdout (see [`run_status_to`]).
pub async fn run_status(opts: StatusOptions) -> Result<(), StatusError> {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    run_status_to(opts, &mut out).await
}

/// Writes the view to `out`. Once: two scrapes [`RATE_WINDOW`] apart (for
/// the rates), then the view; a failed scrape, or an `opts.pipeline` the
/// process does not run, is the error. With `opts.watch`: the screen is
/// cleared and redrawn every interval until Ctrl-C or SIGTERM (then `Ok`),
/// and a failed scrape is shown in place of the view (walrelay may be
/// restarting) rather than ending the loop. `/readyz` is read beside a
/// scrape that shows a pipeline not ready. What the view shows never makes
/// this an error: a failed or unready pipeline is reported, not returned
/// (the `Result` says whether walrelay could be read).
pub async fn run_status_to<W: Write>(opts: StatusOptions, out: &mut W) -> Result<(), StatusError> {
    let first = scrape_with_timeout(&opts.url, opts.timeout).await?;
    let Some(every) = opts.watch else {
        tokio::time::sleep(RATE_WINDOW).await;
        let mut second = scrape_with_timeout(&opts.url, opts.timeout).await?;
        read_readiness(&mut second, opts.timeout).await;
        let view = render_view(&second, Some(&first), opts.pipeline.as_deref())?;
        out.write_all(view.as_bytes())
            .and_then(|()| out.flush())
            .map_err(StatusError::Output)?;
        return Ok(());
    };
    // Installed once, before the first wait, so an interrupt that arrives
    // during a scrape is not lost.
    let mut interrupt = signal(SignalKind::interrupt()).map_err(StatusError::Signal)?;
    let mut terminate = signal(SignalKind::terminate()).map_err(StatusError::Signal)?;
    let mut previous = first;
    read_readiness(&mut previous, opts.timeout).await;
    let mut screen = format!(
        "{CLEAR_SCREEN}{}",
        render_view(&previous, None, opts.pipeline.as_deref())?
    );
    loop {
        out.write_all(screen.as_bytes())
            .and_then(|()| out.flush())
            .map_err(StatusError::Output)?;
        let next = async {
            tokio::time::sleep(every).await;
            let mut current = scrape_with_timeout(&opts.url, opts.timeout).await?;
            read_readiness(&mut current, opts.timeout).await;
            Ok::<_, StatusError>(current)
        };
        let scraped = tokio::select! {
            biased;
            _ = interrupt.recv() => return Ok(()),
            _ = terminate.recv() => return Ok(()),
            scraped = next => scraped,
        };
        // A failed scrape, or a pipeline gone after a restart with another
        // configuration, is shown in place of the view: walrelay may be
        // restarting.
        let view = scraped.and_then(|current| {
            let view = render_view(&current, Some(&previous), opts.pipeline.as_deref());
            previous = current;
            view
        });
        screen = match view {
            Ok(view) => format!("{CLEAR_SCREEN}{view}"),
            Err(e) => format!(
                "{CLEAR_SCREEN}{}\nretrying every {every:?}\n",
                crate::chain::DisplayChain(&e)
            ),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"# HELP walrelay_events Events produced to Kafka
# TYPE walrelay_events counter
walrelay_events_total{pipeline="default",topic="outbox.event.order"} 40
walrelay_events_total{pipeline="default",topic="outbox.event.a\"b"} 2
# TYPE walrelay_transactions counter
walrelay_transactions_total{pipeline="default"} 21
walrelay_delivery_errors_total{pipeline="default",code="MsgSizeTooLarge"} 1
walrelay_reconnects_total{pipeline="default"} 3
walrelay_events_in_flight{pipeline="default"} 5
walrelay_oldest_unacked_event_age_seconds{pipeline="default"} 0.25
walrelay_commit_to_ack_seconds_sum{pipeline="default"} 0.5
walrelay_commit_to_ack_seconds_count{pipeline="default"} 100
walrelay_commit_to_ack_seconds_bucket{pipeline="default",le="+Inf"} 100
walrelay_received_lsn_bytes{pipeline="default"} 9223372036854775000
walrelay_confirmed_lsn_bytes{pipeline="default"} 22817176
walrelay_slot_retained_wal_bytes{pipeline="default"} 1048576
walrelay_slot_confirmed_lag_bytes{pipeline="default"} 33554432
walrelay_slot_wal_status{pipeline="default",status="reserved"} 1
walrelay_slot_wal_status{pipeline="default",status="lost"} 0
walrelay_slot_active{pipeline="default"} 1
walrelay_slot_alert_level{pipeline="default",kind="retained_wal"} 0
walrelay_replication_lag_seconds{pipeline="default"} 0.0
walrelay_build_info{version="0.1.0"} 1
walrelay_up 1
walrelay_ready{pipeline="default"} 1
walrelay_pipeline_up{pipeline="default"} 1
# EOF
"#;

    #[test]
    fn parses_the_page() {
        let s = Snapshot::parse("http://x/metrics", PAGE).unwrap();
        assert_eq!(s.events(), Some(42.0));
        assert_eq!(s.events_by_topic()[1].0, "outbox.event.a\"b");
        assert_eq!(s.confirmed_lsn(), Some(Lsn(22817176)));
        // Exact beyond f64's 53 bits.
        assert_eq!(s.received_lsn(), Some(Lsn(9223372036854775000)));
        assert_eq!(s.wal_status().as_deref(), Some("reserved"));
        assert_eq!(s.version().as_deref(), Some("0.1.0"));
        assert_eq!(s.pipelines(), ["default"]);
        assert_eq!(s.for_pipeline("default").state(), PipelineState::Running);
        // The process's own series carry no pipeline label.
        assert_eq!(s.for_pipeline("default").value(UP), None);
        let bucket = s
            .samples
            .iter()
            .find(|x| x.name == "walrelay_commit_to_ack_seconds_bucket")
            .unwrap();
        assert_eq!(
            (bucket.label("le"), bucket.integer),
            (Some("+Inf"), Some(100))
        );
    }

    #[test]
    fn bad_lines_are_named() {
        let err = Snapshot::parse("u", "ok 1\nbroken{a=\"x} 1\n").unwrap_err();
        assert!(matches!(err, StatusError::Parse { line: 2, .. }), "{err}");
        assert!(Snapshot::parse("u", "x notanumber").is_err());
    }

    #[test]
    fn renders_values_and_rates() {
        let a = Snapshot::parse("http://x/metrics", PAGE).unwrap();
        let mut b = Snapshot::parse(
            "http://x/metrics",
            &PAGE
                .replace("order\"} 40", "order\"} 60")
                .replace("22817176", "22819224"),
        )
        .unwrap();
        b.taken = a.taken + Duration::from_secs(2);
        let text = render(&b, Some(&a));
        // One pipeline: the lines as they were before pipelines, its name
        // added, and no table.
        assert!(
            text.starts_with(
                "walrelay 0.1.0 at http://x/metrics\npipeline     default\nstate        up, ready\n"
            ),
            "{text}"
        );
        assert!(!text.contains("events/s"), "{text}");
        assert!(text.contains("confirmed    0/15C3198"), "{text}");
        assert!(text.contains("62 total, 10.0/s; 21 transactions"), "{text}");
        assert!(text.contains("1 delivery errors, 3 reconnects"), "{text}");
        assert!(text.contains("up, ready"), "{text}");
        assert!(text.contains("active, wal_status reserved"), "{text}");
        assert!(
            text.contains("catching up: 32.0 MiB behind at 1.0 KiB/s, about 9 h 6 min left"),
            "{text}"
        );
        assert!(text.contains("mean 5.0 ms over 100 deliveries"), "{text}");
        assert!(
            !text.contains("pgoutput"),
            "no protocol sample, no line: {text}"
        );
        let c = Snapshot::parse(
            "http://x/metrics",
            &format!(
                "{PAGE}\nwalrelay_pgoutput_proto_version{{pipeline=\"default\"}} 4\n\
                 walrelay_stream_aborts_total{{pipeline=\"default\"}} 2\n\
                 walrelay_subtransaction_aborts_total{{pipeline=\"default\"}} 1\n"
            ),
        )
        .unwrap();
        let text = render(&c, None);
        assert!(
            text.contains(
                "protocol     pgoutput 4, streaming 'parallel'; 0 streamed, 2 aborted, 1 subtransactions rolled back"
            ),
            "{text}"
        );
    }

    #[test]
    fn renders_the_delivery_mode() {
        let s = Snapshot::parse("http://x/metrics", PAGE).unwrap();
        let text = render(&s, None);
        assert!(!text.contains("mode "), "no mode sample, no line: {text}");

        let s = Snapshot::parse(
            "http://x/metrics",
            &format!("{PAGE}\nwalrelay_exactly_once{{pipeline=\"default\"}} 0\n"),
        )
        .unwrap();
        let text = render(&s, None);
        assert!(text.contains("mode         at-least-once"), "{text}");
        assert!(!text.contains("progress"), "{text}");

        let eos = format!(
            "{PAGE}\nwalrelay_exactly_once{{pipeline=\"default\"}} 1\n\
             walrelay_kafka_transactions_total{{pipeline=\"default\",result=\"committed\"}} 35\n\
             walrelay_kafka_transactions_total{{pipeline=\"default\",result=\"aborted\"}} 2\n\
             walrelay_progress_committed_lsn_bytes{{pipeline=\"default\"}} 22817176\n\
             walrelay_progress_committed_events{{pipeline=\"default\"}} 0\n\
             walrelay_producer_fenced{{pipeline=\"default\"}} 0\n"
        );
        let text = render(&Snapshot::parse("http://x/metrics", &eos).unwrap(), None);
        assert!(text.contains("mode         exactly-once"), "{text}");
        assert!(
            text.contains(
                "progress     committed 0/15C2998; 35 kafka transactions committed, 2 aborted"
            ),
            "{text}"
        );
        assert!(!text.contains("FENCED"), "{text}");

        let split = eos
            .replace(
                "walrelay_progress_committed_events{pipeline=\"default\"} 0",
                "walrelay_progress_committed_events{pipeline=\"default\"} 1200",
            )
            .replace(
                "walrelay_producer_fenced{pipeline=\"default\"} 0",
                "walrelay_producer_fenced{pipeline=\"default\"} 1",
            );
        let text = render(&Snapshot::parse("http://x/metrics", &split).unwrap(), None);
        assert!(
            text.contains(
                "committed 0/15C2998 (inside the transaction ending there: 1200 events committed)"
            ),
            "{text}"
        );
        assert!(text.contains("FENCED: another instance"), "{text}");

        let fresh = eos.replace(
            "walrelay_progress_committed_lsn_bytes{pipeline=\"default\"} 22817176",
            "walrelay_progress_committed_lsn_bytes{pipeline=\"default\"} 0",
        );
        let text = render(&Snapshot::parse("http://x/metrics", &fresh).unwrap(), None);
        assert!(
            text.contains("progress     nothing committed yet; 35"),
            "{text}"
        );
    }

    /// A polling instance's page, from the real registry (so the names are
    /// the ones walrelay writes).
    fn poll_page(shards: i64, configure: impl FnOnce(&crate::metrics::Metrics)) -> String {
        let m = crate::metrics::Metrics::new();
        m.poll_shards_held.set(shards);
        configure(&m);
        m.render()
    }

    #[test]
    fn renders_the_polling_source() {
        use crate::metrics::{KindLabel, ResultLabel};
        let m = crate::metrics::Metrics::new();
        m.poll_shards_held.set(2);
        m.poll_unpublished.set(1200);
        m.poll_oldest_unpublished_age.set(185.0);
        m.poll_published.inc_by(5000);
        for (result, n) in [("published", 40), ("empty", 300), ("rolled_back", 1)] {
            m.poll_batches
                .get_or_create(&ResultLabel { result })
                .inc_by(n);
        }
        for (kind, n) in [("claim", 2), ("mark", 1)] {
            m.poll_errors.get_or_create(&KindLabel { kind }).inc_by(n);
        }
        m.poll_retention_deleted.inc_by(10);
        m.poll_notifications.inc_by(12);
        let a = Snapshot::parse("http://x/metrics", &m.render()).unwrap();
        m.poll_published.inc_by(200);
        let mut b = Snapshot::parse("http://x/metrics", &m.render()).unwrap();
        b.taken = a.taken + Duration::from_secs(2);
        assert!(b.is_poll());
        let text = render(&b, Some(&a));
        for line in [
            "source       polling; 2 shards held: publishing",
            "backlog      1200 unpublished rows, the oldest waiting 3 min 5 s; about 12 s to \
             publish at 100.0 rows/s",
            "published    5200 rows, 100.0/s; 10 deleted by retention",
            "batches      300 empty, 40 published, 1 rolled_back; 12 notifications",
            "poll errors  2 claim, 1 mark",
        ] {
            assert!(text.contains(line), "no {line:?} in:\n{text}");
        }
        // Nothing of a slot or the WAL.
        for wal in [
            "slot",
            "confirmed",
            "received",
            "replication lag",
            "pgoutput",
        ] {
            assert!(!text.contains(wal), "{wal:?} in a polling view:\n{text}");
        }
    }

    #[test]
    fn renders_a_polling_hot_standby() {
        let page = poll_page(0, |_| {});
        let s = Snapshot::parse("http://x/metrics", &page).unwrap();
        assert!(s.is_poll());
        let text = render(&s, None);
        assert!(
            text.contains("source       polling; no shard held: a hot standby"),
            "{text}"
        );
        assert!(text.contains("backlog      0 unpublished rows\n"), "{text}");
        assert!(text.contains("published    0 rows, rate n/a"), "{text}");
        assert!(text.contains("batches      none yet"), "{text}");
        assert!(text.contains("poll errors  none"), "{text}");
        assert!(!text.contains("slot"), "{text}");
    }

    #[test]
    fn a_wal_instance_keeps_its_slot_lines() {
        // The registry exports the poll metrics in either mode: once a
        // replication session shows, the view is the WAL one.
        let page = format!(
            "{}walrelay_poll_shards_held{{pipeline=\"default\"}} 0\n\
             walrelay_poll_unpublished_rows{{pipeline=\"default\"}} 0\n",
            PAGE.trim_end_matches("# EOF\n")
        );
        let s = Snapshot::parse("http://x/metrics", &page).unwrap();
        assert!(!s.is_poll());
        let text = render(&s, None);
        assert!(text.contains("active, wal_status reserved"), "{text}");
        assert!(
            !text.contains("poll errors") && !text.contains("backlog"),
            "{text}"
        );

        let page = poll_page(0, |m| {
            m.received_lsn.set(22817176);
        });
        let s = Snapshot::parse("http://x/metrics", &page).unwrap();
        assert!(!s.is_poll(), "a received WAL position is a WAL session");
        assert!(render(&s, None).contains("received 0/15C2998"));

        // The process's own word wins: a WAL instance that has not streamed
        // yet, and a polling one.
        for (kind, poll) in [("wal", false), ("poll", true)] {
            let page = poll_page(0, |m| {
                m.source_info
                    .get_or_create(&crate::metrics::KindLabel { kind })
                    .set(1);
            });
            let s = Snapshot::parse("http://x/metrics", &page).unwrap();
            assert_eq!(s.is_poll(), poll, "{kind}");
        }
    }

    /// A process of two pipelines, from the real registries: `orders` on
    /// the WAL, streaming; `billing` polling, stopped on a fatal error.
    fn two_pipelines() -> (
        crate::metrics::Process,
        [std::sync::Arc<crate::metrics::Metrics>; 2],
    ) {
        use crate::metrics::{KindLabel, TopicLabel};
        use std::sync::atomic::Ordering;
        let p = crate::metrics::Process::new();
        let orders = p.add_pipeline("orders");
        let billing = p.add_pipeline("billing");
        for (m, kind) in [(&orders, "wal"), (&billing, "poll")] {
            m.source_info.get_or_create(&KindLabel { kind }).set(1);
            m.streaming.store(true, Ordering::Relaxed);
            m.kafka_reachable.store(true, Ordering::Relaxed);
        }
        orders.proto_version.set(4);
        orders.slot_active.set(1);
        orders.confirmed_lsn.set(22817176);
        orders.received_lsn.set(22819224);
        orders.slot_confirmed_lag.set(4096);
        orders.replication_lag.set(0.25);
        orders
            .events
            .get_or_create(&TopicLabel {
                topic: "outbox.event.order".into(),
            })
            .inc_by(40);
        billing.poll_shards_held.set(1);
        billing.poll_unpublished.set(1200);
        billing.poll_oldest_unpublished_age.set(185.0);
        billing.poll_published.inc_by(5000);
        billing
            .events
            .get_or_create(&TopicLabel {
                topic: "outbox.event.invoice".into(),
            })
            .inc_by(5000);
        billing.set_ended(Some(
            "the outbox table \"billing.outbox\" was dropped".into(),
        ));
        (p, [orders, billing])
    }

    #[test]
    fn renders_two_pipelines_one_failed() {
        use crate::metrics::TopicLabel;
        let (p, [orders, _billing]) = two_pipelines();
        let a = Snapshot::parse("http://x/metrics", &p.render()).unwrap();
        orders
            .events
            .get_or_create(&TopicLabel {
                topic: "outbox.event.order".into(),
            })
            .inc_by(20);
        orders.confirmed_lsn.set(22819224);
        let mut b = Snapshot::parse("http://x/metrics", &p.render()).unwrap();
        b.taken = a.taken + Duration::from_secs(2);
        assert_eq!(b.pipelines(), ["orders", "billing"]);
        assert_eq!(b.for_pipeline("orders").state(), PipelineState::Running);
        assert_eq!(b.for_pipeline("billing").state(), PipelineState::Failed);
        // What /readyz answers, as the process writes it.
        b.readiness = Some(format!("not ready\n{}", p.not_ready().unwrap()));
        let text = render(&b, Some(&a));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[..5],
            [
                "walrelay ".to_owned() + env!("CARGO_PKG_VERSION") + " at http://x/metrics",
                "state        up; 2 pipelines: 1 running, 1 FAILED".to_owned(),
                "pipeline  source  state    events/s  behind".to_owned(),
                "orders    wal     running      10.0  lag 0.2 s, 4.0 KiB unconfirmed".to_owned(),
                "billing   poll    FAILED        0.0  (stopped)".to_owned(),
            ],
            "{text}"
        );
        // A section per pipeline, each with its own positions and rates.
        let orders_at = text.find("\npipeline orders\n").expect(&text);
        let billing_at = text.find("\npipeline billing\n").expect(&text);
        assert!(orders_at < billing_at, "{text}");
        let (orders_view, billing_view) = (&text[orders_at..billing_at], &text[billing_at..]);
        for line in [
            "state        ready",
            "confirmed    0/15C3198   received 0/15C3198",
            "events       60 total, 10.0/s; 0 transactions",
            "protocol     pgoutput 4, streaming 'parallel'",
            "topics       outbox.event.order 60",
        ] {
            assert!(orders_view.contains(line), "no {line:?} in:\n{orders_view}");
        }
        for line in [
            "state        FAILED: stopped on a fatal error: the outbox table \"billing.outbox\" \
             was dropped",
            "source       polling; stopped, its shard locks released with its connections",
            "backlog      1200 unpublished rows, the oldest waiting 3 min 5 s",
            "events       5000 total, 0.0/s",
            "topics       outbox.event.invoice 5000",
        ] {
            assert!(
                billing_view.contains(line),
                "no {line:?} in:\n{billing_view}"
            );
        }
        // Nothing of one pipeline in the other's section.
        assert!(!orders_view.contains("invoice") && !orders_view.contains("backlog"));
        assert!(!billing_view.contains("slot") && !billing_view.contains("outbox.event.order"));

        // Without /readyz's reasons it still says which one failed.
        b.readiness = None;
        let text = render(&b, Some(&a));
        assert!(
            text.contains("state        FAILED: stopped on a fatal error (the log says which)"),
            "{text}"
        );
    }

    #[test]
    fn one_pipeline_of_several() {
        let (p, _) = two_pipelines();
        let s = Snapshot::parse("http://x/metrics", &p.render()).unwrap();
        let text = render_view(&s, None, Some("billing")).unwrap();
        assert!(
            text.contains("pipeline     billing\nstate        up, FAILED"),
            "{text}"
        );
        assert!(!text.contains("orders"), "{text}");
        let err = render_view(&s, None, Some("shipping")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "walrelay at http://x/metrics runs no pipeline \"shipping\"; it runs orders, billing"
        );
    }

    #[test]
    fn states_from_the_metrics() {
        use crate::metrics::KindLabel;
        use std::sync::atomic::Ordering;
        let state = |configure: &dyn Fn(&crate::metrics::Metrics)| {
            let p = crate::metrics::Process::new();
            configure(&p.add_pipeline("default"));
            let s = Snapshot::parse("http://x/metrics", &p.render()).unwrap();
            (s.for_pipeline("default").state(), render(&s, None))
        };
        let wal = |m: &crate::metrics::Metrics| {
            m.source_info
                .get_or_create(&KindLabel { kind: "wal" })
                .set(1);
        };
        // No replication session yet (a WAL standby waits here too).
        let (st, text) = state(&|m| wal(m));
        assert_eq!(st, PipelineState::Starting);
        assert!(
            text.contains("up, NOT READY: starting, no replication session yet"),
            "{text}"
        );
        // A session ran, then Kafka went away.
        let (st, text) = state(&|m| {
            wal(m);
            m.proto_version.set(2);
        });
        assert_eq!(st, PipelineState::NotReady);
        assert!(
            text.contains("up, NOT READY (see /readyz for why)"),
            "{text}"
        );
        // Streaming with lag at critical.
        let (st, text) = state(&|m| {
            wal(m);
            m.proto_version.set(2);
            m.streaming.store(true, Ordering::Relaxed);
            m.kafka_reachable.store(true, Ordering::Relaxed);
            m.lag_critical.store(true, Ordering::Relaxed);
            m.slot_alert_level
                .get_or_create(&KindLabel {
                    kind: "lag_seconds",
                })
                .set(2);
        });
        assert_eq!(st, PipelineState::NotReady);
        assert!(text.contains("up, NOT READY: lag critical"), "{text}");
        // A polling hot standby.
        let (st, text) = state(&|m| {
            m.source_info
                .get_or_create(&KindLabel { kind: "poll" })
                .set(1);
        });
        assert_eq!(st, PipelineState::Standby);
        assert!(text.contains("up, NOT READY: no shard held"), "{text}");
        // Running.
        let (st, _) = state(&|m| {
            wal(m);
            m.streaming.store(true, Ordering::Relaxed);
            m.kafka_reachable.store(true, Ordering::Relaxed);
        });
        assert_eq!(st, PipelineState::Running);
        // Failed wins over everything.
        let (st, _) = state(&|m| {
            wal(m);
            m.set_ended(Some("boom".into()));
        });
        assert_eq!(st, PipelineState::Failed);
    }

    #[test]
    fn readiness_reasons_by_pipeline() {
        let mut s = Snapshot::parse("http://x/metrics", "walrelay_up 1\n").unwrap();
        assert_eq!(s.not_ready_reason("a"), None);
        s.readiness =
            Some("not ready\npipeline a: failed: x: y\npipeline a b: streaming=false\n".to_owned());
        assert_eq!(s.not_ready_reason("a"), Some("failed: x: y"));
        assert_eq!(s.not_ready_reason("a b"), Some("streaming=false"));
        assert_eq!(s.not_ready_reason("c"), None);
        assert_eq!(
            readyz_url("http://127.0.0.1:9187/metrics").as_deref(),
            Some("http://127.0.0.1:9187/readyz")
        );
        assert_eq!(
            readyz_url("http://proxy/walrelay/metrics").as_deref(),
            Some("http://proxy:80/walrelay/readyz")
        );
        assert_eq!(readyz_url("http://x/other"), None);
    }

    /// `walrelay status` against a live process of two pipelines, one
    /// failed: the view names it and the reason `/readyz` gives, and the
    /// command succeeds (it reports states, it does not judge them).
    #[tokio::test]
    async fn status_of_a_live_process_with_a_failed_pipeline() {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let (p, _pipelines) = two_pipelines();
        let p = std::sync::Arc::new(p);
        let (addr, handle) = crate::metrics::serve("127.0.0.1:0", p, rx).await.unwrap();
        let mut out = Vec::new();
        run_status_to(StatusOptions::for_addr(&addr.to_string()), &mut out)
            .await
            .expect("status reads a process with a failed pipeline");
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("state        up; 2 pipelines: 1 running, 1 FAILED"),
            "{text}"
        );
        assert!(
            text.contains("FAILED: stopped on a fatal error: the outbox table"),
            "{text}"
        );
        let opts = StatusOptions {
            pipeline: Some("nope".into()),
            ..StatusOptions::for_addr(&addr.to_string())
        };
        let err = run_status_to(opts, &mut Vec::new()).await.unwrap_err();
        assert!(matches!(err, StatusError::NoSuchPipeline { .. }), "{err}");
        tx.send(true).unwrap();
        handle.await.unwrap();
    }

    #[test]
    fn urls() {
        assert_eq!(
            split_url("http://127.0.0.1:9187/metrics").unwrap(),
            ("127.0.0.1:9187".into(), "/metrics".into())
        );
        assert_eq!(
            split_url("http://localhost").unwrap(),
            ("localhost:80".into(), "/metrics".into())
        );
        assert!(split_url("https://x/metrics").is_err());
        assert_eq!(
            metrics_url("127.0.0.1:9187"),
            "http://127.0.0.1:9187/metrics"
        );
        assert_eq!(
            dechunk(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n").as_deref(),
            Some(&b"abcde"[..])
        );
    }

    #[tokio::test]
    async fn scrapes_the_live_endpoint() {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let (addr, handle) = crate::metrics::serve("127.0.0.1:0", Default::default(), rx)
            .await
            .unwrap();
        let snap = scrape(&metrics_url(&addr.to_string())).await.unwrap();
        assert_eq!(snap.value(UP), Some(1.0));
        let err = scrape(&format!("http://{addr}/nope")).await.unwrap_err();
        assert!(matches!(err, StatusError::HttpStatus { .. }), "{err}");
        tx.send(true).unwrap();
        handle.await.unwrap();
    }

    #[tokio::test]
    async fn watch_redraws_until_stopped() {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let (addr, handle) = crate::metrics::serve("127.0.0.1:0", Default::default(), rx)
            .await
            .unwrap();
        let opts = StatusOptions {
            watch: Some(Duration::from_millis(50)),
            ..StatusOptions::for_addr(&addr.to_string())
        };
        let mut out = Vec::new();
        let ended =
            tokio::time::timeout(Duration::from_millis(600), run_status_to(opts, &mut out)).await;
        assert!(ended.is_err(), "watch ended by itself: {ended:?}");
        let text = String::from_utf8(out).unwrap();
        assert!(text.matches(CLEAR_SCREEN).count() >= 3, "{text}");
        assert!(text.contains("state        up"), "{text}");
        tx.send(true).unwrap();
        handle.await.unwrap();
    }
}
