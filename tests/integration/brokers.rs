//! Brokers other than Kafka, each a real server started by the test:
//! NATS JetStream (`nats-server -js`) and Redis (`redis-server`). What a
//! consumer reads back (subject or stream, bytes, headers, order), the
//! slot's own state, SIGKILL under load, a 30-second outage, a refused
//! record under both error policies, and the polling source.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use async_nats::jetstream;

use crate::common::load::{sigkill_under_load, Delivered, LoadLog};
use crate::common::metrics::free_port;
use crate::common::relay::{event_id, tail, Outbox, Relay, WAIT};
use crate::common::{env, Record};

/// The `[kafka]` part of a test configuration replaced by `sink` (a
/// `[sink]` section and the broker's own).
pub(crate) fn without_kafka(config: &str, sink: &str) -> String {
    let start = config.find("[kafka]\n").expect("a [kafka] section");
    let marker = "\"linger.ms\" = \"2\"\n";
    let end = config[start..].find(marker).expect("the test producer") + start + marker.len();
    format!("{}{}\n{sink}\n", &config[..start], &config[end..])
}

/// A file in `.cache/` that `scripts/brokers.sh` fetched, or a program on
/// the PATH.
pub(crate) fn program(cached: &str, name: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(format!("WALRELAY_TEST_{}", cached.to_uppercase())) {
        return PathBuf::from(p);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(".cache")
        .join(cached);
    if let Ok(dirs) = std::fs::read_dir(&root) {
        for d in dirs.flatten() {
            let p = d.path().join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    for dir in std::env::var("PATH").unwrap_or_default().split(':') {
        let p = PathBuf::from(dir).join(name);
        if p.is_file() {
            return p;
        }
    }
    for dir in ["/usr/bin", "/usr/sbin", "/usr/local/bin"] {
        let p = PathBuf::from(dir).join(name);
        if p.is_file() {
            return p;
        }
    }
    panic!("{name} not found: scripts/brokers.sh fetches it (scripts/test.sh runs it)")
}

/// A server of one test, killed on drop; `stop` and `start` keep its port
/// and data (an outage).
pub(crate) struct Server {
    args: Vec<String>,
    program: PathBuf,
    pub(crate) port: u16,
    child: Option<Child>,
    _dir: tempfile::TempDir,
    log: PathBuf,
    /// Environment of the program (RabbitMQ's private directories).
    env: Vec<(String, String)>,
    /// A process the server needs, killed with it (RabbitMQ's epmd).
    helper: Option<Child>,
}

impl Server {
    /// The last `n` lines of what the server wrote, for failure messages.
    pub(crate) fn log_tail(&self, n: usize) -> String {
        tail(&std::fs::read_to_string(&self.log).unwrap_or_default(), n)
    }

    pub(crate) fn nats() -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let args = vec![
            "-a".into(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string(),
            "-js".into(),
            "-sd".into(),
            dir.path().join("js").display().to_string(),
        ];
        Server::start_new(program("nats", "nats-server"), args, port, dir)
    }

    /// The moto server (PyPI): SQS, SNS and Kinesis on 127.0.0.1, state
    /// in memory.
    pub(crate) fn moto() -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let args = vec![
            "-H".into(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string(),
        ];
        Server::start_new(program("moto", "moto_server"), args, port, dir)
    }

    /// Google's Pub/Sub fake (pstest) behind scripts/pubsub-emulator, on
    /// 127.0.0.1, state in memory; `dir()/fault.<RPC>` files make calls
    /// fail (see the program's doc).
    pub(crate) fn pubsub() -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let args = vec![
            "-port".into(),
            port.to_string(),
            "-faults".into(),
            dir.path().display().to_string(),
        ];
        Server::start_new(program("pubsub", "pubsub-emulator"), args, port, dir)
    }

    /// The server's own directory.
    pub(crate) fn dir(&self) -> &std::path::Path {
        self._dir.path()
    }

    pub(crate) fn redis() -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let args = vec![
            "--port".into(),
            port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--dir".into(),
            dir.path().display().to_string(),
            "--save".into(),
            String::new(),
            "--appendonly".into(),
            "yes".into(),
            "--appendfsync".into(),
            "always".into(),
        ];
        Server::start_new(program("redis", "redis-server"), args, port, dir)
    }

    /// Debian's RabbitMQ (the scripts under /usr/lib/rabbitmq/bin, not
    /// /usr/sbin's, which switch to the system's user and cookie), as
    /// `scripts/brokers.sh` runs it: HOME, cookie, configuration and data
    /// in the test's directory, its own epmd on a free port, the AMQP
    /// listener on 127.0.0.1:`port` (user guest, password guest). With
    /// `NOTIFY_SOCKET` set, rabbitmq-server execs the Erlang VM itself, so
    /// the child is the broker and [`Server::stop`] kills it.
    pub(crate) fn rabbitmq() -> Server {
        Server::rabbitmq_on_free_ports(false).0
    }

    /// [`Server::rabbitmq`] with the `rabbitmq_stream` plugin listening on
    /// the returned port of 127.0.0.1 and advertising that address (stream
    /// clients connect to the advertised one).
    pub(crate) fn rabbitmq_stream() -> (Server, u16) {
        let (server, stream) = Server::rabbitmq_on_free_ports(true);
        (server, stream.expect("a stream port"))
    }

    /// Free ports are only free when chosen: another test's server can take
    /// one before RabbitMQ binds it (its boot takes seconds), and RabbitMQ
    /// then exits with `eaddrinuse`. Such a start is tried again on new
    /// ports, up to three times; any other failure panics at once.
    fn rabbitmq_on_free_ports(stream: bool) -> (Server, Option<u16>) {
        let mut last = String::new();
        for _ in 0..3 {
            let stream_port = stream.then(free_port);
            let mut server = Server::rabbitmq_with(stream_port);
            match server.try_start() {
                Ok(()) => return (server, stream_port),
                Err(e) if e.contains("eaddrinuse") => last = e,
                Err(e) => panic!("{e}"),
            }
        }
        panic!("three starts of RabbitMQ found a port taken; the last: {last}")
    }

    /// The server, configured but not started.
    fn rabbitmq_with(stream_port: Option<u16>) -> Server {
        let server = std::env::var_os("WALRELAY_TEST_RABBITMQ_SERVER").map_or_else(
            || PathBuf::from("/usr/lib/rabbitmq/bin/rabbitmq-server"),
            PathBuf::from,
        );
        assert!(
            server.is_file(),
            "{} not found: scripts/brokers.sh fetch rabbitmq installs it",
            server.display()
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let d = dir.path();
        let (port, dist, epmd_port) = (free_port(), free_port(), free_port());
        let write = |name: &str, text: &str| std::fs::write(d.join(name), text).expect(name);
        write(
            "rabbitmq.conf",
            &format!(
                "listeners.tcp.default = 127.0.0.1:{port}\n\
                 default_user = guest\ndefault_pass = guest\nloopback_users.guest = true\n\
                 log.console = true\nlog.console.level = warning\nlog.file = false\n\
                 disk_free_limit.absolute = 50MB\n"
            ),
        );
        let (plugins, stream_conf) = match stream_port {
            Some(p) => (
                "[rabbitmq_stream].\n",
                format!(
                    "stream.listeners.tcp.default = 127.0.0.1:{p}\n\
                     stream.advertised_host = 127.0.0.1\nstream.advertised_port = {p}\n"
                ),
            ),
            None => ("[].\n", String::new()),
        };
        let conf = d.join("rabbitmq.conf");
        let mut text = std::fs::read_to_string(&conf).expect("rabbitmq.conf");
        text.push_str(&stream_conf);
        write("rabbitmq.conf", &text);
        write("enabled_plugins", plugins);
        write("advanced.config", "[].\n");
        write("rabbitmq-env.conf", "");
        let cookie = d.join(".erlang.cookie");
        std::fs::write(&cookie, format!("walrelay{port}cookie{dist}")).expect("cookie");
        std::fs::set_permissions(
            &cookie,
            <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o400),
        )
        .expect("cookie mode");
        let epmd = Command::new(program("rabbitmq", "epmd"))
            .args(["-port", &epmd_port.to_string(), "-address", "127.0.0.1"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start epmd");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", epmd_port)).is_err() {
            assert!(Instant::now() < deadline, "epmd did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        let at = |name: &str| d.join(name).display().to_string();
        let env = [
            ("HOME", d.display().to_string()),
            (
                "RABBITMQ_NODENAME",
                format!("walrelay-test-{port}@localhost"),
            ),
            ("RABBITMQ_USE_LONGNAME", "false".into()),
            ("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1".into()),
            ("RABBITMQ_NODE_PORT", port.to_string()),
            ("RABBITMQ_DIST_PORT", dist.to_string()),
            ("ERL_EPMD_PORT", epmd_port.to_string()),
            ("ERL_EPMD_ADDRESS", "127.0.0.1".into()),
            ("RABBITMQ_CONF_ENV_FILE", at("rabbitmq-env.conf")),
            ("RABBITMQ_CONFIG_FILE", at("rabbitmq.conf")),
            ("RABBITMQ_ADVANCED_CONFIG_FILE", at("advanced.config")),
            ("RABBITMQ_ENABLED_PLUGINS_FILE", at("enabled_plugins")),
            ("RABBITMQ_MNESIA_BASE", at("mnesia")),
            ("RABBITMQ_LOG_BASE", at("logs")),
            ("RABBITMQ_PID_FILE", at("beam.pid")),
            (
                "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS",
                "-start_epmd false -kernel inet_dist_use_interface {127,0,0,1}".into(),
            ),
            ("NOTIFY_SOCKET", at("no-systemd.sock")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        Server {
            args: Vec::new(),
            program: server,
            port,
            child: None,
            log: d.join("server.log"),
            _dir: dir,
            env,
            helper: Some(epmd),
        }
    }

    /// Starts `program` with `args`; it must listen on `port`; `dir` is
    /// its own (removed with it).
    pub(crate) fn start_new(
        program: PathBuf,
        args: Vec<String>,
        port: u16,
        dir: tempfile::TempDir,
    ) -> Server {
        let log = dir.path().join("server.log");
        let mut s = Server {
            args,
            program,
            port,
            child: None,
            _dir: dir,
            log,
            env: Vec::new(),
            helper: None,
        };
        s.start();
        s
    }

    /// Starts it (again), on the same port with the same data.
    pub(crate) fn start(&mut self) {
        if let Err(e) = self.try_start() {
            panic!("{e}");
        }
    }

    /// [`Server::start`], returning why it did not listen (with its log).
    fn try_start(&mut self) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("server log");
        let child = Command::new(&self.program)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", self.program.display()));
        self.child = Some(child);
        // Generous: an Erlang VM booting on a loaded two-core machine (the
        // whole suite runs at once) takes well over the 6-8 s it takes alone.
        let deadline = Instant::now() + Duration::from_secs(180);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if Instant::now() >= deadline || exited.is_some() {
                self.stop();
                return Err(format!(
                    "{} did not listen on {} ({}): {}",
                    self.program.display(),
                    self.port,
                    exited.map_or_else(|| "timed out".to_owned(), |s| format!("exited: {s}")),
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// RabbitMQ: `rabbitmqctl ARGS` against this node (its cookie, node
    /// name and epmd), for what AMQP cannot do (virtual hosts).
    pub(crate) fn rabbitmqctl(&self, args: &[&str]) -> Result<(), String> {
        let ctl = self.program.with_file_name("rabbitmqctl");
        let out = Command::new(&ctl)
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("run {}: {e}", ctl.display()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "rabbitmqctl {args:?}: {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// Stops it as an operator does (SIGTERM, waiting up to 60 s for it to
    /// exit, then SIGKILL); [`Server::start`] brings it back.
    pub(crate) fn terminate(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(60);
            while c.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGSTOP: a hung server (connections stay open, nothing is
    /// answered); [`Server::resume`] ends it. For servers that keep their
    /// data only in memory (moto).
    pub(crate) fn pause(&self) {
        if let Some(c) = &self.child {
            let _ = Command::new("kill")
                .args(["-STOP", &c.id().to_string()])
                .status();
        }
    }

    /// SIGCONT after [`Server::pause`].
    pub(crate) fn resume(&self) {
        if let Some(c) = &self.child {
            let _ = Command::new("kill")
                .args(["-CONT", &c.id().to_string()])
                .status();
        }
    }

    /// Kills it (an outage); [`Server::start`] brings it back.
    pub(crate) fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        if let Some(mut h) = self.helper.take() {
            let _ = h.kill();
            let _ = h.wait();
        }
    }
}

/// One message of a JetStream stream, as a [`Record`] (no key: Debezium
/// Server's NATS sink sends none) and its subject.
struct NatsMessage {
    subject: String,
    record: Record,
}

async fn nats_client(port: u16) -> jetstream::Context {
    let client = async_nats::connect(format!("nats://127.0.0.1:{port}"))
        .await
        .expect("connect to nats");
    jetstream::new(client)
}

/// Creates stream `name` capturing `subjects`, file storage, with
/// `max_msg_size` when given.
async fn create_stream(js: &jetstream::Context, name: &str, subjects: &[String], max: i32) {
    js.create_stream(jetstream::stream::Config {
        name: name.to_owned(),
        subjects: subjects.to_vec(),
        storage: jetstream::stream::StorageType::File,
        max_message_size: max,
        ..Default::default()
    })
    .await
    .expect("create stream");
}

/// Every message of stream `name`, in stream order, waiting (bounded)
/// until there are at least `want`.
async fn read_stream(
    js: &jetstream::Context,
    name: &str,
    want: u64,
    relay: &mut Relay,
) -> Vec<NatsMessage> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut stream = js.get_stream(name).await.expect("stream");
    loop {
        let info = stream.info().await.expect("stream info");
        if info.state.messages >= want {
            break;
        }
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "stream {name} holds {} messages, want {want}\n{}",
            info.state.messages,
            tail(&relay.log(), 40)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let last = stream.info().await.expect("info").state.last_sequence;
    let mut out = Vec::new();
    for seq in 1..=last {
        let Ok(m) = stream.get_raw_message(seq).await else {
            continue;
        };
        let headers = m
            .headers
            .iter()
            .flat_map(|(k, vs)| {
                vs.iter()
                    .map(move |v| (k.to_string(), Some(v.as_str().as_bytes().to_vec())))
            })
            .collect();
        out.push(NatsMessage {
            subject: m.subject.to_string(),
            record: Record {
                partition: 0,
                offset: i64::try_from(seq).unwrap_or(i64::MAX),
                key: None,
                value: Some(m.payload.to_vec()),
                headers,
            },
        });
    }
    out
}

fn nats_sink(port: u16, extra: &str) -> String {
    format!("[sink]\ntype = \"nats-jetstream\"\n\n[sink.nats]\nurl = \"nats://127.0.0.1:{port}\"\n{extra}\n")
}

/// Events in order, byte for byte as Debezium Server's NATS sink sends
/// them (value only, the `id` header), plus `Nats-Msg-Id`; a null payload
/// publishes nothing; the slot is confirmed past them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_events_in_order_with_exact_bytes() {
    let nats = Server::nats();
    let js = nats_client(nats.port).await;
    let ob = Outbox::new("nats_order").await;
    let stream = format!("S_{}", ob.name);
    create_stream(&js, &stream, &[ob.topic("")], -1).await;
    let config = without_kafka(&ob.config(""), &nats_sink(nats.port, ""));
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k1", r#"{"a": 1, "b": [1, 2]}"#).await;
    ob.insert_null_payload(2, "k1").await;
    for n in 3..=10 {
        ob.insert(n, "", &format!("k{}", n % 3), &format!("{{\"n\": {n}}}"))
            .await;
    }
    let end = ob.current_lsn().await;
    let got = read_stream(&js, &stream, 9, &mut relay).await;
    // Nothing more arrives: wait for the slot, then read again.
    ob.wait_confirmed(end, &relay).await;
    let got_after = read_stream(&js, &stream, 9, &mut relay).await;
    assert_eq!(got.len(), 9, "event 2 (null payload) is not published");
    assert_eq!(got_after.len(), 9);
    let numbers: Vec<u64> = got
        .iter()
        .map(|m| {
            crate::common::relay::event_number(m.record.header("id").expect("id header"))
                .expect("an event id")
        })
        .collect();
    assert_eq!(numbers, [1, 3, 4, 5, 6, 7, 8, 9, 10], "in commit order");
    let first = &got[0];
    assert_eq!(first.subject, ob.topic(""));
    assert_eq!(
        first.record.value.as_deref(),
        Some(&br#"{"a": 1, "b": [1, 2]}"#[..])
    );
    let mut headers = first.record.headers.clone();
    headers.sort();
    assert_eq!(
        headers,
        vec![
            ("Nats-Msg-Id".to_owned(), Some(event_id(1).into_bytes())),
            ("id".to_owned(), Some(event_id(1).into_bytes())),
        ]
    );
    // The process exports its broker.
    ob.finish(relay).await;
}

/// SIGKILL under load: every committed event is in the stream, in order
/// per aggregate, and none twice (the restart republishes what was not
/// confirmed; JetStream drops those with a `Nats-Msg-Id` it stored).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_sigkill_under_load_delivers_every_event_once() {
    let nats = Server::nats();
    let js = nats_client(nats.port).await;
    let ob = Outbox::new("nats_kill").await;
    let stream = format!("S_{}", ob.name);
    create_stream(&js, &stream, &[ob.topic("")], -1).await;
    let config = without_kafka(&ob.config(""), &nats_sink(nats.port, ""));
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    let read = async |relay: &mut Relay, log: &LoadLog| {
        let total = log.committed.len() as u64;
        let got = read_stream(&js, &stream, total, relay).await;
        let keys: HashMap<&str, &str> = log
            .committed
            .iter()
            .map(|e| (e.id.as_str(), e.key.as_str()))
            .collect();
        got.into_iter()
            .map(|m| {
                let mut r = m.record;
                let id = String::from_utf8(r.header("id").unwrap_or_default().to_vec()).unwrap();
                r.key = keys.get(id.as_str()).map(|k| k.as_bytes().to_vec());
                r
            })
            .collect::<Vec<Record>>()
    };
    let relay = sigkill_under_load(&ob, relay, &config, Delivered::ExactlyOnce, read).await;
    ob.finish(relay).await;
}

/// The broker stopped for 30 s mid-load: the slot stays before the first
/// event NATS did not acknowledge, and everything arrives once it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_outage_holds_the_slot_then_delivers() {
    let mut nats = Server::nats();
    let js = nats_client(nats.port).await;
    let ob = Outbox::new("nats_outage").await;
    let stream = format!("S_{}", ob.name);
    create_stream(&js, &stream, &[ob.topic("")], -1).await;
    let config = without_kafka(&ob.config(""), &nats_sink(nats.port, ""));
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    ob.insert_series(1, 100).await;
    let _ = read_stream(&js, &stream, 100, &mut relay).await;
    let before = ob.current_lsn().await;
    ob.wait_confirmed(before, &relay).await;
    nats.stop();
    // Events 101..=300 in one transaction; the position just before its
    // commit record: the slot passes it only if the transaction was
    // confirmed.
    let pre_commit = ob.insert_series_reading_pre_commit_lsn(101, 300).await;
    ob.slot_held_before(pre_commit, &mut relay, "NATS").await;
    nats.start();
    let js = nats_client(nats.port).await;
    let got = read_stream(&js, &stream, 300, &mut relay).await;
    let mut numbers: Vec<u64> = got
        .iter()
        .filter_map(|m| crate::common::relay::event_number(m.record.header("id")?))
        .collect();
    assert_eq!(numbers.len(), 300, "no event twice, none lost");
    numbers.dedup();
    assert_eq!(numbers, (1..=300).collect::<Vec<_>>(), "in order");
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    ob.finish(relay).await;
}

/// A record the stream refuses (larger than its `max_msg_size`): under
/// `errors.tolerance = none` walrelay stops without confirming it; under
/// `all` its dead-letter record goes to a subject on the same broker and
/// the stream goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_refused_record_stops_or_is_dead_lettered() {
    let nats = Server::nats();
    let js = nats_client(nats.port).await;
    let ob = Outbox::new("nats_refused").await;
    let stream = format!("S_{}", ob.name);
    let dlq = format!("dlq.{}", ob.name);
    create_stream(&js, &stream, &[ob.topic("")], 400).await;
    create_stream(
        &js,
        &format!("D_{}", ob.name),
        std::slice::from_ref(&dlq),
        -1,
    )
    .await;
    let big = format!("{{\"big\": \"{}\"}}", "x".repeat(1000));
    // 1. none: stops, the slot stays before the big event.
    let config = without_kafka(&ob.config(""), &nats_sink(nats.port, ""));
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k", "{}").await;
    let _ = read_stream(&js, &stream, 1, &mut relay).await;
    ob.insert(2, "", "k", &big).await;
    ob.insert(3, "", "k", "{}").await;
    let code = relay.exit_code(WAIT);
    assert_ne!(code, 0, "walrelay must stop on the refused record");
    let log = relay.log();
    assert!(
        log.contains(&event_id(2)) && log.contains("nats-jetstream could not deliver"),
        "the error names the event: {}",
        tail(&log, 20)
    );
    // 2. all: the dead-letter subject takes it, event 3 follows. That
    // event 2 is read again proves the first run confirmed nothing past
    // it.
    let dead = format!("[errors]\ntolerance = \"all\"\ndead_letter_topic = \"{dlq}\"\n");
    let config = without_kafka(
        &ob.config(""),
        &format!("{}{dead}", nats_sink(nats.port, "")),
    );
    let mut relay = Relay::start(&config);
    let main = read_stream(&js, &stream, 2, &mut relay).await;
    let letters = read_stream(&js, &format!("D_{}", ob.name), 1, &mut relay).await;
    let numbers: Vec<u64> = main
        .iter()
        .filter_map(|m| crate::common::relay::event_number(m.record.header("id")?))
        .collect();
    assert_eq!(numbers, [1, 3]);
    assert_eq!(letters.len(), 1);
    let letter = &letters[0].record;
    assert_eq!(
        letter.header("walrelay.event.id"),
        Some(event_id(2).as_bytes())
    );
    assert_eq!(
        letter.header("walrelay.error.kind"),
        Some(&b"message_too_large"[..])
    );
    assert_eq!(
        letter.value.as_deref(),
        Some(big.as_bytes()),
        "the original bytes"
    );
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    ob.finish(relay).await;
}

/// Redis: `XADD` per event to the stream named by the router, the key as
/// the field name and the value as its value (Debezium Server's compact
/// format); a null payload is written as `default`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_events_in_order_with_exact_bytes() {
    let redis = Server::redis();
    let ob = Outbox::new("redis_order").await;
    let sink = format!(
        "[sink]\ntype = \"redis\"\n\n[sink.redis]\naddress = \"127.0.0.1:{}\"\n",
        redis.port
    );
    let config = without_kafka(&ob.config(""), &sink);
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k1", r#"{"a": 1}"#).await;
    ob.insert_null_payload(2, "k2").await;
    for n in 3..=10 {
        ob.insert(n, "", &format!("k{n}"), &format!("{{\"n\": {n}}}"))
            .await;
    }
    let entries = read_redis(redis.port, &ob.topic(""), 10, &mut relay).await;
    assert_eq!(entries.len(), 10);
    assert_eq!(entries[0], vec![(b"k1".to_vec(), br#"{"a": 1}"#.to_vec())]);
    assert_eq!(entries[1], vec![(b"k2".to_vec(), b"default".to_vec())]);
    for (i, e) in entries.iter().enumerate().skip(2) {
        let n = i + 1;
        assert_eq!(
            e,
            &vec![(
                format!("k{n}").into_bytes(),
                format!("{{\"n\": {n}}}").into_bytes()
            )]
        );
    }
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    ob.finish(relay).await;
}

/// A record Redis refuses (the stream's key holds a string): stops under
/// `none` without confirming it; dead-lettered to another stream under
/// `all`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_refused_record_stops_or_is_dead_lettered() {
    let redis = Server::redis();
    let ob = Outbox::new("redis_refused").await;
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/", redis.port)).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let bad = ob.topic("_bad");
    let _: () = redis::cmd("SET")
        .arg(&bad)
        .arg("a string, not a stream")
        .query_async(&mut conn)
        .await
        .unwrap();
    let sink = format!(
        "[sink]\ntype = \"redis\"\n\n[sink.redis]\naddress = \"127.0.0.1:{}\"\n",
        redis.port
    );
    let mut relay = Relay::start(&without_kafka(&ob.config(""), &sink));
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k", "{}").await;
    let _ = read_redis(redis.port, &ob.topic(""), 1, &mut relay).await;
    ob.insert(2, "_bad", "k", "{}").await;
    ob.insert(3, "", "k", "{}").await;
    assert_ne!(
        relay.exit_code(WAIT),
        0,
        "walrelay must stop: {}",
        relay.log()
    );
    assert!(
        relay.log().contains("WRONGTYPE"),
        "{}",
        tail(&relay.log(), 20)
    );
    // Event 2 is read again below: nothing past it was confirmed.
    let dlq = format!("dlq.{}", ob.name);
    let dead = format!("[errors]\ntolerance = \"all\"\ndead_letter_topic = \"{dlq}\"\n");
    let mut relay = Relay::start(&without_kafka(&ob.config(""), &format!("{sink}{dead}")));
    let main = read_redis(redis.port, &ob.topic(""), 2, &mut relay).await;
    assert_eq!(main.len(), 2);
    let letters = read_redis(redis.port, &dlq, 1, &mut relay).await;
    // Compact format: the original key as the field, its bytes as value.
    assert_eq!(letters[0], vec![(b"k".to_vec(), b"{}".to_vec())]);
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    ob.finish(relay).await;
}

/// SIGKILL under load to Redis: every committed event arrives, in order
/// per key (at least once: a restart may write some twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_sigkill_under_load_delivers_every_event() {
    let redis = Server::redis();
    let ob = Outbox::new("redis_kill").await;
    let sink = format!(
        "[sink]\ntype = \"redis\"\n\n[sink.redis]\naddress = \"127.0.0.1:{}\"\nmessage_format = \"extended\"\n",
        redis.port
    );
    let config = without_kafka(&ob.config(""), &sink);
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    let read = async |relay: &mut Relay, log: &LoadLog| {
        let total = log.committed.len();
        let deadline = Instant::now() + Duration::from_secs(120);
        let records = loop {
            let entries = read_redis(redis.port, &ob.topic(""), 1, relay).await;
            let records: Vec<Record> = entries.iter().map(|e| extended_record(e)).collect();
            let distinct: std::collections::HashSet<_> =
                records.iter().filter_map(|r| r.header("ID")).collect();
            if distinct.len() >= total || Instant::now() > deadline {
                break records;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        };
        records
            .into_iter()
            .map(|mut r| {
                // check() reads the `id` header.
                let id = r.header("ID").map(<[u8]>::to_vec);
                r.headers.push(("id".to_owned(), id));
                r
            })
            .collect::<Vec<Record>>()
    };
    let relay = sigkill_under_load(&ob, relay, &config, Delivered::AtLeastOnce, read).await;
    ob.finish(relay).await;
}

fn redis_sink(port: u16) -> String {
    format!("[sink]\ntype = \"redis\"\n\n[sink.redis]\naddress = \"127.0.0.1:{port}\"\n")
}

/// The `n` of each compact-format entry (`k<n % 10>` → `{"n": n}`), in
/// stream order, each number once, at its first arrival.
fn redis_first_arrivals(entries: &[Vec<(Vec<u8>, Vec<u8>)>]) -> Vec<u64> {
    let mut seen = std::collections::HashSet::new();
    entries
        .iter()
        .filter_map(|e| {
            let (_, value) = e.first()?;
            serde_json::from_slice::<serde_json::Value>(value).ok()?["n"].as_u64()
        })
        .filter(|n| seen.insert(*n))
        .collect()
}

/// Redis stopped for 30 s mid-load (its append-only file kept): the slot
/// stays before the outage's transaction, walrelay keeps running, and
/// every event arrives in order once it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_outage_holds_the_slot_then_delivers() {
    let mut redis = Server::redis();
    let ob = Outbox::new("redis_outage").await;
    let config = without_kafka(&ob.config(""), &redis_sink(redis.port));
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    ob.insert_series(1, 100).await;
    let _ = read_redis(redis.port, &ob.topic(""), 100, &mut relay).await;
    let before = ob.current_lsn().await;
    ob.wait_confirmed(before, &relay).await;
    redis.stop();
    // Events 101..=300 in one transaction; the position just before its
    // commit record: the slot passes it only if the transaction was
    // confirmed (other tests' commits may move it past `before`).
    let pre_commit = ob.insert_series_reading_pre_commit_lsn(101, 300).await;
    ob.slot_held_before(pre_commit, &mut relay, "Redis").await;
    redis.start();
    let deadline = Instant::now() + Duration::from_secs(120);
    let numbers = loop {
        let entries = read_redis(redis.port, &ob.topic(""), 300, &mut relay).await;
        let numbers = redis_first_arrivals(&entries);
        if numbers.len() >= 300 || Instant::now() > deadline {
            break numbers;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(
        numbers,
        (1..=300).collect::<Vec<_>>(),
        "in order, none lost"
    );
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    ob.finish(relay).await;
}

/// The polling source publishing to Redis: rows become stream entries, in
/// order, and are marked published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_from_the_polling_source() {
    let _ = env();
    let redis = Server::redis();
    let ob = crate::poll::PollBox::new("redis_poll").await;
    let port = free_port();
    let config = without_kafka(&ob.config(port, "", ""), &redis_sink(redis.port));
    let mut relay = Relay::start(&config);
    for i in 1..=20 {
        ob.insert(i, &format!("k{}", i % 4)).await;
    }
    ob.wait_published(20, &mut relay).await;
    let entries = read_redis(redis.port, &ob.topic(), 20, &mut relay).await;
    let view = crate::common::metrics::pipeline(port)
        .await
        .expect("the state");
    let broker = view.broker.expect("the broker in /api/state");
    assert_eq!(broker.name, "redis");
    assert!(broker.acked_total >= 20, "{broker:?}");
    assert_eq!(redis_first_arrivals(&entries), (1..=20).collect::<Vec<_>>());
    let keys: Vec<Vec<u8>> = entries.iter().map(|e| e[0].0.clone()).collect();
    let want: Vec<Vec<u8>> = (1..=20)
        .map(|i| format!("k{}", i % 4).into_bytes())
        .collect();
    assert_eq!(keys, want, "the record key as the field name");
    relay.signal("TERM");
    assert_eq!(relay.exit_code(WAIT), 0, "{}", relay.log());
}

/// An entry of the extended format (`key`, `value`, then headers in upper
/// case) as a [`Record`].
fn extended_record(fields: &[(Vec<u8>, Vec<u8>)]) -> Record {
    let mut r = Record {
        partition: 0,
        offset: 0,
        key: None,
        value: None,
        headers: Vec::new(),
    };
    for (k, v) in fields {
        match k.as_slice() {
            b"key" => r.key = Some(v.clone()),
            b"value" => r.value = Some(v.clone()),
            _ => r
                .headers
                .push((String::from_utf8_lossy(k).into_owned(), Some(v.clone()))),
        }
    }
    r
}

/// Every entry of stream `key` as its field-value pairs, waiting (bounded)
/// until there are at least `want`.
async fn read_redis(
    port: u16,
    key: &str,
    want: usize,
    relay: &mut Relay,
) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let reply: redis::Value = redis::cmd("XRANGE")
            .arg(key)
            .arg("-")
            .arg("+")
            .query_async(&mut conn)
            .await
            .unwrap_or(redis::Value::Nil);
        let entries = parse_xrange(reply);
        if entries.len() >= want {
            return entries;
        }
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "stream {key} holds {} entries, want {want}\n{}",
            entries.len(),
            tail(&relay.log(), 40)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub(crate) fn parse_xrange(reply: redis::Value) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
    let bytes = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => b.clone(),
        redis::Value::SimpleString(s) => s.clone().into_bytes(),
        other => panic!("unexpected {other:?}"),
    };
    let redis::Value::Array(entries) = reply else {
        return Vec::new();
    };
    entries
        .into_iter()
        .map(|e| {
            let redis::Value::Array(parts) = e else {
                panic!("entry {e:?}")
            };
            let redis::Value::Array(fields) = &parts[1] else {
                panic!("fields {parts:?}")
            };
            fields
                .chunks(2)
                .map(|p| (bytes(&p[0]), bytes(&p[1])))
                .collect()
        })
        .collect()
}

/// NATS over TLS with a client certificate and a password
/// (`scripts/certs.sh`'s certificates; the server verifies the client's):
/// a wrong password is refused by the server, that refusal is logged,
/// nothing is stored and the password is in no log line; the right
/// password, written into the URL, delivers over TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_over_tls_with_a_password() {
    const PASSWORD: &str = "s3cret-Pw.9";
    let dir = tempfile::tempdir().expect("temp dir");
    let certs = dir.path().join("certs");
    crate::common::run_script("certs.sh", &[certs.as_os_str()]);
    let port = free_port();
    let at = |f: &str| certs.join(f).display().to_string();
    let conf = dir.path().join("nats.conf");
    std::fs::write(
        &conf,
        format!(
            "listen: 127.0.0.1:{port}\njetstream {{ store_dir: \"{}\" }}\n\
             tls {{ cert_file: \"{}\", key_file: \"{}\", ca_file: \"{}\", verify: true }}\n\
             authorization {{ user: walrelay, password: \"{PASSWORD}\" }}\n",
            dir.path().join("js").display(),
            at("server.crt"),
            at("server.key"),
            at("ca.crt"),
        ),
    )
    .expect("nats.conf");
    let _nats = Server::start_new(
        program("nats", "nats-server"),
        vec!["-c".into(), conf.display().to_string()],
        port,
        tempfile::tempdir().expect("temp dir"),
    );
    let client = async_nats::ConnectOptions::new()
        .user_and_password("walrelay".into(), PASSWORD.into())
        .add_root_certificates(certs.join("ca.crt"))
        .add_client_certificate(certs.join("client.crt"), certs.join("client.key"))
        .require_tls(true)
        .connect(format!("tls://localhost:{port}"))
        .await
        .expect("the test's own TLS client connects");
    let js = jetstream::new(client);
    let ob = Outbox::new("nats_tls").await;
    let stream = format!("S_{}", ob.name);
    create_stream(&js, &stream, &[ob.topic("")], -1).await;
    let files = format!(
        "tls_ca_file = \"{}\"\ntls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n",
        at("ca.crt"),
        at("client.crt"),
        at("client.key")
    );
    // 1. A wrong password: refused by the server, logged, nothing stored.
    let wrong = format!(
        "[sink]\ntype = \"nats-jetstream\"\n\n[sink.nats]\nurl = \"tls://localhost:{port}\"\n\
         user = \"walrelay\"\npassword = \"not-{PASSWORD}\"\n{files}"
    );
    let mut relay = Relay::start(&without_kafka(&ob.config(""), &wrong));
    ob.wait_active(&mut relay).await;
    ob.insert(1, "", "k", r#"{"n": 1}"#).await;
    let deadline = Instant::now() + WAIT;
    while !relay.log().contains("Authorization Violation") {
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "the server's refusal is not in the log:\n{}",
            tail(&relay.log(), 30)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let info = js
        .get_stream(&stream)
        .await
        .expect("stream")
        .info()
        .await
        .expect("info")
        .state
        .messages;
    assert_eq!(info, 0, "nothing stored with a wrong password");
    assert!(
        !relay.log().contains(PASSWORD),
        "{}",
        tail(&relay.log(), 30)
    );
    drop(relay);
    ob.wait_inactive().await;
    // 2. The right password, in the URL: delivered over TLS.
    let right = format!(
        "[sink]\ntype = \"nats-jetstream\"\n\n[sink.nats]\nurl = \"tls://walrelay:{PASSWORD}@localhost:{port}\"\n{files}"
    );
    let mut relay = Relay::start(&without_kafka(&ob.config(""), &right));
    let got = read_stream(&js, &stream, 1, &mut relay).await;
    assert_eq!(got[0].record.value.as_deref(), Some(&br#"{"n": 1}"#[..]));
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    assert!(
        !relay.log().contains(PASSWORD),
        "{}",
        tail(&relay.log(), 30)
    );
    ob.finish(relay).await;
}

/// The polling source publishing to NATS: rows become messages and are
/// marked published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_from_the_polling_source() {
    let _ = env();
    let nats = Server::nats();
    let js = nats_client(nats.port).await;
    let ob = crate::poll::PollBox::new("nats_poll").await;
    let stream = format!("S_{}", ob.name);
    create_stream(&js, &stream, &[ob.topic()], -1).await;
    let port = free_port();
    let config = without_kafka(&ob.config(port, "", ""), &nats_sink(nats.port, ""));
    let mut relay = Relay::start(&config);
    for i in 1..=20 {
        ob.insert(i, &format!("k{}", i % 4)).await;
    }
    ob.wait_published(20, &mut relay).await;
    let got = read_stream(&js, &stream, 20, &mut relay).await;
    let view = crate::common::metrics::pipeline(port)
        .await
        .expect("the state");
    let broker = view.broker.expect("the broker in /api/state");
    assert_eq!(broker.name, "nats-jetstream");
    assert!(broker.acked_total >= 20, "{broker:?}");
    let numbers: Vec<u64> = got
        .iter()
        .filter_map(|m| crate::common::relay::event_number(m.record.header("id")?))
        .collect();
    assert_eq!(numbers, (1..=20).collect::<Vec<_>>());
    relay.signal("TERM");
    assert_eq!(relay.exit_code(WAIT), 0, "{}", relay.log());
}

/// Writes event 2 with a 2,000-byte payload (over the test's 1,000-byte
/// limit) and event 3 after it, both key `k`, and asserts that walrelay
/// stops on event 2 naming `limit_key`; returns the large payload.
pub(crate) async fn refused_large_record_stops(
    ob: &Outbox,
    relay: &mut Relay,
    limit_key: &str,
) -> String {
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(2000));
    ob.insert(2, "", "k", &big).await;
    ob.insert(3, "", "k", "{}").await;
    assert_ne!(
        relay.exit_code(WAIT),
        0,
        "walrelay must stop: {}",
        relay.log()
    );
    assert!(
        relay.log().contains(limit_key),
        "{}",
        tail(&relay.log(), 20)
    );
    big
}

/// The `n` of each `{"n": n}` data, per key, in the order given.
pub(crate) fn numbers_per_key<'a>(
    records: impl IntoIterator<Item = (&'a str, &'a [u8])>,
) -> HashMap<String, Vec<u64>> {
    let mut per_key: HashMap<String, Vec<u64>> = HashMap::new();
    for (key, data) in records {
        if let Some(n) = serde_json::from_slice::<serde_json::Value>(data)
            .ok()
            .and_then(|v| v["n"].as_u64())
        {
            per_key.entry(key.to_owned()).or_default().push(n);
        }
    }
    per_key
}

/// `walrelay check --config` of `config` (a TOML file of its own): its
/// exit code and what it printed.
pub(crate) async fn walrelay_check(config: &str) -> (Option<i32>, String) {
    let file = tempfile::Builder::new()
        .suffix(".toml")
        .tempfile()
        .expect("config file");
    std::fs::write(file.path(), config).expect("write config");
    let path = file.path().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_walrelay"))
            .args(["check", "--config"])
            .arg(path)
            .env("WALRELAY_LOG", "warn")
            .output()
            .expect("run walrelay check")
    })
    .await
    .expect("check ran");
    drop(file);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The line of `text` (a check table) naming `row`.
pub(crate) fn check_row(text: &str, row: &str) -> String {
    text.lines()
        .find(|l| l.contains(row))
        .unwrap_or_default()
        .to_owned()
}

/// `walrelay check` with NATS: the broker answers, and a subject no
/// stream captures fails the destinations row, naming it; once a stream
/// captures it, the row passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_check_names_a_subject_no_stream_captures() {
    let nats = Server::nats();
    let js = nats_client(nats.port).await;
    let ob = Outbox::new("nats_check").await;
    ob.insert(1, "", "k", "{}").await;
    let config = without_kafka(&ob.config(""), &nats_sink(nats.port, ""));
    let file = tempfile::Builder::new()
        .suffix(".toml")
        .tempfile()
        .expect("config file");
    std::fs::write(file.path(), &config).expect("write config");
    let check = |path: PathBuf| {
        tokio::task::spawn_blocking(move || {
            Command::new(env!("CARGO_BIN_EXE_walrelay"))
                .args(["check", "--config"])
                .arg(path)
                .env("WALRELAY_LOG", "warn")
                .output()
                .expect("run walrelay check")
        })
    };
    let out = check(file.path().to_owned()).await.expect("check ran");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = |name: &str| {
        text.lines()
            .find(|l| l.contains(name))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(line("broker connection").contains("JetStream on"), "{text}");
    assert!(
        line("broker destinations").contains(&ob.topic("")),
        "{text}"
    );
    assert_ne!(out.status.code(), Some(0), "{text}");
    create_stream(&js, &format!("S_{}", ob.name), &[ob.topic("")], -1).await;
    let out = check(file.path().to_owned()).await.expect("check ran");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.lines()
            .find(|l| l.contains("broker destinations"))
            .is_some_and(|l| l.contains(&format!("S_{}", ob.name))),
        "{text}"
    );
    ob.client
        .batch_execute(&format!("DROP TABLE {}", ob.name))
        .await
        .expect("drop the outbox");
}

/// The message outbox (`pg_logical_emit_message`, no table) to Redis: one
/// entry per committed message, key and payload as the table outbox
/// writes them; a rolled-back message writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_from_the_message_outbox() {
    use crate::messages::{content, emit, message_outbox, messages_config, prefix};
    let redis = Server::redis();
    let ob = message_outbox("redis_msgs", crate::common::connect().await);
    let sink = format!(
        "[sink]\ntype = \"redis\"\n\n[sink.redis]\naddress = \"127.0.0.1:{}\"\n",
        redis.port
    );
    let mut relay = Relay::start(&without_kafka(&messages_config(&ob, "", ""), &sink));
    ob.wait_active(&mut relay).await;
    let (p, agg) = (prefix(&ob), ob.agg(""));
    emit(&ob.client, true, &p, &content(1, &agg, "k-1", r#"{"n":1}"#)).await;
    ob.client.batch_execute("BEGIN").await.unwrap();
    emit(&ob.client, true, &p, &content(2, &agg, "k-2", "{}")).await;
    ob.client.batch_execute("ROLLBACK").await.unwrap();
    emit(&ob.client, true, &p, &content(3, &agg, "k-3", r#"[1,2]"#)).await;
    let entries = read_redis(redis.port, &ob.topic(""), 2, &mut relay).await;
    ob.wait_confirmed(ob.current_lsn().await, &relay).await;
    let entries_after = read_redis(redis.port, &ob.topic(""), 2, &mut relay).await;
    assert_eq!(
        entries, entries_after,
        "nothing more after the slot moved on"
    );
    assert_eq!(
        entries,
        vec![
            vec![(b"k-1".to_vec(), br#"{"n":1}"#.to_vec())],
            vec![(b"k-3".to_vec(), b"[1,2]".to_vec())],
        ]
    );
    ob.finish(relay).await;
}
