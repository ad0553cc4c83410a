//! The slot lag monitor's families (`lag`): the WAL the slot keeps on the
//! primary, its state, the alert levels of `[lag]`, and the replication
//! lag (also set by the WAL source with each status update).
//!
//! Declarations for `declare_metrics!` (`metrics/declare.rs`), which
//! reads them in `metrics.rs`.

macro_rules! lag_metrics {
    ($($chain:tt)*) => {
        declare_metrics! { @append [
            /// `pg_current_wal_lsn() - restart_lsn`: WAL the slot keeps on the primary.
            SLOT_RETAINED_WAL slot_retained_wal: Gauge {
                name: "walrelay_slot_retained_wal_bytes",
                help: "WAL retained by the slot: pg_current_wal_lsn() - restart_lsn",
            }
            /// `pg_current_wal_lsn() - confirmed_flush_lsn`.
            SLOT_CONFIRMED_LAG slot_confirmed_lag: Gauge {
                name: "walrelay_slot_confirmed_lag_bytes",
                help: "pg_current_wal_lsn() - confirmed_flush_lsn of the slot",
            }
            /// `safe_wal_size` of the slot (bytes left before invalidation; absent when unlimited).
            SLOT_SAFE_WAL_SIZE slot_safe_wal_size: Gauge {
                name: "walrelay_slot_safe_wal_size_bytes",
                help: "Bytes of WAL that can still be written before the slot is invalidated",
            }
            /// `wal_status` of the slot: 1 for the current status label.
            SLOT_WAL_STATUS slot_wal_status: Family<StatusLabel, Gauge> {
                name: "walrelay_slot_wal_status",
                help: "wal_status of the slot (1 for the current status)",
            }
            /// Whether a walsender holds the slot.
            SLOT_ACTIVE slot_active: Gauge {
                name: "walrelay_slot_active",
                help: "Whether a walsender holds the slot",
            }
            /// Lag alert level by kind (`retained_wal`, `lag_seconds`): 0 ok, 1 warning, 2 critical.
            SLOT_ALERT_LEVEL slot_alert_level: Family<KindLabel, Gauge> {
                name: "walrelay_slot_alert_level",
                help: "Lag alert level: 0 ok, 1 warning, 2 critical",
            }
            /// Now minus the commit time of the oldest unconfirmed event; 0 when caught up.
            REPLICATION_LAG replication_lag: FloatGauge {
                name: "walrelay_replication_lag_seconds",
                help: "Seconds since the commit of the oldest unconfirmed event, 0 when caught up",
            }
        ] $($chain)* }
    };
}
