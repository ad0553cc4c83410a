//! The PostgreSQL side's settings: the connection (hosts, role, TLS, channel
//! binding), the replication slot and publication, and the stream's timing.
//!
//! Owns the `[postgres]` and `[replication]` sections of the native TOML,
//! their defaults and their validation (libpq's rules for host lists, ports,
//! `target_session_attrs` and TLS keys, PostgreSQL's for slot names). It never connects: files named here are
//! only checked to be readable, and read again when connecting.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::secret::Secret;
use crate::setting::SettingError;

/// Default PostgreSQL port.
pub(crate) const DEFAULT_PG_PORT: u16 = 5432;
/// Default slot name (Debezium's is `debezium`; ours differs so both can coexist).
pub(crate) const DEFAULT_SLOT: &str = "walrelay";
/// Default publication name.
pub(crate) const DEFAULT_PUBLICATION: &str = "walrelay_outbox";
/// Default interval between standby status updates.
pub(crate) const DEFAULT_STATUS_INTERVAL_MS: u64 = 1_000;
/// Longest allowed status interval: well inside PostgreSQL's default
/// `wal_sender_timeout` of 60 s.
pub(crate) const MAX_STATUS_INTERVAL_MS: u64 = 10_000;
/// Default bound on silence from the server before the connection is
/// considered dead (the walsender sends keepalives at half its timeout).
pub(crate) const DEFAULT_RECEIVE_TIMEOUT_MS: u64 = 60_000;
/// Default TCP connect + authentication timeout.
pub(crate) const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 10_000;
/// Default first reconnect delay.
pub(crate) const DEFAULT_RECONNECT_MIN_MS: u64 = 200;
/// Default longest reconnect delay.
pub(crate) const DEFAULT_RECONNECT_MAX_MS: u64 = 10_000;

/// PostgreSQL connection.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostgresConfig {
    /// Host name or address, or several separated by commas (`"pg-a,pg-b"`),
    /// tried in order as libpq tries its `host` list (each within
    /// `connect_timeout_ms`) until one connects and passes
    /// `target_session_attrs`. Spaces around an entry are ignored; an empty
    /// entry is refused (libpq would mean a Unix socket, walrelay speaks TCP).
    pub host: String,
    /// Port: one for every host (`5432`), or one per host, as libpq's
    /// comma-separated string (`"5432,5433"`, an empty entry meaning 5432)
    /// or as a TOML array (`[5432, 5433]`).
    #[serde(default)]
    pub port: PortSetting,
    /// Which server of the host list is acceptable, as libpq's
    /// `target_session_attrs`: `any`, `read-write`, `read-only`, `primary`,
    /// `standby`, `prefer-standby`. Unset: `any` for one host (libpq's
    /// default) but `read-write` for several, a deliberate difference from
    /// libpq, so a relay given its cluster's hosts never settles on a
    /// standby.
    #[serde(default)]
    pub target_session_attrs: Option<TargetSessionAttrs>,
    /// Role; needs the REPLICATION attribute.
    pub user: String,
    /// Password written inline (prefer `password_env` or `password_file`).
    #[serde(default)]
    pub password: Option<Secret>,
    /// Name of an environment variable holding the password.
    #[serde(default)]
    pub(crate) password_env: Option<String>,
    /// Path of a file holding the password (trailing newline ignored).
    #[serde(default)]
    pub(crate) password_file: Option<PathBuf>,
    /// The database whose outbox tables are read (libpq's `dbname`);
    /// required, no default.
    pub dbname: String,
    /// TCP connect + authentication timeout in milliseconds.
    #[serde(default = "default_connect_timeout_ms")]
    pub(crate) connect_timeout_ms: u64,
    /// `application_name` reported to the server.
    #[serde(default = "default_application_name")]
    pub(crate) application_name: String,
    /// TLS use and verification, as libpq's `sslmode`.
    #[serde(default)]
    pub(crate) sslmode: SslMode,
    /// CA certificate file (PEM) verifying the server, or `system` for the
    /// system's trust store (which needs `sslmode = "verify-full"`). Unset:
    /// `~/.postgresql/root.crt` when it exists, as with libpq.
    #[serde(default)]
    pub(crate) sslrootcert: Option<String>,
    /// Client certificate file (PEM, may hold the chain). Unset:
    /// `~/.postgresql/postgresql.crt` when it exists.
    #[serde(default)]
    pub(crate) sslcert: Option<PathBuf>,
    /// Private key of the client certificate (PEM or DER PKCS#8; must not be
    /// readable by group or others). Unset: `~/.postgresql/postgresql.key`.
    #[serde(default)]
    pub(crate) sslkey: Option<PathBuf>,
    /// Passphrase of an encrypted `sslkey`, written inline (prefer
    /// `sslpassword_env` or `sslpassword_file`).
    #[serde(default)]
    pub(crate) sslpassword: Option<Secret>,
    /// Name of an environment variable holding the `sslkey` passphrase.
    #[serde(default)]
    pub(crate) sslpassword_env: Option<String>,
    /// Path of a file holding the `sslkey` passphrase.
    #[serde(default)]
    pub(crate) sslpassword_file: Option<PathBuf>,
    /// SCRAM channel binding, as libpq's `channel_binding`.
    #[serde(default)]
    pub(crate) channel_binding: ChannelBindingMode,
}

