//! `postgres.host` as a list (libpq's rules): walrelay tries the hosts in
//! order and stays on the first that connects and passes
//! `target_session_attrs`, for the replication and the catalog connection
//! alike; `walrelay check` says what each host is. Against the shared
//! server, with closed loopback ports as the hosts that are down.

use crate::common;

use std::collections::HashSet;
use std::net::TcpListener;
use std::path::Path;
use std::time::Duration;

use common::relay::{event_id, read_until_ids, Outbox, Relay, WAIT};
use common::{consume, env, kafka_bootstrap, PrivatePg};
use walrelay::check::{self, run_check, CheckStatus};
use walrelay::config::Config;
use walrelay::postgres::catalog;
use walrelay::postgres::replication::{ConnectParams, ReplicationConnection, ReplicationError};
use walrelay::retry::Retry;

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
}

/// The outbox's test configuration with `[postgres]`'s host and port
/// replaced by `hosts` (TOML lines).
fn config_with_hosts(ob: &Outbox, hosts: &str) -> String {
    config_with_hosts_on(ob, env().pg_port, hosts)
}

/// [`config_with_hosts`] for an outbox on the cluster at `port`.
fn config_with_hosts_on(ob: &Outbox, port: u16, hosts: &str) -> String {
    let text = ob.config_for(
        &kafka_bootstrap(),
        port,
        "postgres",
        "[metrics]\nlisten = \"127.0.0.1:0\"\n",
    );
    let single = format!("host = \"127.0.0.1\"\nport = {port}\n");
    assert!(
        text.contains(&single),
        "the harness's [postgres] changed:\n{text}"
    );
    text.replacen(&single, &format!("{hosts}\n"), 1)
}

fn parse(text: &str) -> Config {
    Config::from_toml(text, Path::new("hosts.toml")).expect("test config is valid")
}

