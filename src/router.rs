//! Debezium outbox EventRouter semantics: one outbox row in, one Kafka record out.
//!
//! Owns the mapping from an inserted outbox row (pgoutput text values) to the
//! record Debezium's `EventRouter` SMT would emit behind Kafka Connect's
//! `StringConverter` and `SimpleHeaderConverter`: topic through
//! `RegexRouter` (`route.by.field`, `route.topic.regex`,
//! `route.topic.replacement`), key and value as the column bytes, the `id`
//! header. Column names are resolved once per Relation message
//! ([`Router::bind`]), so the per-event path does no name lookups, no regex
//! work for a route value seen before and no allocation for key or value.
//!
//! It must never do I/O, log, or look at anything but the row and the
//! configuration: it is a pure function plus a topic cache.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use regex::Regex;
use serde::Deserialize;
use walrelay_proto::pgoutput::{ColumnValue, TupleData};
use walrelay_proto::{Lsn, RelationInfo};

/// Debezium key of [`RouterConfig::id_field`].
pub const KEY_ID_FIELD: &str = "table.field.event.id";
/// Debezium key of [`RouterConfig::key_field`].
pub const KEY_KEY_FIELD: &str = "table.field.event.key";
/// Debezium key of [`RouterConfig::payload_field`].
pub const KEY_PAYLOAD_FIELD: &str = "table.field.event.payload";
/// Debezium key of [`RouterConfig::route_by_field`].
pub const KEY_ROUTE_BY_FIELD: &str = "route.by.field";
/// Debezium key of [`RouterConfig::route_topic_regex`].
pub const KEY_ROUTE_TOPIC_REGEX: &str = "route.topic.regex";
/// Debezium key of [`RouterConfig::route_topic_replacement`].
pub const KEY_ROUTE_TOPIC_REPLACEMENT: &str = "route.topic.replacement";

/// Debezium's default for `table.field.event.id`.
pub const DEFAULT_ID_FIELD: &str = "id";
/// Debezium's default for `table.field.event.key`.
pub const DEFAULT_KEY_FIELD: &str = "aggregateid";
/// Debezium's default for `table.field.event.payload`.
pub const DEFAULT_PAYLOAD_FIELD: &str = "payload";
/// Debezium's default for `route.by.field`.
pub const DEFAULT_ROUTE_BY_FIELD: &str = "aggregatetype";
/// Debezium's default for `route.topic.regex`.
pub const DEFAULT_ROUTE_TOPIC_REGEX: &str = "(?<routedByValue>.*)";
/// Debezium's default for `route.topic.replacement`.
pub const DEFAULT_ROUTE_TOPIC_REPLACEMENT: &str = "outbox.event.${routedByValue}";

/// Name of the event id header, as Debezium writes it.
pub const ID_HEADER: &str = "id";

/// Distinct route values remembered before the topic cache is cleared; real
/// outboxes have a handful of aggregate types, so this only bounds abuse.
const TOPIC_CACHE_LIMIT: usize = 10_000;

/// PostgreSQL's `bool` type OID: its text form `t`/`f` becomes `true`/`false`
/// in a header, as Kafka Connect renders a BOOLEAN.
const BOOL_OID: u32 = 16;

/// The outbox EventRouter options walrelay implements, with Debezium's defaults.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RouterConfig {
    /// Column whose value becomes the `id` header (`table.field.event.id`).
    pub id_field: String,
    /// Column whose value becomes the record key (`table.field.event.key`).
    pub key_field: String,
    /// Column whose value becomes the record value (`table.field.event.payload`).
    pub payload_field: String,
    /// Column whose value selects the topic (`route.by.field`).
    pub route_by_field: String,
    /// Java regular expression the route value must fully match to be
    /// rewritten (`route.topic.regex`).
    pub route_topic_regex: String,
    /// Java `Matcher` replacement giving the topic (`$1`, `${name}`, `\`
    /// escapes) (`route.topic.replacement`).
    pub route_topic_replacement: String,
}

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig {
            id_field: DEFAULT_ID_FIELD.to_owned(),
            key_field: DEFAULT_KEY_FIELD.to_owned(),
            payload_field: DEFAULT_PAYLOAD_FIELD.to_owned(),
            route_by_field: DEFAULT_ROUTE_BY_FIELD.to_owned(),
            route_topic_regex: DEFAULT_ROUTE_TOPIC_REGEX.to_owned(),
            route_topic_replacement: DEFAULT_ROUTE_TOPIC_REPLACEMENT.to_owned(),
        }
    }
}

