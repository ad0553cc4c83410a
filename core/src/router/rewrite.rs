//! Kafka Connect's `RegexRouter` (`route.topic.regex`,
//! `route.topic.replacement`) in the `regex` crate's dialect.
//!
//! Owns compiling the pattern, parsing Java `Matcher` replacement syntax at
//! startup (so every error Java would raise per record is raised once) and
//! applying `matches()` + `replaceFirst()`. It never allocates for a value
//! the router has already seen: the router caches topics.

use regex::Regex;

use super::config::{RouteConfigError, KEY_ROUTE_TOPIC_REGEX, KEY_ROUTE_TOPIC_REPLACEMENT};

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
///   rejected by [`RouterConfig::validate`](super::RouterConfig::validate).
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
pub struct TopicRewrite {
    /// Anchored: Java's `Matcher.matches()`.
    full: Regex,
    /// Unanchored: the first match `replaceFirst` rewrites.
    first: Regex,
    replacement: Vec<Piece>,
}

impl TopicRewrite {
    pub(crate) fn new(pattern: &str, replacement: &str) -> Result<Self, RouteConfigError> {
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
    pub fn apply(&self, value: &str) -> String {
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
                    while chars.get(end).is_some_and(char::is_ascii_alphanumeric) {
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
