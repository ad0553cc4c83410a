//! End-to-end tests of the relay against the real PostgreSQL and Kafka of
//! `scripts/test.sh`: the walrelay binary runs as a child process, a Kafka
//! consumer reads what it produced, and `pg_replication_slots` shows what it
//! confirmed. Each test owns its outbox table, publication, slot and topics.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use common::relay::{
    commit_ends, event_id, ids, java_partition, murmur2, read_until_ids, Outbox, Relay, WAIT,
};
use common::{
    consume, consume_on, create_topic, create_topic_on, create_topic_with, kafka_bootstrap,
    read_to_end, PrivateKafka,
};

#[test]
fn murmur2_matches_java() {
    // Values printed by Kafka 4.1.1's org.apache.kafka.common.utils.Utils.murmur2.
    assert_eq!(murmur2(b"21"), -973932308);
    assert_eq!(murmur2(b"foobar"), -790332482);
    assert_eq!(murmur2(b"a-little-bit-long-string"), -985981536);
    assert_eq!(murmur2(b"a-little-bit-longer-string"), -1486304829);
    assert_eq!(
        murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
        -58897971
    );
    assert_eq!(murmur2(b"abc"), 479470107);
}

/// (a) One insert gives exactly one record with Debezium's default routing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_insert_gives_one_record() {
    let ob = Outbox::new("one_insert").await;
    let mut relay = Relay::start(&ob.config(&kafka_bootstrap()));
    ob.wait_active(&mut relay).await;
    // Key order and spacing as written; PostgreSQL's jsonb_out normalises them.
    ob.insert(
        1,
        "",
        "10711fa5",
        r#"{"email":"gh@mefi.in","a":[1, 2],"name" : "x"}"#,
    )
    .await;
    // A second, later event in its own transaction proves nothing else came before it.
    ob.insert(2, "", "10711fa5", "{}").await;
    let records = consume(&ob.topic(""), 3, Duration::from_secs(20)).await;
    assert_eq!(records.len(), 2, "{}", common::describe(&records));
    let r = &records[0];
    assert_eq!(r.key.as_deref(), Some(&b"10711fa5"[..]));
    assert_eq!(
        r.value.as_deref(),
        Some(&br#"{"a": [1, 2], "name": "x", "email": "gh@mefi.in"}"#[..]),
        "value must be PostgreSQL's jsonb text"
    );
    assert_eq!(
        r.headers,
        vec![("id".to_string(), Some(event_id(1).into_bytes()))]
    );
    assert_eq!(records[1].value.as_deref(), Some(&b"{}"[..]));
    ob.finish(relay).await;
}

/// (b) Insert and delete in one transaction give exactly one record; a
/// rolled-back transaction gives none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_delete_and_rollback() {
    let ob = Outbox::new("insert_delete").await;
    let mut relay = Relay::start(&ob.config(&kafka_bootstrap()));
    ob.wait_active(&mut relay).await;
    let t = &ob.name;
    let agg = ob.agg("");
    ob.client
        .batch_execute(&format!(
            "BEGIN;
             INSERT INTO {t} VALUES ('{}', '{agg}', 'k1', 'E', '{{\"n\": 1}}');
             DELETE FROM {t} WHERE id = '{}';
             COMMIT;
             BEGIN;
             INSERT INTO {t} VALUES ('{}', '{agg}', 'k1', 'E', '{{\"n\": 2}}');
             ROLLBACK;
             BEGIN;
             INSERT INTO {t} VALUES ('{}', '{agg}', 'k1', 'E', '{{\"n\": 3}}');
             DELETE FROM {t};
             COMMIT;",
            event_id(1),
            event_id(1),
            event_id(2),
            event_id(3)
        ))
        .await
        .expect("transactions");
    let records = consume(&ob.topic(""), 3, Duration::from_secs(20)).await;
    let got: Vec<_> = records
        .iter()
        .map(|r| r.header("id").map(<[u8]>::to_vec))
        .collect();
    assert_eq!(
        got,
        vec![
            Some(event_id(1).into_bytes()),
            Some(event_id(3).into_bytes())
        ],
        "{}",
        common::describe(&records)
    );
    let left: i64 = ob
        .client
        .query_one(&format!("SELECT count(*) FROM {t}"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "the outbox table stays empty");
    ob.finish(relay).await;
}

