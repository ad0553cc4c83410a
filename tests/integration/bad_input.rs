//! Bad input against the real PostgreSQL and Kafka of `scripts/test.sh`:
//! one test per kind of bad event (NULL route, key or id, a payload that is
//! not JSON with expansion on, one whose expansion fails after its schema
//! was inferred, a record larger than the topic allows, a
//! route value that is not a legal topic name, a column type walrelay
//! cannot map, a needed column dropped while streaming).
//!
//! Each test runs the walrelay binary twice on the same slot. First with
//! the default policy (`errors.tolerance = none`): walrelay exits with code
//! 1, its error names the event id, the LSN and (for routing errors) the
//! column, the events before the bad one are in Kafka, the bad one is not,
//! and the slot's `confirmed_flush_lsn` is below the bad transaction's
//! commit. Then with a dead-letter topic: the bad event is in that topic
//! with its original bytes and the context headers, the event after it is
//! delivered, and the slot moves past it.
//!
//! Every case writes: good event 1, good event 2 (both to topic `a`),
//! waits until the slot confirmed them, then the bad event 3 (its own
//! transaction), then good event 4 to topic `b` (another partition, so it
//! never shares a producer batch with event 3). Positions come from a probe
//! slot that peeks the same publication.

use crate::common;

use std::collections::HashSet;
use std::time::Duration;

use bytes::Bytes;
use common::relay::{event_id, ids, read_until_ids, Outbox, Relay, WAIT};
use common::{consume, create_topic, kafka_bootstrap, read_to_end, Record};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use walrelay::proto::pgoutput::{decode_message, LogicalMessage};
use walrelay::proto::Lsn;

/// Bound on walrelay stopping by itself after a bad event.
const EXIT_WAIT: Duration = Duration::from_secs(30);

/// One kind of bad input.
struct Case {
    /// Test name (table, slot and topic prefix).
    name: &'static str,
    /// SQL run on the fresh table (`{t}`) before walrelay starts.
    setup: &'static [&'static str],
    /// Extra TOML for both runs (e.g. a `[router]` table).
    extra: &'static str,
    /// SQL run after good event 1, before good event 2 (while streaming).
    before_2: &'static [&'static str],
    /// SQL run after events 1 and 2 are confirmed, before the bad event.
    before_bad: &'static [&'static str],
    /// The bad INSERT (`{t}`, `{id}`, `{agg}` placeholders).
    bad: &'static str,
    /// SQL run after the bad event, before good event 4.
    after_bad: &'static [&'static str],
    /// Create topic `a` with this `max.message.bytes`.
    topic_max_bytes: Option<&'static str>,
    /// Texts the stopping error must name besides the event id and LSN.
    names: &'static [&'static str],
    /// The bad event has a (non-null) id.
    has_id: bool,
    /// `walrelay.error.kind` of the dead-letter record.
    kind: &'static str,
    /// The dead-letter record's `__connect.errors.topic`: `Some("a")` for
    /// topic `a`, `Some("")` for "the illegal topic", `None` for none.
    intended: Option<&'static str>,
    /// The dead-letter record's key and value.
    key: Option<&'static str>,
    value: Option<String>,
}

const GOOD: &str = "INSERT INTO {t} (id, aggregatetype, aggregateid, type, payload) VALUES ('{id}', '{agg}', '{key}', 'E', '{payload}')";

fn sql(template: &str, ob: &Outbox, id: Option<u64>, suffix: &str) -> String {
    template
        .replace("{t}", &ob.name)
        .replace("{id}", &id.map(event_id).unwrap_or_default())
        .replace("{agg}", &ob.agg(suffix))
}

async fn exec(ob: &Outbox, statements: &[&str]) {
    for s in statements {
        let s = sql(s, ob, None, "a");
        ob.client
            .batch_execute(&s)
            .await
            .unwrap_or_else(|e| panic!("{s}: {e}"));
    }
}

async fn good(ob: &Outbox, n: u64, suffix: &str) {
    let s = sql(GOOD, ob, Some(n), suffix)
        .replace("{key}", &format!("k{n}"))
        .replace("{payload}", &format!(r#"{{"n": {n}}}"#));
    ob.client
        .batch_execute(&s)
        .await
        .unwrap_or_else(|e| panic!("{s}: {e}"));
}

/// (INSERT lsn, commit end lsn, commit record lsn) of every outbox insert
/// the probe slot decodes, in order.
async fn positions(ob: &Outbox, probe: &str) -> Vec<(Lsn, Lsn, Lsn)> {
    let rows = ob
        .client
        .query(
            "SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2)",
            &[&probe, &ob.name],
        )
        .await
        .expect("peek probe slot");
    let mut out = Vec::new();
    let mut open = Vec::new();
    for r in &rows {
        let lsn: Lsn = r.get::<_, String>(0).parse().expect("lsn");
        match decode_message(Bytes::from(r.get::<_, Vec<u8>>(1)), 1, false) {
            Ok(LogicalMessage::Insert(_)) => open.push(lsn),
            Ok(LogicalMessage::Commit(c)) => {
                out.extend(open.drain(..).map(|i| (i, c.end_lsn, c.commit_lsn)));
            }
            _ => {}
        }
    }
    out
}

fn header<'a>(r: &'a Record, name: &str) -> Option<&'a str> {
    r.header(name)
        .map(|v| std::str::from_utf8(v).expect("utf-8 header"))
}

