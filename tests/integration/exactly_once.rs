//! Exactly-once mode (`kafka.exactly_once = true`) against the real
//! servers: what a `read_committed` consumer reads after SIGKILLs, a Kafka
//! restart, a PostgreSQL restart, a million-row streamed transaction killed
//! mid-publication, a fenced instance, a slot advanced behind walrelay's
//! back, and the Kafka Connect form of the mode.
//!
//! The load scenarios end with `Scene::finish_exactly_once`: every
//! committed id read exactly once, per key commit order, no rolled-back id,
//! the progress records never going back and the slot confirmed no further
//! than the last of them. Each test has its own progress topic (the
//! pipeline is its slot). Every wait is bounded; nothing asserts a timing.
//!
//! `WALRELAY_FAULT_KILLS` sets the SIGKILL count (default 5, the issue's
//! full run 20) and `WALRELAY_FAULT_EVENTS` that scenario's events
//! (default 50,000), as for `faults`.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::time::{Duration, Instant};

use common::load::Load;
use common::metrics::{free_port, pipeline, wait_pipeline};
use common::progress::ProgressTopic;
use common::relay::{
    commit_ends, connect_files, count_events, event_id, event_number, ids, read_until_ids_on, tail,
    Outbox, Relay, WAIT,
};
use common::scene::{env_u64, Scene};
use common::{
    create_topic_on, create_topic_with, env, kafka_bootstrap, pg_url, read_to_end_on,
    read_uncommitted_to_end_on, PrivateKafka, PrivatePg,
};
use rand::Rng;
use walrelay::metrics::page::PipelineView;
use walrelay::proto::Lsn;

/// `[metrics]` on a fixed port (kept across a restart of the same config).
fn metrics_on(port: u16) -> String {
    format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n")
}

/// Kafka transactions committed so far; 0 before exactly-once mode shows.
fn committed(p: &PipelineView) -> u64 {
    p.exactly_once
        .as_ref()
        .map_or(0, |e| e.transactions_committed)
}

/// Event numbers per record key, in the order read (a key is on one
/// partition, read in offset order).
fn numbers_per_key(records: &[common::Record]) -> HashMap<Vec<u8>, Vec<u64>> {
    let mut per_key: HashMap<Vec<u8>, Vec<u64>> = HashMap::new();
    for r in records {
        let n = event_number(r.header("id").expect("id header")).expect("a test event id");
        per_key
            .entry(r.key.clone().unwrap_or_default())
            .or_default()
            .push(n);
    }
    per_key
}

/// Events of an open-ended load: more than any scenario writes before
/// [`stop_after`] ends it (the generator's own deadline bounds it too).
const OPEN_ENDED: u64 = 1_000_000;

/// Lets the open-ended `load` commit `more` events beyond what it has now
/// (so the faults before lie inside the load), then stops it; returns the
/// events it has committed at least.
async fn stop_after(load: &Load, more: u64) -> u64 {
    let target = load.committed() + more;
    assert!(
        load.wait_for(target, Duration::from_secs(120)).await,
        "the load stopped at {} events, before {target}",
        load.committed()
    );
    load.stop();
    target
}

