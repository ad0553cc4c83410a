//! One load scenario of the fault suites (`faults`, `exactly_once`): an
//! outbox on some cluster, its topic on some broker, a probe slot for exact
//! commit end LSNs, the faults injected so far, and the drain that reads
//! every committed event back and hands it to `load`'s checker.
//!
//! Every wait is bounded; a scenario never decides what a fault is, the
//! test does and records it with [`Scene::fault`].

use std::collections::HashSet;
use std::time::{Duration, Instant};

use walrelay::proto::Lsn;

use super::load::{
    check, check_exactly_once, probe_commit_ends, Fault, Load, LoadLog, LoadSpec, Summary,
};
use super::progress::ProgressTopic;
use super::relay::{ids, tail, Outbox, Relay, WAIT};
use super::{connect_url, create_topic_on, read_to_end_blocking, Record};

/// Partitions of each scenario's topic: per-key order is per partition.
pub(crate) const PARTITIONS: i32 = 3;
const METRICS: &str = "[metrics]\nlisten = \"127.0.0.1:0\"\n";
/// Bound on reading every committed event back after the load.
const DRAIN: Duration = Duration::from_secs(180);

/// A number from the environment (`WALRELAY_FAULT_KILLS`, ...), else `default`.
pub(crate) fn env_u64(key: &str, default: u64) -> u64 {
    match std::env::var(key) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{key}={v:?} is not a number")),
        Err(_) => default,
    }
}

