//! The WAL source's families (`postgres::wal`, with `txn`'s assembly
//! counts): transactions relayed and changes not relayed, the stream's
//! positions, the work in flight behind it, the pgoutput session and its
//! streamed transactions and spill files. The slot's own health is
//! `lag.rs`'s.
//!
//! Declarations for `declare_metrics!` (`metrics/declare.rs`), which
//! reads them in `metrics.rs`.

macro_rules! wal_metrics {
    ($($chain:tt)*) => {
        declare_metrics! { @append [
            /// Transactions committed that carried at least one message (`walrelay_transactions_total`).
            TRANSACTIONS transactions: Counter {
                name: "walrelay_transactions",
                help: "Source transactions relayed",
            }
            /// Outbox changes not relayed, by reason (`walrelay_events_filtered_total`).
            EVENTS_FILTERED filtered: Family<ReasonLabel, Counter> {
                name: "walrelay_events_filtered",
                help: "Outbox changes and logical decoding messages not relayed, by reason",
            }
            /// Highest WAL position received from the server, bytes.
            RECEIVED_LSN received_lsn: Gauge {
                name: "walrelay_received_lsn_bytes",
                help: "Highest WAL position received from the server",
            }
            /// Position confirmed to the server (the slot's confirmed_flush_lsn), bytes.
            CONFIRMED_LSN confirmed_lsn: Gauge {
                name: "walrelay_confirmed_lsn_bytes",
                help: "WAL position confirmed to the server as flushed",
            }
            /// Events handed to Kafka and not yet acknowledged.
            EVENTS_IN_FLIGHT in_flight: Gauge {
                name: "walrelay_events_in_flight",
                help: "Events handed to Kafka and not yet acknowledged",
            }
            /// Age of the oldest unacknowledged event's commit, seconds.
            OLDEST_UNACKED_AGE oldest_unacked_age: FloatGauge {
                name: "walrelay_oldest_unacked_event_age_seconds",
                help: "Seconds since the commit of the oldest unacknowledged event",
            }
            /// The pgoutput protocol version of the current replication session (1, 2
            /// or 4); 0 before the first session starts.
            PGOUTPUT_PROTO_VERSION proto_version: Gauge {
                name: "walrelay_pgoutput_proto_version",
                help: "pgoutput protocol version of the current replication session (1, 2 or 4)",
            }
            /// Streamed (protocol version 2) transactions committed and read back
            /// (`walrelay_streamed_transactions_total`).
            STREAMED_TRANSACTIONS streamed_transactions: Counter {
                name: "walrelay_streamed_transactions",
                help: "Streamed (in-progress) transactions committed and relayed from their spill files",
            }
            /// Streamed transactions aborted as a whole (`walrelay_stream_aborts_total`).
            STREAM_ABORTS stream_aborts: Counter {
                name: "walrelay_stream_aborts",
                help: "Streamed transactions aborted as a whole; their spill files were dropped",
            }
            /// Subtransaction aborts that dropped streamed changes
            /// (`walrelay_subtransaction_aborts_total`).
            SUBTRANSACTION_ABORTS subxact_aborts: Counter {
                name: "walrelay_subtransaction_aborts",
                help: "Subtransactions of streamed transactions rolled back; their changes were dropped from the spill files",
            }
            /// The abort LSN the server sent in the last Stream Abort (protocol 4 with
            /// `streaming 'parallel'`, PostgreSQL 16+); 0 while none carried one.
            STREAM_ABORT_LSN stream_abort_lsn: Gauge {
                name: "walrelay_stream_abort_lsn_bytes",
                help: "Abort LSN sent in the last Stream Abort (protocol 4, PostgreSQL 16+); 0 while none carried one",
            }
            /// Bytes written to spill files of streamed transactions (`walrelay_spilled_bytes_total`).
            SPILLED_BYTES spilled_bytes: Counter {
                name: "walrelay_spilled_bytes",
                help: "Bytes written to spill files of streamed transactions",
            }
            /// Bytes in spill files right now.
            SPILL_BYTES spill_bytes: Gauge {
                name: "walrelay_spill_bytes",
                help: "Bytes in spill files of streamed transactions right now",
            }
        ] $($chain)* }
    };
}
