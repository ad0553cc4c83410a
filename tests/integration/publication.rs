//! The publication against the real servers: the one walrelay's native
//! mode creates publishes inserts and updates only, and still delivers the
//! insert-and-delete outbox pattern while an UPDATE still meets
//! `outbox.op_invalid_behavior`; the Kafka Connect form's `filtered` mode
//! still creates what Debezium creates; `walrelay check` suggests dropping
//! deletes from a publication that has them (naming Debezium for its form),
//! and not for one without them, with transaction metadata on, or for a
//! messages-only pipeline.
//!
//! Each test owns its [`Outbox`] (table, publication, slot, topic).

use crate::common;

use std::path::{Path, PathBuf};

use common::relay::{commit_ends, connect_files, event_id, ids, Outbox, Relay, WAIT};
use common::{consume, kafka_bootstrap, read_to_end};
use walrelay::check::{self, run_check, CheckReport, CheckRow, CheckStatus};
use walrelay::config::Config;
use walrelay::proto::pgoutput::{decode_message, LogicalMessage};

/// `pubinsert`, `pubupdate`, `pubdelete`, `pubtruncate` of `publication`.
async fn operations(client: &tokio_postgres::Client, publication: &str) -> [bool; 4] {
    let row = client
        .query_one(
            "SELECT pubinsert, pubupdate, pubdelete, pubtruncate FROM pg_publication WHERE pubname = $1",
            &[&publication],
        )
        .await
        .expect("read pg_publication");
    [row.get(0), row.get(1), row.get(2), row.get(3)]
}

/// (inserts, deletes, commits) a probe slot decodes for `publication`.
async fn decoded(ob: &Outbox, probe: &str) -> (usize, usize, usize) {
    let rows = ob
        .client
        .query(
            "SELECT data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2)",
            &[&probe, &ob.name],
        )
        .await
        .expect("peek probe slot");
    let mut counts = (0, 0, 0);
    for r in &rows {
        match decode_message(bytes::Bytes::from(r.get::<_, Vec<u8>>(0)), 1, false) {
            Ok(LogicalMessage::Insert(_)) => counts.0 += 1,
            Ok(LogicalMessage::Delete(_)) => counts.1 += 1,
            Ok(LogicalMessage::Commit(_)) => counts.2 += 1,
            _ => {}
        }
    }
    counts
}

/// Event `n` inserted and deleted in one transaction (W1).
async fn insert_and_delete(ob: &Outbox, n: u64) {
    let (t, agg, id) = (&ob.name, ob.agg(""), event_id(n));
    ob.client
        .batch_execute(&format!(
            "BEGIN;
             INSERT INTO {t} VALUES ('{id}', '{agg}', 'k{n}', 'E', '{{\"n\": {n}}}');
             DELETE FROM {t} WHERE id = '{id}';
             COMMIT;"
        ))
        .await
        .expect("insert and delete");
}

/// The row called `name`; panics with the whole table when absent.
fn row<'a>(report: &'a CheckReport, name: &str) -> &'a CheckRow {
    report
        .row(name)
        .unwrap_or_else(|| panic!("no row {name}:\n{report}"))
}

