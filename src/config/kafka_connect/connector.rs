//! The Debezium PostgreSQL connector's own keys: connector class and tasks,
//! `database.*` (connection and TLS), plugin, slot and publication, snapshot
//! mode, the table and schema lists, skipped operations, topic prefix and
//! headers, heartbeats; and the lists of connector keys that are ignored,
//! accepted at their default only, or refused.
//!
//! Every connector key walrelay knows of is in exactly one place: read in
//! [`translate_connector`], one step per group of keys (or, for `errors.*`,
//! in `super::errors`; for `transforms`, in `super::transforms`; for
//! converters, in `super::converters`) or listed here, one comment per key;
//! any other key is warned about as unknown by [`classify_rest`]. It never
//! logs a value, never puts a possibly secret value in an error, and never
//! connects to the database it describes.

use std::path::PathBuf;

use super::errors::{translate_errors, IGNORED_ERRORS_KEYS, IGNORED_ERRORS_PREFIXES};
use super::{Draft, Keys, Notes, OFFSETS_IN_SLOT};
use crate::config::ConfigError;
use crate::postgres::config::{
    validate_slot_name, PostgresConfig, PublicationMode, ReplicationConfig, SnapshotMode, SslMode,
    TargetSessionAttrs, DEFAULT_PG_PORT,
};
use crate::router::FieldNameAdjustment;
use crate::secret::Secret;
use crate::setting::SettingError;
use crate::txn::config::{
    parse_qualified_name, MessageSelection, OutboxTableConfig, PrefixRule, SkippedOperations,
};

/// The only connector walrelay replaces.
const POSTGRES_CONNECTOR: &str = "io.debezium.connector.postgresql.PostgresConnector";
/// Debezium's default `slot.name`.
pub(super) const DEBEZIUM_SLOT: &str = "debezium";
/// Debezium's default `publication.name`.
pub(super) const DEBEZIUM_PUBLICATION: &str = "dbz_publication";

/// Connector keys that do not change what reaches Kafka for an outbox:
/// warned about once, by name, and ignored.
#[rustfmt::skip]
pub(super) const IGNORED_CONNECTOR_KEYS: &[(&str, &str)] = &[
    // Queueing between Debezium's reader and Connect's poll loop; walrelay's
    // bounded channels do this job.
    ("max.batch.size", "ignored: walrelay sizes its own batches"),
    ("max.queue.size", "ignored: walrelay sizes its own queues"),
    ("max.queue.size.in.bytes", "ignored: walrelay sizes its own queues"),
    ("poll.interval.ms", "ignored: walrelay does not poll"),
    // Debezium's status interval (default 10 s); walrelay sends standby
    // status every replication.status_interval_ms (1 s).
    ("status.update.interval.ms", "ignored: walrelay uses replication.status_interval_ms (default 1000)"),
    // Retry knobs: walrelay retries with its own exponential backoff.
    ("retriable.restart.connector.wait.ms", "ignored: walrelay reconnects with its own backoff"),
    ("slot.max.retries", "ignored: walrelay reconnects with its own backoff (a busy slot is retried forever)"),
    ("slot.retry.delay.ms", "ignored: walrelay reconnects with its own backoff"),
    ("connection.validation.timeout.ms", "ignored: walrelay uses its own connect timeout"),
    ("database.tcpKeepAlive", "ignored: walrelay detects dead connections with replication.receive_timeout_ms"),
    ("database.initial.statements", "ignored: walrelay runs no statements on connect"),
    ("database.query.timeout.ms", "ignored"),
    ("query.fetch.size", "ignored"),
    // LSN flushing: walrelay confirms exactly what Kafka acknowledged.
    ("lsn.flush.timeout.ms", "ignored: walrelay confirms the slot position with standby status updates"),
    ("lsn.flush.timeout.action", "ignored: walrelay confirms the slot position with standby status updates"),
    ("offset.mismatch.strategy", "ignored: walrelay keeps its position in the replication slot (trust_slot)"),
    ("xmin.fetch.interval.ms", "ignored: walrelay does not track xmin"),
    // Offsets: Debezium Server puts the offset store under debezium.source.
    ("offset.storage", OFFSETS_IN_SLOT),
    ("offset.storage.file.filename", OFFSETS_IN_SLOT),
    ("offset.storage.topic", OFFSETS_IN_SLOT),
    ("offset.storage.partitions", OFFSETS_IN_SLOT),
    ("offset.storage.replication.factor", OFFSETS_IN_SLOT),
    ("offset.flush.interval.ms", OFFSETS_IN_SLOT),
    ("offset.flush.timeout.ms", OFFSETS_IN_SLOT),
    // Affects only UPDATE events, which EventRouter drops or fails on per
    // table.op.invalid.behavior.
    ("skip.messages.without.change", "ignored: updates are handled by table.op.invalid.behavior"),
    // Snapshot tuning: the snapshot itself is snapshot.mode.
    ("snapshot.fetch.size", "ignored"),
    ("snapshot.lock.timeout.ms", "ignored"),
    ("snapshot.delay.ms", "ignored"),
    ("snapshot.max.threads", "ignored"),
    ("snapshot.isolation.mode", "ignored"),
    ("snapshot.query.mode.custom.name", "ignored: only used with snapshot.query.mode=custom, which walrelay refuses"),
    ("snapshot.locking.mode", "ignored"),
    ("streaming.delay.ms", "ignored"),
    // Only the names of topics walrelay never writes (data-change topics
    // before EventRouter) or metrics.
    ("topic.cache.size", "ignored"),
    ("custom.metric.tags", "ignored: walrelay exposes its own metrics"),
    ("sourceinfo.struct.maker", "ignored: the source block never reaches the outbox record"),
    ("schema.refresh.mode", "ignored"),
    ("include.unknown.datatypes", "ignored: outbox columns have known types"),
    ("unavailable.value.placeholder", "ignored: only affects TOASTed values in updates"),
    ("table.ignore.builtin", "ignored"),
    ("read.only", "ignored: walrelay writes nothing to the source database"),
    ("replica.identity.autoset.values", "ignored: walrelay never alters replica identity"),
    // Signals, notifications, incremental snapshots: operational features
    // walrelay does not have.
    ("signal.data.collection", "ignored: walrelay has no signal channel"),
    ("signal.enabled.channels", "ignored: walrelay has no signal channel"),
    ("signal.poll.interval.ms", "ignored: walrelay has no signal channel"),
    ("notification.sink.topic.name", "ignored: walrelay has no notifications"),
    ("incremental.snapshot.chunk.size", "ignored: walrelay has no incremental snapshots"),
    ("incremental.snapshot.watermarking.strategy", "ignored: walrelay has no incremental snapshots"),
    // Kafka Connect: walrelay does not create topics (broker auto-creation
    // or your own tooling does).
    ("topic.creation.enable", "ignored: walrelay does not create topics"),
    // KIP-618's exactly.once.support, transaction.boundary,
    // transaction.boundary.interval.ms and offsets.storage.topic are
    // decided in super::exactly_once, never here.
    ("config.action.reload", "ignored"),
    // The schema-history store of other connectors; PostgreSQL has none.
    ("schema.history.internal", "ignored: the PostgreSQL connector has no schema history"),
    ("database.server.name", "ignored: replaced by topic.prefix in Debezium 2.0"),
];

