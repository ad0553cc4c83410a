//! Shared harness of the integration tests: where the test PostgreSQL, Kafka
//! broker and other message brokers (NATS, Redis, RabbitMQ) are, unique
//! object names, Kafka topic and consumer helpers, and private servers (own
//! cluster or broker in a temporary directory) for fault tests.
//!
//! It must never let a test skip: without the environment every helper
//! panics with the command that provides it (`scripts/test.sh`). Servers are
//! started only through `scripts/pg.sh`, `scripts/kafka.sh` and
//! `scripts/brokers.sh`, so tests, demo and CI share one way of running them.

pub(crate) mod database;
pub(crate) mod load;
pub(crate) mod metrics;
pub(crate) mod progress;
pub(crate) mod proxy;
pub(crate) mod relay;
pub(crate) mod scene;
pub(crate) mod tls;

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};

const ENV_HINT: &str = "run scripts/test.sh (or scripts/env.sh up, then source .walrelay-env/env)";

/// The shared test environment written by `scripts/env.sh up`. Every test
/// of the binary uses these servers at the same time: a test never stops,
/// restarts or reconfigures them (it starts a [`PrivatePg`] or
/// [`PrivateKafka`] for that). The one exception is a broker quota on a
/// client id of the test's own (the throttled pipeline of
/// `pipelines::a_throttled_pipeline_holds_back_only_itself`), which no
/// other client uses and which the test removes again.
#[derive(Debug, Clone)]
pub(crate) struct TestEnv {
    /// Port of the shared PostgreSQL cluster on 127.0.0.1.
    pub pg_port: u16,
    /// Directory of the shared cluster (for `scripts/pg.sh`).
    #[expect(dead_code, reason = "in the env file's contract; no test reads it")]
    pub pg_dir: PathBuf,
    /// Major version of the shared cluster (`WALRELAY_TEST_PG_MAJOR`); the
    /// private clusters of [`PrivatePg::start`] are of the same major.
    pub pg_major: u32,
    /// Bootstrap address of the shared Kafka broker (`127.0.0.1:PORT`).
    pub kafka: String,
    /// Directory of the shared broker (for `scripts/kafka.sh`).
    pub kafka_dir: PathBuf,
    /// Absolute path of the repository's `scripts/`.
    #[expect(dead_code, reason = "in the env file's contract; no test reads it")]
    pub scripts: PathBuf,
}

/// The shared environment: `WALRELAY_TEST_*` variables, falling back to
/// `.walrelay-env/env` at the repository root. Panics when neither has it.
pub(crate) fn env() -> &'static TestEnv {
    static ENV: OnceLock<TestEnv> = OnceLock::new();
    ENV.get_or_init(load_env)
}

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn load_env() -> TestEnv {
    let mut vars = HashMap::new();
    let file = repo_root().join(".walrelay-env/env");
    if let Ok(text) = std::fs::read_to_string(&file) {
        for line in text.lines() {
            let line = line.trim();
            if line.starts_with('#') {
                continue;
            }
            let line = line.strip_prefix("export ").unwrap_or(line);
            for assignment in line.split_whitespace() {
                if let Some((k, v)) = assignment.split_once('=') {
                    vars.insert(k.to_string(), v.to_string());
                }
            }
        }
    }
    for key in [
        "WALRELAY_TEST_PG_PORT",
        "WALRELAY_TEST_PG_DIR",
        "WALRELAY_TEST_PG_MAJOR",
        "WALRELAY_TEST_KAFKA",
        "WALRELAY_TEST_KAFKA_DIR",
        "WALRELAY_SCRIPTS",
    ] {
        if let Ok(v) = std::env::var(key) {
            vars.insert(key.to_string(), v);
        }
    }
    let get = |key: &str| -> String {
        vars.get(key).cloned().unwrap_or_else(|| {
            panic!(
                "{key} is not set and {} does not provide it: {ENV_HINT}",
                file.display()
            )
        })
    };
    let pg_port = get("WALRELAY_TEST_PG_PORT");
    let pg_major = get("WALRELAY_TEST_PG_MAJOR");
    TestEnv {
        pg_major: pg_major.parse().unwrap_or_else(|_| {
            panic!("WALRELAY_TEST_PG_MAJOR={pg_major:?} is not a major version")
        }),
        pg_port: pg_port
            .parse()
            .unwrap_or_else(|_| panic!("WALRELAY_TEST_PG_PORT={pg_port:?} is not a port")),
        pg_dir: get("WALRELAY_TEST_PG_DIR").into(),
        kafka: get("WALRELAY_TEST_KAFKA"),
        kafka_dir: get("WALRELAY_TEST_KAFKA_DIR").into(),
        scripts: get("WALRELAY_SCRIPTS").into(),
    }
}

