//! Operating walrelay: a hot standby on the same slot, a publication that
//! does not carry the outbox, a permanent Kafka delivery failure and its
//! repair, a missing outbox table. Each test runs the walrelay binary as a
//! child process against the real PostgreSQL and Kafka of `scripts/test.sh`
//! and asserts on what a consumer reads, on
//! `pg_replication_slots`, on exit codes and on the operator-facing log.

use crate::common;

use common::relay::{commit_ends, event_id, ids, read_until_ids, Outbox, Relay, WAIT};

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::{consume, kafka_bootstrap, read_to_end};
use rdkafka::admin::{
    AdminClient, AdminOptions, AlterConfig, NewTopic, ResourceSpecifier, TopicReplication,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;

/// Bound on walrelay stopping by itself after a fatal error.
const EXIT_WAIT: Duration = Duration::from_secs(30);

fn admin() -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", kafka_bootstrap())
        .create()
        .expect("admin client config is valid")
}

fn admin_options() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)))
}

/// Waits for the relay to exit by itself within [`EXIT_WAIT`]; returns its
/// exit code.
fn exit_code(relay: &mut Relay) -> i32 {
    let status = tokio::task::block_in_place(|| relay.wait_exit(EXIT_WAIT))
        .unwrap_or_else(|| panic!("walrelay still runs after {EXIT_WAIT:?}:\n{}", relay.log()));
    status
        .code()
        .unwrap_or_else(|| panic!("walrelay ended by {status}:\n{}", relay.log()))
}

