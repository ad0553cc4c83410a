//! Smoke tests of the test environment itself: the real Kafka broker stores
//! and returns records byte for byte, and the real PostgreSQL's pgoutput
//! decodes with `walrelay_proto`. When these fail, every other integration
//! test is suspect.

use crate::common;

use std::time::Duration;

use bytes::Bytes;
use rdkafka::config::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use walrelay_proto::pgoutput::{decode_message, ColumnValue, LogicalMessage, OldTuple};
use walrelay_proto::Lsn;

const TIMEOUT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn kafka_round_trip_keeps_key_value_and_headers() {
    let topic = common::unique_name("smoke_kafka");
    common::create_topic(&topic, 2).await;

    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", common::kafka_bootstrap())
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .create()
        .expect("producer config is valid");
    let value: &[u8] = b"{\"id\":42}\x00\xff";
    let headers = OwnedHeaders::new()
        .insert(Header {
            key: "id",
            value: Some(&b"6f1d6d9a"[..]),
        })
        .insert(Header {
            key: "empty",
            value: Some(&b""[..]),
        })
        .insert(Header {
            key: "null",
            value: None::<&[u8]>,
        })
        .insert(Header {
            key: "id",
            value: Some(&b"second"[..]),
        });
    // Partition 1 explicitly: partition 0 stays empty, which read_to_end must
    // also get through.
    let (partition, offset) = producer
        .send(
            FutureRecord::to(&topic)
                .partition(1)
                .key(&b"order-42"[..])
                .payload(value)
                .headers(headers),
            TIMEOUT,
        )
        .await
        .unwrap_or_else(|(e, _)| panic!("produce to {topic}: {e}"));
    assert_eq!((partition, offset), (1, 0));

    let records = common::read_to_end(&topic, TIMEOUT).await;
    assert_eq!(records.len(), 1, "{}", common::describe(&records));
    let r = &records[0];
    assert_eq!((r.partition, r.offset), (1, 0));
    assert_eq!(r.key.as_deref(), Some(&b"order-42"[..]));
    assert_eq!(r.value.as_deref(), Some(value));
    assert_eq!(
        r.headers,
        vec![
            ("id".to_string(), Some(b"6f1d6d9a".to_vec())),
            ("empty".to_string(), Some(Vec::new())),
            ("null".to_string(), None),
            ("id".to_string(), Some(b"second".to_vec())),
        ]
    );
    assert_eq!(r.header("id"), Some(&b"6f1d6d9a"[..]));

    let again = common::consume(&topic, 1, TIMEOUT).await;
    assert_eq!(again, records, "a second reader sees the same record");
}

