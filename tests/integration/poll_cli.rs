//! The operator commands of the polling source, run as the `walrelay`
//! binary against the shared `wal_level = replica` cluster: `walrelay
//! check` (its `[poll]` rows fail naming the broken thing, pass on a good
//! table, and change nothing) and `walrelay replay` (counts without
//! `--yes`, resets exactly the matching published rows with it, refused
//! where there is nothing to replay). Assertions are on exit codes, the
//! printed rows and the outbox table's own state.
//!
//! Each test owns its table (and role, where it makes one), named by
//! `common::unique_name`.

use std::process::{Command, Output};

use crate::common::{
    connect_url, create_topic, kafka_bootstrap, pg_replica_port, pg_replica_url, unique_name,
};

/// One test's outbox on the replica cluster: a `seq` identity column as the
/// order, the partial index on the unpublished rows.
struct PollTable {
    client: tokio_postgres::Client,
    name: String,
}

impl PollTable {
    async fn new(test: &str) -> PollTable {
        PollTable::with_order(test, "seq bigint GENERATED ALWAYS AS IDENTITY,", true).await
    }

    /// A table whose order column is declared by `order_column` (empty:
    /// none), with the partial index on `seq` when `index`.
    async fn with_order(test: &str, order_column: &str, index: bool) -> PollTable {
        let client = connect_url(&pg_replica_url()).await;
        let name = unique_name(test);
        let index = if index {
            format!("CREATE INDEX ON {name} (seq) WHERE published_at IS NULL;")
        } else {
            String::new()
        };
        client
            .batch_execute(&format!(
                "CREATE TABLE {name} (
                    {order_column}
                    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
                    aggregatetype varchar(255) NOT NULL,
                    aggregateid varchar(255),
                    type varchar(255) NOT NULL,
                    payload jsonb,
                    published_at timestamptz
                );
                {index}"
            ))
            .await
            .expect("create the polled outbox table");
        PollTable { client, name }
    }

    /// `[source] kind = "poll"` for this table, connecting as `user`;
    /// `poll_extra` goes into `[poll]`.
    fn config(&self, poll_extra: &str, user: &str) -> String {
        format!(
            r#"
[source]
kind = "poll"

[poll]
order_by = ["seq"]
{poll_extra}

[postgres]
host = "127.0.0.1"
port = {port}
user = "{user}"
dbname = "postgres"

[outbox]
table = "public.{name}"

[kafka]
bootstrap_servers = "{bootstrap}"
"#,
            port = pg_replica_port(),
            name = self.name,
            bootstrap = kafka_bootstrap(),
        )
    }

    /// Inserts rows 1..=n of aggregate type `agg`, unpublished.
    async fn insert(&self, n: i64, agg: &str) {
        self.client
            .execute(
                &format!(
                    "INSERT INTO {} (aggregatetype, aggregateid, type, payload) \
                     SELECT $1, 'k' || i, 'Created', jsonb_build_object('n', i) \
                     FROM generate_series(1, $2::int8) i",
                    self.name
                ),
                &[&agg, &n],
            )
            .await
            .expect("insert outbox rows");
    }

    /// Every row as text, in order: the whole state a command may change.
    async fn state(&self) -> Vec<String> {
        self.client
            .query(
                &format!(
                    "SELECT {0}::text || '|' || xmin::text || '|' || ctid::text FROM {0} \
                     ORDER BY id",
                    self.name
                ),
                &[],
            )
            .await
            .expect("read the outbox")
            .iter()
            .map(|r| r.get(0))
            .collect()
    }

    /// The `seq` of the unpublished rows.
    async fn unpublished(&self) -> Vec<i64> {
        self.client
            .query(
                &format!(
                    "SELECT seq FROM {} WHERE published_at IS NULL ORDER BY seq",
                    self.name
                ),
                &[],
            )
            .await
            .expect("read the unpublished rows")
            .iter()
            .map(|r| r.get(0))
            .collect()
    }

    /// The advisory locks of this table's shards: (pid, shard).
    async fn shard_locks(&self) -> Vec<(i32, i32)> {
        self.client
            .query(
                "SELECT pid, objid::int FROM pg_locks WHERE locktype = 'advisory' \
                 AND classid::int = hashtext($1) ORDER BY 1, 2",
                &[&format!("walrelay.poll:public.{}", self.name)],
            )
            .await
            .expect("read pg_locks")
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
    }

    /// The table's indexes, by name.
    async fn indexes(&self) -> Vec<String> {
        self.client
            .query(
                "SELECT indexrelid::regclass::text FROM pg_index \
                 WHERE indrelid = $1::text::regclass ORDER BY 1",
                &[&self.name],
            )
            .await
            .expect("read pg_index")
            .iter()
            .map(|r| r.get(0))
            .collect()
    }

    async fn drop(self) {
        self.client
            .batch_execute(&format!("DROP TABLE IF EXISTS {}", self.name))
            .await
            .expect("drop the test's table");
    }
}