/// libpq's `sslmode`: whether TLS is used and what is verified.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum SslMode {
    /// Never TLS.
    Disable,
    /// Plain first; TLS only when the server refuses the plain connection.
    Allow,
    /// TLS when the server offers it, plain otherwise (libpq's default).
    #[default]
    Prefer,
    /// TLS or nothing; the server certificate is verified only when a root
    /// certificate is configured (then as `verify-ca`).
    Require,
    /// TLS, the server certificate chain verified against the root certificate.
    VerifyCa,
    /// As `verify-ca`, and the certificate must name the host.
    VerifyFull,
}

impl SslMode {
    /// Parses libpq's spelling.
    pub(crate) fn parse(value: &str) -> Option<SslMode> {
        Some(match value {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }

    /// libpq's spelling.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// `postgres.port` as written: one port, libpq's comma-separated list, or an
/// array. Checked against the host list by [`PostgresConfig::endpoints`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortSetting {
    /// One port for every host (a TOML integer).
    One(i64),
    /// libpq's comma-separated list, as written (a TOML string).
    List(String),
    /// One port per host (a TOML array of integers).
    Array(Vec<i64>),
}

impl Default for PortSetting {
    fn default() -> Self {
        PortSetting::One(i64::from(DEFAULT_PG_PORT))
    }
}

impl From<u16> for PortSetting {
    fn from(port: u16) -> Self {
        PortSetting::One(i64::from(port))
    }
}

impl<'de> Deserialize<'de> for PortSetting {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = PortSetting;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "postgres.port as a port (5432), a comma-separated list (\"5432,5433\") or an array ([5432, 5433])",
                )
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<PortSetting, E> {
                Ok(PortSetting::One(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<PortSetting, E> {
                Ok(PortSetting::One(i64::try_from(v).unwrap_or(i64::MAX)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<PortSetting, E> {
                Ok(PortSetting::List(v.to_owned()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<PortSetting, A::Error> {
                let mut ports = Vec::new();
                while let Some(port) = seq.next_element::<i64>()? {
                    ports.push(port);
                }
                Ok(PortSetting::Array(ports))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// libpq's `target_session_attrs`: what a server of the host list must be
/// for walrelay to stay on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetSessionAttrs {
    /// Whatever connects first.
    Any,
    /// A session that accepts read-write transactions by default: not in
    /// hot standby and `default_transaction_read_only` off.
    ReadWrite,
    /// The converse of `read-write`.
    ReadOnly,
    /// A server not in hot standby (not in recovery).
    Primary,
    /// A server in hot standby.
    Standby,
    /// A standby if any host is one; otherwise the hosts again, as `any`.
    PreferStandby,
}

impl TargetSessionAttrs {
    /// Every value, in libpq's spelling.
    pub(crate) const ALL: &'static str =
        "any, read-write, read-only, primary, standby, prefer-standby";

    /// Parses libpq's spelling.
    pub(crate) fn parse(value: &str) -> Option<TargetSessionAttrs> {
        Some(match value {
            "any" => TargetSessionAttrs::Any,
            "read-write" => TargetSessionAttrs::ReadWrite,
            "read-only" => TargetSessionAttrs::ReadOnly,
            "primary" => TargetSessionAttrs::Primary,
            "standby" => TargetSessionAttrs::Standby,
            "prefer-standby" => TargetSessionAttrs::PreferStandby,
            _ => return None,
        })
    }

    /// libpq's spelling.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            TargetSessionAttrs::Any => "any",
            TargetSessionAttrs::ReadWrite => "read-write",
            TargetSessionAttrs::ReadOnly => "read-only",
            TargetSessionAttrs::Primary => "primary",
            TargetSessionAttrs::Standby => "standby",
            TargetSessionAttrs::PreferStandby => "prefer-standby",
        }
    }
}

impl fmt::Display for TargetSessionAttrs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for TargetSessionAttrs {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = String::deserialize(deserializer)?;
        TargetSessionAttrs::parse(&value).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "invalid postgres.target_session_attrs {value:?}: expected one of {}",
                TargetSessionAttrs::ALL
            ))
        })
    }
}

/// One server of the host list: a host name or address and its port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// Host name or address, as configured (also the name `verify-full`
    /// checks the certificate against).
    pub(crate) host: String,
    /// TCP port.
    pub port: u16,
}

impl Endpoint {
    /// `host` at `port`.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        Endpoint {
            host: host.into(),
            port,
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// libpq's `channel_binding`: SCRAM-SHA-256-PLUS over TLS.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ChannelBindingMode {
    /// Never bind.
    Disable,
    /// Bind when the connection is TLS and the server offers it.
    #[default]
    Prefer,
    /// Refuse to authenticate without channel binding.
    Require,
}

impl fmt::Debug for PostgresConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("target_session_attrs", &self.target_session_attrs)
            .field("user", &self.user)
            .field("password", &self.password)
            .field("password_env", &self.password_env)
            .field("password_file", &self.password_file)
            .field("dbname", &self.dbname)
            .field("sslmode", &self.sslmode)
            .field("sslrootcert", &self.sslrootcert)
            .field("sslcert", &self.sslcert)
            .field("sslkey", &self.sslkey)
            .field("sslpassword", &self.sslpassword)
            .field("sslpassword_env", &self.sslpassword_env)
            .field("sslpassword_file", &self.sslpassword_file)
            .field("channel_binding", &self.channel_binding)
            .finish()
    }
}

/// Slot, publication and stream settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicationConfig {
    /// Logical replication slot name.
    #[serde(default = "default_slot")]
    pub slot: String,
    /// Publication name.
    #[serde(default = "default_publication")]
    pub publication: String,
    /// Create the slot when it does not exist. Only at first start: a slot
    /// that disappears while walrelay runs is a fatal error (recreating it
    /// would skip events).
    #[serde(default = "default_true")]
    pub(crate) create_slot: bool,
    /// With `create_slot`: when walrelay may create a slot that is missing
    /// at start. PostgreSQL keeps no trace of a dropped slot, so walrelay
    /// records each slot it uses in its publication's comment.
    #[serde(default)]
    pub(crate) slot_missing: SlotMissing,
    /// With `publication_mode = "table"`: create the publication
    /// `FOR TABLE <outbox>` when it does not exist (false: it must exist, as
    /// with mode `disabled`). Ignored by the other modes.
    #[serde(default = "default_true")]
    pub(crate) create_publication: bool,
    /// How the publication is created or checked (Debezium's
    /// `publication.autocreate.mode`, plus walrelay's own `table`).
    #[serde(default)]
    pub publication_mode: PublicationMode,
    /// The `publish` option used when walrelay creates the publication, e.g.
    /// `insert` (Debezium derives it from `skipped.operations`). Unset: mode
    /// `table` publishes `insert, update` (walrelay drops outbox deletes, so
    /// the walsender need not send them; `insert, update, delete` with
    /// `outbox.transaction_metadata`, whose END records count deletes); the
    /// other modes use PostgreSQL's default, as Debezium does. Existing
    /// publications are never changed for it.
    #[serde(default)]
    pub publish: Option<String>,
    /// What to do when the slot has no position of its own yet (Debezium's
    /// `snapshot.mode`).
    #[serde(default)]
    pub snapshot_mode: SnapshotMode,
    /// Drop the slot on an orderly shutdown (Debezium's `slot.drop.on.stop`).
    /// Everything written while walrelay is stopped is then lost to it; for
    /// tests and throwaway setups only.
    #[serde(default)]
    pub slot_drop_on_stop: bool,
    /// Make the slot a failover slot (PostgreSQL 17 and later; Debezium's
    /// `slot.failover`): walrelay creates it with `FAILOVER`, and turns
    /// failover on for an existing slot that lacks it, so that standbys
    /// with `sync_replication_slots = on` keep a copy that walrelay can
    /// continue from after a promotion. On an older server walrelay
    /// refuses to start rather than create a plain slot. False leaves an
    /// existing failover slot as it is.
    #[serde(default)]
    pub failover: bool,
    /// Milliseconds between standby status updates.
    #[serde(default = "default_status_interval_ms")]
    pub(crate) status_interval_ms: u64,
    /// Milliseconds of silence from the server after which the connection
    /// is considered dead and re-established.
    #[serde(default = "default_receive_timeout_ms")]
    pub(crate) receive_timeout_ms: u64,
    /// First reconnect delay in milliseconds (doubles up to the maximum, with jitter).
    #[serde(default = "default_reconnect_min_ms")]
    pub(crate) reconnect_min_ms: u64,
    /// Longest reconnect delay in milliseconds.
    #[serde(default = "default_reconnect_max_ms")]
    pub(crate) reconnect_max_ms: u64,
    /// Ask the server to stream large transactions while they run
    /// (pgoutput protocol version 2 with `streaming 'on'` on PostgreSQL 14
    /// and 15, 4 with `streaming 'parallel'` from 16, whose Stream Abort
    /// carries the abort LSN); walrelay spills them to temporary files
    /// until their commit, so its memory stays bounded whatever their size.
    /// Off: protocol version 1, whole transactions after their commit.
    #[serde(default = "default_true")]
    pub(crate) streaming: bool,
    /// Directory for the spill files of streamed transactions (unlinked
    /// temporary files, as large as the open transactions' outbox rows).
    /// Unset: the system temporary directory (`TMPDIR`, else `/tmp`),
    /// often a small tmpfs; point it at a disk with room.
    #[serde(default)]
    pub(crate) spill_dir: Option<PathBuf>,
    /// Microseconds to pause after each read from the server (on the
    /// reader thread), so the next read takes a batch: every
    /// read that wakes walrelay costs the walsender a wake-up too. Adds at
    /// most this much latency; 0 reads as soon as bytes arrive.
    #[serde(default = "default_read_coalesce_us")]
    pub(crate) read_coalesce_us: u64,
}

