//! RabbitMQ (AMQP 0-9-1, publisher confirms), each test on a
//! rabbitmq-server of its own ([`Server::rabbitmq`]). Each test declares
//! the exchanges and durable queues it reads, and asserts on what a
//! consumer gets (exchange, routing key, properties, headers, body, order)
//! and on the slot: the events in order with exact bytes, Debezium
//! Server's form (JSON envelopes as long-string headers), SIGKILL under
//! load, a 30-second outage, a restart that routes nothing for a while,
//! an unroutable record and a missing exchange
//! under both error policies, and the polling source.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use lapin::options::{
    BasicGetOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};

use crate::brokers::{without_kafka, Server};
use crate::common::load::{sigkill_under_load, Delivered, LoadLog};
use crate::common::metrics::{exposition, free_port};
use crate::common::relay::{event_id, event_number, tail, Outbox, Relay, WAIT};
use crate::common::{env, Record};

/// One message as a consumer got it.
#[derive(Debug, Clone)]
struct Message {
    exchange: String,
    routing_key: String,
    properties: BasicProperties,
    body: Vec<u8>,
}

impl Message {
    /// A header's value as bytes (long string or byte array).
    fn header(&self, name: &str) -> Option<Vec<u8>> {
        let table = self.properties.headers().as_ref()?;
        match table.inner().get(name)? {
            AMQPValue::LongString(s) => Some(s.as_bytes().to_vec()),
            AMQPValue::ByteArray(b) => Some(b.as_slice().to_vec()),
            _ => None,
        }
    }

    fn number(&self) -> Option<u64> {
        event_number(&self.header("id")?)
    }

    /// As a [`Record`] for the load checks (the key from `keys`, by id).
    fn record(&self, keys: &HashMap<&str, &str>) -> Record {
        let id = self.header("id").unwrap_or_default();
        let key = keys
            .get(String::from_utf8_lossy(&id).as_ref())
            .map(|k| k.as_bytes().to_vec());
        Record {
            partition: 0,
            offset: 0,
            key,
            value: Some(self.body.clone()),
            headers: vec![("id".to_owned(), Some(id))],
        }
    }
}

async fn amqp(port: u16) -> lapin::Result<(Connection, Channel)> {
    let conn = Connection::connect(
        &format!("amqp://guest:guest@127.0.0.1:{port}/%2f"),
        ConnectionProperties::default(),
    )
    .await?;
    let channel = conn.create_channel().await?;
    Ok((conn, channel))
}

