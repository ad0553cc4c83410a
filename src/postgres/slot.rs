//! Slot policy: what walrelay does when the slot it reads is missing,
//! dropped, or to be dropped on stop.
//!
//! PostgreSQL keeps no trace of a dropped slot, and a new slot starts at the
//! current WAL position, silently skipping every event written since the
//! old one's confirmed position. So walrelay records in its publication's
//! comment that the slot existed, and by default refuses to recreate one
//! that did (`replication.slot_missing`). This module never creates a slot
//! itself and never drops one that a walsender still holds.
//!
//! It also decides about failover slots (`replication.failover`,
//! PostgreSQL 17+): a server without them is refused before anything is
//! created, never answered with a plain slot; an existing slot without
//! failover gets it turned on; an existing failover slot is never turned
//! off.

use std::time::Duration;

use tracing::{info, warn};

use super::catalog::capability::ServerFacts;
use super::catalog::{self, CatalogError, SlotState};
use super::config::{ReplicationConfig, SlotMissing};
use super::replication::{ReplicationConnection, ReplicationError};
use crate::chain::DisplayChain;

/// Refuses a server without failover slots when `replication.failover` is
/// on; run before anything is created, so that a refused start leaves no
/// slot (and no plain slot in place of a failover one).
pub(crate) fn require_failover_support(
    replication: &ReplicationConfig,
    server: &ServerFacts,
) -> Result<(), CatalogError> {
    if !replication.failover {
        return Ok(());
    }
    failover_supported(server.version_num, &server.version)
}

/// [`require_failover_support`]'s decision for a known server version.
pub(crate) fn failover_supported(version_num: u32, version: &str) -> Result<(), CatalogError> {
    if version_num >= catalog::FAILOVER_MIN_SERVER_VERSION {
        Ok(())
    } else {
        Err(CatalogError::FailoverUnsupported {
            version: version.to_owned(),
            version_num,
        })
    }
}

/// Refuses, for now, a slot that is a standby's synchronized copy
/// (`synced`, PostgreSQL 17+) while that server is still in recovery:
/// decoding from it fails until the promotion, so the session ends with a
/// transient error and is retried, instead of the server's error stopping
/// walrelay. On a promoted server `synced` may stay true; that copy is
/// used.
pub(crate) async fn usable_here(
    client: &tokio_postgres::Client,
    slot: &str,
    state: &SlotState,
) -> Result<(), CatalogError> {
    if state.synced != Some(true) || !catalog::in_recovery(client).await? {
        return Ok(());
    }
    Err(CatalogError::SyncedOnStandby {
        slot: slot.to_owned(),
    })
}

/// What to do about an existing slot's `failover` flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailoverAction {
    /// It already is what the setting asks for (or the setting is off and
    /// the slot plain, or the server predates failover slots).
    Keep,
    /// `replication.failover` is on and the slot is plain: turn it on.
    TurnOn,
    /// `replication.failover` is off and the slot is a failover slot: left
    /// as it is (someone made it so deliberately).
    LeaveOn,
}

/// The action for a slot whose `failover` column reads `current` (`None`
/// before PostgreSQL 17) when the setting is `wanted`.
pub(crate) fn failover_action(wanted: bool, current: Option<bool>) -> FailoverAction {
    match (wanted, current) {
        (true, Some(false)) => FailoverAction::TurnOn,
        (false, Some(true)) => FailoverAction::LeaveOn,
        _ => FailoverAction::Keep,
    }
}

/// Brings an existing slot's `failover` flag in line with
/// `replication.failover`: turns it on with `ALTER_REPLICATION_SLOT` when
/// asked and missing, and only logs when the slot is a failover slot that
/// the setting does not ask for.
pub(crate) async fn reconcile_failover(
    repl: &mut ReplicationConnection,
    slot: &str,
    state: &SlotState,
    wanted: bool,
) -> Result<(), ReplicationError> {
    match failover_action(wanted, state.failover) {
        FailoverAction::Keep => Ok(()),
        FailoverAction::TurnOn => {
            repl.set_slot_failover(slot, true).await?;
            info!(
                slot,
                "turned failover on for the existing replication slot (replication.failover = true): \
                 standbys with sync_replication_slots = on now keep a copy of it"
            );
            Ok(())
        }
        FailoverAction::LeaveOn => {
            info!(
                slot,
                "the replication slot is a failover slot and replication.failover is false: leaving it as it is"
            );
            Ok(())
        }
    }
}

/// The line walrelay adds to its publication's comment once `slot` exists:
/// PostgreSQL keeps no trace of a dropped slot, this does.
fn slot_marker(slot: &str) -> String {
    format!("walrelay: replication slot {slot} was created for this publication")
}

/// Whether the publication's comment says `slot` existed. A failed lookup
/// counts as no (and is an error only where it decides).
pub(crate) async fn slot_recorded(
    client: &tokio_postgres::Client,
    publication: &str,
    slot: &str,
) -> Result<bool, CatalogError> {
    let comment = catalog::publication_comment(client, publication).await?;
    let marker = slot_marker(slot);
    Ok(comment.is_some_and(|c| c.lines().any(|l| l.trim() == marker)))
}

