//! `walrelay connect-distributed`: a group of walrelay workers sharing
//! Connect's storage topics on a broker of the test's own, managed through
//! Connect's REST API. Asserts on what consumers read from Kafka, on the
//! REST API's answers and on the storage topics, never on log lines.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::metrics::free_port;
use crate::common::relay::{count_events, tail, Outbox, Relay};
use crate::common::{env, unique_name, PrivateKafka};

/// How long a group may take to settle after a change (a session timeout
/// of 6 s, a rebalance, pipelines starting).
const SETTLE: Duration = Duration::from_secs(90);

/// One HTTP/1.1 exchange: status code and body.
pub(crate) fn http(addr: &str, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(60))).ok();
    let body = body.unwrap_or("");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).expect("send the request");
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("read the response");
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {head:?}"));
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    (
        code,
        if chunked {
            unchunk(body)
        } else {
            body.to_owned()
        },
    )
}

fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n.min(rest.len())]);
        body = rest.get(n + 2..).unwrap_or("");
    }
    out
}

/// A distributed worker file for a group on `bootstrap`, its REST
/// listener on `port`.
fn worker_file(dir: &Path, group: &str, bootstrap: &str, port: u16, extra: &str) -> PathBuf {
    let path = dir.join(format!("worker-{port}.properties"));
    std::fs::write(
        &path,
        format!(
            "bootstrap.servers={bootstrap}\n\
             group.id={group}\n\
             config.storage.topic={group}-configs\n\
             offset.storage.topic={group}-offsets\n\
             status.storage.topic={group}-status\n\
             config.storage.replication.factor=1\n\
             offset.storage.replication.factor=1\n\
             status.storage.replication.factor=1\n\
             session.timeout.ms=6000\n\
             heartbeat.interval.ms=1500\n\
             listeners=http://127.0.0.1:{port}\n\
             key.converter=org.apache.kafka.connect.storage.StringConverter\n\
             value.converter=org.apache.kafka.connect.storage.StringConverter\n\
             {extra}"
        ),
    )
    .expect("write the worker file");
    path
}

/// A walrelay worker of the group.
struct Worker {
    relay: Relay,
    addr: String,
    /// Its metrics listener.
    metrics: String,
}

