//! The fault suite: walrelay processes under SIGKILL, a Kafka outage, a
//! PostgreSQL restart, a black-holed network path, a hot-standby takeover
//! and a slot dropped behind its back, with the real servers.
//!
//! Each load scenario drives `common::load`'s generator (200 aggregates,
//! insert + delete per event, some transactions rolled back on purpose) and
//! ends with its checker: every committed id read back, no rolled-back id,
//! per key commit order once duplicates are dropped, duplicates only inside
//! the unconfirmed window of a fault (`confirmed_flush_lsn` before it,
//! `pg_current_wal_lsn()` after it, commit end LSNs from a probe slot).
//! Every scenario prints a `FAULT SUMMARY` line. Every wait is bounded.
//!
//! `WALRELAY_FAULT_KILLS` sets the SIGKILL count (default 5; the issue's
//! full run uses 20), `WALRELAY_FAULT_EVENTS` the events of that scenario
//! (default 50,000).

use crate::common;
use crate::common::metrics::lag_monitor_polled;

use std::time::{Duration, Instant};

use common::load::Load;
use common::proxy::Proxy;
use common::relay::{ids, tail, Outbox, Relay, WAIT};
use common::scene::{env_u64, Scene};
use common::{consume_on, create_topic_on, kafka_bootstrap, pg_url, PrivateKafka, PrivatePg};
use rand::Rng;

/// The walsender holding `slot`, if any.
async fn active_pid(client: &tokio_postgres::Client, slot: &str) -> Option<i32> {
    client
        .query_opt(
            "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1",
            &[&slot],
        )
        .await
        .expect("read slot")
        .and_then(|r| r.get(0))
}

/// 1. SIGKILL walrelay N times at random moments of a continuous load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_continuous_load() {
    let kills = env_u64("WALRELAY_FAULT_KILLS", 5);
    let events = env_u64("WALRELAY_FAULT_EVENTS", 50_000);
    let mut scene = Scene::new(
        "faults_sigkill",
        pg_url(),
        common::env().pg_port,
        kafka_bootstrap(),
    )
    .await;
    let mut relay = Relay::start(&scene.config("", ""));
    scene.ob.wait_active(&mut relay).await;
    scene.start_probe().await;
    let mut spec = scene.spec(events);
    // Stretch the load to about 1.5 s per kill (5.5 events per transaction
    // on average), so every kill falls inside it.
    let txns = (events as f64 / 5.5).max(1.0);
    spec.pause = Duration::from_secs_f64(kills as f64 * 1.5 / txns);
    let load = Load::start(spec).await;
    let mut rng = rand::thread_rng();
    let mut at: Vec<u64> = (0..kills)
        .map(|_| rng.gen_range(events / 20..=events * 19 / 20))
        .collect();
    at.sort_unstable();
    let started = Instant::now();
    for (i, threshold) in at.iter().enumerate() {
        load.wait_for(*threshold, Duration::from_secs(240)).await;
        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..300))).await;
        let before = scene.confirmed().await;
        let committed = load.committed();
        relay = relay.kill_and_restart();
        scene
            .fault(format!("sigkill {} at {committed} events", i + 1), before)
            .await;
        scene.ob.wait_active(&mut relay).await;
    }
    let during = !load.is_finished();
    let summary = scene.finish(load, events, &mut relay).await;
    eprintln!(
        "FAULT SUMMARY faults_sigkill: kills={kills} last kill during the load: {during}, {:.1} s of kills",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(summary.faults as u64, kills);
    relay.assert_running();
    scene.ob.finish(relay).await;
}