/// Native mode creates its publication for inserts and updates only; the
/// insert-and-delete pattern still reaches a consumer (no delete is even
/// decoded), and an UPDATE of an outbox row still arrives: under
/// `op_invalid_behavior = "fatal"` walrelay stops without confirming it and
/// without delivering what follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_publication_without_deletes_delivers_and_still_sees_updates() {
    let ob = Outbox::new("pub_native").await;
    let config = ob
        .config(&kafka_bootstrap())
        .replace("[outbox]\n", "[outbox]\nop_invalid_behavior = \"fatal\"\n");
    let mut relay = Relay::start(&config);
    ob.wait_active(&mut relay).await;
    assert_eq!(
        operations(&ob.client, &ob.name).await,
        [true, true, false, false],
        "pubinsert, pubupdate, pubdelete, pubtruncate"
    );

    let probe = ob.create_probe().await;
    insert_and_delete(&ob, 1).await;
    insert_and_delete(&ob, 2).await;
    let records = consume(&ob.topic(""), 3, std::time::Duration::from_secs(10)).await;
    let got: Vec<_> = records
        .iter()
        .map(|r| {
            (
                r.header("id").map(<[u8]>::to_vec),
                r.key.clone(),
                r.value.clone(),
            )
        })
        .collect();
    let want: Vec<_> = (1..=2)
        .map(|n| {
            (
                Some(event_id(n).into_bytes()),
                Some(format!("k{n}").into_bytes()),
                Some(format!("{{\"n\": {n}}}").into_bytes()),
            )
        })
        .collect();
    assert_eq!(got, want, "{}", common::describe(&records));
    assert_eq!(
        decoded(&ob, &probe).await,
        (2, 0, 2),
        "(inserts, deletes, commits) pgoutput sends for the publication"
    );

    // An UPDATE still arrives and meets op_invalid_behavior.
    ob.insert(3, "", "k3", r#"{"n": 3}"#).await;
    let ends = commit_ends(&ob.client, &probe, &ob.name).await;
    assert_eq!(ends.len(), 3, "probe saw {ends:?}");
    ob.wait_confirmed(ends[2], &relay).await;
    ob.client
        .batch_execute(&format!(
            "UPDATE {} SET payload = '{{\"n\": 33}}' WHERE id = '{}'",
            ob.name,
            event_id(3)
        ))
        .await
        .expect("update the outbox row");
    ob.insert(4, "", "k4", r#"{"n": 4}"#).await;
    let ends = commit_ends(&ob.client, &probe, &ob.name).await;
    assert_eq!(ends.len(), 5, "probe saw {ends:?}");
    let code = relay.exit_code(WAIT);
    assert_eq!(code, 1, "{}", relay.log());
    let confirmed = ob.slot_confirmed().await.expect("slot exists");
    assert!(
        confirmed >= ends[2] && confirmed < ends[3],
        "confirmed {confirmed} must stay in [{}, {}) (the update's commit)",
        ends[2],
        ends[3]
    );
    let got = ids(&read_to_end(&ob.topic(""), WAIT).await);
    let want = (1..=3).map(event_id).collect();
    assert_eq!(got, want, "event 4 follows the fatal update");
    ob.drop_probe(&probe).await;
    ob.finish_exited(relay).await;
}

/// The Kafka Connect form of `ob`'s pipeline in `dir`: the worker file and
/// the connector file, streaming only (`snapshot.mode=no_data`).
fn connector_files(dir: &Path, ob: &Outbox) -> (PathBuf, PathBuf) {
    let port = common::env().pg_port;
    connect_files(
        dir,
        ob,
        port,
        &kafka_bootstrap(),
        "",
        "snapshot.mode=no_data\n",
    )
}

/// The Kafka Connect form with `publication.autocreate.mode=filtered`
/// creates what Debezium creates: `FOR TABLE <include list>` with no
/// publish list, so PostgreSQL's default of every operation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_form_filtered_creates_what_debezium_creates() {
    let ob = Outbox::new("pub_connect").await;
    let dir = tempfile::tempdir().expect("temporary directory");
    let (worker, connector) = connector_files(dir.path(), &ob);
    let mut relay = Relay::start_args(
        &[
            Path::new("connect-standalone"),
            worker.as_path(),
            connector.as_path(),
        ],
        dir.path().join("walrelay.log"),
    );
    ob.wait_active(&mut relay).await;
    assert_eq!(
        operations(&ob.client, &ob.name).await,
        [true, true, true, true],
        "pubinsert, pubupdate, pubdelete, pubtruncate"
    );
    let row = ob
        .client
        .query_one(
            "SELECT puballtables, pubviaroot, \
             (SELECT array_agg(schemaname || '.' || tablename) FROM pg_publication_tables WHERE pubname = $1) \
             FROM pg_publication WHERE pubname = $1",
            &[&ob.name],
        )
        .await
        .expect("read the publication");
    let (all, via_root, tables): (bool, bool, Vec<String>) = (row.get(0), row.get(1), row.get(2));
    assert!(
        !all && !via_root,
        "FOR TABLE, no publish_via_partition_root"
    );
    assert_eq!(tables, vec![format!("public.{}", ob.name)]);
    insert_and_delete(&ob, 1).await;
    let records = consume(&ob.topic(""), 1, WAIT).await;
    assert_eq!(
        ids(&records),
        [event_id(1)].into_iter().collect(),
        "{}",
        relay.log()
    );
    ob.finish(relay).await;
}

