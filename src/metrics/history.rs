//! The recent past of every pipeline, for the operator's page: a sampler
//! that every [`SAMPLE_INTERVAL`] reads each pipeline's [`Metrics`] (the
//! events counter summed over topics, confirmed lag, retained WAL,
//! replication lag, received and confirmed LSN, the polling backlog) into
//! a bounded ring of [`HISTORY_WINDOW`], and the events-per-second rate
//! between consecutive samples.
//!
//! Owns only copies of numbers. It must never block or slow a pipeline: it
//! reads atomics and gauges (the events family under its read lock, as a
//! scrape does), holds its own lock only to push or copy samples, and
//! never awaits while holding it. It runs beside the metrics listener and
//! ends with it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::registry::{Metric, Registry};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};
use tracing::Instrument;
use walrelay_proto::Lsn;

use super::{KindLabel, Metrics, Process};

/// How often the sampler reads every pipeline.
pub(crate) const SAMPLE_INTERVAL: Duration = Duration::from_secs(5);

/// How far back the history reaches: [`SAMPLE_INTERVAL`] apart, the ring
/// of each pipeline holds this window's samples and no more.
pub(crate) const HISTORY_WINDOW: Duration = Duration::from_secs(600);

/// The source kinds a pipeline can report through `walrelay_source_info`.
const SOURCE_KINDS: [&str; 2] = ["wal", "poll"];

/// One pipeline's numbers at one moment, as the page shows them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reading {
    /// `walrelay_events_total`, summed over topics.
    pub(crate) events_total: u64,
    /// `walrelay_slot_confirmed_lag_bytes`.
    pub(crate) confirmed_lag_bytes: i64,
    /// `walrelay_slot_retained_wal_bytes`.
    pub(crate) retained_wal_bytes: i64,
    /// `walrelay_replication_lag_seconds`.
    pub(crate) replication_lag_seconds: f64,
    /// `walrelay_received_lsn_bytes`.
    pub(crate) received_lsn: Lsn,
    /// `walrelay_confirmed_lsn_bytes`.
    pub(crate) confirmed_lsn: Lsn,
    /// `walrelay_poll_unpublished_rows`.
    pub(crate) unpublished_rows: i64,
    /// `walrelay_poll_oldest_unpublished_age_seconds`.
    pub(crate) oldest_unpublished_age_seconds: f64,
    /// `walrelay_events_in_flight`.
    pub(crate) in_flight: i64,
}

impl Reading {
    /// Reads `m` now.
    pub(crate) fn of(m: &Metrics) -> Reading {
        Reading {
            events_total: events_total(m),
            confirmed_lag_bytes: m.slot_confirmed_lag.get(),
            retained_wal_bytes: m.slot_retained_wal.get(),
            replication_lag_seconds: m.replication_lag.get(),
            received_lsn: lsn(m.received_lsn.get()),
            confirmed_lsn: lsn(m.confirmed_lsn.get()),
            unpublished_rows: m.poll_unpublished.get(),
            oldest_unpublished_age_seconds: m.poll_oldest_unpublished_age.get(),
            in_flight: m.in_flight.get(),
        }
    }
}

/// A position gauge (set from an `Lsn`'s bits) back as an `Lsn`.
fn lsn(bits: i64) -> Lsn {
    Lsn(bits as u64)
}

/// The pipeline's source kind (`wal` or `poll`) from
/// `walrelay_source_info`; `None` before the pipeline set it.
pub(crate) fn source_kind(m: &Metrics) -> Option<&'static str> {
    SOURCE_KINDS.into_iter().find(|kind| {
        m.source_info
            .get(&KindLabel { kind })
            .is_some_and(|g| g.get() == 1)
    })
}

/// `walrelay_events_total` summed over its topics.
fn events_total(m: &Metrics) -> u64 {
    series(m.events.clone())
        .iter()
        .map(|s| s.value as u64)
        .sum()
}

/// One series of a metric, as the text format writes it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Series {
    /// What the text format adds to the metric's name: `_total`, `_sum`,
    /// `_count`, `_bucket`, or nothing.
    pub(crate) suffix: String,
    /// The value of the series' one label (`le` for a bucket); `None`
    /// without a label.
    pub(crate) label: Option<String>,
    /// The sample's value.
    pub(crate) value: f64,
}