/// Connector key prefixes ignored with a warning.
#[rustfmt::skip]
const IGNORED_CONNECTOR_PREFIXES: &[(&str, &str)] = &[
    ("topic.creation.", "ignored: walrelay does not create topics"),
    ("offset.storage.", OFFSETS_IN_SLOT),
    ("schema.history.internal.", "ignored: the PostgreSQL connector has no schema history"),
    ("incremental.snapshot.", "ignored: walrelay has no incremental snapshots"),
    ("database.ssl", "ignored: walrelay reads database.sslmode, sslrootcert, sslcert, sslkey and sslpassword only"),
    ("driver.", "ignored: walrelay does not use JDBC"),
    ("internal.", "ignored"),
];

/// Connector keys accepted only at the listed values (Debezium's default,
/// or values equivalent for an outbox); any other value is refused.
#[rustfmt::skip]
pub(super) const DEFAULT_ONLY_CONNECTOR_KEYS: &[(&str, &[&str], &str)] = &[
    // Debezium's failure handling: `warn`/`skip` would drop events walrelay
    // stops on.
    ("event.processing.failure.handling.mode", &["fail"], "walrelay stops on an event it cannot process"),
    // LSN flushing must stay on: `manual` never confirms.
    ("lsn.flush.mode", &["connector", "connector_and_driver"], "walrelay always confirms the slot position itself"),
    ("flush.lsn.source", &["true"], "walrelay always confirms the slot position itself"),
    ("include.schema.comments", &["false"], "schemas would carry comments"),
    // The strategy and the delimiter name the heartbeat and transaction
    // topics and the table topic predicates see; walrelay names them as
    // Debezium's two built-in strategies do with ".".
    ("topic.naming.strategy", &["io.debezium.schema.SchemaTopicNamingStrategy", "io.debezium.schema.DefaultTopicNamingStrategy"], "another strategy names the heartbeat and transaction topics differently"),
    ("topic.delimiter", &["."], "walrelay joins the heartbeat and transaction topic names (and the table topic predicates see) with \".\""),
    ("transaction.metadata.factory", &["io.debezium.pipeline.txmetadata.DefaultTransactionMetadataFactory"], "another factory shapes the transaction records and blocks differently"),
    // A custom snapshot query selects other rows than the whole table.
    ("snapshot.query.mode", &["select_all"], "walrelay's snapshot selects every row of the outbox table"),
    ("datatype.propagate.source.type", &[""], "schemas would carry source type parameters"),
    ("publish.via.partition.root", &["false"], "walrelay does not create partition-root publications"),
    ("snapshot.select.statement.overrides", &[""], "walrelay snapshots the whole outbox table"),
    ("converters", &[""], "custom converters change column values"),
    ("post.processors", &[""], "post processors change events"),
    ("message.key.columns", &[""], "it changes the keys of data-change events walrelay never emits; remove it"),
    ("slot.stream.params", &[""], "walrelay sets the pgoutput options itself"),
    ("table.exclude.list", &[""], "walrelay relays exactly table.include.list"),
    ("column.include.list", &[""], "columns would be missing from the outbox row"),
    ("column.exclude.list", &[""], "columns would be missing from the outbox row"),
];

