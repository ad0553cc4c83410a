//! The operator commands against the real servers of `scripts/test.sh`:
//! `walrelay check` (called as `walrelay::check::run_check`) on a good setup
//! and on each kind of broken one, where the failing rows must be exactly
//! the broken thing and name it; and `walrelay status` (through
//! `walrelay::status`, and the binary) against a running walrelay's
//! `/api/state`, with one pipeline and with two, one of them failed.

use crate::common;

use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use common::relay::{Outbox, Relay, WAIT};
use common::{connect, kafka_bootstrap, unique_name, PrivatePg};
use std::collections::BTreeMap;
use walrelay::check::{self, run_check, CheckReport, CheckStatus};
use walrelay::config::Config;

use walrelay::status::{self, client, render, run_status_to, snapshot, StatusOptions};

fn parse_config(text: &str) -> Config {
    Config::from_toml(text, Path::new("ops_cli.toml")).expect("test config is valid")
}

fn failed(report: &CheckReport) -> Vec<&'static str> {
    report.failures().map(|r| r.name).collect()
}

/// The row called `name`; panics with the whole table when absent.
fn row<'a>(report: &'a CheckReport, name: &str) -> &'a check::CheckRow {
    report
        .row(name)
        .unwrap_or_else(|| panic!("no row {name}:\n{report}"))
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
}

async fn publication_exists(client: &tokio_postgres::Client, name: &str) -> bool {
    client
        .query_opt("SELECT 1 FROM pg_publication WHERE pubname = $1", &[&name])
        .await
        .expect("read pg_publication")
        .is_some()
}

async fn drop_table(ob: Outbox) {
    ob.client
        .batch_execute(&format!(
            "DROP PUBLICATION IF EXISTS {0}; DROP TABLE IF EXISTS {0}",
            ob.name
        ))
        .await
        .expect("drop the test's table");
}

/// A working setup passes, every row is there, and nothing was created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_passes_on_a_good_setup_and_changes_nothing() {
    let ob = Outbox::new("check_good").await;
    ob.insert(1, "", "k", r#"{"n": 1}"#).await;
    let config = parse_config(&ob.config(&kafka_bootstrap()));

    let report = run_check(&config).await;

    assert!(report.passed(), "{report}");
    for name in [
        check::POSTGRES_CONNECTION,
        check::REPLICATION_CONNECTION,
        check::WAL_LEVEL,
        check::ROLE,
        check::SLOT_CAPACITY,
        check::WAL_SENDERS,
        check::MAX_SLOT_WAL_KEEP_SIZE,
        check::OUTBOX_TABLE,
        check::OUTBOX_PRIVILEGES,
        check::PUBLICATION,
        check::SLOT,
        check::KAFKA_CONNECTION,
        check::KAFKA_TOPICS,
    ] {
        let r = row(&report, name);
        assert!(
            matches!(r.status, CheckStatus::Pass | CheckStatus::Warn),
            "{name} is {:?}:\n{report}",
            r.status
        );
    }
    // The topic the default route gives for the row just written.
    let topics = row(&report, check::KAFKA_TOPICS);
    assert!(topics.detail.contains(&ob.topic("")), "{report}");
    assert!(
        row(&report, check::PUBLICATION)
            .detail
            .contains("walrelay will create it"),
        "{report}"
    );
    assert!(
        row(&report, check::SLOT)
            .detail
            .contains("walrelay will create it"),
        "{report}"
    );
    // Read-only: neither the slot nor the publication exists afterwards.
    assert!(!ob.slot_exists().await, "check created the slot");
    assert!(
        !publication_exists(&ob.client, &ob.name).await,
        "check created the publication"
    );
    let table = report.to_string();
    assert!(table.contains("walrelay can start"), "{table}");
    drop_table(ob).await;
}

