//! Operations against the real servers: metrics that follow reality, the
//! lag monitor's alerts, an invalidated slot, heartbeats on a quiet
//! database. Assertions read `/metrics` as Prometheus would, and
//! `pg_replication_slots`.

use crate::common;
use crate::common::metrics::{exposition, free_port, pipeline, wait_pipeline};

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::relay::{Outbox, Relay, WAIT};
use common::{connect_url, consume_on, create_topic_on, unique_name, PrivateKafka, PrivatePg};

/// Kafka stopped under load: in-flight, oldest-unacked age and confirmed lag
/// rise, and the retained-WAL warning fires; with Kafka back they return to
/// zero and the warning clears.
///
/// On a cluster of its own: retained WAL is measured from the slot's
/// `restart_lsn`, which any open transaction in any database of the
/// cluster holds back, and grows with every database's WAL, so the tests
/// running beside this one on the shared cluster would keep the warning on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_alerts_follow_a_kafka_outage() {
    let kafka = tokio::task::spawn_blocking(PrivateKafka::start);
    let pg = tokio::task::spawn_blocking(PrivatePg::start).await.unwrap();
    let kafka = kafka.await.unwrap();
    let ob = Outbox::new_with("metrics", pg.connect().await).await;
    create_topic_on(&kafka.bootstrap(), &ob.topic(""), 1).await;
    let port = free_port();
    let extra = format!(
        "[metrics]\nlisten = \"127.0.0.1:{port}\"\n\n[lag]\npoll_interval_ms = 300\n\
         retained_wal_warning_bytes = 1048576\nretained_wal_critical_bytes = 1099511627776\n"
    );
    let mut relay = Relay::start(&ob.config_for(&kafka.bootstrap(), pg.port(), "postgres", &extra));
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k", "{}").await;
    assert_eq!(
        consume_on(&kafka.bootstrap(), &ob.topic(""), 1, WAIT)
            .await
            .len(),
        1
    );
    wait_pipeline(port, "ready", &mut relay, |m| m.ready).await;

    let kafka = tokio::task::spawn_blocking(move || {
        kafka.stop();
        kafka
    })
    .await
    .unwrap();
    // One event first, held in flight by the outage: from then on nothing is
    // confirmed, so all the WAL below counts as lag. (Without it a keepalive
    // the walsender sends while still reading the big transaction, with
    // nothing registered yet, may legitimately confirm up to the middle of
    // it: the commit record still lies ahead, so the transaction is resent.)
    ob.insert(2, "", "k", "{}").await;
    wait_pipeline(port, "the first event held in flight", &mut relay, |m| {
        m.in_flight >= 1
    })
    .await;
    // About 2 MB of outbox rows (hex text: little for pglz to compress) while
    // the broker is down.
    ob.client
        .execute(
            &format!(
                "INSERT INTO {} SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, $1, 'k', 'E', \
                 jsonb_build_object('n', g, 'pad', repeat(md5(g::text) || md5((-g)::text), 16)) FROM generate_series(3, 2002) g",
                ob.name
            ),
            &[&ob.agg("")],
        )
        .await
        .unwrap();
    let down = wait_pipeline(
        port,
        "in-flight work, age and lag while kafka is down",
        &mut relay,
        |m| {
            m.in_flight > 0
                && m.oldest_unacked_age_seconds > 0.5
                && m.confirmed_lag_bytes.is_some_and(|b| b > 500_000)
                && retained_wal_alert(m) == Some(1)
        },
    )
    .await;
    assert!(
        down.replication_lag_seconds.is_some_and(|s| s > 0.0),
        "{down:?}"
    );

    let kafka = tokio::task::spawn_blocking(move || {
        kafka.start_again();
        kafka
    })
    .await
    .unwrap();
    let records = consume_on(
        &kafka.bootstrap(),
        &ob.topic(""),
        2002,
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(records.len(), 2002);
    // restart_lsn advances at running-xacts records; a checkpoint writes one.
    let admin = pg.connect().await;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        admin.batch_execute("CHECKPOINT").await.unwrap();
        let m = pipeline(port).await;
        if m.as_ref().is_some_and(|m| {
            m.in_flight == 0
                && m.oldest_unacked_age_seconds == 0.0
                && m.replication_lag_seconds == Some(0.0)
                && retained_wal_alert(m) == Some(0)
        }) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "metrics did not return to zero: {m:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    ob.finish(relay).await;
    drop(kafka);
    drop(pg);
}

