//! What walrelay needs from a PostgreSQL server before it streams, read in
//! one statement and judged here, so that a start and `walrelay check` say
//! the same thing: PostgreSQL 14 or later, `wal_level = logical`, room for
//! replication slots and WAL senders, a role that may replicate, and the
//! pgoutput plugin.
//!
//! Never changes anything: one read-only `SELECT` of settings and the
//! role's attributes. The judgement ([`ServerFacts::problems`],
//! [`refusal`]) is pure, so every message is unit-tested without a server.

use std::fmt;

use tokio_postgres::Client;

use crate::postgres::replication::quote_ident;
use crate::retry::Retry;

/// The oldest server walrelay supports (`server_version_num`): streaming of
/// in-progress transactions (pgoutput protocol 2) and the slot views it
/// reads are PostgreSQL 14's.
pub(crate) const MIN_SERVER_VERSION_NUM: u32 = 140_000;
/// The first release that saves a logical slot's confirmed position at a
/// shutdown checkpoint.
pub(crate) const SAVES_CONFIRMED_AT_SHUTDOWN: u32 = 170_000;

/// The settings and role attributes the judgement needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerFacts {
    /// `server_version_num`, e.g. 160004.
    pub(crate) version_num: u32,
    /// `server_version` as shown, e.g. `16.4 (Debian 16.4-1)`.
    pub(crate) version: String,
    pub(crate) wal_level: String,
    pub(crate) max_replication_slots: i32,
    pub(crate) max_wal_senders: i32,
    /// The connected role (`current_user`).
    pub(crate) user: String,
    /// `rolreplication` (false when the role is not in `pg_roles`).
    pub(crate) replication: bool,
    /// `rolsuper`.
    pub(crate) superuser: bool,
}

/// Reads [`ServerFacts`] in one round trip.
pub(crate) async fn server_facts(client: &Client) -> Result<ServerFacts, tokio_postgres::Error> {
    let row = client
        .query_one(
            "SELECT current_setting('server_version_num')::int4, current_setting('server_version'),
                    current_setting('wal_level'), current_setting('max_replication_slots')::int4,
                    current_setting('max_wal_senders')::int4, current_user::text,
                    coalesce(r.rolreplication, false), coalesce(r.rolsuper, false)
             FROM (SELECT 1) one
             LEFT JOIN pg_catalog.pg_roles r ON r.rolname = current_user",
            &[],
        )
        .await?;
    Ok(ServerFacts {
        version_num: u32::try_from(row.get::<_, i32>(0)).unwrap_or(0),
        version: row.get(1),
        wal_level: row.get(2),
        max_replication_slots: row.get(3),
        max_wal_senders: row.get(4),
        user: row.get(5),
        replication: row.get(6),
        superuser: row.get(7),
    })
}

impl ServerFacts {
    /// What keeps walrelay from streaming from this server, most basic
    /// first (an unsupported version before everything else); none of it
    /// fixes itself.
    pub(crate) fn problems(&self) -> Vec<Unsupported> {
        let mut out = Vec::new();
        if self.version_num < MIN_SERVER_VERSION_NUM {
            out.push(Unsupported::ServerVersion {
                version: self.version.clone(),
            });
        }
        if self.wal_level != "logical" {
            out.push(Unsupported::WalLevel {
                level: self.wal_level.clone(),
            });
        }
        if self.max_replication_slots <= 0 {
            out.push(Unsupported::NoReplicationSlots);
        }
        if self.max_wal_senders <= 0 {
            out.push(Unsupported::NoWalSenders);
        }
        if !self.replication && !self.superuser {
            out.push(Unsupported::NoReplicationRole {
                user: self.user.clone(),
            });
        }
        out
    }

    /// Whether the server saves a logical slot's confirmed position at a
    /// shutdown checkpoint (PostgreSQL 17 and later).
    pub(crate) fn saves_confirmed_at_shutdown(&self) -> bool {
        self.version_num >= SAVES_CONFIRMED_AT_SHUTDOWN
    }
}

