//! Kafka 4.1.1's `RegexRouter` (a topic that `Matcher.matches()` the
//! `regex` becomes `Matcher.replaceFirst(replacement)`) and `Filter`
//! (drops every record it is applied to; with a predicate, the matching
//! ones). Java's regex is run by the `regex` crate: a pattern it cannot
//! compile (look-around, back-references, possessive quantifiers, ...) is
//! refused as a configuration error. Java's replacement syntax (`$n`,
//! `${name}`, `\` escapes) is parsed once; where Java would throw on every
//! rerouted record, each matching record fails here too. Pure.

use std::sync::Arc;

use regex::Regex;

use super::options::{Reader, TransformConfigError};
use super::util::boxed;
use super::{Built, ConnectRecord, TransformError, Transformation};

const REGEX_ROUTER: &str = "org.apache.kafka.connect.transforms.RegexRouter";
const FILTER: &str = "org.apache.kafka.connect.transforms.Filter";

/// The classes this module builds.
pub(super) const CLASSES: &[&str] = &[REGEX_ROUTER, FILTER];

/// Builds the transform of `class`, if it is one of [`CLASSES`].
pub(super) fn build(class: &str, opts: &Reader<'_>) -> Option<Built> {
    match class {
        REGEX_ROUTER => Some(RegexRouter::configure(opts).map(boxed)),
        FILTER => Some(Ok(boxed(Filter))),
        _ => None,
    }
}

/// `Filter`: no record out.
#[derive(Debug)]
struct Filter;

impl Transformation for Filter {
    fn apply(&self, _record: ConnectRecord) -> Result<Option<ConnectRecord>, TransformError> {
        Ok(None)
    }
}

/// One piece of a parsed Java replacement.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    /// Text as is.
    Literal(String),
    /// A group's text (nothing when it did not take part).
    Group(usize),
}

/// `RegexRouter`.
#[derive(Debug)]
struct RegexRouter {
    /// Anchored at both ends: `Matcher.matches()`.
    full: Regex,
    /// As written: the first match `replaceFirst` rewrites.
    first: Regex,
    /// The replacement, or the exception Java raises applying it.
    replacement: Result<Vec<Piece>, String>,
}

impl RegexRouter {
    /// `RegexRouter.configure`: `regex` (a valid pattern) and
    /// `replacement`, both required.
    fn configure(opts: &Reader<'_>) -> Result<RegexRouter, TransformConfigError> {
        let pattern = opts.string("regex", None)?;
        let invalid = |e: regex::Error| {
            TransformConfigError::invalid(
                "regex",
                &pattern,
                format!("Invalid regex (or one walrelay cannot run as Java does): {e}"),
            )
        };
        // `R`: `.` does not match `\r` either, one of Java's line terminators.
        let first = Regex::new(&format!("(?R){pattern}")).map_err(invalid)?;
        let full = Regex::new(&format!("(?R)^(?:{pattern})$")).map_err(invalid)?;
        let replacement_text = opts.string("replacement", None)?;
        let replacement = parse_replacement(&replacement_text, &first);
        Ok(RegexRouter {
            full,
            first,
            replacement,
        })
    }

    /// `matcher.replaceFirst(replacement)` on a topic that matched.
    fn reroute(&self, topic: &str) -> Result<String, TransformError> {
        let pieces = self.replacement.as_ref().map_err(|e| {
            TransformError::new(format!(
                "{e} (Kafka Connect fails applying the replacement here)"
            ))
        })?;
        let Some(caps) = self.first.captures(topic) else {
            return Ok(topic.to_owned());
        };
        let Some(whole) = caps.get(0) else {
            return Ok(topic.to_owned());
        };
        let mut out = String::with_capacity(topic.len() + 16);
        out.push_str(&topic[..whole.start()]);
        for piece in pieces {
            match piece {
                Piece::Literal(s) => out.push_str(s),
                Piece::Group(i) => {
                    if let Some(g) = caps.get(*i) {
                        out.push_str(g.as_str());
                    }
                }
            }
        }
        out.push_str(&topic[whole.end()..]);
        Ok(out)
    }
}