/// 2. Kafka stopped for 30 s mid-load: walrelay keeps running, the slot's
/// confirmed position stays frozen while the broker is down, everything
/// arrives once it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_outage_mid_load() {
    let kafka = tokio::task::spawn_blocking(PrivateKafka::start)
        .await
        .expect("start private kafka");
    let mut scene = Scene::new(
        "faults_kafka",
        pg_url(),
        common::env().pg_port,
        kafka.bootstrap(),
    )
    .await;
    let mut relay = Relay::start(&scene.config("", ""));
    scene.ob.wait_active(&mut relay).await;
    scene.start_probe().await;
    let events = 20_000;
    let mut spec = scene.spec(events);
    spec.pause = Duration::from_millis(5);
    let load = Load::start(spec).await;
    assert!(load.wait_for(3_000, WAIT).await, "the load did not start");
    let before = scene.confirmed().await;
    let kafka = tokio::task::spawn_blocking(move || {
        kafka.stop();
        kafka
    })
    .await
    .expect("stop kafka");
    // Delivery reports already on their way may still land.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let frozen = scene.confirmed().await;
    let written_before = load.committed();
    let outage = Instant::now();
    while outage.elapsed() < Duration::from_secs(28) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        relay.assert_running();
        let now = scene.confirmed().await;
        assert_eq!(
            now, frozen,
            "confirmed_flush_lsn moved from {frozen} to {now} while the broker was down"
        );
    }
    let written_during = load.committed() - written_before;
    let kafka = tokio::task::spawn_blocking(move || {
        kafka.start_again();
        kafka
    })
    .await
    .expect("start kafka again");
    scene
        .fault(format!("kafka down 30 s (frozen at {frozen})"), before)
        .await;
    let summary = scene.finish(load, events, &mut relay).await;
    eprintln!(
        "FAULT SUMMARY faults_kafka: {written_during} events committed while the broker was down, confirmed frozen at {frozen}; {summary}"
    );
    relay.assert_running();
    scene.ob.finish(relay).await;
    drop(kafka);
}

/// 3. PostgreSQL restarted (fast shutdown) mid-load: walrelay reconnects
/// with backoff and resumes where it was, even when the server brings the
/// slot back at an older position.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restart_mid_load() {
    let pg = tokio::task::spawn_blocking(PrivatePg::start)
        .await
        .expect("start private postgres");
    let mut scene = Scene::new("faults_pg_restart", pg.url(), pg.port(), kafka_bootstrap()).await;
    let mut relay = Relay::start(&scene.config("", ""));
    scene.ob.wait_active(&mut relay).await;
    scene.start_probe().await;
    let events = 20_000;
    let mut spec = scene.spec(events);
    spec.pause = Duration::from_millis(2);
    let load = Load::start(spec).await;
    assert!(load.wait_for(5_000, WAIT).await, "the load did not start");
    let before = scene.confirmed().await;
    let pg = tokio::task::spawn_blocking(move || {
        pg.stop();
        pg
    })
    .await
    .expect("stop postgres");
    // walrelay retries against the stopped server for a while.
    tokio::time::sleep(Duration::from_secs(3)).await;
    relay.assert_running();
    // PostgreSQL before 17 persists a logical slot's confirmed_flush_lsn
    // only when the slot is otherwise dirty, not at the shutdown
    // checkpoint, so after a restart the slot may come back at an older
    // position than it had confirmed. Read where it comes back before
    // walrelay can move it: hold walrelay while the server comes back.
    relay.signal("STOP");
    let pg = tokio::task::spawn_blocking(move || {
        pg.start_again();
        pg
    })
    .await
    .expect("start postgres again");
    let resumes = scene.confirmed().await;
    relay.signal("CONT");
    // walrelay remembers what Kafka acknowledged (at least `before`) and
    // asks the server to skip it: duplicates only from after `before`,
    // wherever the slot came back.
    scene
        .fault(
            format!("postgres fast restart (slot confirmed {before} before, {resumes} after)"),
            before,
        )
        .await;
    relay.assert_running();
    let summary = scene.finish(load, events, &mut relay).await;
    assert!(
        summary.reconnects >= 1,
        "the generator never saw the restart"
    );
    relay.assert_running();
    drop(relay);
    drop(scene);
    drop(pg);
}

