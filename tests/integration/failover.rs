//! A primary failover, on real servers: walrelay on a failover slot of the
//! primary (PostgreSQL 17+), a physical standby that synchronizes the slot,
//! the primary's `synchronized_standby_slots` naming the standby's slot, and
//! a host list naming both servers. Under a continuous outbox load the
//! standby is promoted and the old primary stopped (fast, or immediate as a
//! crash); walrelay must find the new primary by itself and resume from the
//! synchronized slot. And decoding on a standby (16+).
//!
//! The judge is the new primary's own history: the generator's marker table
//! (`<outbox>_marks`, one row per committed transaction, written in the same
//! transaction as its events) as the promoted server has it. Every event of
//! that history must be in Kafka, and no record in Kafka may be absent from
//! it (what `synchronized_standby_slots` exists to guarantee: the slot's
//! consumer never gets ahead of the standby). Per-key order holds and
//! duplicates come only from the unconfirmed window, which starts at the
//! synchronized slot's confirmed position on the standby just before the
//! promotion.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use walrelay::proto::Lsn;

use crate::common::load::{check, Fault, Load, LoadLog, LoadSpec};
use crate::common::metrics::{free_port, lag_monitor_polled, pipeline};
use crate::common::relay::{ids, Outbox, Relay};
use crate::common::{self, create_topic, kafka_bootstrap, read_to_end_blocking, PrivatePg, Record};

const WAIT: Duration = Duration::from_secs(60);
const DRAIN: Duration = Duration::from_secs(180);
const PARTITIONS: i32 = 3;

/// The walrelay configuration with a host list naming `ports` in order.
fn config_for_hosts(ob: &Outbox, ports: &[u16], replication: &str, metrics_port: u16) -> String {
    let hosts = vec!["127.0.0.1"; ports.len()].join(",");
    let ports_list: Vec<String> = ports.iter().map(u16::to_string).collect();
    ob.config_for(
        &kafka_bootstrap(),
        ports[0],
        "postgres",
        &format!("[metrics]\nlisten = \"127.0.0.1:{metrics_port}\"\n"),
    )
    .replace(
        &format!("host = \"127.0.0.1\"\nport = {}\n", ports[0]),
        &format!("host = \"{hosts}\"\nport = \"{}\"\n", ports_list.join(",")),
    )
    .replace(
        "reconnect_max_ms = 1000\n",
        &format!("reconnect_max_ms = 1000\n{replication}\n"),
    )
}

/// The slot as `client`'s server has it.
#[derive(Debug, Clone)]
struct SlotRow {
    active: bool,
    failover: bool,
    synced: bool,
    temporary: bool,
    confirmed: Option<Lsn>,
}

async fn slot_row(client: &tokio_postgres::Client, slot: &str) -> Option<SlotRow> {
    client
        .query_opt(
            // failover and synced exist from 17 on.
            "SELECT active, coalesce((to_jsonb(s) ->> 'failover')::bool, false), \
                    coalesce((to_jsonb(s) ->> 'synced')::bool, false), temporary, \
                    confirmed_flush_lsn::text \
             FROM pg_replication_slots s WHERE slot_name = $1",
            &[&slot],
        )
        .await
        .unwrap_or_else(|e| panic!("read pg_replication_slots: {e}"))
        .map(|r| SlotRow {
            active: r.get(0),
            failover: r.get(1),
            synced: r.get(2),
            temporary: r.get(3),
            confirmed: r
                .get::<_, Option<String>>(4)
                .map(|t| t.parse().expect("pg_lsn text")),
        })
}

