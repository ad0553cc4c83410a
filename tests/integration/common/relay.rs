//! The walrelay binary under test: a child process with its own config
//! file and log, and one test's outbox (table, publication, slot, topics)
//! with the queries tests assert on.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use walrelay::proto::pgoutput::{decode_message, LogicalMessage};
use walrelay::proto::Lsn;

use super::{connect, env, read_to_end_on, unique_name, Record};

/// Generous bound for anything that should happen in well under a second.
pub(crate) const WAIT: Duration = Duration::from_secs(60);

/// One test's outbox: table, publication, slot and the aggregate type that
/// routes to its own topic.
pub(crate) struct Outbox {
    pub client: tokio_postgres::Client,
    pub name: String,
}

impl Outbox {
    pub(crate) async fn new(test: &str) -> Outbox {
        Outbox::new_with(test, connect().await).await
    }

    /// An outbox in the database `client` is connected to.
    pub(crate) async fn new_with(test: &str, client: tokio_postgres::Client) -> Outbox {
        let name = unique_name(test);
        client
            .batch_execute(&format!(
                "CREATE TABLE {name} (
                    id uuid PRIMARY KEY,
                    aggregatetype varchar(255) NOT NULL,
                    aggregateid varchar(255),
                    type varchar(255) NOT NULL,
                    payload jsonb
                )"
            ))
            .await
            .expect("create outbox table");
        Outbox { client, name }
    }

    /// The aggregate type whose topic is `outbox.event.<agg>`; unique per test.
    pub(crate) fn agg(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.name)
    }

    pub(crate) fn topic(&self, suffix: &str) -> String {
        format!("outbox.event.{}", self.agg(suffix))
    }

    pub(crate) fn config(&self, bootstrap: &str) -> String {
        self.config_with(
            bootstrap,
            "# Tests run many relays at once: each gets its own ephemeral port.\n[metrics]\nlisten = \"127.0.0.1:0\"\n",
        )
    }

    /// The test configuration plus `extra` TOML (which must bring its own
    /// `[metrics]` table).
    pub(crate) fn config_with(&self, bootstrap: &str, extra: &str) -> String {
        self.config_for(bootstrap, env().pg_port, "postgres", extra)
    }

    /// The test configuration against any cluster and database.
    pub(crate) fn config_for(
        &self,
        bootstrap: &str,
        pg_port: u16,
        dbname: &str,
        extra: &str,
    ) -> String {
        format!(
            r#"
[postgres]
host = "127.0.0.1"
port = {pg_port}
user = "postgres"
dbname = "{dbname}"

[replication]
slot = "{name}"
publication = "{name}"
status_interval_ms = 200
reconnect_min_ms = 100
reconnect_max_ms = 1000

[outbox]
table = "public.{name}"

[kafka]
bootstrap_servers = "{bootstrap}"

[kafka.producer]
"linger.ms" = "2"

{extra}
"#,
            name = self.name
        )
    }

    /// Debezium Server's `application.properties` for this outbox: the
    /// `sink` lines (`debezium.sink.*`, each ending in a newline), then the
    /// PostgreSQL source on the outbox's own slot and publication (no
    /// snapshot) and the EventRouter at its defaults.
    pub(crate) fn debezium_server_properties(&self, sink: &str) -> String {
        format!(
            "{sink}\
             debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n\
             debezium.source.database.hostname=127.0.0.1\n\
             debezium.source.database.port={pg}\n\
             debezium.source.database.user=postgres\n\
             debezium.source.database.dbname=postgres\n\
             debezium.source.topic.prefix=dbzs\n\
             debezium.source.plugin.name=pgoutput\n\
             debezium.source.slot.name={name}\n\
             debezium.source.publication.name={name}\n\
             debezium.source.publication.autocreate.mode=filtered\n\
             debezium.source.table.include.list=public.{name}\n\
             debezium.source.snapshot.mode=no_data\n\
             debezium.transforms=outbox\n\
             debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter\n",
            pg = env().pg_port,
            name = self.name,
        )
    }

    /// Creates a probe slot on the outbox's publication (decoded by
    /// [`commit_ends`], so a test knows exact commit LSNs) and returns its
    /// name; drop it with [`Outbox::drop_probe`].
    pub(crate) async fn create_probe(&self) -> String {
        let probe = format!("{}_probe", self.name);
        self.client
            .execute(
                "SELECT pg_create_logical_replication_slot($1, 'pgoutput')",
                &[&probe],
            )
            .await
            .expect("probe slot");
        probe
    }

    /// Drops a slot made by [`Outbox::create_probe`].
    pub(crate) async fn drop_probe(&self, probe: &str) {
        self.client
            .execute("SELECT pg_drop_replication_slot($1)", &[&probe])
            .await
            .expect("drop probe slot");
    }

    /// Events `first..=last` in one transaction (one INSERT ... SELECT):
    /// payload `{"n": n}`, key `k<n % 10>`.
    pub(crate) async fn insert_series(&self, first: u64, last: u64) {
        self.client
            .execute(&self.series_sql(first, last), &[&self.agg("")])
            .await
            .expect("insert series");
    }

    /// [`Outbox::insert_series`] in an explicit transaction, returning the
    /// WAL insert position read just before its COMMIT: a slot passes it
    /// only once that transaction is confirmed (keepalives may move the
    /// slot up to there, not beyond).
    pub(crate) async fn insert_series_reading_pre_commit_lsn(&self, first: u64, last: u64) -> Lsn {
        let mut client = connect().await;
        let txn = client.transaction().await.expect("begin");
        txn.execute(&self.series_sql(first, last), &[&self.agg("")])
            .await
            .expect("insert series");
        let lsn: String = txn
            .query_one("SELECT pg_current_wal_insert_lsn()::text", &[])
            .await
            .expect("lsn")
            .get(0);
        txn.commit().await.expect("commit");
        lsn.parse::<Lsn>().expect("an lsn")
    }

    /// For 30 s while `broker` is away: the slot never passes `pre_commit`
    /// (the position just before the outage transaction's commit, from
    /// [`Outbox::insert_series_reading_pre_commit_lsn`]) and walrelay keeps
    /// running.
    pub(crate) async fn slot_held_before(&self, pre_commit: Lsn, relay: &mut Relay, broker: &str) {
        let stopped = Instant::now();
        while stopped.elapsed() < Duration::from_secs(30) {
            let confirmed = self.slot_confirmed().await.expect("slot");
            assert!(
                confirmed <= pre_commit,
                "the slot moved to {confirmed} past the outage's transaction (commit after {pre_commit}) while {broker} was down"
            );
            relay.assert_running();
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The INSERT of [`Outbox::insert_series`]; `$1` is the aggregate.
    fn series_sql(&self, first: u64, last: u64) -> String {
        format!(
            "INSERT INTO {} SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, \
             $1, 'k' || (g % 10), 'E', jsonb_build_object('n', g) \
             FROM generate_series({first}::int8, {last}::int8) g",
            self.name
        )
    }

    /// Inserts event `id` with key `key` and a NULL payload (the outbox's
    /// own aggregate), in its own transaction.
    pub(crate) async fn insert_null_payload(&self, id: u64, key: &str) {
        self.client
            .execute(
                &format!(
                    "INSERT INTO {} VALUES ($1::text::uuid, $2, $3, 'E', NULL)",
                    self.name
                ),
                &[&event_id(id), &self.agg(""), &key],
            )
            .await
            .expect("insert a null payload");
    }

    /// Inserts one event in its own transaction.
    pub(crate) async fn insert(&self, id: u64, agg_suffix: &str, key: &str, payload: &str) {
        self.client
            .execute(
                &format!(
                    "INSERT INTO {} VALUES ($1::text::uuid, $2, $3, 'E', $4::text::jsonb)",
                    self.name
                ),
                &[&event_id(id), &self.agg(agg_suffix), &key, &payload],
            )
            .await
            .expect("insert outbox row");
    }

    pub(crate) async fn slot_confirmed(&self) -> Option<Lsn> {
        let row = self
            .client
            .query_opt(
                "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
                &[&self.name],
            )
            .await
            .expect("read slot");
        row.and_then(|r| r.get::<_, Option<String>>(0))
            .map(|s| s.parse().expect("lsn"))
    }

    /// Whether the test's slot exists at all.
    pub(crate) async fn slot_exists(&self) -> bool {
        self.client
            .query_opt(
                "SELECT 1 FROM pg_replication_slots WHERE slot_name = $1",
                &[&self.name],
            )
            .await
            .expect("read slot")
            .is_some()
    }

    pub(crate) async fn slot_active(&self) -> bool {
        let row = self
            .client
            .query_opt(
                "SELECT active FROM pg_replication_slots WHERE slot_name = $1",
                &[&self.name],
            )
            .await
            .expect("read slot");
        row.map(|r| r.get::<_, bool>(0)).unwrap_or(false)
    }

    pub(crate) async fn current_lsn(&self) -> Lsn {
        let row = self
            .client
            .query_one("SELECT pg_current_wal_lsn()::text", &[])
            .await
            .expect("current lsn");
        row.get::<_, String>(0).parse().expect("lsn")
    }

    /// Writes `txns` transactions of `per_txn` events (ids 1.., keys over
    /// `keys` aggregates) from a task of its own, pausing 20 ms every
    /// `pause_every` transactions when given.
    pub(crate) fn spawn_writer(
        &self,
        txns: u64,
        per_txn: u64,
        keys: u64,
        pause_every: Option<u64>,
    ) -> tokio::task::JoinHandle<()> {
        let table = self.name.clone();
        let agg = self.agg("");
        tokio::spawn(async move {
            let client = connect().await;
            for txn in 0..txns {
                let first = (txn * per_txn + 1) as i64;
                client
                    .execute(
                        &format!(
                            "INSERT INTO {table} SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, \
                             $1, 'k' || (g % $4::int8), 'E', jsonb_build_object('n', g) FROM generate_series($2::int8, $3::int8) g"
                        ),
                        &[&agg, &first, &(first + per_txn as i64 - 1), &(keys as i64)],
                    )
                    .await
                    .expect("insert batch");
                if pause_every.is_some_and(|n| txn % n == 0) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        })
    }

    /// Whether the slot is held and past its consistent point. A slot being
    /// created is already active while it waits for the transactions
    /// running at that moment to end; rows committed before its consistent
    /// point are, correctly, never decoded, so tests must not write until
    /// `confirmed_flush_lsn` exists.
    pub(crate) async fn slot_streaming(&self) -> bool {
        let row = self
            .client
            .query_opt(
                "SELECT active AND confirmed_flush_lsn IS NOT NULL AND NOT temporary \
                 FROM pg_replication_slots WHERE slot_name = $1",
                &[&self.name],
            )
            .await
            .expect("read slot");
        row.map(|r| r.get::<_, bool>(0)).unwrap_or(false)
    }

    /// Waits until walrelay holds the slot past its consistent point.
    pub(crate) async fn wait_active(&self, relay: &mut Relay) {
        let deadline = Instant::now() + WAIT;
        while !self.slot_streaming().await {
            relay.assert_running();
            assert!(
                Instant::now() < deadline,
                "walrelay did not start streaming:\n{}",
                relay.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub(crate) async fn wait_inactive(&self) {
        let deadline = Instant::now() + WAIT;
        while self.slot_active().await {
            assert!(Instant::now() < deadline, "slot {} still active", self.name);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the slot's confirmed position reaches `lsn`.
    pub(crate) async fn wait_confirmed(&self, lsn: Lsn, relay: &Relay) {
        let deadline = Instant::now() + WAIT;
        loop {
            let confirmed = self.slot_confirmed().await.expect("slot exists");
            if confirmed >= lsn {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "confirmed_flush_lsn {confirmed} did not reach {lsn}:\n{}",
                relay.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Terminates the walsender holding the slot and drops the slot
    /// behind walrelay's back, retrying while walrelay reconnects in
    /// between (a slot walrelay was reading and finds gone is fatal).
    pub(crate) async fn drop_slot_behind_its_back(&self) {
        let deadline = Instant::now() + WAIT;
        loop {
            self.client
                .execute(
                    "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots \
                     WHERE slot_name = $1 AND active_pid IS NOT NULL",
                    &[&self.name],
                )
                .await
                .expect("terminate the walsender");
            tokio::time::sleep(Duration::from_millis(10)).await;
            if self
                .client
                .execute("SELECT pg_drop_replication_slot($1)", &[&self.name])
                .await
                .is_ok()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "could not drop slot {}",
                self.name
            );
        }
    }

    /// Stops the relay and removes the slot (an inactive slot would pin WAL
    /// in the shared cluster), the publication and the table.
    pub(crate) async fn finish(self, relay: Relay) {
        drop(relay);
        self.remove().await;
    }

    /// As [`Outbox::finish`] once every walrelay of the test is gone: the
    /// slot must exist.
    pub(crate) async fn remove(self) {
        self.wait_inactive().await;
        self.drop_objects(true).await;
    }

    /// Cleanup after walrelay has exited on its own: removes the slot if
    /// one was created, the publication and the table.
    pub(crate) async fn finish_exited(self, relay: Relay) {
        drop(relay);
        self.wait_inactive().await;
        self.drop_objects(false).await;
    }

    /// Cleanup after connectors named after this outbox ran on it (their
    /// slots and publications begin with its name, and outlive a deleted
    /// connector, as Debezium's do): waits until those slots are released,
    /// then drops them, the publications and the table.
    pub(crate) async fn remove_all(self) {
        let name = &self.name;
        let deadline = Instant::now() + WAIT;
        loop {
            let active: i64 = self
                .client
                .query_one(
                    "SELECT count(*) FROM pg_replication_slots \
                     WHERE left(slot_name, length($1)) = $1 AND active",
                    &[name],
                )
                .await
                .expect("count active slots")
                .get(0);
            if active == 0 {
                break;
            }
            assert!(Instant::now() < deadline, "slots of {name} still active");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.client
            .execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
                 WHERE left(slot_name, length($1)) = $1",
                &[name],
            )
            .await
            .expect("drop slots");
        let pubs = self
            .client
            .query(
                "SELECT pubname::text FROM pg_publication WHERE left(pubname, length($1)) = $1",
                &[name],
            )
            .await
            .expect("list publications");
        for p in pubs {
            let pubname: String = p.get(0);
            self.client
                .batch_execute(&format!("DROP PUBLICATION IF EXISTS \"{pubname}\""))
                .await
                .expect("drop publication");
        }
        self.client
            .batch_execute(&format!("DROP TABLE IF EXISTS {name}"))
            .await
            .expect("drop table");
    }

    async fn drop_objects(&self, slot_must_exist: bool) {
        let name = &self.name;
        if slot_must_exist || self.slot_exists().await {
            self.client
                .execute("SELECT pg_drop_replication_slot($1)", &[name])
                .await
                .expect("drop slot");
        }
        self.client
            .batch_execute(&format!(
                "DROP PUBLICATION IF EXISTS {name}; DROP TABLE IF EXISTS {name}"
            ))
            .await
            .expect("drop publication and table");
    }
}

/// Commit end LSNs of the transactions a probe slot (pgoutput, created by
/// the test before the writes) decodes for `publication`, in commit order.
/// Peeks, so the probe slot does not move.
pub(crate) async fn commit_ends(
    client: &tokio_postgres::Client,
    probe: &str,
    publication: &str,
) -> Vec<Lsn> {
    let rows = client
        .query(
            "SELECT data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2)",
            &[&probe, &publication],
        )
        .await
        .expect("peek probe slot");
    rows.iter()
        .filter_map(
            |r| match decode_message(Bytes::from(r.get::<_, Vec<u8>>(0)), 1, false) {
                Ok(LogicalMessage::Commit(c)) => Some(c.end_lsn),
                _ => None,
            },
        )
        .collect()
}

/// The event id of test event `n`, a uuid.
pub(crate) fn event_id(n: u64) -> String {
    format!("00000000-0000-4000-8000-{n:012x}")
}

/// The event number of an id made by [`event_id`] (or the series inserts).
pub(crate) fn event_number(id: &[u8]) -> Option<u64> {
    let id = std::str::from_utf8(id).ok()?;
    u64::from_str_radix(id.strip_prefix("00000000-0000-4000-8000-")?, 16).ok()
}

/// The last `n` lines of a relay log, for failure messages.
pub(crate) fn tail(log: &str, n: usize) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A Kafka Connect worker file and a Debezium PostgreSQL connector file
/// (EventRouter on `ob`'s table, its slot and publication, connector name
/// = slot name) for the cluster on `pg_port` and the broker at
/// `bootstrap`, in `dir`; `worker_extra` and `connector_extra` are more
/// lines of each. For `walrelay connect-standalone WORKER CONNECTOR`.
pub(crate) fn connect_files(
    dir: &Path,
    ob: &Outbox,
    pg_port: u16,
    bootstrap: &str,
    worker_extra: &str,
    connector_extra: &str,
) -> (PathBuf, PathBuf) {
    let worker = dir.join("worker.properties");
    std::fs::write(
        &worker,
        format!(
            "bootstrap.servers={bootstrap}\n\
             key.converter=org.apache.kafka.connect.storage.StringConverter\n\
             value.converter=org.apache.kafka.connect.storage.StringConverter\n\
             offset.storage.file.filename={dir}/connect.offsets\n\
             {worker_extra}",
            dir = dir.display(),
        ),
    )
    .expect("write the worker file");
    let connector = dir.join("connector.properties");
    std::fs::write(
        &connector,
        format!(
            "name={name}\n\
             connector.class=io.debezium.connector.postgresql.PostgresConnector\n\
             database.hostname=127.0.0.1\n\
             database.port={pg_port}\n\
             database.user=postgres\n\
             database.dbname=postgres\n\
             topic.prefix={name}\n\
             plugin.name=pgoutput\n\
             slot.name={name}\n\
             publication.name={name}\n\
             publication.autocreate.mode=filtered\n\
             table.include.list=public.{name}\n\
             transforms=outbox\n\
             transforms.outbox.type=io.debezium.transforms.outbox.EventRouter\n\
             {connector_extra}",
            name = ob.name,
        ),
    )
    .expect("write the connector file");
    (worker, connector)
}

/// The walrelay binary as a child process, logging to a file.
pub(crate) struct Relay {
    child: Child,
    log: PathBuf,
    config: Option<tempfile::NamedTempFile>,
}

impl Relay {
    pub(crate) fn start(config: &str) -> Relay {
        let mut file = tempfile::NamedTempFile::new().expect("config file");
        file.write_all(config.as_bytes()).expect("write config");
        Relay::start_with(file)
    }

    pub(crate) fn start_with(config: tempfile::NamedTempFile) -> Relay {
        let log = config.path().with_extension("log");
        let args = [
            OsStr::new("run"),
            OsStr::new("--config"),
            config.path().as_os_str(),
        ];
        let mut relay = Relay::start_args(&args, log);
        relay.config = Some(config);
        relay
    }

    /// walrelay with any command line (`connect-standalone W C`, ...),
    /// appending its output to `log`. It cannot be restarted with
    /// [`Relay::kill_and_restart`].
    pub(crate) fn start_args<S: AsRef<OsStr>>(args: &[S], log: PathBuf) -> Relay {
        Relay::start_args_env(args, log, &[])
    }

    /// [`Relay::start_args`] with more environment variables.
    pub(crate) fn start_args_env<S: AsRef<OsStr>>(
        args: &[S],
        log: PathBuf,
        vars: &[(&str, &str)],
    ) -> Relay {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_walrelay"))
            .args(args)
            .envs(vars.iter().copied())
            .env("WALRELAY_LOG", "info,walrelay=debug")
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log fd"))
            .stderr(out)
            .spawn()
            .expect("spawn walrelay");
        Relay {
            child,
            log,
            config: None,
        }
    }

    /// The child's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The child's peak resident set so far (`VmHWM`, kB).
    pub(crate) fn peak_rss_kb(&self) -> u64 {
        let path = format!("/proc/{}/status", self.child.id());
        let status = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no VmHWM in {path}"))
    }

    /// Kills with SIGKILL and starts the same configuration again.
    pub(crate) fn kill_and_restart(self) -> Relay {
        let mut this = self;
        this.kill();
        let config = this.config.take().expect("a running relay has its config");
        Relay::start_with(config)
    }

    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub(crate) fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{sig} failed");
    }

    pub(crate) fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait walrelay") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits (bounded by `timeout`) for walrelay to exit by itself and
    /// returns its exit code; panics with its log if it still runs or was
    /// ended by a signal. Blocks the thread: call it from a multi-thread
    /// runtime (it uses `block_in_place`).
    pub(crate) fn exit_code(&mut self, timeout: Duration) -> i32 {
        let status = tokio::task::block_in_place(|| self.wait_exit(timeout))
            .unwrap_or_else(|| panic!("walrelay still runs after {timeout:?}:\n{}", self.log()));
        status
            .code()
            .unwrap_or_else(|| panic!("walrelay ended by {status}:\n{}", self.log()))
    }

    pub(crate) fn assert_running(&mut self) {
        if let Some(status) = self.child.try_wait().expect("wait walrelay") {
            panic!("walrelay exited with {status}:\n{}", self.log());
        }
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// Distinct event ids (the `id` header) in `records`.
pub(crate) fn ids(records: &[Record]) -> HashSet<String> {
    records
        .iter()
        .map(|r| String::from_utf8(r.header("id").expect("id header").to_vec()).expect("utf-8 id"))
        .collect()
}

/// Reads `topic` until it holds every id in `want` (duplicates allowed).
pub(crate) async fn read_until_ids(
    topic: &str,
    want: &HashSet<String>,
    relay: &mut Relay,
) -> Vec<Record> {
    read_until_ids_on(&super::kafka_bootstrap(), topic, want, relay).await
}

/// [`read_until_ids`] through the broker at `bootstrap`.
pub(crate) async fn read_until_ids_on(
    bootstrap: &str,
    topic: &str,
    want: &HashSet<String>,
    relay: &mut Relay,
) -> Vec<Record> {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let records = read_to_end_on(bootstrap, topic, WAIT).await;
        let got = ids(&records);
        if want.is_subset(&got) {
            return records;
        }
        relay.assert_running();
        assert!(
            Instant::now() < deadline,
            "topic {topic}: {} of {} ids after 180 s:\n{}",
            want.intersection(&got).count(),
            want.len(),
            relay.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// What [`count_events`] read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct EventCount {
    /// Distinct event numbers of the range read.
    pub distinct: u64,
    /// Records read.
    pub records: u64,
    /// Records whose id is not an event number of the range.
    pub outside: u64,
    /// Records repeating an event number already read.
    pub repeats: u64,
    /// First occurrences of an event number below the last first
    /// occurrence of the same key (event numbers written in key order).
    pub order_breaks: u64,
}

/// Reads `topic` on `bootstrap` from the beginning (read_committed) until
/// every event number of `range` arrived and every partition is at its
/// end, or `bound` passed; keeps only a bitmap and the last number per key,
/// so a million records fit. Blocking; checks every 5 s that `relay` still
/// runs.
pub(crate) fn count_events(
    bootstrap: &str,
    topic: &str,
    range: std::ops::RangeInclusive<u64>,
    bound: Duration,
    relay: &mut Relay,
) -> EventCount {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::error::KafkaError;
    use rdkafka::message::{Headers, Message};
    use rdkafka::{Offset, TopicPartitionList};

    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique_name("count_reader"))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("isolation.level", "read_committed")
        .set("fetch.max.bytes", "52428800")
        .create()
        .expect("consumer config is valid");
    let md = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .expect("topic metadata");
    let mut tpl = TopicPartitionList::new();
    let mut partitions = 0;
    for t in md.topics() {
        for p in t.partitions() {
            tpl.add_partition_offset(topic, p.id(), Offset::Beginning)
                .expect("offset Beginning is valid");
            partitions += 1;
        }
    }
    consumer.assign(&tpl).expect("assign partitions");
    let want = range.end() - range.start() + 1;
    let mut seen = vec![false; want as usize];
    let mut last_of_key: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut at_end: HashSet<i32> = HashSet::new();
    let mut count = EventCount::default();
    let deadline = Instant::now() + bound;
    let mut last_check = Instant::now();
    while !(count.distinct == want && at_end.len() == partitions) && Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            None => {}
            Some(Ok(m)) => {
                at_end.remove(&m.partition());
                count.records += 1;
                let id = m
                    .headers()
                    .and_then(|hs| hs.iter().find(|h| h.key == "id").and_then(|h| h.value));
                match id.and_then(event_number) {
                    Some(n) if range.contains(&n) => {
                        let slot = &mut seen[(n - range.start()) as usize];
                        if *slot {
                            count.repeats += 1;
                            continue;
                        }
                        *slot = true;
                        count.distinct += 1;
                        let key = m.key().unwrap_or_default().to_vec();
                        let last = last_of_key.entry(key).or_insert(n);
                        if n < *last {
                            count.order_breaks += 1;
                        }
                        *last = n.max(*last);
                    }
                    _ => count.outside += 1,
                }
            }
            Some(Err(KafkaError::PartitionEOF(p))) => {
                at_end.insert(p);
            }
            Some(Err(e)) if super::transient(&e) => {}
            Some(Err(e)) => panic!("consume {topic}: {e}"),
        }
        if last_check.elapsed() > Duration::from_secs(5) {
            relay.assert_running();
            last_check = Instant::now();
        }
    }
    count
}

/// Java's `Utils.murmur2`, as Kafka's default partitioner uses it.
pub(crate) fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    let mut h = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

pub(crate) fn java_partition(key: &[u8], partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % partitions
}