/// 4. The network path to PostgreSQL silently black-holed (a proxy stops
/// forwarding, sockets stay open, and the connections of before never
/// recover, as after lost NAT state): walrelay notices within its receive
/// timeout, and streams again once the path is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn black_holed_postgres_path() {
    let pg = tokio::task::spawn_blocking(|| {
        let pg = PrivatePg::start();
        // The walsender of the lost connection must let the slot go.
        pg.conf(&["wal_sender_timeout=10s"]);
        pg
    })
    .await
    .expect("start private postgres");
    let proxy = Proxy::start(pg.port());
    let mut scene = Scene::new("faults_blackhole", pg.url(), pg.port(), kafka_bootstrap()).await;
    let receive_timeout = Duration::from_millis(5000);
    // Every walrelay connection (replication, catalog, lag monitor) goes
    // through the proxy.
    let config = scene.config_on(
        proxy.port(),
        &format!("receive_timeout_ms = {}", receive_timeout.as_millis()),
        "[lag]\npoll_interval_ms = 1000\n",
    );
    let mut relay = Relay::start(&config);
    scene.ob.wait_active(&mut relay).await;
    scene.start_probe().await;
    let events = 20_000;
    let mut spec = scene.spec(events);
    spec.pause = Duration::from_millis(3);
    let load = Load::start(spec).await;
    assert!(load.wait_for(4_000, WAIT).await, "the load did not start");
    let walsender = active_pid(&scene.ob.client, &scene.ob.name).await;
    let connections = proxy.connections();
    let monitor_before = lag_monitor_polled(&scene.ob.client).await;
    let before = scene.confirmed().await;
    proxy.black_hole();
    let cut = Instant::now();
    // walrelay notices the silence and opens a new connection (held by the
    // black hole like the old ones).
    let bound = receive_timeout + Duration::from_secs(15);
    while proxy.connections() == connections {
        relay.assert_running();
        assert!(
            cut.elapsed() < bound,
            "walrelay did not notice the dead path within {bound:?}:\n{}",
            tail(&relay.log(), 40)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let noticed = cut.elapsed();
    // Long enough for the server to drop the old walsender.
    while cut.elapsed() < Duration::from_secs(20) {
        relay.assert_running();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    proxy.restore(true);
    let restored = Instant::now();
    let deadline = restored + WAIT;
    loop {
        let pid = active_pid(&scene.ob.client, &scene.ob.name).await;
        if pid.is_some() && pid != walsender {
            break;
        }
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "walrelay did not stream again after the path came back:\n{}",
            tail(&relay.log(), 60)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let resumed = restored.elapsed();
    scene
        .fault("postgres path black-holed 20 s".to_string(), before)
        .await;
    let summary = scene.finish(load, events, &mut relay).await;
    // The slot lag monitor polls every second on its own SQL connection.
    // Its connection of before the cut never answers again; its bounded
    // poll (3 x postgres.connect_timeout_ms) gives up on it and reconnects.
    let monitor_deadline = Instant::now() + Duration::from_secs(90);
    let mut monitor_alive = lag_monitor_polled(&scene.ob.client).await;
    while !monitor_alive && Instant::now() < monitor_deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        monitor_alive = lag_monitor_polled(&scene.ob.client).await;
    }
    assert!(
        monitor_alive,
        "the slot lag monitor did not poll again after the path returned:\n{}",
        tail(&relay.log(), 40)
    );
    eprintln!(
        "FAULT SUMMARY faults_blackhole: slot lag monitor polling before the cut: {monitor_before}, again after the path returned: {monitor_alive}"
    );
    eprintln!(
        "FAULT SUMMARY faults_blackhole: new connection {:.1} s after the cut (receive timeout {:?}), streaming {:.1} s after the path returned; {summary}",
        noticed.as_secs_f64(),
        receive_timeout,
        resumed.as_secs_f64()
    );
    relay.assert_running();
    drop(relay);
    drop(proxy);
    drop(scene);
    drop(pg);
}

/// 5. Two walrelay processes on one slot: the second waits as a hot
/// standby and takes over once the first is SIGKILLed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_standby_takeover_under_load() {
    let mut scene = Scene::new(
        "faults_standby",
        pg_url(),
        common::env().pg_port,
        kafka_bootstrap(),
    )
    .await;
    let config = scene.config("", "");
    let mut primary = Relay::start(&config);
    scene.ob.wait_active(&mut primary).await;
    let walsender = active_pid(&scene.ob.client, &scene.ob.name).await;
    let mut standby = Relay::start(&config);
    scene.start_probe().await;
    let events = 20_000;
    let mut spec = scene.spec(events);
    spec.pause = Duration::from_millis(2);
    let load = Load::start(spec).await;
    assert!(load.wait_for(5_000, WAIT).await, "the load did not start");
    // The standby kept waiting: the slot is still the primary's.
    standby.assert_running();
    primary.assert_running();
    assert_eq!(
        active_pid(&scene.ob.client, &scene.ob.name).await,
        walsender,
        "the slot changed hands while the primary ran"
    );
    let before = scene.confirmed().await;
    primary.kill();
    let killed = Instant::now();
    // The issue asks for 10 s; slack for a loaded CI machine.
    let bound = Duration::from_secs(20);
    loop {
        let pid = active_pid(&scene.ob.client, &scene.ob.name).await;
        if pid.is_some() && pid != walsender {
            break;
        }
        standby.assert_running();
        assert!(
            killed.elapsed() < bound,
            "the standby did not take the slot over within {bound:?}:\n{}",
            tail(&standby.log(), 40)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let takeover = killed.elapsed();
    scene.fault("primary sigkilled".to_string(), before).await;
    let summary = scene.finish(load, events, &mut standby).await;
    eprintln!(
        "FAULT SUMMARY faults_standby: takeover {:.2} s after SIGKILL (slot active_pid changed); {summary}",
        takeover.as_secs_f64()
    );
    standby.assert_running();
    drop(primary);
    scene.ob.finish(standby).await;
}

/// Waits for walrelay to exit by itself; returns its exit code.
fn exit_code(relay: &mut Relay) -> i32 {
    let wait = Duration::from_secs(30);
    let status = tokio::task::block_in_place(|| relay.wait_exit(wait))
        .unwrap_or_else(|| panic!("walrelay still runs after {wait:?}:\n{}", relay.log()));
    status
        .code()
        .unwrap_or_else(|| panic!("walrelay ended by {status}:\n{}", relay.log()))
}

/// 6. The slot dropped behind walrelay's back (its walsender terminated,
/// then the slot dropped): walrelay stops with a clear error and does not
/// recreate it, neither at once nor when started again; only with
/// `replication.slot_missing = "create"` does it create a new one. The
/// invalidated slot is `operations::monitoring`'s
/// `invalidated_slot_stops_walrelay` (at start) and the lag monitor (while
/// running).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_slot_is_never_recreated_silently() {
    let ob = Outbox::new("faults_slot_dropped").await;
    let topic = ob.topic("");
    create_topic_on(&kafka_bootstrap(), &topic, 1).await;
    let config = ob.config(&kafka_bootstrap());
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    for n in 1..=3 {
        ob.insert(n, "", "k", "{}").await;
    }
    assert_eq!(
        consume_on(&kafka_bootstrap(), &topic, 3, WAIT).await.len(),
        3
    );

    // Terminate the walsender and drop the slot before walrelay's
    // reconnect takes it again.
    ob.drop_slot_behind_its_back().await;
    let code = exit_code(&mut relay);
    let log = relay.log();
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains(&format!("replication slot {} no longer exists", ob.name)),
        "the error must say the slot is gone:\n{log}"
    );
    assert!(
        !ob.slot_exists().await,
        "walrelay recreated the slot:\n{log}"
    );
    drop(relay);

    // Written while no slot exists: a recreated slot would skip it.
    ob.insert(4, "", "k", "{}").await;
    let mut relay = Relay::start(&config);
    let code = exit_code(&mut relay);
    let log = relay.log();
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains(&format!("replication slot {} is not usable", ob.name))
            && log.contains("records that it did")
            && log.contains("replication.slot_missing"),
        "the error must name the slot and the option:\n{log}"
    );
    assert!(
        !ob.slot_exists().await,
        "walrelay recreated the slot at start:\n{log}"
    );
    drop(relay);

    // The explicit option: a new slot (with a loud warning).
    let recreate = config.replace(
        "reconnect_max_ms = 1000\n",
        "reconnect_max_ms = 1000\nslot_missing = \"create\"\n",
    );

    // `walrelay check` tells the same before anyone starts walrelay: a
    // failure by default, a warning with the explicit option.
    let slot_row = |text: &str| {
        let config = walrelay::config::Config::from_toml(text, std::path::Path::new("faults.toml"))
            .expect("test config is valid");
        async move {
            let report = walrelay::check::run_check(&config).await;
            report
                .row(walrelay::check::SLOT)
                .unwrap_or_else(|| panic!("no slot row:\n{report}"))
                .clone()
        }
    };
    let row = slot_row(&config).await;
    assert_eq!(row.status, walrelay::check::CheckStatus::Fail, "{row:?}");
    assert!(
        row.detail.contains("was dropped")
            && row
                .fix
                .as_deref()
                .is_some_and(|f| f.contains("slot_missing")),
        "{row:?}"
    );
    let row = slot_row(&recreate).await;
    assert_eq!(row.status, walrelay::check::CheckStatus::Warn, "{row:?}");
    assert!(row.detail.contains("skipping every event"), "{row:?}");
    let mut relay = Relay::start(&recreate);
    ob.wait_active(&mut relay).await;
    ob.insert(5, "", "k", "{}").await;
    let records = consume_on(&kafka_bootstrap(), &topic, 4, WAIT).await;
    let got = ids(&records);
    assert!(
        got.contains(&common::relay::event_id(5)),
        "the recreated slot does not stream:\n{}",
        relay.log()
    );
    ob.finish(relay).await;
}