/// Default of `replication.read_coalesce_us`.
pub(crate) const DEFAULT_READ_COALESCE_US: u64 = 1000;

fn default_read_coalesce_us() -> u64 {
    DEFAULT_READ_COALESCE_US
}

impl Default for ReplicationConfig {
    fn default() -> Self {
        ReplicationConfig {
            slot: default_slot(),
            publication: default_publication(),
            create_slot: true,
            slot_missing: SlotMissing::IfNew,
            create_publication: true,
            publication_mode: PublicationMode::Table,
            publish: None,
            snapshot_mode: SnapshotMode::NoData,
            slot_drop_on_stop: false,
            failover: false,
            status_interval_ms: DEFAULT_STATUS_INTERVAL_MS,
            receive_timeout_ms: DEFAULT_RECEIVE_TIMEOUT_MS,
            reconnect_min_ms: DEFAULT_RECONNECT_MIN_MS,
            reconnect_max_ms: DEFAULT_RECONNECT_MAX_MS,
            streaming: true,
            spill_dir: None,
            read_coalesce_us: DEFAULT_READ_COALESCE_US,
        }
    }
}

/// When a slot missing at start may be created (`replication.slot_missing`).
/// A slot that disappears while walrelay runs is always fatal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SlotMissing {
    /// Create it unless the publication's comment records that this slot
    /// existed (walrelay adds that line once the slot exists; it needs
    /// ownership of the publication). A recorded slot that is missing was
    /// dropped, and a new one would skip what was written since: fatal.
    #[default]
    IfNew,
    /// Create it whenever it is missing, with a loud warning: events written
    /// since the old slot's position are skipped.
    Create,
    /// Never create it: the operator creates the slot.
    Fail,
}

