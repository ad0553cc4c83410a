//! The HTTP sink against a real HTTP receiver of the test's own: a hyper
//! server on 127.0.0.1 in the test process that records every request
//! (method, path, headers, body, what it answered) and answers 200, or 500
//! while told to, or holds requests unanswered, or 400 for chosen events.
//! What the receiver got (exact bytes and headers, Debezium Server's
//! `X-DEBEZIUM-*` headers and walrelay's `Idempotency-Key`), the slot's own
//! state while the receiver fails, a hanging receiver, SIGKILL under load,
//! a refused record under both error policies, and the polling source.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use openssl::ssl::{Ssl, SslAcceptor, SslFiletype, SslMethod, SslVerifyMode};
use tokio::net::TcpListener;
use tokio_openssl::SslStream;

use crate::brokers::without_kafka;
use crate::common::load::{sigkill_under_load, Delivered, LoadLog};
use crate::common::metrics::free_port;
use crate::common::relay::{commit_ends, event_id, event_number, tail, Outbox, Relay, WAIT};
use crate::common::{env, run_script, Record};

/// One request as the receiver got it.
#[derive(Debug, Clone)]
struct Got {
    method: String,
    path: String,
    /// Names in lower case (as they arrive from hyper), in arrival order.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// What the receiver answered; 0: held, never answered.
    status: u16,
}

impl Got {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A record header as Debezium Server sends it: `x-debezium-<NAME>`,
    /// base64 of the value.
    fn record_header(&self, name: &str) -> Option<Vec<u8>> {
        let v = self.header(&format!("x-debezium-{}", name.to_ascii_lowercase()))?;
        Some(openssl::base64::decode_block(v).expect("a base64 header value"))
    }

    /// The event id walrelay put in `Idempotency-Key`.
    fn id(&self) -> Option<&str> {
        self.header("idempotency-key")
    }

    /// The test event number of the request's event.
    fn number(&self) -> Option<u64> {
        event_number(self.id()?.as_bytes())
    }

