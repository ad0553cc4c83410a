//! Large transactions: pgoutput protocol version 2 streams them while they
//! run; walrelay spills them to disk, drops aborted ones and rolled-back
//! subtransactions, and relays the committed ones with bounded memory.
//!
//! Each test owns a database with `logical_decoding_work_mem = 64kB` (so the
//! walsender streams even modest transactions; the tests check through
//! `pg_stat_replication_slots.stream_txns` that it did), plus its own outbox
//! table, publication, slot and topic, against the shared PostgreSQL and
//! Kafka; walrelay runs as a child process.

use crate::common;

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use common::relay::{
    count_events, event_id, event_number, ids, read_until_ids, Outbox, Relay, WAIT,
};
use common::{connect, connect_url, create_topic, env, kafka_bootstrap, read_to_end, unique_name};
use walrelay::proto::Lsn;

/// Producer settings for the tests: lz4 keeps the broker's disk work small
/// for the million-row test. These lines land in the `[kafka.producer]`
/// table the test configuration ends with.
const EXTRA: &str = r#""compression.type" = "lz4"

[metrics]
listen = "127.0.0.1:0"
"#;

/// A database of the test's own, so its `logical_decoding_work_mem` setting
/// touches no other test.
struct TestDb {
    name: String,
}

impl TestDb {
    async fn new(test: &str) -> (TestDb, tokio_postgres::Client) {
        let name = unique_name(test);
        let admin = connect().await;
        // Two statements: a multi-statement string is one implicit
        // transaction, which CREATE DATABASE refuses.
        for sql in [
            format!("CREATE DATABASE {name}"),
            format!("ALTER DATABASE {name} SET logical_decoding_work_mem = '64kB'"),
        ] {
            admin
                .batch_execute(&sql)
                .await
                .expect("create test database");
        }
        let client = connect_url(&format!(
            "host=127.0.0.1 port={} user=postgres dbname={name}",
            env().pg_port
        ))
        .await;
        (TestDb { name }, client)
    }

    async fn drop(self) {
        connect()
            .await
            .batch_execute(&format!("DROP DATABASE {} WITH (FORCE)", self.name))
            .await
            .expect("drop test database");
    }
}

/// Database, outbox, topic with `partitions`, and a streaming walrelay.
async fn setup(test: &str, partitions: i32) -> (TestDb, Outbox, Relay) {
    let (db, client) = TestDb::new(test).await;
    let ob = Outbox::new_with(test, client).await;
    create_topic(&ob.topic(""), partitions).await;
    let config = ob.config_for(&kafka_bootstrap(), env().pg_port, &db.name, EXTRA);
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    (db, ob, relay)
}

async fn finish(db: TestDb, ob: Outbox, relay: Relay) {
    ob.finish(relay).await;
    db.drop().await;
}

/// `INSERT ... SELECT` of events `first..=last` (~300-byte JSON payloads)
/// as one statement; `n` is the event number, also in the payload.
fn insert_range(table: &str, agg: &str, first: u64, last: u64) -> String {
    format!(
        "INSERT INTO {table} \
         SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, '{agg}', \
                'k' || (g % 97), 'E', \
                jsonb_build_object('n', g, 'pad', repeat(md5(g::text), 9)) \
         FROM generate_series({first}::int8, {last}::int8) g;"
    )
}

/// Transactions the walsender of the test's slot streamed so far.
async fn stream_txns(ob: &Outbox) -> i64 {
    slot_stat(ob, "stream_txns").await
}

/// A counter of the test's slot in `pg_stat_replication_slots`.
async fn slot_stat(ob: &Outbox, column: &str) -> i64 {
    // The client may be inside an open transaction, where statistics are
    // read once and cached (stats_fetch_consistency = cache): drop the
    // cached snapshot so each call sees the current count.
    ob.client
        .batch_execute("SELECT pg_stat_clear_snapshot()")
        .await
        .expect("clear the statistics snapshot");
    ob.client
        .query_opt(
            &format!("SELECT {column} FROM pg_stat_replication_slots WHERE slot_name = $1"),
            &[&ob.name],
        )
        .await
        .expect("read slot stats")
        .map(|r| r.get::<_, i64>(0))
        .unwrap_or(0)
}