/// The first host is down (a closed port): walrelay skips it, streams from
/// the second, and the event reaches Kafka.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skips_a_host_that_is_down_and_delivers() {
    let ob = Outbox::new("hosts_down_first").await;
    let closed = closed_port();
    let text = config_with_hosts(
        &ob,
        &format!(
            "host = \"127.0.0.1,127.0.0.1\"\nport = \"{closed},{}\"\nconnect_timeout_ms = 3000",
            env().pg_port
        ),
    );
    // Several hosts and no target_session_attrs: read-write, which the
    // shared primary is.
    assert_eq!(
        parse(&text).postgres.effective_target_session_attrs(),
        walrelay::postgres::config::TargetSessionAttrs::ReadWrite
    );
    let mut relay = Relay::start(&text);
    ob.wait_active(&mut relay).await;
    assert!(ob.slot_active().await, "walrelay holds the slot");
    ob.insert(1, "", "k1", r#"{"n": 1}"#).await;
    let records = consume(&ob.topic(""), 1, Duration::from_secs(30)).await;
    assert_eq!(records.len(), 1, "{}", common::describe(&records));
    assert_eq!(records[0].key.as_deref(), Some(&b"k1"[..]));
    assert_eq!(records[0].value.as_deref(), Some(&br#"{"n": 1}"#[..]));
    ob.finish(relay).await;
}

/// `target_session_attrs = "standby"` with only the primary (and a host
/// that is down) listed: both connections refuse, naming every host and
/// why; nothing is created on the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standby_against_the_primary_only_names_every_host() {
    let ob = Outbox::new("hosts_standby").await;
    let closed = closed_port();
    let port = env().pg_port;
    let text = config_with_hosts(
        &ob,
        &format!(
            "host = \"127.0.0.1,127.0.0.1\"\nport = [{closed}, {port}]\n\
             target_session_attrs = \"standby\"\nconnect_timeout_ms = 3000"
        ),
    );
    let config = parse(&text);
    let params = ConnectParams::from_config(&config.postgres);

    let expect_named = |text: &str| {
        assert!(
            text.contains("target_session_attrs = standby"),
            "target not named: {text}"
        );
        assert!(
            text.contains(&format!("127.0.0.1:{closed}: ")),
            "down host not named: {text}"
        );
        assert!(
            text.contains(&format!(
                "127.0.0.1:{port}: server is not in hot standby mode"
            )),
            "primary not named: {text}"
        );
    };
    let err = match ReplicationConnection::connect(&params).await {
        Ok(_) => panic!("the replication connection accepted the primary as a standby"),
        Err(e) => e,
    };
    expect_named(&walrelay::chain::DisplayChain(&err).to_string());
    // A failover in progress looks like this: walrelay retries.
    let err = Retry::<ReplicationError>::from(err);
    assert!(matches!(err, Retry::Transient(_)), "{err}");
    // walrelay check names the test as what to fix.
    let report = run_check(&config).await;
    for name in [check::POSTGRES_CONNECTION, check::REPLICATION_CONNECTION] {
        let row = report.row(name).expect("connection rows");
        assert_eq!(row.status, CheckStatus::Fail, "{report}");
        expect_named(&row.detail);
        assert!(
            row.fix
                .as_deref()
                .is_some_and(|f| f.contains("postgres.target_session_attrs = standby")),
            "{report}"
        );
    }
    let err = match catalog::connect(&params).await {
        Ok(_) => panic!("the catalog connection accepted the primary as a standby"),
        Err(e) => e,
    };
    expect_named(&walrelay::chain::DisplayChain(&err).to_string());

    // walrelay itself keeps retrying and creates nothing.
    let mut relay = Relay::start(&text);
    tokio::time::sleep(Duration::from_secs(3)).await;
    relay.assert_running();
    assert!(!ob.slot_exists().await, "a slot was created on the primary");
    let publication = ob
        .client
        .query_opt(
            "SELECT 1 FROM pg_publication WHERE pubname = $1",
            &[&ob.name],
        )
        .await
        .expect("read pg_publication");
    assert!(publication.is_none(), "a publication was created");
    drop(relay);
    ob.client
        .batch_execute(&format!("DROP TABLE {}", ob.name))
        .await
        .expect("drop the test's table");
}

/// `walrelay check` with two hosts: which one it is on, and what each is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_describes_each_host() {
    let ob = Outbox::new("hosts_check").await;
    let closed = closed_port();
    let port = env().pg_port;
    let config = parse(&config_with_hosts(
        &ob,
        &format!(
            "host = \"127.0.0.1,127.0.0.1\"\nport = \"{closed},{port}\"\nconnect_timeout_ms = 3000"
        ),
    ));
    let report = run_check(&config).await;

    let row = |name: &str| {
        report
            .row(name)
            .unwrap_or_else(|| panic!("no row {name}:\n{report}"))
            .clone()
    };
    let hosts = row(check::POSTGRES_HOSTS);
    assert_eq!(hosts.status, CheckStatus::Warn, "{report}");
    assert!(
        hosts
            .detail
            .starts_with(&format!("127.0.0.1:{closed} unreachable (")),
        "{report}"
    );
    assert!(
        hosts
            .detail
            .ends_with(&format!("127.0.0.1:{port} primary (walrelay's choice)")),
        "{report}"
    );
    assert!(
        hosts
            .fix
            .as_deref()
            .is_some_and(|f| f.contains(&format!("127.0.0.1:{closed}"))),
        "{report}"
    );
    let sql = row(check::POSTGRES_CONNECTION);
    assert_eq!(sql.status, CheckStatus::Pass, "{report}");
    assert!(
        sql.detail.starts_with(&format!(
            "127.0.0.1:{port} (target_session_attrs = read-write) database postgres"
        )),
        "{report}"
    );
    let replication = row(check::REPLICATION_CONNECTION);
    assert_eq!(replication.status, CheckStatus::Pass, "{report}");
    assert!(
        replication
            .detail
            .starts_with(&format!("127.0.0.1:{port} IDENTIFY_SYSTEM")),
        "{report}"
    );
    // The same list with the primary first: every host is reachable.
    let config = parse(&config_with_hosts(
        &ob,
        &format!("host = \"127.0.0.1,localhost\"\nport = {port}\nconnect_timeout_ms = 3000"),
    ));
    let report = run_check(&config).await;
    let hosts = report.row(check::POSTGRES_HOSTS).expect("hosts row");
    assert_eq!(hosts.status, CheckStatus::Pass, "{report}");
    assert_eq!(
        hosts.detail,
        format!("127.0.0.1:{port} primary (walrelay's choice), localhost:{port} primary"),
        "{report}"
    );
    ob.client
        .batch_execute(&format!("DROP TABLE {}", ob.name))
        .await
        .expect("drop the test's table");
}