/// Every series of `metric`. prometheus-client's `Family` cannot list
/// its series, nor a `Histogram` give its sum, so the metric alone is
/// encoded (under the family's read lock, as a scrape does) and its lines
/// read back. Only for this process's own metrics of one label or none,
/// whose label values prometheus-client writes as they are.
pub(crate) fn series(metric: impl Metric) -> Vec<Series> {
    const NAME: &str = "m";
    let mut registry = Registry::default();
    registry.register(NAME, "", metric);
    let mut text = String::with_capacity(256);
    if prometheus_client::encoding::text::encode(&mut text, &registry).is_err() {
        return Vec::new();
    }
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            let value = value.parse::<f64>().ok()?;
            let name = name.strip_prefix(NAME)?;
            let (suffix, label) = match name.split_once('{') {
                Some((suffix, labels)) => {
                    let (_, quoted) = labels.strip_suffix('}')?.split_once('=')?;
                    let label = quoted.strip_prefix('"')?.strip_suffix('"')?;
                    (suffix, Some(label.to_owned()))
                }
                None => (name, None),
            };
            Some(Series {
                suffix: suffix.to_owned(),
                label,
                value,
            })
        })
        .collect()
}

/// One entry of a pipeline's ring.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    /// When it was taken (monotonic: rates and ages).
    pub(crate) at: Instant,
    /// When it was taken, milliseconds since the Unix epoch (for people).
    pub(crate) unix_ms: i64,
    /// What was read.
    pub(crate) reading: Reading,
    /// Events per second since the previous sample; `None` for the first.
    pub(crate) events_per_second: Option<f64>,
}

/// A sample as `/api/state` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleView {
    /// Seconds before the answer was built.
    pub(crate) age_seconds: f64,
    /// Milliseconds since the Unix epoch.
    pub(crate) unix_ms: i64,
    /// See [`Reading::events_total`].
    pub(crate) events_total: u64,
    /// See [`Sample::events_per_second`].
    pub(crate) events_per_second: Option<f64>,
    /// See [`Reading::confirmed_lag_bytes`].
    pub(crate) confirmed_lag_bytes: i64,
    /// See [`Reading::retained_wal_bytes`].
    pub(crate) retained_wal_bytes: i64,
    /// See [`Reading::replication_lag_seconds`].
    pub(crate) replication_lag_seconds: f64,
    /// See [`Reading::received_lsn`], as `X/Y`.
    pub(crate) received_lsn: String,
    /// See [`Reading::confirmed_lsn`], as `X/Y`.
    pub(crate) confirmed_lsn: String,
    /// See [`Reading::unpublished_rows`].
    pub(crate) unpublished_rows: i64,
    /// See [`Reading::oldest_unpublished_age_seconds`].
    pub(crate) oldest_unpublished_age_seconds: f64,
}

impl Sample {
    /// The sample as seen at `now`.
    pub(crate) fn view(&self, now: Instant) -> SampleView {
        let r = &self.reading;
        SampleView {
            age_seconds: now.saturating_duration_since(self.at).as_secs_f64(),
            unix_ms: self.unix_ms,
            events_total: r.events_total,
            events_per_second: self.events_per_second,
            confirmed_lag_bytes: r.confirmed_lag_bytes,
            retained_wal_bytes: r.retained_wal_bytes,
            replication_lag_seconds: r.replication_lag_seconds,
            received_lsn: r.received_lsn.to_string(),
            confirmed_lsn: r.confirmed_lsn.to_string(),
            unpublished_rows: r.unpublished_rows,
            oldest_unpublished_age_seconds: r.oldest_unpublished_age_seconds,
        }
    }
}

/// Every pipeline's ring of samples.
#[derive(Debug)]
pub(crate) struct History {
    interval: Duration,
    window: Duration,
    capacity: usize,
    rings: Mutex<HashMap<String, VecDeque<Sample>>>,
}

