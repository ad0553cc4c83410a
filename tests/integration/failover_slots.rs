//! Failover slots (PostgreSQL 17+, `replication.failover` and Debezium's
//! `slot.failover`) against private clusters of each major: the slot
//! walrelay creates, turns on or copies from its snapshot is a failover slot
//! and events still reach Kafka; an older server is refused before any slot
//! exists; `walrelay check` warns about a primary that does not hold
//! walrelay back for its standbys, or has no standby synchronizing slots,
//! until both are in place; and after a promotion walrelay continues from
//! the standby's synchronized copy of the slot. Assertions are on what Kafka holds and on
//! `pg_replication_slots` (the primary's and the standby's).

use crate::common;

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use common::relay::{connect_files, event_id, read_until_ids, Outbox, Relay, WAIT};
use common::{kafka_bootstrap, PrivatePg};
use walrelay::check::{self, run_check, CheckReport, CheckStatus};
use walrelay::config::Config;

/// A private cluster of `major`, started off the async runtime.
async fn cluster(major: u32) -> PrivatePg {
    tokio::task::spawn_blocking(move || PrivatePg::start_major(major))
        .await
        .expect("start a private cluster")
}

/// The outbox's native configuration against `pg`, with `failover = true`
/// and any further `[replication]` lines.
fn failover_config(ob: &Outbox, pg: &PrivatePg, replication: &str) -> String {
    let config = ob.config_for(
        &kafka_bootstrap(),
        pg.port(),
        "postgres",
        "[metrics]\nlisten = \"127.0.0.1:0\"\n",
    );
    assert!(config.contains("[replication]\n"), "{config}");
    config.replacen(
        "[replication]\n",
        &format!("[replication]\nfailover = true\n{replication}"),
        1,
    )
}

/// `pg_replication_slots.failover` and `.synced` of `slot` on the server
/// `client` is connected to; `None` when the slot does not exist there.
async fn slot_flags(client: &tokio_postgres::Client, slot: &str) -> Option<(bool, bool)> {
    client
        .query_opt(
            "SELECT failover, synced FROM pg_replication_slots WHERE slot_name = $1",
            &[&slot],
        )
        .await
        .expect("read pg_replication_slots")
        .map(|r| (r.get(0), r.get(1)))
}