/// `wal_level = replica` fails the wal_level row and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_fails_on_wal_level_replica() {
    let pg = tokio::task::spawn_blocking(|| {
        let pg = PrivatePg::start();
        pg.conf(&["wal_level=replica"]);
        pg
    })
    .await
    .expect("private cluster");
    let client = pg.connect().await;
    let level: String = client
        .query_one("SHOW wal_level", &[])
        .await
        .expect("show wal_level")
        .get(0);
    assert_eq!(level, "replica", "pg.sh conf did not apply wal_level");
    client
        .batch_execute(
            "CREATE TABLE outbox (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
             aggregateid varchar(255), type varchar(255) NOT NULL, payload jsonb)",
        )
        .await
        .expect("create outbox");
    let config = parse_config(&format!(
        r#"
[postgres]
host = "127.0.0.1"
port = {}
user = "postgres"
dbname = "postgres"

[kafka]
bootstrap_servers = "{}"
"#,
        pg.port(),
        kafka_bootstrap()
    ));

    let report = run_check(&config).await;

    assert_eq!(failed(&report), [check::WAL_LEVEL], "{report}");
    let r = row(&report, check::WAL_LEVEL);
    assert!(r.detail.contains("replica"), "{report}");
    assert!(
        r.fix
            .as_deref()
            .is_some_and(|f| f.contains("wal_level = logical")),
        "{report}"
    );
    assert!(report.to_string().contains("fix the failures"), "{report}");
    drop(client);
    tokio::task::spawn_blocking(move || drop(pg))
        .await
        .expect("remove the private cluster");
}

/// An outbox table without `aggregateid` fails the table row, naming the
/// column and both the Debezium key and walrelay's key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_names_a_missing_column() {
    let ob = Outbox::new("check_nocol").await;
    ob.client
        .batch_execute(&format!("ALTER TABLE {} DROP COLUMN aggregateid", ob.name))
        .await
        .expect("drop column");
    let config = parse_config(&ob.config(&kafka_bootstrap()));

    let report = run_check(&config).await;

    assert_eq!(failed(&report), [check::OUTBOX_TABLE], "{report}");
    let r = row(&report, check::OUTBOX_TABLE);
    assert!(r.detail.contains("\"aggregateid\""), "{report}");
    assert!(r.detail.contains("table.field.event.key"), "{report}");
    assert!(
        r.fix
            .as_deref()
            .is_some_and(|f| f.contains("router.key_field")),
        "{report}"
    );
    drop_table(ob).await;
}

/// A role without REPLICATION fails the replication connection (the
/// server refuses the walsender) and the role row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_fails_for_a_role_without_replication() {
    let ob = Outbox::new("check_norepl").await;
    let role = unique_name("norepl");
    // The publication exists, so the role needs no ownership to create it.
    ob.client
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN;
             GRANT SELECT ON {0} TO {role};
             CREATE PUBLICATION {0} FOR TABLE {0}",
            ob.name
        ))
        .await
        .expect("create role and publication");
    let config = parse_config(
        &ob.config(&kafka_bootstrap())
            .replace("user = \"postgres\"", &format!("user = \"{role}\"")),
    );

    let report = run_check(&config).await;

    let mut failures = failed(&report);
    failures.sort_unstable();
    let mut want = [check::REPLICATION_CONNECTION, check::ROLE];
    want.sort_unstable();
    assert_eq!(failures, want, "{report}");
    let r = row(&report, check::ROLE);
    assert!(r.detail.contains("REPLICATION"), "{report}");
    assert!(
        r.fix
            .as_deref()
            .is_some_and(|f| f.contains(&format!("ALTER ROLE \"{role}\" REPLICATION"))),
        "{report}"
    );
    let r = row(&report, check::REPLICATION_CONNECTION);
    assert!(r.detail.contains("42501"), "{report}");
    assert_eq!(
        row(&report, check::OUTBOX_PRIVILEGES).status,
        CheckStatus::Pass,
        "{report}"
    );

    let client = connect().await;
    drop_table(ob).await;
    client
        .batch_execute(&format!("DROP OWNED BY {role}; DROP ROLE {role}"))
        .await
        .expect("drop role");
}

