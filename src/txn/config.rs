//! The outbox table's settings: which table is the outbox and what an
//! UPDATE of one of its rows does (Debezium's `table.op.invalid.behavior`).
//!
//! Owns the `[outbox]` section of the native TOML and the parsing of a
//! qualified table name the way PostgreSQL folds it. It never connects and
//! never reads a Debezium file.

use serde::Deserialize;

use crate::setting::SettingError;

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
}

impl Default for OutboxConfig {
    fn default() -> Self {
        OutboxConfig {
            table: default_outbox_table(),
            op_invalid_behavior: OpInvalidBehavior::Warn,
        }
    }
}

impl OutboxConfig {
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