/// (c) An UPDATE of an outbox row gives no record (default policy: warn and drop).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_gives_no_record() {
    let ob = Outbox::new("update").await;
    let mut relay = Relay::start(&ob.config(&kafka_bootstrap()));
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k", r#"{"v": 1}"#).await;
    ob.client
        .execute(
            &format!("UPDATE {} SET payload = '{{\"v\": 2}}'", ob.name),
            &[],
        )
        .await
        .unwrap();
    ob.insert(2, "", "k", r#"{"v": 3}"#).await;
    let records = consume(&ob.topic(""), 3, Duration::from_secs(20)).await;
    let values: Vec<_> = records
        .iter()
        .map(|r| r.value.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        values,
        vec![br#"{"v": 1}"#.to_vec(), br#"{"v": 3}"#.to_vec()],
        "{}",
        common::describe(&records)
    );
    relay.assert_running();
    ob.finish(relay).await;
}

/// (d) Three aggregate types go to three topics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_aggregate_types_three_topics() {
    let ob = Outbox::new("three_topics").await;
    let mut relay = Relay::start(&ob.config(&kafka_bootstrap()));
    ob.wait_active(&mut relay).await;
    let mut n = 0;
    for round in 0..3 {
        for suffix in ["_order", "_user", "_invoice"] {
            n += 1;
            ob.insert(
                n,
                suffix,
                &format!("{suffix}-{round}"),
                &format!("{{\"n\": {n}}}"),
            )
            .await;
        }
    }
    for (i, suffix) in ["_order", "_user", "_invoice"].iter().enumerate() {
        let records = consume(&ob.topic(suffix), 4, Duration::from_secs(15)).await;
        let want: Vec<Vec<u8>> = (0..3)
            .map(|round| format!("{{\"n\": {}}}", round * 3 + i + 1).into_bytes())
            .collect();
        let got: Vec<Vec<u8>> = records.iter().map(|r| r.value.clone().unwrap()).collect();
        assert_eq!(
            got,
            want,
            "topic {}: {}",
            ob.topic(suffix),
            common::describe(&records)
        );
    }
    ob.finish(relay).await;
}

/// (e) 10 aggregates x 100 events over many transactions into 6 partitions:
/// every key's records in commit order on Java's murmur2 partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_key_order_on_java_partition() {
    let ob = Outbox::new("partitions").await;
    create_topic(&ob.topic(""), 6).await;
    let mut relay = Relay::start(&ob.config(&kafka_bootstrap()));
    ob.wait_active(&mut relay).await;
    // 1000 events, interleaved across keys, 1 to 7 events per transaction.
    let mut statements = String::new();
    let mut n = 0u64;
    let mut txn_size = 0;
    statements.push_str("BEGIN;");
    for seq in 0..100 {
        for agg in 0..10 {
            n += 1;
            statements.push_str(&format!(
                "INSERT INTO {} VALUES ('{}', '{}', 'aggregate-{agg}', 'E', '{{\"seq\": {seq}}}');",
                ob.name,
                event_id(n),
                ob.agg("")
            ));
            txn_size += 1;
            if txn_size == (n % 7 + 1) {
                statements.push_str("COMMIT; BEGIN;");
                txn_size = 0;
            }
        }
    }
    statements.push_str("COMMIT;");
    ob.client.batch_execute(&statements).await.expect("load");
    let records = consume(&ob.topic(""), 1000, Duration::from_secs(60)).await;
    assert_eq!(records.len(), 1000, "got {} records", records.len());
    let mut per_key: HashMap<Vec<u8>, Vec<(i32, i64, u64)>> = HashMap::new();
    for r in &records {
        let key = r.key.clone().expect("key");
        let v: serde_json::Value = serde_json::from_slice(r.value.as_deref().unwrap()).unwrap();
        per_key
            .entry(key)
            .or_default()
            .push((r.partition, r.offset, v["seq"].as_u64().unwrap()));
    }
    assert_eq!(per_key.len(), 10);
    for (key, mut recs) in per_key {
        let want_partition = java_partition(&key, 6);
        assert!(
            recs.iter().all(|(p, _, _)| *p == want_partition),
            "key {:?} not all on partition {want_partition}",
            String::from_utf8_lossy(&key)
        );
        recs.sort_by_key(|(_, offset, _)| *offset);
        let seqs: Vec<u64> = recs.iter().map(|(_, _, s)| *s).collect();
        assert_eq!(
            seqs,
            (0..100).collect::<Vec<_>>(),
            "key {:?} out of commit order",
            String::from_utf8_lossy(&key)
        );
    }
    ob.finish(relay).await;
}

