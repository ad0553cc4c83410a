//! Request bodies read as Jersey's Jackson provider reads them into
//! Connect's entities, and the 500s Connect answers when it cannot (its
//! `NullPointerException` and Jackson messages, word for word where
//! known).
//!
//! Owns parsing `CreateConnectorRequest`, `Map<String, String>` and
//! `ConnectorOffsets` bodies.

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::distributed::api::{ApiError, ConnectorOffsets, PartitionOffset};

use super::json::OrderedConfig;

/// Jackson's location text.
fn location(line: usize, column: usize) -> String {
    format!(
        "[Source: REDACTED (`StreamReadFeature.INCLUDE_SOURCE_IN_LOCATION` disabled); line: {line}, column: {column}]"
    )
}

/// The `CreateConnectorRequest` class, as Jackson names it.
const CREATE_REQUEST: &str =
    "org.apache.kafka.connect.runtime.rest.entities.CreateConnectorRequest";

/// The NPE Connect answers when a `Map<String, String>` body is empty or
/// `null` (`checkAndPutConnectorConfigName` and the validate resource).
pub(crate) fn null_config() -> ApiError {
    ApiError::new(
        500,
        "Cannot invoke \"java.util.Map.get(Object)\" because \"connectorConfig\" is null",
    )
}

/// One step of a path into a JSON document.
#[derive(Debug, Clone)]
enum Seg {
    /// An object's field.
    Key(String),
    /// An array's element.
    Index(usize),
}

/// An open object or array while scanning.
#[derive(Debug, Clone)]
struct Frame {
    /// Where it opened (line, column; 1-based).
    at: (usize, usize),
    /// `{` rather than `[`.
    object: bool,
    /// The current field (objects).
    key: Option<String>,
    /// The current element (arrays).
    index: usize,
}

/// Where an unfinished body's innermost open object or array started,
/// whether it is an object, and the path to it; `None` when every
/// bracket closes.
fn open_marker(body: &str) -> Option<((usize, usize), bool, Vec<Seg>)> {
    let mut stack: Vec<Frame> = Vec::new();
    let (mut line, mut col) = (1usize, 0usize);
    let (mut in_str, mut escaped) = (false, false);
    let mut last = String::new();
    for c in body.chars() {
        if c == '\n' {
            line += 1;
            col = 0;
        } else {
            col += 1;
        }
        if in_str {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_str = false;
            } else {
                last.push(c);
            }
            continue;
        }
        match c {
            '"' => {
                in_str = true;
                last.clear();
            }
            ':' => {
                if let Some(f) = stack.last_mut() {
                    f.key = Some(last.clone());
                }
            }
            ',' => {
                if let Some(f) = stack.last_mut().filter(|f| !f.object) {
                    f.index += 1;
                }
            }
            '{' | '[' => stack.push(Frame {
                at: (line, col),
                object: c == '{',
                key: None,
                index: 0,
            }),
            '}' | ']' => {
                stack.pop();
            }
            _ => {}
        }
    }
    let inner = stack.last()?.clone();
    let path = stack[..stack.len() - 1]
        .iter()
        .map(|f| {
            if f.object {
                Seg::Key(f.key.clone().unwrap_or_default())
            } else {
                Seg::Index(f.index)
            }
        })
        .collect();
    Some((inner.at, inner.object, path))
}

/// Jackson's reference chain along `path` from `entity`.
fn chain(entity: &str, path: &[Seg]) -> String {
    let steps: Vec<String> = path
        .iter()
        .enumerate()
        .map(|(depth, seg)| {
            let class = match (depth, seg) {
                (0, _) => entity,
                (_, Seg::Index(_)) => "java.util.ArrayList",
                (2, Seg::Key(_)) if entity.ends_with("ConnectorOffsets") => {
                    "org.apache.kafka.connect.runtime.rest.entities.ConnectorOffset"
                }
                (_, Seg::Key(_)) => "java.util.LinkedHashMap",
            };
            match seg {
                Seg::Key(k) => format!("{class}[\"{k}\"]"),
                Seg::Index(i) => format!("{class}[{i}]"),
            }
        })
        .collect();
    if steps.is_empty() {
        String::new()
    } else {
        format!(" (through reference chain: {})", steps.join("->"))
    }
}

