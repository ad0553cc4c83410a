//! The slot rows of the WAL source: the replication slot as walrelay would
//! find it at start (missing and whether `replication.slot_missing` lets
//! walrelay create it, unusable, held by another walsender, its WAL), and
//! with failover slots (PostgreSQL 17+) the slot's failover columns, the
//! primary's `synchronized_standby_slots` and a standby that synchronizes
//! slots. It must never create, alter or take a slot: it reads
//! `pg_replication_slots`, `pg_stat_activity` and the publication's comment.

use std::time::Duration;

use tokio_postgres::Client;

use super::report::{CheckReport, FAILOVER_SLOT, SLOT, SLOT_SYNC, STANDBY_SLOTS};
use super::step::{bounded, read, CheckError};
use crate::chain::DisplayChain;
use crate::config::Config;
use crate::human::human_bytes;
use crate::postgres::catalog::capability::ServerFacts;
use crate::postgres::catalog::{self, preflight, SlotLag, SlotState};
use crate::postgres::config::SlotMissing;
use crate::postgres::replication::quote_ident;
use crate::postgres::slot::{failover_action, failover_supported, slot_recorded, FailoverAction};

/// The replication slot as walrelay would find it at start: missing (and
/// whether walrelay may create it), unusable, or usable with its position,
/// its retained WAL and whether another walsender holds it.
pub(super) async fn check_slot(
    report: &mut CheckReport,
    config: &Config,
    client: &Client,
    timeout: Duration,
) {
    let slot = &config.replication.slot;
    let state = match slot_state(client, slot, timeout).await {
        Ok(s) => s,
        Err(e) => {
            report.fail(
                SLOT,
                DisplayChain(&e).to_string(),
                "make sure the role can read pg_replication_slots",
            );
            return;
        }
    };
    let Some(state) = state else {
        if config.replication.create_slot {
            check_missing_slot(report, config, client, timeout).await;
        } else {
            report.fail(
                SLOT,
                format!("{slot} does not exist and replication.create_slot is false"),
                format!(
                    "set replication.create_slot = true, or SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')"
                ),
            );
        }
        return;
    };
    if let Err(e) = catalog::check_slot(slot, &state, &config.postgres.dbname) {
        report.fail(
            SLOT,
            DisplayChain(&e).to_string(),
            format!(
                "use another replication.slot, or drop this one (SELECT pg_drop_replication_slot('{slot}')) if nothing else uses it"
            ),
        );
        return;
    }
    let lag = read("the slot's lag", timeout, catalog::poll_slot(client, slot)).await;
    let detail = slot_detail(config, &state, lag.as_ref().ok().and_then(Option::as_ref));
    existing_slot_row(report, &state, detail);
}

/// The slot's row from `pg_replication_slots` (`None`: no such slot).
async fn slot_state(
    client: &Client,
    slot: &str,
    timeout: Duration,
) -> Result<Option<SlotState>, CheckError> {
    bounded("the replication slot", timeout, async {
        catalog::slot_state(client, slot)
            .await
            .map_err(CheckError::from)
    })
    .await
}

/// A missing slot that walrelay may create: whether
/// `replication.slot_missing` lets it, given what the publication's comment
/// records (a slot that existed and was dropped).
async fn check_missing_slot(
    report: &mut CheckReport,
    config: &Config,
    client: &Client,
    timeout: Duration,
) {
    let slot = &config.replication.slot;
    let publication = &config.replication.publication;
    let create_by_hand = format!("SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')");
    if config.replication.slot_missing == SlotMissing::Fail {
        report.fail(
            SLOT,
            format!("{slot} does not exist and replication.slot_missing = \"fail\""),
            format!("create it ({create_by_hand}) or set replication.slot_missing = \"if_new\""),
        );
        return;
    }
    let recorded = bounded("the publication's comment", timeout, async {
        slot_recorded(client, publication, slot)
            .await
            .map_err(CheckError::from)
    })
    .await;
    let recorded = match recorded {
        Ok(r) => r,
        Err(e) => {
            report.fail(
                SLOT,
                format!(
                    "{slot} does not exist, and whether it existed before is unknown: {}",
                    DisplayChain(&e)
                ),
                "make sure the role can read pg_publication and pg_description",
            );
            return;
        }
    };
    missing_slot_row(report, config, recorded, &create_by_hand);
}

