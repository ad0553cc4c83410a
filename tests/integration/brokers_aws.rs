//! Amazon SQS against the moto server (PyPI's local AWS endpoint, started
//! by each test on its own port: state in memory). What a consumer
//! receives (body bytes, attributes, message group and deduplication ids,
//! order per group), the slot's own state, SIGKILL under load, an endpoint
//! that hangs, a refused record under both error policies, and the polling
//! source.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};

use crate::brokers::{
    check_row, numbers_per_key, refused_large_record_stops, walrelay_check, without_kafka, Server,
};
use crate::common::load::{sigkill_under_load, sigkill_under_load_sized, Delivered, LoadLog};
use crate::common::metrics::free_port;
use crate::common::relay::{event_id, tail, Outbox, Relay, WAIT};
use crate::common::{env, Record};

/// moto's account id, in every queue URL it gives.
const ACCOUNT: &str = "123456789012";

/// A client of the test's moto server.
pub(crate) async fn sqs_client(port: u16) -> aws_sdk_sqs::Client {
    let creds = aws_sdk_sqs::config::Credentials::new("test", "test", None, None, "test");
    let config = aws_sdk_sqs::Config::builder()
        .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
        .region(aws_sdk_sqs::config::Region::new("us-east-1"))
        .endpoint_url(format!("http://127.0.0.1:{port}"))
        .credentials_provider(creds)
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .build();
    aws_sdk_sqs::Client::from_conf(config)
}

/// Creates queue `name` (FIFO when it ends in `.fifo`, without
/// content-based deduplication) and returns its URL.
pub(crate) async fn create_queue(client: &aws_sdk_sqs::Client, name: &str) -> String {
    let mut create = client.create_queue().queue_name(name);
    if name.ends_with(".fifo") {
        create = create.attributes(QueueAttributeName::FifoQueue, "true");
    }
    create
        .send()
        .await
        .expect("create queue")
        .queue_url
        .expect("a queue URL")
}

/// One received message.
#[derive(Debug, Clone)]
pub(crate) struct SqsMessage {
    pub(crate) body: String,
    pub(crate) group: Option<String>,
    pub(crate) dedup: Option<String>,
    /// String message attributes, by name.
    pub(crate) attributes: HashMap<String, String>,
}

