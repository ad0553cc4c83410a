//! The server's rows of the WAL source: its version and the pgoutput
//! protocol a start would ask for, pgoutput itself, `wal_level`, the role's
//! attributes, slot and WAL sender capacity and `max_slot_wal_keep_size`.
//! What a server lacks is worded by [`capability`], so a check and a
//! refused start say the same thing. It must never change a setting or
//! take a slot or a WAL sender: it reads `pg_settings`, `pg_roles` and the
//! replication views, and nothing more.

use std::time::Duration;

use tokio_postgres::Client;

use super::report::{
    CheckReport, MAX_SLOT_WAL_KEEP_SIZE, OUTPUT_PLUGIN, ROLE, SERVER_VERSION, SLOT_CAPACITY,
    WAL_LEVEL, WAL_SENDERS,
};
use super::step::{read, CheckError};
use crate::chain::DisplayChain;
use crate::config::Config;
use crate::postgres::catalog;
use crate::postgres::catalog::capability::{self, ServerFacts, Unsupported};
use crate::postgres::catalog::preflight::{self, ReplicationCapacity};

/// The server version row: PostgreSQL 14 or later, and the pgoutput
/// protocol a start would request from it.
pub(super) fn check_server_version(
    report: &mut CheckReport,
    config: &Config,
    facts: &Result<ServerFacts, CheckError>,
) {
    match facts {
        Ok(f) if f.version_num < capability::MIN_SERVER_VERSION_NUM => {
            let problem = Unsupported::ServerVersion {
                version: f.version.clone(),
            };
            report.fail(SERVER_VERSION, problem.problem(), problem.fix());
        }
        Ok(f) => report.pass(SERVER_VERSION, server_version_detail(f, config)),
        Err(e) => report.fail(
            SERVER_VERSION,
            DisplayChain(e).to_string(),
            "run SHOW server_version_num as this role to see why it fails",
        ),
    }
}

/// "PostgreSQL 16.4: pgoutput protocol 4, streaming 'parallel'".
fn server_version_detail(facts: &ServerFacts, config: &Config) -> String {
    let messages = config.outbox.messages_are_events();
    let proto = crate::postgres::wal::proto_version_for(
        facts.version_num,
        config.streaming(),
        crate::pipeline::PROTO_VERSION,
    );
    let streaming = match crate::postgres::wal::streaming_option(proto) {
        Some(mode) => format!("streaming '{mode}'"),
        None if messages => {
            "whole transactions after their commit (logical decoding messages are events)".into()
        }
        None => "whole transactions after their commit (replication.streaming = false)".into(),
    };
    format!(
        "PostgreSQL {}: pgoutput protocol {proto}, {streaming}",
        facts.version
    )
}

/// Whether the server has pgoutput. Only a superuser may list the library
/// directory; for any other role a missing plugin shows when walrelay
/// creates its slot, which then names the fix.
pub(super) async fn check_output_plugin(
    report: &mut CheckReport,
    client: &Client,
    timeout: Duration,
    superuser: bool,
) {
    if !superuser {
        report.pass(
            OUTPUT_PLUGIN,
            "pgoutput not verified (listing the server's library directory needs a superuser); it ships with PostgreSQL",
        );
        return;
    }
    match read(
        "the server's library directory",
        timeout,
        preflight::pgoutput_installed(client),
    )
    .await
    {
        Ok(true) => report.pass(OUTPUT_PLUGIN, "pgoutput is installed"),
        Ok(false) => {
            let problem = Unsupported::NoPgoutput;
            report.fail(OUTPUT_PLUGIN, problem.problem(), problem.fix());
        }
        Err(e) => report.warn(
            OUTPUT_PLUGIN,
            DisplayChain(&e).to_string(),
            "list the server's library directory (pg_config --pkglibdir) for pgoutput",
        ),
    }
}

/// `wal_level = logical`: without it there is no logical decoding.
pub(super) async fn check_wal_level(report: &mut CheckReport, client: &Client, timeout: Duration) {
    match read("wal_level", timeout, preflight::wal_level(client)).await {
        Ok(level) => {
            if level == "logical" {
                report.pass(WAL_LEVEL, "logical");
            } else {
                let problem = Unsupported::WalLevel { level };
                report.fail(WAL_LEVEL, problem.problem(), problem.fix());
            }
        }
        Err(e) => report.fail(
            WAL_LEVEL,
            DisplayChain(&e).to_string(),
            "run SHOW wal_level as this role to see why it fails",
        ),
    }
}

