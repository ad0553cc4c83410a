//! Several pipelines in one process: connector files of both forms on two
//! databases, a pipeline broken at run time while the others go on, a
//! SIGKILL every pipeline recovers from, a throttled producer that holds
//! back only its own pipeline, the native `[[pipelines]]` form with a WAL
//! and a polling pipeline, and `runtime.on_pipeline_failure = "exit"`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::database::TestDb;
use crate::common::metrics::{free_port, get_text, state};
use crate::common::relay::{event_id, ids, read_until_ids, tail, Outbox, Relay, WAIT};
use crate::common::{
    connect_url, kafka_bootstrap, pg_replica_port, pg_replica_url, read_to_end, run_script,
    unique_name,
};
use walrelay::metrics::page::state::Lifecycle;

/// Waits until `/readyz` answers `pred(status, body)`.
async fn wait_readyz(port: u16, relay: &mut Relay, what: &str, pred: impl Fn(u16, &str) -> bool) {
    let deadline = Instant::now() + WAIT;
    let mut last = None;
    loop {
        if let Some((status, body)) = get_text(port, "/readyz").await {
            if pred(status, &body) {
                return;
            }
            last = Some((status, body));
        }
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "/readyz never showed {what}; last {last:?}:\n{}",
            tail(&relay.log(), 60)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The connector keys of a Debezium PostgreSQL connector with the
/// EventRouter on `ob`'s table in `dbname` (connector name = slot name =
/// the table's name).
fn connector_keys(ob: &Outbox, dbname: &str, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let port = crate::common::env().pg_port.to_string();
    let table = format!("public.{}", ob.name);
    let mut keys: Vec<(String, String)> = [
        ("name", ob.name.as_str()),
        (
            "connector.class",
            "io.debezium.connector.postgresql.PostgresConnector",
        ),
        ("database.hostname", "127.0.0.1"),
        ("database.port", port.as_str()),
        ("database.user", "postgres"),
        ("database.dbname", dbname),
        ("topic.prefix", ob.name.as_str()),
        ("plugin.name", "pgoutput"),
        ("slot.name", ob.name.as_str()),
        ("publication.name", ob.name.as_str()),
        ("publication.autocreate.mode", "filtered"),
        ("table.include.list", table.as_str()),
        ("transforms", "outbox"),
        (
            "transforms.outbox.type",
            "io.debezium.transforms.outbox.EventRouter",
        ),
    ]
    .into_iter()
    .chain(extra.iter().copied())
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    keys.dedup_by(|a, b| a.0 == b.0);
    keys
}

fn write_properties(path: &Path, keys: &[(String, String)]) -> PathBuf {
    let text: String = keys.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    std::fs::write(path, text).expect("write a connector file");
    path.to_owned()
}

/// The REST form: `{"name": ..., "config": {...}}`.
fn write_json(path: &Path, keys: &[(String, String)]) -> PathBuf {
    let config: serde_json::Map<String, serde_json::Value> = keys
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
        .collect();
    let name = config["name"].clone();
    let doc = serde_json::json!({ "name": name, "config": config });
    std::fs::write(path, serde_json::to_vec_pretty(&doc).unwrap()).expect("write a JSON connector");
    path.to_owned()
}

fn write_worker(dir: &Path) -> PathBuf {
    let worker = dir.join("worker.properties");
    std::fs::write(
        &worker,
        format!(
            "bootstrap.servers={}\n\
             key.converter=org.apache.kafka.connect.storage.StringConverter\n\
             value.converter=org.apache.kafka.connect.storage.StringConverter\n\
             offset.storage.file.filename={}/connect.offsets\n",
            kafka_bootstrap(),
            dir.display()
        ),
    )
    .expect("write the worker file");
    worker
}

fn want(range: std::ops::RangeInclusive<u64>) -> HashSet<String> {
    range.map(event_id).collect()
}

/// Reads `ob`'s topic until it holds events `range`, and checks each
/// record's key (`k<n % 10>`, as `insert_series` writes them).
async fn assert_delivered(ob: &Outbox, range: std::ops::RangeInclusive<u64>, relay: &mut Relay) {
    let records = read_until_ids(&ob.topic(""), &want(range), relay).await;
    for r in &records {
        let id = String::from_utf8(r.header("id").unwrap().to_vec()).unwrap();
        let n = crate::common::relay::event_number(id.as_bytes()).unwrap();
        assert_eq!(
            r.key.as_deref(),
            Some(format!("k{}", n % 10).as_bytes()),
            "{}: record {id}",
            ob.name
        );
    }
}

/// Three connector files (two `.properties`, one REST `.json`) in one
/// `connect-standalone`, on two databases: all deliver; a SIGKILL with
/// events in flight loses none of any pipeline; then one pipeline's slot
/// is dropped behind its back: it stops alone, `/readyz` names it, its
/// `walrelay_pipeline_up` drops to 0, and the other two keep delivering
/// and confirming; at SIGTERM the process exits 1 (a pipeline failed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_connector_files_on_two_databases() {
    let (db2, client2) = TestDb::new("pipes_db", &[]).await;
    let a = Outbox::new("pipes_a").await;
    let b = Outbox::new("pipes_b").await;
    let c = Outbox::new_with("pipes_c", client2).await;
    let dir = tempfile::tempdir().unwrap();
    let worker = write_worker(dir.path());
    let files = [
        write_properties(
            &dir.path().join("a.properties"),
            &connector_keys(&a, "postgres", &[]),
        ),
        write_json(
            &dir.path().join("b.json"),
            &connector_keys(&b, "postgres", &[]),
        ),
        write_properties(
            &dir.path().join("c.properties"),
            &connector_keys(&c, &db2.name, &[]),
        ),
    ];
    let port = free_port();
    let mut args: Vec<PathBuf> = vec![
        "--metrics-addr".into(),
        format!("127.0.0.1:{port}").into(),
        "connect-standalone".into(),
        worker,
    ];
    args.extend(files.iter().cloned());
    let log = dir.path().join("walrelay.log");
    let mut relay = Relay::start_args(&args, log.clone());
    for ob in [&a, &b, &c] {
        ob.wait_active(&mut relay).await;
    }

    // All three deliver, each to its own topic, and confirm.
    for ob in [&a, &b, &c] {
        ob.insert_series(1, 20).await;
    }
    for ob in [&a, &b, &c] {
        assert_delivered(ob, 1..=20, &mut relay).await;
        let lsn = ob.current_lsn().await;
        ob.wait_confirmed(lsn, &relay).await;
    }
    // Each pipeline is named after its connector.
    let process = state(port).await.expect("the state");
    for ob in [&a, &b, &c] {
        let p = process
            .pipeline(&ob.name)
            .unwrap_or_else(|| panic!("no pipeline {}: {process:?}", ob.name));
        assert_eq!(p.events_total, 20, "{}: {p:?}", ob.name);
        assert_ne!(p.state, Lifecycle::Failed, "{p:?}");
    }

    // SIGKILL with events in flight in every pipeline, more written while
    // the process is down: after a restart every pipeline has them all.
    for ob in [&a, &b, &c] {
        ob.insert_series(21, 40).await;
    }
    relay.kill();
    for ob in [&a, &b, &c] {
        ob.insert_series(41, 60).await;
    }
    let mut relay = Relay::start_args(&args, log);
    for ob in [&a, &b, &c] {
        assert_delivered(ob, 1..=60, &mut relay).await;
    }
    wait_readyz(port, &mut relay, "every pipeline ready", |s, _| s == 200).await;

    // b's slot dropped behind its back: b stops alone.
    b.drop_slot_behind_its_back().await;
    wait_readyz(port, &mut relay, "b failed, a and c ready", |s, body| {
        s == 503
            && body.contains(&format!("pipeline {}: failed", b.name))
            && body.contains("no longer exists")
            && !body.contains(&a.name)
            && !body.contains(&c.name)
    })
    .await;
    let process = state(port).await.expect("the state");
    let lifecycle = |name: &str| process.pipeline(name).map(|p| p.state);
    assert_eq!(lifecycle(&b.name), Some(Lifecycle::Failed));
    assert!(
        lifecycle(&a.name).is_some_and(|s| s != Lifecycle::Failed),
        "{process:?}"
    );
    // The slot stays gone: walrelay never recreates a slot it was reading.
    assert!(!b.slot_exists().await);
    // a and c keep delivering and confirming.
    for ob in [&a, &c] {
        ob.insert_series(61, 80).await;
    }
    for ob in [&a, &c] {
        assert_delivered(ob, 1..=80, &mut relay).await;
        let lsn = ob.current_lsn().await;
        ob.wait_confirmed(lsn, &relay).await;
    }
    relay.assert_running();
    relay.signal("TERM");
    assert_eq!(relay.exit_code(WAIT), 1, "{}", tail(&relay.log(), 30));
    b.finish_exited(relay).await;
    a.remove().await;
    c.remove().await;
    db2.drop().await;
}

/// A polled outbox table (the polling source's columns) in the replica
/// cluster.
async fn polled_table(client: &tokio_postgres::Client, name: &str) {
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
            CREATE INDEX ON {name} (seq) WHERE published_at IS NULL"
        ))
        .await
        .expect("create the polled table");
}