impl Transformation for RegexRouter {
    fn apply(&self, mut record: ConnectRecord) -> Result<Option<ConnectRecord>, TransformError> {
        if self.full.is_match(&record.topic) {
            record.topic = Arc::from(self.reroute(&record.topic)?.as_str());
        }
        Ok(Some(record))
    }
}

/// Java's `Matcher.appendExpandedReplacement` syntax against `regex`'s
/// groups; `Err` is the exception Java throws when it applies it.
fn parse_replacement(replacement: &str, regex: &Regex) -> Result<Vec<Piece>, String> {
    let group_count = regex.captures_len().saturating_sub(1);
    let chars: Vec<char> = replacement.chars().collect();
    let mut pieces = Vec::new();
    let mut literal = String::new();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        match c {
            '\\' => {
                let escaped = chars.get(i + 1).ok_or_else(|| {
                    "IllegalArgumentException: character to be escaped is missing".to_owned()
                })?;
                literal.push(*escaped);
                i += 2;
            }
            '$' => {
                let (group, next) = group_reference(&chars, i + 1, regex, group_count)?;
                if !literal.is_empty() {
                    pieces.push(Piece::Literal(std::mem::take(&mut literal)));
                }
                pieces.push(Piece::Group(group));
                i = next;
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

/// The group a `$` refers to, read from `at` (just after the `$`), and
/// the position after the reference.
fn group_reference(
    chars: &[char],
    at: usize,
    regex: &Regex,
    group_count: usize,
) -> Result<(usize, usize), String> {
    let Some(&next) = chars.get(at) else {
        return Err(
            "IllegalArgumentException: Illegal group reference: group index is missing".to_owned(),
        );
    };
    if next == '{' {
        let mut end = at + 1;
        while chars.get(end).is_some_and(char::is_ascii_alphanumeric) {
            end += 1;
        }
        let name: String = chars[at + 1..end].iter().collect();
        if name.is_empty() {
            return Err(
                "IllegalArgumentException: named capturing group has 0 length name".to_owned(),
            );
        }
        if chars.get(end) != Some(&'}') {
            return Err(
                "IllegalArgumentException: named capturing group is missing trailing '}'"
                    .to_owned(),
            );
        }
        if name.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(format!(
                "IllegalArgumentException: capturing group name {{{name}}} starts with digit character"
            ));
        }
        let index = regex
            .capture_names()
            .position(|n| n == Some(name.as_str()))
            .ok_or_else(|| format!("IllegalArgumentException: No group with name {{{name}}}"))?;
        return Ok((index, end + 1));
    }
    let Some(first) = next.to_digit(10) else {
        return Err("IllegalArgumentException: Illegal group reference".to_owned());
    };
    let mut group = first as usize;
    let mut i = at + 1;
    // Java takes further digits while the longer group number exists.
    while let Some(d) = chars.get(i).and_then(|c| c.to_digit(10)) {
        let longer = group * 10 + d as usize;
        if longer > group_count {
            break;
        }
        group = longer;
        i += 1;
    }
    if group > group_count {
        return Err(format!("IndexOutOfBoundsException: No group {group}"));
    }
    Ok((group, i))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::transforms::options::Options;

    fn configure(class: &str, pairs: &[(&str, &str)]) -> Built {
        let opts: Options = pairs.iter().copied().collect();
        build(class, &opts.reader()).expect("class of this module")
    }

    fn record(topic: &str) -> ConnectRecord {
        ConnectRecord {
            topic: Arc::from(topic),
            partition: Some(3),
            key_schema: None,
            key: crate::connect::Value::string("k"),
            value_schema: None,
            value: crate::connect::Value::Null,
            timestamp: Some(5),
            headers: Vec::new(),
        }
    }

    /// `RegexRouter` with `regex` and `replacement` applied to `topic`
    /// (expectations from Kafka 4.1.1 run on the same inputs).
    fn route(regex: &str, replacement: &str, topic: &str) -> Result<String, String> {
        let t = configure(
            REGEX_ROUTER,
            &[("regex", regex), ("replacement", replacement)],
        )
        .unwrap();
        t.apply(record(topic))
            .map(|r| r.map(|r| r.topic.to_string()).unwrap_or_default())
            .map_err(|e| e.message)
    }

    #[test]
    fn regex_router_matches_whole_topics_and_replaces_the_first_match() {
        assert_eq!(
            route("(.*)-(\\d+)", "$2_$1", "orders-12").unwrap(),
            "12_orders"
        );
        // matches() takes `ab`; replaceFirst's first match is `a`.
        assert_eq!(route("a|ab", "X", "ab").unwrap(), "Xb");
        // $12 is $1 then `2` (no group 12); an unmatched group is empty.
        assert_eq!(route("(a)(b)?c", "[$2$1$12\\$]", "ac").unwrap(), "[aa2$]");
        assert_eq!(
            route("(?<pre>\\w+)\\.(?<rest>.*)", "${rest}.${pre}", "a.b.c").unwrap(),
            "b.c.a"
        );
        assert_eq!(route("x", "y", "xx").unwrap(), "xx");
        let out = configure(REGEX_ROUTER, &[("regex", "t.*"), ("replacement", "u")])
            .unwrap()
            .apply(record("topic"))
            .unwrap()
            .unwrap();
        assert_eq!(
            (&*out.topic, out.partition, out.timestamp),
            ("u", Some(3), Some(5))
        );
    }

    #[test]
    fn replacement_errors_fail_matching_records_only() {
        let err = route("x", "$", "x").unwrap_err();
        assert!(
            err.contains("Illegal group reference: group index is missing"),
            "{err}"
        );
        assert_eq!(route("x", "$", "y").unwrap(), "y");
        let err = route("a*", "$1", "aa").unwrap_err();
        assert!(err.contains("No group 1"), "{err}");
        assert!(route("x", "\\", "x")
            .unwrap_err()
            .contains("character to be escaped is missing"));
        assert!(route("x", "${nope}", "x")
            .unwrap_err()
            .contains("No group with name {nope}"));
        assert!(route("x", "$a", "x")
            .unwrap_err()
            .contains("Illegal group reference"));
    }

    #[test]
    fn regex_options() {
        let err = configure(REGEX_ROUTER, &[("regex", "(?=x)"), ("replacement", "y")]).unwrap_err();
        assert_eq!(err.key(), Some("regex"));
        let err = configure(REGEX_ROUTER, &[("regex", "x")]).unwrap_err();
        assert_eq!(
            err,
            TransformConfigError::Missing {
                key: "replacement".into()
            }
        );
        let err = configure(REGEX_ROUTER, &[("replacement", "x")]).unwrap_err();
        assert_eq!(
            err,
            TransformConfigError::Missing {
                key: "regex".into()
            }
        );
    }

    #[test]
    fn filter_drops_every_record() {
        let t = configure(FILTER, &[]).unwrap();
        assert_eq!(t.apply(record("t")).unwrap(), None);
        assert!(build(
            "org.apache.kafka.connect.transforms.InsertHeader",
            &Options::default().reader()
        )
        .is_none());
    }
    #[test]
    fn filter_with_a_predicate_in_a_chain() {
        use crate::connect::transforms::{build_chain, Predicate, StepConfig};
        let tombstones = Predicate::build(
            crate::connect::transforms::predicate::RECORD_IS_TOMBSTONE,
            &Options::default(),
        )
        .unwrap();
        let step =
            |alias: &str, class: &str, pairs: &[(&str, &str)], negate: Option<bool>| StepConfig {
                alias: alias.to_owned(),
                class: class.to_owned(),
                options: pairs.iter().copied().collect(),
                condition: negate.map(|n| (Arc::new(tombstones.clone()), n)),
            };
        let (chain, unused) = build_chain(vec![
            step(
                "route",
                REGEX_ROUTER,
                &[("regex", "t"), ("replacement", "u"), ("extra", "1")],
                None,
            ),
            step("drop", FILTER, &[], Some(false)),
        ])
        .unwrap();
        assert_eq!(unused, [("route".to_owned(), vec!["extra".to_owned()])]);
        // Not a tombstone (the key is set, the value too): kept and rerouted.
        let mut live = record("t");
        live.value = crate::connect::Value::string("v");
        assert_eq!(&*chain.apply(live).unwrap().unwrap().topic, "u");
        assert_eq!(chain.apply(record("t")).unwrap(), None);
    }
}
