//! The logical-message outbox (`pg_logical_emit_message(true, prefix,
//! '<json>')`) against the real PostgreSQL and Kafka of `scripts/test.sh`:
//! one record per committed message and none for rolled-back ones
//! (transactions and savepoints), exact prefixes, the records' bytes under
//! the native defaults, rows and messages of one transaction in write order
//! (`source = "both"`), walrelay's own heartbeat messages never taken for
//! events (native form, and the Debezium form with no prefix filter),
//! SIGKILLs under a message load, a million-message transaction under the
//! memory bound, bad content and non-transactional messages under both
//! error policies, and a large transaction whose rolled-back
//! subtransactions held messages.
//!
//! Every test selects its own prefix (`p_<outbox name>`): other tests emit
//! messages into the same database at the same time. Tests that need a
//! setting of their own (`logical_decoding_work_mem`) or a stream with no
//! other prefix in it use a database of their own. Positions come from a
//! probe slot that decodes the messages (pgoutput with `messages`).

use crate::common;

use std::collections::HashSet;
use std::ffi::OsStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::database::{slot_stat, wait_slot_stat, TestDb};
use common::relay::{
    connect_files, count_events, event_id, event_number, ids, read_until_ids, tail, Outbox, Relay,
    WAIT,
};
use common::{connect, create_topic, env, kafka_bootstrap, read_to_end, unique_name, Record};
use walrelay::proto::pgoutput::{decode_message, LogicalMessage};
use walrelay::proto::Lsn;

/// Each relay on its own ephemeral metrics port.
const METRICS: &str = "[metrics]\nlisten = \"127.0.0.1:0\"\n";
/// Bound on walrelay stopping by itself after bad input.
const EXIT_WAIT: Duration = Duration::from_secs(30);
/// What walrelay's default heartbeat emits (`walrelay_heartbeat`, empty
/// content: not JSON, so never a valid event either).
const HEARTBEAT_PREFIX: &str = "walrelay_heartbeat";
/// Transactions the walsender handled as large: streamed to walrelay or
/// spilled to the server's disk (walrelay asks for no streaming while
/// messages are events: a streamed message carries its top-level
/// transaction's xid, so a rolled-back savepoint's messages could not be
/// told apart). Subtransactions count in `spill_txns` too.
const LARGE_TXNS: &str = "stream_txns + spill_txns";
/// Debezium's content decoder, the first transform of the message outbox.
const DECODE_TRANSFORM: &str =
    "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent";

/// The test's message prefix.
pub(crate) fn prefix(ob: &Outbox) -> String {
    format!("p_{}", ob.name)
}

/// Names (slot, publication, topics) for a message outbox: no table.
pub(crate) fn message_outbox(test: &str, client: tokio_postgres::Client) -> Outbox {
    Outbox {
        client,
        name: unique_name(test),
    }
}

/// `config` (an [`Outbox`] test configuration) with its `[outbox]` table
/// replaced by `lines`.
fn with_outbox(config: String, ob: &Outbox, lines: &str) -> String {
    let table = format!("[outbox]\ntable = \"public.{}\"\n", ob.name);
    assert!(
        config.contains(&table),
        "the test configuration has no [outbox] table line"
    );
    config.replace(&table, &format!("[outbox]\n{lines}\n"))
}

/// `[outbox]` lines: `source`, the test's prefix, then `more`.
fn outbox_lines(ob: &Outbox, source: &str, more: &str) -> String {
    format!(
        "source = \"{source}\"\nmessage_prefixes = [\"{}\"]\n{more}",
        prefix(ob)
    )
}

/// The native configuration with `source = "messages"` on the shared
/// cluster, `more` `[outbox]` lines, and `extra` TOML after `[metrics]`.
pub(crate) fn messages_config(ob: &Outbox, more: &str, extra: &str) -> String {
    with_outbox(
        ob.config_with(&kafka_bootstrap(), &format!("{METRICS}\n{extra}")),
        ob,
        &outbox_lines(ob, "messages", more),
    )
}

/// Content of test event `n` with the outbox table's column names as
/// members; `payload` is JSON text.
pub(crate) fn content(n: u64, agg: &str, key: &str, payload: &str) -> String {
    format!(
        r#"{{"id":"{}","aggregatetype":"{agg}","aggregateid":"{key}","type":"E","payload":{payload}}}"#,
        event_id(n)
    )
}

/// `pg_logical_emit_message`; returns the message's LSN (also the LSN
/// pgoutput gives it).
pub(crate) async fn emit(
    client: &tokio_postgres::Client,
    transactional: bool,
    prefix: &str,
    content: &str,
) -> Lsn {
    client
        .query_one(
            "SELECT pg_logical_emit_message($1::bool, $2::text, $3::text)::text",
            &[&transactional, &prefix, &content],
        )
        .await
        .unwrap_or_else(|e| panic!("emit a message with prefix {prefix}: {e}"))
        .get::<_, String>(0)
        .parse()
        .expect("lsn")
}