/// Events `first..=last` into a polled table, one transaction.
async fn insert_polled(client: &tokio_postgres::Client, name: &str, first: u64, last: u64) {
    client
        .execute(
            &format!(
                "INSERT INTO {name} (id, aggregatetype, aggregateid, type, payload) \
                 SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, \
                 $1, 'k' || (g % 10), 'E', jsonb_build_object('n', g) \
                 FROM generate_series({first}::int8, {last}::int8) g"
            ),
            &[&name],
        )
        .await
        .expect("insert polled rows");
}

async fn unpublished(client: &tokio_postgres::Client, name: &str) -> i64 {
    client
        .query_one(
            &format!("SELECT count(*) FROM {name} WHERE published_at IS NULL"),
            &[],
        )
        .await
        .expect("count unpublished")
        .get(0)
}

/// Sets (or, with `None`, removes) the broker's produce quota for the
/// client id `client_id` (unique to the test, so no other test's clients
/// are touched).
fn produce_quota(client_id: &str, bytes_per_second: Option<u64>) {
    let dir = &crate::common::env().kafka_dir;
    let change = match bytes_per_second {
        Some(rate) => vec![
            "--add-config".to_owned(),
            format!("producer_byte_rate={rate}"),
        ],
        None => vec![
            "--delete-config".to_owned(),
            "producer_byte_rate".to_owned(),
        ],
    };
    let mut args = vec![
        "configs".to_owned(),
        dir.display().to_string(),
        "--alter".to_owned(),
    ];
    args.extend(change);
    args.extend([
        "--entity-type".to_owned(),
        "clients".to_owned(),
        "--entity-name".to_owned(),
        client_id.to_owned(),
    ]);
    run_script("kafka.sh", &args);
}

