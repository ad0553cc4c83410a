//! The replication connection (`walrelay::postgres::replication`) against the
//! real PostgreSQL of `scripts/test.sh`: every authentication method the
//! cluster's pg_hba offers, the errors an operator sees when the password is
//! wrong or missing, slot creation and a decoded WAL stream, and the relay
//! end to end as a SCRAM role that does not own the outbox table.
//!
//! The password roles are fixed by `scripts/pg.sh`'s pg_hba (`walrelay_md5`,
//! `walrelay_plain`, `walrelay_scram`); tests create them idempotently under
//! an advisory lock because tests run in parallel.

use crate::common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::relay::{event_id, ids, Outbox, Relay, WAIT};
use common::{connect, consume, env, kafka_bootstrap, unique_name};
use walrelay::postgres::config::{Endpoint, TargetSessionAttrs};
use walrelay::postgres::replication::{
    ConnectParams, ReplicationConnection, ReplicationError, StreamReader,
};
use walrelay::proto::frame::{decode_replication_message, ReplicationMessage};
use walrelay::proto::pgoutput::{self, ColumnValue, DecoderState, LogicalMessage};
use walrelay::proto::Lsn;
use walrelay::retry::Retry;
use walrelay::secret::Secret;

/// Password of the three password roles (test-only cluster on loopback).
const ROLE_PASSWORD: &str = "walrelay-test-pw-7c1e";
/// Key of the advisory lock that serialises role creation across tests.
const ROLE_LOCK: i64 = 0x7761_6c72_656c_6179;

/// Creates `walrelay_md5` (md5 verifier), `walrelay_plain` and
/// `walrelay_scram` (SCRAM verifiers) with LOGIN REPLICATION and
/// [`ROLE_PASSWORD`]; a no-op when they already are so.
async fn ensure_password_roles() {
    let client = connect().await;
    client
        .batch_execute(&format!(
            "DO $$
            BEGIN
                PERFORM pg_advisory_xact_lock({ROLE_LOCK});
                -- md5 in pg_hba only really means md5 when the stored verifier is md5
                -- (with a SCRAM verifier the server silently switches to SCRAM).
                PERFORM set_config('password_encryption', 'md5', true);
                IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walrelay_md5') THEN
                    CREATE ROLE walrelay_md5 LOGIN REPLICATION PASSWORD '{ROLE_PASSWORD}';
                ELSIF NOT EXISTS (SELECT 1 FROM pg_authid WHERE rolname = 'walrelay_md5'
                        AND rolcanlogin AND rolreplication
                        AND rolpassword = 'md5' || md5('{ROLE_PASSWORD}' || 'walrelay_md5')) THEN
                    ALTER ROLE walrelay_md5 LOGIN REPLICATION PASSWORD '{ROLE_PASSWORD}';
                END IF;
                PERFORM set_config('password_encryption', 'scram-sha-256', true);
                IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walrelay_plain') THEN
                    CREATE ROLE walrelay_plain LOGIN REPLICATION PASSWORD '{ROLE_PASSWORD}';
                END IF;
                IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walrelay_scram') THEN
                    CREATE ROLE walrelay_scram LOGIN REPLICATION PASSWORD '{ROLE_PASSWORD}';
                END IF;
            END
            $$"
        ))
        .await
        .expect("create the password roles");
    // Only the verifier kinds the tests rely on; a SCRAM verifier's
    // password cannot be checked here, the auth tests do that.
    let rows = client
        .query(
            "SELECT rolname::text, left(rolpassword, 14) FROM pg_authid \
             WHERE rolname IN ('walrelay_md5', 'walrelay_plain', 'walrelay_scram') ORDER BY 1",
            &[],
        )
        .await
        .expect("read roles");
    let kinds: Vec<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(kinds.len(), 3, "{kinds:?}");
    assert!(kinds[0].1.starts_with("md5"), "{kinds:?}");
    assert!(kinds[2].1.starts_with("SCRAM-SHA-256$"), "{kinds:?}");
}

fn params(user: &str, password: Option<&str>) -> ConnectParams {
    ConnectParams {
        hosts: vec![Endpoint::new("127.0.0.1", env().pg_port)],
        target_session_attrs: TargetSessionAttrs::Any,
        user: user.into(),
        password: password.map(Secret::new),
        dbname: "postgres".into(),
        application_name: unique_name("repl_conn_test"),
        connect_timeout: Duration::from_secs(20),
        tls: Default::default(),
    }
}

/// Connects and runs IDENTIFY_SYSTEM; checks the answer against the server.
async fn connect_and_identify(user: &str, password: Option<&str>) {
    let mut conn = ReplicationConnection::connect(&params(user, password))
        .await
        .unwrap_or_else(|e| panic!("connect as {user}: {e}"));
    let identity = conn
        .identify_system()
        .await
        .unwrap_or_else(|e| panic!("IDENTIFY_SYSTEM as {user}: {e}"));
    let client = connect().await;
    let row = client
        .query_one(
            "SELECT system_identifier::text, pg_current_wal_flush_lsn()::text FROM pg_control_system()",
            &[],
        )
        .await
        .expect("control data");
    assert_eq!(identity.system_id, row.get::<_, String>(0), "as {user}");
    assert!(identity.timeline >= 1, "as {user}: {identity:?}");
    let flushed: Lsn = row.get::<_, String>(1).parse().expect("lsn");
    assert!(
        identity.xlogpos > Lsn::ZERO && identity.xlogpos <= flushed,
        "as {user}: xlogpos {} vs flushed {flushed}",
        identity.xlogpos
    );
    assert_eq!(identity.dbname.as_deref(), Some("postgres"), "as {user}");
}