/// Something the server lacks that walrelay needs; each says what was found
/// and how to fix it ([`Unsupported::problem`], [`Unsupported::fix`]; the
/// `Display` is both).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unsupported {
    /// Older than PostgreSQL 14.
    ServerVersion {
        /// `server_version` as shown.
        version: String,
    },
    /// `wal_level` is not `logical`.
    WalLevel {
        /// The current level.
        level: String,
    },
    /// `max_replication_slots = 0`.
    NoReplicationSlots,
    /// `max_wal_senders = 0`.
    NoWalSenders,
    /// The role has neither REPLICATION nor superuser.
    NoReplicationRole {
        /// The role.
        user: String,
    },
    /// Every replication slot is taken (retried: one may be freed).
    SlotsExhausted {
        /// The slot walrelay would create.
        slot: String,
    },
    /// Every WAL sender is taken (retried: one may be freed).
    WalSendersExhausted,
    /// The server cannot load the pgoutput output plugin.
    NoPgoutput,
}

impl Unsupported {
    /// What was found.
    pub(crate) fn problem(&self) -> String {
        match self {
            Unsupported::ServerVersion { version } => format!(
                "postgresql {version} is not supported: walrelay supports postgresql 14 and later"
            ),
            Unsupported::WalLevel { level } => {
                format!("wal_level is {level}; logical decoding needs wal_level = logical")
            }
            Unsupported::NoReplicationSlots => {
                "max_replication_slots is 0: the server allows no replication slot".into()
            }
            Unsupported::NoWalSenders => {
                "max_wal_senders is 0: the server allows no replication connection".into()
            }
            Unsupported::NoReplicationRole { user } => {
                format!("role {user} has neither REPLICATION nor superuser, so it may not stream")
            }
            Unsupported::SlotsExhausted { slot } => {
                format!("all replication slots are in use and {slot} is not one of them")
            }
            Unsupported::WalSendersExhausted => {
                "all wal senders (max_wal_senders) are in use".into()
            }
            Unsupported::NoPgoutput => {
                "the server cannot load the pgoutput output plugin (pgoutput.so is missing from its library directory)".into()
            }
        }
    }

    /// How to fix it.
    pub(crate) fn fix(&self) -> String {
        match self {
            Unsupported::ServerVersion { .. } => {
                "upgrade the server to postgresql 14 or later (pg_upgrade, or a dump and restore)"
                    .into()
            }
            Unsupported::WalLevel { .. } => {
                "ALTER SYSTEM SET wal_level = logical; then restart postgresql (a reload is not enough)"
                    .into()
            }
            Unsupported::NoReplicationSlots => {
                "ALTER SYSTEM SET max_replication_slots = 10 (at least 1 for walrelay); then restart postgresql".into()
            }
            Unsupported::NoWalSenders => {
                "ALTER SYSTEM SET max_wal_senders = 10 (at least 1 for walrelay); then restart postgresql".into()
            }
            Unsupported::NoReplicationRole { user } => {
                format!("ALTER ROLE {} REPLICATION", quote_ident(user))
            }
            Unsupported::SlotsExhausted { .. } => {
                "drop an unused slot (SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE NOT active ...) or raise max_replication_slots (restart needed)".into()
            }
            Unsupported::WalSendersExhausted => {
                "stop an unused replication client or raise max_wal_senders (restart needed)".into()
            }
            Unsupported::NoPgoutput => {
                "install the server's complete package (pgoutput ships with postgresql itself, e.g. Debian's postgresql-<major>), or point walrelay at a server that has it".into()
            }
        }
    }
}

/// Waiting can fix only what is taken for now (a slot or a WAL sender may
/// be freed); a version, a setting, a role or a missing plugin stays.
impl From<Unsupported> for Retry<Unsupported> {
    fn from(u: Unsupported) -> Self {
        match u {
            u @ (Unsupported::SlotsExhausted { .. } | Unsupported::WalSendersExhausted) => {
                Retry::Transient(u)
            }
            u @ (Unsupported::ServerVersion { .. }
            | Unsupported::WalLevel { .. }
            | Unsupported::NoReplicationSlots
            | Unsupported::NoWalSenders
            | Unsupported::NoReplicationRole { .. }
            | Unsupported::NoPgoutput) => Retry::Definite(u),
        }
    }
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; fix: {}", self.problem(), self.fix())
    }
}

impl std::error::Error for Unsupported {}