/// Every slot of a cluster, by name.
async fn slot_names(client: &tokio_postgres::Client) -> Vec<String> {
    client
        .query(
            "SELECT slot_name::text FROM pg_replication_slots ORDER BY 1",
            &[],
        )
        .await
        .expect("read pg_replication_slots")
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Reads the outbox's topic until it holds events `ids`.
async fn delivered(ob: &Outbox, ids: &[u64], relay: &mut Relay) {
    let want: HashSet<String> = ids.iter().map(|&n| event_id(n)).collect();
    let records = read_until_ids(&ob.topic(""), &want, relay).await;
    assert!(
        want.is_subset(&common::relay::ids(&records)),
        "{}",
        common::describe(&records)
    );
}

/// (a) `failover = true` on 17 creates a failover slot (the slot is new:
/// `CREATE_REPLICATION_SLOT ... (FAILOVER)`), on 18 turns failover on for a
/// plain slot that already exists (`ALTER_REPLICATION_SLOT`); on both an
/// event then reaches Kafka.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_true_gives_a_failover_slot_on_17_and_18() {
    for major in [17, 18] {
        let pg = cluster(major).await;
        let ob = Outbox::new_with(&format!("failover_{major}"), pg.connect().await).await;
        if major == 18 {
            ob.client
                .execute(
                    "SELECT pg_create_logical_replication_slot($1, 'pgoutput')",
                    &[&ob.name],
                )
                .await
                .expect("a plain slot");
            assert_eq!(slot_flags(&ob.client, &ob.name).await, Some((false, false)));
        }
        let mut relay = Relay::start(&failover_config(&ob, &pg, ""));
        ob.wait_active(&mut relay).await;
        assert_eq!(
            slot_flags(&ob.client, &ob.name).await,
            Some((true, false)),
            "PostgreSQL {major}: not a failover slot:\n{}",
            relay.log()
        );
        ob.insert(1, "", "k1", r#"{"n": 1}"#).await;
        delivered(&ob, &[1], &mut relay).await;
        ob.finish(relay).await;
    }
}

/// (b) The Debezium connector-file form with `slot.failover=true` on 17,
/// with Debezium's default `snapshot.mode=initial`: the slot comes from the
/// snapshot's temporary slot (a copy, which PostgreSQL never makes a
/// failover slot) and is a failover slot all the same; the snapshot row and
/// a streamed one reach Kafka.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debezium_slot_failover_gives_a_failover_slot() {
    let pg = cluster(17).await;
    let ob = Outbox::new_with("failover_dbz", pg.connect().await).await;
    ob.insert(1, "", "k1", r#"{"n": 1}"#).await;
    let scratch = tempfile::tempdir().expect("scratch directory");
    let (worker, connector) = debezium_files(scratch.path(), &ob, &pg, "slot.failover=true\n");
    let mut relay = Relay::start_args(
        &[
            std::ffi::OsStr::new("--metrics-addr"),
            std::ffi::OsStr::new("127.0.0.1:0"),
            std::ffi::OsStr::new("connect-standalone"),
            worker.as_os_str(),
            connector.as_os_str(),
        ],
        scratch.path().join("walrelay.log"),
    );
    ob.wait_active(&mut relay).await;
    ob.insert(2, "", "k2", r#"{"n": 2}"#).await;
    delivered(&ob, &[1, 2], &mut relay).await;
    assert_eq!(
        slot_flags(&ob.client, &ob.name).await,
        Some((true, false)),
        "not a failover slot:\n{}",
        relay.log()
    );
    ob.finish(relay).await;
}

/// The Connect files for `ob` on `pg` and the shared broker, with `extra`
/// connector lines.
fn debezium_files(
    dir: &Path,
    ob: &Outbox,
    pg: &PrivatePg,
    extra: &str,
) -> (std::path::PathBuf, std::path::PathBuf) {
    connect_files(dir, ob, pg.port(), &kafka_bootstrap(), "", extra)
}

/// Waits for `relay` to exit by itself; returns its exit code.
fn exit_code(relay: &mut Relay) -> Option<i32> {
    let status = tokio::task::block_in_place(|| relay.wait_exit(WAIT))
        .unwrap_or_else(|| panic!("walrelay still runs after {WAIT:?}:\n{}", relay.log()));
    status.code()
}

/// (c) `failover = true` (and `slot.failover=true`) on PostgreSQL 16:
/// walrelay refuses to start, naming the key and the server's version, and
/// no slot exists afterwards (no plain slot in place of a failover one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_on_16_is_refused_and_creates_no_slot() {
    let pg = cluster(16).await;
    let ob = Outbox::new_with("failover_16", pg.connect().await).await;

    let mut relay = Relay::start(&failover_config(&ob, &pg, ""));
    assert_eq!(exit_code(&mut relay), Some(1), "{}", relay.log());
    let log = relay.log();
    assert!(
        log.contains("replication.failover") && log.contains("PostgreSQL 16"),
        "the refusal must name the key and the version:\n{log}"
    );
    assert_eq!(slot_names(&ob.client).await, Vec::<String>::new());

    let scratch = tempfile::tempdir().expect("scratch directory");
    let (worker, connector) = debezium_files(
        scratch.path(),
        &ob,
        &pg,
        "slot.failover=true\nsnapshot.mode=no_data\n",
    );
    let mut relay = Relay::start_args(
        &[
            std::ffi::OsStr::new("--metrics-addr"),
            std::ffi::OsStr::new("127.0.0.1:0"),
            std::ffi::OsStr::new("connect-standalone"),
            worker.as_os_str(),
            connector.as_os_str(),
        ],
        scratch.path().join("walrelay.log"),
    );
    assert_eq!(exit_code(&mut relay), Some(1), "{}", relay.log());
    let log = relay.log();
    assert!(
        log.contains("slot.failover") && log.contains("PostgreSQL 16"),
        "the refusal must name the Debezium key and the version:\n{log}"
    );
    assert_eq!(slot_names(&ob.client).await, Vec::<String>::new());

    // `walrelay check` fails the same way, as an error.
    let config = Config::from_toml(&failover_config(&ob, &pg, ""), Path::new("failover.toml"))
        .expect("valid config");
    let report = run_check(&config).await;
    let row = report_row(&report, check::FAILOVER_SLOT);
    assert_eq!(row.status, CheckStatus::Fail, "{report}");
    assert!(
        row.detail.contains("replication.failover") && row.detail.contains("PostgreSQL 16"),
        "{report}"
    );
    assert!(!report.passed(), "{report}");
    assert_eq!(slot_names(&ob.client).await, Vec::<String>::new());
    ob.finish_exited(relay).await;
}

/// The row called `name`; panics with the whole table when absent.
fn report_row<'a>(report: &'a CheckReport, name: &str) -> &'a check::CheckRow {
    report
        .row(name)
        .unwrap_or_else(|| panic!("no row {name}:\n{report}"))
}

