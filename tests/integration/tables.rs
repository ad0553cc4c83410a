//! Several outbox tables in one pipeline against the real servers: three
//! tables of one shape written in interleaved transactions (native
//! `[[outbox.tables]]` and Debezium's `table.include.list` through
//! `walrelay connect-standalone`), every event read back with its topic,
//! key, value and headers, per-aggregate order kept across tables, the slot
//! confirmed past the writes, and a SIGKILL and restart losing nothing; two
//! tables of different shapes, each read with its own columns; a table's
//! mapping naming a missing column stopping the start; a publication
//! without one of the tables; `walrelay check` naming every table; and
//! exactly-once with heartbeats over several tables.
//!
//! Each test owns its tables (the first is an [`Outbox`], whose name also
//! names the slot, publication and topics; the others are `<name>_b`,
//! `<name>_c`, ...), and drops them at the end.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use common::progress::ProgressTopic;
use common::relay::{
    commit_ends, connect_files, event_id, event_number, ids, read_until_ids, Outbox, Relay, WAIT,
};
use common::{create_topic, kafka_bootstrap, read_to_end, Record};
use walrelay::check::{self, run_check, CheckStatus};
use walrelay::config::Config;
use walrelay::proto::Lsn;

/// Partitions of each topic: per-key order is per partition.
const PARTITIONS: i32 = 3;
/// Aggregates (keys `k0` ..) the events are spread over.
const KEYS: u64 = 5;
/// Bound on a walrelay that must stop by itself.
const EXIT_WAIT: Duration = Duration::from_secs(60);

/// One test's outbox tables of the usual shape: the [`Outbox`] and more
/// tables named after it.
struct Tables {
    ob: Outbox,
    /// Every table's name, the [`Outbox`]'s first.
    names: Vec<String>,
}

impl Tables {
    async fn new(test: &str, count: usize) -> Tables {
        let ob = Outbox::new(test).await;
        let mut names = vec![ob.name.clone()];
        for suffix in ["b", "c", "d"].iter().take(count - 1) {
            let name = format!("{}_{suffix}", ob.name);
            ob.client
                .batch_execute(&format!(
                    "CREATE TABLE {name} (LIKE {} INCLUDING ALL)",
                    ob.name
                ))
                .await
                .expect("create another outbox table");
            names.push(name);
        }
        Tables { ob, names }
    }

    /// The aggregate type (and so topic) of the events of table `i`: the
    /// last table's have their own, the others share the outbox's, so one
    /// aggregate's events come from several tables into one topic.
    fn agg(&self, i: usize) -> String {
        if i + 1 == self.names.len() {
            self.ob.agg("_last")
        } else {
            self.ob.agg("")
        }
    }

    fn topics(&self) -> [String; 2] {
        [self.ob.topic(""), self.ob.topic("_last")]
    }

    /// The native configuration with every table as a `[[outbox.tables]]`
    /// entry.
    fn config(&self, extra: &str) -> String {
        let entries: String = self
            .names
            .iter()
            .map(|n| format!("[[outbox.tables]]\nname = \"public.{n}\"\n\n"))
            .collect();
        self.ob
            .config(&kafka_bootstrap())
            .replace(
                &format!("[outbox]\ntable = \"public.{}\"\n", self.ob.name),
                &entries,
            )
            .replace("[kafka]\n", &format!("{extra}\n[kafka]\n"))
    }

    /// Writes `txns` transactions of `per_txn` events each, numbered from
    /// `first`: event `n` goes into table `n % tables` (so every
    /// transaction interleaves the tables), key `k<n % KEYS>`, payload
    /// `{"n": n}`; every other event is deleted again in its transaction,
    /// the outbox pattern. Returns the LSN after the last commit.
    async fn write(&self, first: u64, txns: u64, per_txn: u64) -> Lsn {
        self.write_with(first, txns, per_txn, true).await
    }

    /// [`Tables::write`], deleting every other event (`delete`) or none.
    async fn write_with(&self, first: u64, txns: u64, per_txn: u64, delete: bool) -> Lsn {
        let mut n = first;
        for _ in 0..txns {
            let mut sql = String::from("BEGIN;\n");
            for _ in 0..per_txn {
                let i = self.table_of(n);
                let table = &self.names[i];
                sql.push_str(&format!(
                    "INSERT INTO {table} VALUES ('{}', '{}', 'k{}', 'E{i}', '{{\"n\": {n}}}');\n",
                    event_id(n),
                    self.agg(i),
                    n % KEYS
                ));
                if delete && n.is_multiple_of(2) {
                    sql.push_str(&format!(
                        "DELETE FROM {table} WHERE id = '{}';\n",
                        event_id(n)
                    ));
                }
                n += 1;
            }
            sql.push_str("COMMIT;");
            self.ob
                .client
                .batch_execute(&sql)
                .await
                .expect("write an interleaved transaction");
        }
        self.ob.current_lsn().await
    }