/// The `replication slot` row of a missing slot walrelay may create:
/// whether `replication.slot_missing` lets it, given whether the
/// publication's comment `recorded` the slot (it existed and was dropped).
fn missing_slot_row(
    report: &mut CheckReport,
    config: &Config,
    recorded: bool,
    create_by_hand: &str,
) {
    let slot = &config.replication.slot;
    let publication = &config.replication.publication;
    match (recorded, config.replication.slot_missing) {
        (false, _) => report.pass(
            SLOT,
            format!("{slot} does not exist; walrelay will create it (pgoutput) at first start"),
        ),
        (true, SlotMissing::Create) => report.warn(
            SLOT,
            format!(
                "{slot} does not exist but publication {publication} records that it did: it was dropped; \
                 with replication.slot_missing = \"create\" walrelay creates a new one, skipping every \
                 event written since the old slot's last confirmed position"
            ),
            "re-publish those events, and set replication.slot_missing back to \"if_new\" once the slot exists",
        ),
        (true, _) => report.fail(
            SLOT,
            format!(
                "{slot} does not exist but publication {publication} records that it did: it was dropped, \
                 and walrelay refuses to start (a new slot would skip every event written since then)"
            ),
            format!(
                "re-publish the events written since the old slot's last confirmed position, then create \
                 the slot deliberately ({create_by_hand}) or start once with replication.slot_missing = \"create\""
            ),
        ),
    }
}

/// What the slot is: plugin, database, position, and its WAL when known.
fn slot_detail(config: &Config, state: &SlotState, lag: Option<&SlotLag>) -> String {
    let slot = &config.replication.slot;
    let dbname = &config.postgres.dbname;
    let mut detail = format!(
        "{slot}: pgoutput on {dbname}, confirmed at {}",
        state
            .confirmed_flush_lsn
            .map_or_else(|| "?".to_owned(), |l| l.to_string())
    );
    if let Some(status) = &state.wal_status {
        detail.push_str(&format!(", wal_status {status}"));
    }
    if let Some(l) = lag {
        if let Some(b) = l.retained_bytes {
            detail.push_str(&format!(", retains {}", human_bytes(b.max(0) as u64)));
        }
        if let Some(b) = l.confirmed_lag_bytes {
            detail.push_str(&format!(", {} behind", human_bytes(b.max(0) as u64)));
        }
    }
    detail
}

/// A usable slot: failed when its WAL is about to go, a warning when
/// another walsender holds it or it retains much.
fn existing_slot_row(report: &mut CheckReport, state: &SlotState, detail: String) {
    if state.wal_status.as_deref() == Some("unreserved") {
        report.fail(
            SLOT,
            format!("{detail}: the WAL it needs exceeds max_slot_wal_keep_size and goes at the next checkpoint"),
            "raise max_slot_wal_keep_size (or free disk) and start walrelay at once",
        );
    } else if state.active {
        let pid = state
            .active_pid
            .map_or_else(String::new, |p| format!(" (pid {p})"));
        report.warn(
            SLOT,
            format!("{detail}; held by another walsender{pid}: this walrelay would wait as a hot standby"),
            "expected when another walrelay runs on this slot; otherwise find the holder in pg_stat_replication",
        );
    } else if state.wal_status.as_deref() == Some("extended") {
        report.warn(
            SLOT,
            detail,
            "the slot retains more than max_wal_size: start walrelay soon so it catches up",
        );
    } else {
        report.pass(SLOT, detail);
    }
}

/// Failover slots (PostgreSQL 17+), with `replication.failover` or when
/// the slot already is one: the slot's `failover` and `synced` columns,
/// whether the primary holds walrelay back for its standbys
/// (`synchronized_standby_slots`) and whether any standby synchronizes
/// slots. No rows otherwise.
pub(super) async fn check_failover(
    report: &mut CheckReport,
    config: &Config,
    client: &Client,
    timeout: Duration,
    server: &Result<ServerFacts, CheckError>,
) {
    let slot = &config.replication.slot;
    let state = slot_state(client, slot, timeout).await.ok().flatten();
    let is_failover_slot = state.as_ref().and_then(|s| s.failover) == Some(true);
    if !config.replication.failover && !is_failover_slot {
        return;
    }
    if !failover_slot_row(report, config, server, state.as_ref()) {
        return;
    }
    let facts = read(
        "the standbys' slot synchronization",
        timeout,
        preflight::failover_readiness(client),
    )
    .await;
    let facts = match facts {
        Ok(f) => f,
        Err(e) => {
            let detail = DisplayChain(&e).to_string();
            let fix = "make sure the role can read pg_replication_slots and pg_stat_activity";
            report.warn(STANDBY_SLOTS, detail.clone(), fix);
            report.warn(SLOT_SYNC, detail, fix);
            return;
        }
    };
    check_standby_slots(report, &facts);
    check_slot_sync(report, &facts, slot, &config.postgres.dbname);
}