/// (d) `walrelay check` with `failover = true` on 17: with no standby it
/// warns that `synchronized_standby_slots` is empty and that no standby
/// synchronizes slots (each with the fix and the server to apply it on);
/// once a standby streams through the slot listed there and its slot sync
/// worker is connected, both rows pass, and the standby holds a synchronized
/// copy of the failover slot walrelay created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_warns_until_a_standby_syncs_the_slot() {
    let pg = cluster(17).await;
    let ob = Outbox::new_with("failover_check", pg.connect().await).await;
    let text = failover_config(&ob, &pg, "");
    let config = Config::from_toml(&text, Path::new("failover.toml")).expect("valid config");

    let report = run_check(&config).await;
    assert!(report.passed(), "{report}");
    let slot = report_row(&report, check::FAILOVER_SLOT);
    assert_eq!(slot.status, CheckStatus::Pass, "{report}");
    let standby_slots = report_row(&report, check::STANDBY_SLOTS);
    assert_eq!(standby_slots.status, CheckStatus::Warn, "{report}");
    assert!(standby_slots.detail.contains("empty"), "{report}");
    assert!(
        standby_slots
            .fix
            .as_deref()
            .is_some_and(|f| f.contains("on the primary")),
        "{report}"
    );
    let sync = report_row(&report, check::SLOT_SYNC);
    assert_eq!(sync.status, CheckStatus::Warn, "{report}");
    assert!(
        sync.fix
            .as_deref()
            .is_some_and(|f| f.contains("on each standby") && f.contains("sync_replication_slots")),
        "{report}"
    );
    // The check created nothing.
    assert_eq!(slot_names(&ob.client).await, Vec::<String>::new());

    let mut relay = Relay::start(&text);
    ob.wait_active(&mut relay).await;
    assert_eq!(slot_flags(&ob.client, &ob.name).await, Some((true, false)));

    let (pg, standby) = tokio::task::spawn_blocking(move || {
        let standby = pg.start_standby();
        (pg, standby)
    })
    .await
    .expect("start a standby");
    let listed: String = ob
        .client
        .query_one("SHOW synchronized_standby_slots", &[])
        .await
        .expect("read synchronized_standby_slots")
        .get(0);
    assert!(!listed.is_empty(), "the harness did not list the standby");

    // Events flow with the primary holding them for the standby.
    ob.insert(1, "", "k1", r#"{"n": 1}"#).await;
    delivered(&ob, &[1], &mut relay).await;

    let replica = standby.connect().await;
    let deadline = Instant::now() + WAIT;
    let report = loop {
        let report = run_check(&config).await;
        let synced = slot_flags(&replica, &ob.name).await;
        let passing = [check::STANDBY_SLOTS, check::SLOT_SYNC].iter().all(|name| {
            report
                .row(name)
                .is_some_and(|r| r.status == CheckStatus::Pass)
        });
        if passing && synced == Some((true, true)) {
            break report;
        }
        assert!(
            Instant::now() < deadline,
            "after {WAIT:?}: the standby's copy is {synced:?} and the check says:\n{report}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(report.passed(), "{report}");
    assert!(
        report_row(&report, check::FAILOVER_SLOT)
            .detail
            .contains("failover true"),
        "{report}"
    );
    drop(replica);
    ob.finish(relay).await;
    tokio::task::spawn_blocking(move || {
        drop(standby);
        drop(pg);
    })
    .await
    .expect("remove the clusters");
}

/// A failover slot survives a failover: walrelay delivers through the
/// primary while a standby synchronizes the slot, the primary dies, a
/// walrelay pointed at the standby waits (the copy is unusable until the
/// promotion) without stopping, and once the standby is promoted continues
/// from the synchronized copy: what was written on either server reaches
/// Kafka.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_synchronized_slot_continues_after_a_promotion() {
    let pg = cluster(17).await;
    let pg = tokio::task::spawn_blocking(move || {
        let standby = pg.start_standby();
        (pg, standby)
    })
    .await
    .expect("start a standby");
    let (primary, standby) = pg;
    let ob = Outbox::new_with("failover_promote", primary.connect().await).await;
    let mut relay = Relay::start(&failover_config(&ob, &primary, ""));
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k1", r#"{"n": 1}"#).await;
    delivered(&ob, &[1], &mut relay).await;
    // The standby's copy must be usable (persistent) and have caught up
    // with what walrelay confirmed before the primary goes.
    let confirmed = ob.slot_confirmed().await.expect("the slot exists");
    let replica = standby.connect().await;
    let deadline = Instant::now() + WAIT;
    loop {
        let row = replica
            .query_opt(
                "SELECT synced AND failover AND NOT temporary, confirmed_flush_lsn::text \
                 FROM pg_replication_slots WHERE slot_name = $1",
                &[&ob.name],
            )
            .await
            .expect("read the standby's slots");
        let ready = row.is_some_and(|r| {
            r.get::<_, bool>(0)
                && r.get::<_, Option<String>>(1)
                    .and_then(|l| l.parse::<walrelay::proto::Lsn>().ok())
                    .is_some_and(|l| l >= confirmed)
        });
        if ready {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the standby has no caught-up copy of {} after {WAIT:?}",
            ob.name
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(replica);
    drop(relay);
    let (primary, standby) = tokio::task::spawn_blocking(move || {
        primary.stop_immediate();
        (primary, standby)
    })
    .await
    .expect("stop the primary");
    drop(primary);

    // Reached before its promotion, the standby's copy cannot be decoded
    // from yet: walrelay waits and retries instead of stopping.
    let ob = Outbox {
        client: standby.connect().await,
        name: ob.name.clone(),
    };
    let mut relay = Relay::start(&failover_config(&ob, &standby, ""));
    tokio::time::sleep(Duration::from_secs(3)).await;
    relay.assert_running();
    assert!(
        !ob.slot_active().await,
        "decoding from a standby's synced slot"
    );
    let standby = tokio::task::spawn_blocking(move || {
        standby.promote();
        standby
    })
    .await
    .expect("promote the standby");
    assert_eq!(
        slot_flags(&ob.client, &ob.name).await.map(|f| f.0),
        Some(true)
    );
    ob.wait_active(&mut relay).await;
    ob.insert(2, "", "k2", r#"{"n": 2}"#).await;
    delivered(&ob, &[1, 2], &mut relay).await;
    ob.finish(relay).await;
    tokio::task::spawn_blocking(move || drop(standby))
        .await
        .expect("remove the cluster");
}