/// Receives (and deletes) every message on `url` until `want` were read or
/// `relay` exits or the wait ends; in sequence order on a FIFO queue.
pub(crate) async fn read_queue(
    client: &aws_sdk_sqs::Client,
    url: &str,
    want: usize,
    relay: &mut Relay,
) -> Vec<SqsMessage> {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut got = Vec::new();
    while got.len() < want && Instant::now() < deadline {
        let out = client
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await
            .expect("receive");
        for m in out.messages() {
            let sys = m.attributes();
            let attr = |n: MessageSystemAttributeName| sys.and_then(|a| a.get(&n).cloned());
            got.push(SqsMessage {
                body: m.body().unwrap_or_default().to_owned(),
                group: attr(MessageSystemAttributeName::MessageGroupId),
                dedup: attr(MessageSystemAttributeName::MessageDeduplicationId),
                attributes: m
                    .message_attributes()
                    .map(|a| {
                        a.iter()
                            .map(|(k, v)| {
                                (k.clone(), v.string_value().unwrap_or_default().to_owned())
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            });
        }
        if !out.messages().is_empty() {
            let mut delete = client.delete_message_batch().queue_url(url);
            for (i, m) in out.messages().iter().enumerate() {
                delete = delete.entries(
                    aws_sdk_sqs::types::DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(m.receipt_handle().unwrap_or_default())
                        .build()
                        .expect("an entry"),
                );
            }
            delete.send().await.expect("delete");
        } else if relay.wait_exit(Duration::ZERO).is_some() {
            break;
        }
    }
    // In the order received: a FIFO queue hands a group's messages in
    // order (moto's sequence numbers are random, not increasing).
    got
}

/// [`read_queue`] once walrelay has confirmed everything written so far:
/// nothing is sent while the test deletes what it read. moto's
/// `delete_message` rebuilds the queue's list without its lock, and a
/// message sent by another request thread meanwhile is lost (read from
/// moto 5.2.6's `sqs/models.py`); SQS has no such race.
pub(crate) async fn read_settled(
    ob: &Outbox,
    client: &aws_sdk_sqs::Client,
    url: &str,
    want: usize,
    relay: &mut Relay,
) -> Vec<SqsMessage> {
    ob.wait_confirmed(ob.current_lsn().await, relay).await;
    read_queue(client, url, want, relay).await
}

/// `[sink]` for SQS at moto's `port`, with explicit test keys and a short
/// attempt timeout (the outage test hangs the endpoint).
fn sqs_sink(port: u16, extra: &str) -> String {
    format!(
        "[sink]\ntype = \"sqs\"\n\n[sink.sqs]\nregion = \"us-east-1\"\nendpoint = \"http://127.0.0.1:{port}\"\nrequest_timeout_ms = 3000\n{extra}\n\n[sink.sqs.credentials]\naccess_key_id = \"test\"\nsecret_access_key = \"test\"\n"
    )
}

/// A queue name of this test (dots are not allowed in one).
fn queue_name(ob: &Outbox, suffix: &str) -> String {
    format!("{}{suffix}", ob.name.replace('.', "_"))
}

/// FIFO: bodies are the values' bytes, the group is the record key, the
/// deduplication id is the event id, and each group is in commit order;
/// a tombstone and a value SQS cannot carry are refused (here: stop).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_fifo_events_in_order_with_exact_bytes() {
    let moto = Server::moto();
    let client = sqs_client(moto.port).await;
    let ob = Outbox::new("sqs_fifo").await;
    let url = create_queue(&client, &queue_name(&ob, ".fifo")).await;
    let sink = sqs_sink(
        moto.port,
        &format!("queue_url = \"{url}\"\nmessage_attributes = true"),
    );
    let mut relay = Relay::start(&without_kafka(&ob.config(""), &sink));
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k1", r#"{"a": "é €"}"#).await;
    for n in 2..=30 {
        ob.insert(n, "", &format!("k{}", n % 3), &format!("{{\"n\": {n}}}"))
            .await;
    }
    let got = read_settled(&ob, &client, &url, 30, &mut relay).await;
    assert_eq!(got.len(), 30, "{}", tail(&relay.log(), 30));
    assert_eq!(got[0].body, r#"{"a": "é €"}"#);
    assert_eq!(got[0].group.as_deref(), Some("k1"));
    assert_eq!(got[0].dedup.as_deref(), Some(event_id(1).as_str()));
    // The outbox's `id` header as a String attribute.
    assert_eq!(got[0].attributes.get("id"), Some(&event_id(1)));
    let mut per_group: HashMap<String, Vec<u64>> = HashMap::new();
    for m in &got[1..] {
        let n = serde_json::from_str::<serde_json::Value>(&m.body).unwrap()["n"]
            .as_u64()
            .unwrap();
        assert_eq!(m.group.as_deref(), Some(format!("k{}", n % 3).as_str()));
        assert_eq!(m.dedup.as_deref(), Some(event_id(n).as_str()));
        per_group
            .entry(m.group.clone().unwrap())
            .or_default()
            .push(n);
    }
    for (g, ns) in &per_group {
        let mut sorted = ns.clone();
        sorted.sort_unstable();
        assert_eq!(ns, &sorted, "group {g} in commit order");
    }
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    // A tombstone: no body SQS takes; under errors.tolerance = none the
    // pipeline stops before it, and the slot stays before it.
    ob.insert_null_payload(31, "k1").await;
    ob.insert(32, "", "k1", "{}").await;
    assert_ne!(
        relay.exit_code(WAIT),
        0,
        "walrelay must stop: {}",
        tail(&relay.log(), 20)
    );
    assert!(
        relay.log().contains("tombstone"),
        "{}",
        tail(&relay.log(), 20)
    );
    assert!(
        read_queue(&client, &url, 1, &mut relay).await.is_empty(),
        "nothing past it"
    );
    ob.finish_exited(relay).await;
}

/// A record too large for SQS (and a tombstone) stops the pipeline under
/// `none`; under `all` both go to the dead-letter queue, named by the
/// dead-letter topic (its URL asked with GetQueueUrl), and the rest flows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_refused_record_stops_or_is_dead_lettered() {
    let moto = Server::moto();
    let client = sqs_client(moto.port).await;
    let ob = Outbox::new("sqs_refused").await;
    let url = create_queue(&client, &queue_name(&ob, "")).await;
    let dlq = queue_name(&ob, "_dlq");
    let dlq_url = create_queue(&client, &dlq).await;
    let sink = sqs_sink(
        moto.port,
        &format!("queue_url = \"{url}\"\nmax_message_bytes = 1000"),
    );
    let mut relay = Relay::start(&without_kafka(&ob.config(""), &sink));
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k", "{}").await;
    assert_eq!(
        read_settled(&ob, &client, &url, 1, &mut relay).await.len(),
        1
    );
    let big = refused_large_record_stops(&ob, &mut relay, "max_message_bytes").await;
    assert!(
        read_queue(&client, &url, 1, &mut relay).await.is_empty(),
        "nothing past it"
    );
    // Event 2 is read again: nothing past it was confirmed.
    let dead = format!("[errors]\ntolerance = \"all\"\ndead_letter_topic = \"{dlq}\"\n");
    let mut relay = Relay::start(&without_kafka(&ob.config(""), &format!("{sink}{dead}")));
    ob.wait_active(&mut relay).await;
    ob.insert(4, "", "k", "{\"last\": 1}").await;
    let main = read_settled(&ob, &client, &url, 2, &mut relay).await;
    let bodies: Vec<&str> = main.iter().map(|m| m.body.as_str()).collect();
    assert_eq!(bodies.len(), 2, "{}", tail(&relay.log(), 20));
    assert!(
        bodies.contains(&"{}") && bodies.contains(&"{\"last\": 1}"),
        "{bodies:?}"
    );
    // The dead letter: a JSON object with the key, the value (bounded by
    // SQS's own 1 MiB, not max_message_bytes) and the context headers.
    let letters = read_queue(&client, &dlq_url, 1, &mut relay).await;
    assert_eq!(letters.len(), 1, "{}", tail(&relay.log(), 30));
    let letter: serde_json::Value = serde_json::from_str(&letters[0].body).expect("a JSON letter");
    assert_eq!(letter["key"], "k");
    assert_eq!(letter["value"], big.as_str());
    assert_eq!(
        letter["headers"]["walrelay.error.kind"], "message_too_large",
        "{letter}"
    );
    assert_eq!(
        letter["headers"]["walrelay.event.id"],
        event_id(2).as_str(),
        "{letter}"
    );
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    ob.finish(relay).await;
}

/// SIGKILL under load to a FIFO queue: every committed event arrives, in
/// order per key, and none twice (the restart resends within SQS's
/// deduplication window: SQS drops what it already has).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_sigkill_under_load_delivers_every_event_once() {
    let moto = Server::moto();
    let client = sqs_client(moto.port).await;
    let ob = Outbox::new("sqs_kill").await;
    let url = create_queue(&client, &queue_name(&ob, ".fifo")).await;
    let sink = sqs_sink(
        moto.port,
        &format!("queue_url = \"{url}\"\nmessage_attributes = true"),
    );
    let config = without_kafka(&ob.config(""), &sink);
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    let read = async |relay: &mut Relay, log: &LoadLog| {
        read_load(&ob, &client, &url, log.committed.len(), relay).await
    };
    // 600 events, killed after 200: moto's SQS gets slower as the queue
    // fills, and the test reads only what walrelay confirmed (see
    // `read_settled`).
    let relay = sigkill_under_load_sized(
        &ob,
        relay,
        &config,
        Delivered::ExactlyOnce,
        (600, 200),
        read,
    )
    .await;
    ob.finish(relay).await;
}

/// What the load checker reads after [`sigkill_under_load_sized`]: the
/// queue's messages, once walrelay confirmed them, until `total` arrived
/// or 150 s passed.
async fn read_load(
    ob: &Outbox,
    client: &aws_sdk_sqs::Client,
    url: &str,
    total: usize,
    relay: &mut Relay,
) -> Vec<Record> {
    let mut seen: Vec<SqsMessage> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(150);
    while seen.len() < total && Instant::now() < deadline {
        seen.extend(read_settled(ob, client, url, total - seen.len(), relay).await);
    }
    seen.iter().map(record_of).collect()
}

/// A message as the load checker reads records: the group as the key, the
/// `id` attribute as the `id` header.
fn record_of(m: &SqsMessage) -> Record {
    Record {
        partition: 0,
        offset: 0,
        key: m.group.clone().map(String::into_bytes),
        value: Some(m.body.clone().into_bytes()),
        headers: vec![(
            "id".to_owned(),
            m.attributes.get("id").map(|v| v.clone().into_bytes()),
        )],
    }
}

/// The endpoint hangs for a while (SIGSTOP): the slot stays before what
/// was not stored, walrelay keeps running, and every event arrives in
/// order once it answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_outage_holds_the_slot_then_delivers() {
    let moto = Server::moto();
    let client = sqs_client(moto.port).await;
    let ob = Outbox::new("sqs_outage").await;
    let url = create_queue(&client, &queue_name(&ob, ".fifo")).await;
    let sink = sqs_sink(
        moto.port,
        &format!("queue_url = \"{url}\"\nmessage_group_id = \"all\""),
    );
    let mut relay = Relay::start(&without_kafka(&ob.config(""), &sink));
    ob.wait_active(&mut relay).await;
    ob.insert_series(1, 50).await;
    assert_eq!(
        read_settled(&ob, &client, &url, 50, &mut relay).await.len(),
        50
    );
    moto.pause();
    let pre_commit = ob.insert_series_reading_pre_commit_lsn(51, 150).await;
    ob.slot_held_before(pre_commit, &mut relay, "SQS").await;
    moto.resume();
    let got = read_settled(&ob, &client, &url, 100, &mut relay).await;
    let numbers: Vec<u64> = got
        .iter()
        .filter_map(|m| serde_json::from_str::<serde_json::Value>(&m.body).ok()?["n"].as_u64())
        .collect();
    assert_eq!(
        numbers,
        (51..=150).collect::<Vec<_>>(),
        "in order, none lost, none twice"
    );
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    ob.finish(relay).await;
}

/// The polling source publishing to a standard queue: rows become
/// messages and are marked published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_from_the_polling_source() {
    let _ = env();
    let moto = Server::moto();
    let client = sqs_client(moto.port).await;
    let ob = crate::poll::PollBox::new("sqs_poll").await;
    let url = create_queue(&client, &format!("{}_q", ob.name.replace('.', "_"))).await;
    let port = free_port();
    let sink = sqs_sink(moto.port, &format!("queue_url = \"{url}\""));
    let mut relay = Relay::start(&without_kafka(&ob.config(port, "", ""), &sink));
    for i in 1..=20 {
        ob.insert(i, &format!("k{}", i % 4)).await;
    }
    ob.wait_published(20, &mut relay).await;
    let got = read_queue(&client, &url, 20, &mut relay).await;
    assert_eq!(got.len(), 20);
    let view = crate::common::metrics::pipeline(port)
        .await
        .expect("the state");
    let broker = view.broker.expect("the broker in /api/state");
    assert_eq!(broker.name, "sqs");
    assert!(broker.acked_total >= 20, "{broker:?}");
    relay.signal("TERM");
    assert_eq!(relay.exit_code(WAIT), 0, "{}", relay.log());
}

