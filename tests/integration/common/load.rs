//! The fault suite's load generator and checker.
//!
//! The generator writes outbox events (insert + delete in the same
//! transaction, as applications using the outbox pattern do) from one
//! connection, so its commit order is the order it saw `COMMIT` succeed, and
//! records every committed and every rolled-back event id. It survives the
//! server going away: a `COMMIT` whose outcome is unknown is resolved by a
//! marker row written in the same transaction to a side table.
//!
//! The checker reads what a consumer read back and asserts the delivery
//! contract: every committed id present, no rolled-back id, per key the ids
//! in commit order once duplicates are dropped, and duplicates only for
//! transactions inside the unconfirmed window of some fault (at-least-once,
//! [`check`]) or none at all (exactly-once, [`check_exactly_once`]). It never waits
//! on anything; the test decides when the topic is complete.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rand::{Rng, SeedableRng};
use walrelay::proto::pgoutput::{decode_message, ColumnValue, LogicalMessage};
use walrelay::proto::Lsn;

use super::relay::{event_id, tail, Outbox, Relay};
use super::{pg_url, Record};

/// What the generator writes.
#[derive(Debug, Clone)]
pub(crate) struct LoadSpec {
    /// libpq connection string (the generator's own path to the server).
    pub url: String,
    /// Outbox table (unqualified, in `public`).
    pub table: String,
    /// `aggregatetype` of every event (routes to one topic).
    pub agg: String,
    /// Number of distinct aggregate ids (record keys).
    pub aggregates: u32,
    /// Committed events after which the generator stops.
    pub events: u64,
    /// Events per transaction: uniformly 1..=max_per_txn.
    pub max_per_txn: u32,
    /// One transaction in this many is rolled back on purpose.
    pub rollback_one_in: u32,
    /// Sleep after each transaction (stretches the load over the faults).
    pub pause: Duration,
    /// Bound on the whole run, reconnects included.
    pub deadline: Duration,
}

impl LoadSpec {
    /// 200 aggregates, 1..=10 events per transaction, one in 20 rolled back.
    pub(crate) fn new(url: String, table: &str, agg: &str, events: u64) -> LoadSpec {
        LoadSpec {
            url,
            table: table.to_string(),
            agg: agg.to_string(),
            aggregates: 200,
            events,
            max_per_txn: 10,
            rollback_one_in: 20,
            pause: Duration::ZERO,
            deadline: Duration::from_secs(300),
        }
    }
}

/// One committed event.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    /// Event id (the `id` header).
    pub id: String,
    /// Aggregate id (the record key).
    pub key: String,
    /// The generator's number of its transaction (the `<table>_marks` row).
    pub txn: i64,
    /// `pg_current_wal_insert_lsn()` read right after its COMMIT, in the
    /// same round trip: at or past its commit end, and before the next
    /// transaction of the generator (which writes one at a time). `None`
    /// when the outcome was looked up after a failure.
    pub after_commit: Option<Lsn>,
}

/// What the generator did.
#[derive(Debug, Default)]
pub(crate) struct LoadLog {
    /// Committed events in commit order.
    pub committed: Vec<Event>,
    /// Ids of events whose transaction did not commit.
    pub rolled_back: HashSet<String>,
    /// Committed transactions.
    pub txns_committed: u64,
    /// Transactions rolled back on purpose.
    pub txns_rolled_back: u64,
    /// Transactions that failed and did not commit (server gone).
    pub txns_failed: u64,
    /// Failed transactions whose outcome was looked up in the marker table.
    pub unknown_outcomes: u64,
    /// Connections opened after the first.
    pub reconnects: u64,
}

/// A running generator.
pub(crate) struct Load {
    stop: Arc<AtomicBool>,
    committed: Arc<AtomicU64>,
    handle: tokio::task::JoinHandle<LoadLog>,
}

