//! The offsets API (KIP-875) as it applies to walrelay's PostgreSQL
//! connector: its position is the replication slot's
//! `confirmed_flush_lsn`, so `GET` reads it and `PATCH` moves the slot
//! forward (`pg_replication_slot_advance`: the events before it are skipped,
//! which is what an operator altering an offset asks for); a slot never
//! moves back.
//!
//! Owns the two SQL statements; the checks of the request are the
//! herder's.

use super::api::ApiError;
use crate::chain::DisplayChain;
use crate::config::Config;
use crate::postgres::catalog;
use crate::postgres::replication::ConnectParams;

/// A database error, as the API's 500.
fn failed(what: &str, e: &(dyn std::error::Error + 'static)) -> ApiError {
    ApiError::new(500, format!("{what}: {}", DisplayChain(e)))
}

/// The slot's `confirmed_flush_lsn`; `None` when the slot does not exist
/// yet.
pub(crate) async fn position(config: &Config, slot: &str) -> Result<Option<u64>, ApiError> {
    let client = catalog::connect(&ConnectParams::from_config(&config.postgres))
        .await
        .map_err(|e| failed("cannot connect to PostgreSQL", &e))?;
    let state = catalog::slot_state(&client, slot)
        .await
        .map_err(|e| failed("cannot read the replication slot", &e))?;
    Ok(state.and_then(|s| s.confirmed_flush_lsn).map(u64::from))
}

/// Moves the slot to `lsn`: refused when it is behind the slot or the
/// slot is in use.
pub(crate) async fn advance(config: &Config, slot: &str, lsn: u64) -> Result<(), ApiError> {
    let client = catalog::connect(&ConnectParams::from_config(&config.postgres))
        .await
        .map_err(|e| failed("cannot connect to PostgreSQL", &e))?;
    let state = catalog::slot_state(&client, slot)
        .await
        .map_err(|e| failed("cannot read the replication slot", &e))?
        .ok_or_else(|| {
            ApiError::new(
                400,
                format!(
                    "replication slot {slot} does not exist yet: there is no position to alter"
                ),
            )
        })?;
    if state.active {
        return Err(ApiError::new(
            409,
            format!(
                "replication slot {slot} is in use (pid {:?}): stop whatever reads it first",
                state.active_pid
            ),
        ));
    }
    let confirmed = state.confirmed_flush_lsn.map(u64::from).unwrap_or(0);
    if lsn < confirmed {
        return Err(ApiError::new(
            400,
            format!(
                "lsn {lsn} is before replication slot {slot}'s confirmed_flush_lsn {confirmed}: a slot never moves back"
            ),
        ));
    }
    if lsn == confirmed {
        return Ok(());
    }
    let text = walrelay_proto::Lsn::from(lsn).to_string();
    client
        .execute(
            "SELECT pg_replication_slot_advance($1, $2::text::pg_lsn)",
            &[&slot, &text],
        )
        .await
        .map_err(|e| failed("cannot advance the replication slot", &e))?;
    Ok(())
}
