//! JSON as Jackson (Kafka's and Debezium's JSON library) writes and reads it.
//!
//! Owns Jackson's default string escaping for compact output and an
//! order-preserving reader that classifies numbers the way Jackson's
//! `readTree` does (int, long, big integer, double), which
//! `table.expand.json.payload` depends on. It never allocates beyond the
//! document and never recurses deeper than Jackson's nesting limit.

/// Jackson's default `StreamReadConstraints` nesting limit.
pub(crate) const MAX_DEPTH: usize = 1000;

/// Appends `s` as a JSON string literal with Jackson's default escaping:
/// `"` and `\` escaped, control characters as `\b \t \n \f \r` or
/// `\u00XX` (upper-case hex), characters outside the BMP as an escaped
/// surrogate pair (`\uD83D\uDE00`), everything else (including `/`, DEL
/// and other non-ASCII) as is.
pub(crate) fn write_string(out: &mut String, s: &str) {
    write_jackson_string(out, s, true);
}

/// Like [`write_string`], as Jackson's character-based generator
/// (`ObjectMapper.writeValueAsString`) writes it: characters outside the
/// BMP as they are (only the UTF-8 byte generator escapes them).
pub(crate) fn write_string_chars(out: &mut String, s: &str) {
    write_jackson_string(out, s, false);
}

fn write_jackson_string(out: &mut String, s: &str, surrogates: bool) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: Option<&str> = match b {
            b'"' => Some("\\\""),
            b'\\' => Some("\\\\"),
            0x08 => Some("\\b"),
            b'\t' => Some("\\t"),
            b'\n' => Some("\\n"),
            0x0c => Some("\\f"),
            b'\r' => Some("\\r"),
            0..=0x1f => Some(""),
            // The lead byte of a character outside the BMP: Jackson's
            // generator writes it as an escaped UTF-16 surrogate pair.
            0xf0..=0xf4 if surrogates => Some("surrogates"),
            _ => None,
        };
        if let Some(esc) = escape {
            out.push_str(&s[start..i]);
            if esc.is_empty() {
                out.push_str("\\u00");
                out.push(HEX[usize::from(b >> 4)] as char);
                out.push(HEX[usize::from(b & 15)] as char);
                start = i + 1;
            } else if esc == "surrogates" {
                let Some(ch) = s[i..].chars().next() else {
                    continue;
                };
                let mut units = [0u16; 2];
                for unit in ch.encode_utf16(&mut units) {
                    out.push_str("\\u");
                    for shift in [12, 8, 4, 0] {
                        out.push(HEX[usize::from((*unit >> shift) & 15)] as char);
                    }
                }
                start = i + ch.len_utf8();
            } else {
                out.push_str(esc);
                start = i + 1;
            }
        }
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// A parsed JSON document, members in document order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum JsonNode {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer that fits `int` (Jackson's `IntNode`).
    Int(i32),
    /// An integer that fits `long` (`LongNode`).
    Long(i64),
    /// A larger integer (`BigIntegerNode`), as written.
    BigInt(String),
    /// A number with a fraction or exponent (`DoubleNode`).
    Double(f64),
    /// A string, its escapes resolved (Jackson's `TextNode`).
    String(String),
    /// An array, elements in document order (`ArrayNode`).
    Array(Vec<JsonNode>),
    /// An object; a repeated name keeps its first position and last value,
    /// as Jackson's `ObjectNode` does.
    Object(Vec<(String, JsonNode)>),
}

impl JsonNode {
    /// Jackson's `JsonNodeType` name, as `getNodeType().toString()` gives it.
    pub(crate) fn node_type(&self) -> &'static str {
        match self {
            JsonNode::Null => "NULL",
            JsonNode::Bool(_) => "BOOLEAN",
            JsonNode::Int(_) | JsonNode::Long(_) | JsonNode::BigInt(_) | JsonNode::Double(_) => {
                "NUMBER"
            }
            JsonNode::String(_) => "STRING",
            JsonNode::Array(_) => "ARRAY",
            JsonNode::Object(_) => "OBJECT",
        }
    }

    /// Jackson's `asText()`: the text of a value node, `""` for containers.
    pub(crate) fn as_text(&self) -> String {
        match self {
            JsonNode::Null => "null".to_owned(),
            JsonNode::Bool(b) => b.to_string(),
            JsonNode::Int(i) => i.to_string(),
            JsonNode::Long(i) => i.to_string(),
            JsonNode::BigInt(s) => s.clone(),
            JsonNode::Double(d) => super::java::double_to_string(*d),
            JsonNode::String(s) => s.clone(),
            JsonNode::Array(_) | JsonNode::Object(_) => String::new(),
        }
    }
}