impl Load {
    /// Creates the marker table `<table>_marks` and starts writing.
    pub(crate) async fn start(spec: LoadSpec) -> Load {
        let client = super::connect_url(&spec.url).await;
        client
            .batch_execute(&format!(
                "CREATE TABLE IF NOT EXISTS {}_marks (txn int8 PRIMARY KEY)",
                spec.table
            ))
            .await
            .expect("create marker table");
        let stop = Arc::new(AtomicBool::new(false));
        let committed = Arc::new(AtomicU64::new(0));
        let handle = tokio::spawn(write(spec, Arc::clone(&stop), Arc::clone(&committed)));
        Load {
            stop,
            committed,
            handle,
        }
    }

    /// Events committed so far.
    pub(crate) fn committed(&self) -> u64 {
        self.committed.load(Ordering::Relaxed)
    }

    /// Whether the generator has stopped.
    pub(crate) fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Waits (bounded by `timeout`) until at least `n` events committed or
    /// the generator stopped; returns whether `n` was reached.
    pub(crate) async fn wait_for(&self, n: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.committed() < n {
            if self.is_finished() || Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// Asks the generator to stop after the current transaction.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Waits for the generator to finish (it is bounded by its deadline).
    pub(crate) async fn finish(self) -> LoadLog {
        self.handle.await.expect("load generator panicked")
    }
}

enum Outcome {
    Committed,
    NotCommitted,
}

struct Txn {
    no: i64,
    ids: Vec<String>,
    keys: Vec<String>,
    rollback: bool,
}

async fn write(spec: LoadSpec, stop: Arc<AtomicBool>, counter: Arc<AtomicU64>) -> LoadLog {
    let deadline = Instant::now() + spec.deadline;
    let mut log = LoadLog::default();
    let mut client: Option<tokio_postgres::Client> = None;
    let mut opened = 0u64;
    let mut next_event = 1u64;
    let mut txn_no = 0i64;
    // A Send generator: the task may move between threads.
    let mut rng = rand::rngs::StdRng::from_entropy();
    while (log.committed.len() as u64) < spec.events
        && !stop.load(Ordering::Relaxed)
        && Instant::now() < deadline
    {
        let Some(c) = ensure_connected(&mut client, &spec.url, &mut opened, deadline).await else {
            break;
        };
        txn_no += 1;
        let n = rng.gen_range(1..=spec.max_per_txn) as u64;
        let txn = Txn {
            no: txn_no,
            ids: (next_event..next_event + n).map(event_id).collect(),
            keys: (0..n)
                .map(|_| format!("a{}", rng.gen_range(0..spec.aggregates)))
                .collect(),
            rollback: rng.gen_ratio(1, spec.rollback_one_in),
        };
        next_event += n;
        let mut after_commit = None;
        let outcome = match run_txn(c, &spec, &txn).await {
            Ok(_) if txn.rollback => Outcome::NotCommitted,
            Ok(lsn) => {
                after_commit = lsn;
                Outcome::Committed
            }
            Err(TxnFailure) => {
                // A fresh connection: this one may be gone or inside an
                // aborted transaction block.
                client = None;
                log.unknown_outcomes += 1;
                match resolve(&mut client, &spec, txn.no, &mut opened, deadline).await {
                    Some(true) => Outcome::Committed,
                    Some(false) => {
                        log.txns_failed += 1;
                        Outcome::NotCommitted
                    }
                    None => panic!(
                        "load generator: outcome of transaction {} unknown and the server did not come back",
                        txn.no
                    ),
                }
            }
        };
        match outcome {
            Outcome::Committed => {
                log.txns_committed += 1;
                for (id, key) in txn.ids.into_iter().zip(txn.keys) {
                    log.committed.push(Event {
                        id,
                        key,
                        txn: txn.no,
                        after_commit,
                    });
                }
                counter.store(log.committed.len() as u64, Ordering::Relaxed);
            }
            Outcome::NotCommitted => {
                if txn.rollback {
                    log.txns_rolled_back += 1;
                }
                log.rolled_back.extend(txn.ids);
            }
        }
        if !spec.pause.is_zero() {
            tokio::time::sleep(spec.pause).await;
        }
    }
    log.reconnects = opened.saturating_sub(1);
    log
}

/// The transaction failed; whether it committed is looked up in the
/// marker table (a server error before COMMIT aborted it, a lost
/// connection during COMMIT may or may not have).
struct TxnFailure;

/// Runs one transaction as a single simple-query round trip (so the load
/// is fast enough on a shared machine); returns the WAL insert position
/// read after its COMMIT. The values are generated here: uuids, `a<n>` keys
/// and numbers, nothing that needs quoting.
async fn run_txn(
    client: &tokio_postgres::Client,
    spec: &LoadSpec,
    txn: &Txn,
) -> Result<Option<Lsn>, TxnFailure> {
    let table = &spec.table;
    let rows: Vec<String> = txn
        .ids
        .iter()
        .zip(&txn.keys)
        .enumerate()
        .map(|(n, (id, key))| {
            format!(
                // The id in the payload too: a broker without headers
                // (Kinesis) still tells events apart.
                "('{id}', '{}', '{key}', 'E', '{{\"txn\": {}, \"n\": {n}, \"id\": \"{id}\"}}')",
                spec.agg, txn.no
            )
        })
        .collect();
    let quoted: Vec<String> = txn.ids.iter().map(|id| format!("'{id}'")).collect();
    // The outbox pattern: the rows leave the table in the same transaction.
    // synchronous_commit = off: no fsync wait per commit (the walsender
    // still sends only flushed WAL, and the faults here never crash the
    // server, so an acknowledged commit stays committed).
    let sql = format!(
        "SET synchronous_commit = off; BEGIN; INSERT INTO {table} VALUES {}; DELETE FROM {table} WHERE id IN ({}); \
         INSERT INTO {table}_marks VALUES ({}); {}; SELECT pg_current_wal_insert_lsn()::text",
        rows.join(", "),
        quoted.join(", "),
        txn.no,
        if txn.rollback { "ROLLBACK" } else { "COMMIT" }
    );
    let messages = client.simple_query(&sql).await.map_err(|_| TxnFailure)?;
    Ok(messages.iter().find_map(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(row) => {
            row.get(0).and_then(|text| text.parse::<Lsn>().ok())
        }
        _ => None,
    }))
}

/// Connects if needed, retrying every 100 ms until `deadline`.
async fn ensure_connected<'a>(
    client: &'a mut Option<tokio_postgres::Client>,
    url: &str,
    opened: &mut u64,
    deadline: Instant,
) -> Option<&'a tokio_postgres::Client> {
    if client
        .as_ref()
        .is_some_and(tokio_postgres::Client::is_closed)
    {
        *client = None;
    }
    while client.is_none() {
        if Instant::now() >= deadline {
            return None;
        }
        let attempt = tokio::time::timeout(
            Duration::from_secs(5),
            tokio_postgres::connect(url, tokio_postgres::NoTls),
        )
        .await;
        if let Ok(Ok((c, connection))) = attempt {
            tokio::spawn(async move {
                let _ = connection.await;
            });
            *opened += 1;
            *client = Some(c);
        } else {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    client.as_ref()
}

/// Whether transaction `no` committed, from its marker; `None` when the
/// server did not come back before `deadline`.
async fn resolve(
    client: &mut Option<tokio_postgres::Client>,
    spec: &LoadSpec,
    no: i64,
    opened: &mut u64,
    deadline: Instant,
) -> Option<bool> {
    loop {
        let c = ensure_connected(client, &spec.url, opened, deadline).await?;
        match c
            .query_opt(
                &format!("SELECT 1 FROM {}_marks WHERE txn = $1", spec.table),
                &[&no],
            )
            .await
        {
            Ok(row) => return Some(row.is_some()),
            Err(_) => *client = None,
        }
    }
}

/// Event id → commit end LSN of its transaction, from a probe slot
/// (pgoutput, created before the load) that decodes `publication`. Peeks,
/// so the probe does not move. The outbox table's first column is the id.
pub(crate) async fn probe_commit_ends(
    client: &tokio_postgres::Client,
    probe: &str,
    publication: &str,
) -> HashMap<String, Lsn> {
    let rows = client
        .query(
            "SELECT data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2)",
            &[&probe, &publication],
        )
        .await
        .expect("peek probe slot");
    let mut ends = HashMap::new();
    let mut pending: Vec<String> = Vec::new();
    for r in &rows {
        match decode_message(Bytes::from(r.get::<_, Vec<u8>>(0)), 1, false) {
            Ok(LogicalMessage::Insert(i)) => {
                if let Some(ColumnValue::Text(id)) = i.new.get(0) {
                    pending.push(String::from_utf8_lossy(id).into_owned());
                }
            }
            Ok(LogicalMessage::Commit(c)) => {
                for id in pending.drain(..) {
                    ends.insert(id, c.end_lsn);
                }
            }
            _ => {}
        }
    }
    ends
}

/// A fault during the run: what the slot had confirmed just before it, and
/// the WAL position once it was over. Only transactions committing inside
/// (confirmed_before, wal_after] may be delivered again because of it.
#[derive(Debug, Clone)]
pub(crate) struct Fault {
    /// What happened (for the summary).
    pub what: String,
    /// `confirmed_flush_lsn` sampled just before the fault (at most the
    /// position walrelay restarted from).
    pub confirmed_before: Lsn,
    /// `pg_current_wal_lsn()` sampled after the fault (at least the end of
    /// anything delivered before it).
    pub wal_after: Lsn,
}

/// The checker's findings, for the lead to quote.
#[derive(Debug, Clone)]
pub(crate) struct Summary {
    /// Committed events.
    pub events: usize,
    /// Committed transactions.
    pub txns: u64,
    /// Rolled-back events (on purpose or by a failure before COMMIT).
    pub rolled_back: usize,
    /// Records read.
    pub records: usize,
    /// Records that repeated an id already read.
    pub duplicates: usize,
    /// Faults injected.
    pub faults: usize,
    /// COMMITs resolved through the marker table.
    pub unknown_outcomes: u64,
    /// Generator reconnects.
    pub reconnects: u64,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "events={} txns={} rolled_back_events={} records={} duplicates={} faults={} unknown_commit_outcomes={} writer_reconnects={}",
            self.events,
            self.txns,
            self.rolled_back,
            self.records,
            self.duplicates,
            self.faults,
            self.unknown_outcomes,
            self.reconnects
        )
    }
}