/// 1,000 events in 100 transactions: a `read_committed` consumer gets each
/// once, in commit order per key; the pipeline's last progress record
/// names the slot, the cluster and a position at or past the last commit,
/// and the slot is confirmed no further than that position.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_events_once_with_their_progress() {
    let ob = Outbox::new("eos_basic").await;
    let bootstrap = kafka_bootstrap();
    let topic = ob.topic("");
    create_topic_on(&bootstrap, &topic, 3).await;
    let progress = ProgressTopic::new(&bootstrap, &ob.name);
    let port = free_port();
    let config = progress.config(&ob.config_with(&bootstrap, &metrics_on(port)), "");
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    let probe = ob.create_probe().await;
    ob.spawn_writer(100, 10, 10, None)
        .await
        .expect("writer task");
    let ends = commit_ends(&ob.client, &probe, &ob.name).await;
    assert_eq!(ends.len(), 100, "the probe decoded {ends:?}");
    let last_end = *ends.last().expect("100 commits");
    let want: HashSet<String> = (1..=1000).map(event_id).collect();
    read_until_ids_on(&bootstrap, &topic, &want, &mut relay).await;
    progress.wait_for(last_end, &mut relay).await;
    // Confirmed first: the progress read after it can only be further.
    let confirmed = ob.slot_confirmed().await.expect("slot");
    let records = read_to_end_on(&bootstrap, &topic, WAIT).await;
    assert_eq!(
        records.len(),
        1000,
        "every event exactly once: {} records, {} distinct ids\n{}",
        records.len(),
        ids(&records).len(),
        tail(&relay.log(), 40)
    );
    assert_eq!(ids(&records), want);
    for (key, numbers) in numbers_per_key(&records) {
        assert!(
            numbers.windows(2).all(|w| w[0] < w[1]),
            "key {:?} out of commit order: {numbers:?}",
            String::from_utf8_lossy(&key)
        );
    }
    let history = progress.history().await;
    progress.assert_monotonic(&history);
    let last = history.last().expect("a progress record");
    assert_eq!(last.slot, ob.name, "{last:?}");
    assert!(
        last.lsn >= last_end,
        "{last:?} before the last commit {last_end}"
    );
    assert_eq!(last.events, 0, "at a transaction boundary: {last:?}");
    assert!(
        confirmed <= last.lsn,
        "slot confirmed at {confirmed}, past the committed progress {last:?}"
    );
    let system_id: String = ob
        .client
        .query_one(
            "SELECT system_identifier::text FROM pg_control_system()",
            &[],
        )
        .await
        .expect("system identifier")
        .get(0);
    assert_eq!(
        last.system_id.as_deref(),
        Some(system_id.as_str()),
        "{last:?}"
    );
    let m = wait_pipeline(port, "committed progress", &mut relay, |m| {
        m.exactly_once
            .as_ref()
            .is_some_and(|e| e.committed_lsn >= last_end)
    })
    .await;
    assert!(m.exactly_once.is_some(), "{m:?}");
    assert!(committed(&m) >= 1, "{m:?}");
    eprintln!(
        "EXACTLY-ONCE SUMMARY eos_basic: {} Kafka transactions committed, {} progress records, last {last:?}, slot confirmed {confirmed}",
        committed(&m),
        history.len()
    );
    ob.drop_probe(&probe).await;
    ob.finish(relay).await;
}

/// SIGKILL walrelay N times at random moments of a continuous load over
/// 200 aggregates (some transactions rolled back), restarting it each
/// time: every committed event exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkills_during_load_deliver_exactly_once() {
    let kills = env_u64("WALRELAY_FAULT_KILLS", 5);
    let events = env_u64("WALRELAY_FAULT_EVENTS", 50_000);
    let mut scene = Scene::new("eos_sigkill", pg_url(), env().pg_port, kafka_bootstrap()).await;
    let progress = ProgressTopic::new(&scene.bootstrap, &scene.ob.name);
    let mut relay = Relay::start(&progress.config(&scene.config("", ""), ""));
    scene.ob.wait_active(&mut relay).await;
    scene.start_probe().await;
    let mut spec = scene.spec(events);
    // About 1.5 s of load per kill (5.5 events per transaction on
    // average), so every kill falls inside it.
    let txns = (events as f64 / 5.5).max(1.0);
    spec.pause = Duration::from_secs_f64(kills as f64 * 1.5 / txns);
    let load = Load::start(spec).await;
    let mut rng = rand::thread_rng();
    let mut at: Vec<u64> = (0..kills)
        .map(|_| rng.gen_range(events / 20..=events * 19 / 20))
        .collect();
    at.sort_unstable();
    for (i, threshold) in at.iter().enumerate() {
        load.wait_for(*threshold, Duration::from_secs(240)).await;
        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..300))).await;
        let before = scene.confirmed().await;
        let committed = load.committed();
        relay = relay.kill_and_restart();
        scene
            .fault(format!("sigkill {} at {committed} events", i + 1), before)
            .await;
        scene.ob.wait_active(&mut relay).await;
    }
    let during = !load.is_finished();
    let summary = scene
        .finish_exactly_once(load, events, &mut relay, &progress)
        .await;
    eprintln!(
        "EXACTLY-ONCE SUMMARY eos_sigkill: kills={kills}, last kill during the load: {during}; {summary}"
    );
    assert_eq!(summary.faults as u64, kills);
    assert_eq!(summary.duplicates, 0);
    relay.assert_running();
    scene.ob.finish(relay).await;
}

