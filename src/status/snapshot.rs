//! One reading of a running walrelay's state, when it was taken, and what
//! `walrelay status` makes of it: each pipeline's [`PipelineState`] and the
//! [`Rates`] between two readings.
//!
//! Owns only these judgements over the typed state; it never reads the
//! network itself (the [`Client`] does) and never writes the view.

use std::time::Instant;

use super::client::{Client, ClientError};
use crate::metrics::page::state::{Lifecycle, PipelineView, SourceKind, State};

/// The state of a process, read from `url` at `taken`.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Where it came from.
    pub(crate) url: String,
    /// When it was read (for rates).
    pub(crate) taken: Instant,
    /// What the process said.
    pub state: State,
}

impl Snapshot {
    /// Reads the state at `url` (an `/api/state`) now.
    pub(crate) async fn take(client: &Client, url: &str) -> Result<Snapshot, ClientError> {
        let state = client.state(url).await?;
        Ok(Snapshot {
            url: url.to_owned(),
            taken: Instant::now(),
            state,
        })
    }

    /// The names of the process's pipelines, in the order it started them.
    pub(crate) fn names(&self) -> Vec<&str> {
        self.state
            .pipelines
            .iter()
            .map(|p| p.name.as_str())
            .collect()
    }

    /// The pipeline `name`.
    pub fn pipeline(&self, name: &str) -> Option<&PipelineView> {
        self.state.pipeline(name)
    }
}

/// Where a pipeline is, as `status` words it ([`PipelineState::of`]).
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
    /// Stopped on a fatal error; the process keeps its other pipelines
    /// running.
    Failed,
}

impl PipelineState {
    /// Where `p` is: failed once it stopped on a fatal error, running
    /// while ready, otherwise what its figures tell of why not.
    pub fn of(p: &PipelineView) -> PipelineState {
        if p.state == Lifecycle::Failed {
            return PipelineState::Failed;
        }
        if p.ready {
            return PipelineState::Running;
        }
        if is_poll(p) {
            return match &p.poll {
                Some(poll) if poll.shards_held > 0 => PipelineState::NotReady,
                _ => PipelineState::Standby,
            };
        }
        if lag_critical(p) {
            return PipelineState::NotReady;
        }
        match &p.protocol {
            Some(protocol) if protocol.pgoutput_version > 0 => PipelineState::NotReady,
            _ => PipelineState::Starting,
        }
    }

    /// One word for the table of pipelines.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            PipelineState::Running => "running",
            PipelineState::Starting => "starting",
            PipelineState::Standby => "standby",
            PipelineState::NotReady => "not ready",
            PipelineState::Failed => "FAILED",
        }
    }
}

/// Whether `p` runs the polling source (as it says; before it says, it is
/// shown as a WAL pipeline that has not streamed yet).
pub(crate) fn is_poll(p: &PipelineView) -> bool {
    p.source == Some(SourceKind::Poll)
}

/// Whether a lag threshold of `p`'s slot is at critical.
pub(super) fn lag_critical(p: &PipelineView) -> bool {
    p.slot
        .as_ref()
        .is_some_and(|s| s.alert_levels.values().any(|level| *level >= 2))
}

/// Rates of one pipeline between two readings of the same process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    /// Events per second.
    pub(crate) events_per_s: Option<f64>,
    /// Confirmed WAL bytes per second.
    pub(crate) confirmed_bytes_per_s: Option<f64>,
    /// Rows the polling source published per second.
    pub(crate) published_rows_per_s: Option<f64>,
}

impl Rates {
    /// Rates from `previous` to `current`, `seconds` apart; `None` fields
    /// when a counter went backwards (a restart) or no time passed.
    pub(crate) fn between(previous: &PipelineView, current: &PipelineView, seconds: f64) -> Rates {
        if seconds <= 0.0 {
            return Rates::default();
        }
        let rate = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b >= a => Some((b - a) / seconds),
            _ => None,
        };
        let published = |p: &PipelineView| p.poll.as_ref().map(|poll| poll.published_rows as f64);
        let confirmed = |p: &PipelineView| p.confirmed_lsn.map(|l| l.0 as f64);
        Rates {
            events_per_s: rate(
                Some(previous.events_total as f64),
                Some(current.events_total as f64),
            ),
            confirmed_bytes_per_s: rate(confirmed(previous), confirmed(current)),
            published_rows_per_s: rate(published(previous), published(current)),
        }
    }

    /// The rates of pipeline `name` from `previous` to `current`.
    pub(crate) fn of_pipeline(previous: &Snapshot, current: &Snapshot, name: &str) -> Rates {
        let seconds = current
            .taken
            .saturating_duration_since(previous.taken)
            .as_secs_f64();
        match (previous.pipeline(name), current.pipeline(name)) {
            (Some(a), Some(b)) => Rates::between(a, b, seconds),
            _ => Rates::default(),
        }
    }
}
