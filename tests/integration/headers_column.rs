//! The headers column (`router.headers_field`) against the real PostgreSQL
//! and Kafka of `scripts/test.sh`: what a consumer reads (the router's
//! headers, then the column's members in PostgreSQL's order, with their
//! bytes), through the WAL source and the polling source; bad values and
//! member names that collide with the router's headers under both error
//! policies (stopped below the bad transaction, or dead-lettered with the
//! events after it delivered); a headers column that another option names,
//! refused before anything starts; and `walrelay check`'s column row.

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common;
use common::relay::{commit_ends, event_id, ids, read_until_ids, tail, Outbox, Relay, WAIT};
use common::{
    connect_url, consume, create_topic, kafka_bootstrap, pg_replica_port, pg_replica_url,
    read_to_end, unique_name, Record,
};
use walrelay::check::{self, run_check, CheckStatus};
use walrelay::config::Config;

/// Bound on walrelay stopping by itself after a bad event.
const EXIT_WAIT: Duration = Duration::from_secs(30);

/// The issue's example row, as a service would write it.
const NESTED: &str = r#"{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","schemaVersion":3,"flags":{"a":[1,2]},"ok":true,"nothing":null,"name":"x y"}"#;

/// What a consumer must read for [`NESTED`] after `id` and `eventType`:
/// jsonb's own order (PostgreSQL stores and sends object keys shorter
/// first, then bytewise), strings as their text, the rest compact JSON.
const NESTED_HEADERS: &[(&str, &str)] = &[
    ("ok", "true"),
    ("name", "x y"),
    ("flags", r#"{"a":[1,2]}"#),
    ("nothing", "null"),
    (
        "traceparent",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    ),
    ("schemaVersion", "3"),
];

/// Numbers beyond f64 and i64 and non-ASCII text keep their text.
const EXACT: &str = r#"{"big": 123456789012345678901234567890.000000000000000001, "grüße": "naïve ☃ 😀", "list": [1.50, -0.0, 1e2]}"#;
/// jsonb's rendering of [`EXACT`]'s members: numeric keeps every digit
/// and trailing zero (jsonb stores numbers as numeric, so PostgreSQL
/// itself writes `1e2` as `100` and `-0.0` as `0.0`); walrelay passes
/// that text on.
const EXACT_HEADERS: &[(&str, &str)] = &[
    ("big", "123456789012345678901234567890.000000000000000001"),
    ("list", "[1.50,0.0,100]"),
    ("grüße", "naïve ☃ 😀"),
];

const ROUTER: &str =
    "[router]\nheaders_field = \"headers\"\nadditional_placement = \"type:header:eventType\"\n";

fn owned(pairs: &[(&str, &str)]) -> Vec<(String, Option<Vec<u8>>)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Some(v.as_bytes().to_vec())))
        .collect()
}

/// The headers a consumer must read for event `n` of type `E` whose
/// headers column gave `members`.
fn expected(n: u64, members: &[(&str, &str)]) -> Vec<(String, Option<Vec<u8>>)> {
    let id = event_id(n);
    let mut want = owned(&[("id", id.as_str()), ("eventType", "E")]);
    want.extend(owned(members));
    want
}

fn record_of(records: &[Record], n: u64) -> &Record {
    let id = event_id(n);
    records
        .iter()
        .find(|r| r.header("id") == Some(id.as_bytes()))
        .unwrap_or_else(|| panic!("no record of event {n}:\n{}", common::describe(records)))
}

fn header<'a>(r: &'a Record, name: &str) -> Option<&'a str> {
    r.header(name)
        .map(|v| std::str::from_utf8(v).expect("utf-8 header"))
}

/// Inserts event `n` (key `k<n>`, type `E`) with `headers` as the text
/// of the column of type `sql_type` (`None`: NULL), in its own transaction.
async fn insert(ob: &Outbox, sql_type: &str, n: u64, suffix: &str, headers: Option<&str>) {
    ob.client
        .execute(
            &format!(
                "INSERT INTO {} (id, aggregatetype, aggregateid, type, payload, headers) \
                 VALUES ($1::text::uuid, $2, $3, 'E', $4::text::jsonb, $5::text::{sql_type})",
                ob.name
            ),
            &[
                &event_id(n),
                &ob.agg(suffix),
                &format!("k{n}"),
                &format!("{{\"n\": {n}}}"),
                &headers,
            ],
        )
        .await
        .unwrap_or_else(|e| panic!("insert event {n}: {e}"));
}

