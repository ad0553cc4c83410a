//! The report model of `walrelay check`: the name of every row, a row
//! (status, what was found, how to fix it) and the report that collects
//! them in the order they are shown. The check modules add rows through the
//! `pass`/`warn`/`fail`/`skip` methods; `render` turns the report into
//! the table. It must never run a check, read a server or format the
//! table: it only holds what the checks found.

/// Row: an ordinary SQL connection with the configured credentials.
pub const POSTGRES_CONNECTION: &str = "postgres connection";
/// Row: with several hosts in `postgres.host`, what each one is.
pub const POSTGRES_HOSTS: &str = "postgres hosts";
/// Row: a replication connection and `IDENTIFY_SYSTEM`.
pub const REPLICATION_CONNECTION: &str = "replication connection";
/// Row: PostgreSQL 14 or later, and the pgoutput protocol walrelay will use.
pub const SERVER_VERSION: &str = "server version";
/// Row: the pgoutput output plugin is installed.
pub const OUTPUT_PLUGIN: &str = "output plugin";
/// Row: `wal_level = logical`.
pub const WAL_LEVEL: &str = "wal_level";
/// Row: the role's REPLICATION attribute.
pub const ROLE: &str = "role attributes";
/// Row: a free replication slot (or ours already exists).
pub const SLOT_CAPACITY: &str = "replication slots";
/// Row: a free WAL sender.
pub const WAL_SENDERS: &str = "wal senders";
/// Row: `max_slot_wal_keep_size`.
pub const MAX_SLOT_WAL_KEEP_SIZE: &str = "max_slot_wal_keep_size";
/// Row: an outbox table and the columns the router reads (one per table,
/// its detail naming the table).
pub const OUTBOX_TABLE: &str = "outbox table";
/// Row: SELECT on an outbox table, and ownership when walrelay creates the
/// publication (one per table); with the polling source, the privileges its statements
/// need (SELECT, UPDATE, and DELETE when rows are deleted).
pub const OUTBOX_PRIVILEGES: &str = "outbox privileges";
/// Row: the publication.
pub const PUBLICATION: &str = "publication";
/// Row: the operations an existing publication publishes, with a
/// suggestion when it sends deletes or truncates a table outbox drops.
pub const PUBLISHED_OPERATIONS: &str = "published operations";
/// Row: which logical decoding messages are events, and what that implies.
pub const MESSAGES: &str = "logical decoding messages";
/// Row: the replication slot.
pub const SLOT: &str = "replication slot";
/// Row: the slot as a failover slot (with `replication.failover`, or when
/// the slot is one).
pub const FAILOVER_SLOT: &str = "failover slot";
/// Row: the primary's `synchronized_standby_slots` (with a failover slot).
pub const STANDBY_SLOTS: &str = "synchronized_standby_slots";
/// Row: a standby that synchronizes slots (with a failover slot).
pub const SLOT_SYNC: &str = "slot sync standby";
/// Row: a Kafka metadata request.
pub const KAFKA_CONNECTION: &str = "kafka connection";
/// Row: a broker other than Kafka answers (`sink.type`), with what it is.
pub const BROKER_CONNECTION: &str = "broker connection";
/// Row: the broker will store what the router publishes (NATS: a stream
/// captures each subject; Redis: no key of another type holds a stream's
/// name).
pub const BROKER_DESTINATIONS: &str = "broker destinations";
/// Row: the topics the router would produce to.
pub const KAFKA_TOPICS: &str = "kafka topics";
/// Row: exactly-once mode (with `kafka.exactly_once`): transactional id
/// and pipeline.
pub const EXACTLY_ONCE: &str = "exactly-once";
/// Row: the progress topic (with `kafka.exactly_once`): compacted, or
/// missing and created at start.
pub const PROGRESS_TOPIC: &str = "progress topic";
/// Row (polling source): the server takes the polling source's writes; no
/// replication slot, publication or `wal_level = logical` is needed.
pub const POLL_SOURCE: &str = "polling source";
/// Row (polling source): every column a `[poll]` key names exists.
pub const POLL_COLUMNS: &str = "poll columns";
/// Row (polling source): the published marker is a nullable time without a
/// default (mark mode), or there is none (delete mode).
pub const PUBLISHED_COLUMN: &str = "published column";
/// Row (polling source, with `poll.created_column`): a time.
pub const CREATED_COLUMN: &str = "created column";
/// Row (polling source): whether `poll.order_by` follows insertion order.
pub const CLAIM_ORDER: &str = "claim order";
/// Row (polling source): an index that serves the claim.
pub const CLAIM_INDEX: &str = "claim index";
/// Row (polling source): who holds each shard's lock now (read, never taken).
pub const SHARD_LOCKS: &str = "shard locks";

/// Row: the metrics listener, warned about when it is bound beyond
/// loopback without TLS or without authentication.
pub const METRICS_LISTENER: &str = "metrics listener";

/// Outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CheckStatus {
    /// Fine.
    Pass,
    /// Works, but deserves attention.
    Warn,
    /// walrelay would not start or would stop.
    Fail,
    /// Not run because an earlier check failed.
    Skip,
}

/// One row of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckRow {
    /// What was checked (one of the row constants of this module).
    pub name: &'static str,
    /// Pass, warn, fail or skip; one `Fail` fails the whole report
    /// ([`CheckReport::passed`]).
    pub status: CheckStatus,
    /// What was found.
    pub detail: String,
    /// How to fix it; set for every failure and for most warnings.
    pub fix: Option<String>,
}

/// Every row of one `walrelay check` run, in the order they are shown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// One row per check, in the order they ran.
    pub rows: Vec<CheckRow>,
}

impl CheckReport {
    /// Whether no check failed (warnings and skips after no failure pass).
    pub fn passed(&self) -> bool {
        self.rows.iter().all(|r| r.status != CheckStatus::Fail)
    }

    /// The row called `name`, if it was produced.
    pub fn row(&self, name: &str) -> Option<&CheckRow> {
        self.rows.iter().find(|r| r.name == name)
    }

    /// The failed rows.
    pub fn failures(&self) -> impl Iterator<Item = &CheckRow> {
        self.rows.iter().filter(|r| r.status == CheckStatus::Fail)
    }

    fn push(&mut self, name: &'static str, status: CheckStatus, detail: impl Into<String>) {
        self.rows.push(CheckRow {
            name,
            status,
            detail: detail.into(),
            fix: None,
        });
    }

    pub(super) fn pass(&mut self, name: &'static str, detail: impl Into<String>) {
        self.push(name, CheckStatus::Pass, detail);
    }

    pub(super) fn warn(
        &mut self,
        name: &'static str,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) {
        self.push(name, CheckStatus::Warn, detail);
        self.set_fix(fix);
    }

    pub(super) fn fail(
        &mut self,
        name: &'static str,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) {
        self.push(name, CheckStatus::Fail, detail);
        self.set_fix(fix);
    }

    pub(super) fn skip(&mut self, name: &'static str, why: &str) {
        self.push(name, CheckStatus::Skip, format!("not checked: {why}"));
    }

    fn set_fix(&mut self, fix: impl Into<String>) {
        if let Some(last) = self.rows.last_mut() {
            last.fix = Some(fix.into());
        }
    }
}
