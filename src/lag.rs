//! The slot lag monitor: how much WAL walrelay's slot makes the primary keep,
//! and how far behind it is, on its own SQL connection.
//!
//! Owns the polling of `pg_replication_slots`, the warning and critical
//! thresholds for retained WAL bytes and lag seconds (each crossing logged
//! once, with the numbers), the slot gauges, and the one decision it may
//! take on its own: a slot whose `wal_status` is `unreserved` or `lost` stops
//! walrelay, because events are about to be or have been lost. It never
//! touches the replication stream or the checkpoint.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde::Deserialize;
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::checkpoint::SharedTracker;
use crate::metrics::{KindLabel, Metrics, StatusLabel};
use crate::postgres::catalog;
use crate::postgres::replication::ConnectParams;

/// Confirmed lag above which each poll logs a catch-up progress line.
pub const CATCH_UP_LOG_BYTES: u64 = 64 << 20;
/// Default poll interval.
pub const DEFAULT_POLL_INTERVAL_MS: u64 = 10_000;
/// Default warning threshold for retained WAL: 1 GiB.
pub const DEFAULT_RETAINED_WARNING_BYTES: u64 = 1 << 30;
/// Default critical threshold for retained WAL: 8 GiB.
pub const DEFAULT_RETAINED_CRITICAL_BYTES: u64 = 8 << 30;
/// Default warning threshold for lag: 60 s.
pub const DEFAULT_LAG_WARNING_SECONDS: f64 = 60.0;
/// Default critical threshold for lag: 10 min.
pub const DEFAULT_LAG_CRITICAL_SECONDS: f64 = 600.0;

/// Thresholds and polling.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LagConfig {
    /// Milliseconds between polls of `pg_replication_slots`.
    #[serde(default = "default_poll_interval_ms")]
    pub poll_interval_ms: u64,
    /// Retained WAL (`pg_current_wal_lsn() - restart_lsn`) that raises a warning.
    #[serde(default = "default_retained_warning")]
    pub retained_wal_warning_bytes: u64,
    /// Retained WAL that is critical (and makes `/readyz` fail).
    #[serde(default = "default_retained_critical")]
    pub retained_wal_critical_bytes: u64,
    /// Replication lag (now - commit time of the oldest unconfirmed event) that raises a warning.
    #[serde(default = "default_lag_warning")]
    pub lag_warning_seconds: f64,
    /// Replication lag that is critical.
    #[serde(default = "default_lag_critical")]
    pub lag_critical_seconds: f64,
}

impl Default for LagConfig {
    fn default() -> Self {
        LagConfig {
            poll_interval_ms: DEFAULT_POLL_INTERVAL_MS,
            retained_wal_warning_bytes: DEFAULT_RETAINED_WARNING_BYTES,
            retained_wal_critical_bytes: DEFAULT_RETAINED_CRITICAL_BYTES,
            lag_warning_seconds: DEFAULT_LAG_WARNING_SECONDS,
            lag_critical_seconds: DEFAULT_LAG_CRITICAL_SECONDS,
        }
    }
}

impl LagConfig {
    /// Checks the thresholds; the message names the key.
    pub fn validate(&self) -> Result<(), String> {
        if self.poll_interval_ms == 0 {
            return Err("lag.poll_interval_ms must be above 0".into());
        }
        if self.retained_wal_warning_bytes > self.retained_wal_critical_bytes {
            return Err(
                "lag.retained_wal_warning_bytes must not exceed lag.retained_wal_critical_bytes"
                    .into(),
            );
        }
        if !(self.lag_warning_seconds >= 0.0
            && self.lag_warning_seconds <= self.lag_critical_seconds)
        {
            return Err(
                "lag.lag_warning_seconds must be between 0 and lag.lag_critical_seconds".into(),
            );
        }
        Ok(())
    }
}

fn default_poll_interval_ms() -> u64 {
    DEFAULT_POLL_INTERVAL_MS
}
fn default_retained_warning() -> u64 {
    DEFAULT_RETAINED_WARNING_BYTES
}
fn default_retained_critical() -> u64 {
    DEFAULT_RETAINED_CRITICAL_BYTES
}
fn default_lag_warning() -> f64 {
    DEFAULT_LAG_WARNING_SECONDS
}
fn default_lag_critical() -> f64 {
    DEFAULT_LAG_CRITICAL_SECONDS
}

/// Why the monitor stopped walrelay.
#[derive(Debug, thiserror::Error)]
pub enum LagError {
    /// The slot is about to lose, or has lost, WAL it needs.
    #[error(
        "replication slot {slot} has wal_status = {status}: {what}. walrelay stops so that nothing is confirmed past \
         missing WAL. To recover: if the status is unreserved, raise max_slot_wal_keep_size (or free disk) and restart \
         walrelay at once; if it is lost, the events written since {confirmed} are gone from WAL: drop and recreate the \
         slot, restart walrelay, and re-publish the outbox rows written in between from the application's records"
    )]
    SlotInvalidated {
        /// Slot name.
        slot: String,
        /// `unreserved` or `lost`.
        status: String,
        /// What that means.
        what: &'static str,
        /// The slot's last confirmed position.
        confirmed: String,
    },
}

