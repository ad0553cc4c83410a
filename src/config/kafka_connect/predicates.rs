//! Kafka Connect's predicates (`predicates=`, `predicates.<p>.*`,
//! `transforms.<t>.predicate`, `transforms.<t>.negate`) for the three Kafka
//! ships: `TopicNameMatches`, `HasHeaderKey` and `RecordIsTombstone`.
//!
//! walrelay's chain is `[decode,] router`, and both run before any record
//! has an outbox topic, so what a predicate says about a record is known at
//! configuration time for every kind of record that reaches the chain: the
//! outbox table's change events and their delete tombstones (topic
//! `<topic.prefix>.<schema>.<table>`, Debezium's context headers when
//! `extended.headers.enabled`), and the logical decoding messages (topic
//! `<topic.prefix>.message`, no headers). Heartbeats and transaction
//! metadata records pass both transforms unchanged, so no predicate changes
//! them. This module owns reading the predicates and deciding them per
//! kind; `super::transforms` decides what the decisions mean. It never logs
//! a value and never connects.

use std::collections::BTreeMap;

use super::{parse_bool, Keys, Notes};
use crate::config::ConfigError;

/// `org.apache.kafka.connect.transforms.predicates.TopicNameMatches`.
const TOPIC_NAME_MATCHES: &str = "org.apache.kafka.connect.transforms.predicates.TopicNameMatches";
/// `org.apache.kafka.connect.transforms.predicates.HasHeaderKey`.
const HAS_HEADER_KEY: &str = "org.apache.kafka.connect.transforms.predicates.HasHeaderKey";
/// `org.apache.kafka.connect.transforms.predicates.RecordIsTombstone`.
const RECORD_IS_TOMBSTONE: &str =
    "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone";

/// The headers Debezium's `DebeziumHeaderProducer` adds to every change
/// event (and its tombstone) before the transforms, with
/// `extended.headers.enabled` (the default).
const CONTEXT_HEADERS: &[&str] = &[
    "__debezium.context.connectorLogicalName",
    "__debezium.context.taskId",
    "__debezium.context.connectorName",
    "__debezium.context.runId",
];
/// The headers the PostgreSQL connector adds to the DELETE and CREATE
/// events of an UPDATE that changes the primary key: present on some change
/// events only, so a predicate on them cannot be decided per kind.
const KEY_CHANGE_HEADERS: &[&str] = &["__debezium.oldkey", "__debezium.newkey"];

/// One configured predicate.
#[derive(Debug, Clone)]
pub(super) enum Predicate {
    /// `TopicNameMatches`: Java `Matcher.matches()` on the whole topic.
    TopicNameMatches {
        /// The pattern as configured.
        pattern: String,
        /// The pattern anchored at both ends.
        regex: regex::Regex,
    },
    /// `HasHeaderKey`: at least one header of that name.
    HasHeaderKey(String),
    /// `RecordIsTombstone`: a null value.
    RecordIsTombstone,
}

impl Predicate {
    /// A short description for messages: `TopicNameMatches("x.*")`.
    pub(super) fn describe(&self) -> String {
        match self {
            Predicate::TopicNameMatches { pattern, .. } => format!("TopicNameMatches({pattern:?})"),
            Predicate::HasHeaderKey(name) => format!("HasHeaderKey({name:?})"),
            Predicate::RecordIsTombstone => "RecordIsTombstone".to_owned(),
        }
    }

    /// The predicate as the chain after the router takes it.
    pub(super) fn spec(&self, alias: &str) -> crate::connect::transforms::config::PredicateSpec {
        use crate::connect::transforms::config::OptionValue;
        let (class, options) = match self {
            Predicate::TopicNameMatches { pattern, .. } => (
                TOPIC_NAME_MATCHES,
                [("pattern".to_owned(), OptionValue::Text(pattern.clone()))].into(),
            ),
            Predicate::HasHeaderKey(name) => (
                HAS_HEADER_KEY,
                [("name".to_owned(), OptionValue::Text(name.clone()))].into(),
            ),
            Predicate::RecordIsTombstone => (RECORD_IS_TOMBSTONE, Default::default()),
        };
        crate::connect::transforms::config::PredicateSpec {
            name: alias.to_owned(),
            class: class.to_owned(),
            options,
        }
    }

    /// Whether the predicate depends on the record beyond its kind.
    pub(super) fn per_record(&self) -> bool {
        matches!(self, Predicate::HasHeaderKey(n) if KEY_CHANGE_HEADERS.contains(&n.as_str()))
    }

