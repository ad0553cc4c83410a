//! The one Java `.properties` reader: the full `java.util.Properties.load`
//! syntax (separators, comments, continuation lines, every escape including
//! `\uXXXX` and surrogate pairs), for Kafka Connect's and Debezium's files
//! and for the span-context column the router reads.
//!
//! Written here rather than taken from a crate: the maintained one,
//! `java-properties`, decodes its input as ISO-8859-1 unless given another
//! encoding and iterates through its own error type, while walrelay needs
//! UTF-8 with an ISO-8859-1 fallback ([`decode_text`]), the entries in file
//! order with duplicates, and errors that carry line numbers and never a
//! value. This reader is small and its tests pin Java's grammar.
//!
//! Owns only syntax: it never interprets a key, never expands `${...}` and
//! never logs, so a value (which may be a password) cannot leak from here.

use std::collections::BTreeMap;

/// Text that is not valid `.properties`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PropertiesError {
    /// A `\u` escape not followed by four hexadecimal digits (Java throws
    /// `IllegalArgumentException: Malformed \uxxxx encoding`).
    #[error("line {line}: malformed \\uxxxx escape")]
    MalformedUnicode {
        /// One-based line where the logical line starts.
        line: usize,
    },
}

/// Decodes file bytes the way walrelay reads properties: UTF-8, or
/// ISO-8859-1 (what `Properties.load(InputStream)` assumes) when the bytes
/// are not valid UTF-8.
pub fn decode_text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_owned(),
        Err(_) => bytes.iter().map(|&b| char::from(b)).collect(),
    }
}

/// Parses `.properties` text; a later duplicate key replaces an earlier one,
/// as in Java.
pub fn parse_properties(text: &str) -> Result<BTreeMap<String, String>, PropertiesError> {
    Ok(parse_properties_ordered(text)?.into_iter().collect())
}

/// Parses `.properties` text into `(key, value)` pairs in file order,
/// duplicates included.
pub(crate) fn parse_properties_ordered(
    text: &str,
) -> Result<Vec<(String, String)>, PropertiesError> {
    let mut out = Vec::new();
    for (line, logical) in logical_lines(text) {
        let (key, value) = split_entry(&logical);
        out.push((unescape(key, line)?, unescape(value, line)?));
    }
    Ok(out)
}

/// Java's separator-or-leading whitespace: space, tab and form feed.
fn is_ws(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\x0c')
}

/// Joins natural lines into logical lines (raw, escapes still in place),
/// dropping blank and comment lines; each comes with its one-based starting
/// line number.
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    // Natural lines end at \n, \r or \r\n.
    let mut naturals = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        match rest.find(['\n', '\r']) {
            Some(i) => {
                naturals.push(&rest[..i]);
                let skip = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
                rest = &rest[i + skip..];
            }
            None => {
                naturals.push(rest);
                rest = "";
            }
        }
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < naturals.len() {
        let start = i;
        let first = naturals[i].trim_start_matches(is_ws);
        i += 1;
        // Comment and blank lines are never continued, whatever they end with.
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        let mut logical = String::new();
        let mut current = first;
        loop {
            if ends_with_odd_backslashes(current) {
                logical.push_str(&current[..current.len() - 1]);
                match naturals.get(i) {
                    Some(next) => {
                        // A continuation line's leading whitespace is dropped;
                        // `#` there is data, not a comment.
                        current = next.trim_start_matches(is_ws);
                        i += 1;
                    }
                    // A trailing backslash at end of input is dropped.
                    None => break,
                }
            } else {
                logical.push_str(current);
                break;
            }
        }
        out.push((start + 1, logical));
    }
    out
}

fn ends_with_odd_backslashes(s: &str) -> bool {
    s.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// Splits a logical line at the first unescaped `=`, `:` or whitespace;
/// whitespace around the separator and one `=`/`:` after whitespace are
/// consumed. Both halves are still escaped.
fn split_entry(line: &str) -> (&str, &str) {
    let mut escaped = false;
    let mut key_end = line.len();
    let mut sep_is_ws = false;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        if c == '\\' {
            escaped = true;
        } else if c == '=' || c == ':' {
            key_end = i;
            break;
        } else if is_ws(c) {
            key_end = i;
            sep_is_ws = true;
            break;
        }
    }
    let key = &line[..key_end];
    if key_end == line.len() {
        return (key, "");
    }
    let mut rest = &line[key_end + 1..];
    rest = rest.trim_start_matches(is_ws);
    if sep_is_ws {
        if let Some(r) = rest.strip_prefix(['=', ':']) {
            rest = r.trim_start_matches(is_ws);
        }
    }
    (key, rest)
}

/// Resolves `\t \n \r \f \uXXXX`; any other escaped character stands for
/// itself.
fn unescape(s: &str, line: usize) -> Result<String, PropertiesError> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    // UTF-16 high surrogate waiting for its low half.
    let mut pending_high: Option<u16> = None;
    while let Some(c) = chars.next() {
        if c != '\\' {
            flush_surrogate(&mut out, &mut pending_high);
            out.push(c);
            continue;
        }
        let Some(e) = chars.next() else { break };
        let decoded = match e {
            't' => '\t',
            'n' => '\n',
            'r' => '\r',
            'f' => '\x0c',
            'u' => {
                let hex: String = chars.by_ref().take(4).collect();
                let unit = (hex.len() == 4)
                    .then(|| u16::from_str_radix(&hex, 16).ok())
                    .flatten()
                    .filter(|_| hex.chars().all(|h| h.is_ascii_hexdigit()))
                    .ok_or(PropertiesError::MalformedUnicode { line })?;
                // Java strings are UTF-16: a supplementary character is
                // written as two escapes.
                match (pending_high.take(), unit) {
                    (Some(high), 0xDC00..=0xDFFF) => {
                        let cp = 0x10000
                            + ((u32::from(high) - 0xD800) << 10)
                            + (u32::from(unit) - 0xDC00);
                        out.push(char::from_u32(cp).unwrap_or('\u{FFFD}'));
                        continue;
                    }
                    (Some(_), _) => out.push('\u{FFFD}'),
                    (None, _) => {}
                }
                if (0xD800..=0xDBFF).contains(&unit) {
                    pending_high = Some(unit);
                    continue;
                }
                char::from_u32(u32::from(unit)).unwrap_or('\u{FFFD}')
            }
            other => other,
        };
        flush_surrogate(&mut out, &mut pending_high);
        out.push(decoded);
    }
    flush_surrogate(&mut out, &mut pending_high);
    Ok(out)
}