/// Waits (bounded) until the slot's statistics show `at_least` streamed transactions.
async fn wait_streamed(ob: &Outbox, at_least: i64) {
    wait_slot_stat(ob, "stream_txns", at_least).await;
}

/// Waits (bounded) until the slot's counter `column` reaches `at_least`.
async fn wait_slot_stat(ob: &Outbox, column: &str, at_least: i64) {
    let deadline = Instant::now() + WAIT;
    loop {
        let n = slot_stat(ob, column).await;
        if n >= at_least {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "slot {} shows {column} = {n}, expected at least {at_least}: \
             logical_decoding_work_mem of the test database not in effect?",
            ob.name
        );
        // A walsender flushes its slot statistics at most once a second and
        // only when it has work: give it some (a non-transactional message
        // walrelay ignores), or an idle one never publishes the count.
        ob.client
            .batch_execute("SELECT pg_logical_emit_message(false, 'walrelay-test', 'poke')")
            .await
            .expect("poke the walsender");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until every event of `expected` is in the test's topic and the
/// slot is confirmed at `after` (every record is then in Kafka).
async fn delivered(ob: &Outbox, expected: &[u64], after: Lsn, relay: &mut Relay) {
    let want: HashSet<String> = expected.iter().copied().map(event_id).collect();
    read_until_ids(&ob.topic(""), &want, relay).await;
    ob.wait_confirmed(after, relay).await;
}

/// Event numbers in `topic`, in partition order (one partition: commit order).
async fn numbers(topic: &str) -> Vec<u64> {
    read_to_end(topic, WAIT)
        .await
        .iter()
        .map(|r| event_number(r.header("id").expect("id header")).expect("test event id"))
        .collect()
}

fn range(first: u64, last: u64) -> impl Iterator<Item = u64> {
    first..=last
}

/// Peak resident set (VmHWM, kB) of the walrelay child streaming `slot`:
/// the child of this process whose config file names the slot.
fn child_peak_rss_kb(slot: &str) -> u64 {
    let me = std::process::id().to_string();
    for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid ...
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1));
        if ppid != Some(me.as_str()) {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        let Some(config) = args
            .iter()
            .position(|a| *a == b"--config")
            .and_then(|i| args.get(i + 1))
        else {
            continue;
        };
        let config =
            std::fs::read_to_string(String::from_utf8_lossy(config).as_ref()).unwrap_or_default();
        if !config.contains(&format!("slot = \"{slot}\"")) {
            continue;
        }
        let status =
            std::fs::read_to_string(entry.path().join("status")).expect("read child status");
        return status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM in /proc/<pid>/status");
    }
    panic!("no walrelay child process streams slot {slot}");
}

/// Reads `topic` from the beginning until `want` distinct event numbers
/// `1..=want` arrived (or the bound passes), keeping only a bitmap. Returns
/// (distinct in range, records read, numbers outside the range).
fn count_distinct(topic: &str, want: u64, bound: Duration, relay: &mut Relay) -> (u64, u64, u64) {
    let c = count_events(&kafka_bootstrap(), topic, 1..=want, bound, relay);
    (c.distinct, c.records, c.outside)
}

/// (a) One transaction of 1,000,000 outbox rows (~300 MB of payload) is
/// relayed completely, streamed and spilled, with walrelay's peak RSS under
/// 256 MB, and the slot confirmed past its commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn million_row_transaction_with_bounded_memory() {
    const ROWS: u64 = 1_000_000;
    let started = Instant::now();
    let (db, ob, mut relay) = setup("large_million", 4).await;
    ob.client
        .batch_execute(&insert_range(&ob.name, &ob.agg(""), 1, ROWS))
        .await
        .expect("insert a million rows in one transaction");
    let after_commit = ob.current_lsn().await;
    let inserted = started.elapsed();
    let topic = ob.topic("");
    let (distinct, records, outside) = tokio::task::block_in_place(|| {
        count_distinct(&topic, ROWS, Duration::from_secs(300), &mut relay)
    });
    assert_eq!(
        (distinct, outside),
        (ROWS, 0),
        "{records} records read; {distinct} distinct ids of {ROWS}:\n{}",
        relay
            .log()
            .lines()
            .rev()
            .take(40)
            .collect::<Vec<_>>()
            .join("\n")
    );
    ob.wait_confirmed(after_commit, &relay).await;
    let peak_kb = child_peak_rss_kb(&ob.name);
    let streamed = stream_txns(&ob).await;
    eprintln!(
        "million_row_transaction: insert {inserted:?}, total {:?}, {records} records, walrelay VmHWM {} MB, stream_txns {streamed}",
        started.elapsed(),
        peak_kb / 1024
    );
    assert!(streamed > 0, "the walsender did not stream the transaction");
    assert!(
        peak_kb < 256 * 1024,
        "walrelay peak RSS {} MB, limit 256 MB",
        peak_kb / 1024
    );
    finish(db, ob, relay).await;
}