/// libpq key/value connection string of the shared cluster, as superuser.
pub(crate) fn pg_url() -> String {
    pg_url_for_port(env().pg_port)
}

fn pg_url_for_port(port: u16) -> String {
    format!("host=127.0.0.1 port={port} user=postgres dbname=postgres")
}

/// One value of the environment written by `scripts/env.sh up`, read when
/// asked (servers not every test needs): the variable `key`, falling back to
/// `.walrelay-env/env`. Panics when neither has it.
fn env_value(key: &str) -> String {
    let file = repo_root().join(".walrelay-env/env");
    let value = std::env::var(key).ok().or_else(|| {
        let text = std::fs::read_to_string(&file).ok()?;
        text.lines().find_map(|line| {
            let line = line.trim();
            let line = line.strip_prefix("export ").unwrap_or(line);
            line.strip_prefix(key)?.strip_prefix('=').map(str::to_owned)
        })
    });
    value.unwrap_or_else(|| {
        panic!(
            "{key} is not set and {} does not provide it: {ENV_HINT}",
            file.display()
        )
    })
}

/// [`env_value`] of `key`, a port.
fn env_port(key: &str) -> u16 {
    let value = env_value(key);
    value
        .parse()
        .unwrap_or_else(|_| panic!("{key}={value:?} is not a port"))
}

/// Port of the shared `wal_level = replica` cluster, the polling source's:
/// `WALRELAY_TEST_PG_REPLICA_PORT`, falling back to `.walrelay-env/env`.
/// Panics when neither has it.
pub(crate) fn pg_replica_port() -> u16 {
    env_port("WALRELAY_TEST_PG_REPLICA_PORT")
}

/// libpq key/value connection string of the shared `wal_level = replica`
/// cluster, as superuser.
pub(crate) fn pg_replica_url() -> String {
    pg_url_for_port(pg_replica_port())
}

/// Bootstrap address of the shared Kafka broker.
pub(crate) fn kafka_bootstrap() -> String {
    env().kafka.clone()
}

/// Connects to the shared cluster; the connection runs on a spawned task.
pub(crate) async fn connect() -> tokio_postgres::Client {
    connect_url(&pg_url()).await
}

/// Connects with a libpq connection string; the connection runs on a spawned task.
pub(crate) async fn connect_url(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to PostgreSQL at '{url}': {e} ({ENV_HINT})"));
    tokio::spawn(async move {
        // A test that drops the server on purpose ends here; nothing to report.
        let _ = connection.await;
    });
    client
}

/// A name no other test, process or earlier run uses: lowercase
/// `[a-z0-9_]` (valid for slots, publications, tables and topics), at most 63
/// bytes. `prefix` should name the test.
pub(crate) fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let clean: String = prefix
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .take(32)
        .collect();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // Time, so a recycled pid does not meet the leftovers of an earlier run.
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() % 0x1_0000_0000)
        .unwrap_or(0);
    format!("{clean}_{}_{n}_{millis:x}", std::process::id())
}

/// Creates `topic` with `partitions` partitions (replication factor 1) on the
/// broker at `bootstrap` and waits until every partition has a leader.
pub(crate) async fn create_topic_on(bootstrap: &str, topic: &str, partitions: i32) {
    create_topic_with(bootstrap, topic, partitions, &[]).await;
}

/// [`create_topic_on`] with topic configuration `settings`.
pub(crate) async fn create_topic_with(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    settings: &[(&str, &str)],
) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client config is valid");
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let mut new_topic = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    for (k, v) in settings {
        new_topic = new_topic.set(k, v);
    }
    let results = admin
        .create_topics(&[new_topic], &options)
        .await
        .unwrap_or_else(|e| panic!("create topic {topic} on {bootstrap}: {e}"));
    for result in results {
        if let Err((name, code)) = result {
            panic!("create topic {name} on {bootstrap}: {code}");
        }
    }
    let bootstrap = bootstrap.to_string();
    let topic = topic.to_string();
    tokio::task::spawn_blocking(move || {
        let consumer = metadata_client(&bootstrap);
        wait_for_partitions(&consumer, &topic, Duration::from_secs(30));
    })
    .await
    .expect("metadata wait does not panic");
}