/// A Kinesis client of the test's moto server.
pub(crate) async fn kinesis_client(port: u16) -> aws_sdk_kinesis::Client {
    let creds = aws_sdk_kinesis::config::Credentials::new("test", "test", None, None, "test");
    let config = aws_sdk_kinesis::Config::builder()
        .behavior_version(aws_sdk_kinesis::config::BehaviorVersion::latest())
        .region(aws_sdk_kinesis::config::Region::new("us-east-1"))
        .endpoint_url(format!("http://127.0.0.1:{port}"))
        .credentials_provider(creds)
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .build();
    aws_sdk_kinesis::Client::from_conf(config)
}

/// Creates stream `name` with `shards` shards.
pub(crate) async fn create_stream(client: &aws_sdk_kinesis::Client, name: &str, shards: i32) {
    client
        .create_stream()
        .stream_name(name)
        .shard_count(shards)
        .send()
        .await
        .expect("create stream");
}

/// One Kinesis record as read back.
#[derive(Debug, Clone)]
pub(crate) struct KinesisRecord {
    pub(crate) key: String,
    pub(crate) data: Vec<u8>,
}

/// Every record of `stream` (each shard from its start, shard after
/// shard: per partition key in stored order), once `want` are there or
/// `relay` exited or the wait ended.
pub(crate) async fn read_stream(
    client: &aws_sdk_kinesis::Client,
    stream: &str,
    want: usize,
    relay: &mut Relay,
) -> Vec<KinesisRecord> {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let got = read_all(client, stream).await;
        if got.len() >= want
            || Instant::now() > deadline
            || relay.wait_exit(Duration::ZERO).is_some()
        {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

async fn read_all(client: &aws_sdk_kinesis::Client, stream: &str) -> Vec<KinesisRecord> {
    let shards = client
        .list_shards()
        .stream_name(stream)
        .send()
        .await
        .expect("list shards");
    let mut got = Vec::new();
    for shard in shards.shards() {
        let mut iterator = client
            .get_shard_iterator()
            .stream_name(stream)
            .shard_id(shard.shard_id())
            .shard_iterator_type(aws_sdk_kinesis::types::ShardIteratorType::TrimHorizon)
            .send()
            .await
            .expect("shard iterator")
            .shard_iterator;
        while let Some(it) = iterator {
            let out = client
                .get_records()
                .shard_iterator(it)
                .limit(10_000)
                .send()
                .await
                .expect("get records");
            for r in out.records() {
                got.push(KinesisRecord {
                    key: r.partition_key().unwrap_or_default().to_owned(),
                    data: r.data().as_ref().to_vec(),
                });
            }
            if out.records().is_empty()
                || out.millis_behind_latest() == Some(0) && out.records().len() < 10_000
            {
                break;
            }
            iterator = out.next_shard_iterator;
        }
    }
    got
}

/// `[sink]` for Kinesis at moto's `port`.
fn kinesis_sink(port: u16, extra: &str) -> String {
    format!(
        "[sink]\ntype = \"kinesis\"\n\n[sink.kinesis]\nregion = \"us-east-1\"\nendpoint = \"http://127.0.0.1:{port}\"\nrequest_timeout_ms = 3000\n{extra}\n\n[sink.kinesis.credentials]\naccess_key_id = \"test\"\nsecret_access_key = \"test\"\n"
    )
}

/// The `n` of each record's `{"n": n}` data, per partition key, in
/// stored order.
fn per_key_numbers(records: &[KinesisRecord]) -> HashMap<String, Vec<u64>> {
    numbers_per_key(records.iter().map(|r| (r.key.as_str(), r.data.as_slice())))
}

/// The stream is the topic, the data the value's bytes (empty for a null
/// value), the partition key the record key; per key in commit order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinesis_events_in_order_with_exact_bytes() {
    let moto = Server::moto();
    let client = kinesis_client(moto.port).await;
    let ob = Outbox::new("kinesis_order").await;
    create_stream(&client, &ob.topic(""), 2).await;
    let mut relay = Relay::start(&without_kafka(&ob.config(""), &kinesis_sink(moto.port, "")));
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k1", r#"{"a": "é €"}"#).await;
    ob.insert_null_payload(2, "k1").await;
    for n in 3..=40 {
        ob.insert(n, "", &format!("k{}", n % 4), &format!("{{\"n\": {n}}}"))
            .await;
    }
    let got = read_stream(&client, &ob.topic(""), 40, &mut relay).await;
    assert_eq!(got.len(), 40, "{}", tail(&relay.log(), 30));
    let first: Vec<&KinesisRecord> = got.iter().filter(|r| r.key == "k1").take(2).collect();
    assert_eq!(first[0].data, r#"{"a": "é €"}"#.as_bytes());
    assert!(first[1].data.is_empty(), "a null value is empty data");
    for (key, ns) in per_key_numbers(&got) {
        let want: Vec<u64> = (3..=40).filter(|n| format!("k{}", n % 4) == key).collect();
        assert_eq!(ns, want, "key {key}: every event once, in commit order");
    }
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    ob.finish(relay).await;
}

/// A record too large for Kinesis stops the pipeline under `none`, with
/// nothing past it stored; under `all` it goes to the dead-letter stream
/// (a JSON letter with its value and context) and the rest flows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinesis_refused_record_stops_or_is_dead_lettered() {
    let moto = Server::moto();
    let client = kinesis_client(moto.port).await;
    let ob = Outbox::new("kinesis_refused").await;
    create_stream(&client, &ob.topic(""), 1).await;
    let dlq = format!("dlq.{}", ob.name);
    create_stream(&client, &dlq, 1).await;
    let sink = kinesis_sink(moto.port, "max_record_bytes = 1000");
    let mut relay = Relay::start(&without_kafka(&ob.config(""), &sink));
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k", "{}").await;
    assert_eq!(
        read_stream(&client, &ob.topic(""), 1, &mut relay)
            .await
            .len(),
        1
    );
    let big = refused_large_record_stops(&ob, &mut relay, "max_record_bytes").await;
    assert_eq!(
        read_stream(&client, &ob.topic(""), 2, &mut relay)
            .await
            .len(),
        1,
        "nothing past it"
    );
    ob.remove_all().await;
    let ob = Outbox::new("kinesis_refused_dl").await;
    create_stream(&client, &ob.topic(""), 1).await;
    let dead = format!("[errors]\ntolerance = \"all\"\ndead_letter_topic = \"{dlq}\"\n");
    let mut relay = Relay::start(&without_kafka(&ob.config(""), &format!("{sink}{dead}")));
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k", &big).await;
    ob.insert(2, "", "k", "{\"last\": 1}").await;
    let main = read_stream(&client, &ob.topic(""), 1, &mut relay).await;
    assert_eq!(main.len(), 1, "{}", tail(&relay.log(), 20));
    assert_eq!(main[0].data, b"{\"last\": 1}");
    let letters = read_stream(&client, &dlq, 1, &mut relay).await;
    assert_eq!(letters.len(), 1, "{}", tail(&relay.log(), 30));
    assert_eq!(letters[0].key, "k");
    // A JSON letter: key, value (1 MiB is Kinesis's bound for it, not
    // max_record_bytes) and the context headers.
    let letter: serde_json::Value =
        serde_json::from_slice(&letters[0].data).expect("a JSON letter");
    assert_eq!(letter["key"], "k");
    assert_eq!(letter["value"], big.as_str());
    assert_eq!(
        letter["headers"]["walrelay.error.kind"], "message_too_large",
        "{letter}"
    );
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    ob.finish(relay).await;
}

/// SIGKILL under load to Kinesis: every committed event arrives, in order
/// per key (at least once: a restart may write some twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinesis_sigkill_under_load_delivers_every_event() {
    let moto = Server::moto();
    let client = kinesis_client(moto.port).await;
    let ob = Outbox::new("kinesis_kill").await;
    create_stream(&client, &ob.topic(""), 4).await;
    let config = without_kafka(&ob.config(""), &kinesis_sink(moto.port, ""));
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    let read = async |relay: &mut Relay, log: &LoadLog| {
        let total = log.committed.len();
        let deadline = Instant::now() + Duration::from_secs(150);
        loop {
            let got = read_stream(&client, &ob.topic(""), total, relay).await;
            let records: Vec<Record> = got.iter().map(kinesis_record).collect();
            let distinct: std::collections::HashSet<_> =
                records.iter().filter_map(|r| r.header("id")).collect();
            if distinct.len() >= total || Instant::now() > deadline {
                break records;
            }
        }
    };
    let relay = sigkill_under_load(&ob, relay, &config, Delivered::AtLeastOnce, read).await;
    ob.finish(relay).await;
}