/// The role may start a walsender (REPLICATION, or a superuser). Returns
/// whether the role is a superuser.
pub(super) async fn check_role(
    report: &mut CheckReport,
    client: &Client,
    timeout: Duration,
    user: &str,
) -> bool {
    let row = read(
        "the role's attributes",
        timeout,
        preflight::role_attributes(client),
    )
    .await;
    match row {
        Ok(Some(attributes)) => {
            let (replication, superuser) = (attributes.replication, attributes.superuser);
            if superuser {
                report.pass(ROLE, format!("{user} is a superuser"));
            } else if replication {
                report.pass(ROLE, format!("{user} has REPLICATION"));
            } else {
                let problem = Unsupported::NoReplicationRole {
                    user: user.to_owned(),
                };
                report.fail(ROLE, problem.problem(), problem.fix());
            }
            superuser
        }
        Ok(None) => {
            report.fail(
                ROLE,
                format!("role {user} is not in pg_roles"),
                "check postgres.user",
            );
            false
        }
        Err(e) => {
            report.fail(
                ROLE,
                DisplayChain(&e).to_string(),
                "make sure the role can read pg_roles",
            );
            false
        }
    }
}

/// A free slot (or ours) and a free WAL sender, leaving out this check's
/// own replication connection (`check_app`).
pub(super) async fn check_capacity(
    report: &mut CheckReport,
    config: &Config,
    client: &Client,
    timeout: Duration,
    check_app: &str,
) {
    let slot = &config.replication.slot;
    let row = read(
        "slot and wal sender capacity",
        timeout,
        preflight::replication_capacity(client, slot, check_app),
    )
    .await;
    let row = match row {
        Ok(r) => r,
        Err(e) => {
            let detail = DisplayChain(&e).to_string();
            report.fail(
                SLOT_CAPACITY,
                detail.clone(),
                "make sure the role can read pg_replication_slots",
            );
            report.fail(
                WAL_SENDERS,
                detail,
                "make sure the role can read pg_stat_replication",
            );
            return;
        }
    };
    slot_capacity_row(report, slot, &row);
    wal_senders_row(report, &row);
}

/// A free slot for ours, or ours among the used ones.
fn slot_capacity_row(report: &mut CheckReport, slot: &str, row: &ReplicationCapacity) {
    let (max_slots, used_slots) = (row.max_slots, row.used_slots);
    let free_slots = max_slots - used_slots;
    if row.slot_exists {
        report.pass(
            SLOT_CAPACITY,
            format!("{used_slots} of {max_slots} in use, slot {slot} among them"),
        );
    } else if free_slots > 0 {
        report.pass(
            SLOT_CAPACITY,
            format!("{used_slots} of {max_slots} in use, {free_slots} free for slot {slot}"),
        );
    } else {
        let problem = if max_slots <= 0 {
            Unsupported::NoReplicationSlots
        } else {
            Unsupported::SlotsExhausted {
                slot: slot.to_owned(),
            }
        };
        report.fail(
            SLOT_CAPACITY,
            format!("{} ({used_slots} of {max_slots})", problem.problem()),
            problem.fix(),
        );
    }
}

/// A free WAL sender for walrelay's replication connection.
fn wal_senders_row(report: &mut CheckReport, row: &ReplicationCapacity) {
    let (max_senders, used_senders) = (row.max_wal_senders, row.used_wal_senders);
    let free_senders = max_senders - used_senders;
    if free_senders > 0 {
        report.pass(
            WAL_SENDERS,
            format!("{used_senders} of {max_senders} in use, {free_senders} free"),
        );
    } else {
        let problem = if max_senders <= 0 {
            Unsupported::NoWalSenders
        } else {
            Unsupported::WalSendersExhausted
        };
        report.fail(
            WAL_SENDERS,
            format!("{} ({used_senders} of {max_senders})", problem.problem()),
            problem.fix(),
        );
    }
}

/// `max_slot_wal_keep_size`: a bound keeps a stuck slot from filling the
/// primary's disk.
pub(super) async fn check_keep_size(report: &mut CheckReport, client: &Client, timeout: Duration) {
    match read(
        MAX_SLOT_WAL_KEEP_SIZE,
        timeout,
        catalog::max_slot_wal_keep_size(client),
    )
    .await
    {
        Ok(value) => {
            if value == "-1" {
                report.warn(
                    MAX_SLOT_WAL_KEEP_SIZE,
                    "-1 (unlimited): a stuck or abandoned slot can fill the primary's disk",
                    "bound it, e.g. ALTER SYSTEM SET max_slot_wal_keep_size = '50GB'; SELECT pg_reload_conf(); \
                     walrelay stops cleanly if its slot is ever invalidated",
                );
            } else {
                report.pass(MAX_SLOT_WAL_KEEP_SIZE, value);
            }
        }
        Err(e) => report.warn(
            MAX_SLOT_WAL_KEEP_SIZE,
            DisplayChain(&e).to_string(),
            "run SHOW max_slot_wal_keep_size as this role to see why it fails",
        ),
    }
}