/// How the publication is created or checked. Every mode then requires the
/// publication to publish the outbox table's inserts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum PublicationMode {
    /// walrelay's own: create `FOR TABLE <outbox>` when missing (if
    /// `create_publication`); an existing one is used as it is.
    #[default]
    Table,
    /// Debezium's `all_tables`: create `FOR ALL TABLES` when missing; an
    /// existing one is used as it is.
    AllTables,
    /// Debezium's `filtered`: create `FOR TABLE <outbox>` when missing, or
    /// `ALTER PUBLICATION ... SET TABLE <outbox>` when its table set
    /// differs; an existing `FOR ALL TABLES` publication is an error.
    Filtered,
    /// Debezium's `disabled`: the publication must exist.
    Disabled,
    /// Debezium's `no_tables`: create an empty publication when missing
    /// (walrelay then stops until the outbox is added to it).
    NoTables,
}

impl PublicationMode {
    /// The Debezium spelling (`publication.autocreate.mode`), or `table`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            PublicationMode::Table => "table",
            PublicationMode::AllTables => "all_tables",
            PublicationMode::Filtered => "filtered",
            PublicationMode::Disabled => "disabled",
            PublicationMode::NoTables => "no_tables",
        }
    }
}

/// What happens when walrelay starts on a slot with no position of its own
/// (Debezium's `snapshot.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotMode {
    /// Stream only: start at the slot's position (Debezium's `no_data`).
    #[default]
    NoData,
    /// Emit the outbox table's existing rows once, when walrelay creates the
    /// slot, then stream (Debezium's `initial`).
    Initial,
    /// Emit the outbox table's existing rows at every start, then stream.
    Always,
    /// Like `initial`, and also when the slot's position is no longer
    /// usable (Debezium's `when_needed`).
    WhenNeeded,
}