/// Which repeated records the checker accepts.
#[derive(Clone, Copy)]
enum Repeats<'a> {
    /// At-least-once: a repeat needs a fault whose unconfirmed window holds
    /// the event's commit end (from `commit_ends`).
    InFaultWindows {
        commit_ends: &'a HashMap<String, Lsn>,
        faults: &'a [Fault],
    },
    /// Exactly-once: none, after `faults` faults.
    None { faults: usize },
}

/// Checks the at-least-once delivery contract; the error lists every
/// violation found (the first few of each kind).
pub(crate) fn check(
    log: &LoadLog,
    records: &[Record],
    commit_ends: &HashMap<String, Lsn>,
    faults: &[Fault],
) -> Result<Summary, String> {
    check_with(
        log,
        records,
        Repeats::InFaultWindows {
            commit_ends,
            faults,
        },
    )
}

/// Checks the exactly-once contract of a `read_committed` consumer: what
/// [`check`] checks, and no id read twice, whatever the `faults` (only
/// counted in the summary).
pub(crate) fn check_exactly_once(
    log: &LoadLog,
    records: &[Record],
    faults: &[Fault],
) -> Result<Summary, String> {
    check_with(
        log,
        records,
        Repeats::None {
            faults: faults.len(),
        },
    )
}

fn check_with(log: &LoadLog, records: &[Record], repeats: Repeats<'_>) -> Result<Summary, String> {
    let mut problems: Vec<String> = Vec::new();
    let mut note = |kind: &str, detail: String, counts: &mut HashMap<String, usize>| {
        let n = counts.entry(kind.to_string()).or_default();
        *n += 1;
        if *n <= 5 {
            problems.push(format!("{kind}: {detail}"));
        }
    };
    let mut counts: HashMap<String, usize> = HashMap::new();
    let committed_keys: HashMap<&str, &str> = log
        .committed
        .iter()
        .map(|e| (e.id.as_str(), e.key.as_str()))
        .collect();

    // Records per key in read order (one key is on one partition, and a
    // partition is read in offset order); first occurrences only.
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut per_key: HashMap<String, Vec<String>> = HashMap::new();
    for r in records {
        let Some(id) = r
            .header("id")
            .map(|v| String::from_utf8_lossy(v).into_owned())
        else {
            note(
                "record without id header",
                format!("p{} @{}", r.partition, r.offset),
                &mut counts,
            );
            continue;
        };
        let key = r
            .key
            .as_deref()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .unwrap_or_default();
        let n = seen.entry(id.clone()).or_default();
        *n += 1;
        if *n > 1 {
            continue;
        }
        if log.rolled_back.contains(&id) {
            note("rolled-back id published", id.clone(), &mut counts);
        } else if let Some(want) = committed_keys.get(id.as_str()) {
            if *want != key {
                note(
                    "wrong key",
                    format!("{id}: {key:?}, want {want:?}"),
                    &mut counts,
                );
            }
        } else {
            note("unknown id published", id.clone(), &mut counts);
        }
        per_key.entry(key).or_default().push(id);
    }
    for e in &log.committed {
        if !seen.contains_key(&e.id) {
            note(
                "committed id missing",
                format!("{} (key {})", e.id, e.key),
                &mut counts,
            );
        }
    }
    // Per key order: the first occurrences must be the committed ids of
    // that key in commit order.
    let mut want_per_key: HashMap<&str, Vec<&str>> = HashMap::new();
    for e in &log.committed {
        want_per_key.entry(&e.key).or_default().push(&e.id);
    }
    for (key, want) in &want_per_key {
        let got: Vec<&str> = per_key
            .get(*key)
            .map(|v| {
                v.iter()
                    .map(String::as_str)
                    .filter(|id| committed_keys.contains_key(id))
                    .collect()
            })
            .unwrap_or_default();
        if got != *want {
            let at = got.iter().zip(want.iter()).position(|(a, b)| a != b);
            note(
                "key out of commit order",
                format!(
                    "key {key}: {} records, want {}; first difference at {at:?}",
                    got.len(),
                    want.len()
                ),
                &mut counts,
            );
        }
    }
    // Duplicates: at-least-once, each extra copy needs a fault whose
    // unconfirmed window holds the event's commit; exactly-once, none.
    let mut duplicates = 0;
    for (id, n) in &seen {
        if *n < 2 {
            continue;
        }
        duplicates += n - 1;
        let (commit_ends, faults) = match repeats {
            Repeats::None { .. } => {
                let txn = log
                    .committed
                    .iter()
                    .find(|e| &e.id == id)
                    .map(|e| e.txn.to_string())
                    .unwrap_or_else(|| "?".to_string());
                note(
                    "duplicate (exactly-once)",
                    format!("{id} read {n} times (generator transaction {txn})"),
                    &mut counts,
                );
                continue;
            }
            Repeats::InFaultWindows {
                commit_ends,
                faults,
            } => (commit_ends, faults),
        };
        let Some(end) = commit_ends.get(id) else {
            note(
                "duplicate without a known commit lsn",
                id.clone(),
                &mut counts,
            );
            continue;
        };
        let windows = faults
            .iter()
            .filter(|f| f.confirmed_before < *end && *end <= f.wal_after)
            .count();
        if n - 1 > windows {
            note(
                "duplicate outside the unconfirmed window",
                format!("{id} read {n} times, commit end {end}, in {windows} fault windows"),
                &mut counts,
            );
        }
    }
    let summary = Summary {
        events: log.committed.len(),
        txns: log.txns_committed,
        rolled_back: log.rolled_back.len(),
        records: records.len(),
        duplicates,
        faults: match repeats {
            Repeats::InFaultWindows { faults, .. } => faults.len(),
            Repeats::None { faults } => faults,
        },
        unknown_outcomes: log.unknown_outcomes,
        reconnects: log.reconnects,
    };
    if problems.is_empty() {
        Ok(summary)
    } else {
        let totals: Vec<String> = counts.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        Err(format!(
            "{summary}\nviolations ({}):\n{}",
            totals.join(", "),
            problems.join("\n")
        ))
    }
}

