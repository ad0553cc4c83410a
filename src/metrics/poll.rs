//! The polling source's families (`postgres::poll`): the backlog and its
//! oldest row, rows published, claims and their latency, errors, shard
//! locks, retention and `LISTEN` notifications.
//!
//! Declarations for `declare_metrics!` (`metrics/declare.rs`), which
//! reads them in `metrics.rs`.

macro_rules! poll_metrics {
    ($($chain:tt)*) => {
        declare_metrics! { @append [
            /// Unpublished rows in the outbox table (polling source).
            POLL_UNPUBLISHED poll_unpublished: Gauge {
                name: "walrelay_poll_unpublished_rows",
                help: "Unpublished rows in the outbox table (polling source; read every poll.stats_interval_ms)",
            }
            /// Age of the oldest unpublished row (polling source).
            POLL_OLDEST_UNPUBLISHED_AGE poll_oldest_unpublished_age: FloatGauge {
                name: "walrelay_poll_oldest_unpublished_age_seconds",
                help: "Seconds the oldest unpublished row has waited (polling source; from poll.created_column, or since walrelay first saw it)",
            }
            /// Rows published and marked (or deleted) by the polling source.
            POLL_PUBLISHED poll_published: Counter {
                name: "walrelay_poll_published_rows",
                help: "Rows acknowledged by Kafka and marked published (or deleted) by the polling source",
            }
            /// Claimed batches, by result.
            POLL_BATCHES poll_batches: Family<ResultLabel, Counter> {
                name: "walrelay_poll_batches",
                help: "Claims of the polling source, by result (published, empty, rolled_back)",
            }
            /// Seconds a claim statement took.
            POLL_CLAIM poll_claim: Histogram {
                name: "walrelay_poll_claim_seconds",
                help: "Seconds a claim (BEGIN and SELECT ... FOR UPDATE SKIP LOCKED) took",
                // 0.1 ms .. ~6.5 s
                buckets: exponential_buckets(0.0001, 2.0, 17),
            }
            /// Seconds the mark (or delete) and commit took.
            POLL_MARK poll_mark: Histogram {
                name: "walrelay_poll_mark_seconds",
                help: "Seconds the mark (or delete) and commit of an acknowledged batch took",
                // 0.1 ms .. ~6.5 s
                buckets: exponential_buckets(0.0001, 2.0, 17),
            }
            /// Errors of the polling source, by kind.
            POLL_ERRORS poll_errors: Family<KindLabel, Counter> {
                name: "walrelay_poll_errors",
                help: "Errors of the polling source, by kind",
            }
            /// Shard locks this process holds (0 on a hot standby).
            POLL_SHARDS_HELD poll_shards_held: Gauge {
                name: "walrelay_poll_shards_held",
                help: "Shard locks this process holds (0 while a hot standby)",
            }
            /// Published rows deleted by retention.
            POLL_RETENTION_DELETED poll_retention_deleted: Counter {
                name: "walrelay_poll_retention_deleted_rows",
                help: "Published rows deleted by poll.retention_seconds",
            }
            /// LISTEN notifications received.
            POLL_NOTIFICATIONS poll_notifications: Counter {
                name: "walrelay_poll_notifications",
                help: "LISTEN notifications received on poll.listen_channel",
            }
        ] $($chain)* }
    };
}