/// (b) A transaction streamed and then rolled back delivers nothing; a
/// later committed transaction is delivered and confirmed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_then_aborted_delivers_nothing() {
    let (db, ob, mut relay) = setup("large_abort", 1).await;
    let (t, agg) = (&ob.name, ob.agg(""));
    ob.client
        .batch_execute(&format!(
            "BEGIN; {} {}",
            insert_range(t, &agg, 1, 3000),
            insert_range(t, &agg, 3001, 6000)
        ))
        .await
        .expect("streamed transaction");
    // Rolled back only once it streamed: PostgreSQL 18 no longer streams a
    // transaction that is already aborted when the walsender reaches it.
    wait_streamed(&ob, 1).await;
    ob.client
        .batch_execute("ROLLBACK")
        .await
        .expect("roll back the streamed transaction");
    ob.client
        .batch_execute(&format!(
            "BEGIN; {} COMMIT;",
            insert_range(t, &agg, 10_001, 10_010)
        ))
        .await
        .expect("later transaction");
    let after = ob.current_lsn().await;
    let want: HashSet<String> = range(10_001, 10_010).map(event_id).collect();
    let records = read_until_ids(&ob.topic(""), &want, &mut relay).await;
    assert_eq!(
        ids(&records),
        want,
        "only the committed transaction's events"
    );
    assert_eq!(
        numbers(&ob.topic("")).await,
        range(10_001, 10_010).collect::<Vec<_>>()
    );
    ob.wait_confirmed(after, &relay).await;
    relay.assert_running();
    finish(db, ob, relay).await;
}

/// (c) Savepoints rolled back inside a streamed transaction, nested ones
/// included: exactly the surviving rows are delivered, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subtransaction_rollback_inside_a_streamed_transaction() {
    let (db, ob, mut relay) = setup("large_subxact", 1).await;
    let (t, agg) = (&ob.name, ob.agg(""));
    let ins = |a, b| insert_range(t, &agg, a, b);
    let script = format!(
        "BEGIN;
         {}
         SAVEPOINT s1; {} ROLLBACK TO SAVEPOINT s1;
         {}
         SAVEPOINT s2; {}
           SAVEPOINT s3; {} ROLLBACK TO SAVEPOINT s3;
         RELEASE SAVEPOINT s2;
         SAVEPOINT s4; {}
           SAVEPOINT s5; {} RELEASE SAVEPOINT s5;
         ROLLBACK TO SAVEPOINT s4;
         SAVEPOINT s6; {} RELEASE SAVEPOINT s6;
         {}
         COMMIT;",
        ins(1, 2000),
        ins(2001, 4000),
        ins(4001, 6000),
        ins(6001, 8000),
        ins(8001, 10_000),
        ins(10_001, 12_000),
        ins(12_001, 14_000),
        ins(14_001, 15_000),
        ins(15_001, 16_000),
    );
    ob.client
        .batch_execute(&script)
        .await
        .expect("transaction with savepoints");
    let after = ob.current_lsn().await;
    let expected: Vec<u64> = range(1, 2000)
        .chain(range(4001, 8000))
        .chain(range(14_001, 16_000))
        .collect();
    delivered(&ob, &expected, after, &mut relay).await;
    wait_streamed(&ob, 1).await;
    let got = numbers(&ob.topic("")).await;
    assert_eq!(got.len(), expected.len(), "surviving rows only, once each");
    assert!(
        got == expected,
        "rows out of order or rolled-back rows delivered"
    );
    finish(db, ob, relay).await;
}

