//! The outbox's settings: where events come from (rows of the outbox
//! tables, logical decoding messages, or both), which tables are outboxes
//! (one, `table`, or several, `[[outbox.tables]]`, each optionally with
//! column names of its own), which message prefixes are events, and what
//! an UPDATE of an outbox row does (Debezium's `table.op.invalid.behavior`).
//!
//! Owns the `[outbox]` section of the native TOML, the message selection
//! both configuration forms compile to ([`MessageSelection`]), the list of
//! outbox tables both forms resolve to ([`OutboxConfig::tables`]) and the
//! parsing of a qualified table name the way PostgreSQL folds it. It never
//! connects and never reads a Debezium file.

use std::collections::BTreeMap;

use serde::de::IgnoredAny;
use serde::Deserialize;

use crate::router::{ColumnOverrides, RouterConfig, COLUMN_OVERRIDE_KEYS};
use crate::setting::SettingError;

/// The prefix of walrelay's own heartbeat message
/// (`pg_logical_emit_message(true, 'walrelay_heartbeat', '')`): never an
/// event, whatever the configuration selects.
pub(crate) const HEARTBEAT_MESSAGE_PREFIX: &str = "walrelay_heartbeat";

/// Where a pipeline's events come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OutboxSource {
    /// Rows inserted into the outbox table.
    #[default]
    Table,
    /// Transactional logical decoding messages with a selected prefix.
    Messages,
    /// Both, interleaved in commit and WAL order.
    Both,
}

impl OutboxSource {
    /// Whether rows of the outbox table are events.
    pub fn table(self) -> bool {
        matches!(self, OutboxSource::Table | OutboxSource::Both)
    }

    /// Whether logical decoding messages are events.
    pub fn messages(self) -> bool {
        matches!(self, OutboxSource::Messages | OutboxSource::Both)
    }
}

pub use crate::router::NonTransactional;

/// How a message prefix is matched.
#[derive(Debug, Clone)]
pub enum PrefixRule {
    /// The native form: exact prefixes.
    Exact(Vec<String>),
    /// Debezium's `message.prefix.include.list`: regexes matched against
    /// the whole prefix, case-insensitively.
    Include(Vec<regex::Regex>),
    /// Debezium's `message.prefix.exclude.list`.
    Exclude(Vec<regex::Regex>),
    /// Debezium without either list: every prefix.
    All,
}

/// Which logical decoding messages are events, compiled from either form.
#[derive(Debug, Clone)]
pub struct MessageSelection {
    /// The prefix rule.
    pub rule: PrefixRule,
    /// Selected non-transactional messages.
    pub non_transactional: NonTransactional,
}

impl MessageSelection {
    /// Whether a message with this prefix is an event; walrelay's own
    /// heartbeat never is.
    pub fn selects(&self, prefix: &str) -> bool {
        if prefix == HEARTBEAT_MESSAGE_PREFIX {
            return false;
        }
        match &self.rule {
            PrefixRule::Exact(list) => list.iter().any(|p| p == prefix),
            PrefixRule::Include(res) => res.iter().any(|r| r.is_match(prefix)),
            PrefixRule::Exclude(res) => !res.iter().any(|r| r.is_match(prefix)),
            PrefixRule::All => true,
        }
    }

    /// Compiles Debezium's comma-separated regex list the way
    /// `Strings.setOfRegex(list, CASE_INSENSITIVE)` + `matches()` reads it.
    pub fn debezium_regexes(list: &str) -> Result<Vec<regex::Regex>, String> {
        list.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                regex::RegexBuilder::new(&format!("^(?:{p})$"))
                    .case_insensitive(true)
                    .build()
                    .map_err(|e| {
                        format!("{p:?} is not a regular expression walrelay can compile: {e}")
                    })
            })
            .collect()
    }
}

/// Default outbox table.
pub(crate) const DEFAULT_OUTBOX_TABLE: &str = "public.outbox";
/// What Debezium's `table.op.invalid.behavior` does with UPDATEs of outbox rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OpInvalidBehavior {
    /// Log a warning and drop the row.
    #[default]
    Warn,
    /// Log an error and drop the row.
    Error,
    /// Stop the pipeline without confirming past the row.
    Fatal,
}

/// The key of the list form of the outbox tables.
pub const KEY_TABLES: &str = "outbox.tables";
/// The key of the one-table form.
pub const KEY_TABLE: &str = "outbox.table";