/// (f) SIGKILL in the middle of 10,000 events, then restart: every event id
/// arrives at least once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_stream_loses_nothing() {
    let ob = Outbox::new("sigkill").await;
    let mut relay = Relay::start(&ob.config(&kafka_bootstrap()));
    ob.wait_active(&mut relay).await;
    // 1000 transactions of 10 events.
    let writer = ob.spawn_writer(1000, 10, 50, None);
    // Kill once some but not all events made it.
    let topic = ob.topic("");
    let deadline = Instant::now() + WAIT;
    loop {
        let seen = read_to_end(&topic, WAIT).await.len();
        if seen >= 500 {
            break;
        }
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "no progress before the kill:\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let relay_log_before = relay.log();
    let mut relay = relay.kill_and_restart();
    writer.await.expect("writer");
    let want: HashSet<String> = (1..=10_000).map(event_id).collect();
    let records = read_until_ids(&topic, &want, &mut relay).await;
    assert!(records.len() >= 10_000);
    // The restarted relay resumed from the slot: it did not start over.
    assert!(
        records.len() < 20_000,
        "{} records: the restart replayed far more than the unconfirmed window\n{relay_log_before}",
        records.len()
    );
    ob.finish(relay).await;
}

/// (g) Kafka stopped, 100 events committed: the slot is not confirmed past
/// them while the broker is down; once it is back, all arrive and the LSN
/// advances.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_down_freezes_the_slot() {
    let kafka = tokio::task::spawn_blocking(PrivateKafka::start)
        .await
        .unwrap();
    let ob = Outbox::new("kafka_down").await;
    let topic = ob.topic("");
    create_topic_on(&kafka.bootstrap(), &topic, 1).await;
    let mut relay = Relay::start(&ob.config(&kafka.bootstrap()));
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k", "{}").await;
    assert_eq!(
        consume_on(&kafka.bootstrap(), &topic, 1, WAIT).await.len(),
        1
    );

    let kafka = tokio::task::spawn_blocking(move || {
        kafka.stop();
        kafka
    })
    .await
    .unwrap();
    // A probe slot decodes the same publication, so the test knows the exact
    // commit end LSNs of the 100 events' transactions.
    let probe = ob.create_probe().await;
    for n in 2..=101 {
        ob.insert(n, "", &format!("k{}", n % 7), &format!("{{\"n\": {n}}}"))
            .await;
    }
    let ends = commit_ends(&ob.client, &probe, &ob.name).await;
    assert_eq!(ends.len(), 100, "probe saw {} commits", ends.len());
    let first_end = ends[0];
    let last_end = *ends.last().unwrap();
    // Well past several status intervals: the relay has received the events
    // and reported, and must not have confirmed the first of them.
    for _ in 0..15 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let confirmed = ob.slot_confirmed().await.unwrap();
        assert!(
            confirmed < first_end,
            "confirmed {confirmed} passed undelivered commit {first_end} while kafka was down"
        );
        relay.assert_running();
    }
    let kafka = tokio::task::spawn_blocking(move || {
        kafka.start_again();
        kafka
    })
    .await
    .unwrap();
    let records = consume_on(&kafka.bootstrap(), &topic, 101, Duration::from_secs(120)).await;
    let want: HashSet<String> = (1..=101).map(event_id).collect();
    assert_eq!(ids(&records), want, "{}", relay.log());
    ob.wait_confirmed(last_end, &relay).await;
    ob.drop_probe(&probe).await;
    ob.finish(relay).await;
    drop(kafka);
}

/// (h) An idle outbox while other tables take writes: the slot keeps up with
/// the server's WAL position.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_outbox_does_not_pin_wal() {
    let ob = Outbox::new("idle").await;
    let other = format!("{}_other", ob.name);
    ob.client
        .batch_execute(&format!(
            "CREATE TABLE {other} (id serial PRIMARY KEY, v text)"
        ))
        .await
        .unwrap();
    let mut relay = Relay::start(&ob.config(&kafka_bootstrap()));
    ob.wait_active(&mut relay).await;
    for i in 0..50 {
        ob.client
            .execute(
                &format!(
                    "INSERT INTO {other} (v) SELECT repeat('x', 1000) FROM generate_series(1, 20)"
                ),
                &[],
            )
            .await
            .unwrap();
        if i % 10 == 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let target = ob.current_lsn().await;
    ob.wait_confirmed(target, &relay).await;
    relay.assert_running();
    ob.finish(relay).await;
}