/// (g) `replication.streaming = false` (also what a server before
/// PostgreSQL 14 gets): protocol version 1, the server spills the large
/// transaction to its own disk and sends it whole after the commit, with
/// the rolled-back savepoint already left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_streaming_the_server_spills() {
    let (db, client) = TestDb::new("large_no_stream").await;
    let ob = Outbox::new_with("large_no_stream", client).await;
    create_topic(&ob.topic(""), 1).await;
    let config = ob
        .config_for(&kafka_bootstrap(), env().pg_port, &db.name, EXTRA)
        .replace(
            "reconnect_max_ms = 1000\n",
            "reconnect_max_ms = 1000\nstreaming = false\n",
        );
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    let (t, agg) = (&ob.name, ob.agg(""));
    ob.client
        .batch_execute(&format!(
            "BEGIN; {} SAVEPOINT s1; {} ROLLBACK TO SAVEPOINT s1; {} COMMIT;",
            insert_range(t, &agg, 1, 3000),
            insert_range(t, &agg, 3001, 5000),
            insert_range(t, &agg, 5001, 6000)
        ))
        .await
        .expect("large transaction with a rolled-back savepoint");
    let after = ob.current_lsn().await;
    let expected: Vec<u64> = range(1, 3000).chain(range(5001, 6000)).collect();
    delivered(&ob, &expected, after, &mut relay).await;
    wait_slot_stat(&ob, "spill_txns", 1).await;
    assert_eq!(stream_txns(&ob).await, 0, "protocol 1 must not stream");
    let got = numbers(&ob.topic("")).await;
    assert!(
        got == expected,
        "{} rows read, {} expected, or out of order",
        got.len(),
        expected.len()
    );
    finish(db, ob, relay).await;
}

/// (d) Two streamed transactions interleaved on two connections: the one
/// that commits is delivered whole and in order, the one that aborts not at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interleaved_streamed_transactions() {
    let (db, ob, mut relay) = setup("large_interleaved", 1).await;
    let (t, agg) = (ob.name.clone(), ob.agg(""));
    let other = connect_url(&format!(
        "host=127.0.0.1 port={} user=postgres dbname={}",
        env().pg_port,
        db.name
    ))
    .await;
    let a = &ob.client;
    let b = &other;
    a.batch_execute(&format!("BEGIN; {}", insert_range(&t, &agg, 1, 2000)))
        .await
        .expect("a1");
    b.batch_execute(&format!("BEGIN; {}", insert_range(&t, &agg, 5001, 7000)))
        .await
        .expect("b1");
    a.batch_execute(&insert_range(&t, &agg, 2001, 4000))
        .await
        .expect("a2");
    b.batch_execute(&insert_range(&t, &agg, 7001, 9000))
        .await
        .expect("b2");
    // Both streamed before either ends: PostgreSQL 18 no longer streams a
    // transaction that is already aborted when the walsender reaches it.
    wait_streamed(&ob, 2).await;
    a.batch_execute("COMMIT").await.expect("commit a");
    b.batch_execute("ROLLBACK").await.expect("roll back b");
    // A small transaction after both proves the abort was handled and
    // the stream went on.
    a.batch_execute(&format!(
        "BEGIN; {} COMMIT;",
        insert_range(&t, &agg, 9001, 9005)
    ))
    .await
    .expect("later transaction");
    let after = ob.current_lsn().await;
    let expected: Vec<u64> = range(1, 4000).chain(range(9001, 9005)).collect();
    delivered(&ob, &expected, after, &mut relay).await;
    wait_streamed(&ob, 2).await;
    let got = numbers(&ob.topic("")).await;
    assert_eq!(got.len(), expected.len(), "committed rows only, once each");
    assert!(
        got == expected,
        "rows out of order or aborted rows delivered"
    );
    finish(db, ob, relay).await;
}