    fn table_of(&self, n: u64) -> usize {
        (n % self.names.len() as u64) as usize
    }

    /// Reads both topics until every event of `range` is there; checks each
    /// record's topic, key, value and `id` header, and that each
    /// aggregate's events arrived in commit order (duplicates from a
    /// restart allowed after their first delivery). Returns the records by
    /// topic.
    async fn read_checked(
        &self,
        range: std::ops::RangeInclusive<u64>,
        relay: &mut Relay,
    ) -> HashMap<String, Vec<Record>> {
        let mut by_topic = HashMap::new();
        for (t, topic) in self.topics().iter().enumerate() {
            let want: HashSet<String> = range
                .clone()
                .filter(|n| (self.table_of(*n) + 1 == self.names.len()) == (t == 1))
                .map(event_id)
                .collect();
            let records = read_until_ids(topic, &want, relay).await;
            let mut first_seen: HashSet<u64> = HashSet::new();
            let mut last_of_key: HashMap<Vec<u8>, u64> = HashMap::new();
            for r in &records {
                let n = event_number(r.header("id").expect("an id header"))
                    .unwrap_or_else(|| panic!("not a test event: {}", common::describe(&records)));
                let table = self.table_of(n);
                assert_eq!(
                    self.agg(table) == self.ob.agg(""),
                    t == 0,
                    "event {n} of table {table} on {topic}"
                );
                let key = r.key.clone().expect("a key");
                assert_eq!(key, format!("k{}", n % KEYS).into_bytes(), "event {n}");
                assert_eq!(
                    r.value.as_deref(),
                    Some(format!("{{\"n\": {n}}}").as_bytes()),
                    "event {n}"
                );
                if first_seen.insert(n) {
                    let last = last_of_key.entry(key).or_insert(n);
                    assert!(
                        n >= *last,
                        "event {n} of key k{} after event {last} on {topic}:\n{}",
                        n % KEYS,
                        common::describe(&records)
                    );
                    *last = n;
                }
            }
            by_topic.insert(topic.clone(), records);
        }
        by_topic
    }

    /// The tables in the publication.
    async fn published(&self) -> Vec<String> {
        let rows = self
            .ob
            .client
            .query(
                "SELECT tablename::text FROM pg_publication_tables WHERE pubname = $1 ORDER BY 1",
                &[&self.ob.name],
            )
            .await
            .expect("read pg_publication_tables");
        rows.iter().map(|r| r.get(0)).collect()
    }

    async fn drop_others(&self) {
        for name in &self.names[1..] {
            self.ob
                .client
                .batch_execute(&format!("DROP TABLE IF EXISTS {name}"))
                .await
                .expect("drop an outbox table");
        }
    }

    /// Stops the relay and removes every object of the test.
    async fn finish(self, relay: Relay) {
        drop(relay);
        self.drop_others().await;
        self.ob.remove().await;
    }

    /// As [`Tables::finish`] for a relay that stopped by itself (maybe
    /// before creating its slot).
    async fn finish_exited(self, relay: Relay) {
        self.drop_others().await;
        self.ob.finish_exited(relay).await;
    }
}

/// Three tables in one native pipeline: walrelay creates the publication
/// FOR TABLE all three; interleaved transactions arrive whole, each event
/// on its topic with its key, value and `id`; the slot is confirmed past
/// the writes; killed and restarted with writes in between, nothing is
/// lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_tables_interleaved_native() {
    let t = Tables::new("tables_native", 3).await;
    for topic in t.topics() {
        create_topic(&topic, PARTITIONS).await;
    }
    let mut relay = Relay::start(&t.config(""));
    t.ob.wait_active(&mut relay).await;
    let mut want = t.names.clone();
    want.sort();
    assert_eq!(t.published().await, want);

    let end = t.write(1, 20, 7).await;
    let records = t.read_checked(1..=140, &mut relay).await;
    for recs in records.values() {
        for r in recs {
            // The native form adds no Debezium context headers.
            let names: Vec<&str> = r.headers.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(names, ["id"]);
        }
    }
    t.ob.wait_confirmed(end, &relay).await;

    // Killed right after more writes, restarted after more: no loss.
    t.write(141, 10, 7).await;
    relay.kill();
    t.write(211, 10, 7).await;
    let mut relay = relay.kill_and_restart();
    t.ob.wait_active(&mut relay).await;
    let end = t.write(281, 5, 7).await;
    t.read_checked(1..=315, &mut relay).await;
    t.ob.wait_confirmed(end, &relay).await;
    t.finish(relay).await;
}