/// Declares exchange `exchange` of `kind` (durable) and, when `queue` is
/// given, a durable queue bound to it with `binding`.
async fn declare(port: u16, exchange: &str, kind: ExchangeKind, queue: Option<(&str, &str)>) {
    let (_conn, ch) = amqp(port).await.expect("connect to rabbitmq");
    ch.exchange_declare(
        exchange.into(),
        kind,
        ExchangeDeclareOptions {
            durable: true,
            ..ExchangeDeclareOptions::default()
        },
        FieldTable::default(),
    )
    .await
    .expect("declare the exchange");
    if let Some((queue, binding)) = queue {
        ch.queue_declare(
            queue.into(),
            QueueDeclareOptions {
                durable: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .expect("declare the queue");
        ch.queue_bind(
            queue.into(),
            exchange.into(),
            binding.into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("bind the queue");
    }
}

/// Removes the binding of `queue` to `exchange` (routing key `""`).
async fn unbind(port: u16, queue: &str, exchange: &str) {
    let (_conn, ch) = amqp(port).await.expect("connect to rabbitmq");
    ch.queue_unbind(
        queue.into(),
        exchange.into(),
        "".into(),
        FieldTable::default(),
    )
    .await
    .expect("unbind the queue");
}

/// walrelay's `walrelay_broker_retries_total` for RabbitMQ (0 before the
/// first), read from its `/metrics` on `port`.
async fn retries(port: u16, relay: &mut Relay) -> f64 {
    loop {
        if let Some(series) = exposition(port).await {
            return series
                .get("walrelay_broker_retries_total{broker=\"rabbitmq\"}")
                .copied()
                .unwrap_or(0.0);
        }
        relay.assert_running();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// walrelay stopped on event `n`, naming it and the `basic.return` of its
/// mandatory publish.
fn stopped_on_return(relay: &mut Relay, n: u64) {
    assert_ne!(relay.exit_code(WAIT), 0, "walrelay must stop on event {n}");
    let log = relay.log();
    assert!(
        log.contains(&event_id(n)) && log.contains("basic.return"),
        "the error names event {n} and the return: {}",
        tail(&log, 20)
    );
}

/// A consumer of one queue that keeps what it got (`basic.get`, no ack:
/// a message is taken once).
struct Reader {
    port: u16,
    queue: String,
    got: Vec<Message>,
}

impl Reader {
    fn new(port: u16, queue: &str) -> Reader {
        Reader {
            port,
            queue: queue.to_owned(),
            got: Vec::new(),
        }
    }

    /// Reads until `done(&got)` holds, bounded; reconnects after a broker
    /// outage.
    async fn until(&mut self, relay: &mut Relay, done: impl Fn(&[Message]) -> bool) -> &[Message] {
        let deadline = Instant::now() + Duration::from_secs(180);
        let mut channel: Option<(Connection, Channel)> = None;
        while !done(&self.got) {
            relay.assert_running();
            assert!(
                Instant::now() < deadline,
                "queue {} gave {} messages, not enough\n{}",
                self.queue,
                self.got.len(),
                tail(&relay.log(), 40)
            );
            if channel.is_none() {
                channel = amqp(self.port).await.ok();
            }
            let Some((_, ch)) = &channel else {
                tokio::time::sleep(Duration::from_millis(300)).await;
                continue;
            };
            match ch
                .basic_get(self.queue.as_str().into(), BasicGetOptions { no_ack: true })
                .await
            {
                Ok(Some(m)) => {
                    let d = m.delivery;
                    self.got.push(Message {
                        exchange: d.exchange.to_string(),
                        routing_key: d.routing_key.to_string(),
                        properties: d.properties,
                        body: d.data,
                    });
                }
                Ok(None) => tokio::time::sleep(Duration::from_millis(100)).await,
                Err(_) => {
                    channel = None;
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
            }
        }
        &self.got
    }

    /// Reads until at least `n` messages.
    async fn at_least(&mut self, relay: &mut Relay, n: usize) -> &[Message] {
        self.until(relay, |got| got.len() >= n).await
    }

    /// Reads until every event number in `want` arrived.
    async fn numbers(&mut self, relay: &mut Relay, want: &HashSet<u64>) -> &[Message] {
        self.until(relay, |got| {
            let seen: HashSet<u64> = got.iter().filter_map(Message::number).collect();
            want.is_subset(&seen)
        })
        .await
    }
}

fn sink(port: u16, extra: &str) -> String {
    format!(
        "[sink]\ntype = \"rabbitmq\"\n\n[sink.rabbitmq]\nurl = \"amqp://guest:guest@127.0.0.1:{port}/%2f\"\n{extra}\n"
    )
}

/// The event numbers of `got`, each at its first arrival.
fn first_arrivals(got: &[Message]) -> Vec<u64> {
    let mut seen = HashSet::new();
    got.iter()
        .filter_map(Message::number)
        .filter(|n| seen.insert(*n))
        .collect()
}

/// Events in order, byte for byte as Debezium Server's rabbitmq sink
/// publishes them: to the exchange named after the topic, routing key "",
/// properties `delivery_mode` 2 and the headers (long strings) and nothing
/// else, the body the payload, `default` for a null payload; the slot is
/// confirmed past them and nothing more arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_events_in_order_with_exact_bytes() {
    let rabbit = Server::rabbitmq();
    let ob = Outbox::new("rmq_order").await;
    let queue = format!("q_{}", ob.name);
    declare(
        rabbit.port,
        &ob.topic(""),
        ExchangeKind::Fanout,
        Some((&queue, "")),
    )
    .await;
    let config = without_kafka(&ob.config(""), &sink(rabbit.port, ""));
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k1", r#"{"a": 1, "b": [1, 2]}"#).await;
    ob.insert_null_payload(2, "k1").await;
    for n in 3..=10 {
        ob.insert(n, "", &format!("k{}", n % 3), &format!("{{\"n\": {n}}}"))
            .await;
    }
    let end = ob.current_lsn().await;
    let mut reader = Reader::new(rabbit.port, &queue);
    reader.at_least(&mut relay, 10).await;
    ob.wait_confirmed(end, &relay).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Nothing more: a get on the empty queue.
    let (_c, ch) = amqp(rabbit.port).await.unwrap();
    let extra = ch
        .basic_get(queue.as_str().into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap();
    assert!(extra.is_none(), "an 11th message: {extra:?}");
    let got = &reader.got;
    let numbers: Vec<u64> = got.iter().filter_map(Message::number).collect();
    assert_eq!(numbers, (1..=10).collect::<Vec<_>>(), "in commit order");
    for m in got {
        assert_eq!(m.exchange, ob.topic(""), "the exchange is the topic");
        assert_eq!(m.routing_key, "", "routingKey defaults to empty");
        let mut headers = FieldTable::default();
        headers.insert(
            "id".into(),
            AMQPValue::LongString(LongString::from(event_id(m.number().unwrap()).into_bytes())),
        );
        assert_eq!(
            m.properties,
            BasicProperties::default()
                .with_delivery_mode(2)
                .with_headers(headers),
            "delivery_mode 2 and the headers, nothing else"
        );
    }
    assert_eq!(got[0].body, br#"{"a": 1, "b": [1, 2]}"#);
    assert_eq!(got[1].body, b"default", "null.value for a null payload");
    assert_eq!(got[2].body, br#"{"n": 3}"#);
    ob.finish(relay).await;
}

/// Debezium Server's own configuration (`debezium.sink.type=rabbitmq`,
/// keys in any case, formats at their defaults): the headers are the JSON
/// envelopes of Debezium Server 3.6.1 as long strings, the body the value
/// envelope (docs/debezium-server-sinks.md §8.5), and `routingKey.source=key`
/// routes by the key's JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_debezium_server_form_publishes_what_it_does() {
    let rabbit = Server::rabbitmq();
    let ob = Outbox::new("rmq_server").await;
    let queue = format!("q_{}", ob.name);
    let key_json = r#"{"schema":{"type":"string","optional":true},"payload":"order-1"}"#;
    declare(
        rabbit.port,
        &ob.topic(""),
        ExchangeKind::Direct,
        Some((&queue, key_json)),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let props = dir.path().join("application.properties");
    std::fs::write(
        &props,
        ob.debezium_server_properties(&format!(
            "debezium.sink.type=rabbitmq\n\
                 debezium.sink.rabbitmq.connection.host=127.0.0.1\n\
                 debezium.sink.rabbitmq.connection.port={port}\n\
                 debezium.sink.rabbitmq.routingkey.source=key\n\
                 debezium.sink.rabbitmq.ACKTIMEOUT=10000\n",
            port = rabbit.port,
        )),
    )
    .unwrap();
    let path = props.display().to_string();
    let mut relay = Relay::start_args(
        &["--metrics-addr", "127.0.0.1:0", "run", "--config", &path],
        dir.path().join("walrelay.log"),
    );
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "order-1", r#"{"total": 12.5, "note": "héllo"}"#)
        .await;
    ob.insert_null_payload(2, "order-1").await;
    let mut reader = Reader::new(rabbit.port, &queue);
    let got = reader.at_least(&mut relay, 2).await.to_vec();
    let m = &got[0];
    assert_eq!(m.exchange, ob.topic(""));
    assert_eq!(m.routing_key, key_json, "routingKey.source=key");
    assert_eq!(
        m.body,
        r#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{\"note\": \"héllo\", \"total\": 12.5}"}"#
            .as_bytes(),
        "the value envelope, é raw UTF-8"
    );
    assert_eq!(
        got[1].body,
        br#"{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":null}"#,
        "a NULL payload is an envelope, published"
    );
    assert_eq!(m.properties.delivery_mode(), &Some(2));
    assert_eq!(m.properties.content_type(), &None);
    let table = m.properties.headers().clone().expect("headers");
    let mut names: Vec<&str> = table
        .inner()
        .keys()
        .map(lapin::types::ShortString::as_str)
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "__debezium.context.connectorLogicalName",
            "__debezium.context.connectorName",
            "__debezium.context.runId",
            "__debezium.context.taskId",
            "id"
        ]
    );
    for value in table.inner().values() {
        assert!(
            matches!(value, AMQPValue::LongString(_)),
            "a long string: {value:?}"
        );
    }
    let id = format!(
        r#"{{"schema":{{"type":"string","optional":false,"name":"io.debezium.data.Uuid","version":1}},"payload":"{}"}}"#,
        event_id(1)
    );
    assert_eq!(m.header("id").as_deref(), Some(id.as_bytes()));
    assert_eq!(
        m.header("__debezium.context.connectorLogicalName")
            .as_deref(),
        Some(&br#"{"schema":{"type":"string","optional":false},"payload":"dbzs"}"#[..])
    );
    ob.finish(relay).await;
}

/// SIGKILL under load: every committed event arrives, in order per key
/// (at least once: the restart publishes again what was not confirmed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_sigkill_under_load_delivers_every_event() {
    let rabbit = Server::rabbitmq();
    let ob = Outbox::new("rmq_kill").await;
    let queue = format!("q_{}", ob.name);
    declare(
        rabbit.port,
        &ob.topic(""),
        ExchangeKind::Fanout,
        Some((&queue, "")),
    )
    .await;
    let config = without_kafka(&ob.config(""), &sink(rabbit.port, ""));
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    let read = async |relay: &mut Relay, log: &LoadLog| {
        let keys: HashMap<&str, &str> = log
            .committed
            .iter()
            .map(|e| (e.id.as_str(), e.key.as_str()))
            .collect();
        let want: HashSet<String> = log.committed.iter().map(|e| e.id.clone()).collect();
        let mut reader = Reader::new(rabbit.port, &queue);
        let got = reader
            .until(relay, |got| {
                let seen: HashSet<String> = got
                    .iter()
                    .filter_map(|m| m.header("id"))
                    .map(|id| String::from_utf8_lossy(&id).into_owned())
                    .collect();
                want.is_subset(&seen)
            })
            .await;
        got.iter().map(|m| m.record(&keys)).collect::<Vec<Record>>()
    };
    let relay = sigkill_under_load(&ob, relay, &config, Delivered::AtLeastOnce, read).await;
    ob.finish(relay).await;
}

/// The broker stopped for 30 s mid-load (its data and port kept; the
/// queue durable, the messages persistent): the slot stays before the
/// events RabbitMQ did not confirm, walrelay keeps running, and every
/// event arrives in order once it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_outage_holds_the_slot_then_delivers() {
    let mut rabbit = Server::rabbitmq();
    let ob = Outbox::new("rmq_outage").await;
    let queue = format!("q_{}", ob.name);
    declare(
        rabbit.port,
        &ob.topic(""),
        ExchangeKind::Fanout,
        Some((&queue, "")),
    )
    .await;
    let config = without_kafka(&ob.config(""), &sink(rabbit.port, ""));
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    ob.insert_series(1, 100).await;
    let mut reader = Reader::new(rabbit.port, &queue);
    reader.at_least(&mut relay, 100).await;
    let before = ob.current_lsn().await;
    ob.wait_confirmed(before, &relay).await;
    rabbit.stop();
    // Events 101..=300 in one transaction; the position just before its
    // commit record: the slot passes it only if the transaction was
    // confirmed (other tests' commits on the shared database, outside
    // this slot's publication, rightly move it past `before`).
    let pre_commit = ob.insert_series_reading_pre_commit_lsn(101, 300).await;
    ob.slot_held_before(pre_commit, &mut relay, "RabbitMQ")
        .await;
    rabbit.start();
    let want: HashSet<u64> = (1..=300).collect();
    let got = reader.numbers(&mut relay, &want).await;
    assert_eq!(
        first_arrivals(got),
        (1..=300).collect::<Vec<_>>(),
        "in order, none lost"
    );
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    ob.finish(relay).await;
}

/// RabbitMQ back from a restart without the binding the events need (as a
/// node that has not yet restored its bindings routes nothing): walrelay
/// publishes the returned records again instead of stopping, for
/// `unroutable_retry_ms` from when the broker came back. Bound again
/// within it, every event arrives in order; never bound again, walrelay
/// stops on the first unroutable event once that time is over, and the
/// slot stays before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_unroutable_after_a_restart_is_published_again_for_a_while() {
    let mut rabbit = Server::rabbitmq();
    let ob = Outbox::new("rmq_rebind").await;
    let queue = format!("q_{}", ob.name);
    let exchange = ob.topic("");
    // The exchange and the queue bound to it (again, after an unbind).
    let amqp_port = rabbit.port;
    let bind = || {
        declare(
            amqp_port,
            &exchange,
            ExchangeKind::Fanout,
            Some((&queue, "")),
        )
    };
    bind().await;
    let port = free_port();
    let metrics = format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n");
    let config = without_kafka(
        &ob.config_with("", &metrics),
        &sink(rabbit.port, "unroutable_retry_ms = 600000"),
    );
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    ob.insert_series(1, 10).await;
    let mut reader = Reader::new(rabbit.port, &queue);
    reader.at_least(&mut relay, 10).await;
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;

    // 1. Back without the binding: the records come back as NO_ROUTE and
    // are published again (each time a retry) while walrelay keeps
    // running and the slot stays before them; bound again, they arrive.
    unbind(rabbit.port, &queue, &exchange).await;
    rabbit.stop();
    let pre_commit = ob.insert_series_reading_pre_commit_lsn(11, 20).await;
    rabbit.start();
    let back = retries(port, &mut relay).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while retries(port, &mut relay).await < back + 3.0 {
        assert!(
            Instant::now() < deadline,
            "walrelay did not publish again after the restart\n{}",
            tail(&relay.log(), 30)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let confirmed = ob.slot_confirmed().await.expect("slot");
    assert!(
        confirmed <= pre_commit,
        "the slot moved to {confirmed} past the unroutable events (commit after {pre_commit})"
    );
    relay.assert_running();
    bind().await;
    let want: HashSet<u64> = (1..=20).collect();
    let got = reader.numbers(&mut relay, &want).await;
    assert_eq!(first_arrivals(got), (1..=20).collect::<Vec<_>>());
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    relay.signal("TERM");
    assert_eq!(relay.exit_code(WAIT), 0, "{}", relay.log());

    // 2. Never bound again: refused once the (short) grace is over.
    let config = without_kafka(
        &ob.config_with("", &metrics),
        &sink(rabbit.port, "unroutable_retry_ms = 2000"),
    );
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    unbind(rabbit.port, &queue, &exchange).await;
    rabbit.stop();
    let pre_commit = ob.insert_series_reading_pre_commit_lsn(21, 30).await;
    rabbit.start();
    stopped_on_return(&mut relay, 21);
    let confirmed = ob.slot_confirmed().await.expect("slot");
    assert!(
        confirmed <= pre_commit,
        "the slot moved to {confirmed} past event 21 (commit after {pre_commit})"
    );
    ob.finish_exited(relay).await;
}

/// Records RabbitMQ refuses: one no binding routes (an exchange without a
/// queue for it: `basic.return` of a mandatory publish) and one to an
/// exchange that does not exist. Under `errors.tolerance = none` walrelay
/// stops naming the event and confirms nothing past it; under `all` their
/// dead-letter records go to the dead-letter exchange on the same broker
/// and the rest is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_refused_records_stop_or_are_dead_lettered() {
    let rabbit = Server::rabbitmq();
    let ob = Outbox::new("rmq_refused").await;
    let queue = format!("q_{}", ob.name);
    declare(
        rabbit.port,
        &ob.topic(""),
        ExchangeKind::Fanout,
        Some((&queue, "")),
    )
    .await;
    // Exists, routes nothing.
    declare(rabbit.port, &ob.topic("_bad"), ExchangeKind::Direct, None).await;
    let dlq = format!("dlq.{}", ob.name);
    let dlq_queue = format!("q_{dlq}");
    declare(
        rabbit.port,
        &dlq,
        ExchangeKind::Fanout,
        Some((&dlq_queue, "")),
    )
    .await;
    let mut main = Reader::new(rabbit.port, &queue);

    // 1. none, no such exchange: stops, the slot stays before event 2.
    let none = without_kafka(&ob.config(""), &sink(rabbit.port, ""));
    let mut relay = Relay::start(&none);
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k", "{}").await;
    main.at_least(&mut relay, 1).await;
    let after_1 = ob.current_lsn().await;
    ob.wait_confirmed(after_1, &relay).await;
    ob.insert(2, "_gone", "k", "{}").await;
    ob.insert(3, "", "k", "{}").await;
    assert_ne!(relay.exit_code(WAIT), 0, "walrelay must stop on event 2");
    let log = relay.log();
    assert!(
        log.contains(&event_id(2))
            && log.contains("rabbitmq could not deliver")
            && log.contains("404 NOT_FOUND"),
        "the error names the event and the missing exchange: {}",
        tail(&log, 20)
    );
    let confirmed = ob.slot_confirmed().await.expect("slot");
    let now = ob.current_lsn().await;
    assert!(
        confirmed < now,
        "the slot moved to {confirmed}, the WAL's end {now}, past event 2"
    );

    // 2. all: event 2 (read again: nothing past it was confirmed) and the
    // unroutable event 4 are dead-lettered, the rest is delivered.
    let dead = format!("[errors]\ntolerance = \"all\"\ndead_letter_topic = \"{dlq}\"\n");
    let all = without_kafka(&ob.config(""), &format!("{}{dead}", sink(rabbit.port, "")));
    let mut relay = Relay::start(&all);
    ob.insert(4, "_bad", "k", "{}").await;
    ob.insert(5, "", "k", "{}").await;
    let want: HashSet<u64> = [1, 3, 5].into();
    let got = main.numbers(&mut relay, &want).await;
    assert_eq!(first_arrivals(got), [1, 3, 5]);
    let mut letters = Reader::new(rabbit.port, &dlq_queue);
    let got = letters.at_least(&mut relay, 2).await.to_vec();
    let kinds: Vec<(Vec<u8>, Vec<u8>)> = got
        .iter()
        .map(|m| {
            (
                m.header("walrelay.event.id").unwrap_or_default(),
                m.header("walrelay.error.kind").unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            (event_id(2).into_bytes(), b"no_exchange".to_vec()),
            (event_id(4).into_bytes(), b"unroutable".to_vec()),
        ]
    );
    assert!(
        got.iter().all(|m| m.exchange == dlq && m.body == b"{}"),
        "to the dead-letter exchange, the original bytes: {got:?}"
    );
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    relay.signal("TERM");
    assert_eq!(relay.exit_code(WAIT), 0, "{}", relay.log());

    // 3. none, unroutable (a mandatory publish comes back): stops on it.
    let before_6 = ob.current_lsn().await;
    ob.insert(6, "_bad", "k", "{}").await;
    ob.insert(7, "", "k", "{}").await;
    let mut relay = Relay::start(&none);
    stopped_on_return(&mut relay, 6);
    let confirmed = ob.slot_confirmed().await.expect("slot");
    assert!(
        confirmed < ob.current_lsn().await,
        "{confirmed} is not past event 6 (inserted after {before_6})"
    );
    ob.finish_exited(relay).await;
}

/// The polling source publishing to RabbitMQ: rows become messages, in
/// order, and are marked published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_from_the_polling_source() {
    let _ = env();
    let rabbit = Server::rabbitmq();
    let ob = crate::poll::PollBox::new("rmq_poll").await;
    let queue = format!("q_{}", ob.name);
    declare(
        rabbit.port,
        &ob.topic(),
        ExchangeKind::Fanout,
        Some((&queue, "")),
    )
    .await;
    let port = free_port();
    let config = without_kafka(&ob.config(port, "", ""), &sink(rabbit.port, ""));
    let mut relay = Relay::start(&config);
    for i in 1..=20 {
        ob.insert(i, &format!("k{}", i % 4)).await;
    }
    ob.wait_published(20, &mut relay).await;
    let mut reader = Reader::new(rabbit.port, &queue);
    let got = reader.at_least(&mut relay, 20).await;
    assert_eq!(first_arrivals(got), (1..=20).collect::<Vec<_>>());
    relay.signal("TERM");
    assert_eq!(relay.exit_code(WAIT), 0, "{}", relay.log());
}
