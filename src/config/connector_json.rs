//! Kafka Connect's connector JSON files (the flat map, or the REST form
//! `{"name": ..., "config": {...}}`), and the syntax error of any
//! configuration file that is not TOML.
//!
//! Owns only syntax: it never interprets a key and never puts a value in an
//! error (serde_json names expected tokens, never input), so a password in
//! the file cannot leak from here.

use std::collections::BTreeMap;

use crate::properties::PropertiesError;

/// A `.properties` or connector JSON file that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyntaxError {
    /// The `.properties` text is not valid.
    #[error(transparent)]
    Properties(#[from] PropertiesError),
    /// The connector JSON does not parse.
    #[error("invalid json at line {line} column {column}: {reason}")]
    Json {
        /// One-based line.
        line: usize,
        /// One-based column.
        column: usize,
        /// What the JSON parser said (no values: serde_json only names the
        /// expected token).
        reason: String,
    },
    /// The connector JSON has the wrong shape.
    #[error("connector json: {0}")]
    Shape(String),
}

/// A parsed connector JSON file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectorJson {
    /// The connector's name (the REST form's `name`, else the config's `name`).
    pub(crate) name: Option<String>,
    /// The connector configuration, every value rendered as a string.
    pub(crate) config: BTreeMap<String, String>,
}

/// Parses a connector JSON file: either the flat configuration map or the
/// REST form `{"name": ..., "config": {...}}` (as `GET /connectors/<name>`
/// returns it; `tasks` and `type` are ignored). Values may be strings,
/// numbers or booleans; `null` means absent.
pub fn parse_connector_json(text: &str) -> Result<ConnectorJson, SyntaxError> {
    let root: serde_json::Value = serde_json::from_str(text).map_err(|e| SyntaxError::Json {
        line: e.line(),
        column: e.column(),
        reason: json_reason(&e),
    })?;
    let serde_json::Value::Object(top) = root else {
        return Err(SyntaxError::Shape("the top level must be an object".into()));
    };
    let (name, body) = match top.get("config") {
        Some(serde_json::Value::Object(config)) => {
            let name = match top.get("name") {
                None | Some(serde_json::Value::Null) => None,
                Some(serde_json::Value::String(s)) => Some(s.clone()),
                Some(_) => return Err(SyntaxError::Shape("\"name\" must be a string".into())),
            };
            (name, config.clone())
        }
        Some(_) => {
            return Err(SyntaxError::Shape(
                "\"config\" must be an object of connector settings".into(),
            ))
        }
        None => (None, top),
    };
    let mut config = BTreeMap::new();
    for (key, value) in body {
        let text = match value {
            serde_json::Value::Null => continue,
            serde_json::Value::String(s) => s,
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Bool(b) => b.to_string(),
            serde_json::Value::Array(_) | serde_json::Value::Object(_) => {
                return Err(SyntaxError::Shape(format!(
                    "the value of {key} must be a string, number or boolean"
                )))
            }
        };
        config.insert(key, text);
    }
    let name = name.or_else(|| config.get("name").cloned());
    Ok(ConnectorJson { name, config })
}

fn json_reason(e: &serde_json::Error) -> String {
    // serde_json's messages name expected tokens, never input values, but
    // strip the position it appends since we report it separately.
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) => text[..i].to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connector_json_forms() {
        let flat = parse_connector_json(
            r#"{"name":"outbox","database.port":5432,"slot.drop.on.stop":false,"x":null,"tasks.max":"1"}"#,
        )
        .unwrap();
        assert_eq!(flat.name.as_deref(), Some("outbox"));
        assert_eq!(flat.config["database.port"], "5432");
        assert_eq!(flat.config["slot.drop.on.stop"], "false");
        assert!(!flat.config.contains_key("x"));

        let rest = parse_connector_json(
            r#"{"name":"outbox","config":{"topic.prefix":"app"},"tasks":[],"type":"source"}"#,
        )
        .unwrap();
        assert_eq!(rest.name.as_deref(), Some("outbox"));
        assert_eq!(rest.config.len(), 1);

        assert!(matches!(
            parse_connector_json(r#"{"a":[1]}"#),
            Err(SyntaxError::Shape(m)) if m.contains("a")
        ));
        assert!(matches!(
            parse_connector_json("[]"),
            Err(SyntaxError::Shape(_))
        ));
        assert!(matches!(
            parse_connector_json("{\n\"a\": }"),
            Err(SyntaxError::Json { line: 2, .. })
        ));
    }
}