/// A Kinesis record as the load checker reads records: the partition key
/// as the key, the event id (the generator's payload carries it) as the
/// `id` header.
fn kinesis_record(r: &KinesisRecord) -> Record {
    let id = serde_json::from_slice::<serde_json::Value>(&r.data)
        .ok()
        .and_then(|v| v["id"].as_str().map(|s| s.as_bytes().to_vec()));
    Record {
        partition: 0,
        offset: 0,
        key: Some(r.key.clone().into_bytes()),
        value: Some(r.data.clone()),
        headers: vec![("id".to_owned(), id)],
    }
}

/// The endpoint hangs for a while (SIGSTOP): the slot stays before what
/// was not stored, and every event arrives in order once it answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinesis_outage_holds_the_slot_then_delivers() {
    let moto = Server::moto();
    let client = kinesis_client(moto.port).await;
    let ob = Outbox::new("kinesis_outage").await;
    create_stream(&client, &ob.topic(""), 1).await;
    let mut relay = Relay::start(&without_kafka(&ob.config(""), &kinesis_sink(moto.port, "")));
    ob.wait_active(&mut relay).await;
    ob.insert_series(1, 50).await;
    assert_eq!(
        read_stream(&client, &ob.topic(""), 50, &mut relay)
            .await
            .len(),
        50
    );
    moto.pause();
    let pre_commit = ob.insert_series_reading_pre_commit_lsn(51, 150).await;
    ob.slot_held_before(pre_commit, &mut relay, "Kinesis").await;
    moto.resume();
    // At least once: requests the hung endpoint queued run when it
    // resumes, after walrelay gave up on them and sent them again.
    let deadline = Instant::now() + Duration::from_secs(90);
    let firsts = loop {
        let got = read_stream(&client, &ob.topic(""), 150, &mut relay).await;
        let mut seen = std::collections::HashSet::new();
        let firsts: Vec<u64> = got
            .iter()
            .filter_map(|r| {
                serde_json::from_slice::<serde_json::Value>(&r.data).ok()?["n"].as_u64()
            })
            .filter(|n| seen.insert(*n))
            .collect();
        if firsts.len() >= 150 || Instant::now() > deadline {
            break firsts;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    relay.assert_running();
    assert_eq!(firsts, (1..=150).collect::<Vec<_>>(), "in order, none lost");
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    ob.finish(relay).await;
}

/// An SNS client of the test's moto server.
pub(crate) async fn sns_client(port: u16) -> aws_sdk_sns::Client {
    let creds = aws_sdk_sns::config::Credentials::new("test", "test", None, None, "test");
    let config = aws_sdk_sns::Config::builder()
        .behavior_version(aws_sdk_sns::config::BehaviorVersion::latest())
        .region(aws_sdk_sns::config::Region::new("us-east-1"))
        .endpoint_url(format!("http://127.0.0.1:{port}"))
        .credentials_provider(creds)
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .build();
    aws_sdk_sns::Client::from_conf(config)
}

/// Creates topic `name` (FIFO when it ends in `.fifo`, without
/// content-based deduplication) with a queue subscribed by raw delivery;
/// returns the topic's ARN and the queue's URL.
pub(crate) async fn topic_with_queue(port: u16, name: &str) -> (String, String) {
    let sns = sns_client(port).await;
    let sqs = sqs_client(port).await;
    let mut create = sns.create_topic().name(name);
    if name.ends_with(".fifo") {
        create = create.attributes("FifoTopic", "true");
    }
    let arn = create
        .send()
        .await
        .expect("create topic")
        .topic_arn
        .expect("an ARN");
    let url = create_queue(&sqs, name).await;
    let queue_arn = format!("arn:aws:sqs:us-east-1:{ACCOUNT}:{name}");
    sns.subscribe()
        .topic_arn(&arn)
        .protocol("sqs")
        .endpoint(queue_arn)
        .attributes("RawMessageDelivery", "true")
        .return_subscription_arn(true)
        .send()
        .await
        .expect("subscribe");
    (arn, url)
}

/// `[sink]` for SNS at moto's `port`.
fn sns_sink(port: u16, extra: &str) -> String {
    format!(
        "[sink]\ntype = \"sns\"\n\n[sink.sns]\nregion = \"us-east-1\"\nendpoint = \"http://127.0.0.1:{port}\"\nrequest_timeout_ms = 3000\n{extra}\n\n[sink.sns.credentials]\naccess_key_id = \"test\"\nsecret_access_key = \"test\"\n"
    )
}

/// FIFO topic: the message is the value's text, the headers String
/// attributes, the group the record key and the deduplication id the
/// event id; each group in commit order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sns_fifo_events_in_order_with_exact_bytes() {
    let moto = Server::moto();
    let ob = Outbox::new("sns_fifo").await;
    let (arn, url) = topic_with_queue(moto.port, &queue_name(&ob, ".fifo")).await;
    let sqs = sqs_client(moto.port).await;
    let sink = sns_sink(moto.port, &format!("topic_arn = \"{arn}\""));
    let mut relay = Relay::start(&without_kafka(&ob.config(""), &sink));
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k1", r#"{"a": "é €"}"#).await;
    for n in 2..=30 {
        ob.insert(n, "", &format!("k{}", n % 3), &format!("{{\"n\": {n}}}"))
            .await;
    }
    let got = read_settled(&ob, &sqs, &url, 30, &mut relay).await;
    assert_eq!(got.len(), 30, "{}", tail(&relay.log(), 30));
    assert_eq!(got[0].body, r#"{"a": "é €"}"#);
    assert_eq!(got[0].attributes.get("id"), Some(&event_id(1)));
    assert_eq!(got[0].group.as_deref(), Some("k1"));
    assert_eq!(got[0].dedup.as_deref(), Some(event_id(1).as_str()));
    let mut per_group: HashMap<String, Vec<u64>> = HashMap::new();
    for m in &got[1..] {
        let n = serde_json::from_str::<serde_json::Value>(&m.body).unwrap()["n"]
            .as_u64()
            .unwrap();
        assert_eq!(m.group.as_deref(), Some(format!("k{}", n % 3).as_str()));
        per_group
            .entry(m.group.clone().unwrap())
            .or_default()
            .push(n);
    }
    for (g, ns) in &per_group {
        let mut sorted = ns.clone();
        sorted.sort_unstable();
        assert_eq!(ns, &sorted, "group {g} in commit order");
    }
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    ob.finish(relay).await;
}

/// A message over SNS's 256 KiB stops the pipeline under `none`, nothing
/// past it published; under `all` it goes to the dead-letter topic as a
/// JSON letter and the rest flows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sns_refused_record_stops_or_is_dead_lettered() {
    let moto = Server::moto();
    let ob = Outbox::new("sns_refused").await;
    let (arn, url) = topic_with_queue(moto.port, &queue_name(&ob, "")).await;
    let dlq = queue_name(&ob, "_dlq");
    let (dlq_arn, dlq_url) = topic_with_queue(moto.port, &dlq).await;
    let sqs = sqs_client(moto.port).await;
    let sink = sns_sink(
        moto.port,
        &format!("topic_arn = \"{arn}\"\ndead_letter_topic_arn = \"{dlq_arn}\""),
    );
    let mut relay = Relay::start(&without_kafka(&ob.config(""), &sink));
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k", "{}").await;
    assert_eq!(read_settled(&ob, &sqs, &url, 1, &mut relay).await.len(), 1);
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(300 * 1024));
    ob.insert(2, "", "k", &big).await;
    ob.insert(3, "", "k", "{}").await;
    assert_ne!(
        relay.exit_code(WAIT),
        0,
        "walrelay must stop: {}",
        relay.log()
    );
    assert!(
        relay.log().contains("message_too_large") || relay.log().contains("above SNS"),
        "{}",
        tail(&relay.log(), 20)
    );
    assert!(
        read_queue(&sqs, &url, 1, &mut relay).await.is_empty(),
        "nothing past it"
    );
    let dead = format!("[errors]\ntolerance = \"all\"\ndead_letter_topic = \"{dlq}\"\n");
    let mut relay = Relay::start(&without_kafka(&ob.config(""), &format!("{sink}{dead}")));
    ob.wait_active(&mut relay).await;
    ob.insert(4, "", "k", "{\"last\": 1}").await;
    let main = read_settled(&ob, &sqs, &url, 2, &mut relay).await;
    let bodies: Vec<&str> = main.iter().map(|m| m.body.as_str()).collect();
    assert_eq!(
        bodies,
        vec!["{}", "{\"last\": 1}"],
        "{}",
        tail(&relay.log(), 20)
    );
    let letters = read_queue(&sqs, &dlq_url, 1, &mut relay).await;
    assert_eq!(letters.len(), 1, "{}", tail(&relay.log(), 30));
    let letter: serde_json::Value = serde_json::from_str(&letters[0].body).expect("a JSON letter");
    assert_eq!(letter["key"], "k");
    assert_eq!(
        letter["value"],
        serde_json::Value::Null,
        "the value dropped to fit: {letter}"
    );
    assert_eq!(
        letter["headers"]["walrelay.error.kind"], "message_too_large",
        "{letter}"
    );
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    ob.finish(relay).await;
}