fn flush_surrogate(out: &mut String, pending: &mut Option<u16>) {
    if pending.take().is_some() {
        out.push('\u{FFFD}');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(text: &str) -> Vec<(String, String)> {
        parse_properties_ordered(text).unwrap()
    }

    fn one(text: &str) -> (String, String) {
        let mut p = props(text);
        assert_eq!(p.len(), 1, "{p:?}");
        p.remove(0)
    }

    fn kv(k: &str, v: &str) -> (String, String) {
        (k.to_owned(), v.to_owned())
    }

    #[test]
    fn separators() {
        assert_eq!(one("a=b"), kv("a", "b"));
        assert_eq!(one("a:b"), kv("a", "b"));
        assert_eq!(one("a b"), kv("a", "b"));
        assert_eq!(one("a \t = \t b"), kv("a", "b"));
        assert_eq!(one("a : b"), kv("a", "b"));
        assert_eq!(one("a   b c"), kv("a", "b c"));
        // Only one separator character is consumed.
        assert_eq!(one("a==b"), kv("a", "=b"));
        assert_eq!(one("a = = b"), kv("a", "= b"));
        assert_eq!(one("a:=b"), kv("a", "=b"));
        // Whitespace, then `:` then whitespace: one separator.
        assert_eq!(one("a \x0c: b"), kv("a", "b"));
        // Key only.
        assert_eq!(one("lonely"), kv("lonely", ""));
        assert_eq!(one("lonely  "), kv("lonely", ""));
        assert_eq!(one("k="), kv("k", ""));
        // Empty key.
        assert_eq!(one("=v"), kv("", "v"));
    }

    #[test]
    fn whitespace_rules() {
        assert_eq!(one("   \t\x0c key = value"), kv("key", "value"));
        // Trailing whitespace of a value is kept.
        assert_eq!(one("k = v  "), kv("k", "v  "));
        assert!(props("   \n\t\n\x0c\n").is_empty());
    }

    #[test]
    fn comments() {
        assert!(props("# c\n! c\n   # indented\n").is_empty());
        // A `#` after the start of a line is data.
        assert_eq!(one("k = v # not a comment"), kv("k", "v # not a comment"));
        // A comment line ending in a backslash is not continued.
        assert_eq!(one("# comment \\\nk=v"), kv("k", "v"));
    }

    #[test]
    fn continuations() {
        assert_eq!(
            one("fruits  apple, banana, \\\n          pear, \\\n  cantaloupe"),
            kv("fruits", "apple, banana, pear, cantaloupe")
        );
        // Escaped backslash at end: not a continuation.
        assert_eq!(props("a=b\\\\\nc=d"), vec![kv("a", "b\\"), kv("c", "d")]);
        // Three backslashes: one literal, one continuation.
        assert_eq!(one("a=b\\\\\\\n  c"), kv("a", "b\\c"));
        // `#` at the start of a continuation is data.
        assert_eq!(one("a=b\\\n  #c"), kv("a", "b#c"));
        // Continuation in the key.
        assert_eq!(one("ke\\\n  y=v"), kv("key", "v"));
        // CRLF and lone CR line ends.
        assert_eq!(
            props("a=1\r\nb=2\\\r\n  3\rc=4"),
            vec![kv("a", "1"), kv("b", "23"), kv("c", "4")]
        );
        // Trailing backslash at end of input is dropped.
        assert_eq!(one("a=b\\"), kv("a", "b"));
        // Continuation onto a blank line ends the value.
        assert_eq!(props("a=b\\\n\nc=d"), vec![kv("a", "b"), kv("c", "d")]);
    }

    #[test]
    fn escapes() {
        assert_eq!(one(r"k=a\tb\nc\rd\fe"), kv("k", "a\tb\nc\rd\x0ce"));
        assert_eq!(one(r"k=\u0041\u00e9"), kv("k", "Aé"));
        assert_eq!(one(r"k=\ud83d\ude00"), kv("k", "😀"));
        assert_eq!(one(r"k=\q\\\#"), kv("k", "q\\#"));
        assert_eq!(one(r"a\=b\:c\ d=e"), kv("a=b:c d", "e"));
        assert_eq!(one(r"k=\ lead"), kv("k", " lead"));
        assert_eq!(
            parse_properties_ordered(r"k=\u00g1"),
            Err(PropertiesError::MalformedUnicode { line: 1 })
        );
        assert_eq!(
            parse_properties_ordered("a=1\nk=\\u12"),
            Err(PropertiesError::MalformedUnicode { line: 2 })
        );
    }

    #[test]
    fn later_duplicates_win() {
        let m = parse_properties("a=1\na=2\n").unwrap();
        assert_eq!(m.get("a").map(String::as_str), Some("2"));
    }

    #[test]
    fn latin1_fallback() {
        assert_eq!(decode_text(b"k=caf\xe9"), "k=café");
        assert_eq!(decode_text("k=café".as_bytes()), "k=café");
    }
}
