//! The headers column (`router.headers_field`, a native option): the
//! top-level members of a JSON object column become Kafka headers, after
//! the router's own.
//!
//! Owns reading that column's text as a JSON object in document order
//! (for `jsonb`, PostgreSQL's own order as it sends it), each header's
//! bytes (a string member's text; any other member's JSON text without
//! insignificant whitespace, otherwise byte for byte as written, so numbers
//! keep PostgreSQL's digits), which header names the router keeps for
//! itself, and the refusals: text that is not a JSON object, a member with
//! an empty or repeated name, a member named like one of the router's
//! headers. It never decides what a refusal does (the `[errors]` policy
//! does), never logs and never reorders members.

use std::collections::HashSet;
use std::sync::Arc;

use bytes::Bytes;
use serde::de::{Deserializer as _, MapAccess, Visitor};
use serde_json::value::RawValue;

use walrelay_proto::RelationInfo;

use super::config::*;
use super::{
    BoundColumn, BoundPlacement, ColumnLookup, Headers, RecordHeader, RouteError, Router, Row,
};
use crate::connect::pg::{self, oid, PgType};
use crate::connect::Type;

/// The native key of the headers column (no Debezium key exists).
pub const KEY_HEADERS_FIELD: &str = "router.headers_field";

/// What the types a headers column may have are, for error messages.
pub(super) const EXPECTED_TYPES: &str =
    "jsonb, json, text or varchar (a type that holds a json object as text)";

/// Whether a table column of type `type_oid` can be the headers column.
pub(super) fn holds_json(type_oid: u32) -> bool {
    matches!(type_oid, oid::JSONB | oid::JSON | oid::TEXT | oid::VARCHAR)
}

/// Refuses a headers column that another option names too: its value
/// would be read twice, as a router field and as headers.
pub(super) fn check_config(
    cfg: &RouterConfig,
    placements: &[AdditionalField],
) -> Result<(), RouteConfigError> {
    let Some(column) = &cfg.headers_field else {
        return Ok(());
    };
    let conflict = |other: String| {
        Err(RouteConfigError::HeadersFieldConflict {
            key: KEY_HEADERS_FIELD,
            column: column.clone(),
            other,
        })
    };
    for (native, key, value) in [
        ("router.id_field", KEY_ID_FIELD, Some(&cfg.id_field)),
        ("router.key_field", KEY_KEY_FIELD, Some(&cfg.key_field)),
        (
            "router.payload_field",
            KEY_PAYLOAD_FIELD,
            Some(&cfg.payload_field),
        ),
        (
            "router.route_by_field",
            KEY_ROUTE_BY_FIELD,
            Some(&cfg.route_by_field),
        ),
        (
            "router.timestamp_field",
            KEY_TIMESTAMP_FIELD,
            cfg.timestamp_field.as_ref(),
        ),
        (
            "router.schema_version_field",
            KEY_SCHEMA_VERSION_FIELD,
            cfg.schema_version_field.as_ref(),
        ),
        (
            "router.tracing_span_context_field",
            KEY_TRACING_SPAN_CONTEXT_FIELD,
            Some(&cfg.tracing_span_context_field),
        ),
    ] {
        if value == Some(column) {
            return conflict(format!("{native} ({key})"));
        }
    }
    if let Some(p) = placements.iter().find(|p| p.column == *column) {
        let placement = match p.placement {
            Placement::Header => "header",
            Placement::Envelope => "envelope",
            Placement::Partition => "partition",
        };
        return conflict(format!(
            "router.additional_placement ({KEY_ADDITIONAL_PLACEMENT}) entry \"{}:{placement}:{}\"",
            p.column, p.alias
        ));
    }
    Ok(())
}