/// Checks a publication `publish` list: comma-separated `insert`, `update`,
/// `delete`, `truncate`, including `insert` (the outbox is inserts).
pub(crate) fn validate_publish(publish: &str) -> Result<(), SettingError> {
    let ops: Vec<&str> = publish.split(',').map(str::trim).collect();
    let invalid = |reason: String| SettingError::Invalid {
        key: "replication.publish".into(),
        reason,
    };
    for op in &ops {
        if !matches!(*op, "insert" | "update" | "delete" | "truncate") {
            return Err(invalid(format!(
                "{op:?} is not one of insert, update, delete, truncate"
            )));
        }
    }
    if !ops.contains(&"insert") {
        return Err(invalid(
            "must include insert: outbox events are inserts".into(),
        ));
    }
    Ok(())
}

/// Checks a replication slot name the way PostgreSQL does: 1 to 63
/// characters of `a-z`, `0-9` and `_`.
pub(crate) fn validate_slot_name(name: &str) -> Result<(), SettingError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(SettingError::Invalid {
            key: "replication.slot".into(),
            reason: format!(
                "{name:?} is not a valid slot name (1 to 63 characters of lower-case letters, digits and underscores)"
            ),
        })
    }
}

/// The `[postgres]` TLS keys: combinations libpq refuses, and files that
/// cannot be read (named by key, checked again when connecting).
fn validate_postgres_tls(pg: &PostgresConfig) -> Result<(), SettingError> {
    let invalid = |key: &str, reason: String| SettingError::Invalid {
        key: key.into(),
        reason,
    };
    if pg.channel_binding == ChannelBindingMode::Require && pg.sslmode == SslMode::Disable {
        return Err(invalid(
            "postgres.channel_binding",
            "require needs TLS, but postgres.sslmode is disable".into(),
        ));
    }
    match pg.sslrootcert.as_deref() {
        Some("system") if pg.sslmode != SslMode::VerifyFull => {
            return Err(invalid(
                "postgres.sslrootcert",
                format!(
                    "system needs postgres.sslmode = \"verify-full\" (it is {:?})",
                    pg.sslmode.as_str()
                ),
            ))
        }
        Some("system") => {}
        Some("") => return Err(invalid("postgres.sslrootcert", "must not be empty".into())),
        Some(path) => readable("postgres.sslrootcert", Path::new(path))?,
        None => {}
    }
    if let Some(cert) = &pg.sslcert {
        readable("postgres.sslcert", cert)?;
    }
    if let Some(key) = &pg.sslkey {
        readable("postgres.sslkey", key)?;
    }
    if pg.sslcert.is_some() != pg.sslkey.is_some() {
        let (key, other) = if pg.sslcert.is_some() {
            ("postgres.sslkey", "postgres.sslcert")
        } else {
            ("postgres.sslcert", "postgres.sslkey")
        };
        return Err(invalid(key, format!("must be set together with {other}")));
    }
    Ok(())
}