/// The native `[[pipelines]]` form: two WAL pipelines and a polling one
/// (on the wal_level=replica cluster) in one process. The broker throttles
/// the first pipeline's producer to a few bytes a second (a produce quota
/// on its client id): its events wait, its slot stays behind them, and
/// the other two deliver, confirm and mark everything meanwhile. Without
/// the quota the slow pipeline catches up with nothing lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_pipeline_holds_back_only_itself() {
    let slow = Outbox::new("pipes_slow").await;
    let fast = Outbox::new("pipes_fast").await;
    let replica = connect_url(&pg_replica_url()).await;
    let polled = unique_name("pipes_polled");
    polled_table(&replica, &polled).await;
    let client_id = unique_name("walrelay_slow");
    let port = free_port();
    let pg_port = crate::common::env().pg_port;
    let config = format!(
        r#"
[kafka]
bootstrap_servers = "{bootstrap}"
[kafka.producer]
"linger.ms" = "2"

[postgres]
host = "127.0.0.1"
port = {pg_port}
user = "postgres"
dbname = "postgres"

[replication]
status_interval_ms = 200
reconnect_min_ms = 100
reconnect_max_ms = 1000

[metrics]
listen = "127.0.0.1:{port}"

[[pipelines]]
name = "slow"
[pipelines.replication]
slot = "{slow}"
publication = "{slow}"
[pipelines.outbox]
table = "public.{slow}"
[pipelines.kafka.producer]
"client.id" = "{client_id}"
# One record per produce request: the broker lets a throttled client's
# request through and then mutes it for a while (at most about ten seconds,
# KIP-219), so it is the number of requests that keeps the pipeline slow.
"batch.num.messages" = "1"

[[pipelines]]
name = "fast"
[pipelines.replication]
slot = "{fast}"
publication = "{fast}"
[pipelines.outbox]
table = "public.{fast}"

[[pipelines]]
name = "polled"
[pipelines.postgres]
port = {replica_port}
[pipelines.source]
kind = "poll"
[pipelines.poll]
order_by = ["seq"]
interval_ms = 100
[pipelines.outbox]
table = "public.{polled}"
"#,
        bootstrap = kafka_bootstrap(),
        slow = slow.name,
        fast = fast.name,
        replica_port = pg_replica_port(),
    );
    let mut relay = Relay::start(&config);
    slow.wait_active(&mut relay).await;
    fast.wait_active(&mut relay).await;
    wait_readyz(port, &mut relay, "every pipeline ready", |s, _| s == 200).await;

    // A first batch goes through, then the broker throttles the slow
    // pipeline's producer to 16 bytes a second.
    slow.insert_series(1, 20).await;
    assert_delivered(&slow, 1..=20, &mut relay).await;
    produce_quota(&client_id, Some(16));
    // The quota reaches the broker's request handling at once, but the
    // producer meets it only with its next produce request: send one.
    slow.insert_series(21, 21).await;
    let slow_before = slow.current_lsn().await;
    slow.insert_series(22, 60).await;
    let slow_end = slow.current_lsn().await;
    fast.insert_series(1, 40).await;
    insert_polled(&replica, &polled, 1, 40).await;

    // The others deliver everything and confirm or mark it...
    assert_delivered(&fast, 1..=40, &mut relay).await;
    let fast_end = fast.current_lsn().await;
    fast.wait_confirmed(fast_end, &relay).await;
    let records =
        read_until_ids(&format!("outbox.event.{polled}"), &want(1..=40), &mut relay).await;
    assert!(ids(&records).is_superset(&want(1..=40)));
    let deadline = Instant::now() + WAIT;
    while unpublished(&replica, &polled).await > 0 {
        assert!(Instant::now() < deadline, "{}", tail(&relay.log(), 40));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // ...while the throttled pipeline has not got its second batch out, and
    // its slot has not been confirmed past it.
    let slow_records = read_to_end(&slow.topic(""), WAIT).await;
    let slow_ids = ids(&slow_records);
    assert!(
        !slow_ids.is_superset(&want(22..=60)),
        "the throttled pipeline delivered everything already: the quota did not hold it back"
    );
    let confirmed = slow.slot_confirmed().await.unwrap();
    assert!(
        confirmed < slow_end,
        "slow's slot confirmed {confirmed} past its undelivered events (end {slow_end}, before {slow_before})"
    );

    // Without the quota it catches up, nothing lost.
    produce_quota(&client_id, None);
    assert_delivered(&slow, 1..=60, &mut relay).await;
    slow.wait_confirmed(slow_end, &relay).await;
    relay.assert_running();
    drop(relay);
    slow.remove().await;
    fast.remove().await;
    replica
        .batch_execute(&format!("DROP TABLE {polled}"))
        .await
        .expect("drop the polled table");
}