/// Waits until `pred` holds for the slot on `client`'s server.
async fn wait_slot(
    client: &tokio_postgres::Client,
    slot: &str,
    what: &str,
    relay: &mut Relay,
    pred: impl Fn(&SlotRow) -> bool,
) -> SlotRow {
    let deadline = Instant::now() + WAIT;
    loop {
        let row = slot_row(client, slot).await;
        if let Some(row) = row.as_ref().filter(|r| pred(r)) {
            return row.clone();
        }
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "slot {slot} never became {what} within {WAIT:?}: {row:?}\n{}",
            tail(&relay.log(), 40)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn tail(log: &str, n: usize) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

async fn current_lsn(client: &tokio_postgres::Client) -> Lsn {
    let text: String = client
        .query_one("SELECT pg_current_wal_lsn()::text", &[])
        .await
        .expect("read pg_current_wal_lsn")
        .get(0);
    text.parse().expect("pg_lsn text")
}

/// Waits until walrelay's slot lag monitor polls `client`'s server and the
/// metrics at `metrics_port` show the slot active with a plausible lag.
async fn wait_lag_monitor(
    client: &tokio_postgres::Client,
    metrics_port: u16,
    relay: &mut Relay,
    server: &str,
) {
    let deadline = Instant::now() + WAIT;
    loop {
        let polled = lag_monitor_polled(client).await;
        let read = pipeline(metrics_port).await;
        let active = read
            .as_ref()
            .and_then(|p| p.slot.as_ref())
            .map(|s| s.active);
        let lag = read.as_ref().and_then(|p| p.confirmed_lag_bytes);
        if polled && active == Some(true) && lag.is_some_and(|l| (0..1_000_000_000).contains(&l)) {
            return;
        }
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "the lag monitor does not work on {server}: polled {polled}, \
             slot active {active:?}, confirmed lag {lag:?} bytes\n{}",
            tail(&relay.log(), 20)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OldPrimary {
    /// `pg_ctl stop -m fast`: the walsenders send everything to the
    /// standby before the server exits.
    Fast,
    /// `pg_ctl stop -m immediate`: as a crash; commits the standby has not
    /// received are not in the new primary's history.
    Immediate,
}

/// Switchover under load on PostgreSQL `major`; see the module comment.
async fn switchover_under_load(major: u32, old: OldPrimary) {
    let (primary, standby) = tokio::task::spawn_blocking(move || {
        let primary = PrivatePg::start_major(major);
        let standby = primary.start_standby();
        (primary, standby)
    })
    .await
    .expect("start primary and standby");
    let test = format!("failover_{major}_{old:?}").to_lowercase();
    let ob = Outbox::new_with(&test, primary.connect().await).await;
    let topic = ob.topic("");
    create_topic(&topic, PARTITIONS).await;
    let metrics_port = free_port();
    let config = config_for_hosts(
        &ob,
        &[primary.port(), standby.port()],
        "failover = true",
        metrics_port,
    );
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    let on_primary = slot_row(&ob.client, &ob.name).await.expect("slot exists");
    assert!(
        on_primary.failover,
        "the slot is not a failover slot: {on_primary:?}"
    );

    let url = format!(
        "host=127.0.0.1,127.0.0.1 port={},{} user=postgres dbname=postgres \
         target_session_attrs=read-write connect_timeout=2",
        primary.port(),
        standby.port()
    );
    // Unbounded: the load runs through the stop and the promotion, and is
    // stopped once the new primary has taken `AFTER` more events.
    const AFTER: u64 = 2_000;
    let mut spec = LoadSpec::new(url, &ob.name, &ob.agg(""), u64::MAX);
    spec.pause = Duration::from_millis(2);
    let load = Load::start(spec).await;
    assert!(load.wait_for(2_000, WAIT).await, "the load did not start");

    // The standby's copy of the slot: synchronized, persistent, and with a
    // position (a copy still temporary would be dropped at promotion).
    let replica = standby.connect().await;
    wait_slot(
        &replica,
        &ob.name,
        "synchronized on the standby",
        &mut relay,
        |r| r.synced && r.failover && !r.temporary && r.confirmed.is_some(),
    )
    .await;
    // At most where walrelay resumes on the new primary: the slot
    // synchronization only moves the standby's copy forward.
    let resume_floor = slot_row(&replica, &ob.name)
        .await
        .and_then(|r| r.confirmed)
        .expect("the synchronized slot has a position");
    drop(replica);

    let at_fault = load.committed();
    assert!(!load.is_finished(), "the load ended before the stop");
    let (primary, standby, promoted_at) = tokio::task::spawn_blocking(move || {
        match old {
            OldPrimary::Fast => primary.stop(),
            OldPrimary::Immediate => primary.stop_immediate(),
        }
        // From the promotion command: walrelay may reach the new primary
        // before `pg.sh promote` has seen it leave recovery.
        let promoted_at = Instant::now();
        standby.promote();
        (primary, standby, promoted_at)
    })
    .await
    .expect("stop the primary, promote the standby");
    let new_primary = standby.connect().await;
    let resumed = wait_slot(
        &new_primary,
        &ob.name,
        "active on the new primary",
        &mut relay,
        |r| r.active,
    )
    .await;
    let to_streaming = promoted_at.elapsed();
    // At least the end of anything walrelay was sent before the promotion:
    // the old primary sent nothing the standby had not flushed.
    let wal_after = current_lsn(&new_primary).await;
    let fault = Fault {
        what: format!("promotion after a {old:?} stop of the old primary"),
        confirmed_before: resume_floor,
        wal_after,
    };

    assert!(
        load.wait_for(at_fault + AFTER, WAIT).await,
        "the load did not go on on the new primary: {} events committed, {at_fault} before the stop",
        load.committed()
    );
    load.stop();
    let log = load.finish().await;
    // The new primary's history, from its own marker table.
    let history: HashSet<i64> = new_primary
        .query(&format!("SELECT txn FROM {}_marks", ob.name), &[])
        .await
        .expect("read the marker table on the new primary")
        .iter()
        .map(|r| r.get(0))
        .collect();
    let (log, lost_by_server) = within_history(log, &history);
    if old == OldPrimary::Fast {
        assert_eq!(
            lost_by_server, 0,
            "a fast shutdown sends every commit to the standby first"
        );
    }
    let want: HashSet<String> = log.committed.iter().map(|e| e.id.clone()).collect();
    let deadline = Instant::now() + DRAIN;
    let records: Vec<Record> = loop {
        let topic = topic.clone();
        let bootstrap = kafka_bootstrap();
        let records =
            tokio::task::spawn_blocking(move || read_to_end_blocking(&bootstrap, &topic, WAIT))
                .await
                .expect("reader thread");
        if want.is_subset(&ids(&records)) {
            break records;
        }
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "{} of {} events of the new primary's history read after {DRAIN:?}:\n{}",
            want.intersection(&ids(&records)).count(),
            want.len(),
            tail(&relay.log(), 60)
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    // Commit positions for the duplicate check: the generator's reading
    // right after each COMMIT (at or past the commit's end, before the next
    // transaction); a transaction whose COMMIT was cut by the stop and that
    // is in the history committed at the fault.
    let commit_ends: HashMap<String, Lsn> = log
        .committed
        .iter()
        .map(|e| (e.id.clone(), e.after_commit.unwrap_or(wal_after)))
        .collect();
    let summary =
        check(&log, &records, &commit_ends, std::slice::from_ref(&fault)).unwrap_or_else(|e| {
            panic!(
                "PostgreSQL {major}, {old:?} stop: delivery contract violated: {e}\n{}",
                tail(&relay.log(), 60)
            )
        });

    // The lag monitor and its metrics followed to the new primary.
    wait_lag_monitor(&new_primary, metrics_port, &mut relay, "the new primary").await;
    eprintln!(
        "FAILOVER SUMMARY PostgreSQL {major}, {old:?} stop: {summary}; \
         events committed before the stop {at_fault}; acknowledged commits not in the new \
         primary's history {lost_by_server}; promotion to streaming {:.2} s; \
         resumed at >= {resume_floor}, slot {resumed:?}",
        to_streaming.as_secs_f64()
    );
    relay.assert_running();
    drop(relay);
    drop(new_primary);
    drop(primary);
    drop(standby);
}

/// The generator's log restricted to `history` (the transactions the new
/// primary has): the others count as not committed, and must not be in
/// Kafka. Returns the restricted log and how many acknowledged events the
/// server lost.
fn within_history(log: LoadLog, history: &HashSet<i64>) -> (LoadLog, usize) {
    let mut kept = LoadLog {
        committed: Vec::new(),
        rolled_back: log.rolled_back,
        txns_committed: 0,
        txns_rolled_back: log.txns_rolled_back,
        txns_failed: log.txns_failed,
        unknown_outcomes: log.unknown_outcomes,
        reconnects: log.reconnects,
    };
    let mut lost = 0;
    let mut txns = HashSet::new();
    for e in log.committed {
        if history.contains(&e.txn) {
            txns.insert(e.txn);
            kept.committed.push(e);
        } else {
            lost += 1;
            kept.rolled_back.insert(e.id);
        }
    }
    kept.txns_committed = txns.len() as u64;
    (kept, lost)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switchover_under_load_17_fast() {
    switchover_under_load(17, OldPrimary::Fast).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switchover_under_load_17_immediate() {
    switchover_under_load(17, OldPrimary::Immediate).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switchover_under_load_18_fast() {
    switchover_under_load(18, OldPrimary::Fast).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switchover_under_load_18_immediate() {
    switchover_under_load(18, OldPrimary::Immediate).await;
}

/// A slot the standby does not synchronize (created without failover) is
/// missing on the new primary: walrelay stops with the fatal "slot missing"
/// error and creates no slot there, whatever `create_slot` says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsynchronized_slot_after_promotion_is_fatal() {
    let (primary, standby) = tokio::task::spawn_blocking(|| {
        let primary = PrivatePg::start_major(17);
        let standby = primary.start_standby();
        (primary, standby)
    })
    .await
    .expect("start primary and standby");
    let ob = Outbox::new_with("failover_unsynced", primary.connect().await).await;
    create_topic(&ob.topic(""), 1).await;
    let config = config_for_hosts(&ob, &[primary.port(), standby.port()], "", free_port());
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k", "{}").await;
    let records = common::consume(&ob.topic(""), 1, WAIT).await;
    assert_eq!(records.len(), 1, "{}", relay.log());
    let (primary, standby) = tokio::task::spawn_blocking(move || {
        primary.stop();
        standby.promote();
        (primary, standby)
    })
    .await
    .expect("stop the primary, promote the standby");
    let wait = Duration::from_secs(60);
    let status = tokio::task::block_in_place(|| relay.wait_exit(wait)).unwrap_or_else(|| {
        panic!(
            "walrelay still runs {wait:?} after the promotion:\n{}",
            relay.log()
        )
    });
    let log = relay.log();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains(&format!("replication slot {}", ob.name)),
        "the error must name the slot:\n{log}"
    );
    let new_primary = standby.connect().await;
    assert!(
        slot_row(&new_primary, &ob.name).await.is_none(),
        "walrelay created the slot on the new primary:\n{log}"
    );
    drop(primary);
}

/// Decoding on a physical standby (16+): the slot lives on the standby,
/// `hot_standby_feedback` keeps the primary from removing the catalog rows
/// it needs, and events written on the primary arrive in Kafka. The
/// publication is made on the primary (a standby is read-only).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decoding_on_a_standby() {
    for major in [16, 17, 18] {
        let (primary, standby) = tokio::task::spawn_blocking(move || {
            let primary = PrivatePg::start_major(major);
            let standby = primary.start_standby();
            (primary, standby)
        })
        .await
        .expect("start primary and standby");
        let ob = Outbox::new_with(
            &format!("standby_decoding_{major}"),
            primary.connect().await,
        )
        .await;
        ob.client
            .batch_execute(&format!("CREATE PUBLICATION {0} FOR TABLE {0}", ob.name))
            .await
            .expect("create the publication on the primary");
        let topic = ob.topic("");
        create_topic(&topic, 1).await;
        let metrics_port = free_port();
        let config = config_for_hosts(
            &ob,
            &[standby.port()],
            "publication_mode = \"disabled\"",
            metrics_port,
        )
        .replace(
            &format!("port = \"{}\"", standby.port()),
            &format!("port = {}", standby.port()),
        );
        let mut relay = Relay::start(&config);
        // A slot on a standby waits for a running-transactions record from
        // the primary; PostgreSQL 16's pg_log_standby_snapshot() writes one
        // now instead of at the next checkpoint.
        let replica = standby.connect().await;
        let deadline = Instant::now() + WAIT;
        // Active alone is not enough: the slot is active while its creation
        // waits for a consistent point, and what commits before that point
        // is not decoded. It has a confirmed position once it is created.
        while !slot_row(&replica, &ob.name)
            .await
            .is_some_and(|r| r.active && r.confirmed.is_some())
        {
            ob.client
                .batch_execute("SELECT pg_log_standby_snapshot()")
                .await
                .expect("log a standby snapshot");
            relay.assert_running();
            assert!(
                Instant::now() < deadline,
                "PostgreSQL {major}: walrelay is not streaming from the standby:\n{}",
                tail(&relay.log(), 40)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        for n in 1..=5 {
            ob.insert(n, "", &format!("k{n}"), &format!("{{\"n\": {n}}}"))
                .await;
        }
        let records = common::consume(&topic, 5, WAIT).await;
        let want: HashSet<String> = (1..=5).map(common::relay::event_id).collect();
        if ids(&records) != want {
            let replayed: String = replica
                .query_one("SELECT pg_last_wal_replay_lsn()::text", &[])
                .await
                .expect("read the replay position")
                .get(0);
            panic!(
                "PostgreSQL {major}: {} of 5 events; primary at {}, standby replayed {replayed}, \
                 slot {:?}\n{}",
                records.len(),
                current_lsn(&ob.client).await,
                slot_row(&replica, &ob.name).await,
                tail(&relay.log(), 40)
            );
        }
        // The standby's slot moves on, and the primary's WAL is the
        // position: the standby replays it.
        let after = current_lsn(&ob.client).await;
        let deadline = Instant::now() + WAIT;
        while slot_row(&replica, &ob.name)
            .await
            .and_then(|r| r.confirmed)
            .is_none_or(|c| c < after)
        {
            relay.assert_running();
            assert!(
                Instant::now() < deadline,
                "PostgreSQL {major}: the standby's slot is not confirmed past {after}"
            );
            ob.client
                .batch_execute("SELECT pg_log_standby_snapshot()")
                .await
                .expect("log a standby snapshot");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // The lag monitor works on the standby too (its WAL position is the
        // replayed one there).
        wait_lag_monitor(&replica, metrics_port, &mut relay, "the standby").await;
        relay.assert_running();
        drop(relay);
        drop(replica);
        drop(primary);
        drop(standby);
    }
}