fn exit_code(relay: &mut Relay) -> i32 {
    let status = tokio::task::block_in_place(|| relay.wait_exit(EXIT_WAIT))
        .unwrap_or_else(|| panic!("walrelay still runs after {EXIT_WAIT:?}:\n{}", relay.log()));
    status
        .code()
        .unwrap_or_else(|| panic!("walrelay ended by {status}:\n{}", relay.log()))
}

async fn run_case(c: Case) {
    let ob = Outbox::new(c.name).await;
    exec(&ob, c.setup).await;
    let topic_a = ob.topic("a");
    let topic_b = ob.topic("b");
    if let Some(max) = c.topic_max_bytes {
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", kafka_bootstrap())
            .create()
            .expect("admin client");
        let results = admin
            .create_topics(
                &[NewTopic::new(&topic_a, 1, TopicReplication::Fixed(1))
                    .set("max.message.bytes", max)],
                &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
            )
            .await
            .expect("create topic");
        for r in results {
            r.unwrap_or_else(|(name, code)| panic!("create topic {name}: {code}"));
        }
    }
    let dlq = format!("{}_dlq", ob.name);
    create_topic(&dlq, 1).await;
    let base = format!("[metrics]\nlisten = \"127.0.0.1:0\"\n\n{}\n", c.extra);
    let strict = ob.config_with(&kafka_bootstrap(), &base);

    // --- errors.tolerance = none ---
    let mut relay = Relay::start(&strict);
    ob.wait_active(&mut relay).await;
    let probe = ob.create_probe().await;
    good(&ob, 1, "a").await;
    exec(&ob, c.before_2).await;
    good(&ob, 2, "a").await;
    let before = positions(&ob, &probe).await;
    assert_eq!(before.len(), 2, "probe saw {before:?}");
    ob.wait_confirmed(before[1].1, &relay).await;
    exec(&ob, c.before_bad).await;
    let bad = sql(c.bad, &ob, Some(3), "a");
    ob.client
        .batch_execute(&bad)
        .await
        .unwrap_or_else(|e| panic!("{bad}: {e}"));
    exec(&ob, c.after_bad).await;
    good(&ob, 4, "b").await;
    let all = positions(&ob, &probe).await;
    assert_eq!(all.len(), 4, "probe saw {all:?}");
    let (bad_lsn, bad_commit, bad_commit_record) = all[2];

    let code = exit_code(&mut relay);
    let log = relay.log();
    assert_eq!(code, 1, "{log}");
    let mut names: Vec<String> = c.names.iter().map(|n| (*n).to_owned()).collect();
    names.push(bad_lsn.to_string());
    if c.has_id {
        names.push(event_id(3));
    }
    for n in &names {
        assert!(log.contains(n.as_str()), "the error must name {n}:\n{log}");
    }
    let confirmed = ob.slot_confirmed().await.expect("slot exists");
    assert!(
        confirmed < bad_commit && confirmed >= before[1].1,
        "confirmed {confirmed} must stay in [{}, {bad_commit}):\n{log}",
        before[1].1
    );
    let got = ids(&read_to_end(&topic_a, WAIT).await);
    assert!(
        got.contains(&event_id(1)) && got.contains(&event_id(2)) && !got.contains(&event_id(3)),
        "events 1 and 2 must be in {topic_a}, event 3 not: {got:?}"
    );
    ob.wait_inactive().await;

    // --- errors.tolerance = all, dead-letter topic ---
    let tolerant = ob.config_with(
        &kafka_bootstrap(),
        &format!("{base}\n[errors]\ntolerance = \"all\"\ndead_letter_topic = \"{dlq}\"\n"),
    );
    let mut relay = Relay::start(&tolerant);
    let want: HashSet<String> = [event_id(4)].into_iter().collect();
    read_until_ids(&topic_b, &want, &mut relay).await;
    let letters = consume(&dlq, 1, WAIT).await;
    let letter = letters
        .iter()
        .find(|r| header(r, "walrelay.source.lsn") == Some(bad_lsn.to_string().as_str()))
        .unwrap_or_else(|| panic!("no dead-letter record for lsn {bad_lsn}:\n{}", relay.log()));
    let show = common::describe(&letters);
    assert_eq!(
        header(letter, "walrelay.error.kind"),
        Some(c.kind),
        "{show}"
    );
    assert_eq!(
        header(letter, "walrelay.commit.lsn"),
        Some(bad_commit_record.to_string().as_str()),
        "{show}"
    );
    assert!(header(letter, "walrelay.xid").is_some(), "{show}");
    assert_eq!(
        header(letter, "walrelay.source.table"),
        Some(format!("public.{}", ob.name).as_str()),
        "{show}"
    );
    let expected_id = c.has_id.then(|| event_id(3));
    assert_eq!(
        header(letter, "walrelay.event.id"),
        expected_id.as_deref(),
        "{show}"
    );
    let message = header(letter, "__connect.errors.exception.message").expect("message");
    for n in c.names {
        assert!(message.contains(n), "{message} must name {n}");
    }
    assert!(message.contains(&bad_lsn.to_string()) || c.kind == "message_too_large");
    assert!(header(letter, "__connect.errors.exception.class.name").is_some());
    match c.intended {
        None => assert_eq!(header(letter, "__connect.errors.topic"), None, "{show}"),
        Some("a") => assert_eq!(
            header(letter, "__connect.errors.topic"),
            Some(topic_a.as_str()),
            "{show}"
        ),
        Some(_) => assert!(
            header(letter, "__connect.errors.topic").is_some_and(|t| t.contains(' ')),
            "{show}"
        ),
    }
    assert_eq!(
        letter.key.as_deref(),
        c.key.map(str::as_bytes),
        "original key: {show}"
    );
    // Compared without printing a 20 kB value on failure.
    assert!(
        letter.value.as_deref() == c.value.as_deref().map(str::as_bytes),
        "original value: {show}"
    );
    assert_eq!(header(letter, "walrelay.original.dropped"), None, "{show}");
    // The bad event is settled by its dead-letter record: the slot moves
    // past the last transaction.
    ob.wait_confirmed(all[3].1, &relay).await;
    relay.assert_running();
    let got = ids(&read_to_end(&topic_a, WAIT).await);
    assert!(!got.contains(&event_id(3)), "event 3 reached {topic_a}");
    ob.drop_probe(&probe).await;
    ob.finish(relay).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn null_route_value() {
    run_case(Case {
        name: "bad_null_route",
        setup: &["ALTER TABLE {t} ALTER aggregatetype DROP NOT NULL"],
        extra: "",
        before_2: &[],
        before_bad: &[],
        bad: "INSERT INTO {t} (id, aggregatetype, aggregateid, type, payload) VALUES ('{id}', NULL, 'k3', 'E', '{\"n\": 3}')",
        after_bad: &[],
        topic_max_bytes: None,
        names: &["\"aggregatetype\""],
        has_id: true,
        kind: "null_route",
        intended: None,
        key: Some("k3"),
        value: Some(r#"{"n": 3}"#.into()),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn null_key() {
    run_case(Case {
        name: "bad_null_key",
        setup: &[],
        extra: "",
        before_2: &[],
        before_bad: &[],
        bad: "INSERT INTO {t} (id, aggregatetype, aggregateid, type, payload) VALUES ('{id}', '{agg}', NULL, 'E', '{\"n\": 3}')",
        after_bad: &[],
        topic_max_bytes: None,
        names: &["\"aggregateid\""],
        has_id: true,
        kind: "null_key",
        intended: Some("a"),
        key: None,
        value: Some(r#"{"n": 3}"#.into()),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn null_id() {
    run_case(Case {
        name: "bad_null_id",
        setup: &[
            "ALTER TABLE {t} DROP CONSTRAINT {t}_pkey",
            "ALTER TABLE {t} ALTER id DROP NOT NULL",
        ],
        extra: "",
        before_2: &[],
        before_bad: &[],
        bad: "INSERT INTO {t} (id, aggregatetype, aggregateid, type, payload) VALUES (NULL, '{agg}', 'k3', 'E', '{\"n\": 3}')",
        after_bad: &[],
        topic_max_bytes: None,
        names: &["\"id\""],
        has_id: false,
        kind: "null_id",
        intended: Some("a"),
        key: Some("k3"),
        value: Some(r#"{"n": 3}"#.into()),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payload_not_json_with_expansion() {
    run_case(Case {
        name: "bad_not_json",
        setup: &["ALTER TABLE {t} ALTER payload TYPE text"],
        extra: "[router]\nexpand_json_payload = true\n",
        before_2: &[],
        before_bad: &[],
        bad: "INSERT INTO {t} (id, aggregatetype, aggregateid, type, payload) VALUES ('{id}', '{agg}', 'k3', 'E', '{not json')",
        after_bad: &[],
        topic_max_bytes: None,
        names: &["\"payload\""],
        has_id: true,
        kind: "invalid_json",
        intended: Some("a"),
        key: Some("k3"),
        value: Some("{not json".into()),
    })
    .await;
}

/// A top-level JSON array: its schema is inferred, its value cannot become
/// a struct, and Debezium's JsonConverter fails the task on the text under
/// the ARRAY schema (`expand-fail-*` compat cases). With
/// `errors.tolerance=all` Kafka Connect would skip it; walrelay
/// dead-letters it and moves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payload_expansion_fails_after_the_schema() {
    run_case(Case {
        name: "bad_expansion",
        setup: &["ALTER TABLE {t} ALTER payload TYPE text"],
        extra: "[router]\nexpand_json_payload = true\n\n[converters]\nvalue = \"json\"\nvalue_schemas_enable = false\n",
        before_2: &[],
        before_bad: &[],
        bad: "INSERT INTO {t} (id, aggregatetype, aggregateid, type, payload) VALUES ('{id}', '{agg}', 'k3', 'E', '[1, 2, 3]')",
        after_bad: &[],
        topic_max_bytes: None,
        names: &["\"payload\"", "cannot be expanded", "ARRAY"],
        has_id: true,
        kind: "json_expansion",
        intended: Some("a"),
        key: Some("k3"),
        value: Some("[1, 2, 3]".into()),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_larger_than_the_topic_allows() {
    run_case(Case {
        name: "bad_too_large",
        setup: &[],
        extra: "",
        before_2: &[],
        before_bad: &[],
        bad: "INSERT INTO {t} (id, aggregatetype, aggregateid, type, payload) VALUES ('{id}', '{agg}', 'k3', 'E', jsonb_build_object('n', 3, 'pad', repeat('x', 20000)))",
        after_bad: &[],
        topic_max_bytes: Some("1024"),
        names: &[],
        has_id: true,
        kind: "message_too_large",
        intended: Some("a"),
        key: Some("k3"),
        // The broker's limit is below the producer's: the original bytes
        // fit the dead-letter topic.
        value: Some(format!(r#"{{"n": 3, "pad": "{}"}}"#, "x".repeat(20_000))),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_value_is_not_a_legal_topic() {
    run_case(Case {
        name: "bad_topic",
        setup: &[],
        extra: "",
        before_2: &[],
        before_bad: &[],
        bad: "INSERT INTO {t} (id, aggregatetype, aggregateid, type, payload) VALUES ('{id}', '{agg} no/good', 'k3', 'E', '{\"n\": 3}')",
        after_bad: &[],
        topic_max_bytes: None,
        names: &["\"aggregatetype\"", "no/good"],
        has_id: true,
        kind: "invalid_topic",
        intended: Some(""),
        key: Some("k3"),
        value: Some(r#"{"n": 3}"#.into()),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn column_type_walrelay_cannot_map() {
    run_case(Case {
        name: "bad_unmappable",
        setup: &["ALTER TABLE {t} ALTER payload TYPE text"],
        extra: "",
        before_2: &[],
        before_bad: &["ALTER TABLE {t} ALTER payload TYPE point USING NULL"],
        bad: "INSERT INTO {t} (id, aggregatetype, aggregateid, type, payload) VALUES ('{id}', '{agg}', 'k3', 'E', '(1,2)')",
        after_bad: &["ALTER TABLE {t} ALTER payload TYPE text USING payload::text"],
        topic_max_bytes: None,
        names: &["\"payload\"", "oid 600"],
        has_id: true,
        kind: "unmappable_type",
        intended: Some("a"),
        key: Some("k3"),
        value: Some("(1,2)".into()),
    })
    .await;
}

/// Columns added while streaming are fine (event 2); the key column dropped
/// makes the next event a bad one naming it; added back, events flow again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_altered_while_streaming() {
    run_case(Case {
        name: "bad_altered",
        setup: &[],
        extra: "",
        before_2: &["ALTER TABLE {t} ADD COLUMN extra int DEFAULT 7"],
        before_bad: &["ALTER TABLE {t} DROP COLUMN aggregateid"],
        bad: "INSERT INTO {t} (id, aggregatetype, type, payload) VALUES ('{id}', '{agg}', 'E', '{\"n\": 3}')",
        after_bad: &["ALTER TABLE {t} ADD COLUMN aggregateid varchar(255)"],
        topic_max_bytes: None,
        names: &["\"aggregateid\""],
        has_id: true,
        kind: "missing_column",
        intended: Some("a"),
        key: None,
        value: Some(r#"{"n": 3}"#.into()),
    })
    .await;
}