/// A real standby listed first and the primary second, with the default
/// for several hosts (read-write): walrelay skips the standby, streams
/// from the primary, and the event reaches Kafka; the slot is the
/// primary's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standby_listed_first_is_skipped_for_the_primary() {
    let (primary, standby) = tokio::task::spawn_blocking(|| {
        let primary = PrivatePg::start();
        let standby = primary.start_standby();
        (primary, standby)
    })
    .await
    .expect("start a primary and its standby");
    let ob = Outbox::new_with("hosts_standby_first", primary.connect().await).await;
    let text = config_with_hosts_on(
        &ob,
        primary.port(),
        &format!(
            "host = \"127.0.0.1,127.0.0.1\"\nport = [{}, {}]",
            standby.port(),
            primary.port()
        ),
    );
    let config = parse(&text);
    let params = ConnectParams::from_config(&config.postgres);
    // Both connections choose the primary.
    let conn = ReplicationConnection::connect(&params)
        .await
        .expect("replication connection");
    assert_eq!(conn.endpoint().port, primary.port());
    drop(conn);
    let (client, on) = catalog::connect_with_host(&params)
        .await
        .expect("catalog connection");
    assert_eq!(on.port, primary.port());
    let in_recovery: bool = client
        .query_one("SELECT pg_is_in_recovery()", &[])
        .await
        .expect("ask the chosen server")
        .get(0);
    assert!(!in_recovery, "the catalog connection is on a standby");

    let mut relay = Relay::start(&text);
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k1", r#"{"n": 1}"#).await;
    let records = consume(&ob.topic(""), 1, Duration::from_secs(30)).await;
    assert_eq!(records.len(), 1, "{}", common::describe(&records));
    assert_eq!(records[0].value.as_deref(), Some(&br#"{"n": 1}"#[..]));
    // The standby has no logical slot of walrelay's (it never wrote there).
    let on_standby: i64 = standby
        .connect()
        .await
        .query_one(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1",
            &[&ob.name],
        )
        .await
        .expect("read the standby's slots")
        .get(0);
    assert_eq!(on_standby, 0);

    // walrelay check: the standby is named as one, the primary chosen.
    let report = run_check(&config).await;
    let hosts = report.row(check::POSTGRES_HOSTS).expect("hosts row");
    assert_eq!(
        hosts.detail,
        format!(
            "127.0.0.1:{} standby, 127.0.0.1:{} primary (walrelay's choice)",
            standby.port(),
            primary.port()
        ),
        "{report}"
    );
    ob.finish(relay).await;
}

/// The failover issue 13 asks for: walrelay streams from the primary of
/// `"primary,standby"` (PostgreSQL 17, a failover slot the standby
/// synchronizes); the primary crashes and the standby is promoted; walrelay
/// finds the new primary by itself and delivers what is written there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_the_promoted_standby_after_a_failover() {
    let (primary, standby) = tokio::task::spawn_blocking(|| {
        let primary = PrivatePg::start_major(17);
        let standby = primary.start_standby();
        (primary, standby)
    })
    .await
    .expect("start a primary and its standby");
    let ob = Outbox::new_with("hosts_failover", primary.connect().await).await;
    // A failover slot (walrelay creates plain ones), on a publication that
    // exists before it.
    ob.client
        .batch_execute(&format!("CREATE PUBLICATION {0} FOR TABLE {0}", ob.name))
        .await
        .expect("create the publication");
    ob.client
        .execute(
            "SELECT pg_create_logical_replication_slot($1, 'pgoutput', false, false, true)",
            &[&ob.name],
        )
        .await
        .expect("create a failover slot");
    let text = config_with_hosts_on(
        &ob,
        primary.port(),
        &format!(
            "host = \"127.0.0.1,127.0.0.1\"\nport = [{}, {}]\nconnect_timeout_ms = 3000",
            primary.port(),
            standby.port()
        ),
    );
    let mut relay = Relay::start(&text);
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k1", r#"{"n": 1}"#).await;
    let first: HashSet<String> = [event_id(1)].into();
    read_until_ids(&ob.topic(""), &first, &mut relay).await;

    // The standby's copy of the slot must be persistent (synchronized past
    // the point the primary's slot reached) before the primary goes.
    let confirmed = {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let at = ob.slot_confirmed().await.expect("slot on the primary");
            if at > walrelay::proto::Lsn::ZERO {
                break at;
            }
            assert!(std::time::Instant::now() < deadline, "slot never confirmed");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let replica = standby.connect().await;
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let row = replica
            .query_opt(
                "SELECT synced AND NOT temporary, confirmed_flush_lsn::text \
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
            std::time::Instant::now() < deadline,
            "the standby did not synchronize slot {}",
            ob.name
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(replica);

    let standby = tokio::task::spawn_blocking(move || {
        primary.stop_immediate();
        standby.promote();
        drop(primary);
        standby
    })
    .await
    .expect("fail over to the standby");
    let promoted = Outbox {
        client: standby.connect().await,
        name: ob.name.clone(),
    };
    promoted.insert(2, "", "k2", r#"{"n": 2}"#).await;
    let both: HashSet<String> = [event_id(1), event_id(2)].into();
    let records = read_until_ids(&ob.topic(""), &both, &mut relay).await;
    let second: Vec<_> = records
        .iter()
        .filter(|r| r.header("id") == Some(event_id(2).as_bytes()))
        .collect();
    assert_eq!(second.len(), 1, "{}", common::describe(&records));
    assert_eq!(second[0].value.as_deref(), Some(&br#"{"n": 2}"#[..]));
    // walrelay holds the slot on the new primary.
    promoted.wait_active(&mut relay).await;
    drop(relay);
    drop(ob);
    promoted.remove().await;
}

/// PostgreSQL 13 reports neither `in_hot_standby` nor
/// `default_transaction_read_only` at startup: both connections ask, as
/// libpq does (`SHOW transaction_read_only`, `pg_is_in_recovery()`), and
/// choose the host each target asks for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_before_14_are_asked_what_they_are() {
    let (primary, standby) = tokio::task::spawn_blocking(|| {
        let primary = PrivatePg::start_major(13);
        let standby = primary.start_standby();
        (primary, standby)
    })
    .await
    .expect("start a PostgreSQL 13 primary and its standby");
    use walrelay::postgres::config::{Endpoint, TargetSessionAttrs as T};
    let base = ConnectParams {
        hosts: vec![
            Endpoint::new("127.0.0.1", primary.port()),
            Endpoint::new("127.0.0.1", standby.port()),
        ],
        target_session_attrs: T::Any,
        user: "postgres".into(),
        password: None,
        dbname: "postgres".into(),
        application_name: "hosts_pg13".into(),
        connect_timeout: Duration::from_secs(10),
        tls: Default::default(),
    };
    for (target, want) in [
        (T::Any, primary.port()),
        (T::ReadWrite, primary.port()),
        (T::Primary, primary.port()),
        (T::ReadOnly, standby.port()),
        (T::Standby, standby.port()),
        (T::PreferStandby, standby.port()),
    ] {
        let params = ConnectParams {
            target_session_attrs: target,
            ..base.clone()
        };
        let conn = ReplicationConnection::connect(&params)
            .await
            .unwrap_or_else(|e| panic!("{target}: {e}"));
        assert_eq!(conn.endpoint().port, want, "replication, {target}");
        let (_client, on) = catalog::connect_with_host(&params)
            .await
            .unwrap_or_else(|e| panic!("{target}: {e}"));
        assert_eq!(on.port, want, "catalog, {target}");
    }
    // Only the primary listed: standby is refused, prefer-standby takes it.
    let only_primary = ConnectParams {
        hosts: vec![Endpoint::new("127.0.0.1", primary.port())],
        ..base.clone()
    };
    let params = ConnectParams {
        target_session_attrs: T::Standby,
        ..only_primary.clone()
    };
    let err = match ReplicationConnection::connect(&params).await {
        Ok(_) => panic!("a PostgreSQL 13 primary passed as a standby"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("server is not in hot standby mode"), "{err}");
    let params = ConnectParams {
        target_session_attrs: T::PreferStandby,
        ..only_primary
    };
    let conn = ReplicationConnection::connect(&params)
        .await
        .expect("prefer-standby falls back to the primary");
    assert_eq!(conn.endpoint().port, primary.port());
}