/// The headers column of a bound relation, with the header names the
/// router sets itself for its events.
#[derive(Debug, Clone)]
pub(super) struct HeadersColumn {
    pub(crate) column: BoundColumn,
    /// Header names the router may write for this relation's events, each
    /// with what it is (for the collision message).
    pub(crate) reserved: Vec<(Arc<str>, &'static str)>,
}

/// Why a headers column's value cannot become headers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadersError {
    /// The text is not UTF-8.
    #[error("its text is not utf-8")]
    NotUtf8,
    /// The text is not JSON.
    #[error("its text is not json: {0}")]
    NotJson(String),
    /// The text is JSON, but not an object.
    #[error("it is a json {0}, not an object")]
    NotObject(&'static str),
    /// A member has the empty name.
    #[error("a member has an empty name, which is no usable kafka header name")]
    EmptyName,
    /// A member name appears twice (a `json` or `text` column can hold that).
    #[error("member \"{0}\" appears more than once")]
    Repeated(String),
    /// A member is named like a header the router writes itself.
    #[error(
        "member \"{member}\" is named like {what}, which walrelay writes itself; rename the member"
    )]
    Collision {
        /// The member's name as the headers column holds it.
        member: String,
        /// The router's header it collides with.
        what: &'static str,
    },
}

impl HeadersError {
    /// Metric label and `walrelay.error.kind` of the problem.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            HeadersError::Collision { .. } => "header_collision",
            _ => "invalid_headers",
        }
    }

    /// The member at fault, where there is one.
    #[cfg(test)]
    pub(crate) fn member(&self) -> Option<&str> {
        match self {
            HeadersError::Repeated(m) | HeadersError::Collision { member: m, .. } => Some(m),
            _ => None,
        }
    }
}

