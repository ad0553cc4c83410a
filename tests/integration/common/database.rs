//! A database of one test on the shared cluster, for settings that must
//! touch no other test (`ALTER DATABASE ... SET logical_decoding_work_mem`)
//! or a stream nothing else writes into (logical decoding messages of every
//! prefix), and the slot statistics such tests read.
//!
//! It never changes the shared cluster's own settings.

use std::time::{Duration, Instant};

use super::relay::WAIT;
use super::{connect, connect_url, env, unique_name};

/// A database created for one test; [`TestDb::drop`] removes it.
pub(crate) struct TestDb {
    /// Its name (unique, `[a-z0-9_]`).
    pub name: String,
}

impl TestDb {
    /// Creates a database named after `test` with `settings`
    /// (`key = 'value'`, each an `ALTER DATABASE ... SET`) and connects
    /// to it.
    pub(crate) async fn new(test: &str, settings: &[&str]) -> (TestDb, tokio_postgres::Client) {
        let name = unique_name(test);
        let admin = connect().await;
        // One statement each: CREATE DATABASE refuses to run inside the
        // implicit transaction of a multi-statement string.
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create test database");
        for setting in settings {
            admin
                .batch_execute(&format!("ALTER DATABASE {name} SET {setting}"))
                .await
                .unwrap_or_else(|e| panic!("ALTER DATABASE {name} SET {setting}: {e}"));
        }
        let db = TestDb { name };
        let client = connect_url(&db.url()).await;
        (db, client)
    }

    /// libpq connection string of the database, as superuser.
    pub(crate) fn url(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname={}",
            env().pg_port,
            self.name
        )
    }

    /// Drops the database, closing any connection still open to it.
    pub(crate) async fn drop(self) {
        connect()
            .await
            .batch_execute(&format!("DROP DATABASE {} WITH (FORCE)", self.name))
            .await
            .expect("drop test database");
    }
}

/// A counter of `slot` in `pg_stat_replication_slots` (`stream_txns`,
/// `spill_txns`, ...); 0 before the slot has any.
pub(crate) async fn slot_stat(client: &tokio_postgres::Client, slot: &str, column: &str) -> i64 {
    // Inside an open transaction statistics are read once and cached
    // (stats_fetch_consistency = cache): drop the snapshot so each call
    // sees the current count.
    client
        .batch_execute("SELECT pg_stat_clear_snapshot()")
        .await
        .expect("clear the statistics snapshot");
    client
        .query_opt(
            &format!("SELECT {column} FROM pg_stat_replication_slots WHERE slot_name = $1"),
            &[&slot],
        )
        .await
        .expect("read slot statistics")
        .map(|r| r.get::<_, i64>(0))
        .unwrap_or(0)
}

/// Waits (bounded) until `slot`'s counter `column` reaches `at_least`.
/// A walsender publishes its statistics at most once a second and only
/// while it has work, so each round gives it some: a non-transactional
/// logical decoding message with prefix `poke` (which no test selects).
pub(crate) async fn wait_slot_stat(
    client: &tokio_postgres::Client,
    slot: &str,
    column: &str,
    at_least: i64,
    poke: &str,
) {
    let deadline = Instant::now() + WAIT;
    loop {
        let n = slot_stat(client, slot, column).await;
        if n >= at_least {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "slot {slot} shows {column} = {n}, expected at least {at_least}: \
             logical_decoding_work_mem of the test database not in effect?"
        );
        client
            .execute(
                "SELECT pg_logical_emit_message(false, $1::text, 'poke'::text)",
                &[&poke],
            )
            .await
            .expect("poke the walsender");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