#[tokio::test]
async fn trust_auth_identifies_the_system() {
    connect_and_identify("postgres", None).await;
}

#[tokio::test]
async fn cleartext_password_auth() {
    ensure_password_roles().await;
    connect_and_identify("walrelay_plain", Some(ROLE_PASSWORD)).await;
}

#[tokio::test]
async fn md5_password_auth() {
    ensure_password_roles().await;
    connect_and_identify("walrelay_md5", Some(ROLE_PASSWORD)).await;
}

#[tokio::test]
async fn scram_sha_256_auth() {
    ensure_password_roles().await;
    connect_and_identify("walrelay_scram", Some(ROLE_PASSWORD)).await;
}

#[tokio::test]
async fn wrong_password_is_a_permanent_28p01() {
    ensure_password_roles().await;
    for user in ["walrelay_plain", "walrelay_md5", "walrelay_scram"] {
        let err =
            match ReplicationConnection::connect(&params(user, Some("not-the-password"))).await {
                Ok(_) => panic!("{user} authenticated with a wrong password"),
                Err(e) => e,
            };
        match &err {
            ReplicationError::Server { code, message, .. } => {
                assert_eq!(code, "28P01", "{user}: {err}");
                assert!(message.contains(user), "{user}: {err}");
            }
            other => panic!("{user}: expected a server error, got {other:?}"),
        }
        assert_eq!(err.sqlstate(), Some("28P01"));
        assert!(
            !format!("{err} {err:?}").contains("not-the-password"),
            "{err:?}"
        );
        let err = Retry::<ReplicationError>::from(err);
        assert!(
            matches!(err, Retry::Definite(_)),
            "{user}: a wrong password must not be retried forever: {err}"
        );
    }
}

#[tokio::test]
async fn missing_password_is_password_required() {
    ensure_password_roles().await;
    for user in ["walrelay_plain", "walrelay_md5", "walrelay_scram"] {
        match ReplicationConnection::connect(&params(user, None)).await {
            Ok(_) => panic!("{user} connected without a password"),
            Err(ReplicationError::PasswordRequired { user: named }) => {
                assert_eq!(named, user);
                let err = ReplicationError::PasswordRequired { user: named };
                assert!(err.to_string().contains(user), "{err}");
                assert!(matches!(
                    Retry::<ReplicationError>::from(err),
                    Retry::Definite(_)
                ));
            }
            Err(other) => panic!("{user}: expected PasswordRequired, got {other:?}"),
        }
    }
}

