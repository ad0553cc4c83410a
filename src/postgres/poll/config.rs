//! The polling source's settings: `[source]` (which source a pipeline reads)
//! and `[poll]` (the published marker, the order, batches, the wake-ups, the
//! shards and their locks, retention).
//!
//! Owns the defaults and the `validate()` of these two sections. It never
//! connects; what only the database can tell (that a column exists, that it
//! has the right type) is `walrelay check`'s and the session's to find out.

use serde::Deserialize;

use crate::postgres::replication::quote_ident;
use crate::setting::SettingError;

/// Default of `poll.published_column`.
pub(crate) const DEFAULT_PUBLISHED_COLUMN: &str = "published_at";
/// Default of `poll.batch_size`.
pub(crate) const DEFAULT_BATCH_SIZE: u32 = 1000;
/// Largest `poll.batch_size`: one claim is one statement and one Kafka
/// hand-off; past this a batch only holds row locks longer.
pub(crate) const MAX_BATCH_SIZE: u32 = 50_000;
/// Default of `poll.interval_ms`.
pub(crate) const DEFAULT_INTERVAL_MS: u64 = 500;
/// Default of `poll.shards`.
pub(crate) const DEFAULT_SHARDS: u32 = 1;
/// Largest `poll.shards` (each shard is one connection and one lock).
pub(crate) const MAX_SHARDS: u32 = 64;
/// Default of `poll.lock_retry_ms`.
pub(crate) const DEFAULT_LOCK_RETRY_MS: u64 = 1000;
/// Default of `poll.ack_timeout_ms`.
pub(crate) const DEFAULT_ACK_TIMEOUT_MS: u64 = 60_000;
/// Default of `poll.retention_interval_ms`.
pub(crate) const DEFAULT_RETENTION_INTERVAL_MS: u64 = 60_000;
/// Default of `poll.retention_batch`.
pub(crate) const DEFAULT_RETENTION_BATCH: u32 = 5_000;
/// Default of `poll.stats_interval_ms`.
pub(crate) const DEFAULT_STATS_INTERVAL_MS: u64 = 5_000;

/// Which source a pipeline reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum SourceKind {
    /// A logical replication slot (`pgoutput`).
    #[default]
    Wal,
    /// Polling the outbox table for unpublished rows (`[poll]`).
    Poll,
}

impl SourceKind {
    /// The value as the TOML spells it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SourceKind::Wal => "wal",
            SourceKind::Poll => "poll",
        }
    }
}

/// `[source]`: which source a pipeline reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SourceConfig {
    /// `wal` (the default) or `poll`.
    #[serde(default)]
    pub(crate) kind: SourceKind,
}

/// What happens to a row once Kafka acknowledged it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum OnPublish {
    /// Set `poll.published_column` to the time of the mark.
    #[default]
    Mark,
    /// Delete the row.
    Delete,
}

/// `[poll]`: the polling publisher.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PollConfig {
    /// `mark` (set the published column) or `delete` (delete the row).
    #[serde(default)]
    pub(crate) on_publish: OnPublish,
    /// The published marker: a nullable `timestamptz` column, NULL while the
    /// row is unpublished. Unused with `on_publish = "delete"`.
    #[serde(default = "default_published_column")]
    pub(crate) published_column: String,
    /// The column(s) that order rows as they were inserted (a sequence, or
    /// time-ordered ids); required. Rows are claimed in this order.
    #[serde(default)]
    pub(crate) order_by: Vec<String>,
    /// Rows claimed per batch.
    #[serde(default = "default_batch_size")]
    pub(crate) batch_size: u32,
    /// Milliseconds between polls while no notification arrives (and the
    /// last batch was not full).
    #[serde(default = "default_interval_ms")]
    pub(crate) interval_ms: u64,
    /// A `LISTEN` channel that a trigger notifies on insert
    /// (`deploy/postgresql/outbox_notify.sql`); empty: interval polling only.
    #[serde(default)]
    pub(crate) listen_channel: String,
    /// Shards, each with its own advisory lock and its own claims, by
    /// `hashtext(shard_column) % shards`. 1: one active publisher.
    #[serde(default = "default_shards")]
    pub(crate) shards: u32,
    /// The column rows are sharded by; empty: the router's event key
    /// column (`router.table_field_event_key`), so one aggregate stays in
    /// one shard.
    #[serde(default)]
    pub(crate) shard_column: String,
    /// The name the advisory locks are derived from; empty: the outbox
    /// table's qualified name. Instances with the same name and table are
    /// one publisher group.
    #[serde(default)]
    pub(crate) lock_name: String,
    /// Milliseconds between attempts to take a free shard's lock (a hot
    /// standby's take-over delay).
    #[serde(default = "default_lock_retry_ms")]
    pub(crate) lock_retry_ms: u64,
    /// Milliseconds a claimed batch may wait for Kafka's acknowledgements
    /// before its transaction is rolled back (so a Kafka outage does not
    /// hold row locks and the database's xmin horizon); the batch is claimed
    /// again once the producer has settled, and waits twice as long (up to
    /// 16 times this), back to this once a batch is acknowledged in time.
    #[serde(default = "default_ack_timeout_ms")]
    pub(crate) ack_timeout_ms: u64,
    /// A `timestamptz` column with the row's creation time, for the age of
    /// the oldest unpublished row; empty: its transaction's commit time when
    /// the server has `track_commit_timestamp = on`, otherwise the age is
    /// measured from when walrelay first saw that row unpublished.
    #[serde(default)]
    pub(crate) created_column: String,
    /// Delete published rows whose published time is older than this many
    /// seconds; 0: never (mark mode only).
    #[serde(default)]
    pub(crate) retention_seconds: u64,
    /// Milliseconds between retention passes.
    #[serde(default = "default_retention_interval_ms")]
    pub(crate) retention_interval_ms: u64,
    /// Rows deleted per retention statement.
    #[serde(default = "default_retention_batch")]
    pub(crate) retention_batch: u32,
    /// Milliseconds between reads of the unpublished count and age.
    #[serde(default = "default_stats_interval_ms")]
    pub(crate) stats_interval_ms: u64,
}