/// Connector key prefixes refused at any value.
#[rustfmt::skip]
const REFUSED_CONNECTOR_PREFIXES: &[(&str, &str)] = &[
    // Column transformations change values in the outbox row.
    ("column.", "column transformations change the outbox row; walrelay relays columns as they are"),
    ("snapshot.select.statement.overrides.", "walrelay snapshots the whole outbox table"),
    ("snapshot.mode.", "walrelay implements snapshot.mode no_data, initial, always and when_needed only"),
    ("converters.", "custom converters change column values"),
    ("post.processors.", "post processors change events"),
    ("slot.stream.params.", "walrelay sets the pgoutput options itself"),
];

/// Whether Debezium's `database.hostname` validation accepts `host`.
fn is_debezium_hostname(host: &str) -> bool {
    !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// pgjdbc's `targetServerType`, which Debezium passes to the driver from
/// `database.targetServerType` or `driver.targetServerType` (the
/// `database.` one wins, as in Debezium's merge), as the native
/// `postgres.target_session_attrs`. pgjdbc's `primary` is a server not in
/// hot standby whose `transaction_read_only` is off, libpq's `read-write`
/// test; `secondary` the converse, libpq's `read-only`. With Debezium's one
/// host the `prefer*` values accept whatever connects, as `any` does.
fn translate_target_server_type(c: &mut Keys) -> Result<Option<TargetSessionAttrs>, ConfigError> {
    let database = c.take("database.targetServerType");
    let driver = c.take("driver.targetServerType");
    let (key, value) = match (database, driver) {
        (Some(v), _) => ("database.targetServerType", v),
        (None, Some(v)) => ("driver.targetServerType", v),
        (None, None) => return Ok(None),
    };
    // pgjdbc's HostRequirement.getTargetServerType: exact enum names, with
    // slave read as secondary and master as primary.
    let target = match value.as_str() {
        "any" | "preferPrimary" | "preferSecondary" | "preferSlave" => TargetSessionAttrs::Any,
        "primary" | "master" => TargetSessionAttrs::ReadWrite,
        "secondary" | "slave" => TargetSessionAttrs::ReadOnly,
        other => {
            return Err(c.invalid(
                key,
                format!(
                    "{other:?} is not a pgjdbc targetServerType (any, primary, secondary, preferPrimary, preferSecondary; pgjdbc refuses it too)"
                ),
            ))
        }
    };
    Ok(Some(target))
}

/// Translates the Debezium PostgreSQL connector's keys (without any
/// `debezium.source.` prefix) into `draft`. Converter and producer keys are
/// not handled here. Every key of `c` is consumed or warned about.
///
/// The steps run in a fixed order, each taking its own keys: where two keys
/// are wrong, the one of the earlier step is the one refused.
pub(in crate::config) fn translate_connector(
    c: &mut Keys,
    draft: &mut Draft,
    notes: &mut Notes,
) -> Result<(), ConfigError> {
    translate_class_and_tasks(c, draft)?;
    draft.postgres = Some(translate_connection(c)?);
    check_plugin(c)?;
    translate_slot_and_publication(c, &mut draft.replication)?;
    translate_snapshot_mode(c, &mut draft.replication)?;
    draft.message_rule = translate_message_prefixes(c)?;
    // Table rows' delete tombstones never reach Kafka (EventRouter drops
    // them), but DecodeLogicalDecodingMessageContent fails on them
    // (`super::transforms`).
    if c.map.contains_key("tombstones.on.delete") {
        draft.tombstones_on_delete = Some(c.take_bool("tombstones.on.delete", true)?);
    }
    translate_captured_tables(c, draft, notes)?;
    translate_skipped_operations(c, draft)?;
    translate_column_types(c, draft)?;
    translate_naming(c, draft)?;
    translate_transaction_metadata(c, draft)?;
    translate_errors(c, draft, notes)?;
    translate_heartbeats(c, draft)?;
    check_snapshot_collections(c, draft, notes)?;
    check_notifications(c, notes)
}

/// `connector.class` must be Debezium's PostgreSQL connector, and
/// `tasks.max` 1; `name` names the pipeline and is part of its
/// transactional id in exactly-once mode (`super::exactly_once`).
fn translate_class_and_tasks(c: &mut Keys, draft: &mut Draft) -> Result<(), ConfigError> {
    let class = c.take_required(
        "connector.class",
        "walrelay replaces Debezium's PostgreSQL connector",
    )?;
    if class != POSTGRES_CONNECTOR {
        return Err(c.unsupported(
            "connector.class",
            format!("walrelay replaces {POSTGRES_CONNECTOR} only, not {class}"),
        ));
    }
    draft.connector_name = c.take("name").filter(|n| !n.is_empty());
    if let Some(tasks) = c.take("tasks.max") {
        if tasks != "1" {
            return Err(c.unsupported(
                "tasks.max",
                "walrelay runs one task per outbox (Debezium's PostgreSQL connector uses one anyway); set 1",
            ));
        }
    }
    Ok(())
}

/// The `database.*` keys of the connection: one host (as Debezium takes
/// it), port, target server type, role, password and database, then TLS.
/// The password stays a [`Secret`]; timeouts and the application name are
/// walrelay's own.
fn translate_connection(c: &mut Keys) -> Result<PostgresConfig, ConfigError> {
    let host = take_hostname(c)?;
    let port = match c.take("database.port") {
        None => DEFAULT_PG_PORT,
        Some(p) => p
            .parse()
            .map_err(|_| c.invalid("database.port", format!("{p:?} is not a port number")))?,
    };
    let target_session_attrs = translate_target_server_type(c)?;
    let user = c.take_required("database.user", "the role walrelay connects as")?;
    let password = c.take_raw("database.password").map(Secret::new);
    let dbname = c.take_required("database.dbname", "the database holding the outbox table")?;
    let mut postgres = PostgresConfig {
        host,
        port: port.into(),
        target_session_attrs,
        user,
        password,
        password_env: None,
        password_file: None,
        dbname,
        connect_timeout_ms: crate::postgres::config::DEFAULT_CONNECT_TIMEOUT_MS,
        application_name: "walrelay".into(),
        sslmode: SslMode::default(),
        sslrootcert: None,
        sslcert: None,
        sslkey: None,
        sslpassword: None,
        sslpassword_env: None,
        sslpassword_file: None,
        channel_binding: Default::default(),
    };
    translate_tls(c, &mut postgres)?;
    Ok(postgres)
}

/// `database.hostname`, required. Debezium 3.6 takes one host: it validates
/// database.hostname against ^[a-zA-Z0-9-_.]+$ when the task starts
/// (RelationalDatabaseConnectorConfig.validateHostname), so neither
/// pgjdbc's "h1,h2" nor "h1:5433" reaches its JDBC URL, and
/// database.port is one integer.
fn take_hostname(c: &mut Keys) -> Result<String, ConfigError> {
    let host = c.take_required("database.hostname", "the PostgreSQL server to read from")?;
    if !is_debezium_hostname(&host) {
        return Err(c.invalid(
            "database.hostname",
            format!(
                "{host:?} has invalid format: Debezium accepts one host name or IPv4 address \
                 (letters, digits, '-', '_' and '.' only); for several hosts, use walrelay's \
                 native TOML (postgres.host = \"pg-a,pg-b\")"
            ),
        ));
    }
    Ok(host)
}

/// TLS: pgjdbc's libpq-style keys (its LibPQFactory) into `postgres`,
/// Debezium's default sslmode being prefer like libpq's. The Java-only
/// factory, host name verifier and password callback are refused unless
/// they name pgjdbc's own LibPQFactory (or nothing).
fn translate_tls(c: &mut Keys, postgres: &mut PostgresConfig) -> Result<(), ConfigError> {
    if let Some(mode) = c.take("database.sslmode") {
        postgres.sslmode = SslMode::parse(&mode.to_ascii_lowercase()).ok_or_else(|| {
            c.invalid(
                "database.sslmode",
                format!("{mode:?} is not one of disable, allow, prefer, require, verify-ca, verify-full"),
            )
        })?;
    }
    postgres.sslrootcert = c.take("database.sslrootcert").filter(|v| !v.is_empty());
    postgres.sslcert = c
        .take("database.sslcert")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    postgres.sslkey = c
        .take("database.sslkey")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    postgres.sslpassword = c.take_raw("database.sslpassword").map(Secret::new);
    if let Some(factory) = c.take("database.sslfactory") {
        if !matches!(factory.as_str(), "" | "org.postgresql.ssl.LibPQFactory") {
            return Err(c.unsupported(
                "database.sslfactory",
                "walrelay implements libpq's (and pgjdbc's LibPQFactory) TLS settings only: use database.sslmode, database.sslrootcert, database.sslcert and database.sslkey",
            ));
        }
    }
    for key in [
        "database.sslhostnameverifier",
        "database.sslpasswordcallback",
    ] {
        if c.take(key).is_some_and(|v| !v.is_empty()) {
            return Err(c.unsupported(
                key,
                "it names Java code; walrelay verifies host names as libpq does (database.sslmode=verify-full)",
            ));
        }
    }
    Ok(())
}

/// `plugin.name` must be set, and to pgoutput: Debezium's default is
/// decoderbufs, which walrelay cannot read.
fn check_plugin(c: &mut Keys) -> Result<(), ConfigError> {
    match c.take("plugin.name").as_deref() {
        Some("pgoutput") => Ok(()),
        None => Err(c.unsupported(
            "plugin.name",
            "Debezium's default is decoderbufs; walrelay reads pgoutput only: set plugin.name=pgoutput (the slot must be a pgoutput slot)",
        )),
        Some(other) => Err(c.unsupported(
            "plugin.name",
            format!("walrelay reads pgoutput only, not {other}"),
        )),
    }
}

/// The slot and the publication: their names, whether walrelay creates
/// the publication and with which tables (`publication.autocreate.mode`),
/// and the slot's drop-on-stop and failover flags.
fn translate_slot_and_publication(
    c: &mut Keys,
    r: &mut ReplicationConfig,
) -> Result<(), ConfigError> {
    if let Some(slot) = c.take("slot.name") {
        validate_slot_name(&slot).map_err(|e| match e {
            SettingError::Invalid { reason, .. } => c.invalid("slot.name", reason),
            other => other.into(),
        })?;
        r.slot = slot;
    }
    if let Some(publication) = c.take("publication.name") {
        r.publication = publication;
    }
    if let Some(mode) = c.take("publication.autocreate.mode") {
        r.publication_mode = match mode.to_ascii_lowercase().as_str() {
            "all_tables" => PublicationMode::AllTables,
            "disabled" => PublicationMode::Disabled,
            "filtered" => PublicationMode::Filtered,
            "no_tables" => PublicationMode::NoTables,
            _ => {
                return Err(c.invalid(
                    "publication.autocreate.mode",
                    format!("{mode:?} is not one of all_tables, disabled, filtered, no_tables"),
                ))
            }
        };
    }
    r.slot_drop_on_stop = c.take_bool("slot.drop.on.stop", false)?;
    // Debezium falls back to a plain slot below PostgreSQL 17; walrelay
    // refuses to start there instead (`replication.failover`).
    r.failover = c.take_bool("slot.failover", false)?;
    Ok(())
}

/// `snapshot.mode`: the four modes walrelay implements; the modes Debezium
/// removed point to their replacement, any other (custom, configuration
/// based, ...) is refused.
fn translate_snapshot_mode(c: &mut Keys, r: &mut ReplicationConfig) -> Result<(), ConfigError> {
    let Some(mode) = c.take("snapshot.mode") else {
        return Ok(());
    };
    r.snapshot_mode = match mode.to_ascii_lowercase().as_str() {
        "no_data" => SnapshotMode::NoData,
        "initial" => SnapshotMode::Initial,
        "always" => SnapshotMode::Always,
        "when_needed" => SnapshotMode::WhenNeeded,
        "never" | "schema_only" => {
            return Err(c.unsupported(
                "snapshot.mode",
                format!("{mode} was removed from Debezium; use no_data"),
            ))
        }
        _ => {
            return Err(c.unsupported(
                "snapshot.mode",
                format!("walrelay implements no_data, initial, always and when_needed, not {mode}"),
            ))
        }
    };
    Ok(())
}

/// Which logical decoding messages (PostgreSQL 14+, which walrelay
/// requires) are events: Debezium reads every prefix unless one of
/// `message.prefix.{include,exclude}.list` says otherwise, and refuses
/// both together.
fn translate_message_prefixes(c: &mut Keys) -> Result<PrefixRule, ConfigError> {
    let include_prefixes = c
        .take("message.prefix.include.list")
        .filter(|v| !v.trim().is_empty());
    let exclude_prefixes = c
        .take("message.prefix.exclude.list")
        .filter(|v| !v.trim().is_empty());
    Ok(match (include_prefixes, exclude_prefixes) {
        (Some(_), Some(_)) => {
            return Err(c.invalid(
                "message.prefix.exclude.list",
                "cannot be used together with message.prefix.include.list (Debezium refuses both)",
            ))
        }
        (Some(list), None) => PrefixRule::Include(
            MessageSelection::debezium_regexes(&list)
                .map_err(|reason| c.unsupported("message.prefix.include.list", reason))?,
        ),
        (None, Some(list)) => PrefixRule::Exclude(
            MessageSelection::debezium_regexes(&list)
                .map_err(|reason| c.unsupported("message.prefix.exclude.list", reason))?,
        ),
        (None, None) => PrefixRule::All,
    })
}

/// The outbox tables of `table.include.list`. Without one the connector
/// captures what its publication publishes (nothing, with no_tables) and
/// the logical decoding messages (`super::transforms` requires the decode
/// transform then).
fn translate_captured_tables(
    c: &mut Keys,
    draft: &mut Draft,
    notes: &mut Notes,
) -> Result<(), ConfigError> {
    match c
        .take("table.include.list")
        .filter(|v| !v.trim().is_empty())
    {
        Some(include) => translate_outbox_table(c, draft, notes, &include),
        None => translate_messages_only(c, draft),
    }
}

/// A connector without `table.include.list`: allowed only where its
/// publication has no tables, for an outbox of logical decoding messages
/// alone; a schema list would then select tables walrelay does not read.
fn translate_messages_only(c: &mut Keys, draft: &mut Draft) -> Result<(), ConfigError> {
    if !matches!(
        draft.replication.publication_mode,
        PublicationMode::NoTables | PublicationMode::Disabled
    ) {
        return Err(c.unsupported(
            "table.include.list",
            "it must name the outbox table (schema.table); without it Debezium routes every \
             table of the publication through EventRouter. For an outbox of logical decoding \
             messages only, set publication.autocreate.mode=no_tables",
        ));
    }
    draft.captures_table = false;
    for key in ["schema.include.list", "schema.exclude.list"] {
        if c.take(key).is_some_and(|v| !v.trim().is_empty()) {
            return Err(c.unsupported(
                key,
                "walrelay captures the outbox table of table.include.list (or, without it, \
                 logical decoding messages only)",
            ));
        }
    }
    Ok(())
}

/// `skipped.operations`, into what the publication publishes (Debezium
/// sets `publish` explicitly whenever the key is set) and which skipped
/// changes the outbox does not count. Skipping inserts would skip every
/// outbox event, so `c` is refused.
fn translate_skipped_operations(c: &mut Keys, draft: &mut Draft) -> Result<(), ConfigError> {
    let Some(skipped) = c.take("skipped.operations") else {
        return Ok(());
    };
    let mut ops = Vec::new();
    for op in skipped.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        match op {
            "c" => {
                return Err(c.unsupported(
                    "skipped.operations",
                    "skipping c (inserts) would skip every outbox event",
                ))
            }
            "u" | "d" | "t" | "none" => ops.push(op),
            // `r` (snapshot reads) exists in newer Debezium; walrelay's
            // snapshot emits reads only when snapshot.mode asks for them.
            _ => {
                return Err(c.invalid(
                    "skipped.operations",
                    format!("{op:?} is not one of c, u, d, t, none"),
                ))
            }
        }
    }
    let publish: Vec<&str> = [
        ("insert", "c"),
        ("update", "u"),
        ("delete", "d"),
        ("truncate", "t"),
    ]
    .iter()
    .filter(|(_, op)| !ops.contains(op))
    .map(|(name, _)| *name)
    .collect();
    draft.replication.publish = Some(publish.join(", "));
    // Debezium's dispatcher does not count what it skips.
    draft.outbox.skipped_operations = SkippedOperations {
        updates: ops.contains(&"u"),
        deletes: ops.contains(&"d"),
    };
    Ok(())
}