/// Runs `walrelay <args> --config <a file holding config>`.
async fn walrelay(config: &str, args: &[&str]) -> Output {
    let file = tempfile::Builder::new()
        .suffix(".toml")
        .tempfile()
        .expect("a temporary config file");
    std::fs::write(file.path(), config).expect("write the config file");
    let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    all.push("--config".into());
    all.push(file.path().display().to_string());
    tokio::task::spawn_blocking(move || {
        let out = Command::new(env!("CARGO_BIN_EXE_walrelay"))
            .args(&all)
            .env("WALRELAY_LOG", "warn")
            .output()
            .expect("run walrelay");
        drop(file);
        out
    })
    .await
    .expect("walrelay finished")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The line of check's table for row `name`, and the `fix:` line under it
/// (empty when none).
fn check_row<'a>(table: &'a str, name: &str) -> (&'a str, &'a str) {
    let mut lines = table.lines();
    while let Some(line) = lines.next() {
        if line.get(8..).is_some_and(|rest| rest.starts_with(name)) {
            let fix = lines
                .clone()
                .next()
                .filter(|l| l.trim_start().starts_with("fix:"))
                .unwrap_or("");
            return (line, fix);
        }
    }
    panic!("no row {name}:\n{table}")
}

fn failed_rows(table: &str) -> Vec<String> {
    table
        .lines()
        .filter_map(|l| l.strip_prefix("FAIL    "))
        .map(|rest| rest.split("  ").next().unwrap_or(rest).trim().to_owned())
        .collect()
}

/// A `[poll]` column the table lacks fails `poll columns`, naming the key
/// and the column; the WAL rows do not run on a replica-level server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_fails_naming_a_missing_poll_column() {
    let table = PollTable::with_order("pcli_missing", "", false).await;
    let config = table.config("shards = 2\nshard_column = \"tenant\"", "postgres");

    let out = walrelay(&config, &["check"]).await;
    let text = stdout(&out);

    assert_eq!(out.status.code(), Some(1), "{text}\n{}", stderr(&out));
    assert_eq!(failed_rows(&text), ["poll columns"], "{text}");
    let (row, fix) = check_row(&text, "poll columns");
    let qualified = format!("public.{}", table.name);
    for want in [
        format!("poll.order_by[0] names column seq, which {qualified} does not have"),
        format!("poll.shard_column names column tenant, which {qualified} does not have"),
    ] {
        assert!(row.contains(&want), "{want}:\n{text}");
    }
    assert!(
        fix.contains(&format!(
            "add column seq to {qualified}, or set poll.order_by[0]"
        )),
        "{text}"
    );
    for wal_only in ["replication connection", "wal_level", "replication slot"] {
        assert!(
            !text
                .lines()
                .any(|l| l.get(8..).is_some_and(|r| r.starts_with(wal_only))),
            "{wal_only} checked in poll mode:\n{text}"
        );
    }
    table.drop().await;
}