async fn exec(client: &tokio_postgres::Client, sql: &str) {
    client
        .batch_execute(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// SQL building test event `g`'s id (the text of [`event_id`]).
const ID_SQL: &str = "'00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0')";

/// A DO block writing events `first..=last` in order with key `key`: rows
/// of `table` for numbers of parity `row_parity`, messages with `prefix`
/// for the others, both with the same jsonb payload (see
/// [`interleaved_payload`]).
fn interleaved(
    table: &str,
    agg: &str,
    prefix: &str,
    key: &str,
    (first, last): (u64, u64),
    row_parity: u64,
) -> String {
    let payload = "jsonb_build_object('n', g, 'tags', jsonb_build_array('t', g), \
                   'nested', jsonb_build_object('z', g, 'a', NULL))";
    format!(
        "DO $$ BEGIN FOR g IN {first}..{last} LOOP
           IF g % 2 = {row_parity} THEN
             INSERT INTO {table} VALUES (({ID_SQL})::uuid, '{agg}', '{key}', 'E', {payload});
           ELSE
             PERFORM pg_logical_emit_message(true, '{prefix}', jsonb_build_object(
               'id', {ID_SQL}, 'aggregatetype', '{agg}', 'aggregateid', '{key}',
               'type', 'E', 'payload', {payload})::text);
           END IF;
         END LOOP; END $$;"
    )
}

/// The value of event `n` of [`interleaved`]: PostgreSQL's jsonb text.
fn interleaved_payload(n: u64) -> String {
    format!(r#"{{"n": {n}, "tags": ["t", {n}], "nested": {{"a": null, "z": {n}}}}}"#)
}

/// One logical decoding message a probe slot decoded.
#[derive(Debug, Clone)]
struct Decoded {
    lsn: Lsn,
    prefix: String,
    content: Vec<u8>,
    /// End of its transaction's commit; `None` for a non-transactional one.
    commit_end: Option<Lsn>,
}

/// The messages with a prefix in `prefixes` that `probe` (pgoutput,
/// created after `publication`) decodes, in decode order: a
/// non-transactional one where it is decoded, transactional ones at their
/// commit. Peeks, so the probe does not move.
async fn decoded(ob: &Outbox, probe: &str, prefixes: &[&str]) -> Vec<Decoded> {
    let rows = ob
        .client
        .query(
            "SELECT data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, \
             'proto_version', '1', 'publication_names', $2, 'messages', 'true')",
            &[&probe, &ob.name],
        )
        .await
        .expect("peek the probe slot");
    let mut out = Vec::new();
    let mut open = Vec::new();
    for r in &rows {
        match decode_message(Bytes::from(r.get::<_, Vec<u8>>(0)), 1, false) {
            Ok(LogicalMessage::Message(m)) => {
                let prefix = String::from_utf8_lossy(&m.prefix).into_owned();
                if !prefixes.contains(&prefix.as_str()) {
                    continue;
                }
                let d = Decoded {
                    lsn: m.lsn,
                    prefix,
                    content: m.content.to_vec(),
                    commit_end: None,
                };
                if m.transactional {
                    open.push(d);
                } else {
                    out.push(d);
                }
            }
            Ok(LogicalMessage::Commit(c)) => out.extend(open.drain(..).map(|d| Decoded {
                commit_end: Some(c.end_lsn),
                ..d
            })),
            _ => {}
        }
    }
    out
}

fn header<'a>(r: &'a Record, name: &str) -> Option<&'a str> {
    r.header(name)
        .map(|v| std::str::from_utf8(v).expect("utf-8 header"))
}

/// Event numbers (the `id` header) of `records`, in read order.
fn numbers(records: &[Record]) -> Vec<u64> {
    records
        .iter()
        .map(|r| event_number(r.header("id").expect("id header")).expect("a test event id"))
        .collect()
}

/// (1) One record per committed message, none for a rolled-back
/// transaction or savepoint (a message after `ROLLBACK TO SAVEPOINT` in
/// the same transaction is delivered), none for prefixes not selected
/// (exact match: a longer prefix starting with the selected one is another
/// prefix). Native defaults: topic from `aggregatetype`, key
/// `aggregateid`, the `id` header only, and the payload member as a jsonb
/// column would give it: an object or array as its text exactly as written
/// in the content (what `outbox_emit`'s `jsonb::text` writes is jsonb's
/// own style), a string as its text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_record_per_committed_message() {
    let ob = message_outbox("msg_one", connect().await);
    let topic = ob.topic("");
    create_topic(&topic, 1).await;
    let mut relay = Relay::start(&messages_config(&ob, "", ""));
    ob.wait_active(&mut relay).await;
    let (p, agg, c) = (prefix(&ob), ob.agg(""), &ob.client);

    // Spacing and member order as a person writes them.
    let first = format!(
        r#"{{ "id" : "{}", "aggregatetype" : "{agg}", "aggregateid" : "k-1", "type" : "Created",
             "payload" : {{"zz":1, "a" :[1,2,{{"c":null}}],"s":"x y"}} }}"#,
        event_id(1)
    );
    emit(c, true, &p, &first).await;
    exec(c, "BEGIN").await;
    emit(c, true, &p, &content(2, &agg, "k-2", "{}")).await;
    exec(c, "ROLLBACK").await;
    exec(c, "BEGIN").await;
    emit(c, true, &p, &content(3, &agg, "k-3", r#"{"n":3}"#)).await;
    exec(c, "SAVEPOINT s").await;
    emit(c, true, &p, &content(4, &agg, "k-4", "{}")).await;
    exec(c, "ROLLBACK TO SAVEPOINT s").await;
    emit(
        c,
        true,
        &p,
        &content(5, &agg, "k-5", r#"[1,"two",{"b":2,"a":1}]"#),
    )
    .await;
    exec(c, "COMMIT").await;
    for other in [format!("{p}_other"), format!("q_{}", ob.name)] {
        emit(c, true, &other, &content(6, &agg, "k-6", "{}")).await;
    }
    emit(c, true, &p, &content(7, &agg, "k-7", r#""plain \"text\"""#)).await;
    let after = ob.current_lsn().await;

    let want: HashSet<String> = [1, 3, 5, 7].into_iter().map(event_id).collect();
    read_until_ids(&topic, &want, &mut relay).await;
    let records = read_to_end(&topic, WAIT).await;
    let show = common::describe(&records);
    assert_eq!(numbers(&records), vec![1, 3, 5, 7], "{show}");
    let expected: [(&str, &[u8]); 4] = [
        ("k-1", br#"{"zz":1, "a" :[1,2,{"c":null}],"s":"x y"}"#),
        ("k-3", br#"{"n":3}"#),
        ("k-5", br#"[1,"two",{"b":2,"a":1}]"#),
        ("k-7", br#"plain "text""#),
    ];
    for (r, (n, (key, value))) in records.iter().zip([1, 3, 5, 7].into_iter().zip(expected)) {
        assert_eq!(r.key.as_deref(), Some(key.as_bytes()), "{show}");
        assert_eq!(r.value.as_deref(), Some(value), "event {n}: {show}");
        assert_eq!(
            r.headers,
            vec![("id".to_string(), Some(event_id(n).into_bytes()))],
            "{show}"
        );
    }
    ob.wait_confirmed(after, &relay).await;
    relay.assert_running();
    ob.finish(relay).await;
}

/// (2) `source = "both"`: rows and messages written interleaved (row,
/// message, row, ...; message first in every other transaction) in five
/// transactions, one key, so one partition: the offsets follow the write
/// order, each event once, and a message's payload has the same bytes as
/// a row's jsonb payload built the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_and_messages_keep_their_order() {
    const PER_TXN: u64 = 40;
    const TXNS: u64 = 5;
    let ob = Outbox::new("msg_both").await;
    let topic = ob.topic("");
    create_topic(&topic, 3).await;
    let lines = format!(
        "table = \"public.{}\"\n{}",
        ob.name,
        outbox_lines(&ob, "both", "")
    );
    let config = with_outbox(ob.config_with(&kafka_bootstrap(), METRICS), &ob, &lines);
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    let (p, agg) = (prefix(&ob), ob.agg(""));
    for txn in 0..TXNS {
        let range = (txn * PER_TXN + 1, (txn + 1) * PER_TXN);
        // The outbox pattern: the rows leave the table in the same transaction.
        exec(
            &ob.client,
            &format!(
                "BEGIN; {} DELETE FROM {t}; COMMIT;",
                interleaved(&ob.name, &agg, &p, "order-1", range, txn % 2),
                t = ob.name
            ),
        )
        .await;
    }
    let after = ob.current_lsn().await;
    let n = PER_TXN * TXNS;
    let want: HashSet<String> = (1..=n).map(event_id).collect();
    read_until_ids(&topic, &want, &mut relay).await;
    let mut records = read_to_end(&topic, WAIT).await;
    records.sort_by_key(|r| (r.partition, r.offset));
    let partitions: HashSet<i32> = records.iter().map(|r| r.partition).collect();
    assert_eq!(partitions.len(), 1, "one key, one partition");
    let got = numbers(&records);
    assert!(
        got == (1..=n).collect::<Vec<_>>(),
        "offsets out of write order or events repeated: {got:?}"
    );
    for (r, n) in records.iter().zip(1..) {
        assert_eq!(
            r.value.as_deref(),
            Some(interleaved_payload(n).as_bytes()),
            "event {n} ({}): {}",
            if n % 2 == 1 { "odd" } else { "even" },
            common::describe(std::slice::from_ref(r))
        );
        assert_eq!(r.key.as_deref(), Some(&b"order-1"[..]));
    }
    ob.wait_confirmed(after, &relay).await;
    relay.assert_running();
    ob.finish(relay).await;
}

/// How a heartbeat test runs walrelay.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// `walrelay run`, `source = "messages"`, the test's prefix selected.
    Native,
    /// `walrelay connect-standalone`, the decode transform and the
    /// EventRouter, no `message.prefix.*.list`: every prefix is an event
    /// source, as in Debezium.
    Debezium,
}

/// walrelay on `db` in `form`, heartbeats every 200 ms; `scratch` holds
/// the Debezium files.
fn start_with_heartbeats(ob: &Outbox, db: &TestDb, form: Form, scratch: &std::path::Path) -> Relay {
    if form == Form::Native {
        let config = with_outbox(
            ob.config_for(
                &kafka_bootstrap(),
                env().pg_port,
                &db.name,
                &format!("{METRICS}\n[heartbeat]\ninterval_ms = 200\n"),
            ),
            ob,
            &outbox_lines(ob, "messages", ""),
        );
        return Relay::start(&config);
    }
    let (worker, connector) = connect_files(
        scratch,
        ob,
        env().pg_port,
        &kafka_bootstrap(),
        "",
        &format!(
            "database.dbname={}\n\
             publication.autocreate.mode=no_tables\n\
             transforms=decode,outbox\n\
             transforms.decode.type={DECODE_TRANSFORM}\n\
             heartbeat.interval.ms=200\n",
            db.name
        ),
    );
    // The message outbox alone: no table to include.
    let text = std::fs::read_to_string(&connector).expect("read the connector file");
    let text: String = text
        .lines()
        .filter(|l| !l.starts_with("table.include.list="))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&connector, text).expect("write the connector file");
    Relay::start_args(
        &[
            OsStr::new("--metrics-addr"),
            OsStr::new("127.0.0.1:0"),
            OsStr::new("connect-standalone"),
            worker.as_os_str(),
            connector.as_os_str(),
        ],
        scratch.join("walrelay.log"),
    )
}

/// walrelay's own `walrelay_heartbeat` messages (empty content, so not
/// even valid events) are never taken for events while events flow: only
/// the two events arrive, walrelay keeps running, and the slot is
/// confirmed past a heartbeat written after the last event. A database of
/// its own, so the heartbeats are this walrelay's and no other test's
/// prefix is in the stream.
async fn heartbeat_case(test: &str, form: Form) {
    let (db, client) = TestDb::new(test, &[]).await;
    let ob = message_outbox(test, client);
    let topic = ob.topic("");
    create_topic(&topic, 1).await;
    let scratch = tempfile::tempdir().expect("scratch directory");
    let mut relay = start_with_heartbeats(&ob, &db, form, scratch.path());
    ob.wait_active(&mut relay).await;
    let probe = ob.create_probe().await;
    let (agg, c) = (ob.agg(""), &ob.client);
    let p = match form {
        Form::Native => prefix(&ob),
        Form::Debezium => "outbox".to_owned(),
    };
    emit(c, true, &p, &content(1, &agg, "k1", r#"{"n": 1}"#)).await;
    // Heartbeats after the first event, then the second.
    let heartbeats = wait_heartbeats(&ob, &probe, Lsn::ZERO, 3, &mut relay).await;
    let second = emit(c, true, &p, &content(2, &agg, "k2", r#"{"n": 2}"#)).await;
    let want: HashSet<String> = [1, 2].into_iter().map(event_id).collect();
    read_until_ids(&topic, &want, &mut relay).await;
    // A heartbeat after the last event: confirmed past it, walrelay took
    // it whole and found no event in it.
    let later = wait_heartbeats(&ob, &probe, second, 1, &mut relay).await;
    let last = later[0].commit_end.expect("a transactional heartbeat");
    ob.wait_confirmed(last, &relay).await;
    let records = read_to_end(&topic, WAIT).await;
    assert_eq!(
        numbers(&records),
        vec![1, 2],
        "{} heartbeats before event 2 and {} after: {}",
        heartbeats.len(),
        later.len(),
        common::describe(&records)
    );
    relay.assert_running();
    ob.drop_probe(&probe).await;
    ob.finish(relay).await;
    db.drop().await;
}

/// (3a) Heartbeats in the native form; and `walrelay_heartbeat` named in
/// `message_prefixes` is refused at start, before any slot exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_messages_are_never_events() {
    heartbeat_case("msg_heartbeat", Form::Native).await;
    let ob = message_outbox("msg_heartbeat_prefix", connect().await);
    let config = with_outbox(
        ob.config_with(&kafka_bootstrap(), METRICS),
        &ob,
        &format!(
            "source = \"messages\"\nmessage_prefixes = [\"{}\", \"{HEARTBEAT_PREFIX}\"]\n",
            prefix(&ob)
        ),
    );
    let mut relay = Relay::start(&config);
    let code = relay.exit_code(WAIT);
    assert_eq!(code, 2, "{}", relay.log());
    assert!(!ob.slot_exists().await, "a refused start created the slot");
    ob.finish_exited(relay).await;
}

/// (3b) Heartbeats in the Debezium form with no prefix filter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_messages_are_never_events_debezium_form() {
    heartbeat_case("msg_heartbeat_dbz", Form::Debezium).await;
}

/// Waits (bounded) until the probe decoded `count` heartbeat messages past
/// `after`; returns those.
async fn wait_heartbeats(
    ob: &Outbox,
    probe: &str,
    after: Lsn,
    count: usize,
    relay: &mut Relay,
) -> Vec<Decoded> {
    let deadline = Instant::now() + WAIT;
    loop {
        let beats: Vec<Decoded> = decoded(ob, probe, &[HEARTBEAT_PREFIX])
            .await
            .into_iter()
            .filter(|d| d.lsn > after)
            .collect();
        if beats.len() >= count {
            assert!(
                beats.iter().all(|d| d.content.is_empty()),
                "heartbeat contents: {beats:?}"
            );
            return beats;
        }
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "{} heartbeat messages past {after} (prefix {}), want {count}:\n{}",
            beats.len(),
            beats
                .first()
                .map_or(HEARTBEAT_PREFIX, |d| d.prefix.as_str()),
            tail(&relay.log(), 40)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Writes `txns` transactions of `per_txn` messages (event numbers 1..,
/// keys `a<n % 50>`, one statement each) from a task of its own, sleeping
/// `pause` after each; `committed` counts the committed transactions.
fn spawn_message_writer(
    prefix: String,
    agg: String,
    (txns, per_txn): (u64, u64),
    pause: Duration,
    committed: Arc<AtomicU64>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let client = connect().await;
        let sql = format!(
            "SELECT count(pg_logical_emit_message(true, $1::text, json_build_object(\
               'id', {ID_SQL}, 'aggregatetype', $2::text, 'aggregateid', 'a' || (g % 50), \
               'type', 'E', 'payload', json_build_object('n', g))::text)) \
             FROM generate_series($3::int8, $4::int8) g"
        );
        for txn in 0..txns {
            let first = (txn * per_txn + 1) as i64;
            let last = first + per_txn as i64 - 1;
            client
                .execute(&sql, &[&prefix, &agg, &first, &last])
                .await
                .expect("emit a transaction of messages");
            committed.store(txn + 1, Ordering::Relaxed);
            tokio::time::sleep(pause).await;
        }
    })
}

/// (4) SIGKILL three times while 1,000 transactions of 10 messages are
/// written (keys over 50 aggregates, 3 partitions): every event id arrives
/// at least once, per key in commit order, and the restarts resume from
/// the slot instead of starting over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_under_message_load_loses_nothing() {
    const TXNS: u64 = 1000;
    const PER_TXN: u64 = 10;
    const KILLS: u64 = 3;
    let events = TXNS * PER_TXN;
    let ob = message_outbox("msg_sigkill", connect().await);
    let topic = ob.topic("");
    create_topic(&topic, 3).await;
    let mut relay = Relay::start(&messages_config(&ob, "", ""));
    ob.wait_active(&mut relay).await;
    let committed = Arc::new(AtomicU64::new(0));
    let writer = spawn_message_writer(
        prefix(&ob),
        ob.agg(""),
        (TXNS, PER_TXN),
        Duration::from_millis(10),
        Arc::clone(&committed),
    );
    let mut confirmed_at_start = ob.slot_confirmed().await.expect("slot");
    for kill in 1..=KILLS {
        // Kill once the writer is a fifth further along and this walrelay
        // confirmed something of the load.
        let deadline = Instant::now() + WAIT;
        while committed.load(Ordering::Relaxed) < kill * TXNS / 5
            || ob.slot_confirmed().await.expect("slot") <= confirmed_at_start
        {
            relay.assert_running();
            assert!(
                Instant::now() < deadline,
                "no progress before kill {kill}:\n{}",
                tail(&relay.log(), 40)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            !writer.is_finished(),
            "the writer finished before kill {kill}: the kills must land mid-load"
        );
        relay = relay.kill_and_restart();
        ob.wait_active(&mut relay).await;
        confirmed_at_start = ob.slot_confirmed().await.expect("slot");
    }
    writer.await.expect("writer");
    let after = ob.current_lsn().await;
    let count = tokio::task::block_in_place(|| {
        count_events(
            &kafka_bootstrap(),
            &topic,
            1..=events,
            Duration::from_secs(180),
            &mut relay,
        )
    });
    assert_eq!(
        (count.distinct, count.outside, count.order_breaks),
        (events, 0, 0),
        "{count:?}:\n{}",
        tail(&relay.log(), 40)
    );
    assert!(
        count.records < 2 * events,
        "{count:?}: the restarts replayed far more than the unconfirmed windows"
    );
    ob.wait_confirmed(after, &relay).await;
    ob.finish(relay).await;
}

/// (5) One transaction of 1,000,000 messages (a database with
/// `logical_decoding_work_mem = 64kB`, so the walsender streams it, or
/// spills it to its own disk when walrelay asked for no streaming) is
/// delivered completely, per key in order, with walrelay's peak RSS under
/// 256 MB, and the slot confirmed past its commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn million_message_transaction_with_bounded_memory() {
    const EVENTS: u64 = 1_000_000;
    let started = Instant::now();
    let (db, client) = TestDb::new("msg_million", &["logical_decoding_work_mem = '64kB'"]).await;
    let ob = message_outbox("msg_million", client);
    let topic = ob.topic("");
    create_topic(&topic, 4).await;
    // lz4 keeps the broker's disk work small; the first line lands in the
    // configuration's [kafka.producer] table.
    let config = with_outbox(
        ob.config_for(
            &kafka_bootstrap(),
            env().pg_port,
            &db.name,
            &format!("\"compression.type\" = \"lz4\"\n\n{METRICS}"),
        ),
        &ob,
        &outbox_lines(&ob, "messages", ""),
    );
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    exec(
        &ob.client,
        &format!(
            "SELECT count(pg_logical_emit_message(true, '{}', json_build_object(\
               'id', {ID_SQL}, 'aggregatetype', '{}', 'aggregateid', 'k' || (g % 97), \
               'type', 'E', 'payload', json_build_object('n', g))::text)) \
             FROM generate_series(1, {EVENTS}) g",
            prefix(&ob),
            ob.agg("")
        ),
    )
    .await;
    let after_commit = ob.current_lsn().await;
    let emitted = started.elapsed();
    let count = tokio::task::block_in_place(|| {
        count_events(
            &kafka_bootstrap(),
            &topic,
            1..=EVENTS,
            Duration::from_secs(300),
            &mut relay,
        )
    });
    assert_eq!(
        (count.distinct, count.outside, count.order_breaks),
        (EVENTS, 0, 0),
        "{count:?}:\n{}",
        tail(&relay.log(), 40)
    );
    ob.wait_confirmed(after_commit, &relay).await;
    let peak_kb = relay.peak_rss_kb();
    let poke = format!("{}_poke", prefix(&ob));
    wait_slot_stat(&ob.client, &ob.name, LARGE_TXNS, 1, &poke).await;
    eprintln!(
        "million_message_transaction: emitted in {emitted:?}, delivered and confirmed at {:?}, \
         {} records, walrelay VmHWM {} MB",
        started.elapsed(),
        count.records,
        peak_kb / 1024
    );
    assert!(
        peak_kb < 256 * 1024,
        "walrelay peak RSS {} MB, limit 256 MB",
        peak_kb / 1024
    );
    ob.finish(relay).await;
    db.drop().await;
}

/// One kind of bad message.
struct BadCase {
    /// Test name (slot, publication and topic prefix).
    name: &'static str,
    /// The bad message's content, given the aggregate type of topic `a`
    /// (event 3 where it has an id).
    content: fn(&str) -> String,
    /// Emitted with `pg_logical_emit_message(true, ...)`.
    transactional: bool,
    /// Members the error must name besides the LSN and the prefix.
    members: &'static [&'static str],
}

/// Runs walrelay twice on one slot. Good events 1 and 2 (topic `a`),
/// confirmed; the bad message; good event 4 (topic `b`). Messages of other
/// prefixes (not JSON, non-transactional, an array) around them are no
/// events and stop nothing. Default policy: walrelay exits 1, events 1
/// and 2 are in Kafka, and the slot stays before the bad message (its
/// commit, or the message itself when it has none). With a dead-letter
/// topic: one dead-letter record, whose value is the original content and
/// whose headers name the message's LSN, the prefix and the member; event 4
/// is delivered and the slot moves past it.
async fn run_bad_case(case: BadCase) {
    let ob = message_outbox(case.name, connect().await);
    let (p, c) = (prefix(&ob), &ob.client);
    let (topic_a, topic_b) = (ob.topic("a"), ob.topic("b"));
    let dlq = format!("{}_dlq", ob.name);
    for t in [&topic_a, &topic_b, &dlq] {
        create_topic(t, 1).await;
    }

    // --- errors.tolerance = none ---
    let mut relay = Relay::start(&messages_config(&ob, "", ""));
    ob.wait_active(&mut relay).await;
    let probe = ob.create_probe().await;
    emit(c, true, &p, &content(1, &ob.agg("a"), "k1", r#"{"n": 1}"#)).await;
    let other = format!("{p}_other");
    emit(c, false, &other, "not json").await;
    emit(c, true, &other, "[1]").await;
    emit(c, true, &p, &content(2, &ob.agg("a"), "k2", r#"{"n": 2}"#)).await;
    let before = decoded(&ob, &probe, &[&p]).await;
    assert_eq!(before.len(), 2, "probe saw {before:?}");
    let end_2 = before[1].commit_end.expect("transactional");
    ob.wait_confirmed(end_2, &relay).await;
    let bad = (case.content)(&ob.agg("a"));
    let bad_lsn = emit(c, case.transactional, &p, &bad).await;
    emit(c, true, &p, &content(4, &ob.agg("b"), "k4", r#"{"n": 4}"#)).await;
    let all = decoded(&ob, &probe, &[&p]).await;
    assert_eq!(all.len(), 4, "probe saw {all:?}");
    assert_eq!(all[2].lsn, bad_lsn, "probe saw {all:?}");
    let stop_before = all[2].commit_end.unwrap_or(bad_lsn);
    let end_4 = all[3].commit_end.expect("transactional");

    let code = relay.exit_code(EXIT_WAIT);
    let log = relay.log();
    assert_eq!(code, 1, "{log}");
    let confirmed = ob.slot_confirmed().await.expect("slot exists");
    assert!(
        confirmed >= end_2 && confirmed < stop_before,
        "confirmed {confirmed} must stay in [{end_2}, {stop_before}) (bad message at {bad_lsn}):\n{}",
        tail(&log, 40)
    );
    let got = numbers(&read_to_end(&topic_a, WAIT).await);
    assert!(
        got.contains(&1) && got.contains(&2) && !got.contains(&3),
        "events 1 and 2 must be in {topic_a}, event 3 not: {got:?}"
    );
    ob.wait_inactive().await;

    // --- errors.tolerance = all, dead-letter topic ---
    let tolerant = messages_config(
        &ob,
        "",
        &format!("[errors]\ntolerance = \"all\"\ndead_letter_topic = \"{dlq}\"\n"),
    );
    let mut relay = Relay::start(&tolerant);
    let want: HashSet<String> = [event_id(4)].into_iter().collect();
    read_until_ids(&topic_b, &want, &mut relay).await;
    // Past event 4: the bad message is settled, its letter acknowledged.
    ob.wait_confirmed(end_4, &relay).await;
    let letters = read_to_end(&dlq, WAIT).await;
    let show = common::describe(&letters);
    assert_eq!(letters.len(), 1, "{show}");
    let letter = &letters[0];
    assert!(
        letter.value.as_deref() == Some(bad.as_bytes()),
        "the dead-letter value must be the original content {bad:?}: {show}"
    );
    assert_eq!(
        header(letter, "walrelay.source.lsn"),
        Some(bad_lsn.to_string().as_str()),
        "{show}"
    );
    let message = header(letter, "__connect.errors.exception.message")
        .unwrap_or_else(|| panic!("no exception message: {show}"));
    let mut names = vec![bad_lsn.to_string(), p.clone()];
    names.extend(case.members.iter().map(|m| (*m).to_owned()));
    for n in &names {
        assert!(message.contains(n.as_str()), "{message:?} must name {n}");
    }
    let got = numbers(&read_to_end(&topic_a, WAIT).await);
    assert_eq!(got, vec![1, 2], "{topic_a}");
    relay.assert_running();
    ob.drop_probe(&probe).await;
    ob.finish(relay).await;
}

/// (6a) Content that is not JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_content_not_json() {
    run_bad_case(BadCase {
        name: "msg_bad_not_json",
        content: |_| r#"{"id": "not json"#.to_owned(),
        transactional: true,
        members: &[],
    })
    .await;
}

/// (6b) Content that is JSON but not an object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_content_json_array() {
    run_bad_case(BadCase {
        name: "msg_bad_array",
        content: |agg| format!("[{}]", content(3, agg, "k3", "{}")),
        transactional: true,
        members: &[],
    })
    .await;
}

/// (6c) No `aggregateid` member (the key).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_content_missing_key() {
    run_bad_case(BadCase {
        name: "msg_bad_no_key",
        content: |agg| {
            format!(
                r#"{{"id":"{}","aggregatetype":"{agg}","type":"E","payload":{{"n": 3}}}}"#,
                event_id(3)
            )
        },
        transactional: true,
        members: &["aggregateid"],
    })
    .await;
}

/// (6d) `aggregatetype` (the route) a number.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_content_route_not_a_string() {
    run_bad_case(BadCase {
        name: "msg_bad_route",
        content: |_| {
            format!(
                r#"{{"id":"{}","aggregatetype":42,"aggregateid":"k3","type":"E","payload":{{"n": 3}}}}"#,
                event_id(3)
            )
        },
        transactional: true,
        members: &["aggregatetype"],
    })
    .await;
}

/// (7a) A non-transactional message with the selected prefix (valid
/// content) under the default `non_transactional = "error"` is bad input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_transactional_message_is_bad_input_by_default() {
    run_bad_case(BadCase {
        name: "msg_bad_non_txn",
        content: |agg| content(3, agg, "k3", r#"{"n": 3}"#),
        transactional: false,
        members: &[],
    })
    .await;
}

/// (7b) `non_transactional = "skip"`: non-transactional messages with the
/// selected prefix are dropped, one on its own and one inside a
/// transaction whose transactional message is delivered; walrelay keeps
/// going and confirms past them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_transactional_skip_drops_and_goes_on() {
    let ob = message_outbox("msg_non_txn_skip", connect().await);
    let topic = ob.topic("");
    create_topic(&topic, 1).await;
    let config = messages_config(&ob, "non_transactional = \"skip\"\n", "");
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    let (p, agg, c) = (prefix(&ob), ob.agg(""), &ob.client);
    let event = |n: u64| content(n, &agg, &format!("k{n}"), &format!(r#"{{"n": {n}}}"#));
    emit(c, true, &p, &event(1)).await;
    emit(c, false, &p, &event(2)).await;
    exec(c, "BEGIN").await;
    emit(c, false, &p, &event(3)).await;
    emit(c, true, &p, &event(4)).await;
    exec(c, "COMMIT").await;
    emit(c, true, &p, &event(5)).await;
    let after = ob.current_lsn().await;
    let want: HashSet<String> = [1, 4, 5].into_iter().map(event_id).collect();
    read_until_ids(&topic, &want, &mut relay).await;
    let records = read_to_end(&topic, WAIT).await;
    assert_eq!(
        numbers(&records),
        vec![1, 4, 5],
        "{}",
        common::describe(&records)
    );
    ob.wait_confirmed(after, &relay).await;
    relay.assert_running();
    ob.finish(relay).await;
}

/// (8) `source = "both"` in a database with `logical_decoding_work_mem =
/// 64kB`: a large transaction (streamed, or spilled by the server; see
/// [`LARGE_TXNS`]) of interleaved rows and messages whose rolled-back
/// savepoints (one nested inside a released one) held rows and messages
/// delivers exactly the surviving events, in order; a large transaction
/// rolled back whole once the walsender had decoded it delivers nothing,
/// and a later one is delivered and confirmed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_transaction_with_rolled_back_messages() {
    let (db, client) = TestDb::new("msg_large", &["logical_decoding_work_mem = '64kB'"]).await;
    let ob = Outbox::new_with("msg_large", client).await;
    let topic = ob.topic("");
    create_topic(&topic, 1).await;
    let lines = format!(
        "table = \"public.{}\"\n{}",
        ob.name,
        outbox_lines(&ob, "both", "")
    );
    let config = with_outbox(
        ob.config_for(&kafka_bootstrap(), env().pg_port, &db.name, METRICS),
        &ob,
        &lines,
    );
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    let (p, agg) = (prefix(&ob), ob.agg(""));
    let poke = format!("{p}_poke");
    let ins = |first, last| interleaved(&ob.name, &agg, &p, "k", (first, last), 1);
    let script = format!(
        "BEGIN;
         {}
         SAVEPOINT s1; {} ROLLBACK TO SAVEPOINT s1;
         {}
         SAVEPOINT s2; {}
           SAVEPOINT s3; {} ROLLBACK TO SAVEPOINT s3;
         RELEASE SAVEPOINT s2;
         SAVEPOINT s4; {} RELEASE SAVEPOINT s4;
         COMMIT;",
        ins(1, 1000),
        ins(1001, 2000),
        ins(2001, 3000),
        ins(3001, 4000),
        ins(4001, 5000),
        ins(5001, 6000),
    );
    exec(&ob.client, &script).await;
    let after = ob.current_lsn().await;
    let mut expected: Vec<u64> = (1..=1000).chain(2001..=4000).chain(5001..=6000).collect();
    let want: HashSet<String> = expected.iter().copied().map(event_id).collect();
    let records = read_until_ids(&topic, &want, &mut relay).await;
    assert_eq!(ids(&records), want, "only the surviving events");
    ob.wait_confirmed(after, &relay).await;
    wait_slot_stat(&ob.client, &ob.name, LARGE_TXNS, 1, &poke).await;

    // Rolled back only once the walsender decoded past the memory limit
    // (PostgreSQL 18 no longer streams a transaction that is already
    // aborted when the walsender reaches it).
    let large_before = slot_stat(&ob.client, &ob.name, LARGE_TXNS).await;
    exec(&ob.client, &format!("BEGIN; {}", ins(10_001, 13_000))).await;
    wait_slot_stat(&ob.client, &ob.name, LARGE_TXNS, large_before + 1, &poke).await;
    exec(&ob.client, "ROLLBACK").await;
    exec(
        &ob.client,
        &format!("BEGIN; {} COMMIT;", ins(20_001, 20_010)),
    )
    .await;
    let after = ob.current_lsn().await;
    expected.extend(20_001..=20_010);
    let want: HashSet<String> = expected.iter().copied().map(event_id).collect();
    let records = read_until_ids(&topic, &want, &mut relay).await;
    assert_eq!(ids(&records), want, "only the committed events");
    ob.wait_confirmed(after, &relay).await;
    let got = numbers(&read_to_end(&topic, WAIT).await);
    assert_eq!(
        got.len(),
        expected.len(),
        "committed events only, once each"
    );
    assert!(
        got == expected,
        "events out of order or rolled-back events delivered"
    );
    relay.assert_running();
    ob.finish(relay).await;
    db.drop().await;
}