/// Column types (decimal, time, binary, interval and hstore handling,
/// money.fraction.digits), as the connector maps them; `connect::pg_modes`
/// owns the keys and judges the values.
fn translate_column_types(c: &mut Keys, draft: &mut Draft) -> Result<(), ConfigError> {
    for key in [
        crate::connect::pg_modes::KEY_DECIMAL_HANDLING_MODE,
        crate::connect::pg_modes::KEY_TIME_PRECISION_MODE,
        crate::connect::pg_modes::KEY_BINARY_HANDLING_MODE,
        crate::connect::pg_modes::KEY_INTERVAL_HANDLING_MODE,
        crate::connect::pg_modes::KEY_HSTORE_HANDLING_MODE,
        crate::connect::pg_modes::KEY_MONEY_FRACTION_DIGITS,
    ] {
        if let Some(value) = c.take(key) {
            draft
                .debezium
                .column_types
                .set(key, &value)
                .map_err(|e| c.invalid(key, e.to_string()))?;
        }
    }
    Ok(())
}

/// `topic.prefix` (required), the context headers and the name
/// adjustments: the table's value schema name (and so the envelope
/// schema's) and the `after` struct's field names, which the EventRouter
/// options then name. Message and heartbeat schema names are Debezium's
/// constants, valid already.
fn translate_naming(c: &mut Keys, draft: &mut Draft) -> Result<(), ConfigError> {
    draft.debezium.topic_prefix = c.take_required(
        "topic.prefix",
        "Debezium requires it; it names envelope schemas, the __debezium.context.connectorLogicalName header and the heartbeat topic",
    )?;
    draft.debezium.extended_headers = c.take_bool("extended.headers.enabled", true)?;
    draft.debezium.schema_name_adjustment = take_adjustment(c, "schema.name.adjustment.mode")?;
    draft.debezium.field_name_adjustment = take_adjustment(c, "field.name.adjustment.mode")?;
    Ok(())
}