/// Alert level of one kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Below the warning threshold.
    Ok = 0,
    /// At or above warning.
    Warning = 1,
    /// At or above critical.
    Critical = 2,
}

/// Level of `value` against two thresholds.
pub fn level<T: PartialOrd>(value: T, warning: T, critical: T) -> Level {
    if value >= critical {
        Level::Critical
    } else if value >= warning {
        Level::Warning
    } else {
        Level::Ok
    }
}

/// Tracks alert levels so each crossing is logged once.
#[derive(Debug)]
pub struct Alerts {
    retained: Level,
    lag: Level,
}

impl Default for Alerts {
    fn default() -> Self {
        Alerts {
            retained: Level::Ok,
            lag: Level::Ok,
        }
    }
}

impl Alerts {
    /// Applies one observation; logs and sets gauges on changes. Returns
    /// whether any kind is critical.
    pub fn observe(
        &mut self,
        m: &Metrics,
        cfg: &LagConfig,
        slot: &str,
        retained_bytes: i64,
        lag_seconds: f64,
    ) -> bool {
        let retained = level(
            retained_bytes.max(0) as u64,
            cfg.retained_wal_warning_bytes,
            cfg.retained_wal_critical_bytes,
        );
        if retained != self.retained {
            match retained {
                Level::Critical => error!(
                    slot,
                    retained_bytes,
                    critical_bytes = cfg.retained_wal_critical_bytes,
                    "slot retains critical amounts of WAL on the primary"
                ),
                Level::Warning => warn!(
                    slot,
                    retained_bytes,
                    warning_bytes = cfg.retained_wal_warning_bytes,
                    "slot retains more WAL than the warning threshold"
                ),
                Level::Ok => info!(
                    slot,
                    retained_bytes, "retained WAL back below the warning threshold"
                ),
            }
            self.retained = retained;
        }
        let lag = level(
            lag_seconds,
            cfg.lag_warning_seconds,
            cfg.lag_critical_seconds,
        );
        if lag != self.lag {
            match lag {
                Level::Critical => error!(
                    slot,
                    lag_seconds,
                    critical_seconds = cfg.lag_critical_seconds,
                    "replication lag is critical"
                ),
                Level::Warning => warn!(
                    slot,
                    lag_seconds,
                    warning_seconds = cfg.lag_warning_seconds,
                    "replication lag above the warning threshold"
                ),
                Level::Ok => info!(
                    slot,
                    lag_seconds, "replication lag back below the warning threshold"
                ),
            }
            self.lag = lag;
        }
        m.slot_alert_level
            .get_or_create(&KindLabel {
                kind: "retained_wal",
            })
            .set(retained as i64);
        m.slot_alert_level
            .get_or_create(&KindLabel {
                kind: "lag_seconds",
            })
            .set(lag as i64);
        retained == Level::Critical || lag == Level::Critical
    }
}

/// Seconds since the oldest unconfirmed event's commit; 0 when caught up.
pub fn replication_lag_seconds(tracker: Option<&SharedTracker>) -> f64 {
    tracker.map_or(0.0, |t| {
        t.pending_age_seconds(crate::clock::unix_now_micros())
    })
}