/// The keys of `[outbox]` that hold for every table of the pipeline (named
/// when a `[[outbox.tables]]` entry sets one).
const SHARED_OUTBOX_KEYS: &[&str] = &[
    "op_invalid_behavior",
    "source",
    "message_prefixes",
    "non_transactional",
    "transaction_metadata",
    "transaction_topic",
];

/// One entry of `[[outbox.tables]]`: a table and the column names it
/// reads differently from `[router]`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct OutboxTableConfig {
    /// `schema.table` (schema defaults to `public`), folded as `table` is.
    pub(crate) name: String,
    /// This table's own column names; unset ones are `[router]`'s.
    #[serde(flatten)]
    pub columns: ColumnOverrides,
    /// Any other key: refused by name ([`OutboxConfig::tables`]), with
    /// where it belongs when it is a shared setting.
    #[serde(flatten)]
    pub(crate) other: BTreeMap<String, IgnoredAny>,
}

impl OutboxTableConfig {
    /// A table read with `[router]`'s columns (the Debezium forms' entries).
    pub fn named(name: impl Into<String>) -> Self {
        OutboxTableConfig {
            name: name.into(),
            ..OutboxTableConfig::default()
        }
    }
}

/// One outbox table of a pipeline, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxTableSpec {
    /// Schema, folded as PostgreSQL folds it.
    pub schema: String,
    /// Table, folded as PostgreSQL folds it.
    pub table: String,
    /// Its own column names (empty: `[router]`'s).
    pub columns: ColumnOverrides,
    /// The key that names it: `outbox.table` or `outbox.tables[<i>]`.
    pub key: String,
}

impl OutboxTableSpec {
    /// `schema.table`, as Debezium names the data collection.
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.schema, self.table)
    }
}

/// The outbox tables and what becomes of their rows and of messages.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutboxConfig {
    /// The outbox table, `schema.table` (schema defaults to `public`);
    /// unset with neither this nor `tables`: [`DEFAULT_OUTBOX_TABLE`].
    #[serde(default)]
    pub table: Option<String>,
    /// Several outbox tables in one pipeline (instead of `table`), each
    /// with optional column names of its own.
    #[serde(default)]
    pub tables: Vec<OutboxTableConfig>,
    /// Debezium's `table.op.invalid.behavior` for UPDATEs.
    #[serde(default)]
    pub op_invalid_behavior: OpInvalidBehavior,
    /// Where events come from.
    #[serde(default)]
    pub source: OutboxSource,
    /// Exact message prefixes whose messages are events (native form).
    #[serde(default)]
    pub(crate) message_prefixes: Vec<String>,
    /// What a selected non-transactional message becomes.
    #[serde(default)]
    pub(crate) non_transactional: NonTransactional,
    /// Debezium forms only: the compiled `message.prefix.*.list` (the
    /// native keys above are then unused).
    #[serde(skip)]
    pub debezium_messages: Option<MessageSelection>,
    /// Debezium's `provide.transaction.metadata`: a BEGIN and an END record
    /// for every transaction decoded, to
    /// `<debezium.topic_prefix>.<transaction_topic>`, as Debezium sends
    /// them. Off by default.
    #[serde(default)]
    pub transaction_metadata: bool,
    /// Debezium's `topic.transaction`: the transaction topic after
    /// `<debezium.topic_prefix>.`.
    #[serde(default = "default_transaction_topic")]
    pub transaction_topic: String,
    /// Debezium forms only: `skipped.operations` as far as the counts of
    /// transaction metadata care (updates, deletes skipped).
    #[serde(skip)]
    pub skipped_operations: SkippedOperations,
}

/// Operations Debezium's dispatcher skips (`skipped.operations`), so that
/// transaction metadata does not count them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SkippedOperations {
    /// `u` listed.
    pub updates: bool,
    /// `d` listed.
    pub deletes: bool,
}

fn default_transaction_topic() -> String {
    crate::connect::transaction::DEFAULT_TOPIC.into()
}

impl Default for OutboxConfig {
    fn default() -> Self {
        OutboxConfig {
            table: None,
            tables: Vec::new(),
            op_invalid_behavior: OpInvalidBehavior::Warn,
            source: OutboxSource::Table,
            message_prefixes: Vec::new(),
            non_transactional: NonTransactional::Error,
            debezium_messages: None,
            transaction_metadata: false,
            transaction_topic: default_transaction_topic(),
            skipped_operations: SkippedOperations::default(),
        }
    }
}