impl RouterConfig {
    /// Checks every option, naming the Debezium key of the first bad one.
    pub fn validate(&self) -> Result<(), RouteConfigError> {
        self.compile().map(drop)
    }

    fn compile(&self) -> Result<TopicRewrite, RouteConfigError> {
        for (key, value) in [
            (KEY_ID_FIELD, &self.id_field),
            (KEY_KEY_FIELD, &self.key_field),
            (KEY_PAYLOAD_FIELD, &self.payload_field),
            (KEY_ROUTE_BY_FIELD, &self.route_by_field),
        ] {
            if value.trim().is_empty() {
                return Err(RouteConfigError::EmptyField { key });
            }
        }
        TopicRewrite::new(&self.route_topic_regex, &self.route_topic_replacement)
    }
}

/// A configuration the router cannot run with.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RouteConfigError {
    /// A column-name option is empty.
    #[error("{key} must name a column, but it is empty")]
    EmptyField {
        /// Debezium key of the option.
        key: &'static str,
    },
    /// The topic regex does not compile (or uses Java syntax the `regex`
    /// crate does not have: look-around, back-references, possessive
    /// quantifiers, `\Q..\E`).
    #[error("{key} is not a supported regular expression")]
    InvalidRegex {
        /// Debezium key of the option.
        key: &'static str,
        /// What the regex compiler objected to.
        #[source]
        source: regex::Error,
    },
    /// The topic replacement is not valid Java `Matcher` replacement syntax
    /// for the configured regex.
    #[error("{key} is invalid at character {position}: {reason}")]
    InvalidReplacement {
        /// Debezium key of the option.
        key: &'static str,
        /// Zero-based character index of the problem.
        position: usize,
        /// What is wrong there.
        reason: String,
    },
}

/// One outbox row that cannot become a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// A configured column does not exist in the outbox relation.
    #[error("outbox table {table} has no column \"{column}\" ({key})")]
    MissingColumn {
        /// `schema.table`.
        table: String,
        /// The configured column name.
        column: String,
        /// Debezium key that names it.
        key: &'static str,
    },
    /// The row has fewer values than its relation has columns.
    #[error("row at lsn {lsn} has {width} values, but column \"{column}\" is number {}", .index + 1)]
    ShortRow {
        /// The needed column.
        column: String,
        /// Its zero-based position.
        index: usize,
        /// Values in the row.
        width: usize,
        /// LSN of the change.
        lsn: Lsn,
    },
    /// The event id column is NULL; Debezium requires an event id.
    #[error("event id column \"{column}\" is null at lsn {lsn}; an event id is required")]
    NullEventId {
        /// The id column.
        column: String,
        /// LSN of the change.
        lsn: Lsn,
    },
    /// The route-by column is NULL, so there is no topic.
    #[error("route column \"{column}\" is null at lsn {lsn} (event id {event_id})")]
    NullRouteValue {
        /// The route-by column.
        column: String,
        /// LSN of the change.
        lsn: Lsn,
        /// Text of the event id, or `unknown`.
        event_id: String,
    },
    /// The route-by column is not UTF-8, so it cannot name a topic.
    #[error("route column \"{column}\" is not valid utf-8 at lsn {lsn} (event id {event_id})")]
    NonUtf8RouteValue {
        /// The route-by column.
        column: String,
        /// LSN of the change.
        lsn: Lsn,
        /// Text of the event id, or `unknown`.
        event_id: String,
        /// Where decoding stopped.
        #[source]
        source: std::str::Utf8Error,
    },
    /// A needed column came as "unchanged TOAST", which pgoutput sends only
    /// in updates.
    #[error("column \"{column}\" is an unchanged toasted value at lsn {lsn} (event id {event_id}); pgoutput sends those only for updates, never for the inserts outbox events are")]
    UnchangedToast {
        /// The column.
        column: String,
        /// LSN of the change.
        lsn: Lsn,
        /// Text of the event id, or `unknown`.
        event_id: String,
    },
    /// A needed column came in pgoutput's binary format.
    #[error("binary pgoutput values are not supported for column \"{column}\" at lsn {lsn} (event id {event_id})")]
    BinaryValue {
        /// The column.
        column: String,
        /// LSN of the change.
        lsn: Lsn,
        /// Text of the event id, or `unknown`.
        event_id: String,
    },
}