/// A role with SELECT only fails `outbox privileges`, naming UPDATE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_fails_naming_the_missing_update_privilege() {
    let table = PollTable::new("pcli_privilege").await;
    let role = format!("{}_r", table.name);
    table
        .client
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN; GRANT SELECT ON {} TO {role}",
            table.name
        ))
        .await
        .expect("create a role with SELECT only");
    let config = table.config("", &role);

    let out = walrelay(&config, &["check"]).await;
    let text = stdout(&out);

    assert_eq!(out.status.code(), Some(1), "{text}\n{}", stderr(&out));
    assert_eq!(failed_rows(&text), ["outbox privileges"], "{text}");
    let (row, fix) = check_row(&text, "outbox privileges");
    assert!(
        row.contains(&format!("{role} has no UPDATE on public.{}", table.name))
            && row.contains("the mark sets published_at"),
        "{text}"
    );
    assert!(
        fix.contains(&format!(
            "GRANT UPDATE ON \"public\".\"{}\" TO \"{role}\"",
            table.name
        )),
        "{text}"
    );
    table
        .client
        .batch_execute(&format!("DROP TABLE {}; DROP ROLE {role}", table.name))
        .await
        .expect("drop the table and the role");
}

/// A good table passes every row (exit 0), reports the shard lock another
/// session holds without taking it, and leaves rows, locks and indexes as
/// they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_passes_on_a_good_setup_and_changes_nothing() {
    let table = PollTable::new("pcli_good").await;
    let agg = table.name.clone();
    create_topic(&format!("outbox.event.{agg}"), 1).await;
    table.insert(4, &agg).await;
    table
        .client
        .batch_execute(&format!(
            "UPDATE {} SET published_at = now() WHERE seq <= 2",
            table.name
        ))
        .await
        .expect("mark two rows published");
    // Shard 0 held by another session, as a running walrelay would.
    let holder = connect_url(&format!(
        "{} application_name=pcli_holder",
        pg_replica_url()
    ))
    .await;
    let lock = format!("hashtext('walrelay.poll:public.{}'), 0", table.name);
    let pid: i32 = holder
        .query_one(
            &format!("SELECT pg_advisory_lock({lock}), pg_backend_pid()"),
            &[],
        )
        .await
        .expect("take shard 0's lock")
        .get(1);
    let (rows_before, locks_before, indexes_before) = (
        table.state().await,
        table.shard_locks().await,
        table.indexes().await,
    );
    assert_eq!(locks_before, [(pid, 0)]);

    let out = walrelay(&table.config("shards = 2", "postgres"), &["check"]).await;
    let text = stdout(&out);

    assert_eq!(out.status.code(), Some(0), "{text}\n{}", stderr(&out));
    assert!(
        text.contains("0 failed") && text.contains("walrelay can start"),
        "{text}"
    );
    for name in [
        "polling source",
        "outbox table",
        "poll columns",
        "published column",
        "claim order",
        "claim index",
        "outbox privileges",
        "shard locks",
    ] {
        let (row, _) = check_row(&text, name);
        assert!(row.starts_with("pass"), "{name} did not pass:\n{text}");
    }
    assert!(
        check_row(&text, "polling source")
            .0
            .contains("wal_level replica is enough"),
        "{text}"
    );
    assert!(
        check_row(&text, "shard locks").0.contains(&format!(
            "shard 0: held by pid {pid} (pcli_holder); shard 1: free"
        )),
        "{text}"
    );
    assert_eq!(table.state().await, rows_before, "check changed rows");
    assert_eq!(
        table.shard_locks().await,
        locks_before,
        "check took or freed a lock"
    );
    assert_eq!(
        table.indexes().await,
        indexes_before,
        "check changed indexes"
    );
    drop(holder);
    table.drop().await;
}