/// Polls until shutdown; returns an error when the slot is invalidated.
/// Connection problems are logged and retried at the next poll.
#[allow(clippy::too_many_arguments)]
pub async fn monitor(
    m: std::sync::Arc<Metrics>,
    cfg: LagConfig,
    params: ConnectParams,
    slot: String,
    tracker: watch::Receiver<Option<SharedTracker>>,
    kafka_probe: impl Fn() -> bool + Send + Sync + 'static,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), LagError> {
    let probe = std::sync::Arc::new(kafka_probe);
    let mut client: Option<tokio_postgres::Client> = None;
    let mut alerts = Alerts::default();
    let mut warned_unlimited = false;
    // (when, confirmed position) of the previous poll, for the catch-up rate.
    let mut previous: Option<(std::time::Instant, u64)> = None;
    let mut ticker = tokio::time::interval(Duration::from_millis(cfg.poll_interval_ms));
    loop {
        tokio::select! {
            biased;
            _ = shutdown.changed() => return Ok(()),
            _ = ticker.tick() => {}
        }
        let p = probe.clone();
        let reachable = tokio::task::spawn_blocking(move || p())
            .await
            .unwrap_or(false);
        m.kafka_reachable.store(reachable, Ordering::Relaxed);

        if client.as_ref().is_none_or(|c| c.is_closed()) {
            client = catalog::connect(&params).await.ok();
        }
        let Some(c) = client.as_ref() else { continue };
        // Every round trip is bounded: on a black-holed path the old
        // connection never answers, and the monitor must recover with it.
        let bound = catalog::sql_timeout(&params);
        if !warned_unlimited {
            let shown = tokio::time::timeout(bound, catalog::max_slot_wal_keep_size(c)).await;
            if shown.is_err() {
                warn!(after = ?bound, "slot lag poll got no answer; reconnecting at the next interval");
                client = None;
                continue;
            }
            if let Ok(Ok(value)) = shown {
                if value == "-1" {
                    warn!(
                        "max_slot_wal_keep_size is unlimited: a stuck slot can fill the primary's disk; \
                         set a bound (walrelay stops cleanly if its slot is ever invalidated)"
                    );
                }
                warned_unlimited = true;
            }
        }
        let lag_seconds = replication_lag_seconds(tracker.borrow().as_ref());
        m.replication_lag.set(lag_seconds);
        let Ok(polled) = tokio::time::timeout(bound, catalog::poll_slot(c, &slot)).await else {
            warn!(after = ?bound, "slot lag poll got no answer; reconnecting at the next interval");
            client = None;
            continue;
        };
        match polled {
            Ok(Some(s)) => {
                m.slot_active.set(i64::from(s.active));
                m.slot_retained_wal.set(s.retained_bytes.unwrap_or(0));
                m.slot_confirmed_lag.set(s.confirmed_lag_bytes.unwrap_or(0));
                m.slot_safe_wal_size.set(s.safe_wal_size.unwrap_or(0));
                for status in ["reserved", "extended", "unreserved", "lost"] {
                    let current = s.wal_status.as_deref() == Some(status);
                    m.slot_wal_status
                        .get_or_create(&StatusLabel {
                            status: status.into(),
                        })
                        .set(i64::from(current));
                }
                let behind = s.confirmed_lag_bytes.unwrap_or(0).max(0) as u64;
                let confirmed = s
                    .confirmed
                    .as_deref()
                    .and_then(|t| t.parse::<walrelay_proto::Lsn>().ok())
                    .map(u64::from);
                if let Some(now_pos) = confirmed {
                    let now = std::time::Instant::now();
                    if let Some((then, then_pos)) = previous {
                        if behind >= CATCH_UP_LOG_BYTES {
                            let secs = now.duration_since(then).as_secs_f64().max(1e-3);
                            let rate = now_pos.saturating_sub(then_pos) as f64 / secs;
                            info!(
                                slot,
                                behind_bytes = behind,
                                "{}",
                                crate::human::catch_up_line(behind, rate)
                            );
                        }
                    }
                    previous = Some((now, now_pos));
                }
                let critical =
                    alerts.observe(&m, &cfg, &slot, s.retained_bytes.unwrap_or(0), lag_seconds);
                m.lag_critical.store(critical, Ordering::Relaxed);
                let what = match s.wal_status.as_deref() {
                    Some("unreserved") => Some("the WAL it needs exceeds max_slot_wal_keep_size and will be removed at the next checkpoint"),
                    Some("lost") => Some("the WAL it needs has been removed; the slot is invalidated"),
                    _ => None,
                };
                if let Some(what) = what {
                    return Err(LagError::SlotInvalidated {
                        slot,
                        status: s.wal_status.unwrap_or_default(),
                        what,
                        confirmed: s.confirmed.unwrap_or_else(|| "?".into()),
                    });
                }
            }
            Ok(None) => {
                m.slot_active.set(0);
            }
            Err(e) => {
                warn!(error = %e, "slot lag poll failed; retrying at the next interval");
                client = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels() {
        assert_eq!(level(5, 10, 20), Level::Ok);
        assert_eq!(level(10, 10, 20), Level::Warning);
        assert_eq!(level(25, 10, 20), Level::Critical);
    }

    #[test]
    fn alerts_fire_once_and_clear() {
        let cfg = LagConfig {
            retained_wal_warning_bytes: 100,
            retained_wal_critical_bytes: 1000,
            ..LagConfig::default()
        };
        let mut a = Alerts::default();
        assert!(!a.observe(&Metrics::new(), &cfg, "s", 150, 0.0));
        assert_eq!(a.retained, Level::Warning);
        assert!(a.observe(&Metrics::new(), &cfg, "s", 5000, 0.0));
        assert!(!a.observe(&Metrics::new(), &cfg, "s", 0, 0.0));
        assert_eq!(a.retained, Level::Ok);
    }

    #[test]
    fn validate_names_keys() {
        let bad = LagConfig {
            retained_wal_warning_bytes: 10,
            retained_wal_critical_bytes: 5,
            ..LagConfig::default()
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .contains("lag.retained_wal_warning_bytes"));
    }
}