/// Where an event comes from; used for error context (and later for
/// timestamp options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventMeta {
    /// LSN of the change.
    pub lsn: Lsn,
    /// Commit LSN of its transaction.
    pub commit_lsn: Lsn,
    /// Transaction id.
    pub xid: u32,
    /// Commit time, Unix µs.
    pub commit_time_us: i64,
}

/// One Kafka header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordHeader {
    /// Header name, shared between records.
    pub name: Arc<str>,
    /// Header value; `None` is a null header.
    pub value: Option<Bytes>,
}

/// A record ready for the producer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaRecord {
    /// Destination topic, shared with every record of the same route value.
    pub topic: Arc<str>,
    /// Key bytes; `None` is a null key.
    pub key: Option<Bytes>,
    /// Value bytes; `None` is a tombstone.
    pub value: Option<Bytes>,
    /// Headers in order.
    pub headers: Vec<RecordHeader>,
    /// Explicit partition; `None` lets the producer's partitioner decide.
    pub partition: Option<i32>,
    /// Explicit timestamp, Unix ms; `None` uses the producer's clock.
    pub timestamp_ms: Option<i64>,
}

/// Column positions of the configured fields in one outbox relation.
#[derive(Debug, Clone)]
pub struct BoundRelation {
    relation: Arc<RelationInfo>,
    id: usize,
    key: usize,
    payload: usize,
    route: usize,
    id_is_bool: bool,
}

impl BoundRelation {
    /// The relation this binding was made for.
    pub fn relation(&self) -> &Arc<RelationInfo> {
        &self.relation
    }

    fn column_name(&self, index: usize) -> String {
        self.relation
            .columns
            .get(index)
            .map_or_else(|| format!("#{}", index + 1), |c| c.name.clone())
    }
}

/// One piece of a parsed Java replacement string.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(String),
    Group(usize),
}

/// Kafka Connect's `RegexRouter`, in the `regex` crate's dialect.
///
/// Java `Pattern` and the `regex` crate agree on the syntax the defaults and
/// ordinary routing patterns use (classes, groups, `(?<name>..)`,
/// alternation, quantifiers, `^`/`$`, inline `(?i)`/`(?s)`/`(?m)`/`(?x)`).
/// Known differences:
/// - Java-only constructs (look-around, back-references, possessive and
///   atomic groups, `\Q..\E`, `\h`, octal escapes, `\p{javaLowerCase}`) are
///   rejected by [`RouterConfig::validate`].
/// - `.` excludes `\n` and `\r` here (CRLF mode), Java also excludes U+0085,
///   U+2028 and U+2029: a route value containing those is routed here and
///   left raw by Java under `.*`.
/// - `\d`, `\w`, `\s`, `\b` and `(?i)` are Unicode-aware here, ASCII-only in
///   Java by default; `\v` is a vertical tab here and any vertical
///   whitespace in Java; `(?U)` swaps greediness here and enables Unicode
///   classes in Java; `(?P<name>..)` is accepted here only.
/// - The full-match test wraps the pattern as `^(?:..)$`; a pattern in `(?x)`
///   mode ending in a `#` comment therefore fails to compile (a config
///   error, not a silent difference).
#[derive(Debug, Clone)]
struct TopicRewrite {
    /// Anchored: Java's `Matcher.matches()`.
    full: Regex,
    /// Unanchored: the first match `replaceFirst` rewrites.
    first: Regex,
    replacement: Vec<Piece>,
}

impl TopicRewrite {
    fn new(pattern: &str, replacement: &str) -> Result<Self, RouteConfigError> {
        let invalid = |source| RouteConfigError::InvalidRegex {
            key: KEY_ROUTE_TOPIC_REGEX,
            source,
        };
        // `R` keeps `.` off `\r`, one of Java's line terminators.
        let first = Regex::new(&format!("(?R){pattern}")).map_err(invalid)?;
        let full = Regex::new(&format!("(?R)^(?:{pattern})$")).map_err(invalid)?;
        let replacement = parse_replacement(replacement, &first)?;
        Ok(TopicRewrite {
            full,
            first,
            replacement,
        })
    }