/// (i) One transaction with 100,000 outbox rows is delivered completely.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_transaction_of_100k_rows() {
    let ob = Outbox::new("big_txn").await;
    let mut relay = Relay::start(&ob.config(&kafka_bootstrap()));
    ob.wait_active(&mut relay).await;
    ob.client
        .execute(
            &format!(
                "INSERT INTO {} SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, $1, 'k' || (g % 100), 'E', \
                 jsonb_build_object('n', g, 'pad', repeat('p', 200)) FROM generate_series(1, 100000) g",
                ob.name
            ),
            &[&ob.agg("")],
        )
        .await
        .expect("big insert");
    let after = ob.current_lsn().await;
    let records = consume(&ob.topic(""), 100_000, Duration::from_secs(240)).await;
    let want: HashSet<String> = (1..=100_000).map(event_id).collect();
    assert_eq!(records.len(), 100_000, "{}", relay.log());
    assert_eq!(ids(&records), want);
    ob.wait_confirmed(after, &relay).await;
    ob.finish(relay).await;
}

/// (i2) A topic whose `max.message.bytes` (20,000) is far below the
/// producer's batch size: the broker applies it to whole batches, and
/// librdkafka does not split a refused batch, so 5,000 small events queued
/// together would all be refused. walrelay reads the limit before the first
/// record and sizes its batches for it: every event arrives, in order, and
/// the slot is confirmed past the commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_topic_limit_gets_small_batches() {
    let ob = Outbox::new("small_limit").await;
    let topic = ob.topic("");
    create_topic_with(
        &kafka_bootstrap(),
        &topic,
        1,
        &[("max.message.bytes", "20000")],
    )
    .await;
    let mut relay = Relay::start(&ob.config(&kafka_bootstrap()));
    ob.wait_active(&mut relay).await;
    ob.insert_series(1, 5000).await;
    let after = ob.current_lsn().await;
    let want: HashSet<String> = (1..=5000).map(event_id).collect();
    let records = read_until_ids(&topic, &want, &mut relay).await;
    assert_eq!(records.len(), 5000, "each event once");
    let order: Vec<String> = records
        .iter()
        .map(|r| String::from_utf8(r.header("id").expect("id header").to_vec()).expect("utf-8"))
        .collect();
    let expected: Vec<String> = (1..=5000).map(event_id).collect();
    assert!(order == expected, "events out of order");
    ob.wait_confirmed(after, &relay).await;
    relay.assert_running();
    ob.finish(relay).await;
}

/// (j) SIGTERM under load exits 0 within 10 s; the restart resumes without loss.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_under_load_is_clean() {
    let ob = Outbox::new("sigterm").await;
    let mut relay = Relay::start(&ob.config(&kafka_bootstrap()));
    ob.wait_active(&mut relay).await;
    // 500 transactions of 10 events, pausing 20 ms every 50.
    let writer = ob.spawn_writer(500, 10, 20, Some(50));
    let topic = ob.topic("");
    let deadline = Instant::now() + WAIT;
    while read_to_end(&topic, WAIT).await.len() < 300 {
        relay.assert_running();
        assert!(Instant::now() < deadline, "no progress:\n{}", relay.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    relay.signal("TERM");
    let status = tokio::task::block_in_place(|| relay.wait_exit(Duration::from_secs(10)));
    let status = status.unwrap_or_else(|| {
        panic!(
            "walrelay did not exit within 10 s of SIGTERM:\n{}",
            relay.log()
        )
    });
    assert!(
        status.success(),
        "walrelay exited with {status}:\n{}",
        relay.log()
    );
    ob.wait_inactive().await;
    let mut relay = Relay::start(&ob.config(&kafka_bootstrap()));
    writer.await.expect("writer");
    let want: HashSet<String> = (1..=5_000).map(event_id).collect();
    read_until_ids(&topic, &want, &mut relay).await;
    ob.finish(relay).await;
}