impl OutboxConfig {
    /// Whether any logical decoding message can be an event.
    pub fn messages_are_events(&self) -> bool {
        self.debezium_messages.is_some() || self.source.messages()
    }

    /// The messages that are events, if any: the Debezium forms' compiled
    /// lists, or the native `message_prefixes` when `source` takes messages.
    pub fn message_selection(&self) -> Option<MessageSelection> {
        if let Some(m) = &self.debezium_messages {
            return Some(m.clone());
        }
        self.source.messages().then(|| MessageSelection {
            rule: PrefixRule::Exact(self.message_prefixes.clone()),
            non_transactional: self.non_transactional,
        })
    }

    /// Checks the transaction metadata keys.
    pub fn validate_transaction_metadata(&self) -> Result<(), SettingError> {
        let t = &self.transaction_topic;
        // Debezium's CommonConnectorConfig.validateTopicName.
        if t.is_empty()
            || !t
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        {
            return Err(SettingError::Invalid {
                key: "outbox.transaction_topic".into(),
                reason: format!(
                    "{t:?} is not a topic name: letters, digits, '.', '_' and '-' only"
                ),
            });
        }
        Ok(())
    }

    /// Checks the message keys of the native form.
    pub fn validate_messages(&self) -> Result<(), SettingError> {
        if self.debezium_messages.is_some() {
            return Ok(());
        }
        if self.non_transactional == NonTransactional::Deliver {
            return Err(SettingError::Invalid {
                key: "outbox.non_transactional".into(),
                reason: "\"deliver\" would publish events of transactions that rolled back; use \"error\" or \"skip\"".into(),
            });
        }
        if !self.source.messages() {
            if !self.message_prefixes.is_empty() {
                return Err(SettingError::Invalid {
                    key: "outbox.message_prefixes".into(),
                    reason:
                        "set outbox.source = \"messages\" or \"both\" for messages to be events"
                            .into(),
                });
            }
            return Ok(());
        }
        if self.message_prefixes.is_empty() {
            return Err(SettingError::Invalid {
                key: "outbox.message_prefixes".into(),
                reason: "names no prefix: list the prefixes given to pg_logical_emit_message, e.g. [\"outbox\"]".into(),
            });
        }
        for p in &self.message_prefixes {
            if p.is_empty() {
                return Err(SettingError::Invalid {
                    key: "outbox.message_prefixes".into(),
                    reason: "an empty prefix: pg_logical_emit_message refuses one".into(),
                });
            }
            if p == HEARTBEAT_MESSAGE_PREFIX {
                return Err(SettingError::Invalid {
                    key: "outbox.message_prefixes".into(),
                    reason: format!("{HEARTBEAT_MESSAGE_PREFIX} is walrelay's own heartbeat message, never an event"),
                });
            }
        }
        Ok(())
    }

    /// The first outbox table (the only one with the polling source) as
    /// schema and table name. Quoted identifiers (`"My Schema"."Outbox"`)
    /// keep their case; unquoted ones fold to lower case like PostgreSQL
    /// does.
    pub fn qualified(&self) -> Result<(String, String), SettingError> {
        let first = self.tables()?.into_iter().next();
        let t = first.expect("tables() names at least one table");
        Ok((t.schema, t.table))
    }

    /// The outbox tables' names as configured (before any check): the
    /// `tables` entries', or `table` (default [`DEFAULT_OUTBOX_TABLE`]).
    pub fn table_names(&self) -> Vec<&str> {
        if self.tables.is_empty() {
            return vec![self.table.as_deref().unwrap_or(DEFAULT_OUTBOX_TABLE)];
        }
        self.tables.iter().map(|t| t.name.as_str()).collect()
    }

    /// How many tables `table` / `tables` name (before any check).
    pub fn table_count(&self) -> usize {
        self.tables.len().max(1)
    }

