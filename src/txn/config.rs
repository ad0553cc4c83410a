//! The outbox's settings: where events come from (rows of the outbox
//! table, logical decoding messages, or both), which table is the outbox,
//! which message prefixes are events, and what an UPDATE of an outbox row
//! does (Debezium's `table.op.invalid.behavior`).
//!
//! Owns the `[outbox]` section of the native TOML, the message selection
//! both configuration forms compile to ([`MessageSelection`]) and the
//! parsing of a qualified table name the way PostgreSQL folds it. It never
//! connects and never reads a Debezium file.

use serde::Deserialize;

use crate::setting::SettingError;

/// The prefix of walrelay's own heartbeat message
/// (`pg_logical_emit_message(true, 'walrelay_heartbeat', '')`): never an
/// event, whatever the configuration selects.
pub const HEARTBEAT_MESSAGE_PREFIX: &str = "walrelay_heartbeat";

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
pub const DEFAULT_OUTBOX_TABLE: &str = "public.outbox";
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

/// The outbox table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutboxConfig {
    /// `schema.table` (schema defaults to `public`).
    #[serde(default = "default_outbox_table")]
    pub table: String,
    /// Debezium's `table.op.invalid.behavior` for UPDATEs.
    #[serde(default)]
    pub op_invalid_behavior: OpInvalidBehavior,
    /// Where events come from.
    #[serde(default)]
    pub source: OutboxSource,
    /// Exact message prefixes whose messages are events (native form).
    #[serde(default)]
    pub message_prefixes: Vec<String>,
    /// What a selected non-transactional message becomes.
    #[serde(default)]
    pub non_transactional: NonTransactional,
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
            table: default_outbox_table(),
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

    /// Splits `table` into schema and table name. Quoted identifiers
    /// (`"My Schema"."Outbox"`) keep their case; unquoted ones fold to lower
    /// case like PostgreSQL does.
    pub fn qualified(&self) -> Result<(String, String), SettingError> {
        parse_qualified_name(&self.table).ok_or_else(|| SettingError::Invalid {
            key: "outbox.table".into(),
            reason: format!("{:?} is not a table name like schema.table", self.table),
        })
    }
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

fn default_outbox_table() -> String {
    DEFAULT_OUTBOX_TABLE.into()
}