/// The walrelay process that waits on a slot someone else streams from
/// takes over when that one is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_standby_takes_over_after_sigkill() {
    let ob = Outbox::new("hot_standby").await;
    let config = ob.config(&kafka_bootstrap());
    let mut primary = Relay::start(&config);
    ob.wait_active(&mut primary).await;
    let mut standby = Relay::start(&config);
    // The standby must see the slot in use, and keep retrying.
    let deadline = Instant::now() + WAIT;
    while !standby.log().contains("reconnecting") {
        standby.assert_running();
        assert!(
            Instant::now() < deadline,
            "the standby did not report the busy slot:\n{}",
            standby.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ob.insert(1, "", "k", r#"{"n": 1}"#).await;
    let records = consume(&ob.topic(""), 1, WAIT).await;
    assert_eq!(records.len(), 1, "{}", primary.log());
    // A few reconnect cycles (backoff max 1 s) later it still waits.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    standby.assert_running();
    primary.assert_running();
    assert!(
        standby.log().contains("55006"),
        "the standby's log should name the busy slot (object_in_use):\n{}",
        standby.log()
    );
    assert!(
        !standby.log().contains("streaming"),
        "the standby streamed while the primary held the slot:\n{}",
        standby.log()
    );
    let primary_walsender: i32 = ob
        .client
        .query_one(
            "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1",
            &[&ob.name],
        )
        .await
        .unwrap()
        .get(0);

    primary.kill();
    // Takeover: the walsender notices the dead peer at once on loopback,
    // the standby retries within its backoff maximum of 1 s.
    let takeover = Instant::now();
    let bound = Duration::from_secs(15);
    loop {
        let row = ob
            .client
            .query_one(
                "SELECT active, active_pid FROM pg_replication_slots WHERE slot_name = $1",
                &[&ob.name],
            )
            .await
            .unwrap();
        let active: bool = row.get(0);
        let pid: Option<i32> = row.get(1);
        if active && pid != Some(primary_walsender) && standby.log().contains("streaming") {
            break;
        }
        standby.assert_running();
        assert!(
            takeover.elapsed() < bound,
            "the standby did not take the slot over within {bound:?}:\n{}",
            standby.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ob.insert(2, "", "k", r#"{"n": 2}"#).await;
    let want: HashSet<String> = (1..=2).map(event_id).collect();
    let records = read_until_ids(&ob.topic(""), &want, &mut standby).await;
    assert_eq!(ids(&records), want);
    standby.assert_running();
    drop(primary);
    ob.finish(standby).await;
}

/// A publication that exists but does not carry the outbox table: walrelay
/// stops with code 1 naming the publication and the table, before it
/// creates a slot (a slot it cannot use would only pin WAL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publication_without_the_outbox_table_is_fatal() {
    let ob = Outbox::new("pub_mismatch").await;
    let other = format!("{}_other", ob.name);
    ob.client
        .batch_execute(&format!(
            "CREATE TABLE {other} (id int PRIMARY KEY);
             CREATE PUBLICATION {} FOR TABLE {other};",
            ob.name
        ))
        .await
        .expect("other table and publication");
    let mut relay = Relay::start(&ob.config(&kafka_bootstrap()));
    let code = exit_code(&mut relay);
    let log = relay.log();
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains(&format!("publication {} ", ob.name))
            && log.contains(&format!("public.{}", ob.name))
            && log.contains("the table is not in it"),
        "the log must name the publication, the table and the reason:\n{log}"
    );
    assert!(
        !ob.slot_exists().await,
        "walrelay created slot {} for a publication it cannot use:\n{log}",
        ob.name
    );
    // The publication is the operator's: walrelay did not change it.
    let tables: Vec<String> = ob
        .client
        .query(
            "SELECT tablename::text FROM pg_publication_tables WHERE pubname = $1",
            &[&ob.name],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(tables, vec![other.clone()]);
    ob.client
        .batch_execute(&format!("DROP TABLE {other}"))
        .await
        .unwrap();
    ob.finish_exited(relay).await;
}

/// A publication altered away from the outbox while the slot already has a
/// confirmed position: the restart fails the same way and leaves the slot
/// exactly where it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publication_mismatch_on_restart_keeps_the_slot() {
    let ob = Outbox::new("pub_mismatch_restart").await;
    let other = format!("{}_other", ob.name);
    ob.client
        .batch_execute(&format!("CREATE TABLE {other} (id int PRIMARY KEY)"))
        .await
        .unwrap();
    let mut relay = Relay::start(&ob.config(&kafka_bootstrap()));
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k", "{}").await;
    assert_eq!(consume(&ob.topic(""), 1, WAIT).await.len(), 1);
    let target = ob.current_lsn().await;
    ob.wait_confirmed(target, &relay).await;
    relay.signal("TERM");
    let code = exit_code(&mut relay);
    assert_eq!(code, 0, "{}", relay.log());
    ob.wait_inactive().await;
    let before = ob.slot_confirmed().await.expect("slot exists");

    ob.client
        .batch_execute(&format!("ALTER PUBLICATION {} SET TABLE {other}", ob.name))
        .await
        .unwrap();
    // An event the relay must not skip: it stays behind the slot position.
    ob.insert(2, "", "k", "{}").await;
    let mut relay = Relay::start(&ob.config(&kafka_bootstrap()));
    let code = exit_code(&mut relay);
    let log = relay.log();
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains(&format!("publication {} ", ob.name))
            && log.contains("the table is not in it"),
        "{log}"
    );
    assert_eq!(ob.slot_confirmed().await, Some(before), "{log}");
    assert!(!ob.slot_active().await);
    ob.client
        .batch_execute(&format!("DROP TABLE {other}"))
        .await
        .unwrap();
    ob.finish_exited(relay).await;
}

/// A record the broker refuses for good (larger than the topic's
/// max.message.bytes) stops walrelay with code 1 without confirming it;
/// once the topic is fixed, a restart delivers it and everything after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permanent_delivery_failure_stops_without_confirming() {
    let ob = Outbox::new("too_large").await;
    let topic = ob.topic("");
    let results = admin()
        .create_topics(
            &[NewTopic::new(&topic, 1, TopicReplication::Fixed(1))
                .set("max.message.bytes", "1024")],
            &admin_options(),
        )
        .await
        .expect("create topic");
    for r in results {
        r.unwrap_or_else(|(name, code)| panic!("create topic {name}: {code}"));
    }
    let mut relay = Relay::start(&ob.config(&kafka_bootstrap()));
    ob.wait_active(&mut relay).await;
    let probe = ob.create_probe().await;
    ob.insert(1, "", "k", r#"{"n": 1}"#).await;
    let records = consume(&topic, 1, WAIT).await;
    assert_eq!(records.len(), 1, "{}", relay.log());
    let big = format!(r#"{{"n": 2, "pad": "{}"}}"#, "x".repeat(20_000));
    ob.insert(2, "", "k", &big).await;
    ob.insert(3, "", "k", r#"{"n": 3}"#).await;
    let ends = commit_ends(&ob.client, &probe, &ob.name).await;
    assert_eq!(ends.len(), 3, "probe saw {ends:?}");
    let big_end = ends[1];

    let code = exit_code(&mut relay);
    let log = relay.log();
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("kafka could not deliver a record") && log.contains(&topic),
        "the log must name the failed delivery and the topic:\n{log}"
    );
    let confirmed = ob.slot_confirmed().await.expect("slot exists");
    assert!(
        confirmed < big_end,
        "confirmed {confirmed} passed the undelivered commit {big_end}:\n{log}"
    );
    assert!(
        confirmed >= ends[0],
        "the delivered first event stays confirmed"
    );
    let records = read_to_end(&topic, WAIT).await;
    let got = ids(&records);
    // The failed event is not in Kafka. The event after it may be: it was
    // already in flight in a later producer batch when the failure was
    // reported. It is not confirmed either, so it is replayed below.
    assert!(
        got.contains(&event_id(1)) && !got.contains(&event_id(2)),
        "the first event must be in Kafka and the rejected one not:\n{}",
        common::describe(&records)
    );
    ob.wait_inactive().await;

    let fix =
        AlterConfig::new(ResourceSpecifier::Topic(&topic)).set("max.message.bytes", "1048576");
    let results = admin()
        .alter_configs(&[fix], &admin_options())
        .await
        .expect("alter topic config");
    for r in results {
        r.unwrap_or_else(|(spec, code)| panic!("alter {spec:?}: {code}"));
    }
    let mut relay = Relay::start(&ob.config(&kafka_bootstrap()));
    let want: HashSet<String> = (1..=3).map(event_id).collect();
    let records = read_until_ids(&topic, &want, &mut relay).await;
    let big_record = records
        .iter()
        .find(|r| r.header("id") == Some(event_id(2).as_bytes()))
        .expect("the big event");
    assert!(big_record.value.as_ref().is_some_and(|v| v.len() > 20_000));
    ob.wait_confirmed(ends[2], &relay).await;
    ob.drop_probe(&probe).await;
    ob.finish(relay).await;
}

/// A topic's `max.message.bytes` lowered while walrelay runs (after it
/// sized its batches for the old limit): the broker refuses whole batches
/// of small events that each fit. That is not the events' fault, so even
/// with a dead-letter topic nothing is dead-lettered: walrelay stops
/// without confirming the transaction, and the next start sizes its batches
/// for the new limit and delivers every event in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lowered_topic_limit_stops_then_fits_on_restart() {
    let ob = Outbox::new("lowered_limit").await;
    let topic = ob.topic("");
    let dlq = format!("{}_dlq", ob.name);
    common::create_topic(&topic, 1).await;
    common::create_topic(&dlq, 1).await;
    let config = ob.config_with(
        &kafka_bootstrap(),
        &format!(
            "[metrics]\nlisten = \"127.0.0.1:0\"\n\n\
             [errors]\ntolerance = \"all\"\ndead_letter_topic = \"{dlq}\"\n"
        ),
    );
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    let probe = ob.create_probe().await;
    ob.insert(1, "", "k", r#"{"n": 1}"#).await;
    assert_eq!(consume(&topic, 1, WAIT).await.len(), 1, "{}", relay.log());

    let lower =
        AlterConfig::new(ResourceSpecifier::Topic(&topic)).set("max.message.bytes", "20000");
    for r in admin()
        .alter_configs(&[lower], &admin_options())
        .await
        .expect("alter topic config")
    {
        r.unwrap_or_else(|(spec, code)| panic!("alter {spec:?}: {code}"));
    }
    ob.insert_series(2, 5001).await;
    let ends = commit_ends(&ob.client, &probe, &ob.name).await;
    assert_eq!(ends.len(), 2, "probe saw {ends:?}");

    let code = exit_code(&mut relay);
    let log = relay.log();
    assert_eq!(code, 1, "{log}");
    let confirmed = ob.slot_confirmed().await.expect("slot exists");
    assert!(
        confirmed >= ends[0] && confirmed < ends[1],
        "confirmed {confirmed}, commits {ends:?}:\n{log}"
    );
    let dead = read_to_end(&dlq, Duration::from_secs(3)).await;
    assert!(
        dead.is_empty(),
        "records that fit the topic were dead-lettered:\n{}",
        common::describe(&dead)
    );
    ob.wait_inactive().await;

    let mut relay = Relay::start(&config);
    let want: HashSet<String> = (1..=5001).map(event_id).collect();
    read_until_ids(&topic, &want, &mut relay).await;
    // Confirmed: every record of the replay is in Kafka.
    ob.wait_confirmed(ends[1], &relay).await;
    let records = read_to_end(&topic, WAIT).await;
    // Batches of the refused transaction that were small enough (its tail)
    // may have landed before walrelay stopped; the replay then sends the
    // whole transaction again, in order, after them.
    let ids_read: Vec<Vec<u8>> = records
        .iter()
        .map(|r| r.header("id").expect("id header").to_vec())
        .collect();
    let replay = ids_read
        .iter()
        .rposition(|id| *id == event_id(2).into_bytes())
        .expect("event 2");
    let expected: Vec<Vec<u8>> = (2..=5001).map(|n| event_id(n).into_bytes()).collect();
    assert!(
        ids_read[replay..] == expected[..],
        "the replayed transaction is not whole and in order"
    );
    assert!(read_to_end(&dlq, Duration::from_secs(3)).await.is_empty());
    ob.drop_probe(&probe).await;
    ob.finish(relay).await;
}

/// The configured outbox table does not exist: code 1, the log names the
/// table and the database, no slot is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_outbox_table_is_fatal() {
    let ob = Outbox::new("no_table").await;
    let missing = format!("{}_missing", ob.name);
    let config = ob.config(&kafka_bootstrap()).replace(
        &format!("table = \"public.{}\"", ob.name),
        &format!("table = \"public.{missing}\""),
    );
    assert!(config.contains(&missing));
    let mut relay = Relay::start(&config);
    let code = exit_code(&mut relay);
    let log = relay.log();
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains(&format!(
            "outbox table public.{missing} does not exist in database postgres"
        )),
        "{log}"
    );
    assert!(!ob.slot_exists().await, "{log}");
    ob.finish_exited(relay).await;
}