#[test]
fn connect_params_debug_hides_the_password() {
    let p = params("walrelay_scram", Some("s3cr3t-Pa55word"));
    let shown = format!("{p:?} {p:#?}");
    assert!(!shown.contains("s3cr3t-Pa55word"), "{shown}");
    assert!(shown.contains("walrelay_scram"), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");
}

/// The next CopyData payload, reading the socket as needed.
async fn next_frame(reader: &mut StreamReader) -> bytes::Bytes {
    loop {
        if let Some(frame) = reader.try_next().expect("frame") {
            return frame;
        }
        reader.read_more().await.expect("read more");
    }
}

#[tokio::test]
async fn create_slot_and_stream_an_insert() {
    let client = connect().await;
    let name = unique_name("repl_stream");
    client
        .batch_execute(&format!(
            "CREATE TABLE {name} (id int PRIMARY KEY, v text);
             CREATE PUBLICATION {name} FOR TABLE {name};"
        ))
        .await
        .expect("table and publication");
    let mut conn = ReplicationConnection::connect(&params("postgres", None))
        .await
        .expect("connect");
    conn.identify_system().await.expect("identify");
    let consistent = conn
        .create_logical_slot(&name, false)
        .await
        .expect("create slot");
    let row = client
        .query_one(
            "SELECT plugin::text, slot_type::text, database::text, confirmed_flush_lsn::text \
             FROM pg_replication_slots WHERE slot_name = $1",
            &[&name],
        )
        .await
        .expect("the slot exists");
    assert_eq!(row.get::<_, String>(0), "pgoutput");
    assert_eq!(row.get::<_, String>(1), "logical");
    assert_eq!(row.get::<_, String>(2), "postgres");
    let confirmed: Lsn = row.get::<_, String>(3).parse().unwrap();
    assert_eq!(
        confirmed, consistent,
        "a new slot starts at its consistent point"
    );

    let options = [
        ("proto_version", "1".to_string()),
        ("publication_names", name.clone()),
    ];
    let mut stream = conn
        .start_replication(&name, Lsn::ZERO, &options)
        .await
        .expect("start replication");
    client
        .execute(
            &format!("INSERT INTO {name} VALUES (42, 'it''s here')"),
            &[],
        )
        .await
        .expect("insert");

    let mut decoder = DecoderState::new(1);
    let mut kinds = Vec::new();
    let mut relation_name = None;
    let mut row_values = None;
    let mut begin_final = None;
    let commit = tokio::time::timeout(WAIT, async {
        loop {
            let frame = next_frame(&mut stream.reader).await;
            let x = match decode_replication_message(frame).expect("replication message") {
                ReplicationMessage::XLogData(x) => x,
                ReplicationMessage::PrimaryKeepalive(_) => continue,
            };
            let msg = pgoutput::decode(&mut decoder, x.data).expect("pgoutput");
            kinds.push(msg.kind());
            match msg {
                LogicalMessage::Begin(b) => begin_final = Some(b.final_lsn),
                LogicalMessage::Relation(r) => {
                    relation_name = Some((
                        String::from_utf8_lossy(&r.namespace).into_owned(),
                        String::from_utf8_lossy(&r.name).into_owned(),
                        r.columns
                            .iter()
                            .map(|c| String::from_utf8_lossy(&c.name).into_owned())
                            .collect::<Vec<_>>(),
                    ));
                }
                LogicalMessage::Insert(i) => row_values = Some(i.new.columns),
                LogicalMessage::Commit(c) => return c,
                _ => {}
            }
        }
    })
    .await
    .expect("the insert's transaction arrives within the bound");
    assert_eq!(kinds, ["Begin", "Relation", "Insert", "Commit"]);
    assert_eq!(
        relation_name,
        Some((
            "public".to_string(),
            name.clone(),
            vec!["id".to_string(), "v".to_string()]
        ))
    );
    assert_eq!(
        row_values,
        Some(vec![
            ColumnValue::Text("42".into()),
            ColumnValue::Text("it's here".into())
        ])
    );
    assert_eq!(begin_final, Some(commit.commit_lsn));
    assert!(commit.end_lsn > consistent && commit.end_lsn > commit.commit_lsn);

    // Nothing was confirmed: the slot still sits at its consistent point.
    let row = client
        .query_one(
            "SELECT active, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
            &[&name],
        )
        .await
        .unwrap();
    assert!(row.get::<_, bool>(0), "the stream holds the slot");
    assert_eq!(row.get::<_, String>(1).parse::<Lsn>().unwrap(), consistent);

    drop(stream);
    let deadline = Instant::now() + WAIT;
    loop {
        let active: bool = client
            .query_one(
                "SELECT active FROM pg_replication_slots WHERE slot_name = $1",
                &[&name],
            )
            .await
            .unwrap()
            .get(0);
        if !active {
            break;
        }
        assert!(Instant::now() < deadline, "slot {name} still active");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client
        .execute("SELECT pg_drop_replication_slot($1)", &[&name])
        .await
        .unwrap();
    client
        .batch_execute(&format!("DROP PUBLICATION {name}; DROP TABLE {name}"))
        .await
        .unwrap();
}

/// The relay end to end as `walrelay_scram`: a role with REPLICATION and
/// SELECT on the outbox, not its owner, so the publication is created by
/// the owner beforehand and walrelay only verifies it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_with_scram_role_delivers() {
    ensure_password_roles().await;
    let ob = Outbox::new("scram_relay").await;
    let name = &ob.name;
    ob.client
        .batch_execute(&format!(
            "GRANT SELECT ON {name} TO walrelay_scram;
             CREATE PUBLICATION {name} FOR TABLE {name};"
        ))
        .await
        .expect("grant and publication");
    let config = ob.config(&kafka_bootstrap()).replace(
        "user = \"postgres\"",
        &format!("user = \"walrelay_scram\"\npassword = \"{ROLE_PASSWORD}\""),
    );
    assert!(config.contains("walrelay_scram"), "{config}");
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    // The walsender holding the slot runs as the SCRAM role.
    let holder: String = ob
        .client
        .query_one(
            "SELECT a.usename::text FROM pg_replication_slots s \
             JOIN pg_stat_activity a ON a.pid = s.active_pid WHERE s.slot_name = $1",
            &[name],
        )
        .await
        .expect("slot holder")
        .get(0);
    assert_eq!(holder, "walrelay_scram");
    ob.insert(1, "", "k1", r#"{"n": 1}"#).await;
    ob.insert(2, "", "k2", r#"{"n": 2}"#).await;
    let records = consume(&ob.topic(""), 2, Duration::from_secs(30)).await;
    let want: HashSet<String> = (1..=2).map(event_id).collect();
    assert_eq!(
        ids(&records),
        want,
        "{}\n{}",
        common::describe(&records),
        relay.log()
    );
    relay.assert_running();
    assert!(
        !relay.log().contains(ROLE_PASSWORD),
        "the password appears in the log:\n{}",
        relay.log()
    );
    ob.finish(relay).await;
}
