//! Passwords never leak: walrelay runs every command (validate, check, run,
//! status, config errors, failing authentication) with distinctive
//! PostgreSQL and Kafka SASL passwords, and none of its output, logs (at
//! debug level), `/metrics` or the operator's page (`/`, `/api/state`)
//! contains them.
//!
//! CI wall time: about 30 s (a private cluster, a SCRAM broker start).

use crate::common;
use crate::common::metrics::{free_port, get_text};

use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::relay::{event_id, Outbox, WAIT};
use common::tls::ScramKafka;
use common::{consume_on, create_topic_on, PrivatePg};

const PG_PASSWORD: &str = "Pg-Distinct-Secret-5e81a";
const KAFKA_PASSWORD: &str = "Kafka-Distinct-Secret-77b3c";
const WRONG_PG_PASSWORD: &str = "Pg-Wrong-Secret-0d4f2";
const WRONG_KAFKA_PASSWORD: &str = "Kafka-Wrong-Secret-c9e01";
const KAFKA_USER: &str = "walrelay_sasl";
const PG_USER: &str = "walrelay_scram";
const KAFKA_PW_VAR: &str = "H3_SECRETS_TEST_KAFKA_PASSWORD";

fn walrelay(args: &[&str], config: &Path, kafka_password: &str) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_walrelay"));
    cmd.args(args)
        .arg("--config")
        .arg(config)
        .env("WALRELAY_LOG", "debug")
        .env(KAFKA_PW_VAR, kafka_password)
        .stdin(Stdio::null());
    // A bound even if a command hangs: `check` and `validate` end by themselves.
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
    let child = child.expect("spawn walrelay");
    let deadline = Instant::now() + Duration::from_secs(120);
    let pid = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output());
    while !waiter.is_finished() {
        if Instant::now() > deadline {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    waiter.join().unwrap().expect("walrelay output")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passwords_never_appear_in_output_or_metrics() {
    let kafka_start = tokio::task::spawn_blocking(|| ScramKafka::start(KAFKA_USER, KAFKA_PASSWORD));
    let pg = tokio::task::spawn_blocking(PrivatePg::start).await.unwrap();
    let kafka = kafka_start.await.unwrap();
    let admin = pg.connect().await;
    admin
        .batch_execute(&format!(
            "CREATE ROLE {PG_USER} LOGIN REPLICATION SUPERUSER PASSWORD '{PG_PASSWORD}'"
        ))
        .await
        .unwrap();
    let ob = Outbox::new_with("secrets", pg.connect().await).await;
    let topic = ob.topic("");
    create_topic_on(&kafka.plain_bootstrap(), &topic, 1).await;

    let dir = tempfile::tempdir().unwrap();
    let pw_file = dir.path().join("pg-password");
    std::fs::write(&pw_file, format!("{PG_PASSWORD}\n")).unwrap();
    let wrong_pw_file = dir.path().join("pg-wrong-password");
    std::fs::write(&wrong_pw_file, WRONG_PG_PASSWORD).unwrap();
    let metrics_port = free_port();
    let toml = |pw_file: &Path, metrics: &str, extra: &str| {
        format!(
            r#"
[postgres]
host = "127.0.0.1"
port = {port}
user = "{PG_USER}"
password_file = "{pw}"
dbname = "postgres"
{extra}

[replication]
slot = "{name}"
publication = "{name}"
status_interval_ms = 200
reconnect_min_ms = 100
reconnect_max_ms = 500

[outbox]
table = "public.{name}"

[kafka]
bootstrap_servers = "{sasl}"

[kafka.producer]
"security.protocol" = "SASL_PLAINTEXT"
"sasl.mechanism" = "SCRAM-SHA-256"
"sasl.username" = "{KAFKA_USER}"
"linger.ms" = "2"

[kafka.secrets_env]
"sasl.password" = "{KAFKA_PW_VAR}"

[metrics]
listen = "{metrics}"
"#,
            port = pg.port(),
            pw = pw_file.display(),
            name = ob.name,
            sasl = kafka.sasl_bootstrap(),
        )
    };
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let good = write(
        "good.toml",
        &toml(&pw_file, &format!("127.0.0.1:{metrics_port}"), ""),
    );
    let mut transcript = Vec::<(String, String)>::new();

    // validate and check with the right passwords.
    let out = walrelay(&["validate"], &good, KAFKA_PASSWORD);
    assert!(out.status.success(), "validate: {}", text(&out));
    transcript.push(("validate".into(), text(&out)));
    let out = walrelay(&["check"], &good, KAFKA_PASSWORD);
    transcript.push(("check".into(), text(&out)));

    // run: deliver two events through SASL, scrape /metrics, ask status.
    let log_path = dir.path().join("run.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut relay = Command::new(env!("CARGO_BIN_EXE_walrelay"))
        .args(["run", "--config"])
        .arg(&good)
        .env("WALRELAY_LOG", "debug")
        .env(KAFKA_PW_VAR, KAFKA_PASSWORD)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + WAIT;
    while !ob.slot_streaming().await {
        if let Some(status) = relay.try_wait().unwrap() {
            panic!(
                "walrelay exited with {status}:\n{}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            );
        }
        assert!(Instant::now() < deadline, "slot never streamed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ob.insert(1, "", "k1", "{\"n\":1}").await;
    ob.insert(2, "", "k2", "{\"n\":2}").await;
    let records = consume_on(&kafka.plain_bootstrap(), &topic, 2, WAIT).await;
    let want: HashSet<String> = [1, 2].map(event_id).into_iter().collect();
    assert_eq!(
        common::relay::ids(&records),
        want,
        "{}",
        std::fs::read_to_string(&log_path).unwrap_or_default()
    );
    let deadline = Instant::now() + WAIT;
    let metrics = loop {
        if let Some((_, m)) = get_text(metrics_port, "/metrics").await {
            break m;
        }
        assert!(Instant::now() < deadline, "no /metrics on {metrics_port}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(metrics.contains("walrelay_"), "{metrics}");
    transcript.push(("/metrics".into(), metrics));
    // The operator's page and its data.
    for path in ["/", "/api/state"] {
        let answer = get_text(metrics_port, path).await;
        let Some((200, body)) = answer else {
            panic!("{path}: {answer:?}");
        };
        transcript.push((path.into(), body));
    }
    let status = Command::new(env!("CARGO_BIN_EXE_walrelay"))
        .args([
            "status",
            "--metrics-addr",
            &format!("127.0.0.1:{metrics_port}"),
        ])
        .output()
        .unwrap();
    transcript.push(("status".into(), text(&status)));
    let _ = Command::new("kill")
        .args(["-TERM", &relay.id().to_string()])
        .status();
    let deadline = Instant::now() + WAIT;
    while relay.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = relay.kill();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    transcript.push(("run".into(), std::fs::read_to_string(&log_path).unwrap()));

    // run with a wrong PostgreSQL password: a fatal authentication error.
    let wrong_pg = write("wrong-pg.toml", &toml(&wrong_pw_file, "127.0.0.1:0", ""));
    let out = walrelay(&["run"], &wrong_pg, KAFKA_PASSWORD);
    assert!(
        !out.status.success(),
        "run with a wrong password: {}",
        text(&out)
    );
    assert!(
        text(&out).contains("password authentication failed"),
        "{}",
        text(&out)
    );
    transcript.push(("run, wrong pg password".into(), text(&out)));

    // run with a wrong Kafka password: a refused authentication never heals
    // by retrying, so walrelay stops (exit 1) saying so.
    let wrong_log = dir.path().join("wrong-kafka.log");
    let log = std::fs::File::create(&wrong_log).unwrap();
    let mut relay = Command::new(env!("CARGO_BIN_EXE_walrelay"))
        .args(["run", "--config"])
        .arg(&good)
        .env("WALRELAY_LOG", "debug")
        .env(KAFKA_PW_VAR, WRONG_KAFKA_PASSWORD)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    ob.insert(3, "", "k3", "{\"n\":3}").await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = relay.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() >= deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let _ = relay.kill();
    let _ = relay.wait();
    let said = std::fs::read_to_string(&wrong_log).unwrap();
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(1),
        "a wrong kafka password must stop walrelay:\n{said}"
    );
    assert!(
        said.contains("kafka refused walrelay's producer"),
        "the error must say kafka refused the producer:\n{said}"
    );
    transcript.push((
        "run, wrong kafka password".into(),
        std::fs::read_to_string(&wrong_log).unwrap(),
    ));

    // check with a wrong Kafka password.
    let out = walrelay(&["check"], &good, WRONG_KAFKA_PASSWORD);
    assert!(!out.status.success(), "check with a wrong kafka password");
    transcript.push(("check, wrong kafka password".into(), text(&out)));

    // Config errors around secrets: two sources, a syntax error on the
    // password line, an inline password next to a bad key.
    let both = write(
        "both.toml",
        &toml(
            &pw_file,
            "127.0.0.1:0",
            &format!("password = \"{PG_PASSWORD}\""),
        )
        .replace("password_file", "password_env = \"X\"\n#"),
    );
    let syntax = write(
        "syntax.toml",
        &toml(&pw_file, "127.0.0.1:0", "").replace(
            "password_file = ",
            &format!("password = \"{PG_PASSWORD}\" oops\n# "),
        ),
    );
    let server = write(
        "application.properties",
        &format!(
            "debezium.sink.type=kafka\n\
             debezium.sink.kafka.producer.bootstrap.servers={sasl}\n\
             debezium.sink.kafka.producer.security.protocol=SASL_PLAINTEXT\n\
             debezium.sink.kafka.producer.sasl.mechanism=SCRAM-SHA-512\n\
             debezium.sink.kafka.producer.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"{KAFKA_USER}\" password=\"{KAFKA_PASSWORD}\";\n\
             debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n\
             debezium.source.database.hostname=127.0.0.1\n\
             debezium.source.database.port={port}\n\
             debezium.source.database.user={PG_USER}\n\
             debezium.source.database.password={PG_PASSWORD}\n\
             debezium.source.database.dbname=postgres\n\
             debezium.source.plugin.name=pgoutput\n\
             debezium.source.topic.prefix=secrets\n\
             debezium.source.table.include.list=public.{name}\n\
             debezium.source.database.sslmode=verify-sideways\n",
            sasl = kafka.sasl_bootstrap(),
            port = pg.port(),
            name = ob.name,
        ),
    );
    for (what, path) in [
        ("two password sources", &both),
        ("syntax error on the password line", &syntax),
        ("debezium server form with a bad key", &server),
    ] {
        let out = walrelay(&["validate"], path, KAFKA_PASSWORD);
        assert!(!out.status.success(), "{what}: validate passed");
        transcript.push((format!("validate, {what}"), text(&out)));
    }

    for (what, output) in &transcript {
        // For a person checking what walrelay says in each case.
        if std::env::var_os("WALRELAY_TEST_SHOW_TRANSCRIPT").is_some() {
            eprintln!("===== {what}\n{output}");
        }
        for secret in [
            PG_PASSWORD,
            KAFKA_PASSWORD,
            WRONG_PG_PASSWORD,
            WRONG_KAFKA_PASSWORD,
        ] {
            assert!(
                !output.contains(secret),
                "{what} shows a password ({secret}):\n{output}"
            );
        }
    }
    let name = ob.name.clone();
    let _ = ob
        .client
        .execute("SELECT pg_drop_replication_slot($1)", &[&name])
        .await;
}