    /// `RegexRouter.apply`: `matches()` ? `replaceFirst(replacement)` : value.
    fn apply(&self, value: &str) -> String {
        if !self.full.is_match(value) {
            return value.to_owned();
        }
        let Some(caps) = self.first.captures(value) else {
            return value.to_owned();
        };
        let Some(whole) = caps.get(0) else {
            return value.to_owned();
        };
        let mut out = String::with_capacity(value.len() + 32);
        out.push_str(&value[..whole.start()]);
        for piece in &self.replacement {
            match piece {
                Piece::Literal(s) => out.push_str(s),
                // A group that did not participate appends nothing, as in Java.
                Piece::Group(i) => {
                    if let Some(g) = caps.get(*i) {
                        out.push_str(g.as_str());
                    }
                }
            }
        }
        out.push_str(&value[whole.end()..]);
        out
    }
}

/// Parses Java `Matcher` replacement syntax (`appendExpandedReplacement`)
/// against `regex`'s groups, so every error Java would raise at routing time
/// is raised at startup instead.
fn parse_replacement(replacement: &str, regex: &Regex) -> Result<Vec<Piece>, RouteConfigError> {
    let err = |position: usize, reason: String| RouteConfigError::InvalidReplacement {
        key: KEY_ROUTE_TOPIC_REPLACEMENT,
        position,
        reason,
    };
    // Java's groupCount() excludes group 0.
    let group_count = regex.captures_len().saturating_sub(1);
    let chars: Vec<char> = replacement.chars().collect();
    let mut pieces = Vec::new();
    let mut literal = String::new();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        match c {
            '\\' => {
                let Some(&escaped) = chars.get(i + 1) else {
                    return Err(err(i, "character to be escaped is missing".to_owned()));
                };
                literal.push(escaped);
                i += 2;
            }
            '$' => {
                let Some(&next) = chars.get(i + 1) else {
                    return Err(err(i, "group index is missing after '$'".to_owned()));
                };
                let group = if next == '{' {
                    let name_start = i + 2;
                    let mut end = name_start;
                    while chars.get(end).is_some_and(|c| c.is_ascii_alphanumeric()) {
                        end += 1;
                    }
                    let name: String = chars[name_start..end].iter().collect();
                    if name.is_empty() {
                        return Err(err(i, "named group reference has an empty name".to_owned()));
                    }
                    if chars.get(end) != Some(&'}') {
                        return Err(err(
                            i,
                            format!("named group reference ${{{name} is missing its '}}'"),
                        ));
                    }
                    if name.starts_with(|c: char| c.is_ascii_digit()) {
                        return Err(err(i, format!("group name {{{name}}} starts with a digit")));
                    }
                    let Some(index) = regex.capture_names().position(|n| n == Some(name.as_str()))
                    else {
                        return Err(err(
                            i,
                            format!("{KEY_ROUTE_TOPIC_REGEX} has no group named {{{name}}}"),
                        ));
                    };
                    i = end + 1;
                    index
                } else {
                    let Some(first) = next.to_digit(10) else {
                        return Err(err(
                            i,
                            format!(
                                "'$' must be followed by a group number or {{name}}, not {next:?}"
                            ),
                        ));
                    };
                    let mut group = first as usize;
                    if group > group_count {
                        return Err(err(
                            i,
                            format!("{KEY_ROUTE_TOPIC_REGEX} has no group {group} (it has {group_count})"),
                        ));
                    }
                    i += 2;
                    // Java takes further digits while the group exists.
                    while let Some(d) = chars.get(i).and_then(|c| c.to_digit(10)) {
                        let longer = group * 10 + d as usize;
                        if longer > group_count {
                            break;
                        }
                        group = longer;
                        i += 1;
                    }
                    group
                };
                if !literal.is_empty() {
                    pieces.push(Piece::Literal(std::mem::take(&mut literal)));
                }
                pieces.push(Piece::Group(group));
            }
            _ => {
                literal.push(c);
                i += 1;
            }
        }
    }
    if !literal.is_empty() {
        pieces.push(Piece::Literal(literal));
    }
    Ok(pieces)
}

/// The outbox EventRouter: configuration compiled once, plus a bounded cache
/// from route value bytes to topic.
#[derive(Debug, Clone)]
pub struct Router {
    cfg: RouterConfig,
    rewrite: TopicRewrite,
    topics: HashMap<Box<[u8]>, Arc<str>>,
    id_header: Arc<str>,
}

