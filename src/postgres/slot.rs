//! Slot policy: what walrelay does when the slot it reads is missing,
//! dropped, or to be dropped on stop.
//!
//! PostgreSQL keeps no trace of a dropped slot, and a new slot starts at the
//! current WAL position, silently skipping every event written since the
//! old one's confirmed position. So walrelay records in its publication's
//! comment that the slot existed, and by default refuses to recreate one
//! that did (`replication.slot_missing`). This module never creates a slot
//! itself and never drops one that a walsender still holds.

use std::time::Duration;

use tracing::{info, warn};

use super::catalog::{self, CatalogError};
use super::config::{ReplicationConfig, SlotMissing};
use crate::chain::DisplayChain;

/// The line walrelay adds to its publication's comment once `slot` exists:
/// PostgreSQL keeps no trace of a dropped slot, this does.
fn slot_marker(slot: &str) -> String {
    format!("walrelay: replication slot {slot} was created for this publication")
}

/// Whether the publication's comment says `slot` existed. A failed lookup
/// counts as no (and is an error only where it decides).
pub async fn slot_recorded(
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
pub async fn record_slot(client: &tokio_postgres::Client, publication: &str, slot: &str) {
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
pub async fn may_create_slot(
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
pub async fn drop_slot_when_released(client: &tokio_postgres::Client, slot: &str) {
    for _ in 0..50 {
        match catalog::slot_state(client, slot).await {
            Ok(Some(state)) if state.active => tokio::time::sleep(Duration::from_millis(100)).await,
            Ok(Some(_)) => {
                match catalog::drop_slot(client, slot).await {
                    Ok(()) => info!(slot, "dropped replication slot (slot_drop_on_stop)"),
                    Err(e) => {
                        warn!(slot, error = %DisplayChain(&e), "cannot drop the replication slot")
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