/// `postgres.host` split as libpq splits it (commas), each entry trimmed.
fn parse_hosts(value: &str) -> Result<Vec<String>, SettingError> {
    if value.trim().is_empty() {
        return Err(SettingError::invalid("postgres.host", "must not be empty"));
    }
    let entries: Vec<&str> = value.split(',').map(str::trim).collect();
    if let Some(i) = entries.iter().position(|h| h.is_empty()) {
        return Err(SettingError::invalid(
            "postgres.host",
            format!(
                "entry {} of {:?} is empty (libpq would use a Unix socket; walrelay connects over TCP only)",
                i + 1,
                value
            ),
        ));
    }
    Ok(entries.into_iter().map(str::to_owned).collect())
}

/// `postgres.port` as ports: libpq's list allows an empty entry for the
/// default port; every port is 1 to 65535.
fn parse_ports(setting: &PortSetting) -> Result<Vec<u16>, SettingError> {
    let invalid = |reason: String| SettingError::invalid("postgres.port", reason);
    let number = |n: i64| {
        u16::try_from(n)
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| invalid(format!("{n} is not a port (1 to 65535)")))
    };
    match setting {
        PortSetting::One(n) => Ok(vec![number(*n)?]),
        PortSetting::Array(ports) if ports.is_empty() => Err(invalid("must not be empty".into())),
        PortSetting::Array(ports) => ports.iter().map(|&n| number(n)).collect(),
        PortSetting::List(text) => text
            .split(',')
            .map(str::trim)
            .map(|entry| match entry {
                "" => Ok(DEFAULT_PG_PORT),
                _ => entry
                    .parse::<i64>()
                    .map_err(|_| invalid(format!("{entry:?} in {text:?} is not a port number")))
                    .and_then(number),
            })
            .collect(),
    }
}

fn readable(key: &str, path: &Path) -> Result<(), SettingError> {
    std::fs::File::open(path)
        .map(drop)
        .map_err(|e| SettingError::Invalid {
            key: key.into(),
            reason: format!("cannot read {}: {e}", path.display()),
        })
}
fn default_connect_timeout_ms() -> u64 {
    DEFAULT_CONNECT_TIMEOUT_MS
}
fn default_application_name() -> String {
    "walrelay".into()
}
fn default_slot() -> String {
    DEFAULT_SLOT.into()
}
fn default_publication() -> String {
    DEFAULT_PUBLICATION.into()
}
fn default_true() -> bool {
    true
}
fn default_status_interval_ms() -> u64 {
    DEFAULT_STATUS_INTERVAL_MS
}
fn default_receive_timeout_ms() -> u64 {
    DEFAULT_RECEIVE_TIMEOUT_MS
}
fn default_reconnect_min_ms() -> u64 {
    DEFAULT_RECONNECT_MIN_MS
}
fn default_reconnect_max_ms() -> u64 {
    DEFAULT_RECONNECT_MAX_MS
}

/// One secret given inline, by environment variable (`<key>_env`) or by
/// file (`<key>_file`, trailing newline ignored); errors name the key, never
/// the value.
fn resolve_secret(
    key: &str,
    inline: Option<Secret>,
    env: Option<&str>,
    file: Option<&Path>,
) -> Result<Option<Secret>, SettingError> {
    let count = [inline.is_some(), env.is_some(), file.is_some()]
        .iter()
        .filter(|s| **s)
        .count();
    if count > 1 {
        return Err(SettingError::Invalid {
            key: key.into(),
            reason: format!("set only one of {key}, {key}_env and {key}_file"),
        });
    }
    if let Some(var) = env {
        let value = std::env::var(var).map_err(|_| SettingError::Invalid {
            key: format!("{key}_env"),
            reason: format!("environment variable {var} is not set"),
        })?;
        return Ok(Some(Secret::new(value)));
    }
    if let Some(file) = file {
        let value = std::fs::read_to_string(file).map_err(|e| SettingError::Invalid {
            key: format!("{key}_file"),
            reason: format!("cannot read {}: {e}", file.display()),
        })?;
        return Ok(Some(Secret::new(value.trim_end_matches(['\r', '\n']))));
    }
    Ok(inline)
}