impl History {
    /// Samples every `interval`, keeping `window` of them per pipeline
    /// (at least two, so that a rate exists).
    pub(crate) fn new(interval: Duration, window: Duration) -> History {
        let per = interval.as_secs_f64().max(1e-3);
        let capacity = ((window.as_secs_f64() / per).ceil() as usize).max(2);
        History {
            interval,
            window,
            capacity,
            rings: Mutex::new(HashMap::new()),
        }
    }

    /// The sampling interval.
    pub(crate) fn interval(&self) -> Duration {
        self.interval
    }

    /// The window kept.
    pub(crate) fn window(&self) -> Duration {
        self.window
    }

    #[cfg(test)]
    /// Samples a ring holds at most.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Appends `reading` of pipeline `name` taken `at`, computing the rate
    /// since the previous sample and dropping the oldest beyond the
    /// capacity.
    pub(crate) fn record(&self, name: &str, reading: Reading, at: Instant, unix_ms: i64) {
        let mut rings = self.rings.lock().expect("never poisoned");
        let ring = rings
            .entry(name.to_owned())
            .or_insert_with(|| VecDeque::with_capacity(self.capacity));
        let events_per_second = ring.back().and_then(|prev| {
            let secs = at.saturating_duration_since(prev.at).as_secs_f64();
            // The counter only grows; a smaller total would be a new
            // pipeline under an old name, which the process never makes.
            (secs > 0.0).then(|| {
                reading
                    .events_total
                    .saturating_sub(prev.reading.events_total) as f64
                    / secs
            })
        });
        if ring.len() == self.capacity {
            ring.pop_front();
        }
        ring.push_back(Sample {
            at,
            unix_ms,
            reading,
            events_per_second,
        });
    }

    /// Reads every pipeline of `process` into its ring.
    pub(crate) fn sample(&self, process: &Process, at: Instant, unix_ms: i64) {
        for m in process.pipelines() {
            // Read before taking the lock: the lock never waits on a metric.
            let reading = Reading::of(&m);
            self.record(m.name(), reading, at, unix_ms);
        }
    }