/// The broker stopped and started again mid-load, then killed (SIGKILL,
/// a crash with a transaction open) and started again, each outage shorter
/// than the transaction timeout: walrelay keeps running, confirms nothing
/// while the broker is down, resumes from the committed progress, and
/// every committed event arrives exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_restarts_mid_load_deliver_exactly_once() {
    let kafka = tokio::task::spawn_blocking(PrivateKafka::start)
        .await
        .expect("start private kafka");
    let mut scene = Scene::new("eos_kafka", pg_url(), env().pg_port, kafka.bootstrap()).await;
    let progress = ProgressTopic::new(&scene.bootstrap, &scene.ob.name);
    let mut relay = Relay::start(&progress.config(&scene.config("", ""), ""));
    scene.ob.wait_active(&mut relay).await;
    scene.start_probe().await;
    let mut spec = scene.spec(OPEN_ENDED);
    // Slow: the broker restarts take tens of seconds, the drain reads it all.
    spec.pause = Duration::from_millis(10);
    let load = Load::start(spec).await;
    assert!(load.wait_for(2_000, WAIT).await, "the load did not start");
    let before = scene.confirmed().await;
    let kafka = tokio::task::spawn_blocking(move || {
        kafka.stop();
        kafka
    })
    .await
    .expect("stop kafka");
    // A commit already answered may still be confirmed.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let frozen = scene.confirmed().await;
    let outage = Instant::now();
    while outage.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        relay.assert_running();
        let now = scene.confirmed().await;
        assert_eq!(
            now, frozen,
            "confirmed_flush_lsn moved from {frozen} to {now} while the broker was down"
        );
    }
    let kafka = tokio::task::spawn_blocking(move || {
        kafka.start_again();
        kafka
    })
    .await
    .expect("start kafka again");
    scene
        .fault(
            format!("kafka stopped over 7 s (frozen at {frozen})"),
            before,
        )
        .await;
    // Once walrelay committed a Kafka transaction after the restart (one
    // progress record each), a crash of the broker.
    let seen = progress.last().await.map_or(-1, |p| p.offset);
    progress
        .wait_until("a commit after the restart", &mut relay, |p| {
            p.offset > seen
        })
        .await;
    assert!(
        load.wait_for(load.committed() + 1_000, WAIT).await,
        "the load stopped"
    );
    let before = scene.confirmed().await;
    let kafka = tokio::task::spawn_blocking(move || {
        kafka.kill();
        std::thread::sleep(Duration::from_secs(3));
        kafka.start_again();
        kafka
    })
    .await
    .expect("kill and start kafka");
    scene.fault("kafka killed".to_string(), before).await;
    let events = stop_after(&load, 1_000).await;
    let summary = scene
        .finish_exactly_once(load, events, &mut relay, &progress)
        .await;
    assert_eq!(summary.duplicates, 0);
    relay.assert_running();
    scene.ob.finish(relay).await;
    drop(kafka);
}

/// The broker away for longer than the transaction timeout
/// (`kafka.transactions.timeout_ms`, 5 s here) while a Kafka transaction
/// is open, so the broker aborts it: walrelay, the only instance, resumes
/// from the committed progress (the issue: "a failed or timed-out Kafka
/// transaction is aborted and the pipeline resumes") instead of stopping.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_outage_beyond_the_transaction_timeout_resumes() {
    let kafka = tokio::task::spawn_blocking(PrivateKafka::start)
        .await
        .expect("start private kafka");
    let mut scene = Scene::new(
        "eos_kafka_timeout",
        pg_url(),
        env().pg_port,
        kafka.bootstrap(),
    )
    .await;
    let progress = ProgressTopic::new(&scene.bootstrap, &scene.ob.name);
    let timeout = Duration::from_secs(5);
    let mut relay = Relay::start(&progress.config(
        &scene.config("", ""),
        &format!("timeout_ms = {}\n", timeout.as_millis()),
    ));
    scene.ob.wait_active(&mut relay).await;
    scene.start_probe().await;
    let mut spec = scene.spec(OPEN_ENDED);
    spec.pause = Duration::from_millis(10);
    let load = Load::start(spec).await;
    assert!(load.wait_for(2_000, WAIT).await, "the load did not start");
    let before = scene.confirmed().await;
    let kafka = tokio::task::spawn_blocking(move || {
        kafka.kill();
        // Events keep coming: walrelay has a transaction it cannot commit.
        std::thread::sleep(timeout * 3);
        kafka.start_again();
        kafka
    })
    .await
    .expect("kill and start kafka");
    scene
        .fault(format!("kafka down for over {:?}", timeout * 3), before)
        .await;
    let seen = progress.last().await.map_or(-1, |p| p.offset);
    progress
        .wait_until("a commit after the outage", &mut relay, |p| p.offset > seen)
        .await;
    let events = stop_after(&load, 1_000).await;
    let summary = scene
        .finish_exactly_once(load, events, &mut relay, &progress)
        .await;
    assert_eq!(summary.duplicates, 0);
    relay.assert_running();
    scene.ob.finish(relay).await;
    drop(kafka);
}