/// Jackson's error for a body that does not parse (`entity`: the class
/// whose reference chain Jackson names, `None` for a map).
pub(crate) fn syntax_error(body: &str, e: &serde_json::Error, entity: Option<&str>) -> ApiError {
    if e.is_eof() {
        if let Some(((line, col), object, path)) = open_marker(body) {
            let lines: Vec<&str> = body.split('\n').collect();
            let end = (
                lines.len(),
                lines.last().map_or(0, |l| l.chars().count()) + 1,
            );
            let kind = if object { "Object" } else { "Array" };
            let chain = entity.map(|en| chain(en, &path)).unwrap_or_default();
            return ApiError::new(
                500,
                format!(
                    "Unexpected end-of-input: expected close marker for {kind} (start marker at {})\n at {}{chain}",
                    location(line, col),
                    location(end.0, end.1)
                ),
            );
        }
    }
    let text = e.to_string();
    let head = text.split(" at line ").next().unwrap_or(&text);
    ApiError::new(
        500,
        format!("{head}\n at {}", location(e.line(), e.column())),
    )
}

/// A `Map<String, String>` body; `Ok(None)` when it is empty or `null`.
pub(crate) fn config_body(body: &[u8]) -> Result<Option<OrderedConfig>, ApiError> {
    let text = String::from_utf8_lossy(body);
    if text.trim().is_empty() || text.trim() == "null" {
        return Ok(None);
    }
    serde_json::from_str::<OrderedConfig>(&text)
        .map(Some)
        .map_err(|e| syntax_error(&text, &e, None))
}

/// `CreateConnectorRequest`: `name`, `config`, `initial_state`.
#[derive(Debug, Default)]
pub(crate) struct CreateRequest {
    /// `name` (`None`: absent or null).
    pub(crate) name: Option<String>,
    /// `config` (`None`: absent or null).
    pub(crate) config: Option<OrderedConfig>,
    /// `initial_state`, upper-cased.
    pub(crate) initial_state: Option<String>,
}

/// Reads the request's fields; unknown ones fail as Jackson's
/// `FAIL_ON_UNKNOWN_PROPERTIES`.
struct CreateVisitor;

impl<'de> Visitor<'de> for CreateVisitor {
    type Value = Result<CreateRequest, String>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
        let mut out = CreateRequest::default();
        while let Some((k, raw)) = m.next_entry::<String, Box<RawValue>>()? {
            let raw = raw.get();
            let scalar = |raw: &str| -> Option<String> {
                match raw {
                    "null" => None,
                    r if r.starts_with('"') => serde_json::from_str(r).ok(),
                    r => Some(r.to_owned()),
                }
            };
            match k.as_str() {
                "name" => out.name = scalar(raw),
                "initial_state" => out.initial_state = scalar(raw).map(|s| s.to_uppercase()),
                "config" if raw == "null" => out.config = None,
                "config" => {
                    out.config = Some(serde_json::from_str(raw).map_err(serde::de::Error::custom)?);
                }
                other => return Ok(Err(other.to_owned())),
            }
        }
        Ok(Ok(out))
    }
}

/// A `POST /connectors` body.
pub(crate) fn create_body(body: &[u8]) -> Result<CreateRequest, ApiError> {
    let text = String::from_utf8_lossy(body);
    if text.trim().is_empty() || text.trim() == "null" {
        return Err(ApiError::new(
            500,
            format!("Cannot invoke \"{CREATE_REQUEST}.name()\" because \"createRequest\" is null"),
        ));
    }
    let mut de = serde_json::Deserializer::from_str(&text);
    let parsed = de
        .deserialize_map(CreateVisitor)
        .and_then(|r| de.end().map(|()| r))
        .map_err(|e| syntax_error(&text, &e, Some(CREATE_REQUEST)))?;
    parsed.map_err(|field| {
        let at = text.find(&format!("\"{field}\"")).map_or(0, |i| i + field.len() + 2);
        let prefix = &text[..at.min(text.len())];
        let line = prefix.matches('\n').count() + 1;
        let col = prefix.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        ApiError::new(
            500,
            format!(
                "Unrecognized field \"{field}\" (class {CREATE_REQUEST}), not marked as ignorable (3 known properties: \"config\", \"initial_state\", \"name\"])\n at {} (through reference chain: {CREATE_REQUEST}[\"{field}\"])",
                location(line, col)
            ),
        )
    })
}