impl Default for PollConfig {
    fn default() -> Self {
        PollConfig {
            on_publish: OnPublish::default(),
            published_column: default_published_column(),
            order_by: Vec::new(),
            batch_size: DEFAULT_BATCH_SIZE,
            interval_ms: DEFAULT_INTERVAL_MS,
            listen_channel: String::new(),
            shards: DEFAULT_SHARDS,
            shard_column: String::new(),
            lock_name: String::new(),
            lock_retry_ms: DEFAULT_LOCK_RETRY_MS,
            ack_timeout_ms: DEFAULT_ACK_TIMEOUT_MS,
            created_column: String::new(),
            retention_seconds: 0,
            retention_interval_ms: DEFAULT_RETENTION_INTERVAL_MS,
            retention_batch: DEFAULT_RETENTION_BATCH,
            stats_interval_ms: DEFAULT_STATS_INTERVAL_MS,
        }
    }
}

impl PollConfig {
    /// Checks the section when the poll source is selected; names the key.
    pub(crate) fn validate(&self) -> Result<(), SettingError> {
        if self.order_by.is_empty() {
            return Err(SettingError::Missing {
                key: "poll.order_by".into(),
                reason: "the polling source claims rows in the order of these columns; name \
                         a column that follows insertion order (a bigserial / identity column, \
                         or time-ordered ids)"
                    .into(),
            });
        }
        for (i, c) in self.order_by.iter().enumerate() {
            column_name(&format!("poll.order_by[{i}]"), c)?;
        }
        if self.on_publish == OnPublish::Mark {
            column_name("poll.published_column", &self.published_column)?;
            if self.order_by.contains(&self.published_column) {
                return Err(SettingError::invalid(
                    "poll.order_by",
                    format!(
                        "{} is the published marker (poll.published_column); it cannot order rows",
                        self.published_column
                    ),
                ));
            }
        }
        if !self.shard_column.is_empty() {
            column_name("poll.shard_column", &self.shard_column)?;
        }
        if !self.created_column.is_empty() {
            column_name("poll.created_column", &self.created_column)?;
        }
        if !(1..=MAX_BATCH_SIZE).contains(&self.batch_size) {
            return Err(SettingError::invalid(
                "poll.batch_size",
                format!("must be between 1 and {MAX_BATCH_SIZE}"),
            ));
        }
        if !(1..=3_600_000).contains(&self.interval_ms) {
            return Err(SettingError::invalid(
                "poll.interval_ms",
                "must be between 1 and 3600000",
            ));
        }
        if !(1..=MAX_SHARDS).contains(&self.shards) {
            return Err(SettingError::invalid(
                "poll.shards",
                format!("must be between 1 and {MAX_SHARDS}"),
            ));
        }
        if !self.listen_channel.is_empty() && self.listen_channel.len() > 63 {
            return Err(SettingError::invalid(
                "poll.listen_channel",
                "a channel name has at most 63 bytes",
            ));
        }
        if self.lock_retry_ms == 0 {
            return Err(SettingError::invalid(
                "poll.lock_retry_ms",
                "must be at least 1",
            ));
        }
        if self.ack_timeout_ms < 1000 {
            return Err(SettingError::invalid(
                "poll.ack_timeout_ms",
                "must be at least 1000: below that a healthy broker's acknowledgements \
                 time out and every batch is published twice",
            ));
        }
        if self.retention_seconds > 0 && self.on_publish == OnPublish::Delete {
            return Err(SettingError::invalid(
                "poll.retention_seconds",
                "with poll.on_publish = \"delete\" no published row stays behind to expire",
            ));
        }
        if self.retention_batch == 0 {
            return Err(SettingError::invalid(
                "poll.retention_batch",
                "must be at least 1",
            ));
        }
        if self.retention_interval_ms == 0 || self.stats_interval_ms == 0 {
            let key = if self.retention_interval_ms == 0 {
                "poll.retention_interval_ms"
            } else {
                "poll.stats_interval_ms"
            };
            return Err(SettingError::invalid(key, "must be at least 1"));
        }
        Ok(())
    }