/// Records in the publication's comment that `slot` exists, once, so that
/// a later start can tell a dropped slot from a first start. Best effort:
/// COMMENT needs ownership of the publication; without it walrelay warns
/// that it cannot guard against recreating a dropped slot.
pub(crate) async fn record_slot(client: &tokio_postgres::Client, publication: &str, slot: &str) {
    let marker = slot_marker(slot);
    let result = async {
        let comment = catalog::publication_comment(client, publication).await?;
        if comment
            .as_deref()
            .is_some_and(|c| c.lines().any(|l| l.trim() == marker))
        {
            return Ok(());
        }
        let text = match comment {
            Some(c) if !c.is_empty() => format!("{c}\n{marker}"),
            _ => marker.clone(),
        };
        catalog::set_publication_comment(client, publication, &text).await
    }
    .await;
    if let Err(e) = result {
        warn!(
            slot,
            publication,
            error = %DisplayChain(&e),
            "cannot record the slot in the publication's comment: if the slot is ever dropped, \
             the next start cannot tell and creates a new one (skipping events); \
             set replication.slot_missing = \"fail\" once the slot exists"
        );
    }
}

/// Decides whether a slot missing at start may be created
/// (`replication.slot_missing`). A new slot starts at the current WAL
/// position and skips everything written since a dropped one's position,
/// so by default it is created only when the publication's comment does
/// not record that this slot existed.
pub(crate) async fn may_create_slot(
    replication: &ReplicationConfig,
    client: &tokio_postgres::Client,
) -> Result<(), CatalogError> {
    let slot = &replication.slot;
    let publication = &replication.publication;
    let refuse = |reason: String| {
        Err(CatalogError::SlotMismatch {
            slot: slot.clone(),
            reason,
        })
    };
    match replication.slot_missing {
        SlotMissing::Fail => refuse(
            "it does not exist and replication.slot_missing = \"fail\"; create it with \
             SELECT pg_create_logical_replication_slot('<slot>', 'pgoutput')"
                .replace("<slot>", slot),
        ),
        SlotMissing::IfNew => {
            if slot_recorded(client, publication, slot).await? {
                return refuse(format!(
                    "it does not exist, but the comment of publication {publication} records that it did: \
                     it was dropped, and a new slot would silently skip every event written since its \
                     last confirmed position. Re-publish those events, then create the slot deliberately \
                     (SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')) or start once with \
                     replication.slot_missing = \"create\""
                ));
            }
            Ok(())
        }
        SlotMissing::Create => {
            if slot_recorded(client, publication, slot)
                .await
                .unwrap_or(false)
            {
                warn!(
                    slot,
                    publication,
                    "CREATING A NEW REPLICATION SLOT in place of a dropped one \
                     (replication.slot_missing = \"create\"): every event written since the old \
                     slot's last confirmed position is skipped and must be re-published"
                );
            }
            Ok(())
        }
    }
}

/// `slot.drop.on.stop`: waits (bounded) until the walsender released the
/// slot, then drops it. Failures are logged: the stop itself succeeded.
pub(crate) async fn drop_slot_when_released(client: &tokio_postgres::Client, slot: &str) {
    for _ in 0..50 {
        match catalog::slot_state(client, slot).await {
            Ok(Some(state)) if state.active => tokio::time::sleep(Duration::from_millis(100)).await,
            Ok(Some(_)) => {
                match catalog::drop_slot(client, slot).await {
                    Ok(()) => info!(slot, "dropped replication slot (slot_drop_on_stop)"),
                    Err(e) => {
                        warn!(slot, error = %DisplayChain(&e), "cannot drop the replication slot");
                    }
                }
                return;
            }
            Ok(None) => return,
            Err(e) => {
                warn!(slot, error = %DisplayChain(&e), "cannot drop the replication slot");
                return;
            }
        }
    }
    warn!(slot, "replication slot still active after 5 s; not dropped");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::Retry;

    #[test]
    fn failover_is_refused_below_17_naming_the_keys_and_the_version() {
        let e = failover_supported(160004, "16.4").unwrap_err();
        let text = e.to_string();
        for part in [
            "replication.failover",
            "slot.failover",
            "PostgreSQL 16.4",
            "160004",
            "17 or later",
        ] {
            assert!(text.contains(part), "{part:?} missing from {text:?}");
        }
        assert!(
            matches!(Retry::<CatalogError>::from(e), Retry::Definite(_)),
            "a refusal must stop walrelay"
        );
        assert!(failover_supported(170000, "17.0").is_ok());
        assert!(failover_supported(180001, "18.1").is_ok());
    }

    #[test]
    fn a_synced_copy_on_a_standby_is_retried() {
        let standby = CatalogError::SyncedOnStandby { slot: "s".into() };
        assert!(
            matches!(Retry::<CatalogError>::from(standby), Retry::Transient(_)),
            "a promotion may be under way"
        );
    }

    #[test]
    fn an_existing_slot_gets_failover_on_never_off() {
        assert_eq!(failover_action(true, Some(false)), FailoverAction::TurnOn);
        assert_eq!(failover_action(true, Some(true)), FailoverAction::Keep);
        assert_eq!(failover_action(false, Some(true)), FailoverAction::LeaveOn);
        assert_eq!(failover_action(false, Some(false)), FailoverAction::Keep);
        // Before 17 there is no column (and failover = true was refused).
        assert_eq!(failover_action(false, None), FailoverAction::Keep);
    }
}