/// Debezium's form: `table.include.list` with three tables through
/// `walrelay connect-standalone`. A filtered publication holding only the
/// first table is set to all three; the initial snapshot publishes each
/// table's rows; the stream then delivers interleaved transactions with
/// Debezium's context headers before `id`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_tables_interleaved_connect_standalone() {
    let t = Tables::new("tables_connect", 3).await;
    for topic in t.topics() {
        create_topic(&topic, PARTITIONS).await;
    }
    // Rows already there: one per table, for the snapshot.
    t.write_with(1, 1, 3, false).await;
    t.ob.client
        .batch_execute(&format!("CREATE PUBLICATION {0} FOR TABLE {0}", t.ob.name))
        .await
        .expect("create a publication of the first table only");
    let dir = tempfile::tempdir().expect("temporary directory");
    let include: Vec<String> = t.names.iter().map(|n| format!("public.{n}")).collect();
    let (worker, connector) = connect_files(
        dir.path(),
        &t.ob,
        common::env().pg_port,
        &kafka_bootstrap(),
        "",
        "snapshot.mode=initial\n",
    );
    let text = std::fs::read_to_string(&connector)
        .expect("read the connector file")
        .replace(
            &format!("table.include.list=public.{}\n", t.ob.name),
            &format!("table.include.list={}\n", include.join(",")),
        );
    std::fs::write(&connector, text).expect("write the connector file");
    let mut relay = Relay::start_args(
        &[
            Path::new("connect-standalone"),
            worker.as_path(),
            connector.as_path(),
        ],
        dir.path().join("walrelay.log"),
    );
    t.ob.wait_active(&mut relay).await;
    let mut want = t.names.clone();
    want.sort();
    assert_eq!(t.published().await, want, "filtered: set to every table");

    let end = t.write(4, 15, 6).await;
    let records = t.read_checked(1..=93, &mut relay).await;
    for recs in records.values() {
        for r in recs {
            let names: Vec<&str> = r.headers.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(
                names,
                [
                    "__debezium.context.connectorLogicalName",
                    "__debezium.context.taskId",
                    "__debezium.context.connectorName",
                    "__debezium.context.runId",
                    "id"
                ]
            );
            assert_eq!(
                r.header("__debezium.context.connectorLogicalName"),
                Some(t.ob.name.as_bytes())
            );
        }
    }
    t.ob.wait_confirmed(end, &relay).await;
    t.finish(relay).await;
}

