//! Google Cloud Pub/Sub: walrelay against pstest, the in-memory Pub/Sub of
//! Google's Go client library, behind scripts/pubsub-emulator (started per
//! test, [`Server::pubsub`]). Each test reads what a subscriber reads,
//! through Google's Rust client, and orders it by pstest's message ids
//! (`m0`, `m1`, ...: the order the service stored the messages in).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use google_cloud_pubsub::client::Subscriber;
use google_cloud_pubsub::subscriber::MessageStream;

use crate::brokers::{numbers_per_key, program, refused_large_record_stops, without_kafka, Server};
use crate::common::load::{sigkill_under_load_sized, Delivered, LoadLog};
use crate::common::metrics::free_port;
use crate::common::relay::{event_id, tail, Outbox, Relay, WAIT};
use crate::common::{env, Record};

const PROJECT: &str = "walrelay-test";

/// One message as a subscriber read it.
#[derive(Debug, Clone)]
pub(crate) struct PsMessage {
    /// pstest's id (`m<seq>`): the order it stored the messages in.
    pub(crate) seq: u64,
    pub(crate) data: Vec<u8>,
    pub(crate) attributes: HashMap<String, String>,
    pub(crate) key: String,
}

/// The clients of the test's Pub/Sub endpoint.
pub(crate) struct PubSubClients {
    port: u16,
    subscriber: Subscriber,
    /// One stream per subscription for the whole test: acknowledgements
    /// still batched in a dropped stream may never reach the service, and
    /// with message ordering an unacknowledged message holds its key's
    /// next ones until its deadline.
    streams: tokio::sync::Mutex<HashMap<String, MessageStream>>,
    /// Ids already read, per subscription (a redelivery is read once).
    seen: tokio::sync::Mutex<HashMap<String, std::collections::HashSet<u64>>>,
}

fn anonymous() -> google_cloud_auth::credentials::Credentials {
    google_cloud_auth::credentials::anonymous::Builder::new().build()
}

impl PubSubClients {
    pub(crate) async fn new(port: u16) -> PubSubClients {
        #[allow(deprecated)]
        let _ = rustls::crypto::ring::default_provider().install_default();
        let endpoint = format!("http://127.0.0.1:{port}");
        PubSubClients {
            port,
            streams: tokio::sync::Mutex::default(),
            seen: tokio::sync::Mutex::default(),
            subscriber: Subscriber::builder()
                .with_endpoint(&endpoint)
                .with_credentials(anonymous())
                .build()
                .await
                .expect("subscriber"),
        }
    }