/// Why a document is not JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid json at byte {position}: {reason}")]
pub(crate) struct JsonParseError {
    /// Byte offset.
    pub(crate) position: usize,
    /// What was expected.
    pub(crate) reason: &'static str,
}

/// Parses the first JSON value of `text`; like Jackson's `readTree` with
/// default features, anything after it is ignored.
pub(crate) fn parse(text: &str) -> Result<JsonNode, JsonParseError> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    p.value(0)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn err<T>(&self, reason: &'static str) -> Result<T, JsonParseError> {
        Err(JsonParseError {
            position: self.i,
            reason,
        })
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.i) {
            self.i += 1;
        }
    }

    fn literal(&mut self, word: &'static [u8], node: JsonNode) -> Result<JsonNode, JsonParseError> {
        if self.s[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(node)
        } else {
            self.err("unrecognized token")
        }
    }

    fn value(&mut self, depth: usize) -> Result<JsonNode, JsonParseError> {
        if depth > MAX_DEPTH {
            return self.err("nesting too deep");
        }
        self.ws();
        match self.s.get(self.i) {
            None => self.err("unexpected end of input"),
            Some(b'{') => {
                self.i += 1;
                let mut members: Vec<(String, JsonNode)> = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    return Ok(JsonNode::Object(members));
                }
                loop {
                    self.ws();
                    if self.s.get(self.i) != Some(&b'"') {
                        return self.err("expected a field name");
                    }
                    let name = self.string()?;
                    self.ws();
                    if self.s.get(self.i) != Some(&b':') {
                        return self.err("expected ':'");
                    }
                    self.i += 1;
                    let v = self.value(depth + 1)?;
                    match members.iter_mut().find(|(n, _)| *n == name) {
                        Some(slot) => slot.1 = v,
                        None => members.push((name, v)),
                    }
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(JsonNode::Object(members));
                        }
                        _ => return self.err("expected ',' or '}'"),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Ok(JsonNode::Array(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(JsonNode::Array(items));
                        }
                        _ => return self.err("expected ',' or ']'"),
                    }
                }
            }
            Some(b'"') => Ok(JsonNode::String(self.string()?)),
            Some(b't') => self.literal(b"true", JsonNode::Bool(true)),
            Some(b'f') => self.literal(b"false", JsonNode::Bool(false)),
            Some(b'n') => self.literal(b"null", JsonNode::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => self.err("unexpected character"),
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> Result<JsonNode, JsonParseError> {
        let start = self.i;
        if self.s.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        let int_start = self.i;
        let n = self.digits();
        if n == 0 {
            return self.err("expected a digit");
        }
        if n > 1 && self.s[int_start] == b'0' {
            return self.err("leading zeros are not allowed");
        }
        let mut float = false;
        if self.s.get(self.i) == Some(&b'.') {
            self.i += 1;
            float = true;
            if self.digits() == 0 {
                return self.err("expected a fraction digit");
            }
        }
        if let Some(b'e' | b'E') = self.s.get(self.i) {
            self.i += 1;
            float = true;
            if let Some(b'+' | b'-') = self.s.get(self.i) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return self.err("expected an exponent digit");
            }
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("0");
        if float {
            return match text.parse::<f64>() {
                Ok(d) => Ok(JsonNode::Double(d)),
                Err(_) => self.err("invalid number"),
            };
        }
        if let Ok(v) = text.parse::<i32>() {
            Ok(JsonNode::Int(v))
        } else if let Ok(v) = text.parse::<i64>() {
            Ok(JsonNode::Long(v))
        } else {
            Ok(JsonNode::BigInt(text.to_owned()))
        }
    }

    fn hex4(&mut self) -> Result<u16, JsonParseError> {
        let Some(h) = self.s.get(self.i..self.i + 4) else {
            return self.err("truncated unicode escape");
        };
        let h = std::str::from_utf8(h).ok();
        match h.and_then(|h| u16::from_str_radix(h, 16).ok()) {
            Some(v) => {
                self.i += 4;
                Ok(v)
            }
            None => self.err("invalid unicode escape"),
        }
    }

    fn string(&mut self) -> Result<String, JsonParseError> {
        self.i += 1; // opening quote
        let mut out = String::new();
        let mut start = self.i;
        loop {
            match self.s.get(self.i) {
                None => return self.err("unterminated string"),
                Some(b'"') => {
                    out.push_str(std::str::from_utf8(&self.s[start..self.i]).unwrap_or_default());
                    self.i += 1;
                    return Ok(out);
                }
                Some(0..=0x1f) => return self.err("unescaped control character"),
                Some(b'\\') => {
                    out.push_str(std::str::from_utf8(&self.s[start..self.i]).unwrap_or_default());
                    self.i += 1;
                    let Some(&c) = self.s.get(self.i) else {
                        return self.err("unterminated escape");
                    };
                    self.i += 1;
                    match c {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let ch = if (0xD800..0xDC00).contains(&hi)
                                && self.s.get(self.i..self.i + 2) == Some(b"\\u")
                            {
                                let save = self.i;
                                self.i += 2;
                                let lo = self.hex4()?;
                                if (0xDC00..0xE000).contains(&lo) {
                                    let c = 0x10000
                                        + ((u32::from(hi) - 0xD800) << 10)
                                        + (u32::from(lo) - 0xDC00);
                                    char::from_u32(c)
                                } else {
                                    self.i = save;
                                    None
                                }
                            } else {
                                char::from_u32(u32::from(hi))
                            };
                            // A lone surrogate cannot live in a Rust string.
                            out.push(ch.unwrap_or('\u{FFFD}'));
                        }
                        _ => return self.err("invalid escape"),
                    }
                    start = self.i;
                }
                Some(_) => self.i += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn esc(s: &str) -> String {
        let mut out = String::new();
        write_string(&mut out, s);
        out
    }

    #[test]
    fn escaping_matches_jackson_defaults() {
        assert_eq!(esc("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(esc("\n\t\r\u{8}\u{c}"), r#""\n\t\r\b\f""#);
        assert_eq!(esc("\u{1}\u{1f}"), r#""\u0001\u001F""#);
        assert_eq!(esc("/ é \u{7f}"), "\"/ é \u{7f}\"");
        // Outside the BMP: an escaped surrogate pair, as a real Debezium
        // 3.6.1 run wrote it (tests/compat).
        assert_eq!(esc("a😀b"), r#""a\uD83D\uDE00b""#);
        assert_eq!(
            esc("{\"email\": \"gh@mefi.in\"}"),
            r#""{\"email\": \"gh@mefi.in\"}""#
        );
    }

    #[test]
    fn numbers_are_classified_like_jackson() {
        assert_eq!(parse("1").unwrap(), JsonNode::Int(1));
        assert_eq!(parse("-2147483648").unwrap(), JsonNode::Int(i32::MIN));
        assert_eq!(parse("2147483648").unwrap(), JsonNode::Long(2_147_483_648));
        assert_eq!(
            parse("92233720368547758070").unwrap(),
            JsonNode::BigInt("92233720368547758070".into())
        );
        assert_eq!(parse("2.0").unwrap(), JsonNode::Double(2.0));
        assert_eq!(parse("1e2").unwrap(), JsonNode::Double(100.0));
        assert!(parse("01").is_err());
        assert!(parse("NaN").is_err());
    }

    #[test]
    fn objects_keep_order_and_last_duplicate() {
        let doc = parse(r#"{"b": 1, "a": [true, null, "x\u00e9"], "b": 2} trailing"#).unwrap();
        assert_eq!(
            doc,
            JsonNode::Object(vec![
                ("b".into(), JsonNode::Int(2)),
                (
                    "a".into(),
                    JsonNode::Array(vec![
                        JsonNode::Bool(true),
                        JsonNode::Null,
                        JsonNode::String("xé".into())
                    ])
                ),
            ])
        );
    }

    #[test]
    fn depth_is_bounded() {
        let deep = "[".repeat(MAX_DEPTH + 5);
        assert!(parse(&deep).is_err());
        assert!(parse("{\"a\":").is_err());
    }
}