/// A closed Kafka port fails the Kafka row within the bound, and the topic
/// row is skipped rather than guessed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_fails_fast_when_kafka_is_unreachable() {
    let ob = Outbox::new("check_nokafka").await;
    let config = parse_config(&ob.config(&format!("127.0.0.1:{}", closed_port())));

    let started = Instant::now();
    let report = run_check(&config).await;
    let took = started.elapsed();

    assert_eq!(failed(&report), [check::KAFKA_CONNECTION], "{report}");
    assert!(
        took < check::KAFKA_TIMEOUT + Duration::from_secs(10),
        "check took {took:?}"
    );
    let r = row(&report, check::KAFKA_CONNECTION);
    assert!(r.detail.contains("127.0.0.1"), "{report}");
    assert!(
        r.fix
            .as_deref()
            .is_some_and(|f| f.contains("kafka.bootstrap_servers")),
        "{report}"
    );
    assert_eq!(
        row(&report, check::KAFKA_TOPICS).status,
        CheckStatus::Skip,
        "{report}"
    );
    drop_table(ob).await;
}

/// A closed PostgreSQL port fails both connection rows at once and skips
/// the checks that need a connection; Kafka is still checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_fails_fast_when_postgres_is_unreachable() {
    let config = parse_config(&format!(
        r#"
[postgres]
host = "127.0.0.1"
port = {}
user = "postgres"
dbname = "postgres"
connect_timeout_ms = 3000

[kafka]
bootstrap_servers = "{}"
"#,
        closed_port(),
        kafka_bootstrap()
    ));

    let started = Instant::now();
    let report = run_check(&config).await;

    assert!(started.elapsed() < Duration::from_secs(15), "{report}");
    let mut failures = failed(&report);
    failures.sort_unstable();
    let mut want = [check::POSTGRES_CONNECTION, check::REPLICATION_CONNECTION];
    want.sort_unstable();
    assert_eq!(failures, want, "{report}");
    assert!(
        row(&report, check::POSTGRES_CONNECTION)
            .fix
            .as_deref()
            .is_some_and(|f| f.contains("postgres.port")),
        "{report}"
    );
    assert_eq!(row(&report, check::WAL_LEVEL).status, CheckStatus::Skip);
    assert_eq!(
        row(&report, check::KAFKA_CONNECTION).status,
        CheckStatus::Pass,
        "{report}"
    );
}