/// `replay --where` without `--yes` only counts the matching published rows;
/// with it, exactly those become unpublished, in one statement that cannot
/// be stacked with another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_where_counts_then_resets_exactly_the_matching_rows() {
    let table = PollTable::new("pcli_replay").await;
    table.insert(8, "order").await;
    table
        .client
        .batch_execute(&format!(
            "UPDATE {} SET published_at = now() - interval '1 hour' WHERE seq <= 6",
            table.name
        ))
        .await
        .expect("mark rows 1..6 published");
    let config = table.config("", "postgres");
    let before = table.state().await;
    // Rows 2, 4 and 6 are published and match; 8 matches but is unpublished.
    let condition = "seq % 2 = 0";

    let out = walrelay(&config, &["replay", "--where", condition]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).lines().next().unwrap_or(""),
        format!(
            "3 published row(s) of public.{} match; nothing was changed (add --yes to set \
             published_at back to NULL on them, so walrelay publishes them again)",
            table.name
        )
    );
    assert_eq!(table.state().await, before, "a dry run changed the table");

    // A second statement is refused by the protocol, and a condition that
    // writes cannot without --yes: neither changes anything.
    table
        .client
        .batch_execute(&format!(
            "CREATE FUNCTION {0}_touch() RETURNS bool LANGUAGE sql AS \
             $$ UPDATE {0} SET published_at = NULL; SELECT true $$",
            table.name
        ))
        .await
        .expect("create a writing function");
    let stacked = format!("true; UPDATE {} SET published_at = NULL", table.name);
    let out = walrelay(&config, &["replay", "--where", &stacked, "--yes"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let writing = format!("{}_touch()", table.name);
    let out = walrelay(&config, &["replay", "--where", &writing]).await;
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("read-only transaction"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        table.state().await,
        before,
        "a refused replay changed the table"
    );

    let out = walrelay(&config, &["replay", "--where", condition, "--yes"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).lines().next().unwrap_or(""),
        format!(
            "set published_at back to NULL on 3 row(s) of public.{}: walrelay publishes them again",
            table.name
        )
    );
    assert_eq!(table.unpublished().await, [2, 4, 6, 7, 8]);
    // The other rows are untouched (values, marks, row versions).
    let others = |rows: Vec<String>| -> Vec<String> {
        rows.into_iter()
            .filter(|r| !["(2,", "(4,", "(6,"].iter().any(|s| r.starts_with(s)))
            .collect()
    };
    let after = table.state().await;
    assert_eq!(after.len(), before.len());
    assert_eq!(others(after), others(before));
    table
        .client
        .batch_execute(&format!("DROP FUNCTION {}_touch()", table.name))
        .await
        .expect("drop the function");
    table.drop().await;
}

/// `replay --since` resets the rows published at or after that time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_since_resets_the_rows_published_since() {
    let table = PollTable::new("pcli_since").await;
    table.insert(5, "order").await;
    table
        .client
        .batch_execute(&format!(
            "UPDATE {0} SET published_at = '2020-01-01 00:00+00' WHERE seq <= 2;
             UPDATE {0} SET published_at = '2030-01-01 00:00+00' WHERE seq IN (3, 4)",
            table.name
        ))
        .await
        .expect("mark rows published at two times");

    let out = walrelay(
        &table.config("", "postgres"),
        &["replay", "--since", "2025-06-01 00:00+00", "--yes"],
    )
    .await;

    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("on 2 row(s)"), "{}", stdout(&out));
    assert_eq!(table.unpublished().await, [3, 4, 5]);
    table.drop().await;
}

/// Replay is refused (exit 2) in delete mode and for the WAL source, and
/// changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_is_refused_in_delete_mode_and_for_the_wal_source() {
    let table = PollTable::new("pcli_refused").await;
    table.insert(3, "order").await;
    table
        .client
        .batch_execute(&format!("UPDATE {} SET published_at = now()", table.name))
        .await
        .expect("mark every row published");
    let before = table.state().await;

    let delete = table.config("on_publish = \"delete\"", "postgres");
    let out = walrelay(&delete, &["replay", "--where", "true", "--yes"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("poll.on_publish = \"mark\""),
        "{}",
        stderr(&out)
    );

    let wal = table
        .config("", "postgres")
        .replace("kind = \"poll\"", "kind = \"wal\"");
    let out = walrelay(&wal, &["replay", "--where", "true", "--yes"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("needs source.kind = \"poll\""),
        "{}",
        stderr(&out)
    );

    assert_eq!(
        table.state().await,
        before,
        "a refused replay changed the table"
    );
    table.drop().await;
}