#[tokio::test]
async fn pgoutput_from_real_postgres_decodes() {
    let client = common::connect().await;
    let table = common::unique_name("smoke_pg");
    let publication = format!("{table}_pub");
    let slot = format!("{table}_slot");
    client
        .batch_execute(&format!(
            "CREATE TABLE {table} (id int4 PRIMARY KEY, name text NOT NULL, qty int4);
             CREATE PUBLICATION {publication} FOR TABLE {table};"
        ))
        .await
        .expect("create table and publication");
    client
        .execute(
            "SELECT pg_create_logical_replication_slot($1, 'pgoutput')",
            &[&slot],
        )
        .await
        .expect("create slot");
    client
        .batch_execute(&format!(
            "BEGIN;
             INSERT INTO {table} VALUES (1, 'ada', 5);
             UPDATE {table} SET qty = 6 WHERE id = 1;
             DELETE FROM {table} WHERE id = 1;
             COMMIT;"
        ))
        .await
        .expect("changes");
    let rows = client
        .query(
            "SELECT lsn::text, xid::text, data
               FROM pg_logical_slot_get_binary_changes($1, NULL, NULL,
                    'proto_version', '1', 'publication_names', $2)",
            &[&slot, &publication],
        )
        .await
        .expect("read the slot");
    // Clean up before asserting: a leftover slot holds WAL on the shared cluster.
    client
        .batch_execute(&format!(
            "SELECT pg_drop_replication_slot('{slot}');
             DROP PUBLICATION {publication};
             DROP TABLE {table};"
        ))
        .await
        .expect("clean up");

    let mut lsns = Vec::new();
    let mut xids = Vec::new();
    let mut messages = Vec::new();
    for row in &rows {
        let lsn: String = row.get(0);
        let xid: String = row.get(1);
        let data: Vec<u8> = row.get(2);
        lsns.push(lsn.parse::<Lsn>().expect("pg_lsn text parses"));
        xids.push(xid.parse::<u32>().expect("xid text parses"));
        messages.push(decode_message(Bytes::from(data), 1, false).expect("pgoutput decodes"));
    }
    assert!(
        lsns.windows(2).all(|w| w[0] <= w[1]),
        "LSNs go backwards: {lsns:?}"
    );
    assert_eq!(messages.len(), 6, "{messages:#?}");

    let LogicalMessage::Begin(begin) = &messages[0] else {
        panic!("expected Begin first: {messages:#?}");
    };
    assert!(
        xids.iter().all(|x| *x == begin.xid),
        "{xids:?} vs {begin:?}"
    );
    assert!(lsns[0] < begin.final_lsn);

    let LogicalMessage::Relation(rel) = &messages[1] else {
        panic!("expected Relation: {messages:#?}");
    };
    assert_eq!(rel.xid, None);
    assert_eq!(&rel.namespace[..], b"public");
    assert_eq!(&rel.name[..], table.as_bytes());
    assert_eq!(rel.replica_identity, b'd');
    let cols: Vec<(&[u8], bool, u32)> = rel
        .columns
        .iter()
        .map(|c| (&c.name[..], c.is_key(), c.type_oid))
        .collect();
    // int4 = 23, text = 25
    assert_eq!(
        cols,
        vec![
            (&b"id"[..], true, 23),
            (&b"name"[..], false, 25),
            (&b"qty"[..], false, 23)
        ]
    );

    let text = |s: &str| ColumnValue::Text(Bytes::copy_from_slice(s.as_bytes()));
    let LogicalMessage::Insert(insert) = &messages[2] else {
        panic!("expected Insert: {messages:#?}");
    };
    assert_eq!(insert.relation_id, rel.id);
    assert_eq!(insert.new.columns, vec![text("1"), text("ada"), text("5")]);

    let LogicalMessage::Update(update) = &messages[3] else {
        panic!("expected Update: {messages:#?}");
    };
    assert_eq!(update.relation_id, rel.id);
    assert_eq!(update.old, None, "no key change, REPLICA IDENTITY DEFAULT");
    assert_eq!(update.new.columns, vec![text("1"), text("ada"), text("6")]);

    let LogicalMessage::Delete(delete) = &messages[4] else {
        panic!("expected Delete: {messages:#?}");
    };
    assert_eq!(delete.relation_id, rel.id);
    let OldTuple::Key(key) = &delete.old else {
        panic!("expected a key tuple: {delete:?}");
    };
    assert_eq!(
        key.columns,
        vec![text("1"), ColumnValue::Null, ColumnValue::Null]
    );

    let LogicalMessage::Commit(commit) = &messages[5] else {
        panic!("expected Commit last: {messages:#?}");
    };
    assert_eq!(commit.commit_lsn, begin.final_lsn);
    assert!(commit.end_lsn > commit.commit_lsn);
    assert_eq!(lsns[5], commit.end_lsn);
    assert_eq!(commit.commit_time, begin.commit_time);
}

/// The fault tests' servers: data and address survive a stop or a SIGKILL.
#[tokio::test]
async fn private_servers_keep_data_across_stop_kill_and_start() {
    let pg = tokio::task::spawn_blocking(common::PrivatePg::start)
        .await
        .expect("start private cluster");
    let client = pg.connect().await;
    client
        .batch_execute("CREATE TABLE kept (id int4); INSERT INTO kept VALUES (7);")
        .await
        .expect("write to the private cluster");
    drop(client);
    let port = pg.port();
    let pg = tokio::task::spawn_blocking(move || {
        pg.stop();
        pg.start_again();
        pg
    })
    .await
    .expect("restart private cluster");
    assert_eq!(pg.port(), port);
    let client = pg.connect().await;
    let n: i32 = client
        .query_one("SELECT id FROM kept", &[])
        .await
        .expect("read after restart")
        .get(0);
    assert_eq!(n, 7);

    let kafka = tokio::task::spawn_blocking(common::PrivateKafka::start)
        .await
        .expect("start private broker");
    let topic = common::unique_name("smoke_private");
    common::create_topic_on(&kafka.bootstrap(), &topic, 1).await;
    let produce = |bootstrap: String, value: &'static [u8]| {
        let topic = topic.clone();
        async move {
            let producer: FutureProducer = ClientConfig::new()
                .set("bootstrap.servers", &bootstrap)
                .create()
                .expect("producer config is valid");
            producer
                .send(FutureRecord::<(), _>::to(&topic).payload(value), TIMEOUT)
                .await
                .unwrap_or_else(|(e, _)| panic!("produce to {topic}: {e}"))
        }
    };
    assert_eq!(produce(kafka.bootstrap(), b"before").await, (0, 0));
    let kafka = tokio::task::spawn_blocking(move || {
        kafka.kill();
        kafka.start_again();
        kafka
    })
    .await
    .expect("kill and restart private broker");
    assert_eq!(produce(kafka.bootstrap(), b"after").await, (0, 1));
    let records = common::consume_on(&kafka.bootstrap(), &topic, 2, TIMEOUT).await;
    let values: Vec<_> = records.iter().map(|r| r.value.clone()).collect();
    assert_eq!(
        values,
        vec![Some(b"before".to_vec()), Some(b"after".to_vec())],
        "{}",
        common::describe(&records)
    );
}