/// (e) walrelay killed while a streamed transaction is open: the new
/// session starts with no spill state, the server streams the transaction
/// again from its start, and after the commit every row arrives once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_stream_restarts_the_stream() {
    let (db, ob, mut relay) = setup("large_killed", 1).await;
    let (t, agg) = (&ob.name, ob.agg(""));
    ob.client
        .batch_execute(&format!("BEGIN; {}", insert_range(t, &agg, 1, 3000)))
        .await
        .expect("first half, transaction left open");
    wait_streamed(&ob, 1).await;
    relay = relay.kill_and_restart();
    ob.wait_active(&mut relay).await;
    ob.client
        .batch_execute(&format!("{} COMMIT;", insert_range(t, &agg, 3001, 6000)))
        .await
        .expect("second half and commit");
    let after = ob.current_lsn().await;
    let expected: Vec<u64> = range(1, 6000).collect();
    delivered(&ob, &expected, after, &mut relay).await;
    // Streamed once to each walrelay process.
    wait_streamed(&ob, 2).await;
    let got = numbers(&ob.topic("")).await;
    assert_eq!(got.len(), expected.len(), "every row once");
    assert!(got == expected, "rows out of order");
    finish(db, ob, relay).await;
}

/// The files `pid` holds open under `dir`, as the kernel names them
/// (an unlinked file ends in " (deleted)").
fn open_files_under(pid: u32, dir: &Path) -> Vec<String> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    fds.flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter(|target| target.starts_with(dir))
        .map(|target| target.display().to_string())
        .collect()
}

/// (f) `replication.spill_dir`: a directory walrelay cannot create files
/// in stops it at start, naming the setting; an open streamed
/// transaction's spill file lives (unlinked) in the configured directory
/// and is gone once the transaction is relayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spill_files_go_to_spill_dir() {
    let (db, client) = TestDb::new("large_spill_dir").await;
    let ob = Outbox::new_with("large_spill_dir", client).await;
    create_topic(&ob.topic(""), 1).await;
    let spill = tempfile::tempdir().expect("spill dir");
    let config = |dir: &Path| {
        ob.config_for(&kafka_bootstrap(), env().pg_port, &db.name, EXTRA)
            .replace(
                "reconnect_max_ms = 1000\n",
                &format!(
                    "reconnect_max_ms = 1000\nspill_dir = \"{}\"\n",
                    dir.display()
                ),
            )
    };

    let missing = spill.path().join("missing");
    let mut relay = Relay::start(&config(&missing));
    let status = relay
        .wait_exit(WAIT)
        .expect("walrelay kept running with no spill dir");
    let log = relay.log();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains("replication.spill_dir") && log.contains(&missing.display().to_string()),
        "the error must name the setting and the directory:\n{log}"
    );
    drop(relay);

    let mut relay = Relay::start(&config(spill.path()));
    ob.wait_active(&mut relay).await;
    let (t, agg) = (&ob.name, ob.agg(""));
    ob.client
        .batch_execute(&format!("BEGIN; {}", insert_range(t, &agg, 1, 3000)))
        .await
        .expect("transaction left open");
    wait_streamed(&ob, 1).await;
    let deadline = Instant::now() + WAIT;
    let spilled = loop {
        let files = open_files_under(relay.pid(), spill.path());
        if !files.is_empty() {
            break files;
        }
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "walrelay holds no file under {} while a streamed transaction is open",
            spill.path().display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        spilled.iter().all(|f| f.ends_with(" (deleted)")),
        "spill files must be unlinked: {spilled:?}"
    );
    assert_eq!(
        std::fs::read_dir(spill.path())
            .expect("list spill dir")
            .count(),
        0,
        "spill files must not be visible in the directory"
    );
    ob.client
        .batch_execute(&format!("{} COMMIT;", insert_range(t, &agg, 3001, 6000)))
        .await
        .expect("second half and commit");
    let after = ob.current_lsn().await;
    let want: HashSet<String> = range(1, 6000).map(event_id).collect();
    read_until_ids(&ob.topic(""), &want, &mut relay).await;
    ob.wait_confirmed(after, &relay).await;
    let deadline = Instant::now() + WAIT;
    while !open_files_under(relay.pid(), spill.path()).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the spill file stays open after its transaction was relayed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    finish(db, ob, relay).await;
}

#[test]
fn event_numbers_parse() {
    assert_eq!(event_number(event_id(0xabc).as_bytes()), Some(0xabc));
    assert_eq!(event_number(b"not-an-id"), None);
}