    fn test(&self, record: &Record<'_>) -> bool {
        match self {
            Predicate::TopicNameMatches { regex, .. } => regex.is_match(record.topic),
            Predicate::HasHeaderKey(name) => {
                record.context_headers && CONTEXT_HEADERS.contains(&name.as_str())
            }
            Predicate::RecordIsTombstone => record.tombstone,
        }
    }
}

/// What a predicate can see of a record reaching the chain.
#[derive(Debug, Clone, Copy)]
pub(super) struct Record<'a> {
    /// The record's topic before the transforms.
    pub(super) topic: &'a str,
    /// Whether it carries Debezium's `__debezium.context.*` headers.
    pub(super) context_headers: bool,
    /// Whether its value is null.
    pub(super) tombstone: bool,
}

/// A transform's `predicate` and `negate`.
#[derive(Debug, Clone)]
pub(super) struct Condition {
    /// The predicate's alias.
    pub(super) alias: String,
    pub(super) predicate: Predicate,
    pub(super) negate: bool,
}

impl Condition {
    /// Kafka Connect's `TransformationStage.apply`: the transform runs
    /// when `negate ^ predicate.test(record)`.
    pub(super) fn applies(&self, record: &Record<'_>) -> bool {
        self.negate ^ self.predicate.test(record)
    }

    /// `predicates.<alias> (TopicNameMatches(..)), negated`.
    pub(super) fn describe(&self) -> String {
        format!(
            "predicates.{} ({}{})",
            self.alias,
            self.predicate.describe(),
            if self.negate { ", negated" } else { "" }
        )
    }
}

/// Whether an optional condition lets the transform run on `record`.
pub(super) fn runs(condition: Option<&Condition>, record: &Record<'_>) -> bool {
    condition.is_none_or(|c| c.applies(record))
}

/// Reads `predicates` and every `predicates.<p>.*` key, checking them as
/// Kafka Connect does when the connector is created.
pub(super) fn read_predicates(
    c: &mut Keys,
    notes: &mut Notes,
) -> Result<BTreeMap<String, Predicate>, ConfigError> {
    let list = c.take("predicates").unwrap_or_default();
    let mut options = c.take_prefixed("predicates.");
    let mut out = BTreeMap::new();
    for alias in list.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        if out.contains_key(alias) {
            return Err(c.invalid(
                "predicates",
                format!("lists {alias:?} twice (Kafka Connect refuses duplicate aliases)"),
            ));
        }
        let prefix = format!("{alias}.");
        let mut own: BTreeMap<String, String> = BTreeMap::new();
        let keys: Vec<String> = options
            .keys()
            .filter(|k| k.starts_with(&prefix))
            .cloned()
            .collect();
        for k in keys {
            if let Some(v) = options.remove(&k) {
                own.insert(k[prefix.len()..].to_owned(), v.trim().to_owned());
            }
        }
        let key = |k: &str| format!("predicates.{alias}.{k}");
        let predicate = match own.remove("type").as_deref() {
            None | Some("") => {
                return Err(ConfigError::Missing {
                    key: c.name(&key("type")),
                    reason: format!(
                        "set it to {TOPIC_NAME_MATCHES}, {HAS_HEADER_KEY} or {RECORD_IS_TOMBSTONE}"
                    ),
                })
            }
            Some(TOPIC_NAME_MATCHES) => {
                let pattern = own.remove("pattern").unwrap_or_default();
                if pattern.is_empty() {
                    return Err(ConfigError::Missing {
                        key: c.name(&key("pattern")),
                        reason: "TopicNameMatches needs a Java regular expression".to_owned(),
                    });
                }
                // The dialect `route.topic.regex` uses (`router::rewrite`):
                // `(?R)` keeps `.` off `\r` as Java's does; anchored for
                // `matches()`.
                let regex = regex::Regex::new(&format!("(?R)^(?:{pattern})$")).map_err(|e| {
                    c.unsupported(
                        &key("pattern"),
                        format!("not a regular expression walrelay can compile: {e}"),
                    )
                })?;
                Predicate::TopicNameMatches { pattern, regex }
            }
            Some(HAS_HEADER_KEY) => {
                let name = own.remove("name").unwrap_or_default();
                if name.is_empty() {
                    return Err(ConfigError::Missing {
                        key: c.name(&key("name")),
                        reason: "HasHeaderKey needs the header name".to_owned(),
                    });
                }
                Predicate::HasHeaderKey(name)
            }
            Some(RECORD_IS_TOMBSTONE) => Predicate::RecordIsTombstone,
            Some(other) => {
                return Err(c.unsupported(
                    &key("type"),
                    format!(
                        "walrelay implements the predicates Kafka Connect ships \
                         ({TOPIC_NAME_MATCHES}, {HAS_HEADER_KEY}, {RECORD_IS_TOMBSTONE}), not {other}"
                    ),
                ))
            }
        };
        for k in own.into_keys() {
            notes.ignore(
                c.name(&key(&k)),
                "ignored: not an option of the predicate (Kafka Connect ignores it too)",
            );
        }
        out.insert(alias.to_owned(), predicate);
    }
    for k in options.into_keys() {
        notes.ignore(
            c.name(&format!("predicates.{k}")),
            "ignored: the predicate is not listed in predicates",
        );
    }
    Ok(out)
}