    /// Creates topic `name` and an ordered subscription `<name>.sub` on
    /// it (through the emulator program: Google's Rust client does admin
    /// calls over REST, which pstest does not serve); returns the
    /// subscription's path.
    pub(crate) async fn topic_with_subscription(&self, name: &str) -> String {
        let topic = format!("projects/{PROJECT}/topics/{name}");
        let sub = format!("projects/{PROJECT}/subscriptions/{name}.sub");
        let out = tokio::process::Command::new(program("pubsub", "pubsub-emulator"))
            .args([
                "-admin",
                &format!("127.0.0.1:{}", self.port),
                "-topic",
                &topic,
            ])
            .args(["-subscription", &sub, "-ordered"])
            .output()
            .await
            .expect("run pubsub-emulator -admin");
        assert!(
            out.status.success(),
            "create {topic}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        sub
    }

    /// What `sub` delivers (each acknowledged) and was not read before, in
    /// stored order, once `want` arrived, or `relay` exited, or `wait`
    /// passed.
    pub(crate) async fn read(
        &self,
        sub: &str,
        want: usize,
        wait: Duration,
        relay: &mut Relay,
    ) -> Vec<PsMessage> {
        self.read_until(sub, want, wait, || {
            relay.wait_exit(Duration::ZERO).is_some()
        })
        .await
    }

    /// [`PubSubClients::read`], ending early when `gone` says so.
    pub(crate) async fn read_until(
        &self,
        sub: &str,
        want: usize,
        wait: Duration,
        mut gone: impl FnMut() -> bool,
    ) -> Vec<PsMessage> {
        let mut streams = self.streams.lock().await;
        let stream = streams
            .entry(sub.to_owned())
            .or_insert_with(|| self.subscriber.subscribe(sub).build());
        let mut seen = self.seen.lock().await;
        let seen = seen.entry(sub.to_owned()).or_default();
        let deadline = Instant::now() + wait;
        let mut got = Vec::new();
        while got.len() < want && Instant::now() < deadline {
            match tokio::time::timeout(Duration::from_millis(500), stream.next()).await {
                Ok(Some(Ok((m, handler)))) => {
                    handler.ack();
                    let seq = m
                        .message_id
                        .trim_start_matches('m')
                        .parse()
                        .expect("pstest's id");
                    if !seen.insert(seq) {
                        continue;
                    }
                    got.push(PsMessage {
                        seq,
                        data: m.data.to_vec(),
                        attributes: m.attributes.into_iter().collect(),
                        key: m.ordering_key,
                    });
                }
                Ok(Some(Err(e))) => panic!("pull from {sub}: {e}"),
                // The stream ended (the server was away): a new one; what
                // the old one had unacknowledged comes again after its
                // deadline.
                Ok(None) => *stream = self.subscriber.subscribe(sub).build(),
                Err(_) if gone() => break,
                Err(_) => {}
            }
        }
        got.sort_by_key(|m| m.seq);
        got
    }

    /// Makes every `rpc` call fail with `code` (`UNAVAILABLE`,
    /// `INVALID_ARGUMENT`, ...) until [`PubSubClients::heal`].
    fn fail(server: &Server, rpc: &str, code: &str) {
        std::fs::write(server.dir().join(format!("fault.{rpc}")), code).expect("fault file");
    }

    fn heal(server: &Server, rpc: &str) {
        std::fs::remove_file(server.dir().join(format!("fault.{rpc}"))).expect("fault file");
    }
}

/// What `sub` delivers of the `{"n": n}` events until `want` distinct
/// ones arrived (at least once: a resent message is stored again) or
/// `wait` passed, in stored order.
async fn read_distinct(
    ps: &PubSubClients,
    sub: &str,
    want: usize,
    wait: Duration,
    relay: &mut Relay,
) -> Vec<PsMessage> {
    let deadline = Instant::now() + wait;
    let mut got: Vec<PsMessage> = Vec::new();
    loop {
        let distinct: std::collections::HashSet<u64> = got
            .iter()
            .filter_map(|m| {
                serde_json::from_slice::<serde_json::Value>(&m.data).ok()?["n"].as_u64()
            })
            .collect();
        if distinct.len() >= want
            || Instant::now() > deadline
            || relay.wait_exit(Duration::ZERO).is_some()
        {
            got.sort_by_key(|m| m.seq);
            return got;
        }
        got.extend(
            ps.read(sub, want - distinct.len(), Duration::from_secs(5), relay)
                .await,
        );
    }
}

/// `[sink]` for the test's Pub/Sub endpoint.
fn pubsub_sink(port: u16, extra: &str) -> String {
    format!(
        "[sink]\ntype = \"pubsub\"\n\n[sink.pubsub]\nproject_id = \"{PROJECT}\"\nemulator_host = \"127.0.0.1:{port}\"\nrequest_timeout_ms = 3000\n{extra}\n"
    )
}

/// The `n` of each `{"n": n}` message, per ordering key, in stored order.
fn per_key_numbers(got: &[PsMessage]) -> HashMap<String, Vec<u64>> {
    numbers_per_key(got.iter().map(|m| (m.key.as_str(), m.data.as_slice())))
}

/// The topic is the router's, the data the value's bytes (empty for a
/// null value, which keeps its attributes), every header an attribute,
/// the ordering key the record key; per key in commit order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pubsub_events_in_order_with_exact_bytes() {
    let server = Server::pubsub();
    let ps = PubSubClients::new(server.port).await;
    let ob = Outbox::new("pubsub_order").await;
    let sub = ps.topic_with_subscription(&ob.topic("")).await;
    let mut relay = Relay::start(&without_kafka(&ob.config(""), &pubsub_sink(ps.port, "")));
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k1", r#"{"a": "é €"}"#).await;
    ob.insert_null_payload(2, "k1").await;
    for n in 3..=40 {
        ob.insert(n, "", &format!("k{}", n % 4), &format!("{{\"n\": {n}}}"))
            .await;
    }
    let got = ps.read(&sub, 40, Duration::from_secs(60), &mut relay).await;
    assert_eq!(got.len(), 40, "{}", tail(&relay.log(), 30));
    // Stored order holds per key only: each key's requests go on their own.
    let by_id = |n: u64| {
        got.iter()
            .find(|m| m.attributes.get("id") == Some(&event_id(n)))
            .unwrap_or_else(|| panic!("event {n}"))
    };
    let (first, second) = (by_id(1), by_id(2));
    assert_eq!(first.data, r#"{"a": "é €"}"#.as_bytes());
    assert_eq!(first.key, "k1");
    assert!(second.data.is_empty(), "a null value is empty data");
    assert_eq!(second.key, "k1");
    assert!(first.seq < second.seq, "k1 in commit order");
    for (key, ns) in per_key_numbers(&got) {
        let want: Vec<u64> = (3..=40).filter(|n| format!("k{}", n % 4) == key).collect();
        assert_eq!(ns, want, "key {key}: every event once, in commit order");
    }
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    ob.finish(relay).await;
}

/// A record too large stops the pipeline under `none`, with nothing past
/// it stored and the slot before it; under `all` it goes to the
/// dead-letter topic (its value as data, the context as attributes) and
/// the rest flows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pubsub_refused_record_stops_or_is_dead_lettered() {
    let server = Server::pubsub();
    let ps = PubSubClients::new(server.port).await;
    let ob = Outbox::new("pubsub_refused").await;
    let sub = ps.topic_with_subscription(&ob.topic("")).await;
    let dlq = format!("dlq.{}", ob.name);
    let dlq_sub = ps.topic_with_subscription(&dlq).await;
    let sink = pubsub_sink(ps.port, "max_message_bytes = 1000");
    let mut relay = Relay::start(&without_kafka(&ob.config(""), &sink));
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k", "{}").await;
    let first = ps.read(&sub, 1, Duration::from_secs(60), &mut relay).await;
    assert_eq!(first.len(), 1, "{}", tail(&relay.log(), 20));
    let big = refused_large_record_stops(&ob, &mut relay, "max_message_bytes").await;
    assert!(
        ps.read(&sub, 1, Duration::from_secs(3), &mut relay)
            .await
            .is_empty(),
        "nothing past it"
    );
    // Event 2 is read again: nothing past it was confirmed.
    let dead = format!("[errors]\ntolerance = \"all\"\ndead_letter_topic = \"{dlq}\"\n");
    let mut relay = Relay::start(&without_kafka(&ob.config(""), &format!("{sink}{dead}")));
    ob.wait_active(&mut relay).await;
    ob.insert(4, "", "k", "{\"last\": 1}").await;
    let main = ps.read(&sub, 2, Duration::from_secs(60), &mut relay).await;
    let data: Vec<&[u8]> = main.iter().map(|m| m.data.as_slice()).collect();
    assert_eq!(
        data,
        vec![&b"{}"[..], &b"{\"last\": 1}"[..]],
        "{}",
        tail(&relay.log(), 20)
    );
    // The dead letter: the value (bounded by Pub/Sub's own 10 MB, not
    // max_message_bytes), the record's key, the context as attributes.
    let letters = ps
        .read(&dlq_sub, 1, Duration::from_secs(60), &mut relay)
        .await;
    assert_eq!(letters.len(), 1, "{}", tail(&relay.log(), 30));
    assert_eq!(letters[0].data, big.as_bytes());
    assert_eq!(letters[0].key, "k");
    assert_eq!(
        letters[0]
            .attributes
            .get("walrelay.error.kind")
            .map(String::as_str),
        Some("message_too_large"),
        "{:?}",
        letters[0].attributes
    );
    assert_eq!(
        letters[0].attributes.get("walrelay.event.id"),
        Some(&event_id(2)),
        "{:?}",
        letters[0].attributes
    );
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    ob.finish(relay).await;
}

