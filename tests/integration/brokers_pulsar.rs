//! Apache Pulsar: walrelay against a real Pulsar 4.2 standalone (broker
//! and bookie in one JVM, from Maven Central's jars), one per test, started
//! by scripts/brokers.sh. Each test reads the topic back from its first
//! message with a Pulsar consumer, in the order the broker stored it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use pulsar::consumer::{ConsumerOptions, InitialPosition};
use pulsar::{Pulsar, SubType, TokioExecutor};

use crate::brokers::{check_row, refused_large_record_stops, walrelay_check, without_kafka};
use crate::common::load::{sigkill_under_load_sized, Delivered, LoadLog};
use crate::common::metrics::free_port;
use crate::common::relay::{event_id, tail, Outbox, Relay, WAIT};
use crate::common::{env, Record};

/// A Pulsar standalone of this test, in its own directory
/// (`scripts/brokers.sh start pulsar`), removed with it.
pub(crate) struct PulsarServer {
    dir: tempfile::TempDir,
    pub(crate) port: u16,
    pub(crate) web_port: u16,
}

fn brokers_sh(args: &[&str]) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/brokers.sh");
    let out = Command::new(&script)
        .args(args)
        .output()
        .expect("run scripts/brokers.sh");
    assert!(
        out.status.success(),
        "brokers.sh {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl PulsarServer {
    pub(crate) fn start() -> PulsarServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let d = dir.path().display().to_string();
        brokers_sh(&["start", "pulsar", &d]);
        let read = |name: &str| {
            std::fs::read_to_string(dir.path().join(name))
                .expect(name)
                .trim()
                .parse()
                .expect("a port")
        };
        PulsarServer {
            port: read("port"),
            web_port: read("web_port"),
            dir,
        }
    }

    fn path(&self) -> String {
        self.dir.path().display().to_string()
    }

    /// SIGSTOP: connections stay open, nothing is answered.
    pub(crate) fn pause(&self) {
        brokers_sh(&["pause", &self.path()]);
    }

    pub(crate) fn resume(&self) {
        brokers_sh(&["resume", &self.path()]);
    }

    /// Makes `topic` (of public/default) a partitioned topic of `n`
    /// partitions, through the admin REST API.
    pub(crate) fn partition(&self, topic: &str, n: u32) {
        let url = format!(
            "http://127.0.0.1:{}/admin/v2/persistent/public/default/{topic}/partitions",
            self.web_port
        );
        let out = Command::new("curl")
            .args([
                "-sS",
                "-f",
                "-X",
                "PUT",
                "-H",
                "Content-Type: application/json",
            ])
            .args(["--data", &n.to_string(), &url])
            .output()
            .expect("curl");
        assert!(
            out.status.success(),
            "partition {topic}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Creates namespace `public/<name>` (the broker's retention applies).
    pub(crate) fn namespace(&self, name: &str) -> Result<(), String> {
        let url = format!(
            "http://127.0.0.1:{}/admin/v2/namespaces/public/{name}",
            self.web_port
        );
        let out = Command::new("curl")
            .args(["-sS", "-f", "-X", "PUT", &url])
            .output()
            .map_err(|e| format!("curl: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "create namespace {name}: {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    pub(crate) async fn client(&self) -> Pulsar<TokioExecutor> {
        Pulsar::builder(format!("pulsar://127.0.0.1:{}", self.port), TokioExecutor)
            .build()
            .await
            .expect("pulsar client")
    }
}

impl Drop for PulsarServer {
    fn drop(&mut self) {
        let _ = Command::new(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/brokers.sh"))
            .args(["rm", &self.path()])
            .output();
    }
}

/// One message as read back.
#[derive(Debug, Clone)]
pub(crate) struct PlMessage {
    /// The partition (`-partition-N` of its topic), 0 if not partitioned.
    pub(crate) partition: u32,
    pub(crate) data: Vec<u8>,
    pub(crate) key: Option<String>,
    pub(crate) properties: HashMap<String, String>,
    /// The schema version the producer sent, if any.
    pub(crate) schema_version: Option<Vec<u8>>,
    /// The producer marked the value null.
    pub(crate) null_value: bool,
}

impl PlMessage {
    fn n(&self) -> Option<u64> {
        serde_json::from_slice::<serde_json::Value>(&self.data).ok()?["n"].as_u64()
    }
}

/// Everything `topic` (of public/default) holds, from its first message,
/// in stored order per partition (a new non-durable consumer reads until
/// the topic is quiet for a second).
async fn read_all(client: &Pulsar<TokioExecutor>, topic: &str) -> Vec<PlMessage> {
    read_full(client, &format!("persistent://public/default/{topic}")).await
}

/// [`read_all`] of a topic by its full name.
pub(crate) async fn read_full(client: &Pulsar<TokioExecutor>, full: &str) -> Vec<PlMessage> {
    let Ok(mut consumer) = client
        .consumer()
        .with_topic(full)
        .with_subscription(format!("read-{}", rand::random::<u64>()))
        .with_subscription_type(SubType::Exclusive)
        .with_options(ConsumerOptions {
            durable: Some(false),
            initial_position: InitialPosition::Earliest,
            ..ConsumerOptions::default()
        })
        .build::<Vec<u8>>()
        .await
    else {
        return Vec::new();
    };
    let mut got = Vec::new();
    while let Ok(Some(Ok(m))) = tokio::time::timeout(Duration::from_secs(1), consumer.next()).await
    {
        let partition = m
            .topic
            .rsplit_once("-partition-")
            .and_then(|(_, n)| n.parse().ok())
            .unwrap_or(0);
        let meta = m.metadata();
        got.push(PlMessage {
            partition,
            data: m.payload.data.clone(),
            key: meta.partition_key.clone(),
            properties: meta
                .properties
                .iter()
                .map(|kv| (kv.key.clone(), kv.value.clone()))
                .collect(),
            schema_version: meta.schema_version.clone(),
            null_value: meta.null_value(),
        });
    }
    let _ = consumer.close().await;
    got
}

/// [`read_all`] once it holds `want` distinct `{"n": n}` events (or
/// `want` messages when `distinct` is false), or `relay` exited, or
/// `wait` passed.
async fn read_topic(
    client: &Pulsar<TokioExecutor>,
    topic: &str,
    want: usize,
    wait: Duration,
    relay: &mut Relay,
) -> Vec<PlMessage> {
    let deadline = Instant::now() + wait;
    loop {
        let got = read_all(client, topic).await;
        let distinct: std::collections::HashSet<_> = got
            .iter()
            .map(|m| m.properties.get("id").cloned().unwrap_or_default())
            .collect();
        if distinct.len() >= want
            || Instant::now() > deadline
            || relay.wait_exit(Duration::ZERO).is_some()
        {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// `[sink]` for the test's Pulsar.
fn pulsar_sink(port: u16, extra: &str) -> String {
    format!("[sink]\ntype = \"pulsar\"\n\n[sink.pulsar]\nservice_url = \"pulsar://127.0.0.1:{port}\"\n{extra}\n")
}

/// The Java client's `JavaStringHash` partition of `key` among `n`.
fn java_partition(key: &str, n: u32) -> u32 {
    let h = key
        .encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    ((h & i32::MAX) as u32) % n
}

/// The topic is persistent://public/default/<topic>, the payload the
/// value's bytes (empty for a null value), the message key the record
/// key, every header a property; per key in commit order. On a
/// partitioned topic each key's messages are on the partition the Java
/// client (Debezium Server's) would pick.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulsar_events_in_order_with_exact_bytes() {
    let server = PulsarServer::start();
    let client = server.client().await;
    let ob = Outbox::new("pulsar_order").await;
    let sink = pulsar_sink(server.port, "schema = \"string\"");
    let mut relay = Relay::start(&without_kafka(&ob.config(""), &sink));
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k1", r#"{"a": "é €"}"#).await;
    ob.insert_null_payload(2, "k1").await;
    for n in 3..=40 {
        ob.insert(n, "", &format!("k{}", n % 4), &format!("{{\"n\": {n}}}"))
            .await;
    }
    let got = read_topic(
        &client,
        &ob.topic(""),
        40,
        Duration::from_secs(60),
        &mut relay,
    )
    .await;
    assert_eq!(got.len(), 40, "{}", tail(&relay.log(), 30));
    assert_eq!(got[0].data, r#"{"a": "é €"}"#.as_bytes());
    assert_eq!(got[0].key.as_deref(), Some("k1"));
    assert_eq!(got[0].properties.get("id"), Some(&event_id(1)));
    assert!(
        got[0].schema_version.is_some(),
        "a STRING schema was declared"
    );
    assert!(got[1].data.is_empty(), "a null value is an empty payload");
    assert_eq!(got[1].properties.get("id"), Some(&event_id(2)));
    let mut per_key: HashMap<String, Vec<u64>> = HashMap::new();
    for m in &got[2..] {
        per_key
            .entry(m.key.clone().unwrap_or_default())
            .or_default()
            .push(m.n().expect("n"));
    }
    for (key, ns) in per_key {
        let want: Vec<u64> = (3..=40).filter(|n| format!("k{}", n % 4) == key).collect();
        assert_eq!(ns, want, "key {key}: every event once, in commit order");
    }
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    ob.finish(relay).await;

    // A partitioned topic: the key picks the partition as Java's client does.
    let ob = Outbox::new("pulsar_parts").await;
    server.partition(&ob.topic(""), 4);
    let mut relay = Relay::start(&without_kafka(
        &ob.config(""),
        &pulsar_sink(server.port, ""),
    ));
    ob.wait_active(&mut relay).await;
    ob.insert_series(1, 60).await;
    let got = read_topic(
        &client,
        &ob.topic(""),
        60,
        Duration::from_secs(60),
        &mut relay,
    )
    .await;
    assert_eq!(got.len(), 60, "{}", tail(&relay.log(), 30));
    let mut per_key: HashMap<String, Vec<u64>> = HashMap::new();
    for m in &got {
        let key = m.key.clone().expect("a key");
        assert_eq!(m.partition, java_partition(&key, 4), "key {key}");
        per_key.entry(key).or_default().push(m.n().expect("n"));
    }
    assert!(
        got.iter()
            .map(|m| m.partition)
            .collect::<std::collections::HashSet<_>>()
            .len()
            > 1,
        "the keys spread over partitions"
    );
    for (key, ns) in per_key {
        let mut sorted = ns.clone();
        sorted.sort_unstable();
        assert_eq!(ns, sorted, "key {key} in commit order on its partition");
    }
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    ob.finish(relay).await;
}

/// A record too large stops the pipeline under `none`, with nothing past
/// it stored; under `all` it goes to the dead-letter topic (its value, the
/// context as properties) and the rest flows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulsar_refused_record_stops_or_is_dead_lettered() {
    let server = PulsarServer::start();
    let client = server.client().await;
    let ob = Outbox::new("pulsar_refused").await;
    let dlq = format!("dlq.{}", ob.name);
    let sink = pulsar_sink(server.port, "max_message_bytes = 1000");
    let mut relay = Relay::start(&without_kafka(&ob.config(""), &sink));
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k", "{}").await;
    assert_eq!(
        read_topic(
            &client,
            &ob.topic(""),
            1,
            Duration::from_secs(60),
            &mut relay
        )
        .await
        .len(),
        1
    );
    let big = refused_large_record_stops(&ob, &mut relay, "max_message_bytes").await;
    assert_eq!(
        read_all(&client, &ob.topic("")).await.len(),
        1,
        "nothing past it"
    );
    // Event 2 is read again: nothing past it was confirmed.
    let dead = format!("[errors]\ntolerance = \"all\"\ndead_letter_topic = \"{dlq}\"\n");
    let mut relay = Relay::start(&without_kafka(&ob.config(""), &format!("{sink}{dead}")));
    ob.wait_active(&mut relay).await;
    ob.insert(4, "", "k", "{\"last\": 1}").await;
    let main = read_topic(
        &client,
        &ob.topic(""),
        3,
        Duration::from_secs(60),
        &mut relay,
    )
    .await;
    let data: Vec<&[u8]> = main.iter().map(|m| m.data.as_slice()).collect();
    assert_eq!(
        data,
        vec![&b"{}"[..], &b"{}"[..], &b"{\"last\": 1}"[..]],
        "{}",
        tail(&relay.log(), 20)
    );
    let letters = read_topic(&client, &dlq, 1, Duration::from_secs(60), &mut relay).await;
    assert_eq!(letters.len(), 1, "{}", tail(&relay.log(), 30));
    assert_eq!(
        letters[0].data,
        big.as_bytes(),
        "bounded by the broker's 5 MiB, not max_message_bytes"
    );
    assert_eq!(letters[0].key.as_deref(), Some("k"));
    assert_eq!(
        letters[0]
            .properties
            .get("walrelay.error.kind")
            .map(String::as_str),
        Some("message_too_large"),
        "{:?}",
        letters[0].properties
    );
    assert_eq!(
        letters[0].properties.get("walrelay.event.id"),
        Some(&event_id(2))
    );
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    ob.finish(relay).await;
}

/// SIGKILL under load: every committed event arrives, in order per key
/// (at least once: a restart sends again what was not confirmed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulsar_sigkill_under_load_delivers_every_event() {
    let server = PulsarServer::start();
    let client = server.client().await;
    let ob = Outbox::new("pulsar_kill").await;
    let config = without_kafka(&ob.config(""), &pulsar_sink(server.port, ""));
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    let read = async |relay: &mut Relay, log: &LoadLog| {
        let total = log.committed.len();
        let got = read_topic(
            &client,
            &ob.topic(""),
            total,
            Duration::from_secs(150),
            relay,
        )
        .await;
        got.iter()
            .enumerate()
            .map(|(i, m)| record_of(i, m))
            .collect()
    };
    // 1,500 events, killed after 500: what the suite's time allows; the
    // restart still finds a part of the load unconfirmed.
    let relay = sigkill_under_load_sized(
        &ob,
        relay,
        &config,
        Delivered::AtLeastOnce,
        (1500, 500),
        read,
    )
    .await;
    ob.finish(relay).await;
}

/// A Pulsar message as the load checker reads records.
fn record_of(i: usize, m: &PlMessage) -> Record {
    Record {
        partition: i32::try_from(m.partition).unwrap_or(0),
        offset: i64::try_from(i).unwrap_or(i64::MAX),
        key: m.key.clone().map(String::into_bytes),
        value: Some(m.data.clone()),
        headers: m
            .properties
            .iter()
            .map(|(k, v)| (k.clone(), Some(v.clone().into_bytes())))
            .collect(),
    }
}

/// The broker hangs for a while (SIGSTOP): the slot stays before what was
/// not stored, and every event arrives in order once it answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulsar_outage_holds_the_slot_then_delivers() {
    let server = PulsarServer::start();
    let client = server.client().await;
    let ob = Outbox::new("pulsar_outage").await;
    let mut relay = Relay::start(&without_kafka(
        &ob.config(""),
        &pulsar_sink(server.port, ""),
    ));
    ob.wait_active(&mut relay).await;
    ob.insert_series(1, 50).await;
    assert_eq!(
        read_topic(
            &client,
            &ob.topic(""),
            50,
            Duration::from_secs(60),
            &mut relay
        )
        .await
        .len(),
        50
    );
    server.pause();
    let pre_commit = ob.insert_series_reading_pre_commit_lsn(51, 150).await;
    ob.slot_held_before(pre_commit, &mut relay, "Pulsar").await;
    server.resume();
    let got = read_topic(
        &client,
        &ob.topic(""),
        150,
        Duration::from_secs(120),
        &mut relay,
    )
    .await;
    let mut seen = std::collections::HashSet::new();
    let firsts: Vec<u64> = got
        .iter()
        .filter_map(PlMessage::n)
        .filter(|n| seen.insert(*n))
        .collect();
    relay.assert_running();
    assert_eq!(
        firsts,
        (1..=150).collect::<Vec<_>>(),
        "in order, none lost: {}",
        tail(&relay.log(), 20)
    );
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    ob.finish(relay).await;
}

/// The polling source to Pulsar: every event, marked published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulsar_from_the_polling_source() {
    let _ = env();
    let server = PulsarServer::start();
    let client = server.client().await;
    let ob = crate::poll::PollBox::new("pulsar_poll").await;
    let port = free_port();
    let config = ob.config(port, "", "");
    let mut relay = Relay::start(&without_kafka(&config, &pulsar_sink(server.port, "")));
    for i in 1..=20 {
        ob.insert(i, &format!("k{}", i % 4)).await;
    }
    ob.wait_published(20, &mut relay).await;
    let got = read_topic(
        &client,
        &ob.topic(),
        20,
        Duration::from_secs(60),
        &mut relay,
    )
    .await;
    assert_eq!(got.len(), 20);
    let view = crate::common::metrics::pipeline(port)
        .await
        .expect("the state");
    let broker = view.broker.expect("the broker in /api/state");
    assert_eq!(broker.name, "pulsar");
    assert!(broker.acked_total >= 20, "{broker:?}");
    relay.signal("TERM");
    assert_eq!(relay.exit_code(WAIT), 0, "{}", relay.log());
}

/// `walrelay check` with Pulsar: the service URL answers a lookup of each
/// destination's topic (a partitioned one with its partitions); a URL
/// nothing answers fails the connection row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulsar_check_looks_up_each_topic() {
    let server = PulsarServer::start();
    let ob = Outbox::new("pulsar_check").await;
    ob.insert(1, "", "k", "{}").await;
    server.partition(&ob.topic(""), 3);
    let config = without_kafka(&ob.config(""), &pulsar_sink(server.port, ""));
    let (_, text) = walrelay_check(&config).await;
    assert!(
        check_row(&text, "broker connection").contains(&format!("127.0.0.1:{}", server.port)),
        "{text}"
    );
    assert!(
        check_row(&text, "broker destinations").contains("3 partitions"),
        "{text}"
    );
    let nothing = free_port();
    let config = without_kafka(
        &ob.config(""),
        &pulsar_sink(nothing, "operation_timeout_ms = 2000"),
    );
    let (code, text) = walrelay_check(&config).await;
    assert_ne!(code, Some(0), "{text}");
    assert!(
        check_row(&text, "broker connection").starts_with("FAIL"),
        "{text}"
    );
    ob.remove_all().await;
}