    fn acked(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

#[derive(Default)]
struct State {
    got: Vec<Got>,
    /// Answer 500 while set.
    fail: bool,
    /// Hold every request unanswered while set (then close it).
    hang: bool,
    /// Answer 400 to requests whose `Idempotency-Key` is one of these.
    reject: HashSet<String>,
}

/// The HTTP receiver: a hyper server on 127.0.0.1, port of its own.
struct Receiver {
    port: u16,
    https: bool,
    state: Arc<Mutex<State>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Receiver {
    async fn start() -> Receiver {
        Receiver::start_with(None).await
    }

    /// An HTTPS receiver with `certs` (scripts/certs.sh): `localhost`'s
    /// certificate, and a client certificate of the test CA required.
    async fn start_tls(certs: &std::path::Path) -> Receiver {
        let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls()).expect("acceptor");
        b.set_certificate_chain_file(certs.join("server.crt"))
            .expect("server certificate");
        b.set_private_key_file(certs.join("server.key"), SslFiletype::PEM)
            .expect("server key");
        b.set_ca_file(certs.join("ca.crt")).expect("CA");
        b.set_verify(SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT);
        Receiver::start_with(Some(b.build())).await
    }

    async fn start_with(tls: Option<SslAcceptor>) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let state = Arc::new(Mutex::new(State::default()));
        let shared = Arc::clone(&state);
        let https = tls.is_some();
        let accept = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let state = Arc::clone(&shared);
                let tls = tls.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| answer(Arc::clone(&state), req));
                    let http = http1::Builder::new();
                    match tls {
                        None => {
                            let _ = http.serve_connection(TokioIo::new(stream), service).await;
                        }
                        Some(tls) => {
                            let Ok(ssl) = Ssl::new(tls.context()) else {
                                return;
                            };
                            let Ok(mut stream) = SslStream::new(ssl, stream) else {
                                return;
                            };
                            if std::pin::Pin::new(&mut stream).accept().await.is_err() {
                                return;
                            }
                            let _ = http.serve_connection(TokioIo::new(stream), service).await;
                        }
                    }
                });
            }
        });
        Receiver {
            port,
            https,
            state,
            accept,
        }
    }

    fn url(&self) -> String {
        if self.https {
            format!("https://localhost:{}/events", self.port)
        } else {
            format!("http://127.0.0.1:{}/events", self.port)
        }
    }

    fn set(&self, f: impl FnOnce(&mut State)) {
        f(&mut self.state.lock().expect("receiver state"));
    }

    /// Every request so far, in arrival order.
    fn got(&self) -> Vec<Got> {
        self.state.lock().expect("receiver state").got.clone()
    }

    /// The acknowledged requests, in arrival order, once `want` distinct
    /// events (by `Idempotency-Key`, dead-letter records included) were
    /// acknowledged (bounded; panics with the relay's log).
    async fn wait_acked(&self, want: usize, relay: &mut Relay) -> Vec<Got> {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let acked: Vec<Got> = self.got().into_iter().filter(Got::acked).collect();
            let distinct: HashSet<&str> = acked.iter().filter_map(Got::id).collect();
            if distinct.len() >= want {
                return acked;
            }
            relay.assert_running();
            assert!(
                Instant::now() < deadline,
                "the receiver acknowledged {} distinct events, want {want}\n{}",
                distinct.len(),
                tail(&relay.log(), 40)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn answer(
    state: Arc<Mutex<State>>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, std::io::Error> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(http_body_util::Collected::to_bytes)
        .unwrap_or_default();
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let mut got = Got {
        method: parts.method.to_string(),
        path: parts
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned(),
        headers,
        body: body.to_vec(),
        status: 0,
    };
    // Token endpoints of Debezium Server's jwt and oauth2 flows.
    let token: Option<&'static [u8]> = match got.path.as_str() {
        "/auth/authenticate" => {
            Some(br#"{"jwt":"jwt-1","jwt_refresh_token":"refresh-1","expires_in":3600000}"#)
        }
        "/token" => Some(br#"{"access_token":"oauth-1","expires_in":3600,"token_type":"Bearer"}"#),
        _ => None,
    };
    if let Some(token) = token {
        got.status = 200;
        state.lock().expect("receiver state").got.push(got);
        return Ok(Response::new(Full::new(Bytes::from_static(token))));
    }
    let status = {
        let mut s = state.lock().expect("receiver state");
        let status = if s.hang {
            0
        } else if s.fail {
            500
        } else if got.id().is_some_and(|id| s.reject.contains(id)) {
            400
        } else {
            200
        };
        got.status = status;
        s.got.push(got);
        status
    };
    if status == 0 {
        while state.lock().expect("receiver state").hang {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Released: the connection closes unanswered.
        return Err(std::io::Error::other("held, never answered"));
    }
    let text: &'static [u8] = match status {
        200 => b"",
        400 => b"the receiver does not want this event",
        _ => b"the receiver is down for now",
    };
    Ok(Response::builder()
        .status(status)
        .body(Full::new(Bytes::from_static(text)))
        .expect("a response"))
}

fn http_sink(receiver: &Receiver, extra: &str) -> String {
    format!(
        "[sink]\ntype = \"http\"\n\n[sink.http]\nurl = \"{}\"\n{extra}\n",
        receiver.url()
    )
}

/// Asserts that, per key, the first acknowledgement of each event comes in
/// event-number order (events are numbered in commit order), and returns
/// the distinct event numbers acknowledged.
fn assert_per_key_order(acked: &[Got], key_of: impl Fn(u64) -> String) -> Vec<u64> {
    let mut seen = HashSet::new();
    let mut last: HashMap<String, u64> = HashMap::new();
    let mut firsts = Vec::new();
    for g in acked {
        let Some(n) = g.number() else { continue };
        if !seen.insert(n) {
            continue;
        }
        let key = key_of(n);
        if let Some(&before) = last.get(&key) {
            assert!(
                before < n,
                "key {key}: event {n} was first acknowledged after event {before}"
            );
        }
        last.insert(key, n);
        firsts.push(n);
    }
    firsts.sort_unstable();
    firsts
}

/// Events byte for byte as Debezium Server's http sink sends them: a POST
/// per event to the URL, the value as the body, `content-type`, the `id`
/// header as `X-DEBEZIUM-ID` (base64), no key, plus walrelay's
/// `Idempotency-Key`; a null payload is not sent; per-key order; the slot
/// is confirmed past them and nothing more arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_events_in_order_with_exact_bytes() {
    let receiver = Receiver::start().await;
    let ob = Outbox::new("http_order").await;
    let config = without_kafka(&ob.config(""), &http_sink(&receiver, ""));
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k1", r#"{"a": 1, "b": [1, 2], "s": "é"}"#)
        .await;
    ob.insert_null_payload(2, "k1").await;
    for n in 3..=10 {
        ob.insert(n, "", &format!("k{}", n % 3), &format!("{{\"n\": {n}}}"))
            .await;
    }
    let end = ob.current_lsn().await;
    let acked = receiver.wait_acked(9, &mut relay).await;
    ob.wait_confirmed(end, &relay).await;
    let all = receiver.got();
    assert_eq!(
        all.len(),
        9,
        "one request per event, none for the null payload"
    );
    assert!(all.iter().all(Got::acked));
    let numbers = assert_per_key_order(&acked, |n| {
        if n == 1 {
            "k1".to_owned()
        } else {
            format!("k{}", n % 3)
        }
    });
    assert_eq!(numbers, [1, 3, 4, 5, 6, 7, 8, 9, 10]);
    let first = acked.iter().find(|g| g.number() == Some(1)).unwrap();
    assert_eq!(first.method, "POST");
    assert_eq!(first.path, "/events");
    assert_eq!(
        first.body,
        r#"{"a": 1, "b": [1, 2], "s": "é"}"#.as_bytes(),
        "the value's exact bytes"
    );
    let mut names: Vec<&str> = first.headers.iter().map(|(k, _)| k.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "content-length",
            "content-type",
            "host",
            "idempotency-key",
            "user-agent",
            "x-debezium-id"
        ]
    );
    assert_eq!(first.header("content-type"), Some("application/json"));
    assert_eq!(
        first.header("content-length"),
        Some(first.body.len().to_string().as_str())
    );
    assert_eq!(
        first.header("host"),
        Some(format!("127.0.0.1:{}", receiver.port).as_str())
    );
    assert!(first
        .header("user-agent")
        .is_some_and(|ua| ua.starts_with("walrelay/")));
    assert_eq!(
        first.record_header("id"),
        Some(event_id(1).into_bytes()),
        "X-DEBEZIUM-ID: base64 of the id header"
    );
    assert_eq!(first.id(), Some(event_id(1).as_str()));
    ob.finish(relay).await;
}

/// The receiver answers 500 for a while: walrelay sends the same events
/// again (nothing lost, per-key order kept), the slot stays before the
/// first event not acknowledged meanwhile, and moves once they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_errors_are_retried_and_the_slot_waits() {
    let receiver = Receiver::start().await;
    let ob = Outbox::new("http_500").await;
    let sink = http_sink(&receiver, "retries = 2\nretry_interval_ms = 100\n");
    let config = without_kafka(&ob.config(""), &sink);
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    ob.insert_series(1, 20).await;
    let _ = receiver.wait_acked(20, &mut relay).await;
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    receiver.set(|s| s.fail = true);
    // The commit of the events the receiver refuses, from a probe slot:
    // the slot may follow other tests' WAL up to it, never reach it.
    let probe = ob.create_probe().await;
    ob.insert_series(21, 100).await;
    let ends = commit_ends(&ob.client, &probe, &ob.name).await;
    ob.drop_probe(&probe).await;
    assert_eq!(ends.len(), 1, "one transaction");
    let failing = Instant::now();
    while failing.elapsed() < Duration::from_secs(8) {
        let confirmed = ob.slot_confirmed().await.expect("slot");
        assert!(
            confirmed < ends[0],
            "the slot moved to {confirmed}, past the commit {} the receiver refused",
            ends[0]
        );
        relay.assert_running();
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let refused = receiver.got().iter().filter(|g| g.status == 500).count();
    assert!(
        refused >= 3,
        "sent again after 500s ({refused} refused requests)"
    );
    receiver.set(|s| s.fail = false);
    let acked = receiver.wait_acked(100, &mut relay).await;
    let numbers = assert_per_key_order(&acked, |n| format!("k{}", n % 10));
    assert_eq!(
        numbers,
        (1..=100).collect::<Vec<_>>(),
        "every event, none lost"
    );
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    assert!(
        relay.log().contains("500"),
        "the log says what the receiver answered"
    );
    ob.finish(relay).await;
}

/// A receiver that holds requests unanswered: each attempt ends at
/// `timeout_ms` and is sent again; the slot waits; everything arrives once
/// the receiver answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_hanging_receiver_times_out_and_is_retried() {
    let receiver = Receiver::start().await;
    let ob = Outbox::new("http_hang").await;
    let sink = http_sink(
        &receiver,
        "timeout_ms = 500\nretries = 2\nretry_interval_ms = 100\n",
    );
    let config = without_kafka(&ob.config(""), &sink);
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    receiver.set(|s| s.hang = true);
    let probe = ob.create_probe().await;
    ob.insert_series(1, 10).await;
    let ends = commit_ends(&ob.client, &probe, &ob.name).await;
    ob.drop_probe(&probe).await;
    // An event held twice: its first attempt timed out and it was sent
    // again.
    let deadline = Instant::now() + WAIT;
    loop {
        let mut held: HashMap<String, usize> = HashMap::new();
        for g in receiver.got().iter().filter(|g| g.status == 0) {
            *held
                .entry(g.id().unwrap_or_default().to_owned())
                .or_default() += 1;
        }
        if held.values().any(|&n| n >= 2) {
            break;
        }
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "{held:?} held: walrelay did not send again after its timeout\n{}",
            tail(&relay.log(), 30)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        ob.slot_confirmed().await.expect("slot") < ends[0],
        "the slot reached a commit nothing of which was acknowledged"
    );
    assert!(
        relay.log().contains("within 500 ms"),
        "the log names the timeout: {}",
        tail(&relay.log(), 20)
    );
    receiver.set(|s| s.hang = false);
    let acked = receiver.wait_acked(10, &mut relay).await;
    let numbers = assert_per_key_order(&acked, |n| format!("k{}", n % 10));
    assert_eq!(numbers, (1..=10).collect::<Vec<_>>());
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    ob.finish(relay).await;
}

