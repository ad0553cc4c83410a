//! Version-specific behaviour per PostgreSQL major, each on a private
//! cluster of that major (`PrivatePg::start_major`), one cluster per test
//! serving several cases:
//!
//! - the pgoutput protocol walrelay chooses (2 with `streaming 'on'` on 14
//!   and 15, 4 with `streaming 'parallel'` from 16), read from its state
//!   (`/api/state`, the figure of `walrelay_pgoutput_proto_version`) and
//!   `walrelay status`;
//! - a large streamed transaction that aborts and a rolled-back
//!   subtransaction of a committed one: nothing of either in Kafka, every
//!   committed event there exactly once, the abort and subtransaction-abort
//!   counters, the abort LSN walrelay received (0 before 16), and
//!   a direct decode through `walrelay::proto` of a live stream on a probe
//!   slot with the same options, which must carry the abort LSN (16+) at
//!   the position the XLogData header names;
//! - a PostgreSQL fast restart under load (15, 17, 18): no loss, duplicates
//!   only after what the slot had confirmed before the restart, and from 17
//!   the slot comes back at least where it was confirmed (17 saves it at
//!   the shutdown checkpoint);
//! - PostgreSQL 13: `walrelay check` fails the server version row, and
//!   `walrelay run` exits non-zero without creating anything, both naming
//!   the version and 14 as the oldest supported; a role without
//!   REPLICATION likewise, on 14.
//!
//! Every test owns its tables, slots and topics; logical_decoding_work_mem
//! is 64kB on these clusters so modest transactions stream.

use crate::common;
use crate::common::metrics::{free_port, wait_pipeline};

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use common::load::{check, probe_commit_ends, Fault, Load, LoadSpec};
use common::relay::{event_id, ids, read_until_ids_on, Outbox, Relay, WAIT};
use common::{create_topic_on, kafka_bootstrap, PrivatePg, Record};
use walrelay::check::{run_check, CheckStatus, ROLE, SERVER_VERSION};
use walrelay::config::Config;
use walrelay::postgres::replication::{ConnectParams, ReplicationConnection, StreamReader};
use walrelay::proto::frame::{decode_replication_message, ReplicationMessage};
use walrelay::proto::pgoutput::{self, DecoderState, LogicalMessage};
use walrelay::proto::Lsn;

/// Partitions of the restart scenario's topic.
const PARTITIONS: i32 = 3;

/// A private cluster of `major` that streams transactions above 64 kB.
async fn cluster(major: u32) -> PrivatePg {
    tokio::task::spawn_blocking(move || {
        let pg = PrivatePg::start_major(major);
        pg.conf(&["logical_decoding_work_mem=64kB"]);
        pg
    })
    .await
    .expect("start private cluster")
}

/// `INSERT ... SELECT` of events `first..=last` (~300-byte payloads).
fn insert_range(table: &str, agg: &str, first: u64, last: u64) -> String {
    format!(
        "INSERT INTO {table} \
         SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, '{agg}', \
                'k' || (g % 97), 'E', \
                jsonb_build_object('n', g, 'pad', repeat(md5(g::text), 9)) \
         FROM generate_series({first}::int8, {last}::int8) g;"
    )
}

async fn lsn(client: &tokio_postgres::Client, sql: &str) -> Lsn {
    client
        .query_one(sql, &[])
        .await
        .expect("read an lsn")
        .get::<_, String>(0)
        .parse()
        .expect("lsn")
}

async fn insert_lsn(client: &tokio_postgres::Client) -> Lsn {
    lsn(client, "SELECT pg_current_wal_insert_lsn()::text").await
}

/// WAL positions around the two aborts, sampled by the writing session.
struct AbortWindows {
    /// Inside the aborting transaction after its rows, and after ROLLBACK.
    whole: (Lsn, Lsn),
    /// Before and after ROLLBACK TO SAVEPOINT.
    sub: (Lsn, Lsn),
}