/// Takes `predicate` and `negate` out of one transform's options
/// (`prefix` is `transforms.<name>.`).
pub(super) fn take_condition(
    c: &Keys,
    options: &mut BTreeMap<String, String>,
    prefix: &str,
    predicates: &BTreeMap<String, Predicate>,
) -> Result<Option<Condition>, ConfigError> {
    let alias = options.remove("predicate").map(|v| v.trim().to_owned());
    let negate = options.remove("negate").map(|v| v.trim().to_owned());
    let Some(alias) = alias.filter(|a| !a.is_empty()) else {
        if negate.is_some() {
            return Err(c.invalid(
                &format!("{prefix}negate"),
                format!(
                    "there is no {prefix}predicate defining a predicate to be negated \
                     (Kafka Connect refuses it too)"
                ),
            ));
        }
        return Ok(None);
    };
    let negate = match negate {
        None => false,
        Some(v) => parse_bool(&v).ok_or_else(|| {
            c.invalid(
                &format!("{prefix}negate"),
                format!("{v:?} is not true or false"),
            )
        })?,
    };
    let Some(predicate) = predicates.get(&alias) else {
        return Err(c.invalid(
            &format!("{prefix}predicate"),
            format!("names {alias:?}, which is not listed in predicates"),
        ));
    };
    Ok(Some(Condition {
        alias,
        predicate: predicate.clone(),
        negate,
    }))
}

/// Debezium's `AbstractTopicNamingStrategy.sanitizedTopicName`: characters
/// other than ASCII letters, digits, `.`, `_` and `-` become `_`.
pub(super) fn sanitized_topic(name: &str) -> String {
    name.chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() || matches!(ch, '.' | '_' | '-') {
                ch
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(t: &str) -> Record<'_> {
        Record {
            topic: t,
            context_headers: true,
            tombstone: false,
        }
    }

    #[test]
    fn topic_name_matches_is_a_full_match() {
        let p = Predicate::TopicNameMatches {
            pattern: "test\\..*".into(),
            regex: regex::Regex::new("(?R)^(?:test\\..*)$").unwrap(),
        };
        assert!(p.test(&topic("test.public.outbox")));
        assert!(!p.test(&topic("xtest.public.outbox")));
        let p = Predicate::TopicNameMatches {
            pattern: "message".into(),
            regex: regex::Regex::new("(?R)^(?:message)$").unwrap(),
        };
        assert!(!p.test(&topic("test.message")));
    }

    #[test]
    fn headers_are_the_context_headers_of_change_events() {
        let p = Predicate::HasHeaderKey("__debezium.context.taskId".into());
        assert!(p.test(&topic("t")));
        let mut r = topic("t");
        r.context_headers = false;
        assert!(!p.test(&r));
        assert!(!Predicate::HasHeaderKey("id".into()).test(&topic("t")));
        assert!(Predicate::HasHeaderKey("__debezium.newkey".into()).per_record());
    }

    #[test]
    fn negate_flips() {
        let c = Condition {
            alias: "t".into(),
            predicate: Predicate::RecordIsTombstone,
            negate: true,
        };
        assert!(c.applies(&topic("x")));
        assert!(runs(None, &topic("x")));
    }

    #[test]
    fn topics_are_sanitized_as_debezium_does() {
        assert_eq!(
            sanitized_topic("p-1.public.my table$"),
            "p-1.public.my_table_"
        );
    }
}