/// A slot invalidated while walrelay was stopped (tiny
/// max_slot_wal_keep_size): walrelay exits non-zero and says what happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalidated_slot_stops_walrelay() {
    let pg = tokio::task::spawn_blocking(|| {
        let pg = PrivatePg::start();
        pg.conf(&["max_slot_wal_keep_size=1MB", "wal_keep_size=0"]);
        pg
    })
    .await
    .unwrap();
    let client = pg.connect().await;
    let ob = Outbox::new_with("invalidated", client).await;
    let config = ob.config_for(
        &common::kafka_bootstrap(),
        pg.port(),
        "postgres",
        "[metrics]\nlisten = \"127.0.0.1:0\"\n",
    );
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    drop(relay);
    ob.wait_inactive().await;
    // Write and recycle far more WAL than the slot may keep.
    for _ in 0..6 {
        ob.client
            .batch_execute(
                "CREATE TABLE IF NOT EXISTS filler (v text);
                 INSERT INTO filler SELECT repeat(md5(g::text), 64) FROM generate_series(1, 20000) g;
                 SELECT pg_switch_wal(); CHECKPOINT;",
            )
            .await
            .unwrap();
    }
    let status: Option<String> = ob
        .client
        .query_one(
            "SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1",
            &[&ob.name],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        status.as_deref(),
        Some("lost"),
        "the test did not manage to invalidate the slot"
    );
    let mut relay = Relay::start(&config);
    let exit = tokio::task::block_in_place(|| relay.wait_exit(Duration::from_secs(60)))
        .unwrap_or_else(|| {
            panic!(
                "walrelay kept running on an invalidated slot:\n{}",
                relay.log()
            )
        });
    assert_eq!(exit.code(), Some(1), "{}", relay.log());
    let log = relay.log();
    assert!(
        log.contains("invalidated") && log.contains(&ob.name),
        "the error must say the slot was invalidated:\n{log}"
    );
    drop(relay);
    drop(pg);
}