/// The missing capability behind a server error of the replication
/// connection (SQLSTATE and primary message), if it is one: no free WAL
/// sender when connecting, no free slot or no pgoutput when creating the
/// slot `slot`.
pub(crate) fn refusal(code: &str, message: &str, slot: &str) -> Option<Unsupported> {
    match code {
        // too_many_connections: "number of requested standby connections
        // exceeds max_wal_senders"
        "53300" if message.contains("max_wal_senders") => Some(Unsupported::WalSendersExhausted),
        // configuration_limit_exceeded: "all replication slots are in use"
        "53400" if message.contains("replication slots") => Some(Unsupported::SlotsExhausted {
            slot: slot.to_owned(),
        }),
        // undefined_file: could not access file "pgoutput"
        "58P01" if message.contains("pgoutput") => Some(Unsupported::NoPgoutput),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::Class;

    fn class(problem: &Unsupported) -> Class {
        Retry::from(problem.clone()).class()
    }

    fn facts() -> ServerFacts {
        ServerFacts {
            version_num: 160_004,
            version: "16.4".into(),
            wal_level: "logical".into(),
            max_replication_slots: 10,
            max_wal_senders: 10,
            user: "relay".into(),
            replication: true,
            superuser: false,
        }
    }

    #[test]
    fn a_capable_server_has_no_problem() {
        assert!(facts().problems().is_empty());
        let superuser = ServerFacts {
            replication: false,
            superuser: true,
            ..facts()
        };
        assert!(superuser.problems().is_empty());
    }

    #[test]
    fn below_14_names_the_version_and_the_upgrade() {
        let old = ServerFacts {
            version_num: 130_016,
            version: "13.16".into(),
            ..facts()
        };
        let problems = old.problems();
        assert_eq!(
            problems,
            vec![Unsupported::ServerVersion {
                version: "13.16".into()
            }]
        );
        assert_eq!(
            problems[0].to_string(),
            "postgresql 13.16 is not supported: walrelay supports postgresql 14 and later; \
             fix: upgrade the server to postgresql 14 or later (pg_upgrade, or a dump and restore)"
        );
        assert_eq!(class(&problems[0]), Class::Definite);
    }

    #[test]
    fn every_missing_capability_is_named_with_its_fix() {
        let bare = ServerFacts {
            wal_level: "replica".into(),
            max_replication_slots: 0,
            max_wal_senders: 0,
            replication: false,
            ..facts()
        };
        let problems = bare.problems();
        let text: Vec<String> = problems
            .iter()
            .map(std::string::ToString::to_string)
            .collect();
        assert_eq!(
            text,
            vec![
                "wal_level is replica; logical decoding needs wal_level = logical; \
                 fix: ALTER SYSTEM SET wal_level = logical; then restart postgresql (a reload is not enough)",
                "max_replication_slots is 0: the server allows no replication slot; \
                 fix: ALTER SYSTEM SET max_replication_slots = 10 (at least 1 for walrelay); then restart postgresql",
                "max_wal_senders is 0: the server allows no replication connection; \
                 fix: ALTER SYSTEM SET max_wal_senders = 10 (at least 1 for walrelay); then restart postgresql",
                "role relay has neither REPLICATION nor superuser, so it may not stream; \
                 fix: ALTER ROLE \"relay\" REPLICATION",
            ]
        );
        assert!(problems.iter().all(|p| class(p) == Class::Definite));
    }

    #[test]
    fn server_refusals_map_to_capabilities() {
        let senders = refusal(
            "53300",
            "number of requested standby connections exceeds max_wal_senders (currently 1)",
            "s",
        )
        .expect("recognised");
        assert_eq!(senders, Unsupported::WalSendersExhausted);
        assert_eq!(class(&senders), Class::Transient);
        assert!(senders.fix().contains("max_wal_senders"));
        let slots =
            refusal("53400", "all replication slots are in use", "walrelay").expect("recognised");
        assert_eq!(
            slots.to_string(),
            "all replication slots are in use and walrelay is not one of them; fix: drop an unused \
             slot (SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE NOT \
             active ...) or raise max_replication_slots (restart needed)"
        );
        assert_eq!(class(&slots), Class::Transient);
        let plugin = refusal(
            "58P01",
            "could not access file \"pgoutput\": No such file or directory",
            "s",
        )
        .expect("recognised");
        assert_eq!(plugin, Unsupported::NoPgoutput);
        assert_eq!(class(&plugin), Class::Definite);
        assert_eq!(refusal("53300", "too many clients already", "s"), None);
        assert_eq!(refusal("42501", "permission denied", "s"), None);
    }

    #[test]
    fn shutdown_saving_starts_with_17() {
        let v = |version_num| ServerFacts {
            version_num,
            ..facts()
        };
        assert!(!v(160_004).saves_confirmed_at_shutdown());
        assert!(v(170_000).saves_confirmed_at_shutdown());
        assert!(v(180_001).saves_confirmed_at_shutdown());
    }
}