/// SIGKILL under load to a FIFO topic: every committed event arrives, in
/// order per key, none twice (SNS drops a resent deduplication id).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sns_sigkill_under_load_delivers_every_event_once() {
    let moto = Server::moto();
    let ob = Outbox::new("sns_kill").await;
    let (arn, url) = topic_with_queue(moto.port, &queue_name(&ob, ".fifo")).await;
    let client = sqs_client(moto.port).await;
    let config = without_kafka(
        &ob.config(""),
        &sns_sink(moto.port, &format!("topic_arn = \"{arn}\"")),
    );
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    let read = async |relay: &mut Relay, log: &LoadLog| {
        read_load(&ob, &client, &url, log.committed.len(), relay).await
    };
    // 600 events, killed after 200: moto's SQS gets slower as the queue
    // fills, and the test reads only what walrelay confirmed (see
    // `read_settled`).
    let relay = sigkill_under_load_sized(
        &ob,
        relay,
        &config,
        Delivered::ExactlyOnce,
        (600, 200),
        read,
    )
    .await;
    ob.finish(relay).await;
}

/// The endpoint hangs for a while (SIGSTOP): the slot stays before what
/// was not published, and every event arrives once it answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sns_outage_holds_the_slot_then_delivers() {
    let moto = Server::moto();
    let ob = Outbox::new("sns_outage").await;
    let (arn, url) = topic_with_queue(moto.port, &queue_name(&ob, "")).await;
    let sqs = sqs_client(moto.port).await;
    let mut relay = Relay::start(&without_kafka(
        &ob.config(""),
        &sns_sink(moto.port, &format!("topic_arn = \"{arn}\"")),
    ));
    ob.wait_active(&mut relay).await;
    ob.insert_series(1, 50).await;
    assert_eq!(
        read_settled(&ob, &sqs, &url, 50, &mut relay).await.len(),
        50
    );
    moto.pause();
    let pre_commit = ob.insert_series_reading_pre_commit_lsn(51, 150).await;
    ob.slot_held_before(pre_commit, &mut relay, "SNS").await;
    moto.resume();
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut numbers = std::collections::BTreeSet::new();
    while numbers.len() < 100 && Instant::now() < deadline {
        for m in read_settled(&ob, &sqs, &url, 100, &mut relay).await {
            if let Some(n) = serde_json::from_str::<serde_json::Value>(&m.body)
                .ok()
                .and_then(|v| v["n"].as_u64())
            {
                numbers.insert(n);
            }
        }
    }
    relay.assert_running();
    assert_eq!(
        numbers.into_iter().collect::<Vec<_>>(),
        (51..=150).collect::<Vec<_>>(),
        "none lost"
    );
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    ob.finish(relay).await;
}