/// An outbox with a `headers` column of type `sql_type`.
async fn outbox(test: &str, sql_type: &str) -> Outbox {
    let ob = Outbox::new(test).await;
    ob.client
        .batch_execute(&format!(
            "ALTER TABLE {} ADD COLUMN headers {sql_type}",
            ob.name
        ))
        .await
        .expect("add the headers column");
    ob
}

fn base(extra: &str) -> String {
    format!("[metrics]\nlisten = \"127.0.0.1:0\"\n\n{extra}")
}

/// The issue's example, NULL, `{}` and exact numbers through the WAL
/// source: the consumer reads exactly the router's headers, then the
/// members.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_become_headers_after_the_routers_own() {
    let ob = outbox("hdr_wal", "jsonb").await;
    let topic = ob.topic("");
    create_topic(&topic, 1).await;
    let mut relay = Relay::start(&ob.config_with(&kafka_bootstrap(), &base(ROUTER)));
    ob.wait_active(&mut relay).await;
    insert(&ob, "jsonb", 1, "", Some(NESTED)).await;
    insert(&ob, "jsonb", 2, "", None).await;
    insert(&ob, "jsonb", 3, "", Some("{}")).await;
    insert(&ob, "jsonb", 4, "", Some(EXACT)).await;
    let want: HashSet<String> = (1..=4).map(event_id).collect();
    let records = read_until_ids(&topic, &want, &mut relay).await;
    let show = common::describe(&records);
    assert_eq!(records.len(), 4, "{show}");
    assert_eq!(
        record_of(&records, 1).headers,
        expected(1, NESTED_HEADERS),
        "{show}"
    );
    assert_eq!(record_of(&records, 2).headers, expected(2, &[]), "{show}");
    assert_eq!(record_of(&records, 3).headers, expected(3, &[]), "{show}");
    assert_eq!(
        record_of(&records, 4).headers,
        expected(4, EXACT_HEADERS),
        "{show}"
    );
    // The members are in the order PostgreSQL itself lists them.
    let keys: Vec<String> = ob
        .client
        .query(
            &format!(
                "SELECT jsonb_object_keys(headers) FROM {} WHERE id = $1::text::uuid",
                ob.name
            ),
            &[&event_id(1)],
        )
        .await
        .expect("jsonb_object_keys")
        .iter()
        .map(|r| r.get(0))
        .collect();
    let read: Vec<&str> = record_of(&records, 1).headers[2..]
        .iter()
        .map(|(k, _)| k.as_str())
        .collect();
    assert_eq!(read, keys);
    // The value and key are untouched by the option.
    let r = record_of(&records, 1);
    assert_eq!(r.key.as_deref(), Some(&b"k1"[..]));
    assert_eq!(r.value.as_deref(), Some(&br#"{"n": 1}"#[..]));
    ob.finish(relay).await;
}

/// A `json` or `text` column keeps the object as written: its members in
/// the written order, numbers as typed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_column_keeps_the_written_order() {
    let ob = outbox("hdr_text", "text").await;
    let topic = ob.topic("");
    create_topic(&topic, 1).await;
    let mut relay = Relay::start(&ob.config_with(&kafka_bootstrap(), &base(ROUTER)));
    ob.wait_active(&mut relay).await;
    insert(
        &ob,
        "text",
        1,
        "",
        Some("{ \"z\" : 1e2, \"a\" : { \"y\" : [ 1.0 , \"s p\" ] }, \"m\" : \"\\u00e9\" }"),
    )
    .await;
    let want: HashSet<String> = [event_id(1)].into_iter().collect();
    let records = read_until_ids(&topic, &want, &mut relay).await;
    assert_eq!(
        record_of(&records, 1).headers,
        expected(
            1,
            &[("z", "1e2"), ("a", r#"{"y":[1.0,"s p"]}"#), ("m", "é")]
        ),
        "{}",
        common::describe(&records)
    );
    ob.finish(relay).await;
}

/// One bad event under both error policies.
struct BadCase {
    name: &'static str,
    /// Type of the headers column.
    sql_type: &'static str,
    /// The bad event's headers text.
    bad: &'static str,
    /// `walrelay.error.kind`.
    kind: &'static str,
    /// What the error must name besides the event id and the column.
    names: &'static [&'static str],
}

/// Good event 1, the bad event 2 in its own transaction, good event 3 to
/// another topic. Stop policy: walrelay exits 1, event 2 and 3 are not in
/// Kafka, the slot stays below event 2's commit. Dead-letter policy: event
/// 2 is in the dead-letter topic with its original bytes and an error
/// naming the event, the column and the member; event 3 is delivered and
/// the slot moves past it.
async fn bad_case(c: BadCase) {
    let ob = outbox(c.name, c.sql_type).await;
    let (topic_a, topic_b) = (ob.topic("a"), ob.topic("b"));
    create_topic(&topic_a, 1).await;
    create_topic(&topic_b, 1).await;
    let dlq = format!("{}_dlq", ob.name);
    create_topic(&dlq, 1).await;

    let mut relay = Relay::start(&ob.config_with(&kafka_bootstrap(), &base(ROUTER)));
    ob.wait_active(&mut relay).await;
    let probe = ob.create_probe().await;
    insert(&ob, c.sql_type, 1, "a", Some(r#"{"a": "1"}"#)).await;
    let first = commit_ends(&ob.client, &probe, &ob.name).await;
    assert_eq!(first.len(), 1, "{first:?}");
    ob.wait_confirmed(first[0], &relay).await;
    insert(&ob, c.sql_type, 2, "a", Some(c.bad)).await;
    insert(&ob, c.sql_type, 3, "b", Some(r#"{"b": "3"}"#)).await;
    let ends = commit_ends(&ob.client, &probe, &ob.name).await;
    assert_eq!(ends.len(), 3, "{ends:?}");

    let code = relay.exit_code(EXIT_WAIT);
    assert_eq!(code, 1, "{}", tail(&relay.log(), 30));
    let confirmed = ob.slot_confirmed().await.expect("slot exists");
    assert!(
        confirmed >= ends[0] && confirmed < ends[1],
        "confirmed {confirmed} must stay in [{}, {})",
        ends[0],
        ends[1]
    );
    let in_a = read_to_end(&topic_a, WAIT).await;
    assert_eq!(
        ids(&in_a),
        [event_id(1)].into_iter().collect(),
        "only event 1 is in {topic_a}:\n{}",
        common::describe(&in_a)
    );
    assert_eq!(
        record_of(&in_a, 1).headers,
        expected(1, &[("a", "1")]),
        "{}",
        common::describe(&in_a)
    );
    assert!(
        read_to_end(&topic_b, WAIT).await.is_empty(),
        "nothing after the bad event is produced"
    );
    drop(relay);
    ob.wait_inactive().await;

    let tolerant = ob.config_with(
        &kafka_bootstrap(),
        &base(&format!(
            "{ROUTER}\n[errors]\ntolerance = \"all\"\ndead_letter_topic = \"{dlq}\"\n"
        )),
    );
    let mut relay = Relay::start(&tolerant);
    let want: HashSet<String> = [event_id(3)].into_iter().collect();
    let in_b = read_until_ids(&topic_b, &want, &mut relay).await;
    assert_eq!(
        record_of(&in_b, 3).headers,
        expected(3, &[("b", "3")]),
        "{}",
        common::describe(&in_b)
    );
    let letters = consume(&dlq, 1, WAIT).await;
    let show = common::describe(&letters);
    assert_eq!(letters.len(), 1, "{show}");
    let letter = &letters[0];
    assert_eq!(
        header(letter, "walrelay.error.kind"),
        Some(c.kind),
        "{show}"
    );
    assert_eq!(
        header(letter, "walrelay.event.id"),
        Some(event_id(2).as_str()),
        "{show}"
    );
    assert_eq!(
        header(letter, "__connect.errors.topic"),
        Some(topic_a.as_str()),
        "{show}"
    );
    assert_eq!(letter.key.as_deref(), Some(&b"k2"[..]), "{show}");
    assert_eq!(letter.value.as_deref(), Some(&br#"{"n": 2}"#[..]), "{show}");
    let message = header(letter, "__connect.errors.exception.message").expect("message");
    for n in c.names.iter().chain(&["headers column \"headers\""]) {
        assert!(message.contains(n), "{message} must name {n}");
    }
    assert!(message.contains(&event_id(2)), "{message}");
    ob.wait_confirmed(ends[2], &relay).await;
    relay.assert_running();
    let in_a = read_to_end(&topic_a, WAIT).await;
    assert!(
        !ids(&in_a).contains(&event_id(2)),
        "event 2 reached {topic_a}"
    );
    ob.drop_probe(&probe).await;
    ob.finish(relay).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_named_id_is_refused() {
    bad_case(BadCase {
        name: "hdr_id",
        sql_type: "jsonb",
        bad: r#"{"trace": "t", "id": "other"}"#,
        kind: "header_collision",
        names: &["member \"id\"", "event id header"],
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_named_like_a_placement_alias_is_refused() {
    bad_case(BadCase {
        name: "hdr_alias",
        sql_type: "jsonb",
        bad: r#"{"eventType": "Other"}"#,
        kind: "header_collision",
        names: &["member \"eventType\"", "router.additional_placement"],
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_that_is_not_an_object_is_refused() {
    bad_case(BadCase {
        name: "hdr_array",
        sql_type: "jsonb",
        bad: r#"["a", "b"]"#,
        kind: "invalid_headers",
        names: &["json array, not an object"],
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_that_is_not_json_is_refused() {
    bad_case(BadCase {
        name: "hdr_notjson",
        sql_type: "text",
        bad: "traceparent=00-ab",
        kind: "invalid_headers",
        names: &["not json"],
    })
    .await;
}

/// A table without the configured column: walrelay stops at start
/// (exit 1), naming the table, the column and the key, before it creates
/// its slot, as for every column the router is configured to read; nothing
/// is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_column_stops_the_start() {
    let ob = Outbox::new("hdr_missing").await;
    let topic = ob.topic("");
    create_topic(&topic, 1).await;
    let mut relay = Relay::start(&ob.config_with(&kafka_bootstrap(), &base(ROUTER)));
    assert_eq!(relay.exit_code(EXIT_WAIT), 1, "{}", tail(&relay.log(), 30));
    let log = relay.log();
    for needle in [ob.name.as_str(), "\"headers\"", "router.headers_field"] {
        assert!(log.contains(needle), "{needle} not in:\n{}", tail(&log, 30));
    }
    assert!(!ob.slot_exists().await, "no slot for a refused start");
    ob.insert(1, "", "k1", r#"{"n": 1}"#).await;
    assert!(read_to_end(&topic, WAIT).await.is_empty());
    ob.finish_exited(relay).await;
}

/// A headers column that is also the payload column, or a column of
/// `additional_placement`: walrelay refuses to start (exit code 2), naming
/// the key, and connects to nothing.
#[test]
fn another_options_column_is_refused_at_start() {
    let ob_name = unique_name("hdr_conflict");
    let config = |router: &str| {
        format!(
            r#"
[postgres]
host = "127.0.0.1"
port = 1
user = "postgres"
dbname = "postgres"

[replication]
slot = "{ob_name}"

[outbox]
table = "public.{ob_name}"

[kafka]
bootstrap_servers = "127.0.0.1:1"

{router}
"#
        )
    };
    let dir = tempfile::tempdir().expect("temporary directory");
    for (router, needles) in [
        (
            "[router]\nheaders_field = \"payload\"\n",
            vec![
                "router.headers_field",
                "\"payload\"",
                "router.payload_field",
            ],
        ),
        (
            "[router]\nheaders_field = \"type\"\nadditional_placement = \"type:header:eventType\"\n",
            vec![
                "router.headers_field",
                "\"type\"",
                "entry \"type:header:eventType\"",
            ],
        ),
        (
            "[router]\nheaders_field = \"\"\n",
            vec!["router.headers_field must name a column"],
        ),
    ] {
        let file = dir.path().join("walrelay.toml");
        std::fs::write(&file, config(router)).expect("write config");
        for command in ["run", "validate"] {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_walrelay"))
                .args([command, "--config"])
                .arg(&file)
                .output()
                .expect("run walrelay");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{command} {router}: {stderr}");
            for n in &needles {
                assert!(stderr.contains(n), "{command} {router}: must name {n}:\n{stderr}");
            }
        }
    }
}

/// `walrelay check` shows the headers column with its type, and fails on a
/// missing or mistyped one naming the column, its type and the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_shows_the_headers_column() {
    let ob = outbox("hdr_check", "jsonb").await;
    let parse = |text: &str| Config::from_toml(text, Path::new("hdr.toml")).expect("valid");
    let config = parse(&ob.config_with(&kafka_bootstrap(), &base(ROUTER)));
    let report = run_check(&config).await;
    let row = report.row(check::OUTBOX_TABLE).expect("outbox row");
    assert_eq!(row.status, CheckStatus::Pass, "{report}");
    assert!(row.detail.contains("headers headers (jsonb)"), "{report}");

    ob.client
        .batch_execute(&format!(
            "ALTER TABLE {0} DROP COLUMN headers; ALTER TABLE {0} ADD COLUMN headers uuid",
            ob.name
        ))
        .await
        .expect("retype the headers column");
    let report = run_check(&config).await;
    let row = report.row(check::OUTBOX_TABLE).expect("outbox row");
    assert_eq!(row.status, CheckStatus::Fail, "{report}");
    assert!(
        row.detail.contains("\"headers\"")
            && row.detail.contains("router.headers_field")
            && row.detail.contains("but it is uuid"),
        "{report}"
    );
    assert!(
        row.fix
            .as_deref()
            .is_some_and(|f| f.contains("router.headers_field") && !f.contains("Debezium")),
        "{report}"
    );

    ob.client
        .batch_execute(&format!("ALTER TABLE {} DROP COLUMN headers", ob.name))
        .await
        .expect("drop the headers column");
    let report = run_check(&config).await;
    let row = report.row(check::OUTBOX_TABLE).expect("outbox row");
    assert_eq!(row.status, CheckStatus::Fail, "{report}");
    assert!(
        row.detail
            .contains("no column \"headers\" (router.headers_field)"),
        "{report}"
    );
    ob.client
        .batch_execute(&format!(
            "DROP PUBLICATION IF EXISTS {0}; DROP TABLE {0}",
            ob.name
        ))
        .await
        .expect("drop the table");
}

/// A polled outbox with a `headers` column on the `wal_level = replica`
/// cluster.
struct Polled {
    client: tokio_postgres::Client,
    name: String,
}

impl Polled {
    async fn new(test: &str) -> Polled {
        let client = connect_url(&pg_replica_url()).await;
        let name = unique_name(test);
        client
            .batch_execute(&format!(
                "CREATE TABLE {name} (
                    seq bigint GENERATED ALWAYS AS IDENTITY,
                    id uuid PRIMARY KEY,
                    aggregatetype varchar(255) NOT NULL,
                    aggregateid varchar(255),
                    type varchar(255) NOT NULL,
                    payload jsonb,
                    headers jsonb,
                    published_at timestamptz
                );
                CREATE INDEX ON {name} (seq) WHERE published_at IS NULL;"
            ))
            .await
            .expect("create the polled outbox");
        Polled { client, name }
    }

    fn topic(&self) -> String {
        format!("outbox.event.{}", self.name)
    }

    fn config(&self, extra: &str) -> String {
        format!(
            r#"
[source]
kind = "poll"

[poll]
order_by = ["seq"]
interval_ms = 100
batch_size = 1
lock_retry_ms = 200

[postgres]
host = "127.0.0.1"
port = {port}
user = "postgres"
dbname = "postgres"

[replication]
reconnect_min_ms = 100
reconnect_max_ms = 1000

[outbox]
table = "public.{name}"

[kafka]
bootstrap_servers = "{bootstrap}"

[kafka.producer]
"linger.ms" = "2"

[metrics]
listen = "127.0.0.1:0"

{ROUTER}
{extra}
"#,
            port = pg_replica_port(),
            name = self.name,
            bootstrap = kafka_bootstrap(),
        )
    }

    async fn insert(&self, n: u64, headers: Option<&str>) {
        self.client
            .execute(
                &format!(
                    "INSERT INTO {} (id, aggregatetype, aggregateid, type, payload, headers) \
                     VALUES ($1::text::uuid, $2, $3, 'E', $4::text::jsonb, $5::text::jsonb)",
                    self.name
                ),
                &[
                    &event_id(n),
                    &self.name,
                    &format!("k{n}"),
                    &format!("{{\"n\": {n}}}"),
                    &headers,
                ],
            )
            .await
            .unwrap_or_else(|e| panic!("insert event {n}: {e}"));
    }

    /// `published_at IS NOT NULL` of every row, in `seq` order.
    async fn marked(&self) -> Vec<bool> {
        self.client
            .query(
                &format!(
                    "SELECT published_at IS NOT NULL FROM {} ORDER BY seq",
                    self.name
                ),
                &[],
            )
            .await
            .expect("read the marks")
            .iter()
            .map(|r| r.get(0))
            .collect()
    }

    async fn wait_all_marked(&self, relay: &mut Relay) {
        let deadline = Instant::now() + WAIT;
        loop {
            let marked = self.marked().await;
            if marked.iter().all(|m| *m) {
                return;
            }
            relay.assert_running();
            assert!(
                Instant::now() < deadline,
                "rows still unmarked: {marked:?}\n{}",
                tail(&relay.log(), 30)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn drop_table(&self) {
        self.client
            .batch_execute(&format!("DROP TABLE {}", self.name))
            .await
            .expect("drop the polled outbox");
    }
}

/// The same rows through the polling source: the same headers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_polling_source_reads_the_same_headers() {
    let ob = Polled::new("hdr_poll").await;
    create_topic(&ob.topic(), 1).await;
    ob.insert(1, Some(NESTED)).await;
    ob.insert(2, None).await;
    ob.insert(3, Some(EXACT)).await;
    let mut relay = Relay::start(&ob.config(""));
    ob.wait_all_marked(&mut relay).await;
    let records = read_to_end(&ob.topic(), WAIT).await;
    let show = common::describe(&records);
    assert_eq!(ids(&records).len(), 3, "{show}");
    assert_eq!(
        record_of(&records, 1).headers,
        expected(1, NESTED_HEADERS),
        "{show}"
    );
    assert_eq!(record_of(&records, 2).headers, expected(2, &[]), "{show}");
    assert_eq!(
        record_of(&records, 3).headers,
        expected(3, EXACT_HEADERS),
        "{show}"
    );
    relay.signal("TERM");
    assert_eq!(relay.exit_code(WAIT), 0, "{}", tail(&relay.log(), 30));
    ob.drop_table().await;
}

/// A colliding member in a polled row: the stop policy marks nothing from
/// the bad row on; with a dead-letter topic the row goes there, is marked,
/// and the row after it is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_polling_source_stops_or_dead_letters_a_collision() {
    let ob = Polled::new("hdr_poll_bad").await;
    create_topic(&ob.topic(), 1).await;
    ob.insert(1, Some(r#"{"a": "1"}"#)).await;
    ob.insert(2, Some(r#"{"id": "other"}"#)).await;
    ob.insert(3, Some(r#"{"b": "3"}"#)).await;
    let mut relay = Relay::start(&ob.config(""));
    assert_eq!(relay.exit_code(EXIT_WAIT), 1, "{}", tail(&relay.log(), 30));
    assert_eq!(ob.marked().await, vec![true, false, false]);
    let records = read_to_end(&ob.topic(), WAIT).await;
    assert_eq!(
        ids(&records),
        [event_id(1)].into_iter().collect(),
        "{}",
        common::describe(&records)
    );
    drop(relay);

    let dlq = unique_name("hdr_poll_dlq");
    create_topic(&dlq, 1).await;
    let mut relay = Relay::start(&ob.config(&format!(
        "[errors]\ntolerance = \"all\"\ndead_letter_topic = \"{dlq}\"\n"
    )));
    ob.wait_all_marked(&mut relay).await;
    let letters = consume(&dlq, 1, WAIT).await;
    let show = common::describe(&letters);
    assert_eq!(letters.len(), 1, "{show}");
    assert_eq!(
        header(&letters[0], "walrelay.error.kind"),
        Some("header_collision"),
        "{show}"
    );
    let message = header(&letters[0], "__connect.errors.exception.message").expect("message");
    for n in [event_id(2).as_str(), "\"headers\"", "member \"id\""] {
        assert!(message.contains(n), "{message} must name {n}");
    }
    let records = read_to_end(&ob.topic(), WAIT).await;
    assert_eq!(
        ids(&records),
        [event_id(1), event_id(3)].into_iter().collect(),
        "{}",
        common::describe(&records)
    );
    assert_eq!(record_of(&records, 3).headers, expected(3, &[("b", "3")]));
    relay.signal("TERM");
    relay.exit_code(WAIT);
    ob.drop_table().await;
}
