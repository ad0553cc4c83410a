//! The exactly-once sink's families (`sink::transactional`): the mode,
//! the Kafka transactions and their commits, fencing, and the progress
//! record committed with them.
//!
//! Declarations for `declare_metrics!` (`metrics/declare.rs`), which
//! reads them in `metrics.rs`.

macro_rules! exactly_once_metrics {
    ($($chain:tt)*) => {
        declare_metrics! { @append [
            /// 1 in exactly-once mode (`kafka.exactly_once = true`), 0 at-least-once.
            EXACTLY_ONCE exactly_once: Gauge {
                name: "walrelay_exactly_once",
                help: "1 in exactly-once mode (transactional producer), 0 at-least-once",
            }
            /// Kafka transactions ended, by result (`committed`, `aborted`)
            /// (`walrelay_kafka_transactions_total`).
            KAFKA_TRANSACTIONS kafka_transactions: Family<ResultLabel, Counter> {
                name: "walrelay_kafka_transactions",
                help: "Kafka transactions ended, by result (committed, aborted)",
            }
            /// Records (events, dead letters, heartbeats; the progress record not
            /// counted) per committed Kafka transaction.
            KAFKA_TRANSACTION_RECORDS kafka_transaction_records: Histogram {
                name: "walrelay_kafka_transaction_records",
                help: "Records per committed Kafka transaction (the progress record not counted)",
                // 1 .. ~1M records
                buckets: exponential_buckets(1.0, 4.0, 11),
            }
            /// Seconds a Kafka transaction's commit took (flush and EndTxn).
            KAFKA_TRANSACTION_COMMIT kafka_transaction_commit: Histogram {
                name: "walrelay_kafka_transaction_commit_seconds",
                help: "Seconds a Kafka transaction's commit took",
                // 0.5 ms .. ~65 s
                buckets: exponential_buckets(0.0005, 2.0, 18),
            }
            /// 1 once the producer was fenced by another instance with the same
            /// transactional id.
            PRODUCER_FENCED producer_fenced: Gauge {
                name: "walrelay_producer_fenced",
                help: "1 once another instance with the same transactional id fenced this producer",
            }
            /// The source position of the last committed progress record (the commit
            /// end LSN of the last whole source transaction in it), bytes.
            PROGRESS_COMMITTED_LSN progress_committed_lsn: Gauge {
                name: "walrelay_progress_committed_lsn_bytes",
                help: "Source position of the last committed progress record",
            }
            /// Events of a source transaction already committed when the last progress
            /// record was written inside it (a split large transaction); 0 otherwise.
            PROGRESS_COMMITTED_EVENTS progress_committed_events: Gauge {
                name: "walrelay_progress_committed_events",
                help: "Events of a split source transaction already committed at the last progress record; 0 at a transaction boundary",
            }
        ] $($chain)* }
    };
}
