//! The view of `walrelay status`: a header, then for one pipeline its
//! lines, for several a table of them all and a section each.
//!
//! Owns the words and the layout: the state phrases (with the reason
//! `/readyz` gives, carried in the state), the slot and positions or the
//! polling source's shards and backlog, the catch-up line while a backlog
//! drains, events, latency, errors, protocol and topics. It writes a
//! `String` and never reads the network.

use std::fmt::Write as _;

use super::snapshot::{is_poll, lag_critical, PipelineState, Rates, Snapshot};
use super::StatusError;
use crate::human::{catch_up_line, human_bytes, human_duration};
use crate::metrics::page::state::{PipelineView, PollView, ProtocolView, SlotView};
use crate::postgres::wal::streaming_option;

/// Confirmed lag below which no catch-up line is shown: one WAL segment.
/// The lag gauge is polled (every `lag.poll_interval_ms`), so smaller values
/// are mostly its staleness, not a backlog.
pub(crate) const CATCH_UP_THRESHOLD_BYTES: i64 = 16 << 20;

/// The human-readable view of `current`, every pipeline, with rates
/// against `previous` (a reading of the same process a moment earlier)
/// when given.
pub fn render(current: &Snapshot, previous: Option<&Snapshot>) -> String {
    render_pipelines(current, previous, &current.names())
}

/// The view of `current` as [`render`] writes it, or of the pipeline
/// `only` alone; an error when the process runs no such pipeline.
pub(crate) fn render_view(
    current: &Snapshot,
    previous: Option<&Snapshot>,
    only: Option<&str>,
) -> Result<String, StatusError> {
    let names = current.names();
    let Some(name) = only else {
        return Ok(render_pipelines(current, previous, &names));
    };
    if names.contains(&name) {
        return Ok(render_pipelines(current, previous, &[name]));
    }
    Err(StatusError::NoSuchPipeline {
        url: current.url.clone(),
        name: name.to_owned(),
        known: if names.is_empty() {
            "none yet".to_owned()
        } else {
            names.join(", ")
        },
    })
}

/// The header, then for one pipeline its lines (its name first), for
/// several a table of them all and a section each.
fn render_pipelines(current: &Snapshot, previous: Option<&Snapshot>, names: &[&str]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "walrelay {} at {}", current.state.version, current.url);
    if let Some(group) = &current.state.group {
        render_group(group, &mut out);
    }
    let sections: Vec<Section> = names
        .iter()
        .filter_map(|name| Section::new(current, previous, name))
        .collect();
    match sections.as_slice() {
        [] => {
            let _ = writeln!(out, "{:<12} up; no pipeline started yet", "state");
        }
        [one] => {
            let _ = writeln!(out, "{:<12} {}", "pipeline", one.view.name);
            let _ = writeln!(out, "{:<12} up, {}", "state", one.phrase());
            one.render_body(&mut out);
        }
        several => {
            let _ = writeln!(
                out,
                "{:<12} up; {} pipelines: {}",
                "state",
                several.len(),
                state_counts(several)
            );
            render_table(several, &mut out);
            for section in several {
                let _ = writeln!(out, "\npipeline {}", section.view.name);
                let _ = writeln!(out, "{:<12} {}", "state", section.phrase());
                section.render_body(&mut out);
            }
        }
    }
    out
}

/// A distributed worker's group: this worker, then every worker with
/// the connectors it runs.
fn render_group(group: &crate::metrics::page::state::GroupView, out: &mut String) {
    let _ = writeln!(
        out,
        "{:<12} {} (generation {}); this worker {}{}",
        "group",
        group.group_id,
        group.generation,
        group.worker_id,
        if group.leader { ", the leader" } else { "" }
    );
    for w in &group.workers {
        let runs = if w.connectors.is_empty() {
            "nothing".to_owned()
        } else {
            w.connectors.join(", ")
        };
        let _ = writeln!(out, "{:<12} {} runs {}", "worker", w.worker_id, runs);
    }
}

/// One pipeline's figures, its rates and its state.
struct Section<'a> {
    view: &'a PipelineView,
    rates: Rates,
    state: PipelineState,
}