/// Publish fails for a passing reason (UNAVAILABLE): the client pauses
/// the key, walrelay holds the slot and sends again, in order, once the
/// service answers; a refusal for good (INVALID_ARGUMENT, which the
/// checks before sending cannot foresee) stops the pipeline with the slot
/// before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pubsub_publish_errors_hold_then_resume_in_order() {
    let server = Server::pubsub();
    let ps = PubSubClients::new(server.port).await;
    let ob = Outbox::new("pubsub_errors").await;
    let sub = ps.topic_with_subscription(&ob.topic("")).await;
    let mut relay = Relay::start(&without_kafka(&ob.config(""), &pubsub_sink(ps.port, "")));
    ob.wait_active(&mut relay).await;
    ob.insert_series(1, 20).await;
    assert_eq!(
        ps.read(&sub, 20, Duration::from_secs(60), &mut relay)
            .await
            .len(),
        20
    );
    PubSubClients::fail(&server, "Publish", "UNAVAILABLE injected by the test");
    let pre_commit = ob.insert_series_reading_pre_commit_lsn(21, 60).await;
    ob.insert_series(61, 100).await;
    ob.slot_held_before(pre_commit, &mut relay, "Pub/Sub").await;
    PubSubClients::heal(&server, "Publish");
    let got = read_distinct(&ps, &sub, 80, Duration::from_secs(90), &mut relay).await;
    let mut seen = std::collections::HashSet::new();
    let mut per_key: HashMap<String, Vec<u64>> = HashMap::new();
    for (key, ns) in per_key_numbers(&got) {
        for n in ns {
            if seen.insert(n) {
                per_key.entry(key.clone()).or_default().push(n);
            }
        }
    }
    assert_eq!(seen.len(), 80, "every event: {}", tail(&relay.log(), 20));
    for (key, ns) in &per_key {
        let mut sorted = ns.clone();
        sorted.sort_unstable();
        assert_eq!(ns, &sorted, "key {key} in commit order");
    }
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    relay.assert_running();
    // A refusal for good: the pipeline stops before it.
    PubSubClients::fail(&server, "Publish", "INVALID_ARGUMENT injected by the test");
    let pre_commit = ob.insert_series_reading_pre_commit_lsn(101, 101).await;
    assert_ne!(
        relay.exit_code(WAIT),
        0,
        "walrelay must stop: {}",
        relay.log()
    );
    assert!(
        relay.log().contains("INVALID_ARGUMENT injected")
            || relay.log().contains("InvalidArgument"),
        "{}",
        tail(&relay.log(), 20)
    );
    let confirmed = ob.slot_confirmed().await.expect("slot");
    assert!(
        confirmed <= pre_commit,
        "the slot ({confirmed}) stays before it ({pre_commit})"
    );
    PubSubClients::heal(&server, "Publish");
    ob.finish_exited(relay).await;
}