/// The `failover slot` row: the slot to be created as one, or its
/// `failover` and `synced` columns and what walrelay changes at start.
/// Returns false when the server has no failover slots (the row fails).
fn failover_slot_row(
    report: &mut CheckReport,
    config: &Config,
    server: &Result<ServerFacts, CheckError>,
    state: Option<&SlotState>,
) -> bool {
    let slot = &config.replication.slot;
    let (version_num, version) = match server {
        Ok(f) => (f.version_num, f.version.as_str()),
        Err(e) => {
            report.fail(
                FAILOVER_SLOT,
                DisplayChain(e).to_string(),
                "run SHOW server_version_num as this role to see why it fails",
            );
            return false;
        }
    };
    if failover_supported(version_num, version).is_err() {
        report.fail(
            FAILOVER_SLOT,
            format!(
                "replication.failover (Debezium slot.failover) is true, but the server is PostgreSQL {version}: \
                 failover slots need 17 or later, and walrelay refuses to start (it never creates a plain slot instead)"
            ),
            "set replication.failover = false (slot.failover=false in a Debezium connector file) to run with \
             a plain slot, or upgrade the primary to PostgreSQL 17 or later",
        );
        return false;
    }
    match state {
        None => report.pass(
            FAILOVER_SLOT,
            format!("{slot} does not exist; walrelay will create it as a failover slot (FAILOVER)"),
        ),
        Some(s) => report.pass(FAILOVER_SLOT, failover_detail(config, s)),
    }
    true
}

/// An existing slot's failover columns, and what walrelay changes at start.
fn failover_detail(config: &Config, s: &SlotState) -> String {
    let slot = &config.replication.slot;
    let shown = |v: Option<bool>| v.map_or("?", |b| if b { "true" } else { "false" });
    let mut detail = format!(
        "{slot}: failover {}, synced {}",
        shown(s.failover),
        shown(s.synced)
    );
    match failover_action(config.replication.failover, s.failover) {
        FailoverAction::TurnOn => detail.push_str(&format!(
            "; walrelay turns failover on at start (ALTER_REPLICATION_SLOT {} (FAILOVER true))",
            quote_ident(slot)
        )),
        FailoverAction::LeaveOn => detail
            .push_str("; replication.failover is false and walrelay leaves it a failover slot"),
        FailoverAction::Keep => {}
    }
    detail
}

/// `synchronized_standby_slots`: set, and every slot it names exists and is
/// streaming.
fn check_standby_slots(report: &mut CheckReport, facts: &preflight::FailoverReadiness) {
    let listed = parse_slot_list(facts.standby_slots.as_deref().unwrap_or(""));
    let reload = "SELECT pg_reload_conf();";
    if listed.is_empty() {
        let candidates: Vec<&str> = facts
            .physical_slots
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        let value = if candidates.is_empty() {
            "<the physical slot of each standby that synchronizes slots>".to_owned()
        } else {
            candidates.join(",")
        };
        report.warn(
            STANDBY_SLOTS,
            "empty on the primary: walrelay (a logical consumer) can receive, and deliver to Kafka, changes that no \
             standby has received yet; after a promotion Kafka may hold events the new primary never had, and the \
             standby's copy of the slot may stand behind what walrelay confirmed",
            format!(
                "on the primary: ALTER SYSTEM SET synchronized_standby_slots = '{value}'; {reload} \
                 (failover slots' changes then wait until those standbys have the WAL)"
            ),
        );
        return;
    }
    let mut problems = Vec::new();
    for name in &listed {
        match facts.physical_slots.iter().find(|p| &p.name == name) {
            None => problems.push(format!("{name} does not exist")),
            Some(p) if !p.active => problems.push(format!(
                "{name} is not active (its standby is not streaming)"
            )),
            Some(_) => {}
        }
    }
    if problems.is_empty() {
        report.pass(
            STANDBY_SLOTS,
            format!(
                "{}: every listed physical slot exists and is streaming",
                listed.join(", ")
            ),
        );
    } else {
        report.warn(
            STANDBY_SLOTS,
            format!(
                "{}: the primary holds back failover slots' changes until every slot listed there has the WAL, \
                 so walrelay's stream stalls (nothing reaches Kafka) while this lasts",
                problems.join("; ")
            ),
            format!(
                "on the primary: create the missing slot (SELECT pg_create_physical_replication_slot('<name>')) and \
                 start its standby with primary_slot_name = '<name>', or remove it from the list \
                 (ALTER SYSTEM SET synchronized_standby_slots = '<streaming slots>'; {reload})"
            ),
        );
    }
}