/// Transaction metadata: BEGIN and END records to
/// `<topic.prefix>.<topic.transaction>`, off unless asked for.
fn translate_transaction_metadata(c: &mut Keys, draft: &mut Draft) -> Result<(), ConfigError> {
    draft.outbox.transaction_metadata = c.take_bool("provide.transaction.metadata", false)?;
    if let Some(topic) = c.take("topic.transaction") {
        draft.outbox.transaction_topic = topic;
    }
    Ok(())
}

/// Heartbeats: the interval, the optional action query, and the topic,
/// named by its prefix or (Debezium 3.6) in full.
fn translate_heartbeats(c: &mut Keys, draft: &mut Draft) -> Result<(), ConfigError> {
    if let Some(ms) = c.take_u64("heartbeat.interval.ms")? {
        draft.heartbeat.interval_ms = ms;
    }
    draft.heartbeat.action_query = c.take("heartbeat.action.query").filter(|q| !q.is_empty());
    if let Some(prefix) = c.take("topic.heartbeat.prefix") {
        draft.heartbeat.topic_prefix = prefix;
    }
    // Debezium 3.6's full heartbeat topic name, which wins over the prefix.
    draft.heartbeat.topic_name = c
        .take("topic.heartbeat.name")
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty());
    Ok(())
}