/// `runtime.on_pipeline_failure = "exit"`: one pipeline's fatal error
/// stops the other gracefully (its delivered events confirmed, its slot
/// released) and the process exits 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_on_pipeline_failure_stops_the_process() {
    let a = Outbox::new("pipes_exit_a").await;
    let b = Outbox::new("pipes_exit_b").await;
    let port = free_port();
    let pipeline = |ob: &Outbox| {
        format!(
            "[[pipelines]]\nname = \"{n}\"\n[pipelines.replication]\nslot = \"{n}\"\npublication = \"{n}\"\n[pipelines.outbox]\ntable = \"public.{n}\"\n",
            n = ob.name
        )
    };
    let config = format!(
        "[kafka]\nbootstrap_servers = \"{}\"\n[postgres]\nhost = \"127.0.0.1\"\nport = {}\nuser = \"postgres\"\ndbname = \"postgres\"\n\
         [replication]\nstatus_interval_ms = 200\nreconnect_min_ms = 100\nreconnect_max_ms = 1000\n\
         [metrics]\nlisten = \"127.0.0.1:{port}\"\n[runtime]\non_pipeline_failure = \"exit\"\n{}{}",
        kafka_bootstrap(),
        crate::common::env().pg_port,
        pipeline(&a),
        pipeline(&b),
    );
    let mut relay = Relay::start(&config);
    a.wait_active(&mut relay).await;
    b.wait_active(&mut relay).await;
    a.insert_series(1, 10).await;
    assert_delivered(&a, 1..=10, &mut relay).await;
    a.wait_confirmed(a.current_lsn().await, &relay).await;
    b.drop_slot_behind_its_back().await;
    assert_eq!(relay.exit_code(WAIT), 1, "{}", tail(&relay.log(), 30));
    // a was stopped too, gracefully: its slot is free.
    a.wait_inactive().await;
    assert!(
        relay.log().contains("on_pipeline_failure"),
        "{}",
        tail(&relay.log(), 30)
    );
    b.finish_exited(relay).await;
    a.remove().await;
}