impl Worker {
    fn start(dir: &Path, group: &str, bootstrap: &str, extra: &str) -> Worker {
        let port = free_port();
        let file = worker_file(dir, group, bootstrap, port, extra);
        let metrics = format!("127.0.0.1:{}", free_port());
        let relay = Relay::start_args(
            &[
                "--metrics-addr",
                &metrics,
                "connect-distributed",
                file.to_str().expect("utf-8 path"),
            ],
            dir.join(format!("worker-{port}.log")),
        );
        let addr = format!("127.0.0.1:{port}");
        let deadline = Instant::now() + SETTLE;
        let mut relay = relay;
        while TcpStream::connect(&addr).is_err() {
            relay.assert_running();
            assert!(
                Instant::now() < deadline,
                "worker {addr} never listened:\n{}",
                tail(&relay.log(), 40)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        Worker {
            relay,
            addr,
            metrics,
        }
    }
}

/// A Debezium PostgreSQL connector configuration (EventRouter) for `ob`.
fn connector_config(ob: &Outbox, extra: &[(&str, &str)]) -> Value {
    let pg = env().pg_port.to_string();
    let mut c: BTreeMap<&str, String> = [
        (
            "connector.class",
            "io.debezium.connector.postgresql.PostgresConnector",
        ),
        ("database.hostname", "127.0.0.1"),
        ("database.port", &pg),
        ("database.user", "postgres"),
        ("database.dbname", "postgres"),
        ("plugin.name", "pgoutput"),
        ("publication.autocreate.mode", "filtered"),
        ("transforms", "outbox"),
        (
            "transforms.outbox.type",
            "io.debezium.transforms.outbox.EventRouter",
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k, v.to_owned()))
    .collect();
    c.insert("topic.prefix", ob.name.clone());
    c.insert("slot.name", ob.name.clone());
    c.insert("publication.name", ob.name.clone());
    c.insert("table.include.list", format!("public.{}", ob.name));
    for (k, v) in extra {
        c.insert(k, (*v).to_owned());
    }
    serde_json::to_value(c).expect("a map")
}

/// The worker ids of each connector's RUNNING task, as `addr` reports.
fn owners(addr: &str) -> BTreeMap<String, String> {
    let (code, body) = http(addr, "GET", "/connectors?expand=status", None);
    assert_eq!(code, 200, "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    let mut out = BTreeMap::new();
    for (name, s) in v.as_object().into_iter().flatten() {
        let task = &s["status"]["tasks"][0];
        if task["state"] == "RUNNING" {
            out.insert(
                name.clone(),
                task["worker_id"].as_str().unwrap_or("").to_owned(),
            );
        }
    }
    out
}

/// Waits until `pred` holds for the owners `addr` reports; returns them.
fn wait_owners(
    addr: &str,
    what: &str,
    pred: impl Fn(&BTreeMap<String, String>) -> bool,
) -> BTreeMap<String, String> {
    let deadline = Instant::now() + SETTLE;
    loop {
        let o = owners(addr);
        if pred(&o) {
            return o;
        }
        assert!(Instant::now() < deadline, "{what}: owners now {o:?}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Reads `topic` until every event of `range` is there or [`SETTLE`]
/// passed (the topic may not exist yet when a pipeline is restarting).
fn count_until(
    bootstrap: &str,
    topic: &str,
    range: std::ops::RangeInclusive<u64>,
    relay: &mut Relay,
) -> crate::common::relay::EventCount {
    let deadline = Instant::now() + SETTLE;
    loop {
        let counted = count_events(
            bootstrap,
            topic,
            range.clone(),
            Duration::from_secs(5),
            relay,
        );
        if counted.distinct == range.end() - range.start() + 1 || Instant::now() > deadline {
            return counted;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Three workers, four connectors: all deliver; SIGKILL one under load
/// and its connectors move, nothing lost; a fourth joins and takes a
/// share; a config update through REST reaches the running pipeline; the
/// storage topics survive a broker restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_spreads_fails_over_rebalances_and_survives_a_broker_restart() {
    let kafka = PrivateKafka::start();
    let bootstrap = kafka.bootstrap();
    let dir = tempfile::tempdir().expect("dir");
    let group = unique_name("dist");
    let mut outboxes = Vec::new();
    for i in 0..4 {
        outboxes.push(Outbox::new(&format!("dist{i}")).await);
    }
    let mut workers: Vec<Worker> = (0..3)
        .map(|_| Worker::start(dir.path(), &group, &bootstrap, ""))
        .collect();
    let a = workers[0].addr.clone();
    for ob in &outboxes {
        let body = serde_json::json!({"name": ob.name, "config": connector_config(ob, &[])});
        let (code, text) = http(&a, "POST", "/connectors", Some(&body.to_string()));
        assert_eq!(code, 201, "{text}");
    }
    let names: BTreeSet<String> = outboxes.iter().map(|o| o.name.clone()).collect();
    let spread = wait_owners(&a, "four connectors running on three workers", |o| {
        o.len() == 4 && o.values().collect::<BTreeSet<_>>().len() == 3
    });
    eprintln!("assignment: {spread:?}");

    // Load, then SIGKILL the worker that runs two connectors (or any).
    let writers: Vec<_> = outboxes
        .iter()
        .map(|ob| ob.spawn_writer(40, 50, 10, Some(5)))
        .collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let victim = workers
        .iter()
        .position(|w| spread.values().filter(|id| **id == w.addr).count() >= 2)
        .unwrap_or(1);
    let victim_id = workers[victim].addr.clone();
    let mut dead = workers.remove(victim);
    let killed = Instant::now();
    dead.relay.kill();
    let survivor = workers[0].addr.clone();
    let moved = wait_owners(&survivor, "the killed worker's connectors moved", |o| {
        o.len() == 4 && o.values().all(|id| *id != victim_id)
    });
    eprintln!(
        "failover: {:?} from SIGKILL to every connector running elsewhere ({moved:?})",
        killed.elapsed()
    );
    for w in writers {
        w.await.expect("writer");
    }
    for ob in &outboxes {
        let counted = count_events(
            &bootstrap,
            &ob.topic(""),
            1..=2000,
            SETTLE,
            &mut workers[0].relay,
        );
        assert_eq!(
            counted.distinct, 2000,
            "{}: events lost: {counted:?}",
            ob.name
        );
    }

    // A fourth worker joins and takes a share.
    workers.push(Worker::start(dir.path(), &group, &bootstrap, ""));
    let newcomer = workers[2].addr.clone();
    wait_owners(&survivor, "the fourth worker took a share", |o| {
        o.len() == 4 && o.values().any(|id| *id == newcomer)
    });

    // A config update through REST reaches the running pipeline: a new
    // routing topic for new events.
    let ob = &outboxes[0];
    let rerouted = format!("{}.rerouted", ob.name);
    let config = connector_config(
        ob,
        &[(
            "transforms.outbox.route.topic.replacement",
            rerouted.as_str(),
        )],
    );
    let path = format!("/connectors/{}/config", ob.name);
    let (code, text) = http(&newcomer, "PUT", &path, Some(&config.to_string()));
    assert_eq!(code, 200, "{text}");
    ob.insert_series(5001, 5010).await;
    let counted = count_until(&bootstrap, &rerouted, 5001..=5010, &mut workers[0].relay);
    assert_eq!(
        counted.distinct, 10,
        "the update did not reach the pipeline: {counted:?}"
    );

    // The storage topics survive a broker restart: after it, a new worker
    // reads every connector back, with the update.
    kafka.stop();
    kafka.start_again();
    let late = Worker::start(dir.path(), &group, &bootstrap, "");
    let (code, text) = http(&late.addr, "GET", "/connectors", None);
    assert_eq!(code, 200, "{text}");
    let listed: BTreeSet<String> = serde_json::from_str(&text).expect("json");
    assert_eq!(listed, names);
    let (_, text) = http(&late.addr, "GET", &path, None);
    assert!(text.contains(&rerouted), "{text}");
    workers.push(late);
    wait_owners(&survivor, "all running after the broker restart", |o| {
        o.len() == 4
    });
    outboxes[1].insert_series(6001, 6010).await;
    let counted = count_until(
        &bootstrap,
        &outboxes[1].topic(""),
        6001..=6010,
        &mut workers[0].relay,
    );
    assert_eq!(
        counted.distinct, 10,
        "after the broker restart: {counted:?}"
    );
    for ob in &outboxes {
        let _ = http(
            &survivor,
            "DELETE",
            &format!("/connectors/{}", ob.name),
            None,
        );
    }
    drop(workers);
    drop(dead);
    for ob in outboxes {
        ob.remove_all().await;
    }
}

/// Exactly-once in a group: SIGKILL the worker that runs a connector under
/// load; the survivor takes it, fencing the dead worker's transactions by
/// the shared transactional id, and a read_committed consumer sees every
/// event exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_failover_duplicates_nothing() {
    let bootstrap = env().kafka.clone();
    let dir = tempfile::tempdir().expect("dir");
    let group = unique_name("disteos");
    let extra = "exactly.once.source.support=enabled\noffset.storage.partitions=1\n";
    let mut workers: Vec<Worker> = (0..2)
        .map(|_| Worker::start(dir.path(), &group, &bootstrap, extra))
        .collect();
    let ob = Outbox::new("disteos").await;
    let a = workers[0].addr.clone();
    let body = serde_json::json!({"name": ob.name, "config": connector_config(&ob, &[])});
    let (code, text) = http(&a, "POST", "/connectors", Some(&body.to_string()));
    assert_eq!(code, 201, "{text}");
    let owner = wait_owners(&a, "the connector running", |o| o.len() == 1)
        .into_values()
        .next()
        .expect("an owner");
    let writer = ob.spawn_writer(40, 50, 10, Some(5));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let victim = workers
        .iter()
        .position(|w| w.addr == owner)
        .expect("the owner is a worker");
    let mut dead = workers.remove(victim);
    let killed = Instant::now();
    dead.relay.kill();
    let survivor = workers[0].addr.clone();
    wait_owners(&survivor, "the connector moved", |o| {
        o.values().all(|id| *id == survivor) && o.len() == 1
    });
    eprintln!(
        "exactly-once failover: {:?} from SIGKILL to the connector running on {survivor}",
        killed.elapsed()
    );
    writer.await.expect("writer");
    // The survivor's pipeline runs exactly-once.
    let deadline = Instant::now() + SETTLE;
    loop {
        let (_, metrics) = http(&workers[0].metrics, "GET", "/metrics", None);
        if metrics.lines().any(|l| {
            l.starts_with("walrelay_exactly_once{") && l.contains(&ob.name) && l.ends_with(" 1")
        }) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the pipeline does not run exactly-once:\n{metrics}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let counted = count_until(&bootstrap, &ob.topic(""), 1..=2000, &mut workers[0].relay);
    assert_eq!(counted.distinct, 2000, "events lost: {counted:?}");
    assert_eq!(
        counted.repeats, 0,
        "duplicates for a read_committed reader: {counted:?}"
    );
    let _ = http(
        &survivor,
        "DELETE",
        &format!("/connectors/{}", ob.name),
        None,
    );
    drop(workers);
    drop(dead);
    ob.remove_all().await;
}

/// `curl` against an HTTPS listener trusting `ca`: status code and body,
/// or `None` when curl could not make the exchange (TLS refused).
fn curl(ca: Option<&Path>, user: Option<&str>, url: &str) -> Option<(u16, String)> {
    let mut cmd = std::process::Command::new("curl");
    cmd.args(["-s", "-w", "\n%{http_code}", "--max-time", "20"]);
    if let Some(ca) = ca {
        cmd.arg("--cacert").arg(ca);
    }
    if let Some(user) = user {
        cmd.args(["-u", user]);
    }
    let out = cmd.arg(url).output().expect("run curl");
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n')?;
    Some((code.trim().parse().ok()?, body.to_owned()))
}

/// The REST API over TLS with Connect's basic auth extension, configured
/// as a Connect deployment configures it (`listeners=https://...`,
/// `listeners.https.ssl.*`, `rest.extension.classes` and a JAAS file named
/// in `KAFKA_OPTS`): no credentials or a wrong password get Connect's 401
/// and nothing else; the right ones get the API; a client that does not
/// trust the certificate gets nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_api_behind_tls_and_basic_auth() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let made = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args([
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .arg("-keyout")
        .arg(d.join("key.pem"))
        .arg("-out")
        .arg(d.join("cert.pem"))
        .output()
        .expect("run openssl");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let key = std::fs::read_to_string(d.join("key.pem")).expect("key");
    let cert = std::fs::read_to_string(d.join("cert.pem")).expect("cert");
    std::fs::write(d.join("keystore.pem"), format!("{key}{cert}")).expect("keystore");
    std::fs::write(d.join("users.properties"), "admin: s3cret-pw\n").expect("users");
    std::fs::write(
        d.join("jaas.conf"),
        format!(
            "KafkaConnect {{\n  org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required\n  file=\"{}\";\n}};\n",
            d.join("users.properties").display()
        ),
    )
    .expect("jaas");
    let port = free_port();
    let group = unique_name("distsec");
    let file = worker_file(
        d,
        &group,
        &env().kafka,
        port,
        &format!(
            "listeners=https://127.0.0.1:{port}\n\
             listeners.https.ssl.keystore.type=PEM\n\
             listeners.https.ssl.keystore.location={}\n\
             rest.extension.classes=org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension\n",
            d.join("keystore.pem").display()
        ),
    );
    let opts = format!(
        "-Djava.security.auth.login.config={}",
        d.join("jaas.conf").display()
    );
    let mut relay = Relay::start_args_env(
        &["connect-distributed", file.to_str().expect("utf-8 path")],
        d.join("worker.log"),
        &[("KAFKA_OPTS", opts.as_str())],
    );
    let url = format!("https://127.0.0.1:{port}/connectors");
    let ca = d.join("cert.pem");
    let deadline = Instant::now() + SETTLE;
    let answer = loop {
        relay.assert_running();
        if let Some(a) = curl(Some(&ca), Some("admin:s3cret-pw"), &url) {
            break a;
        }
        assert!(
            Instant::now() < deadline,
            "no HTTPS answer:\n{}",
            tail(&relay.log(), 40)
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(answer, (200, "[]".to_owned()));
    let denied = (401, "User cannot access the resource.".to_owned());
    assert_eq!(curl(Some(&ca), None, &url), Some(denied.clone()));
    assert_eq!(
        curl(Some(&ca), Some("admin:wrong"), &url),
        Some(denied.clone())
    );
    assert_eq!(
        curl(Some(&ca), Some("nobody:s3cret-pw"), &url),
        Some(denied)
    );
    // A client that does not trust the worker's certificate gets nothing.
    assert_eq!(curl(None, Some("admin:s3cret-pw"), &url), None);
    assert!(
        !relay.log().contains("s3cret-pw"),
        "the password reached the log"
    );
}

/// The worker's own clients through SASL_SSL with SCRAM-SHA-512, verified
/// against the test CA, as a secured Connect deployment has them: the
/// storage topics (librdkafka) and the group membership (walrelay's own
/// client) authenticate, the group forms and a connector delivers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_clients_over_sasl_ssl_scram() {
    const USER: &str = "walrelay_dist";
    const PASSWORD: &str = "Dist-Scram-Pw-51f0";
    let certs_root = tempfile::tempdir().expect("dir");
    let certs = certs_root.path().join("certs");
    crate::common::run_script("certs.sh", &[certs.as_os_str()]);
    let kafka = {
        let certs = certs.clone();
        tokio::task::spawn_blocking(move || {
            crate::common::tls::ScramKafka::start_with_tls(USER, PASSWORD, Some(&certs))
        })
        .await
        .expect("broker")
    };
    let ca = certs.join("ca.crt");
    let security = |prefix: &str| {
        format!(
            "{prefix}security.protocol=SASL_SSL\n\
             {prefix}sasl.mechanism=SCRAM-SHA-512\n\
             {prefix}sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"{USER}\" password=\"{PASSWORD}\";\n\
             {prefix}ssl.truststore.type=PEM\n\
             {prefix}ssl.truststore.location={}\n",
            ca.display()
        )
    };
    let extra = format!("{}{}", security(""), security("producer."));
    let dir = tempfile::tempdir().expect("dir");
    let group = unique_name("distscram");
    let mut worker = Worker::start(dir.path(), &group, &kafka.sasl_ssl_bootstrap(), &extra);
    let ob = Outbox::new("distscram").await;
    let body = serde_json::json!({"name": ob.name, "config": connector_config(&ob, &[])});
    let (code, text) = http(&worker.addr, "POST", "/connectors", Some(&body.to_string()));
    assert_eq!(code, 201, "{text}");
    let deadline = Instant::now() + SETTLE;
    while owners(&worker.addr).len() != 1 {
        assert!(
            Instant::now() < deadline,
            "the connector never ran:\n{}",
            tail(&worker.relay.log(), 60)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    ob.insert_series(1, 20).await;
    let counted = count_until(
        &kafka.plain_bootstrap(),
        &ob.topic(""),
        1..=20,
        &mut worker.relay,
    );
    assert_eq!(counted.distinct, 20, "{counted:?}");
    // The group formed: the worker leads generation 1 or later.
    let (_, state) = http(&worker.metrics, "GET", "/api/state", None);
    let state: Value = serde_json::from_str(&state).expect("json");
    assert_eq!(state["group"]["leader"], true, "{state}");
    assert!(state["group"]["generation"].as_i64() >= Some(1), "{state}");
    assert!(
        !worker.relay.log().contains(PASSWORD),
        "the password reached the log"
    );
    drop(worker);
    ob.remove_all().await;
}

/// A task that fails shows `FAILED` with its trace; `restart` with
/// `onlyFailed` restarts it once the cause is gone; the offsets API reads
/// the slot's position and moves it forward on a stopped connector, and
/// the events before the new position are skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_tasks_restart_and_offsets_move_the_slot() {
    let dir = tempfile::tempdir().expect("dir");
    let group = unique_name("distops");
    let worker = Worker::start(dir.path(), &group, &env().kafka, "");
    let a = worker.addr.clone();
    let ob = Outbox::new("distops").await;
    // The publication does not exist and may not be created: the task fails.
    let missing = format!("{}_nopub", ob.name);
    let config = connector_config(
        &ob,
        &[
            ("publication.autocreate.mode", "disabled"),
            ("publication.name", missing.as_str()),
        ],
    );
    let body = serde_json::json!({"name": ob.name, "config": config});
    let (code, text) = http(&a, "POST", "/connectors", Some(&body.to_string()));
    assert_eq!(code, 201, "{text}");
    let status_path = format!("/connectors/{}/status", ob.name);
    let failed = wait_status(&a, &status_path, |v| v["tasks"][0]["state"] == "FAILED");
    assert_eq!(failed["connector"]["state"], "RUNNING", "{failed}");
    let trace = failed["tasks"][0]["trace"].as_str().unwrap_or("");
    assert!(
        trace.contains(&missing),
        "the trace names the publication: {failed}"
    );
    // The cause goes away; a restart of failed tasks runs it.
    ob.client
        .batch_execute(&format!(
            "CREATE PUBLICATION {missing} FOR TABLE {} WITH (publish = 'insert')",
            ob.name
        ))
        .await
        .expect("create the publication");
    let restart = format!(
        "/connectors/{}/restart?includeTasks=true&onlyFailed=true",
        ob.name
    );
    let (code, text) = http(&a, "POST", &restart, None);
    assert_eq!(code, 202, "{text}");
    assert!(text.contains("\"RESTARTING\""), "{text}");
    wait_status(&a, &status_path, |v| v["tasks"][0]["state"] == "RUNNING");
    ob.insert_series(1, 10).await;
    let mut relay = worker.relay;
    let counted = count_until(&env().kafka, &ob.topic(""), 1..=10, &mut relay);
    assert_eq!(counted.distinct, 10, "{counted:?}");

    // Offsets: refused while running, read and moved once stopped.
    let offsets = format!("/connectors/{}/offsets", ob.name);
    let (code, _) = http(&a, "DELETE", &offsets, None);
    assert_eq!(code, 400);
    let (code, _) = http(&a, "PUT", &format!("/connectors/{}/stop", ob.name), None);
    assert_eq!(code, 204);
    wait_status(&a, &status_path, |v| {
        v["connector"]["state"] == "STOPPED" && v["tasks"].as_array().is_some_and(Vec::is_empty)
    });
    let deadline = Instant::now() + SETTLE;
    while ob.slot_active().await {
        assert!(
            Instant::now() < deadline,
            "the slot stays active after stop"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let confirmed = u64::from(ob.slot_confirmed().await.expect("a slot"));
    let (code, text) = http(&a, "GET", &offsets, None);
    assert_eq!(code, 200, "{text}");
    let expected = format!(
        "{{\"offsets\":[{{\"partition\":{{\"server\":\"{}\"}},\"offset\":{{\"lsn\":{confirmed}}}}}]}}",
        ob.name
    );
    assert_eq!(text, expected);
    // Events 11..=20 are written while stopped; moving past them skips them.
    ob.insert_series(11, 20).await;
    let past = u64::from(ob.current_lsn().await);
    let back = format!(
        "{{\"offsets\":[{{\"partition\":{{\"server\":\"{}\"}},\"offset\":{{\"lsn\":{}}}}}]}}",
        ob.name,
        confirmed - 1
    );
    let (code, text) = http(&a, "PATCH", &offsets, Some(&back));
    assert_eq!(code, 400, "a slot never moves back: {text}");
    let forward = format!(
        "{{\"offsets\":[{{\"partition\":{{\"server\":\"{}\"}},\"offset\":{{\"lsn\":{past}}}}}]}}",
        ob.name
    );
    let (code, text) = http(&a, "PATCH", &offsets, Some(&forward));
    assert_eq!(code, 200, "{text}");
    assert!(text.contains("altered successfully"), "{text}");
    let moved = u64::from(ob.slot_confirmed().await.expect("a slot"));
    assert!(moved >= past, "the slot is at {moved}, asked for {past}");
    let (code, _) = http(&a, "PUT", &format!("/connectors/{}/resume", ob.name), None);
    assert_eq!(code, 202);
    wait_status(&a, &status_path, |v| v["tasks"][0]["state"] == "RUNNING");
    ob.insert_series(21, 30).await;
    let counted = count_until(&env().kafka, &ob.topic(""), 21..=30, &mut relay);
    assert_eq!(counted.distinct, 10, "{counted:?}");
    let skipped = count_events(
        &env().kafka,
        &ob.topic(""),
        11..=20,
        Duration::from_secs(5),
        &mut relay,
    );
    assert_eq!(
        skipped.distinct, 0,
        "the events before the new position were sent: {skipped:?}"
    );
    let _ = http(&a, "DELETE", &format!("/connectors/{}", ob.name), None);
    drop(relay);
    ob.remove_all().await;
}

/// Waits until the JSON at `path` satisfies `pred`; returns it.
fn wait_status(addr: &str, path: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + SETTLE;
    loop {
        let (code, text) = http(addr, "GET", path, None);
        if code == 200 {
            let v: Value = serde_json::from_str(&text).expect("json");
            if pred(&v) {
                return v;
            }
        }
        assert!(Instant::now() < deadline, "{path}: {code} {text}");
        std::thread::sleep(Duration::from_millis(250));
    }
}
