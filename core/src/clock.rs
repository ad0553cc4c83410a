//! Wall clocks in the units walrelay's progress uses: microseconds since the
//! Unix epoch (commit times in the tracker and the metrics) and since
//! PostgreSQL's epoch (status updates).
//!
//! Owns only the conversions. It must never be used to order events: order
//! comes from LSNs and the tracker's sequence numbers, never from a clock.

use std::time::{SystemTime, UNIX_EPOCH};

use walrelay_proto::PG_EPOCH_OFFSET_MICROS;

/// Now as microseconds since the Unix epoch (the unit of commit times in
/// the tracker and the metrics).
pub fn unix_now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or_default()
}

/// Now as PostgreSQL microseconds since 2000-01-01.
pub fn pg_now_micros() -> i64 {
    unix_now_micros() - PG_EPOCH_OFFSET_MICROS
}