/// A query returning one LSN as text (or no row), with `$1` = `arg`, on a
/// fresh connection; retried while the server is unreachable (bounded).
async fn lsn_query(url: &str, sql: &str, arg: &str) -> Option<Lsn> {
    let deadline = Instant::now() + WAIT;
    loop {
        let attempt = tokio::time::timeout(
            Duration::from_secs(5),
            tokio_postgres::connect(url, tokio_postgres::NoTls),
        )
        .await;
        if let Ok(Ok((client, connection))) = attempt {
            tokio::spawn(async move {
                let _ = connection.await;
            });
            if let Ok(row) = client.query_opt(sql, &[&arg]).await {
                return row
                    .and_then(|r| r.get::<_, Option<String>>(0))
                    .map(|s| s.parse().expect("lsn"));
            }
        }
        assert!(Instant::now() < deadline, "{sql}: server unreachable");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `confirmed_flush_lsn` of `slot` on the cluster at `url`.
pub(crate) async fn confirmed(url: &str, slot: &str) -> Option<Lsn> {
    lsn_query(
        url,
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
        slot,
    )
    .await
}

/// `pg_current_wal_lsn()` of the cluster at `url`.
pub(crate) async fn wal_now(url: &str) -> Lsn {
    lsn_query(
        url,
        "SELECT pg_current_wal_lsn()::text WHERE $1::text IS NOT NULL",
        "now",
    )
    .await
    .expect("pg_current_wal_lsn")
}

/// One scenario: outbox, topic, probe slot, the faults injected so far.
pub(crate) struct Scene {
    pub test: &'static str,
    pub ob: Outbox,
    /// Direct libpq URL of the cluster (the generator and the checks use
    /// it, never a proxy).
    pub url: String,
    pub pg_port: u16,
    pub bootstrap: String,
    pub probe: String,
    pub faults: Vec<Fault>,
}

impl Scene {
    pub(crate) async fn new(
        test: &'static str,
        url: String,
        pg_port: u16,
        bootstrap: String,
    ) -> Scene {
        let ob = Outbox::new_with(test, connect_url(&url).await).await;
        create_topic_on(&bootstrap, &ob.topic(""), PARTITIONS).await;
        let probe = format!("{}_probe", ob.name);
        Scene {
            test,
            ob,
            url,
            pg_port,
            bootstrap,
            probe,
            faults: Vec::new(),
        }
    }

    /// The relay configuration; `replication` lines are added to the
    /// `[replication]` table, `extra` is appended (after `[metrics]`).
    pub(crate) fn config(&self, replication: &str, extra: &str) -> String {
        self.config_on(self.pg_port, replication, extra)
    }

    /// [`Scene::config`] through `port` (a proxy) instead of the cluster's.
    pub(crate) fn config_on(&self, port: u16, replication: &str, extra: &str) -> String {
        self.config_full(port, replication, METRICS, extra)
    }

    /// [`Scene::config_on`] with `metrics` as the `[metrics]` table.
    pub(crate) fn config_full(
        &self,
        port: u16,
        replication: &str,
        metrics: &str,
        extra: &str,
    ) -> String {
        self.ob
            .config_for(
                &self.bootstrap,
                port,
                "postgres",
                &format!("{metrics}\n{extra}"),
            )
            .replace(
                "reconnect_max_ms = 1000\n",
                &format!("reconnect_max_ms = 1000\n{replication}\n"),
            )
    }

    /// Creates the probe slot; call once walrelay streams (the publication
    /// exists) and before the load.
    pub(crate) async fn start_probe(&self) {
        connect_url(&self.url)
            .await
            .execute(
                "SELECT pg_create_logical_replication_slot($1, 'pgoutput')",
                &[&self.probe],
            )
            .await
            .expect("create probe slot");
    }

    /// A generator of `events` events on this scene's outbox.
    pub(crate) fn spec(&self, events: u64) -> LoadSpec {
        LoadSpec::new(self.url.clone(), &self.ob.name, &self.ob.agg(""), events)
    }

    /// Records a fault: `before` was sampled just before it; the WAL
    /// position is sampled now.
    pub(crate) async fn fault(&mut self, what: String, before: Lsn) {
        let wal_after = wal_now(&self.url).await;
        self.faults.push(Fault {
            what,
            confirmed_before: before,
            wal_after,
        });
    }

    pub(crate) async fn confirmed(&self) -> Lsn {
        confirmed(&self.url, &self.ob.name)
            .await
            .expect("slot has a confirmed position")
    }

    /// Waits for the generator and reads the topic until every committed
    /// id is there; returns the generator's log and the records.
    async fn drain(
        &self,
        load: Load,
        want_events: u64,
        relay: &mut Relay,
    ) -> (LoadLog, Vec<Record>) {
        let log = load.finish().await;
        assert!(
            log.committed.len() as u64 >= want_events,
            "{}: the generator committed only {} of {want_events} events",
            self.test,
            log.committed.len()
        );
        let want: HashSet<String> = log.committed.iter().map(|e| e.id.clone()).collect();
        let records = self.read_until(&want, relay).await;
        (log, records)
    }

    async fn read_until(&self, want: &HashSet<String>, relay: &mut Relay) -> Vec<Record> {
        let deadline = Instant::now() + DRAIN;
        loop {
            let records = self.read_all().await;
            let got = ids(&records);
            if want.is_subset(&got) {
                return records;
            }
            relay.assert_running();
            assert!(
                Instant::now() < deadline,
                "{}: {} of {} committed ids read after {DRAIN:?}:\n{}",
                self.test,
                want.intersection(&got).count(),
                want.len(),
                tail(&relay.log(), 60)
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// Everything in the scene's topic (read_committed), to its end as of now.
    async fn read_all(&self) -> Vec<Record> {
        let (bootstrap, topic) = (self.bootstrap.clone(), self.ob.topic(""));
        tokio::task::spawn_blocking(move || read_to_end_blocking(&bootstrap, &topic, WAIT))
            .await
            .expect("reader thread")
    }

    /// Reads the probe's commit ends, then drops it.
    async fn take_probe(&self) -> std::collections::HashMap<String, Lsn> {
        let client = connect_url(&self.url).await;
        let ends = probe_commit_ends(&client, &self.probe, &self.ob.name).await;
        client
            .execute("SELECT pg_drop_replication_slot($1)", &[&self.probe])
            .await
            .expect("drop probe slot");
        ends
    }

    /// Waits for the generator, reads the topic until every committed id is
    /// there, runs the at-least-once checker and prints its summary.
    pub(crate) async fn finish(&self, load: Load, want_events: u64, relay: &mut Relay) -> Summary {
        let (log, records) = self.drain(load, want_events, relay).await;
        let ends = self.take_probe().await;
        let summary = check(&log, &records, &ends, &self.faults).unwrap_or_else(|e| {
            panic!(
                "{}: delivery contract violated: {e}\nfaults: {:?}\n{}",
                self.test,
                self.faults,
                tail(&relay.log(), 60)
            )
        });
        self.print(&summary);
        summary
    }

    /// The exactly-once end of a scenario: waits for the generator and for
    /// every committed id, then until the pipeline's last committed
    /// progress record is at or past the commit end of the last committed
    /// event (so nothing of the load is still on its way), reads the topic
    /// again and checks that a `read_committed` consumer got every
    /// committed event exactly once, in commit order per key, and nothing
    /// rolled back; also that the progress records never went back and the
    /// slot is confirmed no further than the last of them.
    pub(crate) async fn finish_exactly_once(
        &self,
        load: Load,
        want_events: u64,
        relay: &mut Relay,
        progress: &ProgressTopic,
    ) -> Summary {
        let (log, _) = self.drain(load, want_events, relay).await;
        let ends = self.take_probe().await;
        let last_end = log
            .committed
            .iter()
            .filter_map(|e| ends.get(&e.id))
            .max()
            .copied()
            .unwrap_or_else(|| panic!("{}: the probe decoded no committed event", self.test));
        progress.wait_for(last_end, relay).await;
        let confirmed = self.confirmed().await;
        let records = self.read_all().await;
        let summary = check_exactly_once(&log, &records, &self.faults).unwrap_or_else(|e| {
            panic!(
                "{}: exactly-once violated: {e}\nfaults: {:?}\n{}",
                self.test,
                self.faults,
                tail(&relay.log(), 60)
            )
        });
        let history = progress.history().await;
        progress.assert_monotonic(&history);
        let last = history.last().expect("progress records exist");
        assert_eq!(last.slot, self.ob.name, "{}: progress {last:?}", self.test);
        assert!(
            confirmed <= last.lsn,
            "{}: slot confirmed at {confirmed}, past the last committed progress {}",
            self.test,
            last.lsn
        );
        self.print(&summary);
        eprintln!(
            "EXACTLY-ONCE SUMMARY {}: {} progress records, last at {} (last event commit end {last_end}), slot confirmed {confirmed}",
            self.test,
            history.len(),
            last.lsn
        );
        summary
    }

    fn print(&self, summary: &Summary) {
        eprintln!("FAULT SUMMARY {}: {summary}", self.test);
        for f in &self.faults {
            eprintln!(
                "  fault: {} (window {}..{})",
                f.what, f.confirmed_before, f.wal_after
            );
        }
    }
}