/// A standby whose slot sync worker is connected to this primary.
fn check_slot_sync(
    report: &mut CheckReport,
    facts: &preflight::FailoverReadiness,
    slot: &str,
    dbname: &str,
) {
    if !facts.slot_sync_connections.is_empty() {
        report.pass(
            SLOT_SYNC,
            format!(
                "slot sync worker connection(s) from a standby: {}",
                facts.slot_sync_connections.join(", ")
            ),
        );
        return;
    }
    let streaming = facts.physical_slots.iter().filter(|p| p.active).count();
    let seen = if streaming == 0 {
        "none streams from the primary through a physical slot, and no slot sync worker is connected".to_owned()
    } else {
        format!(
            "{streaming} standby(s) stream through a physical slot, but no slot sync worker is connected to the primary"
        )
    };
    report.warn(
        SLOT_SYNC,
        format!(
            "no standby synchronizes slots: {seen}; after a promotion the new primary has no copy of {slot}, and walrelay cannot continue there"
        ),
        format!(
            "on each standby: sync_replication_slots = on, hot_standby_feedback = on, primary_slot_name = '<its \
             physical slot on the primary>' and dbname={dbname} in primary_conninfo, then SELECT pg_reload_conf() \
             on that standby"
        ),
    );
}

/// The slot names of a `synchronized_standby_slots` value: comma-separated
/// identifiers, lower-cased unless double-quoted (as PostgreSQL splits it).
fn parse_slot_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(
            |n| match n.strip_prefix('"').and_then(|n| n.strip_suffix('"')) {
                Some(quoted) => quoted.replace("\"\"", "\""),
                None => n.to_lowercase(),
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::report::CheckStatus;

    #[test]
    fn standby_slot_lists_split_as_postgresql_does() {
        assert!(parse_slot_list("").is_empty());
        assert!(parse_slot_list(" , ").is_empty());
        assert_eq!(parse_slot_list("standby_1"), vec!["standby_1"]);
        assert_eq!(
            parse_slot_list(" Standby_A , \"b\"\"q\" "),
            vec!["standby_a", "b\"q"]
        );
    }

    fn readiness(
        listed: &str,
        slots: &[(&str, bool)],
        syncing: &[&str],
    ) -> preflight::FailoverReadiness {
        preflight::FailoverReadiness {
            standby_slots: Some(listed.to_owned()),
            physical_slots: slots
                .iter()
                .map(|(n, a)| preflight::PhysicalSlot {
                    name: (*n).to_owned(),
                    active: *a,
                })
                .collect(),
            slot_sync_connections: syncing.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn failover_warnings_name_the_setting_and_the_server() {
        let mut r = CheckReport::default();
        let facts = readiness("", &[("standby_1", true)], &[]);
        check_standby_slots(&mut r, &facts);
        check_slot_sync(&mut r, &facts, "walrelay", "app");
        let standby = r.row(STANDBY_SLOTS).expect("row");
        assert_eq!(standby.status, CheckStatus::Warn);
        assert!(standby.detail.contains("never had"), "{r}");
        let fix = standby.fix.as_deref().expect("fix");
        assert!(
            fix.contains("on the primary")
                && fix.contains("synchronized_standby_slots = 'standby_1'"),
            "{fix}"
        );
        let sync = r.row(SLOT_SYNC).expect("row");
        assert_eq!(sync.status, CheckStatus::Warn);
        let fix = sync.fix.as_deref().expect("fix");
        assert!(
            fix.contains("on each standby") && fix.contains("sync_replication_slots = on"),
            "{fix}"
        );

        let mut r = CheckReport::default();
        let facts = readiness("gone, idle", &[("idle", false)], &["slotsync worker"]);
        check_standby_slots(&mut r, &facts);
        check_slot_sync(&mut r, &facts, "walrelay", "app");
        let standby = r.row(STANDBY_SLOTS).expect("row");
        assert_eq!(standby.status, CheckStatus::Warn, "{r}");
        assert!(
            standby.detail.contains("gone does not exist")
                && standby.detail.contains("idle is not active")
                && standby.detail.contains("stalls"),
            "{r}"
        );
        assert_eq!(r.row(SLOT_SYNC).expect("row").status, CheckStatus::Pass);

        let mut r = CheckReport::default();
        let facts = readiness("standby_1", &[("standby_1", true)], &["standby_1"]);
        check_standby_slots(&mut r, &facts);
        check_slot_sync(&mut r, &facts, "walrelay", "app");
        assert!(
            r.rows.iter().all(|row| row.status == CheckStatus::Pass),
            "{r}"
        );
    }
}
