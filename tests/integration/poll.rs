//! The polling source (`[source] kind = "poll"`) against a real PostgreSQL
//! with `wal_level = replica` (the shared `pg-replica` cluster) and the real
//! Kafka broker: what a consumer reads, and the outbox table's own state.
//!
//! Each test owns its table (with a `seq` identity column as the order,
//! the partial index on the unpublished rows and a LISTEN trigger on its own
//! channel), its aggregate type (so its topic) and, where it takes one, its
//! shard locks (named after the table).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::common::metrics::{free_port, pipeline};
use crate::common::relay::{event_id, event_number, tail, Outbox, Relay, WAIT};
use crate::common::{
    connect_url, create_topic, create_topic_on, env, kafka_bootstrap, pg_replica_port,
    pg_replica_url, read_to_end, read_to_end_on, unique_name, PrivateKafka, Record,
};
use walrelay::metrics::page::PipelineView;

/// One test's polled outbox on the replica cluster.
pub(crate) struct PollBox {
    client: tokio_postgres::Client,
    pub(crate) name: String,
    port: u16,
}

impl PollBox {
    pub(crate) async fn new(test: &str) -> PollBox {
        PollBox::on(
            test,
            pg_replica_port(),
            connect_url(&pg_replica_url()).await,
        )
        .await
    }