    /// Every column a `[poll]` key names, with the key, for the session and
    /// `walrelay check` to find in the table: the order columns, the
    /// published column (mark mode), the shard column `shard_column` (with
    /// several shards) and the created column (when set).
    pub(crate) fn named_columns<'a>(&'a self, shard_column: &'a str) -> Vec<(String, &'a str)> {
        let mut named: Vec<(String, &str)> = self
            .order_by
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("poll.order_by[{i}]"), c.as_str()))
            .collect();
        if self.on_publish == OnPublish::Mark {
            named.push((
                "poll.published_column".to_owned(),
                self.published_column.as_str(),
            ));
        }
        if self.shards > 1 {
            let key = if self.shard_column.is_empty() {
                "poll.shard_column (unset: router.key_field)"
            } else {
                "poll.shard_column"
            };
            named.push((key.to_owned(), shard_column));
        }
        if !self.created_column.is_empty() {
            named.push((
                "poll.created_column".to_owned(),
                self.created_column.as_str(),
            ));
        }
        named
    }

    /// The shard column, or `event_key` (the router's key column) when unset.
    pub(crate) fn shard_column_or<'a>(&'a self, event_key: &'a str) -> &'a str {
        if self.shard_column.is_empty() {
            event_key
        } else {
            &self.shard_column
        }
    }
}

/// A column name: not empty, no NUL, at most 63 bytes. It is always quoted
/// as an identifier, so any other character is fine.
fn column_name(key: &str, name: &str) -> Result<(), SettingError> {
    if name.is_empty() {
        return Err(SettingError::invalid(key, "a column name cannot be empty"));
    }
    if name.len() > 63 || name.contains('\0') {
        return Err(SettingError::invalid(
            key,
            format!(
                "{} is not a PostgreSQL column name (at most 63 bytes, no NUL)",
                quote_ident(name)
            ),
        ));
    }
    Ok(())
}

fn default_published_column() -> String {
    DEFAULT_PUBLISHED_COLUMN.to_owned()
}
fn default_batch_size() -> u32 {
    DEFAULT_BATCH_SIZE
}
fn default_interval_ms() -> u64 {
    DEFAULT_INTERVAL_MS
}
fn default_shards() -> u32 {
    DEFAULT_SHARDS
}
fn default_lock_retry_ms() -> u64 {
    DEFAULT_LOCK_RETRY_MS
}
fn default_ack_timeout_ms() -> u64 {
    DEFAULT_ACK_TIMEOUT_MS
}
fn default_retention_interval_ms() -> u64 {
    DEFAULT_RETENTION_INTERVAL_MS
}
fn default_retention_batch() -> u32 {
    DEFAULT_RETENTION_BATCH
}
fn default_stats_interval_ms() -> u64 {
    DEFAULT_STATS_INTERVAL_MS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_order() -> PollConfig {
        PollConfig {
            order_by: vec!["seq".into()],
            ..PollConfig::default()
        }
    }

    #[test]
    fn order_by_is_required_and_named() {
        let err = PollConfig::default().validate().unwrap_err();
        assert!(err.to_string().contains("poll.order_by"), "{err}");
        with_order().validate().unwrap();
    }

    #[test]
    fn bad_values_are_named() {
        let cases: Vec<(PollConfig, &str)> = vec![
            (
                PollConfig {
                    batch_size: 0,
                    ..with_order()
                },
                "poll.batch_size",
            ),
            (
                PollConfig {
                    shards: 0,
                    ..with_order()
                },
                "poll.shards",
            ),
            (
                PollConfig {
                    ack_timeout_ms: 10,
                    ..with_order()
                },
                "poll.ack_timeout_ms",
            ),
            (
                PollConfig {
                    on_publish: OnPublish::Delete,
                    retention_seconds: 60,
                    ..with_order()
                },
                "poll.retention_seconds",
            ),
            (
                PollConfig {
                    order_by: vec!["published_at".into()],
                    ..PollConfig::default()
                },
                "poll.order_by",
            ),
            (
                PollConfig {
                    published_column: String::new(),
                    ..with_order()
                },
                "poll.published_column",
            ),
            (
                PollConfig {
                    listen_channel: "x".repeat(64),
                    ..with_order()
                },
                "poll.listen_channel",
            ),
        ];
        for (config, key) in cases {
            let err = config.validate().unwrap_err();
            assert!(err.to_string().contains(key), "{key}: {err}");
        }
    }

    #[test]
    fn shard_column_defaults_to_the_event_key() {
        let c = with_order();
        assert_eq!(c.shard_column_or("aggregateid"), "aggregateid");
        let c = PollConfig {
            shard_column: "tenant".into(),
            ..with_order()
        };
        assert_eq!(c.shard_column_or("aggregateid"), "tenant");
    }
}