/// Quiet outbox databases while another database writes WAL for a minute:
/// with the heartbeat on, the slot retains only a few MB of WAL, and the
/// heartbeat's writes are visible in the quiet database's commit count
/// (the database without a heartbeat is the control).
///
/// walrelay also follows the walsender's keepalives, which keeps a quiet slot
/// moving whenever the walsender catches up, so the control's slot need not
/// fall behind here; the heartbeat is what keeps it moving when the
/// walsender never idles.
///
/// On a cluster of its own, for the reason of
/// [`metrics_and_alerts_follow_a_kafka_outage`]: a long transaction of
/// another test on the shared cluster (a large-transaction test's, say)
/// pins every slot's `restart_lsn`, whatever the heartbeat does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_keeps_a_quiet_slot_moving() {
    let pg = tokio::task::spawn_blocking(PrivatePg::start).await.unwrap();
    let admin = pg.connect().await;
    let mut setups = Vec::new();
    for heartbeat in [true, false] {
        let db = unique_name(if heartbeat { "hb_on" } else { "hb_off" });
        admin
            .batch_execute(&format!("CREATE DATABASE {db}"))
            .await
            .unwrap();
        let url = format!(
            "host=127.0.0.1 port={} user=postgres dbname={db}",
            pg.port()
        );
        let ob = Outbox::new_with("quiet", connect_url(&url).await).await;
        let extra = if heartbeat {
            "[metrics]\nlisten = \"127.0.0.1:0\"\n\n[heartbeat]\ninterval_ms = 300\n"
        } else {
            "[metrics]\nlisten = \"127.0.0.1:0\"\n"
        };
        let mut relay =
            Relay::start(&ob.config_for(&common::kafka_bootstrap(), pg.port(), &db, extra));
        ob.wait_active(&mut relay).await;
        setups.push((db, ob, relay));
    }
    let commits = |db: String| {
        let admin = &admin;
        async move {
            let n: i64 = admin
                .query_one(
                    "SELECT xact_commit FROM pg_stat_database WHERE datname = $1",
                    &[&db],
                )
                .await
                .unwrap()
                .get(0);
            n
        }
    };
    let before = (
        commits(setups[0].0.clone()).await,
        commits(setups[1].0.clone()).await,
    );
    // Another database writes WAL steadily for a minute (about 0.3 MB/s);
    // meanwhile the heartbeat slot's retained WAL is sampled.
    let table = unique_name("hb_writer");
    admin
        .batch_execute(&format!("CREATE TABLE {table} (v text)"))
        .await
        .unwrap();
    let start_lsn: String = admin
        .query_one("SELECT pg_current_wal_lsn()::text", &[])
        .await
        .unwrap()
        .get(0);
    let mut max_retained = 0i64;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        admin
            .batch_execute(&format!(
                "INSERT INTO {table} SELECT repeat(md5(g::text), 16) FROM generate_series(1, 250) g"
            ))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        // After a warm-up long enough for restart_lsn to start following
        // (it moves at the running-xacts records PostgreSQL logs every 15 s).
        if started.elapsed() > Duration::from_secs(20) {
            let retained: i64 = admin
                .query_one(
                    "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::int8 FROM pg_replication_slots WHERE slot_name = $1",
                    &[&setups[0].1.name],
                )
                .await
                .unwrap()
                .get(0);
            max_retained = max_retained.max(retained);
        }
    }
    let written: i64 = admin
        .query_one(
            &format!("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '{start_lsn}')::int8"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        written > 10_000_000,
        "the writer produced only {written} bytes of WAL"
    );
    eprintln!(
        "heartbeat: retained at most {max_retained} bytes while another database wrote {written}"
    );
    assert!(
        max_retained < 12 * 1024 * 1024,
        "with the heartbeat the slot retained up to {max_retained} bytes of WAL (writer wrote {written})"
    );
    // Give the heartbeat a couple of intervals and a status update.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut lags = Vec::new();
    for (_, ob, _) in &setups {
        let lag: i64 = admin
            .query_one(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::int8 FROM pg_replication_slots WHERE slot_name = $1",
                &[&ob.name],
            )
            .await
            .unwrap()
            .get(0);
        lags.push(lag);
    }
    assert!(
        lags[0] < 8 * 1024 * 1024,
        "with the heartbeat the slot is {} bytes behind (writer wrote {written})",
        lags[0]
    );
    // Statistics reach pg_stat_database within a second or so.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after = (
        commits(setups[0].0.clone()).await,
        commits(setups[1].0.clone()).await,
    );
    let (with, without) = (after.0 - before.0, after.1 - before.1);
    // ~60 s at one heartbeat per 300 ms: about 200 transactions.
    assert!(
        with - without >= 60,
        "heartbeat transactions: {with} in the heartbeat database vs {without} in the control"
    );
    for (db, ob, relay) in setups {
        ob.finish(relay).await;
        admin
            .batch_execute(&format!("DROP DATABASE {db} WITH (FORCE)"))
            .await
            .unwrap();
    }
    admin
        .batch_execute(&format!("DROP TABLE {table}"))
        .await
        .unwrap();
    drop(admin);
    drop(pg);
}

/// A walsender with nothing to send is silent; walrelay asks it for a reply
/// instead of taking silence for a dead connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_stream_is_not_mistaken_for_a_dead_one() {
    let ob = Outbox::new("idle_alive").await;
    let port = free_port();
    let extra = format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n");
    let config = ob.config_with(&common::kafka_bootstrap(), &extra).replace(
        "status_interval_ms = 200\n",
        "status_interval_ms = 200\nreceive_timeout_ms = 1000\n",
    );
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k", "{}").await;
    wait_pipeline(port, "the first event", &mut relay, |m| {
        m.in_flight == 0 && !m.events_by_topic.is_empty()
    })
    .await;
    // Five receive timeouts of an idle stream.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let m = pipeline(port).await.expect("the state");
    assert_eq!(
        m.reconnects_total,
        0,
        "an idle stream was taken for a dead one:\n{}",
        relay.log()
    );
    ob.insert(2, "", "k", "{}").await;
    let records = common::consume(&ob.topic(""), 3, Duration::from_secs(15)).await;
    assert_eq!(records.len(), 2);
    ob.finish(relay).await;
}