/// Holds a transaction open until both readers have been sent it as a
/// stream: the probe reported a Stream Start of a new transaction and
/// walrelay holds a spill file. From PostgreSQL 18 the walsender skips a
/// transaction that has already aborted when it would stream it, so an
/// abort must come after the streaming to be streamed at all.
async fn wait_streamed(
    port: u16,
    relay: &mut Relay,
    started: &mut tokio::sync::mpsc::UnboundedReceiver<u32>,
) {
    tokio::time::timeout(WAIT, started.recv())
        .await
        .expect("the probe saw no stream start within a minute")
        .expect("the probe decoder ended");
    wait_pipeline(port, "an open spill file", relay, |m| {
        m.protocol.as_ref().is_some_and(|p| p.spill_bytes > 0)
    })
    .await;
}

/// Event 1; events 100..=2099 in a transaction that aborts; events
/// 3000..=3799 committed with 4000..=6999 in a subtransaction rolled back
/// before the commit, and 7000..=7009 after it; event 2. Each abort comes
/// once both readers were sent the transaction as a stream. Returns the ids
/// that must be in Kafka and the WAL windows of the two aborts.
async fn write_aborts(
    ob: &Outbox,
    port: u16,
    relay: &mut Relay,
    started: &mut tokio::sync::mpsc::UnboundedReceiver<u32>,
) -> (HashSet<String>, AbortWindows) {
    let (c, t, agg) = (&ob.client, &ob.name, ob.agg(""));
    ob.insert(1, "", "k", "{}").await;
    c.batch_execute(&format!("BEGIN; {}", insert_range(t, &agg, 100, 2099)))
        .await
        .expect("large transaction");
    let inside = insert_lsn(c).await;
    wait_streamed(port, relay, started).await;
    c.batch_execute("ROLLBACK").await.expect("rollback");
    let whole = (inside, insert_lsn(c).await);
    c.batch_execute(&format!(
        "BEGIN; {} SAVEPOINT s; {}",
        insert_range(t, &agg, 3000, 3799),
        insert_range(t, &agg, 4000, 6999)
    ))
    .await
    .expect("transaction with a subtransaction");
    let before_sub = insert_lsn(c).await;
    wait_streamed(port, relay, started).await;
    c.batch_execute("ROLLBACK TO SAVEPOINT s")
        .await
        .expect("rollback to savepoint");
    let sub = (before_sub, insert_lsn(c).await);
    c.batch_execute(&format!("{} COMMIT", insert_range(t, &agg, 7000, 7009)))
        .await
        .expect("commit");
    ob.insert(2, "", "k", "{}").await;
    let want = [1, 2]
        .into_iter()
        .chain(3000..=3799)
        .chain(7000..=7009)
        .map(event_id)
        .collect();
    (want, AbortWindows { whole, sub })
}

/// The next CopyData payload, reading the socket as needed (bounded).
async fn next_frame(reader: &mut StreamReader) -> Result<bytes::Bytes, String> {
    tokio::time::timeout(WAIT, async {
        loop {
            if let Some(frame) = reader.try_next().map_err(|e| e.to_string())? {
                return Ok(frame);
            }
            reader.read_more().await.map_err(|e| e.to_string())?;
        }
    })
    .await
    .map_err(|_| "the server sent nothing for a minute".to_string())?
}

