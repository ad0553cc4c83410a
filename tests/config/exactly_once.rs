//! Kafka Connect's exactly-once source keys (KIP-618) through the shipped
//! fixture files and the CLI: the worker of a distributed KIP-618 cluster
//! and a REST-form connector requiring exactly-once, translated into
//! `[kafka] exactly_once` and `[kafka.transactions]`; `required` without an
//! enabling worker refused at load by name.
//!
//! These tests need no servers.

use std::path::{Path, PathBuf};
use std::process::Command;

use walrelay::chain::DisplayChain;
use walrelay::config::kafka_connect::load_connect;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/debezium")
        .join(name)
}

#[test]
fn kip_618_files_translate_to_exactly_once() {
    let t = load_connect(
        &data("connect-exactly-once.properties"),
        &data("outbox-connector-exactly-once.json"),
    )
    .unwrap();
    let k = &t.config.kafka;
    assert!(k.exactly_once);
    let tx = &k.transactions;
    assert_eq!(tx.pipeline.as_deref(), Some("outbox-connector"));
    assert_eq!(
        tx.transactional_id.as_deref(),
        Some("connect-cluster-outbox-connector-0")
    );
    // The connector's offsets topic wins over the worker's.
    assert_eq!(tx.progress_topic, "outbox-offsets");
    assert_eq!(tx.progress_topic_replication_factor, 3);
    assert_eq!(tx.progress_topic_partitions, 25);
    assert_eq!(tx.interval_ms, 2_000);
    // The connector's producer override wins over the worker's.
    assert_eq!(tx.timeout_ms, 120_000);
    assert!(t.ignored("config.storage.topic"));
}

#[test]
fn properties_and_rest_forms_agree() {
    let dir = tempfile::tempdir().unwrap();
    let props = dir.path().join("connector.properties");
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(data("outbox-connector-exactly-once.json")).unwrap(),
    )
    .unwrap();
    let mut text = format!("name={}\n", json["name"].as_str().unwrap());
    for (k, v) in json["config"].as_object().unwrap() {
        let v = match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        text.push_str(&format!("{k}={}\n", v.replace('\\', "\\\\")));
    }
    std::fs::write(&props, text).unwrap();
    let worker = data("connect-exactly-once.properties");
    let a = load_connect(&worker, &props).unwrap();
    let b = load_connect(&worker, &data("outbox-connector-exactly-once.json")).unwrap();
    assert_eq!(a.config.kafka.exactly_once, b.config.kafka.exactly_once);
    assert_eq!(a.config.kafka.transactions, b.config.kafka.transactions);
}

fn walrelay(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_walrelay"))
        .args(args)
        .env("WALRELAY_LOG", "warn")
        .env_remove("DEBEZIUM_SOURCE_DATABASE_PASSWORD")
        .output()
        .unwrap()
}

#[test]
fn required_without_an_enabling_worker_is_refused_by_name() {
    let connector = data("outbox-connector-exactly-once.json");
    let dir = tempfile::tempdir().unwrap();
    let disabled = dir.path().join("worker.properties");
    let text = std::fs::read_to_string(data("connect-exactly-once.properties")).unwrap();
    for worker_text in [
        text.replace("exactly.once.source.support=enabled", ""),
        text.replace(
            "exactly.once.source.support=enabled",
            "exactly.once.source.support=disabled",
        ),
    ] {
        std::fs::write(&disabled, &worker_text).unwrap();
        let err = load_connect(&disabled, &connector).unwrap_err();
        let chain = DisplayChain(&err).to_string();
        assert!(
            chain.contains("exactly.once.support") && chain.contains("exactly.once.source.support"),
            "{chain}"
        );
        let out = walrelay(&[
            "connect-standalone",
            "--validate",
            disabled.to_str().unwrap(),
            connector.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("exactly.once.support")
                && stderr.contains("exactly.once.source.support"),
            "{stderr}"
        );
        assert!(!stderr.contains("pg-s3cret"), "{stderr}");
    }
    let out = walrelay(&[
        "connect-standalone",
        "--validate",
        data("connect-exactly-once.properties").to_str().unwrap(),
        connector.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