impl Router {
    /// Validates and compiles `cfg`.
    pub fn new(cfg: RouterConfig) -> Result<Self, RouteConfigError> {
        let rewrite = cfg.compile()?;
        Ok(Router {
            cfg,
            rewrite,
            topics: HashMap::new(),
            id_header: Arc::from(ID_HEADER),
        })
    }

    /// The configuration this router was built from.
    pub fn config(&self) -> &RouterConfig {
        &self.cfg
    }

    /// Resolves the configured column names against the outbox relation;
    /// call once per Relation message, not per row.
    pub fn bind(&self, rel: &Arc<RelationInfo>) -> Result<BoundRelation, RouteError> {
        let find = |column: &str, key: &'static str| {
            rel.column_index(column)
                .ok_or_else(|| RouteError::MissingColumn {
                    table: rel.qualified_name(),
                    column: column.to_owned(),
                    key,
                })
        };
        let id = find(&self.cfg.id_field, KEY_ID_FIELD)?;
        let key = find(&self.cfg.key_field, KEY_KEY_FIELD)?;
        let payload = find(&self.cfg.payload_field, KEY_PAYLOAD_FIELD)?;
        let route = find(&self.cfg.route_by_field, KEY_ROUTE_BY_FIELD)?;
        let id_is_bool = rel.columns.get(id).is_some_and(|c| c.type_oid == BOOL_OID);
        Ok(BoundRelation {
            relation: Arc::clone(rel),
            id,
            key,
            payload,
            route,
            id_is_bool,
        })
    }

    /// Turns one inserted outbox row into a record.
    pub fn route(
        &mut self,
        bound: &BoundRelation,
        row: &TupleData,
        meta: &EventMeta,
    ) -> Result<KafkaRecord, RouteError> {
        let value = |index: usize| {
            row.get(index).ok_or_else(|| RouteError::ShortRow {
                column: bound.column_name(index),
                index,
                width: row.len(),
                lsn: meta.lsn,
            })
        };
        let id_value = value(bound.id)?;
        let event_id = || match id_value {
            ColumnValue::Text(b) => String::from_utf8_lossy(b).into_owned(),
            _ => "unknown".to_owned(),
        };
        // Text value of a needed column; Null is the caller's to interpret.
        let text = |index: usize| -> Result<Option<&Bytes>, RouteError> {
            match value(index)? {
                ColumnValue::Text(b) => Ok(Some(b)),
                ColumnValue::Null => Ok(None),
                ColumnValue::UnchangedToast => Err(RouteError::UnchangedToast {
                    column: bound.column_name(index),
                    lsn: meta.lsn,
                    event_id: event_id(),
                }),
                ColumnValue::Binary(_) => Err(RouteError::BinaryValue {
                    column: bound.column_name(index),
                    lsn: meta.lsn,
                    event_id: event_id(),
                }),
            }
        };

        let id = text(bound.id)?.ok_or_else(|| RouteError::NullEventId {
            column: bound.column_name(bound.id),
            lsn: meta.lsn,
        })?;
        let id = if bound.id_is_bool {
            match id.as_ref() {
                b"t" => Bytes::from_static(b"true"),
                b"f" => Bytes::from_static(b"false"),
                _ => id.clone(),
            }
        } else {
            id.clone()
        };

        let route = text(bound.route)?.ok_or_else(|| RouteError::NullRouteValue {
            column: bound.column_name(bound.route),
            lsn: meta.lsn,
            event_id: event_id(),
        })?;
        let key = text(bound.key)?.cloned();
        let payload = text(bound.payload)?.cloned();

        let topic = match self.topics.get(route.as_ref()) {
            Some(topic) => Arc::clone(topic),
            None => {
                let route_str =
                    std::str::from_utf8(route).map_err(|source| RouteError::NonUtf8RouteValue {
                        column: bound.column_name(bound.route),
                        lsn: meta.lsn,
                        event_id: event_id(),
                        source,
                    })?;
                let topic: Arc<str> = Arc::from(self.rewrite.apply(route_str));
                if self.topics.len() >= TOPIC_CACHE_LIMIT {
                    self.topics.clear();
                }
                self.topics
                    .insert(Box::from(route.as_ref()), Arc::clone(&topic));
                topic
            }
        };

        Ok(KafkaRecord {
            topic,
            key,
            value: payload,
            headers: vec![RecordHeader {
                name: Arc::clone(&self.id_header),
                value: Some(id),
            }],
            partition: None,
            timestamp_ms: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use walrelay_proto::RelationColumnInfo;

    const UUID_OID: u32 = 2950;
    const VARCHAR_OID: u32 = 1043;
    const JSONB_OID: u32 = 3802;

    fn relation(id_oid: u32) -> Arc<RelationInfo> {
        let col = |name: &str, type_oid: u32| RelationColumnInfo {
            name: name.to_owned(),
            type_oid,
            type_modifier: -1,
            is_key: name == "id",
        };
        Arc::new(RelationInfo {
            id: 16384,
            namespace: "public".to_owned(),
            name: "outbox".to_owned(),
            replica_identity: b'd',
            columns: vec![
                col("id", id_oid),
                col("aggregatetype", VARCHAR_OID),
                col("aggregateid", VARCHAR_OID),
                col("type", VARCHAR_OID),
                col("payload", JSONB_OID),
            ],
        })
    }

    fn text(s: &str) -> ColumnValue {
        ColumnValue::Text(Bytes::copy_from_slice(s.as_bytes()))
    }

    fn row(
        id: ColumnValue,
        aggregatetype: ColumnValue,
        key: ColumnValue,
        payload: ColumnValue,
    ) -> TupleData {
        TupleData {
            columns: vec![id, aggregatetype, key, text("UserCreated"), payload],
        }
    }

    fn user_row() -> TupleData {
        row(
            text("59a42efd-b015-44a9-9dde-cb36d9002425"),
            text("User"),
            text("10711fa5"),
            text("{\"email\": \"gh@mefi.in\"}"),
        )
    }

    fn meta() -> EventMeta {
        EventMeta {
            lsn: Lsn(0x16_B374_D848),
            commit_lsn: Lsn(0x16_B374_D900),
            xid: 42,
            commit_time_us: 1_700_000_000_000_000,
        }
    }

    fn router(regex: &str, replacement: &str) -> Router {
        Router::new(RouterConfig {
            route_topic_regex: regex.to_owned(),
            route_topic_replacement: replacement.to_owned(),
            ..RouterConfig::default()
        })
        .expect("test config is valid")
    }

    fn topic_for(router: &mut Router, value: &str) -> String {
        let rel = relation(UUID_OID);
        let bound = router.bind(&rel).expect("outbox columns present");
        let r = row(text("1"), text(value), text("k"), text("{}"));
        router
            .route(&bound, &r, &meta())
            .expect("routes")
            .topic
            .to_string()
    }

    #[test]
    fn default_record() {
        let mut router = Router::new(RouterConfig::default()).expect("defaults are valid");
        let rel = relation(UUID_OID);
        let bound = router.bind(&rel).expect("outbox columns present");
        let rec = router.route(&bound, &user_row(), &meta()).expect("routes");
        assert_eq!(&*rec.topic, "outbox.event.User");
        assert_eq!(rec.key.as_deref(), Some(&b"10711fa5"[..]));
        assert_eq!(
            rec.value.as_deref(),
            Some(&b"{\"email\": \"gh@mefi.in\"}"[..])
        );
        assert_eq!(rec.headers.len(), 1);
        assert_eq!(&*rec.headers[0].name, "id");
        assert_eq!(
            rec.headers[0].value.as_deref(),
            Some(&b"59a42efd-b015-44a9-9dde-cb36d9002425"[..])
        );
        assert_eq!(rec.partition, None);
        assert_eq!(rec.timestamp_ms, None);
        // The second event of the same aggregate type shares the topic string.
        let again = router.route(&bound, &user_row(), &meta()).expect("routes");
        assert!(Arc::ptr_eq(&rec.topic, &again.topic));
        assert!(Arc::ptr_eq(&rec.headers[0].name, &again.headers[0].name));
    }

    #[test]
    fn key_and_value_are_zero_copy() {
        let mut router = Router::new(RouterConfig::default()).expect("defaults are valid");
        let rel = relation(UUID_OID);
        let bound = router.bind(&rel).expect("outbox columns present");
        let r = user_row();
        let rec = router.route(&bound, &r, &meta()).expect("routes");
        let (Some(ColumnValue::Text(k)), Some(ColumnValue::Text(p))) = (r.get(2), r.get(4)) else {
            panic!("test row has text key and payload");
        };
        assert_eq!(rec.key.as_ref().map(|b| b.as_ptr()), Some(k.as_ptr()));
        assert_eq!(rec.value.as_ref().map(|b| b.as_ptr()), Some(p.as_ptr()));
    }

    #[test]
    fn custom_regex_numbered_group() {
        let mut r = router("(.*)Event", "events.$1");
        assert_eq!(topic_for(&mut r, "OrderEvent"), "events.Order");
    }

    #[test]
    fn custom_regex_named_group() {
        let mut r = router("(?<kind>[a-z]+)-(?<ver>v[0-9]+)", "t.${ver}.${kind}");
        assert_eq!(topic_for(&mut r, "order-v2"), "t.v2.order");
    }

    #[test]
    fn escaped_dollar_and_backslash() {
        let mut r = router("(.*)", "cost\\$.$1\\\\x");
        assert_eq!(topic_for(&mut r, "A"), "cost$.A\\x");
    }

    #[test]
    fn greedy_group_digits_stop_at_existing_groups() {
        // One group: "$10" is group 1 followed by a literal 0.
        let mut r = router("(.*)", "t.$10");
        assert_eq!(topic_for(&mut r, "A"), "t.A0");
    }

    #[test]
    fn replace_first_uses_the_first_match_not_the_full_one() {
        // matches() holds via "ab", but replaceFirst rewrites only the "a".
        let mut r = router("a|ab", "X");
        assert_eq!(topic_for(&mut r, "ab"), "Xb");
    }

    #[test]
    fn non_matching_value_stays_raw() {
        let mut r = router("order-(.*)", "orders.$1");
        assert_eq!(topic_for(&mut r, "user-1"), "user-1");
        // a partial match is not a match
        assert_eq!(topic_for(&mut r, "xorder-1"), "xorder-1");
    }

    #[test]
    fn value_with_line_terminator_stays_raw_under_default_regex() {
        let mut r = Router::new(RouterConfig::default()).expect("defaults are valid");
        assert_eq!(topic_for(&mut r, "Us\ner"), "Us\ner");
        assert_eq!(topic_for(&mut r, "User\r"), "User\r");
    }

    #[test]
    fn null_payload_is_a_tombstone_and_null_key_is_null() {
        let mut router = Router::new(RouterConfig::default()).expect("defaults are valid");
        let rel = relation(UUID_OID);
        let bound = router.bind(&rel).expect("outbox columns present");
        let r = row(
            text("1"),
            text("User"),
            ColumnValue::Null,
            ColumnValue::Null,
        );
        let rec = router.route(&bound, &r, &meta()).expect("routes");
        assert_eq!(rec.key, None);
        assert_eq!(rec.value, None);
        assert_eq!(&*rec.topic, "outbox.event.User");
    }

    #[test]
    fn bool_id_header_is_java_boolean_text() {
        let mut router = Router::new(RouterConfig::default()).expect("defaults are valid");
        let rel = relation(BOOL_OID);
        let bound = router.bind(&rel).expect("outbox columns present");
        for (pg, java) in [("t", "true"), ("f", "false")] {
            let r = row(text(pg), text("User"), text("k"), text("{}"));
            let rec = router.route(&bound, &r, &meta()).expect("routes");
            assert_eq!(rec.headers[0].value.as_deref(), Some(java.as_bytes()));
        }
        // Only bool columns are rewritten.
        let rel = relation(VARCHAR_OID);
        let bound = router.bind(&rel).expect("outbox columns present");
        let r = row(text("t"), text("User"), text("k"), text("{}"));
        let rec = router.route(&bound, &r, &meta()).expect("routes");
        assert_eq!(rec.headers[0].value.as_deref(), Some(&b"t"[..]));
    }

    #[test]
    fn missing_column_names_column_and_key() {
        let router = Router::new(RouterConfig::default()).expect("defaults are valid");
        let mut rel = (*relation(UUID_OID)).clone();
        rel.columns.retain(|c| c.name != "aggregateid");
        let err = router.bind(&Arc::new(rel)).expect_err("column missing");
        assert_eq!(
            err.to_string(),
            "outbox table public.outbox has no column \"aggregateid\" (table.field.event.key)"
        );
    }

    #[test]
    fn per_event_errors_carry_context() {
        let mut router = Router::new(RouterConfig::default()).expect("defaults are valid");
        let rel = relation(UUID_OID);
        let bound = router.bind(&rel).expect("outbox columns present");

        let r = row(ColumnValue::Null, text("User"), text("k"), text("{}"));
        let err = router.route(&bound, &r, &meta()).expect_err("null id");
        assert!(matches!(err, RouteError::NullEventId { .. }));
        assert!(err.to_string().contains("16/B374D848"), "{err}");

        let r = row(text("e1"), ColumnValue::Null, text("k"), text("{}"));
        let err = router.route(&bound, &r, &meta()).expect_err("null route");
        let msg = err.to_string();
        assert!(
            msg.contains("\"aggregatetype\"") && msg.contains("e1") && msg.contains("16/B374D848"),
            "{msg}"
        );

        let r = row(
            text("e2"),
            ColumnValue::Text(Bytes::from_static(b"\xff")),
            text("k"),
            text("{}"),
        );
        let err = router
            .route(&bound, &r, &meta())
            .expect_err("non-utf-8 route");
        assert!(
            matches!(err, RouteError::NonUtf8RouteValue { ref event_id, .. } if event_id == "e2")
        );

        let r = row(
            text("e3"),
            text("User"),
            text("k"),
            ColumnValue::UnchangedToast,
        );
        let err = router.route(&bound, &r, &meta()).expect_err("toast");
        assert!(err.to_string().contains("only for updates"), "{err}");

        let r = row(
            text("e4"),
            text("User"),
            ColumnValue::Binary(Bytes::from_static(b"k")),
            text("{}"),
        );
        let err = router.route(&bound, &r, &meta()).expect_err("binary");
        assert!(
            err.to_string()
                .starts_with("binary pgoutput values are not supported for column \"aggregateid\""),
            "{err}"
        );

        let r = TupleData {
            columns: vec![text("e5"), text("User")],
        };
        let err = router.route(&bound, &r, &meta()).expect_err("short row");
        assert!(matches!(
            err,
            RouteError::ShortRow {
                index: 2,
                width: 2,
                ..
            }
        ));
    }

    #[test]
    fn topic_cache_is_bounded() {
        let mut r = Router::new(RouterConfig::default()).expect("defaults are valid");
        for i in 0..(TOPIC_CACHE_LIMIT + 5) {
            topic_for(&mut r, &format!("T{i}"));
        }
        assert!(r.topics.len() <= TOPIC_CACHE_LIMIT);
        assert_eq!(topic_for(&mut r, "T1"), "outbox.event.T1");
    }

    fn config_error(cfg: RouterConfig) -> RouteConfigError {
        cfg.validate().expect_err("config is invalid")
    }

    #[test]
    fn validate_names_the_bad_key() {
        let err = config_error(RouterConfig {
            key_field: String::new(),
            ..RouterConfig::default()
        });
        assert_eq!(
            err.to_string(),
            "table.field.event.key must name a column, but it is empty"
        );

        let err = config_error(RouterConfig {
            route_topic_regex: " [[a-z]".to_owned(),
            ..RouterConfig::default()
        });
        assert!(matches!(
            err,
            RouteConfigError::InvalidRegex {
                key: "route.topic.regex",
                ..
            }
        ));
        assert!(err.to_string().starts_with("route.topic.regex"), "{err}");

        // Java-only syntax is refused rather than misread.
        let err = config_error(RouterConfig {
            route_topic_regex: "(?=x)x".to_owned(),
            ..RouterConfig::default()
        });
        assert!(matches!(err, RouteConfigError::InvalidRegex { .. }));

        for (replacement, needle) in [
            ("t.$2", "no group 2"),
            ("t.${other}", "no group named {other}"),
            ("t.\\", "escaped is missing"),
            ("t.$", "group index is missing"),
            ("t.${routedByValue", "missing its '}'"),
            ("t.${}", "empty name"),
            ("t.$x", "group number"),
        ] {
            let err = config_error(RouterConfig {
                route_topic_replacement: replacement.to_owned(),
                ..RouterConfig::default()
            });
            let msg = err.to_string();
            assert!(
                msg.starts_with("route.topic.replacement is invalid"),
                "{replacement}: {msg}"
            );
            assert!(msg.contains(needle), "{replacement}: {msg}");
        }
    }

    #[test]
    fn config_deserializes_with_defaults_and_refuses_unknown_keys() {
        let cfg: RouterConfig =
            serde_json::from_str(r#"{"route_by_field": "kind"}"#).expect("valid json");
        assert_eq!(cfg.route_by_field, "kind");
        assert_eq!(cfg.id_field, DEFAULT_ID_FIELD);
        assert!(serde_json::from_str::<RouterConfig>(r#"{"nope": 1}"#).is_err());
    }
}