/// The last lines of a private cluster's server log.
fn server_log(pg: &PrivatePg) -> String {
    let text = std::fs::read_to_string(pg.dir().join("log")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// One Stream Abort as decoded, with the XLogData start it came in.
#[derive(Debug)]
struct SeenAbort {
    xid: u32,
    subxid: u32,
    abort_lsn: Option<Lsn>,
    abort_time: Option<i64>,
    wal_start: Lsn,
}

/// Streams `slot` with the options walrelay would send at `proto_version`
/// and decodes it with `walrelay::proto` until it has seen a whole and a
/// subtransaction Stream Abort and the Stream Commit after them.
/// Each first Stream Start's xid goes to `started`.
async fn decode_aborts(
    params: ConnectParams,
    publication: String,
    slot: String,
    proto_version: u32,
    started: tokio::sync::mpsc::UnboundedSender<u32>,
) -> Result<Vec<SeenAbort>, String> {
    let conn = ReplicationConnection::connect(&params)
        .await
        .map_err(|e| format!("replication connection: {e}"))?;
    let mut options = vec![
        ("proto_version", proto_version.to_string()),
        ("publication_names", publication),
        ("messages", "true".to_string()),
    ];
    if let Some(mode) = walrelay::postgres::wal::streaming_option(proto_version) {
        options.push(("streaming", mode.to_string()));
    }
    let mut stream = conn
        .start_replication(&slot, Lsn::ZERO, &options)
        .await
        .map_err(|e| format!("start replication on the probe slot: {e}"))?;
    let mut decoder = DecoderState::new(proto_version);
    let mut aborts = Vec::new();
    loop {
        let frame = next_frame(&mut stream.reader).await?;
        let ReplicationMessage::XLogData(x) = decode_replication_message(frame).expect("frame")
        else {
            continue;
        };
        match pgoutput::decode(&mut decoder, x.data).map_err(|e| e.to_string())? {
            LogicalMessage::StreamStart(st) if st.first_segment => {
                let _ = started.send(st.xid);
            }
            LogicalMessage::StreamAbort(a) => aborts.push(SeenAbort {
                xid: a.xid,
                subxid: a.subxid,
                abort_lsn: a.abort_lsn,
                abort_time: a.abort_time,
                wal_start: x.wal_start,
            }),
            LogicalMessage::StreamCommit(_) if aborts.len() >= 2 => {
                let _ = stream.writer.close().await;
                return Ok(aborts);
            }
            _ => {}
        }
    }
}

/// The protocol case and the abort case on `pg`.
async fn protocol_and_aborts(pg: &PrivatePg) {
    let major = pg.major();
    let bootstrap = kafka_bootstrap();
    let ob = Outbox::new_with("versions_abort", pg.connect().await).await;
    create_topic_on(&bootstrap, &ob.topic(""), 1).await;
    let port = free_port();
    let text = ob.config_for(
        &bootstrap,
        pg.port(),
        "postgres",
        &format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n"),
    );
    let config = Config::from_toml(&text, Path::new("versions.toml")).expect("valid config");
    let mut relay = Relay::start(&text);
    ob.wait_active(&mut relay).await;

    let want_proto: u32 = if major >= 16 { 4 } else { 2 };
    wait_pipeline(port, "the protocol version", &mut relay, |m| {
        m.protocol
            .as_ref()
            .is_some_and(|p| p.pgoutput_version == i64::from(want_proto))
    })
    .await;

    // And as `walrelay status` shows it.
    let snap = walrelay::status::snapshot(&format!("127.0.0.1:{port}"))
        .await
        .expect("the state for walrelay status");
    let status = walrelay::status::render(&snap, None);
    let mode = if major >= 16 { "parallel" } else { "on" };
    assert!(
        status.contains(&format!("pgoutput {want_proto}, streaming '{mode}'")),
        "PostgreSQL {major}:\n{status}"
    );

    // The probe decodes the same transactions directly, live, from a slot
    // created before them.
    let probe = ob.create_probe().await;
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let decoding = tokio::spawn(decode_aborts(
        ConnectParams::from_config(&config.postgres),
        config.replication.publication.clone(),
        probe.clone(),
        want_proto,
        started_tx,
    ));
    let (want, windows) = write_aborts(&ob, port, &mut relay, &mut started).await;
    let end = insert_lsn(&ob.client).await;

    let records: Vec<Record> =
        read_until_ids_on(&bootstrap, &ob.topic(""), &want, &mut relay).await;
    let got = ids(&records);
    assert_eq!(
        got,
        want,
        "PostgreSQL {major}: exactly the committed events ({} extra)",
        got.difference(&want).count()
    );
    assert_eq!(
        records.len(),
        want.len(),
        "PostgreSQL {major}: no duplicates"
    );
    // Nothing holds the slot back: it passes both aborts and the commits.
    ob.wait_confirmed(end, &relay).await;

    let m = wait_pipeline(port, "both aborts counted", &mut relay, |m| {
        m.protocol.as_ref().is_some_and(|p| {
            p.stream_aborts >= 1 && p.subtransaction_aborts >= 1 && p.streamed_transactions >= 1
        })
    })
    .await;
    let sent = m.protocol.as_ref().map_or(0, |p| p.stream_abort_lsn.0);
    if major >= 16 {
        // The last abort was the subtransaction's, sent with its LSN.
        let (from, to) = windows.sub;
        assert!(
            sent > from.0 && sent <= to.0,
            "PostgreSQL {major}: walrelay received abort LSN {} outside the ROLLBACK TO window {from}..{to}",
            Lsn(sent)
        );
    } else {
        assert_eq!(sent, 0, "PostgreSQL {major} sends no abort LSN");
    }
    drop(relay);

    let aborts = tokio::time::timeout(WAIT, decoding)
        .await
        .map_err(|_| "no stream commit after both aborts within a minute".to_string())
        .and_then(|joined| joined.map_err(|e| format!("decoder task: {e}")))
        .and_then(|decoded| decoded)
        .unwrap_or_else(|e| {
            panic!(
                "PostgreSQL {major}: decoding the probe slot: {e}\n{}",
                server_log(pg)
            )
        });
    let deadline = Instant::now() + WAIT;
    while ob
        .client
        .query_one(
            "SELECT active FROM pg_replication_slots WHERE slot_name = $1",
            &[&probe],
        )
        .await
        .expect("read probe slot")
        .get::<_, bool>(0)
    {
        assert!(Instant::now() < deadline, "probe slot still active");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ob.drop_probe(&probe).await;
    let whole = aborts
        .iter()
        .find(|a| a.xid == a.subxid)
        .unwrap_or_else(|| panic!("PostgreSQL {major}: no whole-transaction abort in {aborts:?}"));
    let sub = aborts
        .iter()
        .find(|a| a.xid != a.subxid)
        .unwrap_or_else(|| panic!("PostgreSQL {major}: no subtransaction abort in {aborts:?}"));
    for (what, a, (from, to)) in [
        ("abort", whole, windows.whole),
        ("subtransaction abort", sub, windows.sub),
    ] {
        // logical.c writes a Stream Abort at the abort LSN: the XLogData
        // start is that position on every version, walrelay's fallback.
        assert!(
            a.wal_start > from && a.wal_start <= to,
            "PostgreSQL {major}: {what} at {} outside {from}..{to}: {a:?}",
            a.wal_start
        );
        if major >= 16 {
            assert_eq!(
                a.abort_lsn,
                Some(a.wal_start),
                "PostgreSQL {major}: {what} carries its abort LSN: {a:?}"
            );
            assert!(
                a.abort_time.is_some_and(|t| t > 0),
                "PostgreSQL {major}: {a:?}"
            );
        } else {
            assert_eq!(a.abort_lsn, None, "PostgreSQL {major}: {a:?}");
        }
    }
    ob.remove().await;
}

async fn slot_confirmed(url: &str, slot: &str) -> Lsn {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(Ok((client, conn))) = tokio::time::timeout(
            Duration::from_secs(5),
            tokio_postgres::connect(url, tokio_postgres::NoTls),
        )
        .await
        {
            tokio::spawn(async move {
                let _ = conn.await;
            });
            if let Ok(row) = client
                .query_one(
                    "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
                    &[&slot],
                )
                .await
            {
                return row.get::<_, String>(0).parse().expect("lsn");
            }
        }
        assert!(Instant::now() < deadline, "{slot}: server unreachable");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A fast restart of `pg` under load, with the checker of the fault suite.
/// Returns `pg` (it moves through the blocking tasks).
async fn restart_under_load(pg: PrivatePg) -> PrivatePg {
    let major = pg.major();
    let url = pg.url();
    let bootstrap = kafka_bootstrap();
    let ob = Outbox::new_with("versions_restart", pg.connect().await).await;
    create_topic_on(&bootstrap, &ob.topic(""), PARTITIONS).await;
    let mut relay = Relay::start(&ob.config_for(
        &bootstrap,
        pg.port(),
        "postgres",
        "[metrics]\nlisten = \"127.0.0.1:0\"\n",
    ));
    ob.wait_active(&mut relay).await;
    let probe = ob.create_probe().await;
    let events = 8_000;
    let mut spec = LoadSpec::new(url.clone(), &ob.name, &ob.agg(""), events);
    spec.pause = Duration::from_millis(2);
    let load = Load::start(spec).await;
    assert!(load.wait_for(2_000, WAIT).await, "the load did not start");
    let before = slot_confirmed(&url, &ob.name).await;
    let pg = tokio::task::spawn_blocking(move || {
        pg.stop();
        pg
    })
    .await
    .expect("stop postgres");
    tokio::time::sleep(Duration::from_secs(2)).await;
    relay.assert_running();
    // Read where the slot comes back before walrelay can move it.
    relay.signal("STOP");
    let pg = tokio::task::spawn_blocking(move || {
        pg.start_again();
        pg
    })
    .await
    .expect("start postgres again");
    let resumes = slot_confirmed(&url, &ob.name).await;
    relay.signal("CONT");
    if major >= 17 {
        assert!(
            resumes >= before,
            "PostgreSQL {major} saves the slot at the shutdown checkpoint, \
             yet it came back at {resumes}, behind {before} confirmed before"
        );
    }
    let wal_after = lsn(&pg.connect().await, "SELECT pg_current_wal_lsn()::text").await;
    let faults = [Fault {
        what: format!("fast restart of PostgreSQL {major} (slot {before} before, {resumes} after)"),
        confirmed_before: before,
        wal_after,
    }];

    // The restart closed the outbox's own connection.
    let mut ob = ob;
    ob.client = pg.connect().await;
    let log = load.finish().await;
    assert!(
        log.committed.len() as u64 >= events,
        "PostgreSQL {major}: the generator committed only {} of {events} events",
        log.committed.len()
    );
    let want: HashSet<String> = log.committed.iter().map(|e| e.id.clone()).collect();
    let records = read_until_ids_on(&bootstrap, &ob.topic(""), &want, &mut relay).await;
    let ends = probe_commit_ends(&ob.client, &probe, &ob.name).await;
    ob.drop_probe(&probe).await;
    let summary = check(&log, &records, &ends, &faults).unwrap_or_else(|e| {
        panic!(
            "PostgreSQL {major}: delivery contract violated: {e}\nfaults: {faults:?}\n{}",
            relay.log()
        )
    });
    eprintln!("VERSIONS RESTART SUMMARY PostgreSQL {major}: {summary}; slot {before} before, {resumes} after");
    assert!(
        summary.reconnects >= 1,
        "the generator never saw the restart"
    );
    relay.assert_running();
    ob.finish(relay).await;
    pg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_14_streams_with_protocol_2_and_refuses_a_role_without_replication() {
    let pg = cluster(14).await;
    protocol_and_aborts(&pg).await;

    // A role that may log in but not replicate.
    let admin = pg.connect().await;
    admin
        .batch_execute("CREATE ROLE versions_norepl LOGIN")
        .await
        .expect("create role");
    let ob = Outbox::new_with("versions_role", pg.connect().await).await;
    let text = ob
        .config_for(
            &kafka_bootstrap(),
            pg.port(),
            "postgres",
            "[metrics]\nlisten = \"127.0.0.1:0\"\n",
        )
        .replace("user = \"postgres\"", "user = \"versions_norepl\"");
    let config = Config::from_toml(&text, Path::new("versions.toml")).expect("valid config");
    let report = run_check(&config).await;
    let role = report.row(ROLE).expect("role row");
    assert_eq!(role.status, CheckStatus::Fail, "{report}");
    assert!(
        role.detail
            .contains("versions_norepl has neither REPLICATION nor superuser"),
        "{report}"
    );
    assert_eq!(
        role.fix.as_deref(),
        Some("ALTER ROLE \"versions_norepl\" REPLICATION"),
        "{report}"
    );
    let mut relay = Relay::start(&text);
    let status = relay.wait_exit(WAIT).expect("walrelay stops on its own");
    assert!(!status.success(), "{}", relay.log());
    assert!(!ob.slot_exists().await, "no slot was created");
    assert!(
        relay
            .log()
            .contains("role versions_norepl has neither REPLICATION nor superuser"),
        "{}",
        relay.log()
    );
    ob.finish_exited(relay).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_15_streams_with_protocol_2_and_survives_a_restart() {
    let pg = cluster(15).await;
    protocol_and_aborts(&pg).await;
    drop(restart_under_load(pg).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_16_streams_with_protocol_4_and_gets_abort_lsns() {
    let pg = cluster(16).await;
    protocol_and_aborts(&pg).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_17_streams_with_protocol_4_and_survives_a_restart() {
    let pg = cluster(17).await;
    protocol_and_aborts(&pg).await;
    drop(restart_under_load(pg).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_18_streams_with_protocol_4_and_survives_a_restart() {
    let pg = cluster(18).await;
    protocol_and_aborts(&pg).await;
    drop(restart_under_load(pg).await);
}

/// PostgreSQL 13: check fails the version row, run stops before creating
/// anything; both name the version and 14.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_13_is_refused_by_check_and_at_start() {
    let pg = cluster(13).await;
    let ob = Outbox::new_with("versions_13", pg.connect().await).await;
    let text = ob.config_for(
        &kafka_bootstrap(),
        pg.port(),
        "postgres",
        "[metrics]\nlisten = \"127.0.0.1:0\"\n",
    );
    let version: String = ob
        .client
        .query_one("SHOW server_version", &[])
        .await
        .expect("server_version")
        .get(0);
    assert!(version.starts_with("13."), "{version}");

    let config = Config::from_toml(&text, Path::new("versions.toml")).expect("valid config");
    let report = run_check(&config).await;
    assert!(!report.passed(), "{report}");
    let row = report.row(SERVER_VERSION).expect("server version row");
    assert_eq!(row.status, CheckStatus::Fail, "{report}");
    assert_eq!(
        row.detail,
        format!("postgresql {version} is not supported: walrelay supports postgresql 14 and later"),
        "{report}"
    );
    assert!(
        row.fix.as_deref().is_some_and(|f| f.contains("upgrade")),
        "{report}"
    );

    let mut relay = Relay::start(&text);
    let status = relay.wait_exit(WAIT).expect("walrelay stops on its own");
    assert!(!status.success(), "{}", relay.log());
    let log = relay.log();
    assert!(
        log.contains(&format!(
            "postgresql {version} is not supported: walrelay supports postgresql 14 and later"
        )),
        "{log}"
    );
    // Refused before anything was created.
    assert!(!ob.slot_exists().await, "a slot was created:\n{log}");
    let publications: i64 = ob
        .client
        .query_one(
            "SELECT count(*) FROM pg_publication WHERE pubname = $1",
            &[&ob.name],
        )
        .await
        .expect("read pg_publication")
        .get(0);
    assert_eq!(publications, 0, "a publication was created:\n{log}");
    ob.finish_exited(relay).await;
}