    /// Every outbox table of the pipeline, in configuration order: the
    /// `tables` entries, or `table` (default [`DEFAULT_OUTBOX_TABLE`]).
    /// Refuses, naming the key: `table` and `tables` together, a name that
    /// is no table name, a table listed twice, and a per-table key that
    /// only `[outbox]` or `[router]` can set for all tables.
    pub fn tables(&self) -> Result<Vec<OutboxTableSpec>, SettingError> {
        if self.tables.is_empty() {
            let name = self.table.as_deref().unwrap_or(DEFAULT_OUTBOX_TABLE);
            let (schema, table) =
                parse_qualified_name(name).ok_or_else(|| SettingError::Invalid {
                    key: KEY_TABLE.into(),
                    reason: format!("{name:?} is not a table name like schema.table"),
                })?;
            return Ok(vec![OutboxTableSpec {
                schema,
                table,
                columns: ColumnOverrides::default(),
                key: KEY_TABLE.into(),
            }]);
        }
        if self.table.is_some() {
            return Err(SettingError::invalid(
                KEY_TABLES,
                "cannot be used together with outbox.table: list every outbox table as a \
                 [[outbox.tables]] entry (name = \"schema.table\") and remove outbox.table",
            ));
        }
        let mut out: Vec<OutboxTableSpec> = Vec::with_capacity(self.tables.len());
        for (i, entry) in self.tables.iter().enumerate() {
            let key = format!("{KEY_TABLES}[{i}]");
            if let Some(other) = entry.other.keys().next() {
                return Err(SettingError::invalid(
                    format!("{key}.{other}"),
                    misplaced_table_key(other),
                ));
            }
            let (schema, table) =
                parse_qualified_name(&entry.name).ok_or_else(|| SettingError::Invalid {
                    key: format!("{key}.name"),
                    reason: format!("{:?} is not a table name like schema.table", entry.name),
                })?;
            if let Some(earlier) = out.iter().find(|t| t.schema == schema && t.table == table) {
                return Err(SettingError::invalid(
                    format!("{key}.name"),
                    format!(
                        "{schema}.{table} is listed twice ({}.name names it already): each \
                         outbox table is read once",
                        earlier.key
                    ),
                ));
            }
            out.push(OutboxTableSpec {
                schema,
                table,
                columns: entry.columns.clone(),
                key,
            });
        }
        Ok(out)
    }

    /// Checks the outbox tables ([`OutboxConfig::tables`]) and each
    /// table's column names against `router`: an empty name or a bad
    /// placement is refused naming the table's key.
    pub fn validate_tables(&self, router: &RouterConfig) -> Result<(), SettingError> {
        let tables = self.tables()?;
        if !self.tables.is_empty() && !self.source.table() && self.debezium_messages.is_none() {
            return Err(SettingError::invalid(
                KEY_TABLES,
                "with outbox.source = \"messages\" no table is read; set outbox.source = \
                 \"both\" for table rows and messages, or remove the tables",
            ));
        }
        for t in &tables {
            if t.columns.is_empty() {
                continue;
            }
            t.columns.validate(&t.key)?;
            router.columns(&t.columns).map_err(|e| {
                SettingError::invalid(format!("{}.additional_placement", t.key), e.to_string())
            })?;
        }
        Ok(())
    }
}

/// Why a key of a `[[outbox.tables]]` entry is refused.
fn misplaced_table_key(key: &str) -> String {
    let per_table = COLUMN_OVERRIDE_KEYS.join(", ");
    if key == "table" {
        return "a table entry names its table with name = \"schema.table\"".to_owned();
    }
    if SHARED_OUTBOX_KEYS.contains(&key) {
        return format!(
            "not a per-table setting: it holds for every table of the pipeline; set \
             outbox.{key} instead (per table: name, {per_table})"
        );
    }
    if crate::router::SHARED_ROUTER_KEYS.contains(&key) {
        return format!(
            "not a per-table setting: every table shares [router]'s topic routing, payload \
             handling and policies; set router.{key} instead (per table: name, {per_table})"
        );
    }
    format!("unknown key; a table entry takes name, {per_table}")
}

/// Parses `schema.table`, `table`, or quoted forms, folding unquoted parts
/// to lower case.
pub fn parse_qualified_name(name: &str) -> Option<(String, String)> {
    let mut parts = Vec::new();
    let mut chars = name.trim().chars().peekable();
    loop {
        let mut part = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next()? {
                    '"' if chars.peek() == Some(&'"') => {
                        chars.next();
                        part.push('"');
                    }
                    '"' => break,
                    c => part.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == '.' {
                    break;
                }
                part.extend(c.to_lowercase());
                chars.next();
            }
        }
        if part.is_empty() {
            return None;
        }
        parts.push(part);
        match chars.next() {
            None => break,
            Some('.') => continue,
            Some(_) => return None,
        }
    }
    match parts.len() {
        1 => Some(("public".into(), parts.remove(0))),
        2 => {
            let table = parts.pop()?;
            Some((parts.pop()?, table))
        }
        _ => None,
    }
}