/// SIGKILL under load: every committed event reaches the receiver, in
/// order per key (at least once: a restart may send some again, each
/// with its `Idempotency-Key`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_sigkill_under_load_delivers_every_event() {
    let receiver = Receiver::start().await;
    let ob = Outbox::new("http_kill").await;
    let config = without_kafka(&ob.config(""), &http_sink(&receiver, ""));
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    let read = async |relay: &mut Relay, log: &LoadLog| {
        let acked = receiver.wait_acked(log.committed.len(), relay).await;
        let keys: HashMap<&str, &str> = log
            .committed
            .iter()
            .map(|e| (e.id.as_str(), e.key.as_str()))
            .collect();
        // The key travels nowhere (Debezium Server sends none): the load's
        // log gives it back by event id.
        acked
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let id = g.id().expect("an Idempotency-Key").to_owned();
                assert_eq!(
                    g.record_header("id").as_deref(),
                    Some(id.as_bytes()),
                    "X-DEBEZIUM-ID and Idempotency-Key name the same event"
                );
                Record {
                    partition: 0,
                    offset: i64::try_from(i).unwrap_or(i64::MAX),
                    key: keys.get(id.as_str()).map(|k| k.as_bytes().to_vec()),
                    value: Some(g.body.clone()),
                    headers: vec![("id".to_owned(), Some(id.into_bytes()))],
                }
            })
            .collect::<Vec<Record>>()
    };
    let relay = sigkill_under_load(&ob, relay, &config, Delivered::AtLeastOnce, read).await;
    ob.finish(relay).await;
}