    /// A polled outbox on the cluster at `port`, through `client`.
    async fn on(test: &str, port: u16, client: tokio_postgres::Client) -> PollBox {
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
                    published_at timestamptz
                );
                CREATE INDEX ON {name} (seq) WHERE published_at IS NULL;
                CREATE FUNCTION {name}_notify() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN PERFORM pg_notify('{name}', ''); RETURN NULL; END $$;
                CREATE TRIGGER {name}_notify AFTER INSERT ON {name}
                    FOR EACH STATEMENT EXECUTE FUNCTION {name}_notify();"
            ))
            .await
            .expect("create the polled outbox table");
        PollBox { client, name, port }
    }

    fn agg(&self) -> String {
        self.name.clone()
    }

    pub(crate) fn topic(&self) -> String {
        format!("outbox.event.{}", self.name)
    }

    /// The polling configuration; `poll_extra` goes into `[poll]`, `extra`
    /// after everything (its own tables).
    pub(crate) fn config(&self, metrics_port: u16, poll_extra: &str, extra: &str) -> String {
        self.config_on(&kafka_bootstrap(), metrics_port, poll_extra, extra)
    }

    /// [`PollBox::config`] for the broker at `bootstrap`.
    fn config_on(
        &self,
        bootstrap: &str,
        metrics_port: u16,
        poll_extra: &str,
        extra: &str,
    ) -> String {
        format!(
            r#"
[source]
kind = "poll"

[poll]
order_by = ["seq"]
interval_ms = 100
listen_channel = "{name}"
lock_retry_ms = 200
stats_interval_ms = 200
{poll_extra}

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
listen = "127.0.0.1:{metrics_port}"

{extra}
"#,
            name = self.name,
            port = self.port,
        )
    }

    /// Inserts test event `n` for aggregate `key` in its own transaction.
    pub(crate) async fn insert(&self, n: u64, key: &str) {
        self.client
            .execute(
                &format!(
                    "INSERT INTO {} (id, aggregatetype, aggregateid, type, payload) \
                     VALUES ($1::text::uuid, $2, $3, 'Created', $4::text::jsonb)",
                    self.name
                ),
                &[&event_id(n), &self.agg(), &key, &format!("{{\"n\": {n}}}")],
            )
            .await
            .expect("insert an outbox row");
    }

    /// (published, all) rows.
    async fn counts(&self) -> (i64, i64) {
        let row = self
            .client
            .query_one(
                &format!("SELECT count(published_at), count(*) FROM {}", self.name),
                &[],
            )
            .await
            .expect("count outbox rows");
        (row.get(0), row.get(1))
    }

    /// Waits until `published` rows are marked; panics with the relay's log.
    pub(crate) async fn wait_published(&self, published: i64, relay: &mut Relay) {
        let deadline = Instant::now() + WAIT;
        loop {
            let (p, all) = self.counts().await;
            if p >= published {
                return;
            }
            relay.assert_running();
            assert!(
                Instant::now() < deadline,
                "{p} of {all} rows published, want {published}:\n{}",
                tail(&relay.log(), 40)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Takes shard `shard`'s lock on `client` as walrelay would, so a
    /// walrelay started now waits as a standby.
    async fn hold_lock(&self, client: &tokio_postgres::Client, shard: i32) {
        let taken: bool = client
            .query_one(
                "SELECT pg_try_advisory_lock(hashtext($1), $2)",
                &[&format!("walrelay.poll:public.{}", self.name), &shard],
            )
            .await
            .expect("take the shard lock")
            .get(0);
        assert!(taken, "the shard lock was already held");
    }
}

/// Reads `topic` until `count` distinct event ids arrived (or `WAIT`).
async fn read_events(topic: &str, count: usize) -> Vec<Record> {
    let deadline = Instant::now() + WAIT;
    loop {
        let records = read_to_end(topic, Duration::from_secs(10)).await;
        let distinct = records
            .iter()
            .filter_map(|r| r.header("id"))
            .collect::<std::collections::HashSet<_>>()
            .len();
        if distinct >= count || Instant::now() >= deadline {
            return records;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn numbers(records: &[Record]) -> Vec<u64> {
    records
        .iter()
        .map(|r| {
            event_number(r.header("id").expect("every record has an id header"))
                .expect("a test event id")
        })
        .collect()
}

/// Checks at-least-once delivery of events `1..=n` in `records`, with
/// per-aggregate order: for each key, the first occurrences come in event
/// order, and a repeat only replays events already delivered.
fn check_order(records: &[Record], n: u64, key_of: impl Fn(u64) -> String) {
    let mut seen = std::collections::HashSet::new();
    let mut last_first: HashMap<Vec<u8>, u64> = HashMap::new();
    for r in records {
        let number = event_number(r.header("id").expect("id header")).expect("test event id");
        let key = r.key.clone().expect("a keyed record");
        assert_eq!(
            String::from_utf8_lossy(&key),
            key_of(number),
            "event {number} under the wrong key"
        );
        if seen.insert(number) {
            if let Some(prev) = last_first.get(&key) {
                assert!(
                    *prev < number,
                    "event {number} of key {} arrived after event {prev}",
                    String::from_utf8_lossy(&key)
                );
            }
            last_first.insert(key, number);
        }
    }
    let missing: Vec<u64> = (1..=n).filter(|i| !seen.contains(i)).collect();
    assert!(missing.is_empty(), "events never delivered: {missing:?}");
}

/// Reads the pipeline's `figure` (called `name` in the failure) until
/// `ok` holds; `None` (no answer, or not a figure of the source) waits.
async fn wait_figure<T: Copy + std::fmt::Debug>(
    port: u16,
    name: &str,
    figure: impl Fn(&PipelineView) -> Option<T>,
    ok: impl Fn(T) -> bool,
    relay: &mut Relay,
) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = pipeline(port).await.as_ref().and_then(&figure) {
            if ok(v) {
                return v;
            }
        }
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "{name} never reached the expected value:\n{}",
            tail(&relay.log(), 30)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn unpublished(p: &PipelineView) -> Option<i64> {
    p.unpublished_rows
}

fn oldest_unpublished_age(p: &PipelineView) -> Option<f64> {
    p.oldest_unpublished_age_seconds
}

fn shards_held(p: &PipelineView) -> Option<i64> {
    p.poll.as_ref().map(|poll| poll.shards_held)
}

#[tokio::test(flavor = "multi_thread")]
async fn rows_become_records_and_are_marked_published() {
    let ob = PollBox::new("poll_basic").await;
    create_topic(&ob.topic(), 3).await;
    let port = free_port();
    let mut relay = Relay::start(&ob.config(port, "", ""));
    for i in 1..=20 {
        ob.insert(i, &format!("k{}", i % 4)).await;
    }
    // A rolled-back business transaction: no row, no record.
    ob.client
        .batch_execute(&format!(
            "BEGIN; INSERT INTO {n} (id, aggregatetype, aggregateid, type, payload) \
             VALUES ('{id}', '{agg}', 'k0', 'Created', '{{}}'); ROLLBACK;",
            n = ob.name,
            id = event_id(999),
            agg = ob.agg()
        ))
        .await
        .unwrap();
    ob.insert(21, "k1").await; // 21 % 4
    ob.wait_published(21, &mut relay).await;
    let records = read_events(&ob.topic(), 21).await;
    assert_eq!(records.len(), 21, "one record per committed row");
    let mut got = numbers(&records);
    got.sort_unstable();
    assert_eq!(got, (1..=21).collect::<Vec<_>>(), "no rolled-back event");
    let r = records
        .iter()
        .find(|r| r.header("id") == Some(event_id(5).as_bytes()))
        .unwrap();
    assert_eq!(r.key.as_deref(), Some(&b"k1"[..]));
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(r.value.as_deref().unwrap()).unwrap(),
        serde_json::json!({"n": 5})
    );
    check_order(&records, 21, |i| format!("k{}", i % 4));
    let m = pipeline(port).await.expect("the state");
    assert_eq!(m.poll.as_ref().map(|p| p.published_rows), Some(21));
    assert_eq!(shards_held(&m), Some(1));
    relay.signal("TERM");
    assert_eq!(relay.exit_code(WAIT), 0, "{}", relay.log());
}

/// The same rows through the WAL source and the polling source give the
/// same records, byte for byte (key, value, headers).
#[tokio::test(flavor = "multi_thread")]
async fn poll_and_wal_records_are_identical() {
    let client = crate::common::connect().await;
    let ob = PollBox::on("poll_vs_wal", env().pg_port, client).await;
    let wal = Outbox {
        client: crate::common::connect().await,
        name: ob.name.clone(),
    };
    create_topic(&ob.topic(), 2).await;
    let placement =
        "\n[router]\nadditional_placement = \"type:header:eventType,aggregatetype:header\"\n";
    let wal_port = free_port();
    let mut wal_relay = Relay::start(&wal.config_with(
        &kafka_bootstrap(),
        &format!("[metrics]\nlisten = \"127.0.0.1:{wal_port}\"\n{placement}"),
    ));
    wal.wait_active(&mut wal_relay).await;
    for i in 1..=10 {
        ob.insert(i, &format!("k{}", i % 3)).await;
    }
    let from_wal = read_events(&ob.topic(), 10).await;
    assert_eq!(from_wal.len(), 10, "{}", tail(&wal_relay.log(), 30));
    wal_relay.signal("TERM");
    wal_relay.exit_code(WAIT);
    drop(wal_relay);
    wal.client
        .batch_execute(&format!(
            "SELECT pg_drop_replication_slot('{n}'); DROP PUBLICATION {n}",
            n = ob.name
        ))
        .await
        .unwrap();
    let port = free_port();
    let mut relay = Relay::start(&ob.config(port, "", placement));
    ob.wait_published(10, &mut relay).await;
    let all = read_events(&ob.topic(), 10).await;
    let deadline = Instant::now() + WAIT;
    let mut all = all;
    while all.len() < 20 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        all = read_to_end(&ob.topic(), Duration::from_secs(10)).await;
    }
    assert_eq!(all.len(), 20, "{}", tail(&relay.log(), 30));
    let by_id = |records: &[Record], from_poll: bool| {
        let mut seen: HashMap<Vec<u8>, Vec<&Record>> = HashMap::new();
        for r in records {
            seen.entry(r.header("id").unwrap().to_vec())
                .or_default()
                .push(r);
        }
        seen.into_iter()
            .map(|(id, rs)| {
                let r = if from_poll { rs[rs.len() - 1] } else { rs[0] };
                (
                    id,
                    (
                        r.key.clone(),
                        r.value.clone(),
                        r.headers.clone(),
                        r.partition,
                    ),
                )
            })
            .collect::<HashMap<_, _>>()
    };
    let wal_records = by_id(&all, false);
    let poll_records = by_id(&all, true);
    assert_eq!(wal_records.len(), 10);
    for (id, wal_record) in &wal_records {
        assert_eq!(
            Some(wal_record),
            poll_records.get(id),
            "event {} differs between the sources",
            String::from_utf8_lossy(id)
        );
    }
    let headers: Vec<&str> = all[0].headers.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(headers, ["id", "eventType", "aggregatetype"]);
    relay.signal("TERM");
    relay.exit_code(WAIT);
}

/// walrelay dies after Kafka acknowledged a batch and before its mark
/// committed: the rows stay unpublished and the next walrelay publishes
/// them again; nothing is lost.
#[tokio::test(flavor = "multi_thread")]
async fn kill_between_publish_and_mark_publishes_again() {
    let ob = PollBox::new("poll_kill_mark").await;
    create_topic(&ob.topic(), 1).await;
    // The mark hangs in a trigger; the server notices walrelay's death
    // within 100 ms and rolls the claim back.
    ob.client
        .batch_execute(&format!(
            "CREATE FUNCTION {n}_slow() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN PERFORM pg_sleep(600); RETURN NEW; END $$;
             CREATE TRIGGER {n}_slow BEFORE UPDATE ON {n}
                 FOR EACH ROW EXECUTE FUNCTION {n}_slow();",
            n = ob.name
        ))
        .await
        .unwrap();
    // walrelay's role has the server check its connection every 100 ms.
    let role = format!("{}_r", ob.name);
    ob.client
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN SUPERUSER; \
             ALTER ROLE {role} SET client_connection_check_interval = 100"
        ))
        .await
        .unwrap();
    let port = free_port();
    let config = ob
        .config(port, "", "")
        .replace("user = \"postgres\"", &format!("user = \"{role}\""));
    let mut relay = Relay::start(&config);
    for i in 1..=5 {
        ob.insert(i, "k").await;
    }
    let first = read_events(&ob.topic(), 5).await;
    assert_eq!(first.len(), 5, "{}", tail(&relay.log(), 30));
    // Acknowledged, and the mark is running (sleeping in the trigger).
    let deadline = Instant::now() + WAIT;
    loop {
        let marking: i64 = ob
            .client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'UPDATE %' \
                 AND query LIKE $1 AND state = 'active'",
                &[&format!("%{}%", ob.name)],
            )
            .await
            .unwrap()
            .get(0);
        if marking == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "the mark never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    relay.kill();
    // The server rolls the mark back once it sees the connection gone.
    let deadline = Instant::now() + WAIT;
    loop {
        let marking: i64 = ob
            .client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE query LIKE $1 AND state <> 'idle' \
                 AND pid <> pg_backend_pid()",
                &[&format!("%{}%", ob.name)],
            )
            .await
            .unwrap()
            .get(0);
        if marking == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the killed mark never ended");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(ob.counts().await, (0, 5), "nothing marked");
    ob.client
        .batch_execute(&format!("DROP TRIGGER {n}_slow ON {n}", n = ob.name))
        .await
        .unwrap();
    let mut relay = Relay::start(&ob.config(port, "", ""));
    ob.wait_published(5, &mut relay).await;
    let records = read_events(&ob.topic(), 5).await;
    let mut got = numbers(&records);
    got.sort_unstable();
    assert_eq!(
        got,
        vec![1, 1, 2, 2, 3, 3, 4, 4, 5, 5],
        "the batch published twice"
    );
    check_order(&records, 5, |_| "k".into());
    relay.signal("TERM");
    relay.exit_code(WAIT);
}

/// A transaction that inserted early and commits after later ones is
/// published once it commits.
#[tokio::test(flavor = "multi_thread")]
async fn a_long_transaction_committing_late_is_published() {
    let ob = PollBox::new("poll_late").await;
    create_topic(&ob.topic(), 1).await;
    let port = free_port();
    let mut relay = Relay::start(&ob.config(port, "", ""));
    let long = connect_url(&pg_replica_url()).await;
    long.batch_execute("BEGIN").await.unwrap();
    long.execute(
        &format!(
            "INSERT INTO {} (id, aggregatetype, aggregateid, type, payload) \
             VALUES ($1::text::uuid, $2, 'late', 'Created', '{{}}')",
            ob.name
        ),
        &[&event_id(1), &ob.agg()],
    )
    .await
    .unwrap();
    for i in 2..=4 {
        ob.insert(i, "early").await;
    }
    ob.wait_published(3, &mut relay).await;
    long.batch_execute("COMMIT").await.unwrap();
    ob.wait_published(4, &mut relay).await;
    let records = read_events(&ob.topic(), 4).await;
    assert_eq!(numbers(&records), vec![2, 3, 4, 1]);
    relay.signal("TERM");
    relay.exit_code(WAIT);
}

/// While another session holds the shard lock walrelay waits as a hot
/// standby: nothing is published, the backlog and its age show in the
/// metrics; when the lock frees it takes over.
#[tokio::test(flavor = "multi_thread")]
async fn a_standby_waits_for_the_lock_and_reports_the_backlog() {
    let ob = PollBox::new("poll_standby").await;
    create_topic(&ob.topic(), 1).await;
    let holder = connect_url(&pg_replica_url()).await;
    ob.hold_lock(&holder, 0).await;
    let port = free_port();
    let mut relay = Relay::start(&ob.config(port, "", ""));
    for i in 1..=3 {
        ob.insert(i, "k").await;
    }
    wait_figure(
        port,
        "unpublished rows",
        unpublished,
        |v| v == 3,
        &mut relay,
    )
    .await;
    wait_figure(
        port,
        "the oldest unpublished row's age",
        oldest_unpublished_age,
        |v| v >= 1.5,
        &mut relay,
    )
    .await;
    let m = pipeline(port).await.unwrap();
    assert_eq!(shards_held(&m), Some(0));
    assert!(!m.ready, "a standby is not ready");
    assert_eq!(ob.counts().await, (0, 3));
    assert!(read_to_end(&ob.topic(), Duration::from_secs(5))
        .await
        .is_empty());
    drop(holder);
    ob.wait_published(3, &mut relay).await;
    wait_figure(
        port,
        "unpublished rows",
        unpublished,
        |v| v == 0,
        &mut relay,
    )
    .await;
    wait_figure(
        port,
        "the oldest unpublished row's age",
        oldest_unpublished_age,
        |v| v == 0.0,
        &mut relay,
    )
    .await;
    assert_eq!(numbers(&read_events(&ob.topic(), 3).await), vec![1, 2, 3]);
    relay.signal("TERM");
    relay.exit_code(WAIT);
}

/// Rapid events for a few aggregates, two instances (one active, one hot
/// standby), the active one SIGKILLed mid-load: the standby takes over,
/// nothing is lost and each aggregate's events stay in order.
#[tokio::test(flavor = "multi_thread")]
async fn standby_takes_over_after_sigkill_and_keeps_per_aggregate_order() {
    takeover_keeps_order("poll_takeover", 1).await;
}

/// The same with four shards shared by the two instances.
#[tokio::test(flavor = "multi_thread")]
async fn four_shards_on_two_instances_keep_per_aggregate_order() {
    takeover_keeps_order("poll_shards", 4).await;
}

async fn takeover_keeps_order(test: &str, shards: u32) {
    const N: u64 = 1500;
    let ob = PollBox::new(test).await;
    create_topic(&ob.topic(), 3).await;
    let key_of = |i: u64| format!("agg{}", i % 7);
    let poll_extra = format!("shards = {shards}\nbatch_size = 50");
    let (pa, pb) = (free_port(), free_port());
    let mut a = Relay::start(&ob.config(pa, &poll_extra, ""));
    wait_figure(
        pa,
        "shards held",
        shards_held,
        |v| v == i64::from(shards),
        &mut a,
    )
    .await;
    let mut b = Relay::start(&ob.config(pb, &poll_extra, ""));
    wait_figure(pb, "shards held", shards_held, |v| v == 0, &mut b).await;
    let writer = {
        let url = pg_replica_url();
        let (name, agg) = (ob.name.clone(), ob.agg());
        tokio::spawn(async move {
            let c = connect_url(&url).await;
            let insert = c
                .prepare(&format!(
                    "INSERT INTO {name} (id, aggregatetype, aggregateid, type, payload) \
                     VALUES ($1::text::uuid, $2, $3, 'Created', $4::text::jsonb)"
                ))
                .await
                .unwrap();
            for i in 1..=N {
                let key = format!("agg{}", i % 7);
                c.execute(
                    &insert,
                    &[&event_id(i), &agg, &key, &format!("{{\"n\":{i}}}")],
                )
                .await
                .unwrap();
            }
        })
    };
    // Kill the active instance in the middle of the load.
    ob.wait_published(N as i64 / 3, &mut a).await;
    a.kill();
    writer.await.unwrap();
    wait_figure(
        pb,
        "shards held",
        shards_held,
        |v| v == i64::from(shards),
        &mut b,
    )
    .await;
    ob.wait_published(N as i64, &mut b).await;
    let records = read_events(&ob.topic(), N as usize).await;
    check_order(&records, N, key_of);
    // Per key, one partition.
    let mut partition_of: HashMap<Vec<u8>, i32> = HashMap::new();
    for r in &records {
        let p = *partition_of
            .entry(r.key.clone().unwrap())
            .or_insert(r.partition);
        assert_eq!(p, r.partition, "a key in two partitions");
    }
    b.signal("TERM");
    b.exit_code(WAIT);
}

/// Retention deletes published rows older than the setting, and nothing
/// else: not newer published rows, not unpublished ones.
#[tokio::test(flavor = "multi_thread")]
async fn retention_removes_only_expired_published_rows() {
    let ob = PollBox::new("poll_retention").await;
    create_topic(&ob.topic(), 1).await;
    // Published long ago (expired), published recently (kept).
    ob.client
        .batch_execute(&format!(
            "INSERT INTO {n} (id, aggregatetype, aggregateid, type, payload, published_at) \
             SELECT ('00000000-0000-4000-9000-' || lpad(i::text, 12, '0'))::uuid, '{agg}', 'old', \
                    'Created', '{{}}', now() - interval '2 hours' FROM generate_series(1, 30) i;
             INSERT INTO {n} (id, aggregatetype, aggregateid, type, payload, published_at) \
             SELECT ('00000000-0000-4000-a000-' || lpad(i::text, 12, '0'))::uuid, '{agg}', 'recent', \
                    'Created', '{{}}', now() - interval '10 minutes' FROM generate_series(1, 5) i;",
            n = ob.name,
            agg = ob.agg()
        ))
        .await
        .unwrap();
    // An unpublished row the relay cannot claim yet (a business transaction
    // holds it): retention must not touch it either.
    ob.insert(1, "locked").await;
    let locker = connect_url(&pg_replica_url()).await;
    locker
        .batch_execute(&format!(
            "BEGIN; SELECT * FROM {} WHERE id = '{}' FOR UPDATE",
            ob.name,
            event_id(1)
        ))
        .await
        .unwrap();
    let port = free_port();
    let mut relay = Relay::start(&ob.config(
        port,
        "retention_seconds = 3600\nretention_interval_ms = 200\nretention_batch = 7",
        "",
    ));
    ob.insert(2, "new").await;
    wait_figure(
        port,
        "rows deleted by retention",
        |p| p.poll.as_ref().map(|poll| poll.retention_deleted_rows),
        |v| v == 30,
        &mut relay,
    )
    .await;
    let mut expected: Vec<(String, bool)> = vec![("recent".into(), true); 5];
    expected.push(("locked".into(), false));
    expected.push(("new".into(), true));
    let deadline = Instant::now() + WAIT;
    loop {
        let rows = ob
            .client
            .query(
                &format!(
                    "SELECT aggregateid, published_at IS NOT NULL FROM {} ORDER BY seq",
                    ob.name
                ),
                &[],
            )
            .await
            .unwrap();
        let left: Vec<(String, bool)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        if left == expected {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "left {left:?}, want {expected:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A few more passes: still nothing else deleted.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(ob.counts().await, (6, 7));
    locker.batch_execute("COMMIT").await.unwrap();
    ob.wait_published(7, &mut relay).await;
    relay.signal("TERM");
    relay.exit_code(WAIT);
}

/// `poll.on_publish = "delete"`: acknowledged rows are deleted.
#[tokio::test(flavor = "multi_thread")]
async fn delete_on_publish_deletes_acknowledged_rows() {
    let ob = PollBox::new("poll_delete").await;
    create_topic(&ob.topic(), 1).await;
    let port = free_port();
    let mut relay = Relay::start(&ob.config(port, "on_publish = \"delete\"", ""));
    for i in 1..=7 {
        ob.insert(i, "k").await;
    }
    let records = read_events(&ob.topic(), 7).await;
    assert_eq!(numbers(&records), (1..=7).collect::<Vec<_>>());
    let deadline = Instant::now() + WAIT;
    while ob.counts().await.1 != 0 {
        relay.assert_running();
        assert!(Instant::now() < deadline, "rows not deleted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    relay.signal("TERM");
    relay.exit_code(WAIT);
}

/// A row the router cannot route (a NULL key under the default
/// `null_key = "error"`): with the default error policy walrelay stops and
/// marks nothing of its batch; with a dead-letter topic the row goes there,
/// is marked, and the rows after it are delivered.
#[tokio::test(flavor = "multi_thread")]
async fn an_unroutable_row_stops_or_is_dead_lettered() {
    let ob = PollBox::new("poll_bad").await;
    create_topic(&ob.topic(), 1).await;
    ob.insert(1, "k").await;
    ob.client
        .execute(
            &format!(
                "INSERT INTO {} (id, aggregatetype, aggregateid, type, payload) \
                 VALUES ($1::text::uuid, $2, NULL, 'Created', '{{}}')",
                ob.name
            ),
            &[&event_id(2), &ob.agg()],
        )
        .await
        .unwrap();
    ob.insert(3, "k").await;
    let port = free_port();
    let mut relay = Relay::start(&ob.config(port, "batch_size = 1", ""));
    let code = relay.exit_code(WAIT);
    assert_ne!(code, 0, "walrelay must stop on the unroutable row");
    let log = relay.log();
    assert!(
        log.contains(&event_id(2)),
        "the error names the event:\n{log}"
    );
    let marked: Vec<bool> = ob
        .client
        .query(
            &format!(
                "SELECT published_at IS NOT NULL FROM {} ORDER BY seq",
                ob.name
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(marked, vec![true, false, false], "stopped at the bad row");
    drop(relay);

    let dlq = unique_name("poll_dlq");
    create_topic(&dlq, 1).await;
    let mut relay = Relay::start(&ob.config(
        port,
        "",
        &format!("[errors]\ntolerance = \"all\"\ndead_letter_topic = \"{dlq}\"\n"),
    ));
    ob.wait_published(3, &mut relay).await;
    let dead = crate::common::consume(&dlq, 1, WAIT).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].key.as_deref(), None, "the row's null key");
    let records = read_events(&ob.topic(), 2).await;
    assert_eq!(numbers(&records), vec![1, 3]);
    relay.signal("TERM");
    relay.exit_code(WAIT);
}

/// Kafka down: a claim that waits longer than `poll.ack_timeout_ms` is
/// rolled back (no row locks or open transaction held through the outage),
/// nothing is marked, and once the broker is back every row is delivered
/// and marked.
#[tokio::test(flavor = "multi_thread")]
async fn kafka_down_rolls_back_claims_and_loses_nothing() {
    let kafka = tokio::task::spawn_blocking(PrivateKafka::start)
        .await
        .unwrap();
    let ob = PollBox::new("poll_kafka_down").await;
    create_topic_on(&kafka.bootstrap(), &ob.topic(), 1).await;
    let port = free_port();
    let mut relay =
        Relay::start(&ob.config_on(&kafka.bootstrap(), port, "ack_timeout_ms = 2000", ""));
    ob.insert(1, "k").await;
    ob.wait_published(1, &mut relay).await;
    let kafka = tokio::task::spawn_blocking(move || {
        kafka.stop();
        kafka
    })
    .await
    .unwrap();
    for i in 2..=6 {
        ob.insert(i, "k").await;
    }
    wait_figure(
        port,
        "rolled-back batches",
        |p| {
            p.poll
                .as_ref()
                .map(|poll| poll.batches.get("rolled_back").copied().unwrap_or(0))
        },
        |v| v >= 1,
        &mut relay,
    )
    .await;
    // Nothing marked, and no claim left open holding the rows.
    assert_eq!(ob.counts().await, (1, 6));
    let open: i64 = ob
        .client
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' \
             AND application_name LIKE 'walrelay%' AND query LIKE $1",
            &[&format!("%{}%", ob.name)],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(open, 0, "a claim stayed open through the outage");
    let locked: i64 = ob
        .client
        .query_one(
            &format!(
                "SELECT count(*) FROM (SELECT 1 FROM {} FOR UPDATE SKIP LOCKED) unlocked",
                ob.name
            ),
            &[],
        )
        .await
        .map(|r| r.get(0))
        .unwrap_or(-1);
    assert_eq!(locked, 6, "rows still locked by a claim");
    let kafka = tokio::task::spawn_blocking(move || {
        kafka.start_again();
        kafka
    })
    .await
    .unwrap();
    ob.wait_published(6, &mut relay).await;
    // Marked only after acknowledged: everything is in Kafka now.
    let records = read_to_end_on(&kafka.bootstrap(), &ob.topic(), WAIT).await;
    check_order(&records, 6, |_| "k".into());
    relay.signal("TERM");
    relay.exit_code(WAIT);
    drop(kafka);
}

/// `walrelay replay --where ... --yes` while a walrelay runs: the chosen
/// rows, and only they, reach Kafka again, in order, and are marked again.
#[tokio::test(flavor = "multi_thread")]
async fn replay_sends_the_chosen_rows_again() {
    let ob = PollBox::new("poll_replay").await;
    create_topic(&ob.topic(), 2).await;
    let port = free_port();
    let config = ob.config(port, "", "");
    let mut relay = Relay::start(&config);
    for i in 1..=6 {
        ob.insert(i, if i % 2 == 0 { "even" } else { "odd" }).await;
    }
    ob.wait_published(6, &mut relay).await;
    assert_eq!(read_events(&ob.topic(), 6).await.len(), 6);
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &config).unwrap();
    let path = file.path().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_walrelay"))
            .args(["replay", "--config"])
            .arg(&path)
            .args(["--where", "aggregateid = 'even'", "--yes"])
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains('3'),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    ob.wait_published(6, &mut relay).await;
    let deadline = Instant::now() + WAIT;
    let mut records = read_to_end(&ob.topic(), Duration::from_secs(10)).await;
    while records.len() < 9 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        records = read_to_end(&ob.topic(), Duration::from_secs(10)).await;
    }
    let mut got = numbers(&records);
    got.sort_unstable();
    assert_eq!(got, vec![1, 2, 2, 3, 4, 4, 5, 6, 6], "the even rows again");
    // Per key, the replayed events follow the originals in order.
    let evens: Vec<u64> = records
        .iter()
        .filter(|r| r.key.as_deref() == Some(&b"even"[..]))
        .map(|r| event_number(r.header("id").unwrap()).unwrap())
        .collect();
    assert_eq!(evens, vec![2, 4, 6, 2, 4, 6]);
    relay.signal("TERM");
    relay.exit_code(WAIT);
}