/// A `PATCH /connectors/{c}/offsets` body; Connect's 400 when it has no
/// offsets.
pub(crate) fn offsets_body(body: &[u8]) -> Result<ConnectorOffsets, ApiError> {
    let text = String::from_utf8_lossy(body);
    if text.trim().is_empty() || text.trim() == "null" {
        return Err(ApiError::new(
            500,
            "Cannot invoke \"org.apache.kafka.connect.runtime.rest.entities.ConnectorOffsets.offsets()\" because \"offsets\" is null",
        ));
    }
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        syntax_error(
            &text,
            &e,
            Some("org.apache.kafka.connect.runtime.rest.entities.ConnectorOffsets"),
        )
    })?;
    let empty = || {
        ApiError::new(
            400,
            "Partitions / offsets need to be provided for an alter offsets request",
        )
    };
    let items = match value.get("offsets") {
        Some(serde_json::Value::Array(items)) if !items.is_empty() => items,
        _ => return Err(empty()),
    };
    let mut offsets = Vec::with_capacity(items.len());
    for item in items {
        let as_map = |v: Option<&serde_json::Value>| match v {
            Some(serde_json::Value::Object(m)) => Some(m.clone()),
            _ => None,
        };
        offsets.push(PartitionOffset {
            partition: as_map(item.get("partition")).unwrap_or_default(),
            offset: as_map(item.get("offset")),
        });
    }
    Ok(ConnectorOffsets { offsets })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unfinished_create_body_as_jackson() {
        let e = create_body(br#"{"name":"n3","config":{"#).err();
        assert_eq!(
            e.map(|e| e.message),
            Some("Unexpected end-of-input: expected close marker for Object (start marker at [Source: REDACTED (`StreamReadFeature.INCLUDE_SOURCE_IN_LOCATION` disabled); line: 1, column: 23])\n at [Source: REDACTED (`StreamReadFeature.INCLUDE_SOURCE_IN_LOCATION` disabled); line: 1, column: 24] (through reference chain: org.apache.kafka.connect.runtime.rest.entities.CreateConnectorRequest[\"config\"])".to_owned())
        );
    }

    #[test]
    fn unfinished_offsets_body_as_jackson() {
        let e = offsets_body(br#"{"offsets":[{"#)
            .err()
            .map(|e| e.message)
            .unwrap_or_default();
        assert_eq!(e, "Unexpected end-of-input: expected close marker for Object (start marker at [Source: REDACTED (`StreamReadFeature.INCLUDE_SOURCE_IN_LOCATION` disabled); line: 1, column: 13])\n at [Source: REDACTED (`StreamReadFeature.INCLUDE_SOURCE_IN_LOCATION` disabled); line: 1, column: 14] (through reference chain: org.apache.kafka.connect.runtime.rest.entities.ConnectorOffsets[\"offsets\"]->java.util.ArrayList[0])");
    }

    #[test]
    fn create_fields() {
        let r = create_body(br#"{"name":" n ","config":{"a":1},"initial_state":"paused"}"#).ok();
        let r = r.unwrap_or_default();
        assert_eq!(r.name.as_deref(), Some(" n "));
        assert_eq!(r.initial_state.as_deref(), Some("PAUSED"));
        assert_eq!(
            r.config.map(|c| c.0),
            Some(vec![("a".to_owned(), Some("1".to_owned()))])
        );
        let e = create_body(br#"{"name":"n","foo":1}"#)
            .err()
            .map(|e| e.message)
            .unwrap_or_default();
        assert!(e.starts_with("Unrecognized field \"foo\""), "{e}");
    }
}