/// PostgreSQL restarted (fast shutdown) mid-load: walrelay reconnects,
/// skips what Kafka already has (the slot may come back behind the
/// progress), and every committed event arrives exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restart_mid_load_delivers_exactly_once() {
    let pg = tokio::task::spawn_blocking(PrivatePg::start)
        .await
        .expect("start private postgres");
    let mut scene = Scene::new("eos_pg_restart", pg.url(), pg.port(), kafka_bootstrap()).await;
    let progress = ProgressTopic::new(&scene.bootstrap, &scene.ob.name);
    let mut relay = Relay::start(&progress.config(&scene.config("", ""), ""));
    scene.ob.wait_active(&mut relay).await;
    scene.start_probe().await;
    let mut spec = scene.spec(OPEN_ENDED);
    spec.pause = Duration::from_millis(2);
    let load = Load::start(spec).await;
    assert!(load.wait_for(3_000, WAIT).await, "the load did not start");
    let before = scene.confirmed().await;
    let pg = tokio::task::spawn_blocking(move || {
        pg.stop();
        pg
    })
    .await
    .expect("stop postgres");
    tokio::time::sleep(Duration::from_secs(3)).await;
    relay.assert_running();
    let pg = tokio::task::spawn_blocking(move || {
        pg.start_again();
        pg
    })
    .await
    .expect("start postgres again");
    scene
        .fault("postgres fast restart".to_string(), before)
        .await;
    let events = stop_after(&load, 2_000).await;
    let summary = scene
        .finish_exactly_once(load, events, &mut relay, &progress)
        .await;
    assert!(
        summary.reconnects >= 1,
        "the generator never saw the restart"
    );
    assert_eq!(summary.duplicates, 0);
    relay.assert_running();
    drop(relay);
    drop(scene);
    drop(pg);
}

/// One streamed transaction of 1,000,000 rows, split over many Kafka
/// transactions, with walrelay SIGKILLed while it publishes them: after the
/// restart resumes inside the transaction, every row is read exactly once,
/// in order per key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn million_row_transaction_killed_mid_publication_exactly_once() {
    const ROWS: u64 = 1_000_000;
    let started = Instant::now();
    let pg = tokio::task::spawn_blocking(|| {
        let pg = PrivatePg::start();
        // The walsender streams the transaction while it runs.
        pg.conf(&["logical_decoding_work_mem=64kB"]);
        pg
    })
    .await
    .expect("start private postgres");
    let ob = Outbox::new_with("eos_million", pg.connect().await).await;
    let bootstrap = kafka_bootstrap();
    let topic = ob.topic("");
    create_topic_on(&bootstrap, &topic, 4).await;
    let progress = ProgressTopic::new(&bootstrap, &ob.name);
    let port = free_port();
    let config = progress.config(
        &ob.config_for(
            &bootstrap,
            pg.port(),
            "postgres",
            &format!("\"compression.type\" = \"lz4\"\n\n{}", metrics_on(port)),
        )
        .replace(
            "reconnect_max_ms = 1000\n",
            "reconnect_max_ms = 1000\nstreaming = true\n",
        ),
        "",
    );
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    wait_pipeline(port, "exactly-once mode", &mut relay, |m| {
        m.exactly_once.is_some()
    })
    .await;
    let before_insert = ob.current_lsn().await;
    ob.client
        .batch_execute(&format!(
            "INSERT INTO {} SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, \
             '{}', 'k' || (g % 97), 'E', jsonb_build_object('n', g) \
             FROM generate_series(1::int8, {ROWS}::int8) g",
            ob.name,
            ob.agg("")
        ))
        .await
        .expect("insert a million rows in one transaction");
    let inserted = started.elapsed();
    // Idle progress (keepalives moving the slot) commits Kafka
    // transactions too, so count only from the first one inside the big
    // transaction: once the progress topic shows one, two more commits
    // are certainly inside it.
    progress
        .wait_until("a Kafka transaction inside the big one", &mut relay, |p| {
            p.events > 0
        })
        .await;
    let m = wait_pipeline(port, "exactly-once mode", &mut relay, |m| {
        m.exactly_once.is_some()
    })
    .await;
    let committed_inside = committed(&m);
    // Part of the transaction is committed in Kafka: kill now.
    wait_pipeline(port, "Kafka transactions of the big one", &mut relay, |m| {
        committed(m) >= committed_inside + 2
    })
    .await;
    relay.kill();
    let at_kill = progress
        .last()
        .await
        .expect("progress committed before the kill");
    // Inside the big transaction the position stays at the boundary
    // before it, with the events already committed counted.
    assert!(
        at_kill.lsn <= before_insert && at_kill.events > 0 && at_kill.events < ROWS,
        "killed outside the publication of the transaction (it began after {before_insert}): last progress {at_kill:?}"
    );
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    let done = progress
        .wait_until("the end of the big transaction", &mut relay, |p| {
            p.lsn > before_insert && p.events == 0
        })
        .await;
    let confirmed = ob.slot_confirmed().await.expect("slot");
    let count = tokio::task::block_in_place(|| {
        count_events(
            &bootstrap,
            &topic,
            1..=ROWS,
            Duration::from_secs(300),
            &mut relay,
        )
    });
    eprintln!(
        "EXACTLY-ONCE SUMMARY eos_million: insert {inserted:?}, total {:?}, killed at {at_kill:?}, done {done:?}, {count:?}",
        started.elapsed()
    );
    assert_eq!(
        (count.distinct, count.records, count.repeats, count.outside),
        (ROWS, ROWS, 0, 0),
        "every row exactly once: {count:?}\n{}",
        tail(&relay.log(), 40)
    );
    assert_eq!(
        count.order_breaks, 0,
        "rows out of order per key: {count:?}"
    );
    assert!(
        confirmed <= done.lsn,
        "slot confirmed {confirmed}, progress {done:?}"
    );
    progress.assert_monotonic(&progress.history().await);
    drop(relay);
    drop(ob);
    drop(pg);
}