/// Two tables of different shapes in one pipeline: the second has its own
/// column names (id, key, payload, route) and a header placement of its
/// own; both are delivered, each record built from its own table's columns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_of_different_shapes_each_with_its_columns() {
    let ob = Outbox::new("tables_shapes").await;
    let bill = format!("{}_bill", ob.name);
    ob.client
        .batch_execute(&format!(
            "CREATE TABLE {bill} (
                event_id text PRIMARY KEY,
                kind text NOT NULL,
                account_id text NOT NULL,
                body jsonb,
                created timestamp NOT NULL DEFAULT now()
            )"
        ))
        .await
        .expect("create the second outbox table");
    let (topic_a, topic_b) = (ob.topic(""), ob.topic("_bill"));
    create_topic(&topic_a, PARTITIONS).await;
    create_topic(&topic_b, PARTITIONS).await;
    let config = ob.config(&kafka_bootstrap()).replace(
        &format!("[outbox]\ntable = \"public.{}\"\n", ob.name),
        &format!(
            "[[outbox.tables]]\nname = \"public.{}\"\n\n\
                 [[outbox.tables]]\nname = \"public.{bill}\"\nid_field = \"event_id\"\n\
                 key_field = \"account_id\"\npayload_field = \"body\"\nroute_by_field = \"kind\"\n\
                 timestamp_field = \"created\"\nadditional_placement = \"kind:header:eventKind\"\n",
            ob.name
        ),
    );
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    // Interleaved: each transaction writes both tables.
    for i in 0..10u64 {
        ob.client
            .batch_execute(&format!(
                "BEGIN;
                 INSERT INTO {a} VALUES ('{id}', '{agg}', 'k{k}', 'E', '{{\"a\": {i}}}');
                 INSERT INTO {bill} (event_id, kind, account_id, body)
                     VALUES ('bill-{i}', '{kind}', 'acct-{k}', '{{\"b\": {i}}}');
                 DELETE FROM {bill} WHERE event_id = 'bill-{i}';
                 COMMIT;",
                a = ob.name,
                id = event_id(i + 1),
                agg = ob.agg(""),
                kind = ob.agg("_bill"),
                k = i % 3,
            ))
            .await
            .expect("write both tables");
    }
    let want_a: HashSet<String> = (1..=10).map(event_id).collect();
    let a = read_until_ids(&topic_a, &want_a, &mut relay).await;
    let want_b: HashSet<String> = (0..10).map(|i| format!("bill-{i}")).collect();
    let b = read_until_ids(&topic_b, &want_b, &mut relay).await;
    assert_eq!(ids(&a), want_a);
    for r in &a {
        let n = event_number(r.header("id").unwrap()).unwrap() - 1;
        assert_eq!(r.key.as_deref(), Some(format!("k{}", n % 3).as_bytes()));
        assert_eq!(
            r.value.as_deref(),
            Some(format!("{{\"a\": {n}}}").as_bytes())
        );
        assert_eq!(r.headers.len(), 1, "only id: {r:?}");
    }
    assert_eq!(ids(&b), want_b);
    for r in &b {
        let id = String::from_utf8(r.header("id").unwrap().to_vec()).unwrap();
        let i: u64 = id.trim_start_matches("bill-").parse().unwrap();
        assert_eq!(r.key.as_deref(), Some(format!("acct-{}", i % 3).as_bytes()));
        assert_eq!(
            r.value.as_deref(),
            Some(format!("{{\"b\": {i}}}").as_bytes())
        );
        assert_eq!(r.header("eventKind"), Some(ob.agg("_bill").as_bytes()));
        let names: Vec<&str> = r.headers.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["id", "eventKind"]);
    }
    let end = ob.current_lsn().await;
    ob.wait_confirmed(end, &relay).await;
    drop(relay);
    ob.client
        .batch_execute(&format!("DROP TABLE {bill}"))
        .await
        .expect("drop the second table");
    ob.remove().await;
}

/// A table's own mapping naming a column the table lacks: walrelay stops
/// at start (exit 1) naming the table, the column and the key, before it
/// creates the slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mapping_naming_a_missing_column_fails_the_start() {
    let t = Tables::new("tables_nocol", 2).await;
    let other = t.names[1].clone();
    let config = t.config("").replace(
        &format!("name = \"public.{other}\"\n"),
        &format!("name = \"public.{other}\"\nkey_field = \"account_id\"\n"),
    );
    let mut relay = Relay::start(&config);
    assert_eq!(relay.exit_code(EXIT_WAIT), 1, "{}", relay.log());
    let log = relay.log();
    for needle in [
        format!("public.{other}"),
        "account_id".to_owned(),
        "outbox.tables[1].key_field".to_owned(),
    ] {
        assert!(log.contains(&needle), "{needle} not in:\n{log}");
    }
    assert!(!t.ob.slot_exists().await, "no slot for a refused start");
    t.finish_exited(relay).await;
}

/// A publication that exists without one of the tables is refused as a
/// publication without the one outbox table is (mode `table`), naming the
/// missing table; nothing is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publication_missing_a_table_is_refused_naming_it() {
    let t = Tables::new("tables_pub", 3).await;
    t.ob.client
        .batch_execute(&format!(
            "CREATE PUBLICATION {0} FOR TABLE {0}, {1}",
            t.ob.name, t.names[1]
        ))
        .await
        .expect("create a publication of two of the tables");
    let mut relay = Relay::start(&t.config(""));
    assert_eq!(relay.exit_code(EXIT_WAIT), 1, "{}", relay.log());
    let log = relay.log();
    let missing = format!("public.{}", t.names[2]);
    assert!(
        log.contains(&missing) && log.contains("the table is not in it"),
        "{missing} not named:\n{log}"
    );
    assert!(!t.ob.slot_exists().await);
    assert_eq!(
        t.published().await.len(),
        2,
        "the publication is left alone"
    );
    t.finish_exited(relay).await;
}