/// What a consumer must read after [`sigkill_under_load`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum Delivered {
    /// Every committed event, a repeat only for a transaction the SIGKILL
    /// left unconfirmed ([`check`]).
    AtLeastOnce,
    /// Every committed event and none twice ([`check_exactly_once`]).
    ExactlyOnce,
}

/// SIGKILL under load: 3,000 events written 2 ms apart on `ob`'s table,
/// `relay` SIGKILLed once 1,000 are committed and started again from
/// `config`. `read` gets the new relay and the load's log once the load
/// is over and returns the records a consumer read (each with an `id`
/// header and, for the per-key order, its key); they are checked against
/// the log as `delivered` says, the relay's log tail shown on a failure.
/// Returns the restarted relay.
pub(crate) async fn sigkill_under_load(
    ob: &Outbox,
    relay: Relay,
    config: &str,
    delivered: Delivered,
    read: impl AsyncFnOnce(&mut Relay, &LoadLog) -> Vec<Record>,
) -> Relay {
    sigkill_under_load_sized(ob, relay, config, delivered, (3000, 1000), read).await
}

/// [`sigkill_under_load`] with `(events, kill_after)`: the events written,
/// and how many are committed when walrelay is killed (a smaller load for
/// an endpoint that slows down as it fills, moto's SQS).
pub(crate) async fn sigkill_under_load_sized(
    ob: &Outbox,
    mut relay: Relay,
    config: &str,
    delivered: Delivered,
    (events, kill_after): (u64, u64),
    read: impl AsyncFnOnce(&mut Relay, &LoadLog) -> Vec<Record>,
) -> Relay {
    let mut spec = LoadSpec::new(pg_url(), &ob.name, &ob.agg(""), events);
    spec.pause = Duration::from_millis(2);
    let load = Load::start(spec).await;
    assert!(load.wait_for(kill_after, Duration::from_secs(120)).await);
    let killed_at = ob.current_lsn().await;
    relay.kill();
    let mut relay = Relay::start(config);
    let log = load.finish().await;
    let records = read(&mut relay, &log).await;
    let checked = match delivered {
        Delivered::ExactlyOnce => check_exactly_once(&log, &records, &[]),
        Delivered::AtLeastOnce => {
            let ends: HashMap<String, Lsn> = log
                .committed
                .iter()
                .map(|e| (e.id.clone(), e.after_commit.unwrap_or(killed_at)))
                .collect();
            let faults = [Fault {
                what: "SIGKILL".to_owned(),
                confirmed_before: Lsn::ZERO,
                wal_after: ob.current_lsn().await,
            }];
            check(&log, &records, &ends, &faults)
        }
    };
    let summary = checked.unwrap_or_else(|e| panic!("{e}\n{}", tail(&relay.log(), 40)));
    if let Delivered::ExactlyOnce = delivered {
        assert_eq!(summary.duplicates, 0);
    }
    relay
}
