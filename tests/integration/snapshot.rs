//! Debezium's `snapshot.mode` against the real servers: the rows already in
//! the outbox table are published once when walrelay creates the slot, and a
//! crash before they are all acknowledged leaves no slot behind.

use crate::common;

use std::collections::HashSet;
use std::time::Duration;

use common::relay::{event_id, ids, Outbox, Relay, WAIT};
use common::{consume, consume_on, create_topic_on, kafka_bootstrap, PrivateKafka};

async fn prefill(ob: &Outbox, n: u64) {
    for i in 1..=n {
        ob.insert(i, "", &format!("k{i}"), &format!("{{\"n\": {i}}}"))
            .await;
    }
}

/// `initial`: existing rows first, then the stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_snapshot_publishes_existing_rows_once() {
    let ob = Outbox::new("snap_initial").await;
    prefill(&ob, 3).await;
    let config = ob.config(&kafka_bootstrap()).replace(
        "reconnect_max_ms = 1000\n",
        "reconnect_max_ms = 1000\nsnapshot_mode = \"initial\"\n",
    );
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    ob.insert(4, "", "k4", r#"{"n": 4}"#).await;
    let records = consume(&ob.topic(""), 5, Duration::from_secs(20)).await;
    let got: Vec<String> = records
        .iter()
        .map(|r| String::from_utf8(r.header("id").unwrap().to_vec()).unwrap())
        .collect();
    assert_eq!(got.len(), 4, "{}", common::describe(&records));
    let first_three: HashSet<String> = got[..3].iter().cloned().collect();
    assert_eq!(first_three, (1..=3).map(event_id).collect::<HashSet<_>>());
    assert_eq!(got[3], event_id(4));
    let temporary: bool = ob
        .client
        .query_one(
            "SELECT temporary FROM pg_replication_slots WHERE slot_name = $1",
            &[&ob.name],
        )
        .await
        .unwrap()
        .get(0);
    assert!(!temporary);
    // A restart does not snapshot again: the slot exists.
    let mut relay = relay.kill_and_restart();
    ob.wait_active(&mut relay).await;
    ob.insert(5, "", "k5", r#"{"n": 5}"#).await;
    let records = consume(&ob.topic(""), 6, Duration::from_secs(15)).await;
    assert_eq!(records.len(), 5, "{}", common::describe(&records));
    ob.finish(relay).await;
}

/// `no_data`: only what is committed after the slot exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_data_skips_existing_rows() {
    let ob = Outbox::new("snap_no_data").await;
    prefill(&ob, 3).await;
    let mut relay = Relay::start(&ob.config(&kafka_bootstrap()));
    ob.wait_active(&mut relay).await;
    ob.insert(4, "", "k4", r#"{"n": 4}"#).await;
    let records = consume(&ob.topic(""), 2, Duration::from_secs(15)).await;
    assert_eq!(
        ids(&records),
        [event_id(4)].into_iter().collect::<HashSet<_>>()
    );
    ob.finish(relay).await;
}

/// Killed while the snapshot waits for Kafka: no slot is left, and the next
/// start snapshots again and delivers every row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_during_snapshot_leaves_no_slot() {
    let kafka = tokio::task::spawn_blocking(PrivateKafka::start)
        .await
        .unwrap();
    let ob = Outbox::new("snap_crash").await;
    create_topic_on(&kafka.bootstrap(), &ob.topic(""), 1).await;
    prefill(&ob, 50).await;
    let kafka = tokio::task::spawn_blocking(move || {
        kafka.stop();
        kafka
    })
    .await
    .unwrap();
    let config = ob.config(&kafka.bootstrap()).replace(
        "reconnect_max_ms = 1000\n",
        "reconnect_max_ms = 1000\nsnapshot_mode = \"initial\"\n",
    );
    let mut relay = Relay::start(&config);
    // The snapshot's temporary slot appears while it waits for the broker.
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let n: i64 = ob
            .client
            .query_one(
                "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE $1 || '_snap_%' AND temporary",
                &[&ob.name],
            )
            .await
            .unwrap()
            .get(0);
        if n == 1 {
            break;
        }
        relay.assert_running();
        assert!(
            std::time::Instant::now() < deadline,
            "no snapshot slot:\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    relay.kill();
    // The temporary slot goes with its connection; no permanent slot exists.
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let n: i64 = ob
            .client
            .query_one(
                "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE $1 || '%'",
                &[&ob.name],
            )
            .await
            .unwrap()
            .get(0);
        if n == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a slot survived the crash"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let kafka = tokio::task::spawn_blocking(move || {
        kafka.start_again();
        kafka
    })
    .await
    .unwrap();
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    let records = consume_on(
        &kafka.bootstrap(),
        &ob.topic(""),
        100,
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(
        ids(&records),
        (1..=50).map(event_id).collect::<HashSet<_>>()
    );
    ob.finish(relay).await;
    drop(kafka);
}
