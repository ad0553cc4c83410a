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
pub(crate) const CATCH_UP_LOG_BYTES: u64 = 64 << 20;
/// Default poll interval.
pub(crate) const DEFAULT_POLL_INTERVAL_MS: u64 = 10_000;
/// Default warning threshold for retained WAL: 1 GiB.
pub(crate) const DEFAULT_RETAINED_WARNING_BYTES: u64 = 1 << 30;
/// Default critical threshold for retained WAL: 8 GiB.
pub(crate) const DEFAULT_RETAINED_CRITICAL_BYTES: u64 = 8 << 30;
/// Default warning threshold for lag: 60 s.
pub(crate) const DEFAULT_LAG_WARNING_SECONDS: f64 = 60.0;
/// Default critical threshold for lag: 10 min.
pub(crate) const DEFAULT_LAG_CRITICAL_SECONDS: f64 = 600.0;

/// Thresholds and polling.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LagConfig {
    /// Milliseconds between polls of `pg_replication_slots`.
    #[serde(default = "default_poll_interval_ms")]
    pub(crate) poll_interval_ms: u64,
    /// Retained WAL (`pg_current_wal_lsn() - restart_lsn`) that raises a warning.
    #[serde(default = "default_retained_warning")]
    pub(crate) retained_wal_warning_bytes: u64,
    /// Retained WAL that is critical (and makes `/readyz` fail).
    #[serde(default = "default_retained_critical")]
    pub(crate) retained_wal_critical_bytes: u64,
    /// Replication lag (now - commit time of the oldest unconfirmed event) that raises a warning.
    #[serde(default = "default_lag_warning")]
    pub(crate) lag_warning_seconds: f64,
    /// Replication lag that is critical.
    #[serde(default = "default_lag_critical")]
    pub(crate) lag_critical_seconds: f64,
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
    pub(crate) fn validate(&self) -> Result<(), String> {
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
pub(crate) enum LagError {
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
pub(crate) enum Level {
    /// Below the warning threshold.
    Ok = 0,
    /// At or above warning.
    Warning = 1,
    /// At or above critical.
    Critical = 2,
}

/// Level of `value` against two thresholds.
pub(crate) fn level<T: PartialOrd>(value: T, warning: T, critical: T) -> Level {
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
pub(crate) struct Alerts {
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
    pub(crate) fn observe(
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
pub(crate) fn replication_lag_seconds(tracker: Option<&SharedTracker>) -> f64 {
    tracker.map_or(0.0, |t| {
        t.pending_age_seconds(crate::clock::unix_now_micros())
    })
}

/// The bytes-per-second catch-up rate between two polls of the slot's
/// confirmed position. Positions are only comparable on one server: after
/// a reconnect (possibly to a promoted standby, whose copy of the slot may
/// stand behind) it starts over, and a position that went backwards starts
/// it over too, rather than give a negative or absurd rate.
#[derive(Debug, Default)]
pub(crate) struct CatchUp {
    previous: Option<(std::time::Instant, u64)>,
}

impl CatchUp {
    /// Forgets the previous poll (a new connection).
    pub(crate) fn reset(&mut self) {
        self.previous = None;
    }

    /// Records `position` at `now`; the rate since the previous poll, if
    /// there was one and the position did not go backwards.
    pub(crate) fn observe(&mut self, now: std::time::Instant, position: u64) -> Option<f64> {
        let rate = match self.previous {
            Some((then, then_pos)) if position >= then_pos => {
                let secs = now.saturating_duration_since(then).as_secs_f64().max(1e-3);
                Some((position - then_pos) as f64 / secs)
            }
            _ => None,
        };
        self.previous = Some((now, position));
        rate
    }
}

/// Sets the slot gauges from one poll. The byte counts are differences the
/// server computed against its own WAL position; a negative one (a slot
/// ahead of the server's WAL, as a promoted standby's synchronized copy can
/// briefly be) is shown as 0.
pub(crate) fn set_slot_gauges(m: &Metrics, s: &catalog::SlotLag) {
    m.slot_active.set(i64::from(s.active));
    m.slot_retained_wal
        .set(s.retained_bytes.unwrap_or(0).max(0));
    m.slot_confirmed_lag
        .set(s.confirmed_lag_bytes.unwrap_or(0).max(0));
    m.slot_safe_wal_size.set(s.safe_wal_size.unwrap_or(0));
    set_wal_status(m, s.wal_status.as_deref());
}

/// The slot does not exist on the server polled (e.g. a new primary that
/// never had a copy): no gauge keeps the previous server's numbers.
pub(crate) fn clear_slot_gauges(m: &Metrics) {
    m.slot_active.set(0);
    m.slot_retained_wal.set(0);
    m.slot_confirmed_lag.set(0);
    m.slot_safe_wal_size.set(0);
    set_wal_status(m, None);
}

fn set_wal_status(m: &Metrics, current: Option<&str>) {
    for status in ["reserved", "extended", "unreserved", "lost"] {
        m.slot_wal_status
            .get_or_create(&StatusLabel {
                status: status.into(),
            })
            .set(i64::from(current == Some(status)));
    }
}

/// Polls until shutdown; returns an error when the slot is invalidated.
/// Connection problems never stop it: the connection is dropped and opened
/// again at the next poll (after a switchover, to whichever server the
/// connection parameters reach), and nothing learnt from the previous
/// server (its positions, its settings) is carried over.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn monitor(
    m: std::sync::Arc<Metrics>,
    cfg: LagConfig,
    params: ConnectParams,
    slot: String,
    tracker: watch::Receiver<Option<SharedTracker>>,
    kafka_probe: impl Fn() -> bool + Send + Sync + 'static,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), LagError> {
    let probe = std::sync::Arc::new(kafka_probe);
    let mut ticker = tokio::time::interval(Duration::from_millis(cfg.poll_interval_ms));
    // A slow connect must not be followed by a burst of polls.
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut monitor = Monitor {
        m,
        cfg,
        params,
        slot,
        tracker,
        client: None,
        alerts: Alerts::default(),
        warned_keep_size: None,
        checked_keep_size: false,
        catch_up: CatchUp::default(),
        failing: false,
    };
    loop {
        tokio::select! {
            biased;
            // 1. shutdown
            _ = shutdown.changed() => return Ok(()),
            // 2. the next poll
            _ = ticker.tick() => {}
        }
        let p = probe.clone();
        let reachable = tokio::task::spawn_blocking(move || p())
            .await
            .unwrap_or(false);
        monitor
            .m
            .kafka_reachable
            .store(reachable, Ordering::Relaxed);
        monitor.poll().await?;
    }
}

/// What the monitor keeps from one poll to the next.
struct Monitor {
    m: std::sync::Arc<Metrics>,
    cfg: LagConfig,
    params: ConnectParams,
    slot: String,
    tracker: watch::Receiver<Option<SharedTracker>>,
    /// The connection polled on, while it works.
    client: Option<tokio_postgres::Client>,
    alerts: Alerts,
    /// The max_slot_wal_keep_size last warned about, so that a reconnect to
    /// the same server does not repeat it and another server's is checked.
    warned_keep_size: Option<String>,
    /// The current server's max_slot_wal_keep_size was read.
    checked_keep_size: bool,
    catch_up: CatchUp,
    /// The last connection attempt failed (logged once per outage).
    failing: bool,
}

impl Monitor {
    /// One poll of the slot. A connection that fails or does not answer is
    /// dropped, to be opened again at the next poll.
    async fn poll(&mut self) -> Result<(), LagError> {
        let Some(client) = self.connection().await else {
            return Ok(());
        };
        // Every round trip is bounded: on a black-holed path the old
        // connection never answers, and the monitor must recover with it.
        let bound = catalog::sql_timeout(&self.params);
        if !self.checked_keep_size && !self.check_keep_size(&client, bound).await {
            return Ok(());
        }
        let lag_seconds = replication_lag_seconds(self.tracker.borrow().as_ref());
        self.m.replication_lag.set(lag_seconds);
        let Ok(polled) = tokio::time::timeout(bound, catalog::poll_slot(&client, &self.slot)).await
        else {
            warn!(after = ?bound, "slot lag poll got no answer; reconnecting at the next interval");
            return Ok(());
        };
        match polled {
            Ok(Some(s)) => {
                self.client = Some(client);
                self.observe(s, lag_seconds)
            }
            Ok(None) => {
                clear_slot_gauges(&self.m);
                self.catch_up.reset();
                self.client = Some(client);
                Ok(())
            }
            Err(e) => {
                // E.g. a server that became a standby (pg_current_wal_lsn()
                // fails during recovery): connect again, maybe elsewhere.
                warn!(error = %e, "slot lag poll failed; reconnecting at the next interval");
                Ok(())
            }
        }
    }

    /// The connection to poll on: the open one, or a new one (another
    /// server, possibly: its positions and settings are its own). `None`
    /// when connecting failed, warned about once per outage.
    async fn connection(&mut self) -> Option<tokio_postgres::Client> {
        if let Some(c) = self.client.take().filter(|c| !c.is_closed()) {
            return Some(c);
        }
        match catalog::connect(&self.params).await {
            Ok(c) => {
                if self.failing {
                    info!(slot = self.slot.as_str(), "slot lag monitor reconnected");
                }
                self.failing = false;
                self.catch_up.reset();
                self.checked_keep_size = false;
                Some(c)
            }
            Err(e) => {
                if !self.failing {
                    warn!(
                        slot = self.slot.as_str(),
                        error = %crate::chain::DisplayChain(&e),
                        "slot lag monitor cannot connect; retrying at every poll"
                    );
                }
                self.failing = true;
                None
            }
        }
    }

    /// Reads the server's max_slot_wal_keep_size and warns (once per
    /// value) when it is unlimited. False when the server did not answer
    /// in time.
    async fn check_keep_size(&mut self, client: &tokio_postgres::Client, bound: Duration) -> bool {
        let Ok(shown) = tokio::time::timeout(bound, catalog::max_slot_wal_keep_size(client)).await
        else {
            warn!(after = ?bound, "slot lag poll got no answer; reconnecting at the next interval");
            return false;
        };
        if let Ok(value) = shown {
            if value == "-1" && self.warned_keep_size.as_deref() != Some("-1") {
                warn!(
                    "max_slot_wal_keep_size is unlimited: a stuck slot can fill the primary's disk; \
                     set a bound (walrelay stops cleanly if its slot is ever invalidated)"
                );
            }
            self.warned_keep_size = Some(value);
            self.checked_keep_size = true;
        }
        true
    }

    /// One poll's view of the slot: gauges, catch-up progress, alerts; a
    /// slot that is losing or has lost WAL stops walrelay.
    fn observe(&mut self, s: catalog::SlotLag, lag_seconds: f64) -> Result<(), LagError> {
        set_slot_gauges(&self.m, &s);
        self.log_catch_up(&s);
        let critical = self.alerts.observe(
            &self.m,
            &self.cfg,
            &self.slot,
            s.retained_bytes.unwrap_or(0),
            lag_seconds,
        );
        self.m.lag_critical.store(critical, Ordering::Relaxed);
        let what = match s.wal_status.as_deref() {
            Some("unreserved") => Some("the WAL it needs exceeds max_slot_wal_keep_size and will be removed at the next checkpoint"),
            Some("lost") => Some("the WAL it needs has been removed; the slot is invalidated"),
            _ => None,
        };
        match what {
            Some(what) => Err(LagError::SlotInvalidated {
                slot: self.slot.clone(),
                status: s.wal_status.unwrap_or_default(),
                what,
                confirmed: s.confirmed.unwrap_or_else(|| "?".into()),
            }),
            None => Ok(()),
        }
    }

    /// A progress line while the slot is far behind, with the catch-up
    /// rate since the previous poll.
    fn log_catch_up(&mut self, s: &catalog::SlotLag) {
        let behind = s.confirmed_lag_bytes.unwrap_or(0).max(0) as u64;
        let confirmed = s
            .confirmed
            .as_deref()
            .and_then(|t| t.parse::<walrelay_proto::Lsn>().ok())
            .map(u64::from);
        let Some(now_pos) = confirmed else {
            return;
        };
        let rate = self.catch_up.observe(std::time::Instant::now(), now_pos);
        if let Some(rate) = rate.filter(|_| behind >= CATCH_UP_LOG_BYTES) {
            info!(
                slot = self.slot.as_str(),
                behind_bytes = behind,
                "{}",
                crate::human::catch_up_line(behind, rate)
            );
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
    fn catch_up_rate_never_spans_servers_or_goes_negative() {
        let t0 = std::time::Instant::now();
        let mut c = CatchUp::default();
        assert_eq!(c.observe(t0, 1_000), None);
        let rate = c
            .observe(t0 + Duration::from_secs(2), 3_000)
            .expect("a rate");
        assert!((rate - 1_000.0).abs() < 1e-6, "{rate}");
        // A reconnect (a promoted standby, say): the old position is not
        // compared with the new server's.
        c.reset();
        assert_eq!(c.observe(t0 + Duration::from_secs(3), 10), None);
        // A position going backwards starts over instead of a huge or
        // negative rate.
        assert_eq!(c.observe(t0 + Duration::from_secs(4), 5), None);
        let rate = c.observe(t0 + Duration::from_secs(5), 105).expect("a rate");
        assert!((rate - 100.0).abs() < 1e-6, "{rate}");
    }

    #[test]
    fn slot_gauges_never_go_negative_and_clear_when_the_slot_is_gone() {
        let m = Metrics::new();
        let wal_status = |m: &Metrics, s: &str| {
            m.slot_wal_status
                .get_or_create(&StatusLabel { status: s.into() })
                .get()
        };
        set_slot_gauges(
            &m,
            &catalog::SlotLag {
                active: true,
                wal_status: Some("reserved".into()),
                safe_wal_size: Some(4096),
                retained_bytes: Some(-8),
                confirmed_lag_bytes: Some(-100),
                confirmed: Some("0/10".into()),
            },
        );
        assert_eq!(m.slot_retained_wal.get(), 0);
        assert_eq!(m.slot_confirmed_lag.get(), 0);
        assert_eq!(m.slot_active.get(), 1);
        assert_eq!(wal_status(&m, "reserved"), 1);
        set_slot_gauges(
            &m,
            &catalog::SlotLag {
                active: true,
                wal_status: Some("extended".into()),
                safe_wal_size: None,
                retained_bytes: Some(500),
                confirmed_lag_bytes: Some(200),
                confirmed: None,
            },
        );
        assert_eq!(m.slot_retained_wal.get(), 500);
        assert_eq!(m.slot_confirmed_lag.get(), 200);
        assert_eq!(wal_status(&m, "reserved"), 0);
        clear_slot_gauges(&m);
        assert_eq!(m.slot_active.get(), 0);
        assert_eq!(m.slot_retained_wal.get(), 0);
        assert_eq!(m.slot_confirmed_lag.get(), 0);
        assert_eq!(wal_status(&m, "extended"), 0);
    }

    /// Losing the server does not stop the monitor: it keeps polling (and
    /// probing Kafka) and still ends on shutdown.
    #[tokio::test(start_paused = true)]
    async fn monitor_keeps_polling_while_the_server_is_unreachable() {
        use std::sync::atomic::AtomicUsize;
        use std::sync::Arc;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("an ephemeral port")
            .port();
        let pg: crate::postgres::config::PostgresConfig = toml::from_str(&format!(
            "host = \"127.0.0.1\"\nport = {port}\nuser = \"u\"\ndbname = \"d\"\nsslmode = \"disable\"\nconnect_timeout_ms = 100"
        ))
        .expect("postgres section");
        let polls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&polls);
        let (stop_tx, stop_rx) = watch::channel(false);
        let (_tracker_tx, tracker_rx) = watch::channel(None);
        let cfg = LagConfig {
            poll_interval_ms: 50,
            ..LagConfig::default()
        };
        let task = tokio::spawn(monitor(
            Arc::new(Metrics::new()),
            cfg,
            ConnectParams::from_config(&pg),
            "s".into(),
            tracker_rx,
            move || {
                counted.fetch_add(1, Ordering::SeqCst);
                true
            },
            stop_rx,
        ));
        let mut waited = Duration::ZERO;
        while polls.load(Ordering::SeqCst) < 5 {
            assert!(!task.is_finished(), "the monitor stopped on a lost server");
            assert!(
                waited < Duration::from_secs(600),
                "the monitor stopped polling"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
            waited += Duration::from_millis(50);
        }
        assert!(!task.is_finished(), "the monitor stopped on a lost server");
        stop_tx.send_replace(true);
        let ended = task.await.expect("monitor task");
        assert!(ended.is_ok(), "{ended:?}");
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