/// `snapshot.include.collection.list`: a snapshot that leaves an outbox
/// table out takes no rows of it in Debezium, where walrelay's would take
/// them all, so that is refused; a list naming every outbox table changes
/// nothing and is ignored.
fn check_snapshot_collections(
    c: &mut Keys,
    draft: &Draft,
    notes: &mut Notes,
) -> Result<(), ConfigError> {
    let Some(list) = c.take("snapshot.include.collection.list") else {
        return Ok(());
    };
    let list = list.trim();
    let left_out = if list.is_empty()
        || !draft.captures_table
        || draft.replication.snapshot_mode == SnapshotMode::NoData
    {
        None
    } else {
        draft.outbox.table_names().into_iter().find(|table| {
            !list
                .split(',')
                .any(|t| t.trim().eq_ignore_ascii_case(table))
        })
    };
    if let Some(table) = left_out {
        return Err(c.unsupported(
            "snapshot.include.collection.list",
            format!("it does not name the outbox table {table}, so Debezium's snapshot would take none of its rows where walrelay's takes them all; remove it, list every table of table.include.list, or set snapshot.mode=no_data"),
        ));
    }
    notes.ignore(
        c.name("snapshot.include.collection.list"),
        "ignored: it names the outbox table (or nothing is snapshotted)",
    );
    Ok(())
}