/// `walrelay check` on a publication with deletes: a warning (the check
/// still passes) whose fix is the `ALTER PUBLICATION` statement; the
/// Kafka Connect form's also says Debezium reads it the same; transaction
/// metadata keeps the deletes; a messages-only pipeline gets no row. Once
/// the suggested statement ran, the row passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_suggests_a_publication_without_deletes() {
    let ob = Outbox::new("pub_check").await;
    ob.client
        .batch_execute(&format!("CREATE PUBLICATION {0} FOR TABLE {0}", ob.name))
        .await
        .expect("create a publication of every operation");
    let native = ob.config(&kafka_bootstrap());
    let parse = |text: &str| Config::from_toml(text, Path::new("publication.toml")).expect("valid");

    let report = run_check(&parse(&native)).await;
    assert!(report.passed(), "{report}");
    let ops = row(&report, check::PUBLISHED_OPERATIONS);
    assert_eq!(ops.status, CheckStatus::Warn, "{report}");
    assert!(
        ops.detail
            .contains("publishes insert, update, delete, truncate"),
        "{report}"
    );
    let fix = ops.fix.clone().expect("a suggestion");
    let statement = format!(
        "ALTER PUBLICATION \"{}\" SET (publish = 'insert, update')",
        ob.name
    );
    assert!(fix.starts_with(&format!("{statement};")), "{report}");
    assert!(fix.contains("docs/benchmarks.md"), "{report}");
    assert!(!fix.contains("Debezium"), "{report}");

    // The Kafka Connect form reads the same publication (mode filtered).
    let dir = tempfile::tempdir().expect("temporary directory");
    let (worker, connector) = connector_files(dir.path(), &ob);
    let connect = walrelay::config::kafka_connect::load_connect(&worker, &connector)
        .expect("the connect files translate")
        .config;
    let report = run_check(&connect).await;
    let ops = row(&report, check::PUBLISHED_OPERATIONS);
    assert_eq!(ops.status, CheckStatus::Warn, "{report}");
    assert!(
        ops.fix.as_deref().is_some_and(|f| f.starts_with(&statement)
            && f.contains("Debezium reads the same publication without deletes")),
        "{report}"
    );

    // Transaction metadata counts deletes: nothing to suggest.
    let metadata = native.replace("[outbox]\n", "[outbox]\ntransaction_metadata = true\n");
    let report = run_check(&parse(&metadata)).await;
    let ops = row(&report, check::PUBLISHED_OPERATIONS);
    assert_eq!(ops.status, CheckStatus::Pass, "{report}");
    assert!(ops.fix.is_none(), "{report}");

    // A messages-only pipeline reads no table: no row at all.
    let messages = native.replace(
        &format!("[outbox]\ntable = \"public.{}\"\n", ob.name),
        "[outbox]\nsource = \"messages\"\nmessage_prefixes = [\"pub_check\"]\n",
    );
    assert_ne!(messages, native, "the [outbox] table line was replaced");
    let report = run_check(&parse(&messages)).await;
    assert!(
        report.row(check::PUBLISHED_OPERATIONS).is_none(),
        "{report}"
    );

    // The suggested statement runs, and then there is nothing to suggest.
    ob.client
        .batch_execute(&statement)
        .await
        .expect("the suggested statement");
    assert_eq!(
        operations(&ob.client, &ob.name).await,
        [true, true, false, false]
    );
    let report = run_check(&parse(&native)).await;
    assert!(report.passed(), "{report}");
    let ops = row(&report, check::PUBLISHED_OPERATIONS);
    assert_eq!(ops.status, CheckStatus::Pass, "{report}");
    assert!(ops.fix.is_none(), "{report}");
    assert!(ops.detail.contains("publishes insert, update"), "{report}");
    // Read-only: check created no slot.
    assert!(!ob.slot_exists().await, "check created the slot");
    ob.client
        .batch_execute(&format!("DROP PUBLICATION {0}; DROP TABLE {0}", ob.name))
        .await
        .expect("drop the publication and table");
}