impl<'a> Section<'a> {
    fn new(current: &'a Snapshot, previous: Option<&Snapshot>, name: &str) -> Option<Section<'a>> {
        let view = current.pipeline(name)?;
        Some(Section {
            view,
            rates: previous
                .map(|p| Rates::of_pipeline(p, current, name))
                .unwrap_or_default(),
            state: PipelineState::of(view),
        })
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
        render_pipeline_body(self.view, &self.rates, out);
    }

    /// The state in words, with the reason `/readyz` gives when the state
    /// carries it.
    fn phrase(&self) -> String {
        let p = self.view;
        let reason = p.not_ready_reason.as_deref();
        let why = |reason: Option<&str>| match reason {
            Some(r) => format!(" ({r})"),
            None => " (see /readyz for why)".to_owned(),
        };
        match self.state {
            PipelineState::Running => "ready".to_owned(),
            PipelineState::Failed => match &p.error {
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
            PipelineState::NotReady if lag_critical(p) => {
                format!("NOT READY: lag critical{}", why(reason))
            }
            PipelineState::NotReady => format!("NOT READY{}", why(reason)),
        }
    }
}

/// `1 running, 1 FAILED`: how many pipelines are in each state.
fn state_counts(sections: &[Section]) -> String {
    use PipelineState::*;
    [Running, Starting, Standby, NotReady, Failed]
        .into_iter()
        .filter_map(|state| {
            let n = sections.iter().filter(|s| s.state == state).count();
            (n > 0).then(|| format!("{n} {}", state.as_str()))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A row per pipeline: source, state, events per second, and how far
/// behind it is (replication lag and unconfirmed WAL, or the backlog).
fn render_table(sections: &[Section], out: &mut String) {
    let na = || "n/a".to_owned();
    let rows: Vec<[String; 5]> = sections
        .iter()
        .map(|s| {
            let p = s.view;
            let poll = is_poll(p);
            [
                p.name.clone(),
                if poll { "poll" } else { "wal" }.to_owned(),
                s.state.as_str().to_owned(),
                s.rates.events_per_s.map_or_else(na, |r| format!("{r:.1}")),
                behind(s),
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

/// How far behind a pipeline is, for the table.
fn behind(s: &Section) -> String {
    let na = || "n/a".to_owned();
    let p = s.view;
    // A failed pipeline's gauges stopped with it: its lag is not 0, it is
    // unknown (and growing).
    if s.state == PipelineState::Failed {
        return "(stopped)".to_owned();
    }
    if is_poll(p) {
        let rows = p
            .unpublished_rows
            .map_or_else(na, |n| format!("{n} unpublished rows"));
        return match (p.unpublished_rows, p.oldest_unpublished_age_seconds) {
            (Some(n), Some(age)) if n > 0 => {
                format!("{rows}, the oldest {}", human_duration(age))
            }
            _ => rows,
        };
    }
    let lag = p
        .replication_lag_seconds
        .map_or_else(na, |v| format!("{v:.1} s"));
    let unconfirmed = p
        .confirmed_lag_bytes
        .map_or_else(na, |b| human_bytes(b.max(0) as u64));
    format!("lag {lag}, {unconfirmed} unconfirmed")
}

/// One pipeline's lines after its state: mode, source (slot and positions,
/// or the polling view), events, in flight, latency, errors, protocol,
/// topics.
fn render_pipeline_body(p: &PipelineView, rates: &Rates, out: &mut String) {
    render_mode(p, out);
    match (&p.poll, &p.slot) {
        (Some(poll), _) if is_poll(p) => render_poll(p, poll, rates, out),
        (_, Some(slot)) => render_slot(p, slot, rates, out),
        _ => {}
    }
    let per_s = rates
        .events_per_s
        .map_or_else(|| "rate n/a".to_owned(), |r| format!("{r:.1}/s"));
    let _ = writeln!(
        out,
        "{:<12} {} total, {per_s}; {} transactions",
        "events", p.events_total, p.transactions_total
    );
    let _ = writeln!(
        out,
        "{:<12} {} events, oldest unacked {:.1} s",
        "in flight", p.in_flight, p.oldest_unacked_age_seconds
    );
    let latency = &p.commit_to_ack;
    if latency.count > 0 {
        let _ = writeln!(
            out,
            "{:<12} mean {:.1} ms over {} deliveries",
            "commit-ack",
            latency.sum_seconds / latency.count as f64 * 1000.0,
            latency.count
        );
    }
    let _ = writeln!(
        out,
        "{:<12} {} delivery errors, {} reconnects, {} filtered changes",
        "errors", p.delivery_errors_total, p.reconnects_total, p.filtered_total
    );
    if let (Some(protocol), Some(slot)) = (&p.protocol, &p.slot) {
        if !is_poll(p) {
            render_protocol(protocol, slot, out);
        }
    }
    render_topics(p, out);
}

/// Events by topic, largest first, the first ten.
fn render_topics(p: &PipelineView, out: &mut String) {
    const SHOWN: usize = 10;
    let mut topics: Vec<(&String, &u64)> = p.events_by_topic.iter().collect();
    if topics.is_empty() {
        return;
    }
    topics.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    let mut shown: Vec<String> = topics
        .iter()
        .take(SHOWN)
        .map(|(t, n)| format!("{t} {n}"))
        .collect();
    if topics.len() > SHOWN {
        shown.push(format!("{} more", topics.len() - SHOWN));
    }
    let _ = writeln!(out, "{:<12} {}", "topics", shown.join(", "));
}

/// The polling source: the shards this process holds, the backlog and its
/// oldest row, rows published, batches by result, errors by kind.
fn render_poll(p: &PipelineView, poll: &PollView, rates: &Rates, out: &mut String) {
    let source = match poll.shards_held.max(0) {
        // The shard workers ended with the pipeline, their connections and
        // so their session locks with them.
        _ if PipelineState::of(p) == PipelineState::Failed => {
            "polling; stopped, its shard locks released with its connections".to_owned()
        }
        0 => "polling; no shard held: a hot standby (another walrelay holds the shard locks), \
              or not connected yet"
            .to_owned(),
        1 => "polling; 1 shard held: publishing".to_owned(),
        n => format!("polling; {n} shards held: publishing"),
    };
    let _ = writeln!(out, "{:<12} {source}", "source");
    let unpublished = p.unpublished_rows;
    let mut backlog =
        unpublished.map_or_else(|| "n/a".to_owned(), |v| format!("{v} unpublished rows"));
    match (unpublished, p.oldest_unpublished_age_seconds) {
        (Some(n), Some(age)) if n > 0 => {
            let _ = write!(backlog, ", the oldest waiting {}", human_duration(age));
        }
        _ => {}
    }
    if let (Some(n), Some(rate)) = (unpublished.filter(|n| *n > 0), rates.published_rows_per_s) {
        if rate > 0.0 {
            let _ = write!(
                backlog,
                "; about {} to publish at {rate:.1} rows/s",
                human_duration(n as f64 / rate)
            );
        }
    }
    let _ = writeln!(out, "{:<12} {backlog}", "backlog");
    let per_s = rates
        .published_rows_per_s
        .map_or_else(|| "rate n/a".to_owned(), |r| format!("{r:.1}/s"));
    let mut line = format!("{} rows, {per_s}", poll.published_rows);
    if poll.retention_deleted_rows > 0 {
        let _ = write!(
            line,
            "; {} deleted by retention",
            poll.retention_deleted_rows
        );
    }
    let _ = writeln!(out, "{:<12} {line}", "published");
    let joined = |pairs: Vec<(&String, &u64)>| {
        pairs
            .iter()
            .map(|(label, n)| format!("{n} {label}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut line = if poll.batches.is_empty() {
        "none yet".to_owned()
    } else {
        joined(poll.batches.iter().collect())
    };
    if poll.notifications > 0 {
        let _ = write!(line, "; {} notifications", poll.notifications);
    }
    let _ = writeln!(out, "{:<12} {line}", "batches");
    let errors: Vec<(&String, &u64)> = poll.errors.iter().filter(|(_, n)| **n > 0).collect();
    let line = if errors.is_empty() {
        "none".to_owned()
    } else {
        joined(errors)
    };
    let _ = writeln!(out, "{:<12} {line}", "poll errors");
}

/// The replication slot, the confirmed and received positions, the lag and
/// the catch-up line.
fn render_slot(p: &PipelineView, slot: &SlotView, rates: &Rates, out: &mut String) {
    let na = || "n/a".to_owned();
    // The slot name is not a figure of the state; show what it knows.
    let _ = writeln!(
        out,
        "{:<12} {}, wal_status {}",
        "slot",
        if slot.active { "active" } else { "inactive" },
        slot.wal_status.as_deref().unwrap_or("unknown")
    );
    let _ = writeln!(
        out,
        "{:<12} {}   received {}",
        "confirmed",
        p.confirmed_lsn.map_or_else(na, |l| l.to_string()),
        p.received_lsn.map_or_else(na, |l| l.to_string())
    );
    let bytes = |b: Option<i64>| b.map_or_else(na, |b| human_bytes(b.max(0) as u64));
    let lag_s = p
        .replication_lag_seconds
        .map_or_else(na, |v| format!("{v:.1} s"));
    let _ = writeln!(
        out,
        "{:<12} retained {}, confirmed lag {}, replication lag {}",
        "lag",
        bytes(p.retained_wal_bytes),
        bytes(p.confirmed_lag_bytes),
        lag_s
    );
    if slot.safe_wal_size_bytes > 0 {
        let _ = writeln!(
            out,
            "{:<12} {} of WAL before the slot is invalidated",
            "",
            human_bytes(slot.safe_wal_size_bytes as u64)
        );
    }
    if let (Some(behind), Some(rate)) = (
        p.confirmed_lag_bytes
            .filter(|b| *b >= CATCH_UP_THRESHOLD_BYTES),
        rates.confirmed_bytes_per_s,
    ) {
        let _ = writeln!(out, "{:<12} {}", "", catch_up_line(behind as u64, rate));
    }
}

/// The pgoutput protocol of the session and the slot's lag alerts.
fn render_protocol(protocol: &ProtocolView, slot: &SlotView, out: &mut String) {
    if let Some(version) = u32::try_from(protocol.pgoutput_version)
        .ok()
        .filter(|v| *v > 0)
    {
        let mode = streaming_option(version).map_or_else(
            || "whole transactions after their commit".to_owned(),
            |m| format!("streaming '{m}'"),
        );
        let _ = writeln!(
            out,
            "{:<12} pgoutput {version}, {mode}; {} streamed, {} aborted, {} subtransactions rolled back",
            "protocol",
            protocol.streamed_transactions,
            protocol.stream_aborts,
            protocol.subtransaction_aborts
        );
    }
    let alerts: Vec<String> = slot
        .alert_levels
        .iter()
        .map(|(kind, level)| {
            let level = match level {
                0 => "ok",
                1 => "WARNING",
                _ => "CRITICAL",
            };
            format!("{kind} {level}")
        })
        .collect();
    if !alerts.is_empty() {
        let _ = writeln!(out, "{:<12} {}", "alerts", alerts.join(", "));
    }
}

/// The delivery mode, and in exactly-once mode the last committed position,
/// the transactions and whether the producer was fenced.
fn render_mode(p: &PipelineView, out: &mut String) {
    match &p.broker {
        Some(b) if b.name != "kafka" => {
            let _ = writeln!(
                out,
                "{:<12} {}: {} acknowledged, {} refused, {} retries",
                "broker", b.name, b.acked_total, b.refused_total, b.retries_total
            );
            let _ = writeln!(out, "{:<12} at-least-once", "mode");
            return;
        }
        Some(b) => {
            let _ = writeln!(out, "{:<12} {}", "broker", b.name);
        }
        None => {}
    }
    let Some(eos) = &p.exactly_once else {
        let _ = writeln!(out, "{:<12} at-least-once (idempotent producer)", "mode");
        return;
    };
    let _ = writeln!(out, "{:<12} exactly-once (transactional producer)", "mode");
    let position = match eos.committed_lsn {
        lsn if lsn.0 == 0 => "nothing committed yet".to_owned(),
        lsn if eos.committed_events > 0 => format!(
            "committed {lsn} (inside the transaction ending there: {} events committed)",
            eos.committed_events
        ),
        lsn => format!("committed {lsn}"),
    };
    let _ = writeln!(
        out,
        "{:<12} {position}; {} kafka transactions committed, {} aborted",
        "progress", eos.transactions_committed, eos.transactions_aborted
    );
    if eos.producer_fenced {
        let _ = writeln!(
            out,
            "{:<12} FENCED: another instance with the same transactional id took over; \
             this one commits nothing more",
            ""
        );
    }
}