/// `notification.enabled.channels`: the `sink` channel writes records to
/// Kafka and is refused; `log` and `jmx` change nothing there and are
/// ignored.
fn check_notifications(c: &mut Keys, notes: &mut Notes) -> Result<(), ConfigError> {
    let Some(channels) = c.take("notification.enabled.channels") else {
        return Ok(());
    };
    if channels
        .split(',')
        .any(|ch| ch.trim().eq_ignore_ascii_case("sink"))
    {
        return Err(c.unsupported(
            "notification.enabled.channels",
            "the sink channel writes Debezium's notification records to Kafka, which walrelay does not; remove sink (log and jmx change nothing that reaches Kafka)",
        ));
    }
    notes.ignore(
        c.name("notification.enabled.channels"),
        "ignored: walrelay has no notifications",
    );
    Ok(())
}

/// A connector `*.name.adjustment.mode`: none (the default), avro or
/// avro_unicode, as Debezium parses it (trimmed, any case).
fn take_adjustment(c: &mut Keys, key: &str) -> Result<FieldNameAdjustment, ConfigError> {
    match c.take(key).map(|v| v.to_ascii_lowercase()).as_deref() {
        None | Some("none") => Ok(FieldNameAdjustment::None),
        Some("avro") => Ok(FieldNameAdjustment::Avro),
        Some("avro_unicode") => Ok(FieldNameAdjustment::AvroUnicode),
        Some(other) => Err(c.invalid(
            key,
            format!("{other:?} is not one of none, avro, avro_unicode"),
        )),
    }
}

/// `table.include.list` naming the outbox tables (one or several, each
/// routed by the same EventRouter, as Debezium routes every captured
/// table's change events), and the schema lists around them.
fn translate_outbox_table(
    c: &mut Keys,
    draft: &mut Draft,
    notes: &mut Notes,
    include: &str,
) -> Result<(), ConfigError> {
    let tables = parse_table_list(c, include)?;
    match tables.as_slice() {
        [one] => draft.outbox.table = Some(one.spelled.to_owned()),
        several => {
            draft.outbox.tables = several
                .iter()
                .map(|t| OutboxTableConfig::named(t.spelled))
                .collect();
        }
    }
    let names: Vec<(String, String)> = tables.into_iter().map(|t| t.parts).collect();
    check_schema_lists(c, notes, &names)
}