/// The shared cluster is the major version the environment announces
/// (`WALRELAY_TEST_PG_MAJOR`): the version matrix of `scripts/test.sh` runs
/// the core tests once per major, and must not test one server five times.
#[tokio::test]
async fn shared_cluster_is_the_announced_major() {
    let client = common::connect().await;
    let version: i32 = client
        .query_one("SELECT current_setting('server_version_num')::int4", &[])
        .await
        .expect("read server_version_num")
        .get(0);
    assert_eq!(
        (version / 10_000) as u32,
        common::pg_major(),
        "server_version_num {version}"
    );
}

/// Every tested major starts as a private cluster of that version, and a
/// physical standby of it replays the primary's writes, is promoted and
/// then accepts its own. From 17 on the standby synchronizes failover slots
/// and the primary lists its slot in `synchronized_standby_slots`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_clusters_and_standbys_of_every_major() {
    for major in [14, 15, 16, 17, 18] {
        let pg = tokio::task::spawn_blocking(move || common::PrivatePg::start_major(major))
            .await
            .expect("start private cluster");
        let primary = pg.connect().await;
        let version: i32 = primary
            .query_one("SELECT current_setting('server_version_num')::int4", &[])
            .await
            .expect("read server_version_num")
            .get(0);
        assert_eq!(
            version / 10_000,
            major as i32,
            "server_version_num {version}"
        );
        primary
            .batch_execute("CREATE TABLE kept (id int4); INSERT INTO kept VALUES (1);")
            .await
            .expect("write on the primary");
        let (pg, standby) = tokio::task::spawn_blocking(move || {
            let standby = pg.start_standby();
            (pg, standby)
        })
        .await
        .expect("start standby");
        primary
            .batch_execute("INSERT INTO kept VALUES (2)")
            .await
            .expect("write on the primary");
        let replica = standby.connect().await;
        let in_recovery: bool = replica
            .query_one("SELECT pg_is_in_recovery()", &[])
            .await
            .expect("ask the standby")
            .get(0);
        assert!(
            in_recovery,
            "PostgreSQL {major}: the standby is not in recovery"
        );
        let settings: Vec<(String, String)> = if major >= 17 {
            let sync: String = replica
                .query_one("SELECT current_setting('sync_replication_slots')", &[])
                .await
                .expect("read sync_replication_slots")
                .get(0);
            let listed: String = primary
                .query_one("SELECT current_setting('synchronized_standby_slots')", &[])
                .await
                .expect("read synchronized_standby_slots")
                .get(0);
            vec![
                ("sync_replication_slots".into(), sync),
                ("synchronized_standby_slots".into(), listed),
            ]
        } else {
            Vec::new()
        };
        if major >= 17 {
            assert_eq!(settings[0].1, "on", "PostgreSQL {major}: {settings:?}");
            assert_eq!(
                settings[1].1,
                format!("standby_{}", standby.port()),
                "PostgreSQL {major}: {settings:?}"
            );
        }
        let deadline = std::time::Instant::now() + TIMEOUT;
        loop {
            let n: i64 = replica
                .query_one("SELECT count(*) FROM kept", &[])
                .await
                .map(|row| row.get(0))
                .unwrap_or(0);
            if n == 2 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "PostgreSQL {major}: the standby has {n} of 2 rows after {TIMEOUT:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        drop(primary);
        let standby = tokio::task::spawn_blocking(move || {
            pg.stop_immediate();
            standby.promote();
            drop(pg);
            standby
        })
        .await
        .expect("promote the standby");
        let promoted = standby.connect().await;
        promoted
            .batch_execute("INSERT INTO kept VALUES (3)")
            .await
            .unwrap_or_else(|e| panic!("PostgreSQL {major}: write on the promoted standby: {e}"));
        let n: i64 = promoted
            .query_one("SELECT count(*) FROM kept", &[])
            .await
            .expect("count on the promoted standby")
            .get(0);
        assert_eq!(n, 3, "PostgreSQL {major}");
        assert_eq!(standby.major(), major);
    }
}