/// The latency breakdown (`walrelay_stage_seconds`) counts what it says:
/// one `commit_to_receive` per transaction read, one `receive_to_produce`
/// and one `produce_to_ack` per event, and at least one `ack_to_confirm`
/// once the slot is confirmed past them; every observation in a bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_stages_count_transactions_and_events() {
    let ob = Outbox::new("stages").await;
    common::create_topic(&ob.topic(""), 1).await;
    let port = free_port();
    let mut relay = Relay::start(&ob.config_with(
        &common::kafka_bootstrap(),
        &format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n"),
    ));
    ob.wait_active(&mut relay).await;
    // 20 single-event transactions and one of 10 events.
    for n in 1..=20 {
        ob.insert(n, "", "k", "{}").await;
    }
    ob.insert_series(21, 30).await;
    let records = common::consume(&ob.topic(""), 30, WAIT).await;
    assert_eq!(common::relay::ids(&records).len(), 30);
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;

    // The histograms are read from the exposition itself: what is tested
    // is the `walrelay_stage_seconds` family a scraper reads.
    let stage = |m: &HashMap<String, f64>, stage: &str, what: &str| {
        get(
            m,
            &format!("walrelay_stage_seconds_{what}{{stage=\"{stage}\"}}"),
        )
    };
    let m = wait_exposition(
        port,
        "every event acknowledged and confirmed",
        &mut relay,
        |m| {
            stage(m, "produce_to_ack", "count") == 30.0
                && stage(m, "ack_to_confirm", "count") >= 1.0
        },
    )
    .await;
    assert_eq!(stage(&m, "receive_to_produce", "count"), 30.0, "{m:?}");
    // Transactions of other tests' tables in this database carry no
    // change of this publication and are not sent (PostgreSQL 15+).
    assert_eq!(stage(&m, "commit_to_receive", "count"), 21.0, "{m:?}");
    for s in [
        "commit_to_receive",
        "receive_to_produce",
        "produce_to_ack",
        "ack_to_confirm",
    ] {
        let count = stage(&m, s, "count");
        let sum = stage(&m, s, "sum");
        let inf = get(
            &m,
            &format!("walrelay_stage_seconds_bucket{{le=\"+Inf\",stage=\"{s}\"}}"),
        );
        assert_eq!(
            inf,
            count,
            "{s}: every observation in a bucket; {:?}",
            m.keys()
                .filter(|k| k.contains(s) && k.contains("_bucket"))
                .take(3)
                .collect::<Vec<_>>()
        );
        // Seconds on one machine's clock: nothing negative, nothing absurd.
        assert!(
            sum >= 0.0 && sum / count < 30.0,
            "{s}: sum {sum} over {count}"
        );
    }
    ob.finish(relay).await;
}

/// The retained-WAL alert level of the slot; `None` before the lag monitor
/// set it (or for polling).
fn retained_wal_alert(m: &walrelay::metrics::page::PipelineView) -> Option<i64> {
    m.slot
        .as_ref()
        .and_then(|s| s.alert_levels.get("retained_wal").copied())
}

/// A series of the exposition by its exact `name{labels}`; NaN when absent.
fn get(m: &HashMap<String, f64>, key: &str) -> f64 {
    m.get(key).copied().unwrap_or(f64::NAN)
}

/// Reads `/metrics` until `pred` holds, returning that exposition.
async fn wait_exposition(
    port: u16,
    what: &str,
    relay: &mut Relay,
    pred: impl Fn(&HashMap<String, f64>) -> bool,
) -> HashMap<String, f64> {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut last = HashMap::new();
    loop {
        if let Some(m) = exposition(port).await {
            if pred(&m) {
                return m;
            }
            last = m;
        }
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "/metrics never showed {what}; last: {last:?}\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