impl PostgresConfig {
    /// Resolves the password and the key passphrase given by environment
    /// variable or file; errors name the key, never the value.
    pub(crate) fn resolve_secrets(&mut self) -> Result<(), SettingError> {
        let sources = [
            self.password.is_some(),
            self.password_env.is_some(),
            self.password_file.is_some(),
        ];
        if sources.iter().filter(|s| **s).count() > 1 {
            return Err(SettingError::invalid(
                "postgres.password",
                "set only one of password, password_env and password_file",
            ));
        }
        if let Some(var) = &self.password_env {
            let value = std::env::var(var).map_err(|_| {
                SettingError::invalid(
                    "postgres.password_env",
                    format!("environment variable {var} is not set"),
                )
            })?;
            self.password = Some(Secret::new(value));
        }
        if let Some(file) = &self.password_file {
            let value = std::fs::read_to_string(file).map_err(|e| {
                SettingError::invalid(
                    "postgres.password_file",
                    format!("cannot read {}: {e}", file.display()),
                )
            })?;
            self.password = Some(Secret::new(value.trim_end_matches(['\r', '\n'])));
        }
        self.sslpassword = resolve_secret(
            "postgres.sslpassword",
            self.sslpassword.take(),
            self.sslpassword_env.as_deref(),
            self.sslpassword_file.as_deref(),
        )?;
        Ok(())
    }

    /// The host list with each host's port, in the order they are tried
    /// (libpq's rules: one port for all hosts, or exactly one per host).
    pub(crate) fn endpoints(&self) -> Result<Vec<Endpoint>, SettingError> {
        let hosts = parse_hosts(&self.host)?;
        let ports = parse_ports(&self.port)?;
        if ports.len() != 1 && ports.len() != hosts.len() {
            return Err(SettingError::invalid(
                "postgres.port",
                format!(
                    "{} ports for {} hosts in postgres.host: give one port for every host or one per host",
                    ports.len(),
                    hosts.len()
                ),
            ));
        }
        Ok(hosts
            .into_iter()
            .enumerate()
            .map(|(i, host)| Endpoint::new(host, ports.get(i).copied().unwrap_or(ports[0])))
            .collect())
    }

    /// `target_session_attrs` in effect: as set, else `any` for one host and
    /// `read-write` for several (walrelay's default, not libpq's).
    pub fn effective_target_session_attrs(&self) -> TargetSessionAttrs {
        match self.target_session_attrs {
            Some(target) => target,
            None if self.host.split(',').count() > 1 => TargetSessionAttrs::ReadWrite,
            None => TargetSessionAttrs::Any,
        }
    }

    /// Checks the section; the error names the key and why.
    pub(crate) fn validate(&self) -> Result<(), SettingError> {
        self.endpoints()?;
        if self.user.is_empty() {
            return Err(SettingError::invalid("postgres.user", "must not be empty"));
        }
        if self.dbname.is_empty() {
            return Err(SettingError::invalid(
                "postgres.dbname",
                "must not be empty",
            ));
        }
        validate_postgres_tls(self)
    }
}

impl ReplicationConfig {
    /// Checks the section; the error names the key and why.
    pub(crate) fn validate(&self) -> Result<(), SettingError> {
        validate_slot_name(&self.slot)?;
        if self.publication.is_empty() || self.publication.len() > 63 {
            return Err(SettingError::invalid(
                "replication.publication",
                "must be 1 to 63 bytes",
            ));
        }
        let interval = self.status_interval_ms;
        if interval == 0 || interval > MAX_STATUS_INTERVAL_MS {
            return Err(SettingError::invalid(
                "replication.status_interval_ms",
                format!("must be between 1 and {MAX_STATUS_INTERVAL_MS}"),
            ));
        }
        if self.read_coalesce_us > 100_000 {
            return Err(SettingError::invalid(
                "replication.read_coalesce_us",
                "must be at most 100000 (0.1 s); it is added to every event's latency",
            ));
        }
        if self.receive_timeout_ms < 2 * interval {
            return Err(SettingError::invalid(
                "replication.receive_timeout_ms",
                "must be at least twice replication.status_interval_ms",
            ));
        }
        if self.reconnect_min_ms == 0 || self.reconnect_min_ms > self.reconnect_max_ms {
            return Err(SettingError::invalid(
                "replication.reconnect_min_ms",
                "must be above 0 and at most replication.reconnect_max_ms",
            ));
        }
        if let Some(publish) = &self.publish {
            validate_publish(publish)?;
        }
        Ok(())
    }