/// A connection that was accepted and then went silent (a stalled
/// middlebox, or a black hole that let the TCP handshake through) must not
/// stall walrelay for good: once new connections work, it streams again.
/// (tokio-postgres bounds only the TCP connect; walrelay bounds the whole
/// connection attempt and every catalog statement itself.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_sql_connection_does_not_stall_walrelay() {
    let pg = tokio::task::spawn_blocking(|| {
        let pg = PrivatePg::start();
        pg.conf(&["wal_sender_timeout=10s"]);
        pg
    })
    .await
    .expect("start private postgres");
    let proxy = Proxy::start(pg.port());
    let scene = Scene::new("faults_stalled", pg.url(), pg.port(), kafka_bootstrap()).await;
    let config = scene.config_on(
        proxy.port(),
        "receive_timeout_ms = 5000",
        "[lag]\npoll_interval_ms = 1000\n",
    );
    let mut relay = Relay::start(&config);
    scene.ob.wait_active(&mut relay).await;
    let walsender = active_pid(&scene.ob.client, &scene.ob.name).await;
    scene.ob.insert(1, "", "k", "{}").await;
    let topic = scene.ob.topic("");
    assert_eq!(consume_on(&scene.bootstrap, &topic, 1, WAIT).await.len(), 1);
    let connections = proxy.connections();
    proxy.black_hole();
    let cut = Instant::now();
    while proxy.connections() == connections {
        relay.assert_running();
        assert!(
            cut.elapsed() < Duration::from_secs(30),
            "walrelay did not notice the dead path"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // walrelay's new session is now waiting on a connection the black hole
    // accepted; that one never answers, later ones do.
    tokio::time::sleep(Duration::from_secs(12)).await;
    proxy.restore_new_only();
    scene.ob.insert(2, "", "k", "{}").await;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let pid = active_pid(&scene.ob.client, &scene.ob.name).await;
        if pid.is_some() && pid != walsender {
            break;
        }
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "walrelay did not stream again within 90 s of the path coming back:\n{}",
            tail(&relay.log(), 40)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(consume_on(&scene.bootstrap, &topic, 2, WAIT).await.len(), 2);
    drop(relay);
    drop(proxy);
    drop(scene);
    drop(pg);
}