/// `walrelay check` with two tables: a row for each, naming it; the one
/// whose mapping names a missing column fails naming table, column and
/// its own key; the publication row names both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_names_every_table() {
    let t = Tables::new("tables_check", 2).await;
    let other = t.names[1].clone();
    let config = t.config("").replace(
        &format!("name = \"public.{other}\"\n"),
        &format!("name = \"public.{other}\"\npayload_field = \"body\"\n"),
    );
    let config = Config::from_toml(&config, Path::new("tables.toml")).expect("valid config");
    let report = run_check(&config).await;
    let rows: Vec<&check::CheckRow> = report
        .rows
        .iter()
        .filter(|r| r.name == check::OUTBOX_TABLE)
        .collect();
    assert_eq!(rows.len(), 2, "{report}");
    assert_eq!(rows[0].status, CheckStatus::Pass, "{report}");
    assert!(
        rows[0].detail.contains(&format!("public.{}", t.ob.name)),
        "{report}"
    );
    assert_eq!(rows[1].status, CheckStatus::Fail, "{report}");
    assert!(
        rows[1].detail.contains(&format!("public.{other}")),
        "{report}"
    );
    assert!(rows[1].detail.contains("\"body\""), "{report}");
    assert!(
        rows[1]
            .fix
            .as_deref()
            .is_some_and(|f| f.contains("outbox.tables[1].payload_field")),
        "{report}"
    );
    let privileges = report
        .rows
        .iter()
        .filter(|r| r.name == check::OUTBOX_PRIVILEGES)
        .count();
    assert_eq!(privileges, 2, "{report}");
    let publication = report.row(check::PUBLICATION).expect("a publication row");
    assert!(
        publication.detail.contains(&t.ob.name) && publication.detail.contains(&other),
        "{report}"
    );
    t.drop_others().await;
    t.ob.client
        .batch_execute(&format!("DROP TABLE {}", t.ob.name))
        .await
        .expect("drop the table");
}

/// Exactly-once with heartbeats over three tables: a SIGKILL between
/// interleaved writes, then a `read_committed` consumer reads every event
/// of every table exactly once, the progress record reaches the last
/// commit, and the heartbeat topic gets Debezium's heartbeat records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_tables_exactly_once_with_heartbeats() {
    let t = Tables::new("tables_eos", 3).await;
    for topic in t.topics() {
        create_topic(&topic, PARTITIONS).await;
    }
    let bootstrap = kafka_bootstrap();
    let heartbeat_topic = format!("__debezium-heartbeat.{}", t.ob.name);
    create_topic(&heartbeat_topic, 1).await;
    let progress = ProgressTopic::new(&bootstrap, &t.ob.name);
    let config = progress.config(
        &t.config(&format!(
            "[debezium]\ntopic_prefix = \"{}\"\n[heartbeat]\ninterval_ms = 200\n",
            t.ob.name
        )),
        "interval_ms = 50\n",
    );
    let mut relay = Relay::start(&config);
    t.ob.wait_active(&mut relay).await;
    let probe = t.ob.create_probe().await;
    t.write(1, 10, 6).await;
    t.read_checked(1..=60, &mut relay).await;
    t.write(61, 10, 6).await;
    relay.kill();
    t.write(121, 10, 6).await;
    let mut relay = relay.kill_and_restart();
    t.ob.wait_active(&mut relay).await;
    t.write(181, 5, 6).await;
    let ends = commit_ends(&t.ob.client, &probe, &t.ob.name).await;
    let last = *ends.last().expect("commits decoded");
    progress.wait_for(last, &mut relay).await;
    let records = t.read_checked(1..=210, &mut relay).await;
    let mut seen: HashMap<u64, usize> = HashMap::new();
    for r in records.values().flatten() {
        *seen
            .entry(event_number(r.header("id").unwrap()).unwrap())
            .or_default() += 1;
    }
    let repeated: Vec<(&u64, &usize)> = seen.iter().filter(|(_, c)| **c > 1).collect();
    assert!(repeated.is_empty(), "read more than once: {repeated:?}");
    assert_eq!(seen.len(), 210);
    let beats = read_to_end(&heartbeat_topic, WAIT).await;
    assert!(
        !beats.is_empty(),
        "no heartbeat record on {heartbeat_topic}"
    );
    t.ob.drop_probe(&probe).await;
    t.finish(relay).await;
}