/// The receiver answers 400 for one event: under `errors.tolerance =
/// none` walrelay stops naming it, without confirming it; under `all` its
/// dead-letter record goes to the same URL (told apart by
/// `X-Walrelay-Dead-Letter` and its `Idempotency-Key`), before the next
/// event of the same key, and the stream goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_refused_record_stops_or_is_dead_lettered() {
    let receiver = Receiver::start().await;
    receiver.set(|s| {
        s.reject.insert(event_id(2));
    });
    let ob = Outbox::new("http_refused").await;
    // 1. none: stops, the slot stays before event 2.
    let config = without_kafka(&ob.config(""), &http_sink(&receiver, ""));
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k", r#"{"n": 1}"#).await;
    let _ = receiver.wait_acked(1, &mut relay).await;
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    let probe = ob.create_probe().await;
    ob.insert(2, "", "k", r#"{"bad": true}"#).await;
    ob.insert(3, "", "k", r#"{"n": 3}"#).await;
    let ends = commit_ends(&ob.client, &probe, &ob.name).await;
    ob.drop_probe(&probe).await;
    let code = relay.exit_code(WAIT);
    assert_ne!(code, 0, "walrelay must stop on the refused record");
    let log = relay.log();
    assert!(
        log.contains(&event_id(2)) && log.contains("http could not deliver") && log.contains("400"),
        "the error names the event and the answer: {}",
        tail(&log, 20)
    );
    assert!(
        ob.slot_confirmed().await.expect("slot") < ends[0],
        "event 2's commit is not confirmed"
    );
    assert!(
        receiver
            .got()
            .iter()
            .any(|g| g.status == 400 && g.number() == Some(2)),
        "the receiver refused event 2"
    );
    // 2. all: the dead-letter record, then event 3. That event 2 is sent
    // again proves the first run confirmed nothing past it.
    let dlq = format!("dlq.{}", ob.name);
    let dead = format!("[errors]\ntolerance = \"all\"\ndead_letter_topic = \"{dlq}\"\n");
    let config = without_kafka(
        &ob.config(""),
        &format!("{}{dead}", http_sink(&receiver, "")),
    );
    let restart = receiver.got().len();
    let mut relay = Relay::start(&config);
    // Event 2 refused again, its dead-letter record, then event 3.
    let letter_key = format!("dead-letter:{}", event_id(2));
    let deadline = Instant::now() + WAIT;
    let since = loop {
        let since: Vec<Got> = receiver.got().split_off(restart);
        let letter = since
            .iter()
            .position(|g| g.acked() && g.id() == Some(letter_key.as_str()));
        if letter.is_some_and(|at| {
            since[at..]
                .iter()
                .any(|g| g.acked() && g.number() == Some(3))
        }) {
            break since;
        }
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "no dead-letter record followed by event 3: {since:?}\n{}",
            tail(&relay.log(), 30)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        since
            .iter()
            .any(|g| g.status == 400 && g.number() == Some(2)),
        "event 2 was sent again (and refused again): the first run confirmed nothing past it"
    );
    let acked: Vec<Got> = since.into_iter().filter(Got::acked).collect();
    let letter_at = acked
        .iter()
        .position(|g| g.id() == Some(letter_key.as_str()))
        .expect("the dead-letter record");
    assert!(
        acked[..letter_at].iter().all(|g| g.number() != Some(3)),
        "the dead-letter record comes before the next event of its key: {acked:?}"
    );
    let letter = &acked[letter_at];
    assert_eq!(
        letter.path, "/events",
        "the same URL: Debezium Server's is fixed"
    );
    assert_eq!(letter.header("x-walrelay-dead-letter"), Some(dlq.as_str()));
    assert_eq!(letter.body, br#"{"bad": true}"#, "the original bytes");
    assert_eq!(
        letter.record_header("walrelay.event.id"),
        Some(event_id(2).into_bytes())
    );
    assert_eq!(
        letter.record_header("walrelay.error.kind"),
        Some(b"rejected_400".to_vec())
    );
    assert!(acked.iter().all(|g| g.number() != Some(2)));
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    ob.finish(relay).await;
}

/// Debezium Server's three authentications, as it sends them: `jwt` logs
/// in at `<url>auth/authenticate` (snake-case JSON) and sends
/// `Authorization: Bearer: <jwt>`; `oauth2` asks the token URL with client
/// credentials and sends `Bearer <token>`; `standard-webhooks` signs each
/// request (`webhook-signature: v1,<HMAC-SHA256>`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_authentication_as_debezium_server_sends_it() {
    let receiver = Receiver::start().await;
    let ob = Outbox::new("http_auth").await;
    let base = format!("http://127.0.0.1:{}/", receiver.port);
    let phases = [
        format!("jwt_url = \"{base}\"\njwt_username = \"relay\"\njwt_password = \"pw\"\n"),
        format!(
            "oauth2_token_url = \"{base}token\"\noauth2_client_id = \"client\"\n\
             oauth2_client_secret = \"s3cret\"\noauth2_scope = \"events:write\"\n"
        ),
        "webhook_secret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n".to_owned(),
    ];
    let mut events = Vec::new();
    for (n, auth) in (1..).zip(&phases) {
        let config = without_kafka(&ob.config(""), &http_sink(&receiver, auth));
        let mut relay = Relay::start(&config);
        ob.wait_active(&mut relay).await;
        ob.insert(n, "", "k", &format!("{{\"n\": {n}}}")).await;
        let acked = receiver
            .wait_acked(usize::try_from(n).unwrap(), &mut relay)
            .await;
        events.push(
            acked
                .into_iter()
                .find(|g| g.number() == Some(n))
                .expect("the event"),
        );
        ob.wait_confirmed(ob.current_lsn().await, &relay).await;
        drop(relay);
        ob.wait_inactive().await;
    }
    let got = receiver.got();
    let login = got
        .iter()
        .find(|g| g.path == "/auth/authenticate")
        .expect("a JWT login");
    assert_eq!(login.method, "POST");
    assert_eq!(login.header("content-type"), Some("application/json"));
    assert_eq!(
        login.body,
        br#"{"username":"relay","password":"pw","token_expiry_in_minutes":60,"refresh_token_expiry_in_minutes":1440}"#
    );
    assert_eq!(events[0].header("authorization"), Some("Bearer: jwt-1"));
    let token = got
        .iter()
        .find(|g| g.path == "/token")
        .expect("an OAuth2 token request");
    assert_eq!(
        token.header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    assert_eq!(
        token.header("authorization").map(str::to_owned),
        Some(format!(
            "Basic {}",
            openssl::base64::encode_block(b"client:s3cret")
        ))
    );
    assert_eq!(
        token.body,
        b"grant_type=client_credentials&scope=events%3Awrite"
    );
    assert_eq!(events[1].header("authorization"), Some("Bearer oauth-1"));
    let signed = &events[2];
    let id = format!("msg_{}", event_id(3));
    assert_eq!(signed.header("webhook-id"), Some(id.as_str()));
    let timestamp = signed.header("webhook-timestamp").expect("a timestamp");
    let key = openssl::base64::decode_block("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
    let key = openssl::pkey::PKey::hmac(&key).unwrap();
    let mut signer =
        openssl::sign::Signer::new(openssl::hash::MessageDigest::sha256(), &key).unwrap();
    let mut content = format!("{id}.{timestamp}.").into_bytes();
    content.extend_from_slice(&signed.body);
    let mac = signer.sign_oneshot_to_vec(&content).unwrap();
    assert_eq!(
        signed.header("webhook-signature").map(str::to_owned),
        Some(format!("v1,{}", openssl::base64::encode_block(&mac)))
    );
    assert_eq!(signed.header("authorization"), None);
    ob.remove().await;
}

/// HTTPS: the receiver's certificate is checked against `tls_ca_file`
/// (a certificate of another CA is refused, named in the log, and tried
/// again without end), and the client certificate is presented.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_over_tls_checks_the_receiver_and_presents_a_certificate() {
    let dir = tempfile::tempdir().expect("temp dir");
    let certs = dir.path().join("certs");
    run_script("certs.sh", &[certs.as_os_str()]);
    let receiver = Receiver::start_tls(&certs).await;
    let ob = Outbox::new("http_tls").await;
    let tls = |ca: &str| {
        format!(
            "tls_ca_file = \"{}\"\ntls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n",
            certs.join(ca).display(),
            certs.join("client.crt").display(),
            certs.join("client.key").display()
        )
    };
    // 1. Another CA: nothing is delivered, the reason is logged.
    let config = without_kafka(&ob.config(""), &http_sink(&receiver, &tls("other-ca.crt")));
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k", r#"{"n": 1}"#).await;
    let deadline = Instant::now() + WAIT;
    while !relay.log().contains("certificate verify failed") {
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "no certificate verification error logged:\n{}",
            tail(&relay.log(), 30)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(receiver.got().is_empty(), "nothing reached the receiver");
    drop(relay);
    ob.wait_inactive().await;
    // 2. The right CA: delivered, over TLS with the client certificate.
    let config = without_kafka(&ob.config(""), &http_sink(&receiver, &tls("ca.crt")));
    let mut relay = Relay::start(&config);
    let acked = receiver.wait_acked(1, &mut relay).await;
    assert_eq!(acked[0].body, br#"{"n": 1}"#);
    assert_eq!(
        acked[0].header("host"),
        Some(format!("localhost:{}", receiver.port).as_str())
    );
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    ob.finish(relay).await;
}

/// The polling source posting to the receiver: rows become requests and
/// are marked published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_from_the_polling_source() {
    let _ = env();
    let receiver = Receiver::start().await;
    let ob = crate::poll::PollBox::new("http_poll").await;
    let port = free_port();
    let config = without_kafka(&ob.config(port, "", ""), &http_sink(&receiver, ""));
    let mut relay = Relay::start(&config);
    for i in 1..=20 {
        ob.insert(i, &format!("k{}", i % 4)).await;
    }
    ob.wait_published(20, &mut relay).await;
    let acked = receiver.wait_acked(20, &mut relay).await;
    let numbers = assert_per_key_order(&acked, |n| format!("k{}", n % 4));
    assert_eq!(numbers, (1..=20).collect::<Vec<_>>());
    let first = acked.iter().find(|g| g.number() == Some(1)).unwrap();
    assert_eq!(first.body, br#"{"n": 1}"#);
    assert_eq!(first.record_header("id"), Some(event_id(1).into_bytes()));
    relay.signal("TERM");
    assert_eq!(relay.exit_code(WAIT), 0, "{}", relay.log());
}