/// [`create_topic_on`] the shared broker.
pub(crate) async fn create_topic(topic: &str, partitions: i32) {
    create_topic_on(&kafka_bootstrap(), topic, partitions).await;
}

/// One record as a consumer read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    /// Partition the record is in.
    pub partition: i32,
    /// Offset within the partition.
    pub offset: i64,
    /// Key bytes; `None` for a null key.
    pub key: Option<Vec<u8>>,
    /// Value bytes; `None` for a tombstone.
    pub value: Option<Vec<u8>>,
    /// Headers in record order; a `None` value is a null header.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl Record {
    /// The value of the first header named `name`, if any and not null.
    pub(crate) fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.as_deref())
    }
}

fn metadata_client(bootstrap: &str) -> BaseConsumer {
    // Only what transactional producers committed, as a real consumer sees it.
    client_with(bootstrap, "read_committed")
}

fn client_with(bootstrap: &str, isolation: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique_name("test_reader"))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("isolation.level", isolation)
        .create()
        .expect("consumer config is valid")
}

/// Waits until `topic` exists with a leader for each partition; returns the
/// partition ids.
fn wait_for_partitions(consumer: &BaseConsumer, topic: &str, timeout: Duration) -> Vec<i32> {
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    loop {
        match consumer.fetch_metadata(Some(topic), Duration::from_secs(5)) {
            Ok(md) => {
                if let Some(t) = md.topics().iter().find(|t| t.name() == topic) {
                    let parts = t.partitions();
                    if t.error().is_none()
                        && !parts.is_empty()
                        && parts.iter().all(|p| p.error().is_none() && p.leader() >= 0)
                    {
                        return parts
                            .iter()
                            .map(rdkafka::metadata::MetadataPartition::id)
                            .collect();
                    }
                    last = format!("topic error {:?}, {} partitions", t.error(), parts.len());
                }
            }
            Err(e) => last = e.to_string(),
        }
        if Instant::now() >= deadline {
            panic!("topic {topic} has no leader for every partition after {timeout:?}: {last}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Reads `topic` on `bootstrap` from the beginning of every partition until
/// `count` records arrived or `timeout` passed, and returns what it read
/// (possibly fewer: assert on the result). Blocking; see [`consume`].
pub(crate) fn consume_blocking(
    bootstrap: &str,
    topic: &str,
    count: usize,
    timeout: Duration,
) -> Vec<Record> {
    read(bootstrap, topic, Stop::Count(count), timeout)
}

/// Reads `topic` on `bootstrap` from the beginning until the end of every
/// partition as of now (read_committed), within `timeout`. Blocking.
pub(crate) fn read_to_end_blocking(bootstrap: &str, topic: &str, timeout: Duration) -> Vec<Record> {
    read(bootstrap, topic, Stop::End, timeout)
}

/// [`consume_blocking`] on the shared broker, off the async runtime.
pub(crate) async fn consume(topic: &str, count: usize, timeout: Duration) -> Vec<Record> {
    consume_on(&kafka_bootstrap(), topic, count, timeout).await
}

/// [`consume_blocking`] off the async runtime.
pub(crate) async fn consume_on(
    bootstrap: &str,
    topic: &str,
    count: usize,
    timeout: Duration,
) -> Vec<Record> {
    let (bootstrap, topic) = (bootstrap.to_string(), topic.to_string());
    tokio::task::spawn_blocking(move || consume_blocking(&bootstrap, &topic, count, timeout))
        .await
        .expect("consumer thread panicked")
}

/// [`read_to_end_blocking`] on the shared broker, off the async runtime.
pub(crate) async fn read_to_end(topic: &str, timeout: Duration) -> Vec<Record> {
    read_to_end_on(&kafka_bootstrap(), topic, timeout).await
}

/// [`read_to_end_blocking`] on the broker at `bootstrap`, off the async
/// runtime.
pub(crate) async fn read_to_end_on(bootstrap: &str, topic: &str, timeout: Duration) -> Vec<Record> {
    let (bootstrap, topic) = (bootstrap.to_string(), topic.to_string());
    tokio::task::spawn_blocking(move || read_to_end_blocking(&bootstrap, &topic, timeout))
        .await
        .expect("consumer thread panicked")
}

/// [`read_to_end_on`] as a `read_uncommitted` consumer: records of aborted
/// and still open Kafka transactions too (what exactly-once hides).
pub(crate) async fn read_uncommitted_to_end_on(
    bootstrap: &str,
    topic: &str,
    timeout: Duration,
) -> Vec<Record> {
    let (bootstrap, topic) = (bootstrap.to_string(), topic.to_string());
    tokio::task::spawn_blocking(move || {
        read_with(
            client_with(&bootstrap, "read_uncommitted"),
            &topic,
            Stop::End,
            timeout,
        )
    })
    .await
    .expect("consumer thread panicked")
}

enum Stop {
    Count(usize),
    End,
}

fn read(bootstrap: &str, topic: &str, stop: Stop, timeout: Duration) -> Vec<Record> {
    read_with(metadata_client(bootstrap), topic, stop, timeout)
}

fn read_with(consumer: BaseConsumer, topic: &str, stop: Stop, timeout: Duration) -> Vec<Record> {
    let deadline = Instant::now() + timeout;
    let partitions = wait_for_partitions(&consumer, topic, timeout);
    let mut tpl = TopicPartitionList::new();
    for p in &partitions {
        tpl.add_partition_offset(topic, *p, Offset::Beginning)
            .expect("offset Beginning is valid");
    }
    consumer.assign(&tpl).expect("assign partitions");
    // The end as of now. A partition is read to it once the consumer
    // reported its end (PartitionEOF: nothing more visible at that fetch)
    // or handed over a record at or past the end offset the broker gave
    // at the start: a producer committing transactions every few hundred
    // milliseconds keeps every fetch non-empty, so a read_committed
    // consumer may never see an EOF while it runs.
    let ends: HashMap<i32, i64> = match stop {
        Stop::Count(_) => HashMap::new(),
        Stop::End => partitions
            .iter()
            .filter_map(|p| {
                consumer
                    .fetch_watermarks(topic, *p, Duration::from_secs(10))
                    .ok()
                    .map(|(_, high)| (*p, high))
            })
            .collect(),
    };
    let mut at_end: HashSet<i32> = HashSet::new();
    let mut records = Vec::new();
    loop {
        let done = match stop {
            Stop::Count(n) => records.len() >= n,
            Stop::End => at_end.len() == partitions.len(),
        };
        if done {
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            if let Stop::End = stop {
                panic!(
                    "topic {topic}: only partitions {at_end:?} of {partitions:?} reached their end within {timeout:?}"
                );
            }
            break;
        }
        match consumer.poll(left.min(Duration::from_millis(200))) {
            None => {}
            Some(Ok(m)) => {
                if ends
                    .get(&m.partition())
                    .is_some_and(|end| m.offset() >= *end)
                {
                    at_end.insert(m.partition());
                }
                records.push(Record {
                    partition: m.partition(),
                    offset: m.offset(),
                    key: m.key().map(<[u8]>::to_vec),
                    value: m.payload().map(<[u8]>::to_vec),
                    headers: m
                        .headers()
                        .map(|hs| {
                            hs.iter()
                                .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                                .collect()
                        })
                        .unwrap_or_default(),
                });
            }
            Some(Err(KafkaError::PartitionEOF(p))) => {
                at_end.insert(p);
            }
            Some(Err(e)) if transient(&e) => {}
            Some(Err(e)) => panic!("consume {topic}: {e}"),
        }
    }
    records
}

/// A consumer error librdkafka recovers from by itself (it reconnects):
/// the shared broker, slow under a loaded machine, dropped a connection.
/// A reader goes on polling until its own deadline.
pub(crate) fn transient(e: &KafkaError) -> bool {
    use rdkafka::types::RDKafkaErrorCode::{AllBrokersDown, BrokerTransportFailure};
    matches!(
        e.rdkafka_error_code(),
        Some(AllBrokersDown | BrokerTransportFailure)
    )
}

/// Renders records compactly for assertion messages.
pub(crate) fn describe(records: &[Record]) -> String {
    let mut s = String::new();
    for r in records {
        let _ = writeln!(
            s,
            "p{} @{} key={:?} value={:?} headers={:?}",
            r.partition,
            r.offset,
            r.key.as_deref().map(String::from_utf8_lossy),
            r.value.as_deref().map(String::from_utf8_lossy),
            r.headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_deref().map(String::from_utf8_lossy)))
                .collect::<Vec<_>>()
        );
    }
    s
}

/// Major version of the shared cluster.
pub(crate) fn pg_major() -> u32 {
    env().pg_major
}

/// Runs `scripts/<script> ARGS` and returns its stdout; panics with its
/// stderr on failure. Servers it starts get a watchdog that stops them when
/// this test process exits, even if it is killed.
pub(crate) fn run_script<S: AsRef<OsStr>>(script: &str, args: &[S]) -> String {
    run_script_with(script, args, &[])
}

/// [`run_script`] with extra environment variables.
fn run_script_with<S: AsRef<OsStr>>(script: &str, args: &[S], vars: &[(&str, String)]) -> String {
    let path = repo_root().join("scripts").join(script);
    let out = Command::new(&path)
        .args(args)
        .envs(vars.iter().map(|(k, v)| (*k, v.as_str())))
        .env("WALRELAY_OWNER_PID", std::process::id().to_string())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", path.display()));
    if !out.status.success() {
        let shown: Vec<_> = args.iter().map(|a| a.as_ref().to_string_lossy()).collect();
        panic!(
            "{script} {} failed ({}):\n{}",
            shown.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A temporary directory the postgres user can enter (mktemp makes 0700).
fn private_dir(prefix: &str) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("create a temporary directory");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .expect("make the temporary directory searchable");
    dir
}

fn read_port(dir: &Path) -> u16 {
    let path = dir.join("port");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("{} holds no port: {text:?}", path.display()))
}

/// A PostgreSQL cluster of one test, in a temporary directory; removed on
/// drop. Same settings as the shared one (`scripts/pg.sh`). The methods block
/// while the script runs: call them from a test's setup or `spawn_blocking`.
pub(crate) struct PrivatePg {
    root: tempfile::TempDir,
    dir: PathBuf,
    port: u16,
    major: u32,
}

impl PrivatePg {
    /// Creates and starts a cluster of the shared cluster's major version on
    /// a free port.
    pub(crate) fn start() -> Self {
        Self::start_major(pg_major())
    }

    /// Creates and starts a cluster of PostgreSQL `major` (13 to 18) on a
    /// free port; the first use of a major fetches its binaries.
    pub(crate) fn start_major(major: u32) -> Self {
        let root = private_dir("walrelay-pg-");
        let dir = root.path().join("pg");
        run_script_with(
            "pg.sh",
            &[OsStr::new("start"), dir.as_os_str()],
            &[("WALRELAY_PG_MAJOR", major.to_string())],
        );
        let port = read_port(&dir);
        PrivatePg {
            root,
            dir,
            port,
            major,
        }
    }

    /// A physical streaming standby of this (running, primary) cluster, in
    /// its own directory: base backup, a physical slot `standby_<port>` on
    /// this cluster, `hot_standby_feedback`; from 17 on,
    /// `sync_replication_slots` on the standby and the slot in this
    /// cluster's `synchronized_standby_slots`. Returns once it streams.
    pub(crate) fn start_standby(&self) -> PrivatePg {
        self.standby(&[])
    }

    /// [`PrivatePg::start_standby`] without adding the standby's slot to
    /// this cluster's `synchronized_standby_slots`.
    #[expect(dead_code, reason = "harness API no test uses at the moment")]
    pub(crate) fn start_standby_without_standby_slots(&self) -> PrivatePg {
        self.standby(&["--no-standby-slots"])
    }

    fn standby(&self, extra: &[&str]) -> PrivatePg {
        let root = private_dir("walrelay-standby-");
        let dir = root.path().join("pg");
        let mut args = vec![OsStr::new("standby"), self.dir.as_os_str(), dir.as_os_str()];
        args.extend(extra.iter().map(OsStr::new));
        run_script("pg.sh", &args);
        let port = read_port(&dir);
        PrivatePg {
            root,
            dir,
            port,
            major: self.major,
        }
    }

    /// Promotes this standby; returns once it accepts writes.
    pub(crate) fn promote(&self) {
        run_script("pg.sh", &[OsStr::new("promote"), self.dir.as_os_str()]);
    }

    /// Its major version.
    pub(crate) fn major(&self) -> u32 {
        self.major
    }

    /// Its port on 127.0.0.1 (kept across stop/start).
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// libpq connection string, as superuser.
    pub(crate) fn url(&self) -> String {
        pg_url_for_port(self.port)
    }

    /// Its directory (for `scripts/pg.sh` subcommands).
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Connects as superuser.
    pub(crate) async fn connect(&self) -> tokio_postgres::Client {
        connect_url(&self.url()).await
    }

    /// Fast shutdown; returns once the server is down.
    pub(crate) fn stop(&self) {
        run_script("pg.sh", &[OsStr::new("stop"), self.dir.as_os_str()]);
    }

    /// Immediate shutdown (as a crash: no shutdown checkpoint, nothing more
    /// sent to standbys); returns once the server is down.
    pub(crate) fn stop_immediate(&self) {
        let args = [self.dir.as_os_str(), OsStr::new("immediate")];
        run_script("pg.sh", &[OsStr::new("stop"), args[0], args[1]]);
    }

    /// Starts it again (same data, same port).
    pub(crate) fn start_again(&self) {
        run_script("pg.sh", &[OsStr::new("start"), self.dir.as_os_str()]);
    }

    /// Stop, then start.
    #[expect(dead_code, reason = "harness API no test uses at the moment")]
    pub(crate) fn restart(&self) {
        run_script("pg.sh", &[OsStr::new("restart"), self.dir.as_os_str()]);
    }

    /// Appends `key=value` settings; reloads, or restarts when one needs it.
    pub(crate) fn conf(&self, settings: &[&str]) {
        let mut args = vec![OsStr::new("conf"), self.dir.as_os_str()];
        args.extend(settings.iter().map(OsStr::new));
        run_script("pg.sh", &args);
    }
}

impl Drop for PrivatePg {
    fn drop(&mut self) {
        // No panic in drop: a failing test is already unwinding.
        let status = Command::new(repo_root().join("scripts/pg.sh"))
            .arg("rm")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .status();
        if !matches!(status, Ok(s) if s.success()) {
            eprintln!(
                "warning: could not remove the private cluster in {}",
                self.root.path().display()
            );
        }
    }
}

/// A Kafka broker of one test, in a temporary directory; removed on drop.
/// Starting takes seconds (a JVM); the methods block like [`PrivatePg`]'s.
pub(crate) struct PrivateKafka {
    root: tempfile::TempDir,
    dir: PathBuf,
    port: u16,
}

impl PrivateKafka {
    /// Formats and starts a broker on a free port; returns once it answers.
    pub(crate) fn start() -> Self {
        let root = private_dir("walrelay-kafka-");
        let dir = root.path().join("kafka");
        run_script("kafka.sh", &[OsStr::new("start"), dir.as_os_str()]);
        let port = read_port(&dir);
        PrivateKafka { root, dir, port }
    }

    /// Its bootstrap address, `127.0.0.1:PORT` (kept across stop/start).
    pub(crate) fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Its directory (for `scripts/kafka.sh` subcommands).
    #[expect(dead_code, reason = "harness API no test uses at the moment")]
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// SIGTERM, then SIGKILL after 30 s; returns once the JVM is gone.
    pub(crate) fn stop(&self) {
        run_script("kafka.sh", &[OsStr::new("stop"), self.dir.as_os_str()]);
    }

    /// SIGKILL: the broker dies without flushing or deregistering.
    pub(crate) fn kill(&self) {
        run_script("kafka.sh", &[OsStr::new("kill"), self.dir.as_os_str()]);
    }

    /// Starts it again (same data, same ports); returns once it answers.
    pub(crate) fn start_again(&self) {
        run_script("kafka.sh", &[OsStr::new("start"), self.dir.as_os_str()]);
    }
}

impl Drop for PrivateKafka {
    fn drop(&mut self) {
        let status = Command::new(repo_root().join("scripts/kafka.sh"))
            .arg("rm")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .status();
        if !matches!(status, Ok(s) if s.success()) {
            eprintln!(
                "warning: could not remove the private broker in {}",
                self.root.path().display()
            );
        }
    }
}