impl Router {
    /// Resolves the headers column, if one is configured: it must exist
    /// and hold JSON text (a table's `jsonb`, `json`, `text` or `varchar`
    /// column; a message's object member or string member). Also gathers
    /// the header names the router writes itself for this relation.
    pub(super) fn bind_headers(
        &self,
        rel: &RelationInfo,
        column: &ColumnLookup<'_>,
        placements: &[BoundPlacement],
        tracing: bool,
    ) -> Result<Option<HeadersColumn>, RouteError> {
        let Some(name) = &self.cfg.headers_field else {
            return Ok(None);
        };
        // A message's members are bound with type OID 0 (`bind_members`),
        // which no PostgreSQL column has.
        let type_oid = |index: usize| rel.columns.get(index).map_or(0, |c| c.type_oid);
        let message = rel.column_index(name).is_some_and(|i| type_oid(i) == 0);
        let wrong = |actual: String| RouteError::WrongColumnType {
            table: rel.qualified_name(),
            column: name.clone(),
            key: KEY_HEADERS_FIELD,
            expected: if message {
                "a json object, or a string holding one"
            } else {
                EXPECTED_TYPES
            },
            actual,
        };
        let c = match column(name, KEY_HEADERS_FIELD) {
            Ok(Some(c)) => c,
            Ok(None) => {
                return Err(RouteError::MissingColumn {
                    table: rel.qualified_name(),
                    column: name.clone(),
                    key: KEY_HEADERS_FIELD,
                })
            }
            // The column is read as text only; its Connect mapping is moot.
            Err(RouteError::UnmappableType { type_name, .. }) => return Err(wrong(type_name)),
            Err(e) => return Err(e),
        };
        if message {
            // Objects (PgType::Content, a JSON-named string) and strings;
            // a number, boolean or Debezium-decoded struct is refused.
            let fits = matches!(c.ty.pg, PgType::Text | PgType::Content)
                && c.ty.schema.kind == Type::String;
            if !fits {
                return Err(wrong(c.ty.schema.java_string()));
            }
        } else {
            let type_oid = type_oid(c.index);
            if !holds_json(type_oid) {
                return Err(wrong(
                    pg::type_name(type_oid)
                        .map_or_else(|| format!("oid {type_oid}"), str::to_owned),
                ));
            }
        }
        let mut reserved: Vec<(Arc<str>, &'static str)> = Vec::new();
        // Debezium adds its context headers to table rows only.
        if !message {
            for h in &self.inherited {
                reserved.push((
                    Arc::clone(&h.name),
                    "a debezium context header (debezium.extended_headers)",
                ));
            }
        }
        if tracing || !self.tracing_context_only {
            for h in [&self.traceparent_header, &self.tracestate_header] {
                reserved.push((
                    Arc::clone(h),
                    "a tracing header (router.tracing_span_context_field)",
                ));
            }
        }
        reserved.push((Arc::clone(&self.id_header), "the event id header"));
        for p in placements
            .iter()
            .filter(|p| p.placement == Placement::Header)
        {
            reserved.push((
                Arc::clone(&p.alias),
                "a header of router.additional_placement (table.fields.additional.placement)",
            ));
        }
        Ok(Some(HeadersColumn {
            column: c,
            reserved,
        }))
    }

    /// Appends the headers column's members of one row to `headers`; NULL
    /// appends nothing.
    pub(super) fn column_headers(
        &self,
        r: &Row<'_>,
        h: &HeadersColumn,
        headers: &mut Headers,
    ) -> Result<(), RouteError> {
        let Some(text) = r.raw(&h.column)? else {
            return Ok(());
        };
        let error = |source| RouteError::Headers {
            column: h.column.name.to_string(),
            lsn: r.meta.lsn,
            event_id: r.event_id(),
            source,
        };
        match headers {
            Headers::Bytes(out) => expand(text, &h.reserved, out).map_err(error),
            Headers::Connect(_) => {
                let mut raw = Vec::new();
                expand(text, &h.reserved, &mut raw).map_err(error)?;
                headers.extend_raw(raw, &self.raw_header_schema);
                Ok(())
            }
        }
    }
}

/// Appends the members of `text`, a JSON object, to `out` as headers, in
/// document order. Nothing is appended when it fails.
pub(super) fn expand(
    text: &[u8],
    reserved: &[(Arc<str>, &'static str)],
    out: &mut Vec<RecordHeader>,
) -> Result<(), HeadersError> {
    let text = std::str::from_utf8(text).map_err(|_| HeadersError::NotUtf8)?;
    let members = members(text)?;
    let mut seen: HashSet<&str> = HashSet::with_capacity(members.len());
    let start = out.len();
    let result = (|| {
        for (name, raw) in &members {
            if name.is_empty() {
                return Err(HeadersError::EmptyName);
            }
            if let Some((_, what)) = reserved.iter().find(|(r, _)| **r == **name) {
                return Err(HeadersError::Collision {
                    member: name.clone(),
                    what,
                });
            }
            if !seen.insert(name) {
                return Err(HeadersError::Repeated(name.clone()));
            }
            out.push(RecordHeader {
                name: Arc::from(name.as_str()),
                value: Some(value(raw.get())?),
            });
        }
        Ok(())
    })();
    if result.is_err() {
        out.truncate(start);
    }
    result
}

/// A header's bytes: a string member's text, any other member's JSON.
fn value(raw: &str) -> Result<Bytes, HeadersError> {
    if raw.starts_with('"') {
        let s: String =
            serde_json::from_str(raw).map_err(|e| HeadersError::NotJson(e.to_string()))?;
        return Ok(Bytes::from(s));
    }
    Ok(Bytes::from(compact(raw)))
}

/// `raw` (valid JSON) without whitespace outside strings; everything else,
/// numbers and string escapes included, as written.
fn compact(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in raw.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            out.push(c);
            in_string = c == '"';
        }
    }
    out
}

/// The members of a JSON object text in document order, values unparsed.
fn members(text: &str) -> Result<Vec<(String, &RawValue)>, HeadersError> {
    // The kind of a value that is not an object, for the message.
    let kind = |t: &str| match t.trim_start().as_bytes().first() {
        Some(b'[') => "array",
        Some(b'"') => "string",
        Some(b'n') => "null",
        Some(b't' | b'f') => "boolean",
        _ => "number",
    };
    let mut de = serde_json::Deserializer::from_str(text);
    let members = match de.deserialize_map(ObjectMembers) {
        Ok(m) => m,
        Err(e) => {
            // Valid JSON of another kind, or not JSON at all.
            return Err(match serde_json::from_str::<&RawValue>(text) {
                Ok(v) => HeadersError::NotObject(kind(v.get())),
                Err(_) => HeadersError::NotJson(e.to_string()),
            });
        }
    };
    de.end().map_err(|e| HeadersError::NotJson(e.to_string()))?;
    Ok(members)
}

/// Visits one JSON object, keeping its members in order as raw text.
struct ObjectMembers;

impl<'de> Visitor<'de> for ObjectMembers {
    type Value = Vec<(String, &'de RawValue)>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, &'de RawValue>()? {
            out.push((k, v));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(reserved: &[&'static str]) -> Vec<(Arc<str>, &'static str)> {
        reserved
            .iter()
            .map(|n| (Arc::from(*n), "a router header"))
            .collect()
    }

    fn run(text: &str) -> Result<Vec<(String, String)>, HeadersError> {
        let mut out = Vec::new();
        expand(text.as_bytes(), &names(&["id"]), &mut out)?;
        Ok(out
            .into_iter()
            .map(|h| {
                (
                    h.name.to_string(),
                    String::from_utf8(h.value.expect("never a null header").to_vec()).unwrap(),
                )
            })
            .collect())
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn strings_are_their_text_and_everything_else_compact_json() {
        // As PostgreSQL's jsonb_out writes it (", " and ": " separators).
        let got = run(
            r#"{"ok": true, "name": "x y", "flags": {"a": [1, 2]}, "nothing": null, "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "schemaVersion": 3}"#,
        )
        .unwrap();
        assert_eq!(
            got,
            pairs(&[
                ("ok", "true"),
                ("name", "x y"),
                ("flags", r#"{"a":[1,2]}"#),
                ("nothing", "null"),
                (
                    "traceparent",
                    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
                ),
                ("schemaVersion", "3"),
            ])
        );
    }

    #[test]
    fn members_keep_document_order() {
        // Neither sorted nor hashed: the order of the text.
        let got = run(r#"{"z": 1, "a": 2, "m": 3, "b": 4}"#).unwrap();
        let order: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(order, vec!["z", "a", "m", "b"]);
    }

    #[test]
    fn empty_object_and_whitespace_give_no_headers() {
        assert_eq!(run("{}").unwrap(), vec![]);
        assert_eq!(run(" \n{ }\t").unwrap(), vec![]);
    }

    #[test]
    fn numbers_keep_their_text() {
        let got = run(
            r#"{"big": 123456789012345678901234567890, "dec": 1.50, "exp": 1e400, "neg": -0.0, "deep": [12345678901234567890.000000000000000001]}"#,
        )
        .unwrap();
        assert_eq!(
            got,
            pairs(&[
                ("big", "123456789012345678901234567890"),
                ("dec", "1.50"),
                ("exp", "1e400"),
                ("neg", "-0.0"),
                ("deep", "[12345678901234567890.000000000000000001]"),
            ])
        );
    }

    #[test]
    fn unicode_and_escapes() {
        let got = run(
            r#"{"grüße": "naïve ☃ 😀", "esc": "a\"b\\c\u00e9\n", "nested": {"k ey": "v \" al\u00e9"}}"#,
        )
        .unwrap();
        assert_eq!(
            got,
            pairs(&[
                ("grüße", "naïve ☃ 😀"),
                ("esc", "a\"b\\cé\n"),
                // Inside a nested value only whitespace between tokens goes;
                // strings and their escapes stay as written.
                ("nested", r#"{"k ey":"v \" al\u00e9"}"#),
            ])
        );
        // An escaped member name is its text.
        let got = run(r#"{"tr\u00e9s": "x"}"#).unwrap();
        assert_eq!(got, pairs(&[("trés", "x")]));
    }

    #[test]
    fn deep_values_are_kept() {
        // Deeper than serde_json's recursion limit (128) for parsed values.
        let depth = 300;
        let text = format!(r#"{{"d": {}1{}}}"#, "[".repeat(depth), "]".repeat(depth));
        let got = run(&text).unwrap();
        assert_eq!(
            got[0].1,
            format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
        );
    }

    #[test]
    fn what_is_not_an_object_is_refused() {
        for (text, want) in [
            ("[1, 2]", HeadersError::NotObject("array")),
            ("\"x\"", HeadersError::NotObject("string")),
            ("42", HeadersError::NotObject("number")),
            ("true", HeadersError::NotObject("boolean")),
            ("null", HeadersError::NotObject("null")),
        ] {
            assert_eq!(run(text).unwrap_err(), want, "{text}");
        }
        for text in [
            "",
            "   ",
            "{",
            "{\"a\": }",
            "not json",
            "{\"a\": 1} x",
            "{'a': 1}",
        ] {
            let err = run(text).unwrap_err();
            assert!(matches!(err, HeadersError::NotJson(_)), "{text}: {err:?}");
            assert_eq!(err.kind(), "invalid_headers");
        }
        let mut out = Vec::new();
        assert_eq!(
            expand(b"{\"a\": \"\xff\"}", &[], &mut out).unwrap_err(),
            HeadersError::NotUtf8
        );
    }

    #[test]
    fn empty_repeated_and_reserved_names_are_refused_and_nothing_is_kept() {
        let mut out = vec![RecordHeader {
            name: Arc::from("id"),
            value: Some(Bytes::from_static(b"e1")),
        }];
        let reserved = names(&["id", "eventType"]);
        for (text, want) in [
            (r#"{"a": 1, "": 2}"#, HeadersError::EmptyName),
            (
                r#"{"a": 1, "b": 2, "a": 3}"#,
                HeadersError::Repeated("a".into()),
            ),
            (
                r#"{"a": 1, "id": "x"}"#,
                HeadersError::Collision {
                    member: "id".into(),
                    what: "a router header",
                },
            ),
            (
                r#"{"eventType": "x"}"#,
                HeadersError::Collision {
                    member: "eventType".into(),
                    what: "a router header",
                },
            ),
        ] {
            let err = expand(text.as_bytes(), &reserved, &mut out).unwrap_err();
            assert_eq!(err, want, "{text}");
            assert_eq!(out.len(), 1, "{text}: the router's header alone");
        }
        let err = expand(br#"{"id": 1}"#, &reserved, &mut out).unwrap_err();
        assert_eq!(err.kind(), "header_collision");
        assert_eq!(err.member(), Some("id"));
        // Header names are case-sensitive in Kafka: "ID" is another name.
        expand(br#"{"ID": 1}"#, &reserved, &mut out).unwrap();
        assert_eq!(&*out[1].name, "ID");
    }

    #[test]
    fn compact_leaves_strings_alone() {
        assert_eq!(
            compact("{ \"a b\" : [ 1 , \"x \\\" y\" , { } ] }"),
            r#"{"a b":[1,"x \" y",{}]}"#
        );
        assert_eq!(compact(r#""\\""#), r#""\\""#);
    }

    // --- the router with a headers column ---

    use walrelay_proto::pgoutput::{ColumnValue, TupleData};
    use walrelay_proto::{Lsn, RelationColumnInfo};

    use crate::connect::config::ConvertersConfig;
    use crate::connect::pg::TableMeta;
    use crate::router::{
        DebeziumConfig, EventMeta, KafkaRecord, MessageEvent, MessageForm, NonTransactional,
    };

    const META: EventMeta = EventMeta {
        lsn: Lsn(0x16_B374_D848),
        commit_lsn: Lsn(0x16_B374_D900),
        xid: 42,
        commit_time_us: 0,
        received_us: 0,
        last_commit_lsn: None,
    };

    fn router_with(cfg: RouterConfig, debezium: DebeziumConfig) -> Router {
        Router::new(cfg, ConvertersConfig::default(), debezium).expect("valid config")
    }

    fn router(placement: Option<&str>) -> Router {
        router_with(
            RouterConfig {
                headers_field: Some("headers".into()),
                additional_placement: placement.map(str::to_owned),
                ..RouterConfig::default()
            },
            DebeziumConfig::default(),
        )
    }

    /// The test outbox, with a `headers` column of `headers_oid` (and a
    /// tracing column when `tracing`).
    fn relation(headers_oid: u32, tracing: bool) -> Arc<RelationInfo> {
        let col = |name: &str, type_oid: u32| RelationColumnInfo {
            name: name.to_owned(),
            type_oid,
            type_modifier: -1,
            is_key: false,
        };
        let mut columns = vec![
            col("id", oid::UUID),
            col("aggregatetype", oid::VARCHAR),
            col("aggregateid", oid::VARCHAR),
            col("type", oid::VARCHAR),
            col("payload", oid::JSONB),
            col("headers", headers_oid),
        ];
        if tracing {
            columns.push(col("tracingspancontext", oid::TEXT));
        }
        Arc::new(RelationInfo {
            id: 16384,
            namespace: "public".to_owned(),
            name: "outbox".to_owned(),
            replica_identity: b'd',
            columns,
        })
    }

    fn row(headers: Option<&str>) -> TupleData {
        let text = |s: &str| ColumnValue::Text(Bytes::copy_from_slice(s.as_bytes()));
        TupleData {
            columns: vec![
                text("e1"),
                text("User"),
                text("k1"),
                text("UserCreated"),
                text("{\"n\": 1}"),
                headers.map_or(ColumnValue::Null, text),
            ],
        }
    }

    fn route(r: &mut Router, headers: Option<&str>) -> Result<KafkaRecord, RouteError> {
        let bound = r
            .bind(&relation(oid::JSONB, false), &TableMeta::unknown())
            .unwrap();
        assert!(bound.problem().is_none(), "{:?}", bound.problem());
        r.route(&bound, &row(headers), &META).map(Option::unwrap)
    }

    fn shown(rec: &KafkaRecord) -> Vec<(String, Option<String>)> {
        rec.headers
            .iter()
            .map(|h| {
                (
                    h.name.to_string(),
                    h.value
                        .as_ref()
                        .map(|v| String::from_utf8(v.to_vec()).unwrap()),
                )
            })
            .collect()
    }

    fn some(p: &[(&str, &str)]) -> Vec<(String, Option<String>)> {
        p.iter()
            .map(|(k, v)| ((*k).to_owned(), Some((*v).to_owned())))
            .collect()
    }

    #[test]
    fn members_follow_the_routers_headers() {
        let mut r = router(Some("type:header:eventType"));
        let rec = route(
            &mut r,
            Some(r#"{"traceparent": "00-ab", "schemaVersion": 3, "flags": {"a": [1, 2]}}"#),
        )
        .unwrap();
        assert_eq!(
            shown(&rec),
            some(&[
                ("id", "e1"),
                ("eventType", "UserCreated"),
                ("traceparent", "00-ab"),
                ("schemaVersion", "3"),
                ("flags", r#"{"a":[1,2]}"#),
            ])
        );
        assert_eq!(rec.value.as_deref(), Some(&b"{\"n\": 1}"[..]));
        // NULL and {} add nothing.
        for h in [None, Some("{}")] {
            let rec = route(&mut r, h).unwrap();
            assert_eq!(
                shown(&rec),
                some(&[("id", "e1"), ("eventType", "UserCreated")])
            );
        }
        // The general value path (an envelope placement) too.
        let mut r = router_with(
            RouterConfig {
                headers_field: Some("headers".into()),
                additional_placement: Some("type:envelope:eventType".into()),
                ..RouterConfig::default()
            },
            DebeziumConfig::default(),
        );
        let rec = route(&mut r, Some(r#"{"a": "b"}"#)).unwrap();
        assert_eq!(shown(&rec), some(&[("id", "e1"), ("a", "b")]));
    }

    #[test]
    fn bad_values_and_collisions_are_errors_naming_the_event_column_and_member() {
        let mut r = router(Some("type:header:eventType"));
        for (value, kind, needles) in [
            ("[1, 2]", "invalid_headers", vec!["array"]),
            ("42", "invalid_headers", vec!["number"]),
            ("not json", "invalid_headers", vec!["not json"]),
            (
                r#"{"id": "x"}"#,
                "header_collision",
                vec!["\"id\"", "event id header"],
            ),
            (
                r#"{"a": 1, "eventType": "x"}"#,
                "header_collision",
                vec!["\"eventType\"", "additional_placement"],
            ),
        ] {
            let err = route(&mut r, Some(value)).unwrap_err();
            assert_eq!(err.kind(), kind, "{value}");
            assert_eq!(err.column(), Some("headers"));
            let text = crate::chain::DisplayChain(&err).to_string();
            for n in needles.iter().chain(&["e1", "16/B374D848", "\"headers\""]) {
                assert!(text.contains(n), "{value}: {text} must name {n}");
            }
        }
    }

    #[test]
    fn debezium_and_tracing_headers_are_reserved_when_written() {
        let mut r = router_with(
            RouterConfig {
                headers_field: Some("headers".into()),
                ..RouterConfig::default()
            },
            DebeziumConfig {
                extended_headers: true,
                ..DebeziumConfig::default()
            },
        );
        let err = route(&mut r, Some(r#"{"__debezium.context.taskId": "1"}"#)).unwrap_err();
        assert_eq!(err.kind(), "header_collision");
        let rec = route(&mut r, Some(r#"{"traceparent": "x"}"#)).unwrap();
        assert_eq!(
            rec.headers.len(),
            6,
            "four context headers, id, traceparent"
        );
        // With the span context column in the table, the router may write
        // traceparent and tracestate: members of those names are refused,
        // also in a row whose span context is NULL.
        let bound = r
            .bind(&relation(oid::JSONB, true), &TableMeta::unknown())
            .unwrap();
        let mut tuple = row(Some(r#"{"tracestate": "x"}"#));
        tuple.columns.push(ColumnValue::Null);
        let err = r
            .route(&bound, &tuple, &META)
            .map(Option::unwrap)
            .unwrap_err();
        assert_eq!(err.kind(), "header_collision");
    }

    #[test]
    fn the_column_must_exist_and_hold_json_text() {
        let r = router(None);
        for oid in [oid::JSONB, oid::JSON, oid::TEXT, oid::VARCHAR] {
            r.check_layout(&relation(oid, false), &TableMeta::unknown())
                .unwrap_or_else(|e| panic!("oid {oid}: {e}"));
        }
        for (oid, name) in [
            (oid::UUID, "uuid"),
            (oid::INT4, "int4"),
            (oid::BYTEA, "bytea"),
            (oid::BPCHAR, "bpchar"),
            (600, "oid 600"),
        ] {
            let err = r
                .check_layout(&relation(oid, false), &TableMeta::unknown())
                .unwrap_err();
            assert_eq!(err.kind(), "wrong_column_type", "{oid}");
            let text = err.to_string();
            assert!(
                text.contains("\"headers\"")
                    && text.contains(KEY_HEADERS_FIELD)
                    && text.contains(&format!("but it is {name}")),
                "{text}"
            );
        }
        let mut rel = (*relation(oid::JSONB, false)).clone();
        rel.columns.retain(|c| c.name != "headers");
        let err = r
            .check_layout(&Arc::new(rel), &TableMeta::unknown())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "outbox table public.outbox has no column \"headers\" (router.headers_field)"
        );
    }

    #[test]
    fn a_column_of_another_option_is_refused_by_key() {
        let cfg = |headers: &str, placement: Option<&str>| RouterConfig {
            headers_field: Some(headers.into()),
            additional_placement: placement.map(str::to_owned),
            timestamp_field: Some("createdat".into()),
            ..RouterConfig::default()
        };
        for (c, needle) in [
            (cfg("payload", None), "router.payload_field"),
            (cfg("id", None), "router.id_field"),
            (cfg("aggregateid", None), "router.key_field"),
            (cfg("aggregatetype", None), "router.route_by_field"),
            (cfg("createdat", None), "router.timestamp_field"),
            (
                cfg("tracingspancontext", None),
                "router.tracing_span_context_field",
            ),
            (
                cfg("h", Some("type:header:eventType,h:header:meta")),
                "entry \"h:header:meta\"",
            ),
            (cfg("h", Some("h:envelope")), "entry \"h:envelope:h\""),
        ] {
            let err = c.validate().unwrap_err();
            let text = err.to_string();
            assert!(
                text.starts_with("router.headers_field names column") && text.contains(needle),
                "{text}"
            );
        }
        let err = cfg(" ", None).validate().unwrap_err();
        assert_eq!(
            err.to_string(),
            "router.headers_field must name a column, but it is empty"
        );
        cfg("headers", Some("type:header:eventType"))
            .validate()
            .unwrap();
    }

    fn message(content: &str) -> MessageEvent {
        MessageEvent {
            prefix: Arc::from("outbox"),
            content: Bytes::copy_from_slice(content.as_bytes()),
            transactional: true,
            last_commit_lsn: None,
            source_time_us: 0,
            transaction: None,
        }
    }

    #[test]
    fn a_message_member_is_a_headers_column() {
        let mut r = router(None);
        r.set_message_form(MessageForm::Native, NonTransactional::Error, "app");
        let base =
            r#""id": "m1", "aggregatetype": "Order", "aggregateid": "42", "payload": {"a": 1}"#;
        let (rec, _) = r
            .route_message(
                &message(&format!(
                    r#"{{{base}, "headers": {{"b": "x", "c": [1, 2]}}}}"#
                )),
                &META,
            )
            .map(|(r, id)| (r.unwrap(), id))
            .unwrap();
        assert_eq!(
            shown(&rec),
            some(&[("id", "m1"), ("b", "x"), ("c", "[1,2]")])
        );
        // A string holding an object, and null.
        let (rec, _) = r
            .route_message(
                &message(&format!(r#"{{{base}, "headers": "{{\"b\": 2}}"}}"#)),
                &META,
            )
            .map(|(r, id)| (r.unwrap(), id))
            .unwrap();
        assert_eq!(shown(&rec), some(&[("id", "m1"), ("b", "2")]));
        let (rec, _) = r
            .route_message(&message(&format!(r#"{{{base}, "headers": null}}"#)), &META)
            .map(|(r, id)| (r.unwrap(), id))
            .unwrap();
        assert_eq!(shown(&rec), some(&[("id", "m1")]));
        // Missing, a number, an array, a collision: bad input.
        for (headers, kind) in [
            ("", "missing_column"),
            (r#", "headers": 5"#, "wrong_column_type"),
            (r#", "headers": 5.5"#, "wrong_column_type"),
            (r#", "headers": [1]"#, "invalid_headers"),
            (r#", "headers": {"id": "x"}"#, "header_collision"),
        ] {
            let err = r
                .route_message(&message(&format!("{{{base}{headers}}}")), &META)
                .map(|(r, id)| (r.unwrap(), id))
                .unwrap_err();
            assert_eq!(err.kind(), kind, "{headers}: {err}");
            assert!(err.to_string().contains("headers"), "{err}");
        }
    }
}