    /// A copy of pipeline `name`'s samples, oldest first.
    pub(crate) fn samples(&self, name: &str) -> Vec<Sample> {
        let rings = self.rings.lock().expect("never poisoned");
        rings
            .get(name)
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// Takes the first sample of `process` into `history` now, then starts
/// the task that takes one every interval until `shutdown` changes or its
/// sender is gone.
pub(crate) fn start(
    history: Arc<History>,
    process: Arc<Process>,
    shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let now = Instant::now();
    history.sample(&process, now, crate::clock::unix_now_micros() / 1000);
    tokio::spawn(run(history, process, now, shutdown).instrument(tracing::info_span!("history")))
}

async fn run(
    history: Arc<History>,
    process: Arc<Process>,
    first: Instant,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval_at(first + history.interval(), history.interval());
    // A late tick (a busy machine) is taken late, not made up in a burst.
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            // 1. Shutdown.
            _ = shutdown.changed() => break,
            // 2. The next sample.
            // (When it really fired, not when it was due: the rate is
            // over the time that passed.)
            _ = tick.tick() => {
                let unix_ms = crate::clock::unix_now_micros() / 1000;
                history.sample(&process, Instant::now(), unix_ms);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::TopicLabel;

    fn reading(events_total: u64) -> Reading {
        Reading {
            events_total,
            confirmed_lag_bytes: 0,
            retained_wal_bytes: 0,
            replication_lag_seconds: 0.0,
            received_lsn: Lsn(0),
            confirmed_lsn: Lsn(0),
            unpublished_rows: 0,
            oldest_unpublished_age_seconds: 0.0,
            in_flight: 0,
        }
    }

    #[test]
    fn the_window_and_interval_make_the_capacity() {
        assert_eq!(
            History::new(SAMPLE_INTERVAL, HISTORY_WINDOW).capacity(),
            120
        );
        assert_eq!(
            History::new(Duration::from_secs(7), Duration::from_secs(60)).capacity(),
            9
        );
        assert_eq!(
            History::new(Duration::from_secs(60), Duration::from_secs(5)).capacity(),
            2
        );
    }

    #[test]
    fn the_ring_keeps_the_newest_samples_up_to_its_bound() {
        let h = History::new(Duration::from_secs(5), Duration::from_secs(50));
        assert_eq!(h.capacity(), 10);
        let t0 = Instant::now();
        for i in 0..25u64 {
            h.record(
                "a",
                reading(i),
                t0 + Duration::from_secs(5 * i),
                i as i64 * 5000,
            );
        }
        let s = h.samples("a");
        assert_eq!(s.len(), 10);
        let totals: Vec<u64> = s.iter().map(|s| s.reading.events_total).collect();
        assert_eq!(totals, (15..25).collect::<Vec<_>>());
        assert!(s.windows(2).all(|w| w[0].at < w[1].at));
        assert!(h.samples("nobody").is_empty());
    }

    #[test]
    fn the_rate_is_the_counter_delta_over_the_time_between_samples() {
        let h = History::new(Duration::from_secs(5), Duration::from_secs(600));
        let t0 = Instant::now();
        h.record("a", reading(100), t0, 0);
        h.record("a", reading(150), t0 + Duration::from_secs(5), 5000);
        // A late tick: the rate is over the time that really passed.
        h.record("a", reading(150), t0 + Duration::from_secs(10), 10000);
        h.record("a", reading(310), t0 + Duration::from_secs(18), 18000);
        // Two samples at the same instant give no rate.
        h.record("a", reading(400), t0 + Duration::from_secs(18), 18000);
        // Another pipeline has its own ring and its own first sample.
        h.record("b", reading(7), t0 + Duration::from_secs(18), 18000);
        let rates: Vec<Option<f64>> = h.samples("a").iter().map(|s| s.events_per_second).collect();
        assert_eq!(rates, [None, Some(10.0), Some(0.0), Some(20.0), None]);
        assert_eq!(h.samples("b")[0].events_per_second, None);
    }

    #[test]
    fn a_reading_sums_the_events_over_topics_and_reads_the_gauges() {
        let m = Metrics::for_pipeline("orders");
        assert_eq!(Reading::of(&m).events_total, 0);
        for (topic, n) in [("t1", 3), ("t2", 40), ("t3", 500)] {
            m.events
                .get_or_create(&TopicLabel {
                    topic: topic.into(),
                })
                .inc_by(n);
        }
        m.slot_confirmed_lag.set(1234);
        m.slot_retained_wal.set(5678);
        m.replication_lag.set(1.5);
        m.received_lsn.set(0x1_0000_00A0);
        m.confirmed_lsn.set(0x1_0000_0050);
        let r = Reading::of(&m);
        assert_eq!(r.events_total, 543);
        assert_eq!(r.confirmed_lag_bytes, 1234);
        assert_eq!(r.retained_wal_bytes, 5678);
        assert_eq!(r.replication_lag_seconds, 1.5);
        assert_eq!(r.received_lsn.to_string(), "1/A0");
        assert_eq!(r.confirmed_lsn.to_string(), "1/50");
        assert_eq!(source_kind(&m), None);
        m.source_info
            .get_or_create(&KindLabel { kind: "poll" })
            .set(1);
        assert_eq!(source_kind(&m), Some("poll"));
    }

    #[tokio::test(start_paused = true)]
    async fn the_sampler_samples_every_interval_and_stops_at_shutdown() {
        let process = Arc::new(Process::new());
        let a = process.add_pipeline("a");
        let history = Arc::new(History::new(
            Duration::from_secs(5),
            Duration::from_secs(60),
        ));
        let (tx, rx) = watch::channel(false);
        let task = start(Arc::clone(&history), Arc::clone(&process), rx);
        // The first sample at once, then one per interval.
        assert_eq!(history.samples("a").len(), 1);
        a.events
            .get_or_create(&TopicLabel { topic: "t".into() })
            .inc_by(50);
        // Just past the tick: the sampler has run.
        tokio::time::sleep(Duration::from_millis(5_001)).await;
        let s = history.samples("a");
        assert_eq!(s.len(), 2);
        assert_eq!(s[1].events_per_second, Some(10.0));
        tokio::time::sleep(Duration::from_secs(100)).await;
        assert_eq!(history.samples("a").len(), history.capacity());
        tx.send(true).unwrap();
        task.await.unwrap();
        let before = history.samples("a");
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(history.samples("a"), before, "sampled after shutdown");
    }
}