/// SIGKILL under load: every committed event arrives, in order per key
/// (at least once: a restart sends again what was not confirmed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pubsub_sigkill_under_load_delivers_every_event() {
    let server = Server::pubsub();
    let ps = PubSubClients::new(server.port).await;
    let ob = Outbox::new("pubsub_kill").await;
    let sub = ps.topic_with_subscription(&ob.topic("")).await;
    let config = without_kafka(&ob.config(""), &pubsub_sink(ps.port, ""));
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    let mut all: Vec<PsMessage> = Vec::new();
    let read = async |relay: &mut Relay, log: &LoadLog| {
        let total = log.committed.len();
        let deadline = Instant::now() + Duration::from_secs(150);
        loop {
            all.extend(ps.read(&sub, total, Duration::from_secs(10), relay).await);
            all.sort_by_key(|m| m.seq);
            let distinct: std::collections::HashSet<_> =
                all.iter().filter_map(|m| m.attributes.get("id")).collect();
            if distinct.len() >= total || Instant::now() > deadline {
                break all.iter().map(record_of).collect();
            }
        }
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

/// A Pub/Sub message as the load checker reads records: the ordering key
/// as the key, the attributes as headers.
fn record_of(m: &PsMessage) -> Record {
    Record {
        partition: 0,
        offset: i64::try_from(m.seq).unwrap_or(i64::MAX),
        key: Some(m.key.clone().into_bytes()),
        value: Some(m.data.clone()),
        headers: m
            .attributes
            .iter()
            .map(|(k, v)| (k.clone(), Some(v.clone().into_bytes())))
            .collect(),
    }
}

/// The endpoint hangs for a while (SIGSTOP): the slot stays before what
/// was not stored, and every event arrives in order once it answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pubsub_outage_holds_the_slot_then_delivers() {
    let server = Server::pubsub();
    let ps = PubSubClients::new(server.port).await;
    let ob = Outbox::new("pubsub_outage").await;
    let sub = ps.topic_with_subscription(&ob.topic("")).await;
    let mut relay = Relay::start(&without_kafka(&ob.config(""), &pubsub_sink(ps.port, "")));
    ob.wait_active(&mut relay).await;
    ob.insert_series(1, 50).await;
    assert_eq!(
        ps.read(&sub, 50, Duration::from_secs(60), &mut relay)
            .await
            .len(),
        50
    );
    server.pause();
    let pre_commit = ob.insert_series_reading_pre_commit_lsn(51, 150).await;
    ob.slot_held_before(pre_commit, &mut relay, "Pub/Sub").await;
    server.resume();
    let got = read_distinct(&ps, &sub, 100, Duration::from_secs(90), &mut relay).await;
    let mut seen = std::collections::HashSet::new();
    let firsts: Vec<u64> = got
        .iter()
        .filter_map(|m| serde_json::from_slice::<serde_json::Value>(&m.data).ok()?["n"].as_u64())
        .filter(|n| seen.insert(*n))
        .collect();
    let mut per_key: HashMap<u64, Vec<u64>> = HashMap::new();
    for n in &firsts {
        per_key.entry(n % 10).or_default().push(*n);
    }
    relay.assert_running();
    assert_eq!(seen.len(), 100, "none lost: {}", tail(&relay.log(), 20));
    for (key, ns) in per_key {
        let mut sorted = ns.clone();
        sorted.sort_unstable();
        assert_eq!(ns, sorted, "key k{key} in commit order");
    }
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    ob.finish(relay).await;
}

/// The polling source to Pub/Sub: every event, marked published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pubsub_from_the_polling_source() {
    let _ = env();
    let server = Server::pubsub();
    let ps = PubSubClients::new(server.port).await;
    let ob = crate::poll::PollBox::new("pubsub_poll").await;
    let port = free_port();
    let sub = ps.topic_with_subscription(&ob.topic()).await;
    let config = ob.config(port, "", "");
    let mut relay = Relay::start(&without_kafka(&config, &pubsub_sink(ps.port, "")));
    for i in 1..=20 {
        ob.insert(i, &format!("k{}", i % 4)).await;
    }
    ob.wait_published(20, &mut relay).await;
    let got = ps.read(&sub, 20, Duration::from_secs(60), &mut relay).await;
    assert_eq!(got.len(), 20);
    let view = crate::common::metrics::pipeline(port)
        .await
        .expect("the state");
    let broker = view.broker.expect("the broker in /api/state");
    assert_eq!(broker.name, "pubsub");
    assert!(broker.acked_total >= 20, "{broker:?}");
    relay.signal("TERM");
    assert_eq!(relay.exit_code(WAIT), 0, "{}", relay.log());
}