/// One table of `table.include.list`.
struct ListedTable<'a> {
    /// As the list spells it, which is how the outbox settings name it.
    spelled: &'a str,
    /// (schema, table), unquoted parts folded to lower case as PostgreSQL
    /// resolves them: what the schema lists are matched against.
    parts: (String, String),
}

/// The tables of `table.include.list`, each once. Debezium reads the list as Java regexes matched against
/// schema.table; walrelay takes plain names only, `.` being the separator
/// it is meant to be.
fn parse_table_list<'a>(c: &Keys, include: &'a str) -> Result<Vec<ListedTable<'a>>, ConfigError> {
    let listed: Vec<&str> = include
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    if listed.is_empty() {
        return Err(c.invalid("table.include.list", "names no table"));
    }
    let mut tables: Vec<ListedTable> = Vec::with_capacity(listed.len());
    for table in listed {
        if table.contains([
            '\\', '[', ']', '(', ')', '{', '}', '*', '+', '?', '^', '$', '|',
        ]) {
            return Err(c.unsupported(
                "table.include.list",
                format!("walrelay needs the outbox tables' plain names (schema.table), not a regular expression like {table:?}"),
            ));
        }
        let parts = match parse_qualified_name(table) {
            Some(parts) if table.contains('.') => parts,
            _ => {
                return Err(c.invalid(
                    "table.include.list",
                    format!("{table:?} must be schema.table: Debezium matches it against the qualified name"),
                ))
            }
        };
        // Debezium's list is a set of patterns: naming a table twice
        // captures it once.
        if !tables.iter().any(|t| t.parts == parts) {
            tables.push(ListedTable {
                spelled: table,
                parts,
            });
        }
    }
    Ok(tables)
}

/// The schema lists beside `table.include.list`: Debezium captures a table
/// only if `schema.include.list` (when set) names its schema as a plain
/// name and `schema.exclude.list` does not; a list that would leave an
/// outbox table out is refused, an exclude list that does not is ignored.
fn check_schema_lists(
    c: &mut Keys,
    notes: &mut Notes,
    names: &[(String, String)],
) -> Result<(), ConfigError> {
    if let Some(schemas) = c.take("schema.include.list") {
        let unlisted = names.iter().find(|(schema, _)| {
            !schemas
                .split(',')
                .map(str::trim)
                .any(|s| s.eq_ignore_ascii_case(schema))
        });
        if let Some((schema, table)) = unlisted {
            return Err(c.unsupported(
                "schema.include.list",
                format!("it does not list the schema of outbox table {schema}.{table} as a plain name, so Debezium would capture none of its rows"),
            ));
        }
    }
    if let Some(schemas) = c.take("schema.exclude.list") {
        let excluded = names.iter().find(|(schema, _)| {
            schemas
                .split(',')
                .map(str::trim)
                .any(|s| s.eq_ignore_ascii_case(schema))
        });
        if let Some((schema, table)) = excluded {
            return Err(c.unsupported(
                "schema.exclude.list",
                format!("it excludes the schema of outbox table {schema}.{table}, so Debezium would capture none of its rows"),
            ));
        }
        notes.ignore(
            c.name("schema.exclude.list"),
            "ignored: walrelay reads only the outbox table",
        );
    }
    Ok(())
}

/// Classifies the keys nobody consumed: ignored (warned), refused, or
/// unknown (warned).
pub(in crate::config) fn classify_rest(c: &mut Keys, notes: &mut Notes) -> Result<(), ConfigError> {
    for (key, value) in c.drain() {
        let value = value.trim();
        if let Some((_, why)) = IGNORED_CONNECTOR_KEYS
            .iter()
            .chain(IGNORED_ERRORS_KEYS)
            .find(|(k, _)| *k == key)
        {
            notes.ignore(c.name(&key), *why);
            continue;
        }
        if let Some((_, allowed, why)) = DEFAULT_ONLY_CONNECTOR_KEYS
            .iter()
            .find(|(k, _, _)| *k == key)
        {
            if allowed.iter().any(|a| a.eq_ignore_ascii_case(value)) {
                notes.ignore(
                    c.name(&key),
                    "ignored: it is at the value walrelay implements",
                );
                continue;
            }
            let expected = if allowed == &[""] {
                "leave it unset".to_owned()
            } else {
                format!("walrelay implements {}", allowed.join(" or "))
            };
            return Err(c.unsupported(&key, format!("{why}; {expected}")));
        }
        if let Some((_, why)) = REFUSED_CONNECTOR_PREFIXES
            .iter()
            .find(|(p, _)| key.starts_with(p))
        {
            return Err(c.unsupported(&key, *why));
        }
        if let Some((_, why)) = IGNORED_CONNECTOR_PREFIXES
            .iter()
            .chain(IGNORED_ERRORS_PREFIXES)
            .find(|(p, _)| key.starts_with(p))
        {
            notes.ignore(c.name(&key), *why);
            continue;
        }
        notes.ignore(c.name(&key), "ignored: unknown to walrelay");
    }
    Ok(())
}