    /// The standby status update interval.
    pub(crate) fn status_interval(&self) -> Duration {
        Duration::from_millis(self.status_interval_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[postgres]` with `extra` lines, parsed and validated.
    fn section(extra: &str) -> Result<PostgresConfig, String> {
        let text = format!("user = \"app\"\ndbname = \"app\"\n{extra}\n");
        let pg: PostgresConfig = toml::from_str(&text).map_err(|e| e.message().to_owned())?;
        pg.validate().map_err(|e| e.to_string())?;
        Ok(pg)
    }

    fn endpoints(extra: &str) -> Vec<String> {
        section(extra)
            .unwrap()
            .endpoints()
            .unwrap()
            .iter()
            .map(Endpoint::to_string)
            .collect()
    }

    fn refused(extra: &str, key: &str) -> String {
        let err = section(extra).expect_err("refused");
        assert!(err.contains(key), "{key} not named in: {err}");
        err
    }

    #[test]
    fn one_port_applies_to_every_host() {
        assert_eq!(endpoints("host = \"pg\""), ["pg:5432"]);
        assert_eq!(
            endpoints("host = \"pg-a, pg-b\"\nport = 6432"),
            ["pg-a:6432", "pg-b:6432"]
        );
        assert_eq!(
            endpoints("host = \"pg-a,pg-b\"\nport = \"6432\""),
            ["pg-a:6432", "pg-b:6432"]
        );
    }

    #[test]
    fn ports_as_list_or_array_pair_with_hosts() {
        assert_eq!(
            endpoints("host = \"pg-a,pg-b\"\nport = \"5433, 5434\""),
            ["pg-a:5433", "pg-b:5434"]
        );
        assert_eq!(
            endpoints("host = \"pg-a,pg-b\"\nport = [5433, 5434]"),
            ["pg-a:5433", "pg-b:5434"]
        );
        // libpq: an empty entry is the default port.
        assert_eq!(
            endpoints("host = \"pg-a,pg-b\"\nport = \",5434\""),
            ["pg-a:5432", "pg-b:5434"]
        );
        assert_eq!(endpoints("host = \"::1\"\nport = 5433"), ["[::1]:5433"]);
    }

    #[test]
    fn bad_hosts_and_ports_name_the_key() {
        refused("host = \"\"", "postgres.host");
        let err = refused("host = \"pg-a,,pg-b\"", "postgres.host");
        assert!(err.contains("entry 2"), "{err}");
        let err = refused(
            "host = \"pg-a,pg-b,pg-c\"\nport = [5432, 5433]",
            "postgres.port",
        );
        assert!(err.contains("2 ports for 3 hosts"), "{err}");
        refused("host = \"pg\"\nport = \"54x2\"", "postgres.port");
        refused("host = \"pg\"\nport = 70000", "postgres.port");
        refused("host = \"pg\"\nport = 0", "postgres.port");
        refused("host = \"pg\"\nport = []", "postgres.port");
        // A TOML type the key does not take.
        refused("host = \"pg\"\nport = true", "postgres.port");
        refused(
            "host = \"pg\"\ntarget_session_attrs = \"master\"",
            "postgres.target_session_attrs",
        );
    }

    #[test]
    fn target_defaults_to_any_for_one_host_and_read_write_for_several() {
        let target = |extra: &str| section(extra).unwrap().effective_target_session_attrs();
        assert_eq!(target("host = \"pg\""), TargetSessionAttrs::Any);
        assert_eq!(
            target("host = \"pg-a,pg-b\""),
            TargetSessionAttrs::ReadWrite
        );
        assert_eq!(
            target("host = \"pg-a,pg-b\"\ntarget_session_attrs = \"any\""),
            TargetSessionAttrs::Any
        );
        for value in [
            "any",
            "read-write",
            "read-only",
            "primary",
            "standby",
            "prefer-standby",
        ] {
            let t = target(&format!(
                "host = \"pg\"\ntarget_session_attrs = \"{value}\""
            ));
            assert_eq!(t.as_str(), value);
        }
    }
}