/// The initial snapshot (`snapshot_mode = "initial"`, which creates the
/// slot) is one Kafka transaction behind a committed snapshot marker:
/// walrelay SIGKILLed while it runs does it again at the restart, and a
/// `read_committed` consumer reads every row once, then what streams after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_killed_midway_is_done_again_exactly_once() {
    const ROWS: u64 = 200_000;
    const STREAMED: u64 = 10;
    let ob = Outbox::new("eos_snapshot").await;
    ob.insert_series(1, ROWS).await;
    let bootstrap = kafka_bootstrap();
    let topic = ob.topic("");
    create_topic_on(&bootstrap, &topic, 3).await;
    let progress = ProgressTopic::new(&bootstrap, &ob.name);
    let config = progress.config(
        &ob.config(&bootstrap).replace(
            "reconnect_max_ms = 1000\n",
            "reconnect_max_ms = 1000\nsnapshot_mode = \"initial\"\n",
        ),
        "",
    );
    let mut relay = Relay::start(&config);
    progress
        .wait_until("the snapshot marker", &mut relay, |p| {
            p.phase.as_deref() == Some("snapshot")
        })
        .await;
    relay.kill();
    let at_kill = progress.last().await.expect("the snapshot marker");
    assert_eq!(
        at_kill.phase.as_deref(),
        Some("snapshot"),
        "the snapshot of {ROWS} rows ended before the kill: {at_kill:?}"
    );
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    let probe = ob.create_probe().await;
    ob.insert_series(ROWS + 1, ROWS + STREAMED).await;
    let ends = commit_ends(&ob.client, &probe, &ob.name).await;
    let last = progress
        .wait_for(*ends.last().expect("the streamed commit"), &mut relay)
        .await;
    let count = tokio::task::block_in_place(|| {
        count_events(
            &bootstrap,
            &topic,
            1..=ROWS + STREAMED,
            Duration::from_secs(180),
            &mut relay,
        )
    });
    eprintln!("EXACTLY-ONCE SUMMARY eos_snapshot: killed at {at_kill:?}, then {last:?}; {count:?}");
    assert_eq!(
        (count.distinct, count.records, count.repeats, count.outside),
        (ROWS + STREAMED, ROWS + STREAMED, 0, 0),
        "every row exactly once: {count:?}\n{}",
        tail(&relay.log(), 40)
    );
    progress.assert_monotonic(&progress.history().await);
    ob.drop_probe(&probe).await;
    ob.finish(relay).await;
}