/// `walrelay status` against a running walrelay: the events it relayed
/// and the confirmed position, as values and in the rendered view.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_events_and_confirmed_lsn() {
    let ob = Outbox::new("status_view").await;
    let port = closed_port();
    let config = ob.config(&kafka_bootstrap()).replace(
        "listen = \"127.0.0.1:0\"",
        &format!("listen = \"127.0.0.1:{port}\""),
    );
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    for i in 0..5 {
        ob.insert(i, "", "k", r#"{"n": 1}"#).await;
    }
    let written = ob.current_lsn().await;
    ob.wait_confirmed(written, &relay).await;

    let url = client::state_url(&format!("127.0.0.1:{port}"));
    // Metrics follow the pipeline by up to a status interval.
    let deadline = Instant::now() + WAIT;
    let reading = loop {
        let snap = snapshot(&url).await;
        if let Ok(s) = &snap {
            let p = &s.state.pipelines[0];
            if p.events_total == 5 && p.confirmed_lsn.is_some_and(|l| l >= written) {
                break snap.expect("checked above");
            }
        }
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "metrics never showed 5 events confirmed to {written}: {snap:?}\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let p = &reading.state.pipelines[0];
    assert_eq!(
        p.events_by_topic,
        BTreeMap::from([(ob.topic(""), 5)]),
        "events by topic"
    );
    assert_eq!(reading.state.version, env!("CARGO_PKG_VERSION"));
    let confirmed = p.confirmed_lsn.expect("confirmed lsn");
    let view = render(&reading, None);
    assert!(view.contains("5 total"), "{view}");
    assert!(view.contains(&confirmed.to_string()), "{view}");

    // The command itself: two readings a second apart, then the view.
    let mut out = Vec::new();
    run_status_to(StatusOptions::new(url.clone()), &mut out)
        .await
        .expect("walrelay status");
    let text = String::from_utf8(out).expect("utf-8 view");
    assert!(text.contains("5 total, 0.0/s"), "{text}");
    let shown: walrelay::proto::Lsn = text
        .lines()
        .find_map(|l| l.strip_prefix("confirmed"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|l| l.parse().ok())
        .unwrap_or_else(|| panic!("no confirmed LSN in the view:\n{text}"));
    assert!(
        shown >= written,
        "shown {shown} < written {written}:\n{text}"
    );

    ob.finish(relay).await;
    // Once walrelay is gone, status says so instead of hanging.
    let err = snapshot(&url).await.expect_err("nothing listens any more");
    assert!(err.to_string().contains("cannot connect"), "{err}");
}

/// `walrelay status`, the command, against one process of two pipelines:
/// `orders` relays, `broken` stops on a fatal error at its start (its slot
/// is missing and `create_slot = false`). The process keeps `orders`
/// running (`runtime.on_pipeline_failure = "continue"`); the view has both
/// in its table and a section each, the failed one with the error
/// `/readyz` gives; `--pipeline` shows one; the command exits 0 whatever
/// the pipelines' states, 1 for a pipeline the process does not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_a_failed_pipeline_beside_a_running_one() {
    let ob = Outbox::new("status_two").await;
    let broken = Outbox::new("status_broken").await;
    let port = closed_port();
    let config = ob.config_with(
        &kafka_bootstrap(),
        &format!(
            "[metrics]\nlisten = \"127.0.0.1:{port}\"\n\n\
             [[pipelines]]\nname = \"orders\"\n\n\
             [[pipelines]]\nname = \"broken\"\n\
             [pipelines.replication]\nslot = \"{b}\"\npublication = \"{b}\"\ncreate_slot = false\n\
             [pipelines.outbox]\ntable = \"public.{b}\"\n",
            b = broken.name
        ),
    );
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    for i in 0..3 {
        ob.insert(i, "", "k", r#"{"n": 1}"#).await;
    }
    let written = ob.current_lsn().await;
    ob.wait_confirmed(written, &relay).await;

    let addr = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + WAIT;
    loop {
        let snap = snapshot(&addr).await;
        if let Ok(s) = &snap {
            let state = |name| s.pipeline(name).map(status::PipelineState::of);
            if s.pipeline("orders").is_some_and(|p| p.events_total == 3)
                && state("orders") == Some(status::PipelineState::Running)
                && state("broken") == Some(status::PipelineState::Failed)
            {
                break;
            }
        }
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "metrics never showed orders relaying and broken failed: {snap:?}\n{}",
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let run = |extra: &[&str]| {
        let mut args = vec!["status", "--metrics-addr", addr.as_str()];
        args.extend_from_slice(extra);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_walrelay"))
            .args(&args)
            .output()
            .expect("run walrelay status");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, text, stderr) = run(&[]);
    assert_eq!(code, Some(0), "{text}\n{stderr}");
    assert!(
        text.contains("state        up; 2 pipelines: 1 running, 1 FAILED"),
        "{text}"
    );
    let row = |name: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no table row for {name}:\n{text}"))
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
    };
    assert_eq!(row("orders"), ["orders", "wal", "running"], "{text}");
    assert_eq!(row("broken"), ["broken", "wal", "FAILED"], "{text}");
    let broken_at = text
        .find("\npipeline broken\n")
        .unwrap_or_else(|| panic!("no section for broken:\n{text}"));
    let broken_view = &text[broken_at..];
    assert!(
        broken_view.contains("state        FAILED: stopped on a fatal error: ")
            && broken_view.contains("create_slot is false"),
        "{broken_view}"
    );
    let orders_view = &text[text.find("\npipeline orders\n").expect(&text)..broken_at];
    assert!(orders_view.contains("state        ready"), "{orders_view}");
    assert!(
        orders_view.contains("events       3 total"),
        "{orders_view}"
    );

    let (code, text, stderr) = run(&["--pipeline", "orders"]);
    assert_eq!(code, Some(0), "{text}\n{stderr}");
    assert!(
        text.contains("pipeline     orders\nstate        up, ready\n"),
        "{text}"
    );
    assert!(!text.contains("broken"), "{text}");

    let (code, text, stderr) = run(&["--pipeline", "shipping"]);
    assert_eq!(code, Some(1), "{text}\n{stderr}");
    assert!(
        stderr.contains("runs no pipeline \"shipping\"; it runs orders, broken"),
        "{stderr}"
    );

    ob.finish(relay).await;
    broken
        .client
        .batch_execute(&format!(
            "DROP PUBLICATION IF EXISTS {b}; DROP TABLE IF EXISTS {b}",
            b = broken.name
        ))
        .await
        .expect("drop the broken pipeline's publication and table");
}
