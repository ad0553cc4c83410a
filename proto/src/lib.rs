//! Sans-IO PostgreSQL logical replication protocol.
//!
//! Owns the byte-level formats walrelay reads and writes on a replication
//! connection: LSNs, the CopyBoth frames (`w` XLogData, `k` primary
//! keepalive, `r` standby status update) and the `pgoutput` logical
//! replication messages of protocol versions 1 to 4, with their tuple data.
//! It never performs I/O, never allocates per column value (values are
//! zero-copy slices of the input `Bytes`) and never panics on input: every
//! malformed frame gives a typed [`DecodeError`] naming what was expected and
//! at which offset.

mod error;
pub mod frame;
mod lsn;
pub mod pgoutput;
mod relation;
mod wire;

pub use error::DecodeError;
pub use lsn::{Lsn, ParseLsnError};
pub use relation::{RelationCache, RelationColumnInfo, RelationInfo};

/// Microseconds between the Unix epoch and PostgreSQL's epoch (2000-01-01).
pub const PG_EPOCH_OFFSET_MICROS: i64 = 946_684_800_000_000;

/// Converts a PostgreSQL timestamp (µs since 2000-01-01 UTC) to µs since the
/// Unix epoch.
pub fn pg_micros_to_unix_micros(pg: i64) -> i64 {
    pg.saturating_add(PG_EPOCH_OFFSET_MICROS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pg_epoch_conversion() {
        assert_eq!(pg_micros_to_unix_micros(0), 946_684_800_000_000);
        assert_eq!(pg_micros_to_unix_micros(-PG_EPOCH_OFFSET_MICROS), 0);
        assert_eq!(pg_micros_to_unix_micros(i64::MAX), i64::MAX);
    }
}