/// Instance A is SIGSTOPped mid-load; once the server has dropped its
/// connection, B (same configuration, same transactional id) takes the
/// slot over and fences A. A, resumed, exits non-zero without committing
/// anything more; B delivers everything, exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_instance_commits_nothing_more() {
    let pg = tokio::task::spawn_blocking(|| {
        let pg = PrivatePg::start();
        // The walsender of the stopped instance gives the slot up soon.
        pg.conf(&["wal_sender_timeout=2s"]);
        pg
    })
    .await
    .expect("start private postgres");
    let mut scene = Scene::new("eos_fencing", pg.url(), pg.port(), kafka_bootstrap()).await;
    let progress = ProgressTopic::new(&scene.bootstrap, &scene.ob.name);
    let config = progress.config(&scene.config("", ""), "");
    let mut a = Relay::start(&config);
    scene.ob.wait_active(&mut a).await;
    scene.start_probe().await;
    let mut spec = scene.spec(OPEN_ENDED);
    spec.pause = Duration::from_millis(3);
    let load = Load::start(spec).await;
    assert!(load.wait_for(2_000, WAIT).await, "the load did not start");
    let before = scene.confirmed().await;
    a.signal("STOP");
    let deadline = Instant::now() + WAIT;
    while scene.ob.slot_active().await {
        assert!(
            Instant::now() < deadline,
            "the server kept the stopped instance's connection"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stopped_at = progress.last().await;
    let mut b = Relay::start(&config);
    scene.ob.wait_active(&mut b).await;
    // B commits on its own before A wakes up.
    let floor = stopped_at.as_ref().map(|p| p.lsn).unwrap_or(Lsn::ZERO);
    progress
        .wait_until("a commit by the new instance", &mut b, |p| p.lsn > floor)
        .await;
    a.signal("CONT");
    let code = a.exit_code(WAIT);
    assert_ne!(
        code,
        0,
        "the fenced instance exited 0:\n{}",
        tail(&a.log(), 40)
    );
    scene
        .fault(
            format!(
                "A stopped at progress {stopped_at:?}, B took over, A resumed and exited {code}"
            ),
            before,
        )
        .await;
    let events = stop_after(&load, 2_000).await;
    let summary = scene
        .finish_exactly_once(load, events, &mut b, &progress)
        .await;
    assert_eq!(summary.duplicates, 0);
    eprintln!("EXACTLY-ONCE SUMMARY eos_fencing: fenced instance exit code {code}; {summary}");
    b.assert_running();
    drop(a);
    drop(b);
    drop(scene);
    drop(pg);
}

/// A Kafka transaction the broker fails (a record larger than its topic
/// allows, in the middle of a source transaction) is aborted and done
/// again from the committed progress with the refused record dead-lettered
/// (`errors.tolerance = "all"`): a `read_committed` consumer reads every
/// other event once and the dead letter once, nothing of the aborted try.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_kafka_transaction_is_aborted_and_done_again() {
    let ob = Outbox::new("eos_abort").await;
    let bootstrap = kafka_bootstrap();
    let (small, topic) = (ob.topic("a"), ob.topic("b"));
    create_topic_with(&bootstrap, &small, 1, &[("max.message.bytes", "1024")]).await;
    create_topic_on(&bootstrap, &topic, 1).await;
    let dlq = format!("{}_dlq", ob.name);
    create_topic_on(&bootstrap, &dlq, 1).await;
    let progress = ProgressTopic::new(&bootstrap, &ob.name);
    let port = free_port();
    let errors = format!(
        "{}\n[errors]\ntolerance = \"all\"\ndead_letter_topic = \"{dlq}\"\n",
        metrics_on(port)
    );
    let mut relay = Relay::start(&progress.config(&ob.config_with(&bootstrap, &errors), ""));
    ob.wait_active(&mut relay).await;
    let probe = ob.create_probe().await;
    ob.insert(1, "b", "k", r#"{"n": 1}"#).await;
    let ends = commit_ends(&ob.client, &probe, &ob.name).await;
    progress
        .wait_for(*ends.last().expect("one commit"), &mut relay)
        .await;
    let row = |n: u64, agg: &str, payload: &str| {
        format!(
            "INSERT INTO {} VALUES ('{}', '{}', 'k', 'E', {payload});",
            ob.name,
            event_id(n),
            ob.agg(agg)
        )
    };
    ob.client
        .batch_execute(&format!(
            "BEGIN; {} {} {} COMMIT;",
            row(2, "b", "'{\"n\": 2}'"),
            row(
                3,
                "a",
                "jsonb_build_object('n', 3, 'pad', repeat('x', 20000))"
            ),
            row(4, "b", "'{\"n\": 4}'")
        ))
        .await
        .expect("the transaction with the oversized event");
    ob.insert(5, "b", "k", r#"{"n": 5}"#).await;
    let ends = commit_ends(&ob.client, &probe, &ob.name).await;
    progress
        .wait_for(*ends.last().expect("three commits"), &mut relay)
        .await;
    let records = read_to_end_on(&bootstrap, &topic, WAIT).await;
    let got: Vec<u64> = records
        .iter()
        .map(|r| event_number(r.header("id").expect("id header")).expect("test id"))
        .collect();
    assert_eq!(
        got,
        vec![1, 2, 4, 5],
        "each event once, in commit order:\n{}",
        tail(&relay.log(), 40)
    );
    assert!(
        read_to_end_on(&bootstrap, &small, WAIT).await.is_empty(),
        "the oversized record reached its topic"
    );
    let letters = read_to_end_on(&bootstrap, &dlq, WAIT).await;
    assert_eq!(letters.len(), 1, "{}", common::describe(&letters));
    assert_eq!(
        letters[0].header("walrelay.event.id"),
        Some(event_id(3).as_bytes()),
        "{}",
        common::describe(&letters)
    );
    let m = pipeline(port).await.expect("metrics listener");
    let aborted = m
        .exactly_once
        .as_ref()
        .map_or(0, |e| e.transactions_aborted);
    assert!(aborted >= 1, "no Kafka transaction aborted: {m:?}");
    let uncommitted = read_uncommitted_to_end_on(&bootstrap, &topic, WAIT).await;
    eprintln!(
        "EXACTLY-ONCE SUMMARY eos_abort: {aborted} Kafka transactions aborted; read_committed {} records, read_uncommitted {}",
        records.len(),
        uncommitted.len()
    );
    ob.drop_probe(&probe).await;
    ob.finish(relay).await;
}

/// The slot advanced behind walrelay's back while it was stopped: at the
/// restart walrelay stops with an error naming the slot's position and the
/// committed progress; with `slot_ahead = "trust_slot"` it resumes at the
/// slot (what the slot skipped is not produced) and delivers what follows,
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slot_ahead_of_progress_is_refused_naming_both_positions() {
    let ob = Outbox::new("eos_slot_ahead").await;
    let bootstrap = kafka_bootstrap();
    let topic = ob.topic("");
    create_topic_on(&bootstrap, &topic, 1).await;
    let progress = ProgressTopic::new(&bootstrap, &ob.name);
    let base = ob.config(&bootstrap);
    let config = progress.config(&base, "");
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    let probe = ob.create_probe().await;
    for n in 1..=3 {
        ob.insert(n, "", "k", &format!("{{\"n\": {n}}}")).await;
    }
    let ends = commit_ends(&ob.client, &probe, &ob.name).await;
    let committed = progress
        .wait_for(*ends.last().expect("three commits"), &mut relay)
        .await;
    drop(relay);
    ob.wait_inactive().await;
    for n in 4..=6 {
        ob.insert(n, "", "k", &format!("{{\"n\": {n}}}")).await;
    }
    ob.client
        .execute(
            "SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())",
            &[&ob.name],
        )
        .await
        .expect("advance the slot");
    let slot_at = ob.slot_confirmed().await.expect("slot");
    let progress_at = progress.last().await.expect("progress").lsn;
    assert!(
        slot_at > progress_at && progress_at >= committed.lsn,
        "slot {slot_at}, progress {progress_at}"
    );

    let mut relay = Relay::start(&config);
    let code = relay.exit_code(WAIT);
    let log = relay.log();
    assert_ne!(code, 0, "{log}");
    assert!(
        log.contains(&slot_at.to_string()) && log.contains(&progress_at.to_string()),
        "the error must name the slot's position {slot_at} and the progress {progress_at}:\n{}",
        tail(&log, 30)
    );
    assert_eq!(
        ob.slot_confirmed().await,
        Some(slot_at),
        "the refused start moved the slot"
    );
    drop(relay);

    let mut relay = Relay::start(&progress.config(&base, "slot_ahead = \"trust_slot\"\n"));
    ob.wait_active(&mut relay).await;
    ob.insert(7, "", "k", r#"{"n": 7}"#).await;
    let ends = commit_ends(&ob.client, &probe, &ob.name).await;
    let after = progress
        .wait_for(*ends.last().expect("seven commits"), &mut relay)
        .await;
    let records = read_to_end_on(&bootstrap, &topic, WAIT).await;
    let got: Vec<u64> = records
        .iter()
        .map(|r| event_number(r.header("id").expect("id header")).expect("test id"))
        .collect();
    assert_eq!(
        got,
        vec![1, 2, 3, 7],
        "trust_slot resumes at the slot, once:\n{}",
        tail(&relay.log(), 30)
    );
    assert!(after.lsn > slot_at, "{after:?}");
    ob.drop_probe(&probe).await;
    ob.finish(relay).await;
}

/// `walrelay connect-standalone` with the given worker and connector lines
/// for `ob`, metrics on `metrics`.
fn connect_standalone(
    dir: &std::path::Path,
    ob: &Outbox,
    worker_extra: &str,
    connector_extra: &str,
    metrics: &str,
) -> Relay {
    let (worker, connector) = connect_files(
        dir,
        ob,
        env().pg_port,
        &kafka_bootstrap(),
        worker_extra,
        connector_extra,
    );
    Relay::start_args(
        &[
            OsStr::new("--metrics-addr"),
            OsStr::new(metrics),
            OsStr::new("connect-standalone"),
            worker.as_os_str(),
            connector.as_os_str(),
        ],
        dir.join("walrelay.log"),
    )
}

/// Kafka Connect's KIP-618 keys: a connector requiring exactly-once
/// (`exactly.once.support=required`) on a worker without
/// `exactly.once.source.support=enabled` (absent, or `disabled`) is refused
/// at start, naming the worker key, before any slot exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_exactly_once_required_without_worker_support_is_refused() {
    let ob = Outbox::new("eos_connect_refused").await;
    for worker_extra in ["", "exactly.once.source.support=disabled\n"] {
        let scratch = tempfile::tempdir().expect("scratch directory");
        let mut relay = connect_standalone(
            scratch.path(),
            &ob,
            worker_extra,
            "exactly.once.support=required\nsnapshot.mode=no_data\n",
            "127.0.0.1:0",
        );
        let code = relay.exit_code(WAIT);
        let log = relay.log();
        assert_eq!(code, 2, "worker lines {worker_extra:?}:\n{log}");
        assert!(
            log.contains("exactly.once.source.support"),
            "the refusal must name the worker key (worker lines {worker_extra:?}):\n{log}"
        );
        assert!(!ob.slot_exists().await, "a refused start created the slot");
    }
    ob.client
        .batch_execute(&format!(
            "DROP PUBLICATION IF EXISTS {0}; DROP TABLE {0}",
            ob.name
        ))
        .await
        .expect("drop the test's table");
}

/// The same connector on a worker with `exactly.once.source.support=enabled`
/// runs exactly-once: the snapshot row and the streamed ones are read once
/// by a `read_committed` consumer, `walrelay_exactly_once` is 1, and the
/// progress topic (`offsets.storage.topic`) holds the pipeline's records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_exactly_once_enabled_runs_transactional() {
    let ob = Outbox::new("eos_connect").await;
    let bootstrap = kafka_bootstrap();
    let topic = ob.topic("");
    create_topic_on(&bootstrap, &topic, 1).await;
    // Before the start: Debezium's default snapshot.mode=initial has it.
    ob.insert(1, "", "k1", r#"{"n": 1}"#).await;
    let progress = ProgressTopic::new(&bootstrap, &ob.name);
    let port = free_port();
    let scratch = tempfile::tempdir().expect("scratch directory");
    let mut relay = connect_standalone(
        scratch.path(),
        &ob,
        "exactly.once.source.support=enabled\n",
        &format!(
            "exactly.once.support=required\noffsets.storage.topic={}\n",
            progress.topic
        ),
        &format!("127.0.0.1:{port}"),
    );
    ob.wait_active(&mut relay).await;
    let probe = ob.create_probe().await;
    ob.insert(2, "", "k2", r#"{"n": 2}"#).await;
    ob.insert(3, "", "k1", r#"{"n": 3}"#).await;
    let ends = commit_ends(&ob.client, &probe, &ob.name).await;
    let want: HashSet<String> = (1..=3).map(event_id).collect();
    read_until_ids_on(&bootstrap, &topic, &want, &mut relay).await;
    let last = progress
        .wait_for(*ends.last().expect("two commits"), &mut relay)
        .await;
    assert_eq!(last.slot, ob.name, "{last:?}");
    let records = read_to_end_on(&bootstrap, &topic, WAIT).await;
    assert_eq!(records.len(), 3, "{}", common::describe(&records));
    assert_eq!(ids(&records), want);
    let m = pipeline(port).await.expect("metrics listener");
    assert!(m.exactly_once.is_some(), "{m:?}");
    assert!(committed(&m) >= 1, "{m:?}");
    ob.drop_probe(&probe).await;
    ob.finish(relay).await;
}