/// `walrelay check` with SQS: the credentials sign; a destination without
/// its queue fails the destinations row, naming the queue; once the queue
/// exists the row passes and says its kind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_check_names_a_missing_queue() {
    let moto = Server::moto();
    let client = sqs_client(moto.port).await;
    let ob = Outbox::new("sqs_check").await;
    ob.insert(1, "", "k", "{}").await;
    let queue = queue_name(&ob, "");
    let sink = sqs_sink(
        moto.port,
        &format!(
            "queue_url_prefix = \"http://127.0.0.1:{}/{ACCOUNT}/\"",
            moto.port
        ),
    );
    let router = format!(
        "[metrics]\nlisten = \"127.0.0.1:0\"\n\n[router]\nroute_topic_replacement = \"{queue}\"\n"
    );
    let config = without_kafka(&ob.config_with("", &router), &sink);
    let (code, text) = walrelay_check(&config).await;
    assert_ne!(code, Some(0), "{text}");
    assert!(
        check_row(&text, "broker connection").contains("sqs"),
        "{text}"
    );
    let row = check_row(&text, "broker destinations");
    assert!(row.starts_with("FAIL") && row.contains(&queue), "{text}");
    create_queue(&client, &queue).await;
    let (_, text) = walrelay_check(&config).await;
    assert!(
        check_row(&text, "broker destinations").contains("standard"),
        "{text}"
    );
    ob.remove_all().await;
}
