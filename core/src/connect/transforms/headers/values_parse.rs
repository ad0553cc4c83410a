//! Kafka 4.1.1's `Values.parseString`: the schema and value Connect infers
//! from a literal, as `InsertHeader`'s `value.literal` is read. Owns the
//! tokenizer (`Values.Parser`), the recursive parser (`ValueParser`), the
//! element schema merging (`SchemaMerger`), the alignment of array and map
//! entries with the merged schema (`Values.convertTo`) and the lenient
//! `SimpleDateFormat` reading of ISO dates, times and timestamps. Pure.
//!
//! Kafka's quirks are kept: a top-level number or temporal ignores what
//! follows it (`1,2` is the INT8 1), an array with a null and a non-null
//! element is a string, unquoted map keys make the whole literal a string,
//! backslashes stay in quoted strings.

use std::sync::Arc;

use super::super::util::linked_put;
use crate::connect::java::{java_double_bits, java_float_bits, parse_big_decimal};
use crate::connect::pg::names::{
    CONNECT_DATE as DATE_NAME, CONNECT_TIME as TIME_NAME, CONNECT_TIMESTAMP as TIMESTAMP_NAME,
};
use crate::connect::{Decimal, Schema, Type, Value, DECIMAL_NAME};

/// Milliseconds in a day (`Values.MILLIS_PER_DAY`).
const MILLIS_PER_DAY: i64 = 86_400_000;

/// Deeper nesting than this is read as a string (Java would go on until
/// its stack overflows).
const MAX_DEPTH: usize = 128;

/// A value as Java holds it while parsing: the Java class matters for
/// schema merging and map-key equality, and a `java.util.Date` is kept in
/// milliseconds until its final schema says which Connect value it is.
#[derive(Debug, Clone)]
enum JVal {
    /// `null`.
    Null,
    /// `Boolean`.
    Bool(bool),
    /// `Byte`.
    Byte(i8),
    /// `Short`.
    Short(i16),
    /// `Integer`.
    Int(i32),
    /// `Long`.
    Long(i64),
    /// `Float`.
    Float(f32),
    /// `Double`.
    Double(f64),
    /// `String`.
    Str(String),
    /// `BigDecimal`.
    Dec(Decimal),
    /// A `java.util.Date`: Unix milliseconds.
    Date(i64),
    /// `ArrayList`.
    List(Vec<JVal>),
    /// `LinkedHashMap`, in insertion order.
    Map(Vec<(JVal, JVal)>),
}

impl PartialEq for JVal {
    /// Java's `equals` of the boxed values (`Float.equals` compares bits,
    /// `Map.equals` ignores order).
    fn eq(&self, other: &JVal) -> bool {
        match (self, other) {
            (JVal::Null, JVal::Null) => true,
            (JVal::Bool(a), JVal::Bool(b)) => a == b,
            (JVal::Byte(a), JVal::Byte(b)) => a == b,
            (JVal::Short(a), JVal::Short(b)) => a == b,
            (JVal::Int(a), JVal::Int(b)) => a == b,
            (JVal::Long(a), JVal::Long(b)) | (JVal::Date(a), JVal::Date(b)) => a == b,
            (JVal::Float(a), JVal::Float(b)) => java_float_bits(*a) == java_float_bits(*b),
            (JVal::Double(a), JVal::Double(b)) => java_double_bits(*a) == java_double_bits(*b),
            (JVal::Str(a), JVal::Str(b)) => a == b,
            (JVal::Dec(a), JVal::Dec(b)) => a == b,
            (JVal::List(a), JVal::List(b)) => a == b,
            (JVal::Map(a), JVal::Map(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .all(|(k, v)| b.iter().any(|(k2, v2)| k == k2 && v == v2))
            }
            _ => false,
        }
    }
}

/// A `SchemaAndValue` with a schema (a parsed null is `None` instead).
#[derive(Debug, Clone)]
struct Parsed {
    /// The inferred schema.
    schema: Arc<Schema>,
    /// The value.
    value: JVal,
}

/// A `DataException` inside the parser; Kafka catches it and reads the
/// whole literal as a string.
#[derive(Debug)]
struct Unparsable;

/// The result of [`parse_string`]: the header's schema and value (both
/// none for the literal `null`).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Literal {
    /// The inferred schema.
    pub(super) schema: Option<Arc<Schema>>,
    /// The value, as walrelay's data model holds it.
    pub(super) value: Value,
}

/// `Values.parseString(text)`; `Err` when the inferred value cannot be
/// held by walrelay's data model (a `java.util.Date` under no temporal
/// schema, or one its schema cannot represent): Kafka would fail on it
/// when a converter serialises the header.
pub(super) fn parse_string(text: &str) -> Result<Literal, String> {
    if text.is_empty() {
        return Ok(Literal {
            schema: Some(Arc::new(Schema::new(Type::String))),
            value: Value::string(""),
        });
    }
    let mut p = ValueParser {
        parser: Parser::new(text),
        depth: 0,
    };
    let parsed = match p.parse(false) {
        Ok(v) => v,
        // Not reached: a top-level parse recovers from every error.
        Err(Unparsable) => Some(string(text)),
    };
    match parsed {
        None => Ok(Literal {
            schema: None,
            value: Value::Null,
        }),
        Some(p) => {
            let value = to_value(Some(&p.schema), p.value)?;
            Ok(Literal {
                schema: Some(p.schema),
                value,
            })
        }
    }
}

/// A STRING `SchemaAndValue`.
fn string(s: &str) -> Parsed {
    Parsed {
        schema: Arc::new(Schema::new(Type::String)),
        value: JVal::Str(s.to_owned()),
    }
}

/// Java's `String.trim()`: strips every char up to U+0020.
fn java_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c <= ' ')
}

/// Kafka's `Utils.isBlank`.
fn is_blank(s: &str) -> bool {
    java_trim(s).is_empty()
}

/// `Values.Parser`: tokens split at unescaped `: , { } [ ] "`, each
/// delimiter a token of its own.
#[derive(Debug)]
struct Parser {
    /// The whole literal.
    original: String,
    /// Its characters.
    chars: Vec<char>,
    /// The character iterator's position.
    index: usize,
    /// A token looked at but not consumed.
    next_token: Option<String>,
    /// The token last consumed.
    previous_token: Option<String>,
}

impl Parser {
    /// A parser at the start of `original`.
    fn new(original: &str) -> Parser {
        Parser {
            original: original.to_owned(),
            chars: original.chars().collect(),
            index: 0,
            next_token: None,
            previous_token: None,
        }
    }

    /// The position before the token looked at but not consumed.
    fn mark(&self) -> usize {
        self.index - self.next_token.as_ref().map_or(0, |t| t.chars().count())
    }

    /// Goes back to `position`, forgetting the tokens looked at.
    fn rewind_to(&mut self, position: usize) {
        self.index = position;
        self.next_token = None;
        self.previous_token = None;
    }

    /// Whether a token is left.
    fn has_next(&self) -> bool {
        self.next_token.is_some() || self.index < self.chars.len()
    }

    /// The next token (the empty text at the end).
    fn next(&mut self) -> String {
        let token = match self.next_token.take() {
            Some(t) => t,
            None => self.consume_next_token(),
        };
        self.previous_token = Some(token.clone());
        token
    }

    /// The text of the next `n` tokens, or none (rewound) when fewer are left.
    fn next_n(&mut self, n: usize) -> Option<String> {
        let start = self.mark();
        for _ in 0..n {
            if !self.has_next() {
                self.rewind_to(start);
                return None;
            }
            self.next();
        }
        Some(self.chars[start..self.index].iter().collect())
    }

    /// Reads one token from the text.
    fn consume_next_token(&mut self) -> String {
        let start = self.index;
        let mut escaped = false;
        while let Some(&c) = self.chars.get(self.index) {
            match c {
                '\\' => escaped = !escaped,
                ':' | ',' | '{' | '}' | '[' | ']' | '"' => {
                    if !escaped {
                        if start < self.index {
                            return self.chars[start..self.index].iter().collect();
                        }
                        self.index += 1;
                        return c.to_string();
                    }
                    escaped = false;
                }
                _ => escaped = false,
            }
            self.index += 1;
        }
        self.chars[start..self.index].iter().collect()
    }

    /// Consumes the next token when, trimmed, it is `expected` (blank
    /// tokens before it are dropped).
    fn can_consume(&mut self, expected: &str) -> bool {
        if self.next_token.is_none() {
            if !self.has_next() {
                return false;
            }
            self.next_token = Some(self.consume_next_token());
        }
        while self.next_token.as_deref().is_some_and(is_blank) && self.index < self.chars.len() {
            self.next_token = Some(self.consume_next_token());
        }
        if self.next_token.as_deref().map(java_trim) == Some(expected) {
            self.next_token = None;
            return true;
        }
        false
    }
}

/// `Values.ValueParser`.
#[derive(Debug)]
struct ValueParser {
    /// The tokens.
    parser: Parser,
    /// Arrays and maps open.
    depth: usize,
}

impl ValueParser {
    /// Whether the next token is the literal `lit` standing alone (at top
    /// level: the last token); rewinds otherwise.
    fn single_token_literal(&mut self, embedded: bool, lit: &str) -> bool {
        let start = self.parser.mark();
        if self.parser.can_consume(lit) && (embedded || !self.parser.has_next()) {
            return true;
        }
        self.parser.rewind_to(start);
        false
    }

    /// `ValueParser.parse(embedded)`; `Ok(None)` is a null.
    fn parse(&mut self, embedded: bool) -> Result<Option<Parsed>, Unparsable> {
        if !self.parser.has_next() {
            return Ok(None);
        }
        if embedded && self.parser.can_consume("\"") {
            return Ok(Some(self.parse_quoted_string()));
        }
        if self.single_token_literal(embedded, "null") {
            return Ok(None);
        }
        for (lit, b) in [("true", true), ("false", false)] {
            if self.single_token_literal(embedded, lit) {
                return Ok(Some(Parsed {
                    schema: Arc::new(Schema::new(Type::Boolean)),
                    value: JVal::Bool(b),
                }));
            }
        }
        let start = self.parser.mark();
        if let Some(result) = self.parse_container() {
            match result {
                Ok(p) => return Ok(Some(p)),
                Err(Unparsable) => self.parser.rewind_to(start),
            }
        }
        let token = self.parser.next();
        if is_blank(&token) {
            return Ok(Some(string(&token)));
        }
        self.parse_next_token(embedded, java_trim(&token)).map(Some)
    }

    /// An array or a map when the next token opens one.
    fn parse_container(&mut self) -> Option<Result<Parsed, Unparsable>> {
        let open = if self.parser.can_consume("[") {
            '['
        } else if self.parser.can_consume("{") {
            '{'
        } else {
            return None;
        };
        if self.depth >= MAX_DEPTH {
            return Some(Err(Unparsable));
        }
        self.depth += 1;
        let result = if open == '[' {
            self.parse_array()
        } else {
            self.parse_map()
        };
        self.depth -= 1;
        Some(result)
    }

    /// A temporal, a number, or (at top level) the whole text as a string.
    fn parse_next_token(&mut self, embedded: bool, token: &str) -> Result<Parsed, Unparsable> {
        let first = token.chars().next().unwrap_or(' ');
        let digit = first.is_ascii_digit();
        if digit {
            if let Some(t) = self.parse_multiple_tokens_as_temporal(token) {
                return Ok(t);
            }
        }
        if digit || first == '+' || first == '-' {
            if let Some(n) = parse_as_number(token) {
                return Ok(n);
            }
        }
        if embedded {
            return Err(Unparsable);
        }
        Ok(string(&self.parser.original))
    }

    /// A time or timestamp split at its colons (five tokens), else `token`
    /// alone as a date, time or timestamp.
    fn parse_multiple_tokens_as_temporal(&mut self, token: &str) -> Option<Parsed> {
        let position = self.parser.mark();
        if let Some(rest) = self.parser.next_n(4) {
            if let Some(t) = parse_as_temporal(&format!("{token}{rest}")) {
                return Some(t);
            }
        }
        self.parser.rewind_to(position);
        parse_as_temporal(token)
    }

    /// The text up to the closing quote (kept as written, escapes and
    /// all), a temporal when it reads as one.
    fn parse_quoted_string(&mut self) -> Parsed {
        let mut content = String::new();
        while self.parser.has_next() {
            if self.parser.can_consume("\"") {
                break;
            }
            content.push_str(&self.parser.next());
        }
        parse_as_temporal(&content).unwrap_or_else(|| string(&content))
    }

    /// `[a, b, ...]` after its `[`.
    fn parse_array(&mut self) -> Result<Parsed, Unparsable> {
        let mut result = Vec::new();
        let mut merger = Merger::default();
        while self.parser.has_next() {
            if self.parser.can_consume("]") {
                return Ok(match merger.common {
                    Some(common) => {
                        let items = result
                            .into_iter()
                            .map(|v| convert_to(&common, v))
                            .collect::<Result<Vec<_>, _>>()?;
                        Parsed {
                            schema: Arc::new(Schema::array(common)),
                            value: JVal::List(items),
                        }
                    }
                    None => Parsed {
                        schema: Arc::new(Schema::new(Type::Array)),
                        value: JVal::List(result),
                    },
                });
            }
            if self.parser.can_consume(",") {
                return Err(Unparsable);
            }
            let element = self.parse(true)?;
            merger.merge(element.as_ref());
            result.push(element.map_or(JVal::Null, |e| e.value));
            let current = self.parser.mark();
            if self.parser.can_consume("]") {
                self.parser.rewind_to(current);
            } else if !self.parser.can_consume(",") {
                return Err(Unparsable);
            }
        }
        Err(Unparsable)
    }

    /// `{k: v, ...}` after its `{`, entries kept as a `LinkedHashMap` keeps
    /// them.
    fn parse_map(&mut self) -> Result<Parsed, Unparsable> {
        let mut result: Vec<(JVal, JVal)> = Vec::new();
        let mut keys = Merger::default();
        let mut values = Merger::default();
        while self.parser.has_next() {
            if self.parser.can_consume("}") {
                return finish_map(result, keys.common, values.common);
            }
            if self.parser.can_consume(",") {
                return Err(Unparsable);
            }
            let key = self.parse(true)?.ok_or(Unparsable)?;
            if !self.parser.can_consume(":") {
                return Err(Unparsable);
            }
            let value = self.parse(true)?;
            let entry_value = value.as_ref().map_or(JVal::Null, |v| v.value.clone());
            linked_put(&mut result, key.value.clone(), entry_value);
            self.parser.can_consume(",");
            keys.merge(Some(&key));
            values.merge(value.as_ref());
        }
        Err(Unparsable)
    }
}

/// The map's schema (`map`, `mapWithNullValues` or `mapOfNull`) and its
/// entries aligned with it.
fn finish_map(
    entries: Vec<(JVal, JVal)>,
    keys: Option<Arc<Schema>>,
    values: Option<Arc<Schema>>,
) -> Result<Parsed, Unparsable> {
    let mut schema = Schema::new(Type::Map);
    let Some(key_schema) = keys else {
        return Ok(Parsed {
            schema: Arc::new(schema),
            value: JVal::Map(entries),
        });
    };
    let mut aligned = Vec::with_capacity(entries.len());
    for (k, v) in entries {
        let k = convert_to(&key_schema, k)?;
        let v = match &values {
            Some(vs) => convert_to(vs, v)?,
            None => v,
        };
        linked_put(&mut aligned, k, v);
    }
    schema.key_schema = Some(key_schema);
    schema.value_schema = values;
    Ok(Parsed {
        schema: Arc::new(schema),
        value: JVal::Map(aligned),
    })
}

/// `Values.SchemaMerger`: the schema common to the elements seen.
#[derive(Debug)]
struct Merger {
    /// The schema common to the non-null elements so far.
    common: Option<Arc<Schema>>,
    /// False once two elements had no common schema.
    compatible: bool,
}

impl Default for Merger {
    fn default() -> Merger {
        Merger {
            common: None,
            compatible: true,
        }
    }
}

impl Merger {
    /// Folds one element's schema in (nulls are ignored).
    fn merge(&mut self, latest: Option<&Parsed>) {
        let Some(latest) = latest else { return };
        if !self.compatible {
            return;
        }
        self.common = match self.common.take() {
            None => Some(latest.schema.clone()),
            Some(previous) => {
                let merged = merge_schemas(previous, latest.schema.clone());
                self.compatible = merged.is_some();
                merged
            }
        };
    }
}

/// `Values.mergeSchemas`: numeric types widen (a logical INT32/INT64
/// counts as its type), equal types take the later schema.
fn merge_schemas(previous: Arc<Schema>, new: Arc<Schema>) -> Option<Arc<Schema>> {
    if previous.kind != new.kind {
        let rank = |t: Type| match t {
            Type::Int8 => Some(0),
            Type::Int16 => Some(1),
            Type::Int32 => Some(2),
            Type::Int64 => Some(3),
            Type::Float32 => Some(4),
            Type::Float64 => Some(5),
            _ => None,
        };
        let (p, n) = (rank(previous.kind)?, rank(new.kind)?);
        return Some(if n > p { new } else { previous });
    }
    if previous.optional == new.optional {
        return Some(if previous.optional { previous } else { new });
    }
    (previous == new).then_some(previous)
}

/// The schema of a date, time or timestamp literal.
fn temporal_schema(kind: Type, name: &str) -> Arc<Schema> {
    Arc::new(Schema::new(kind).named(name, Some(1)))
}

/// `Values.convertTo(toSchema, null, value)` for what the merged schema
/// of a parsed array or map can be.
fn convert_to(to: &Schema, v: JVal) -> Result<JVal, Unparsable> {
    if matches!(v, JVal::Null) {
        return if to.optional {
            Ok(JVal::Null)
        } else {
            Err(Unparsable)
        };
    }
    let name = to.name.as_deref();
    Ok(match (to.kind, v) {
        (Type::Int32, JVal::Date(ms)) if name == Some(DATE_NAME) || name == Some(TIME_NAME) => {
            JVal::Date(ms)
        }
        (Type::Int64, JVal::Date(ms)) if name == Some(TIMESTAMP_NAME) => JVal::Date(ms),
        (Type::Int32, v) if name == Some(DATE_NAME) => {
            JVal::Date(i64::from(as_long(&v)? as i32) * MILLIS_PER_DAY)
        }
        (Type::Int32, v) if name == Some(TIME_NAME) => {
            let ms = as_long(&v)? as i32;
            if ms < 0 || i64::from(ms) > MILLIS_PER_DAY {
                return Err(Unparsable);
            }
            JVal::Date(i64::from(ms))
        }
        (Type::Int64, v) if name == Some(TIMESTAMP_NAME) => JVal::Date(as_long(&v)?),
        (Type::Boolean, JVal::Bool(b)) => JVal::Bool(b),
        (Type::Int8, JVal::Byte(b)) => JVal::Byte(b),
        (Type::Int8, v) => JVal::Byte(as_long(&v)? as i8),
        (Type::Int16, JVal::Short(s)) => JVal::Short(s),
        (Type::Int16, v) => JVal::Short(as_long(&v)? as i16),
        (Type::Int32, JVal::Int(i)) => JVal::Int(i),
        (Type::Int32, v) => JVal::Int(as_long(&v)? as i32),
        (Type::Int64, JVal::Long(l)) => JVal::Long(l),
        (Type::Int64, v) => JVal::Long(as_long(&v)?),
        (Type::Float32, JVal::Float(f)) => JVal::Float(f),
        (Type::Float32, v) => JVal::Float(as_double(&v)? as f32),
        (Type::Float64, JVal::Double(d)) => JVal::Double(d),
        (Type::Float64, v) => JVal::Double(as_double(&v)?),
        (Type::String, JVal::Str(s)) => JVal::Str(s),
        (Type::Bytes, JVal::Dec(d)) if name == Some(DECIMAL_NAME) => JVal::Dec(d),
        (Type::Array, JVal::List(l)) => JVal::List(l),
        (Type::Map, JVal::Map(m)) => JVal::Map(m),
        // Other pairs never share a merged schema.
        _ => return Err(Unparsable),
    })
}

/// `Values.asLong(value, null, null)` for a parsed value: a number's
/// `longValue()`; a date has no schema to say what it counts.
fn as_long(v: &JVal) -> Result<i64, Unparsable> {
    Ok(match v {
        JVal::Byte(b) => i64::from(*b),
        JVal::Short(s) => i64::from(*s),
        JVal::Int(i) => i64::from(*i),
        JVal::Long(l) => *l,
        JVal::Float(f) => *f as i64,
        JVal::Double(d) => *d as i64,
        _ => return Err(Unparsable),
    })
}

/// `Values.asDouble(value, null, null)` for a parsed value.
fn as_double(v: &JVal) -> Result<f64, Unparsable> {
    Ok(match v {
        JVal::Byte(b) => f64::from(*b),
        JVal::Short(s) => f64::from(*s),
        JVal::Int(i) => f64::from(*i),
        JVal::Long(l) => *l as f64,
        JVal::Float(f) => f64::from(*f),
        JVal::Double(d) => *d,
        _ => return Err(Unparsable),
    })
}

/// A parsed value as walrelay's [`Value`] under `schema`: a
/// `java.util.Date` becomes days (Date), ms of day (Time) or ms
/// (Timestamp).
fn to_value(schema: Option<&Schema>, v: JVal) -> Result<Value, String> {
    Ok(match v {
        JVal::Null => Value::Null,
        JVal::Bool(b) => Value::Boolean(b),
        JVal::Byte(b) => Value::Int8(b),
        JVal::Short(s) => Value::Int16(s),
        JVal::Int(i) => Value::Int32(i),
        JVal::Long(l) => Value::Int64(l),
        JVal::Float(f) => Value::Float32(f),
        JVal::Double(d) => Value::Float64(d),
        JVal::Str(s) => Value::string(s),
        JVal::Dec(d) => Value::Decimal(d),
        JVal::Date(ms) => date_value(schema, ms)?,
        JVal::List(items) => {
            let items_schema = schema.and_then(|s| s.value_schema.as_deref());
            Value::Array(
                items
                    .into_iter()
                    .map(|i| to_value(items_schema, i))
                    .collect::<Result<_, _>>()?,
            )
        }
        JVal::Map(entries) => {
            let ks = schema.and_then(|s| s.key_schema.as_deref());
            let vs = schema.and_then(|s| s.value_schema.as_deref());
            let mut out = Vec::with_capacity(entries.len());
            for (k, v) in entries {
                out.push((to_value(ks, k)?, to_value(vs, v)?));
            }
            Value::Map(out)
        }
    })
}

/// A `java.util.Date` of `ms` under `schema`.
fn date_value(schema: Option<&Schema>, ms: i64) -> Result<Value, String> {
    let unrepresentable = |what: &str| {
        format!("the date {ms} ms {what} (Kafka Connect fails converting such a header)")
    };
    match schema.and_then(|s| s.name.as_deref()) {
        Some(DATE_NAME) if ms % MILLIS_PER_DAY == 0 => i32::try_from(ms / MILLIS_PER_DAY)
            .map(Value::Int32)
            .map_err(|_| unrepresentable("is out of a Date's range")),
        Some(DATE_NAME) => Err(unrepresentable("has a time of day under a Date schema")),
        Some(TIME_NAME) => i32::try_from(ms)
            .map(Value::Int32)
            .map_err(|_| unrepresentable("is out of a Time's range")),
        Some(TIMESTAMP_NAME) => Ok(Value::Int64(ms)),
        _ => Err(unrepresentable("has no temporal schema")),
    }
}

/// `ValueParser.parseAsNumber`: the smallest of INT8..INT64 for a whole
/// number in the long range, else FLOAT32, FLOAT64 (when finite and the
/// scale is not 0), else a Decimal; `None` for what `new BigDecimal`
/// refuses.
fn parse_as_number(token: &str) -> Option<Parsed> {
    let d = parse_big_decimal(token)?;
    if let Some(exact) = exact_integer(&d) {
        return Some(exact);
    }
    let sci = format!(
        "{}{}e{}",
        if d.negative { "-" } else { "" },
        d.digits,
        -i64::from(d.scale)
    );
    let f: f32 = sci.parse().ok()?;
    if f.is_finite() && d.scale != 0 {
        return Some(Parsed {
            schema: Arc::new(Schema::new(Type::Float32)),
            value: JVal::Float(f),
        });
    }
    let v: f64 = sci.parse().ok()?;
    if v.is_finite() && d.scale != 0 {
        return Some(Parsed {
            schema: Arc::new(Schema::new(Type::Float64)),
            value: JVal::Double(v),
        });
    }
    let schema = Schema::new(Type::Bytes)
        .named(DECIMAL_NAME, Some(1))
        .with_parameter("scale", &d.scale.to_string());
    Some(Parsed {
        schema: Arc::new(schema),
        value: JVal::Dec(d),
    })
}

/// `ValueParser.parseAsExactDecimal`: a whole number from 1 to 1e19 in
/// magnitude (or zero) that fits a long, as the smallest integer type.
fn exact_integer(d: &Decimal) -> Option<Parsed> {
    let len = d.digits.len() as i64;
    if &*d.digits == "0" {
        return Some(int_parsed(0));
    }
    let adjusted = len - 1 - i64::from(d.scale);
    let stripped = d.digits.trim_end_matches('0');
    if !(0..=19).contains(&adjusted) || (adjusted == 19 && stripped != "1") {
        return None;
    }
    let scale = i64::from(d.scale);
    let integral: i128 = if scale <= 0 {
        let base: i128 = d.digits.parse().ok()?;
        base.checked_mul(10i128.checked_pow(u32::try_from(-scale).ok()?)?)?
    } else {
        let cut = usize::try_from(len - scale).ok()?;
        if !d.digits[cut..].bytes().all(|b| b == b'0') {
            return None;
        }
        d.digits[..cut].parse().ok()?
    };
    let integral = if d.negative { -integral } else { integral };
    i64::try_from(integral).ok().map(int_parsed)
}

/// An integer as INT8, INT16, INT32 or INT64, the smallest that holds it.
fn int_parsed(v: i64) -> Parsed {
    let (kind, value) = if let Ok(b) = i8::try_from(v) {
        (Type::Int8, JVal::Byte(b))
    } else if let Ok(s) = i16::try_from(v) {
        (Type::Int16, JVal::Short(s))
    } else if let Ok(i) = i32::try_from(v) {
        (Type::Int32, JVal::Int(i))
    } else {
        (Type::Int64, JVal::Long(v))
    };
    Parsed {
        schema: Arc::new(Schema::new(kind)),
        value,
    }
}

/// One element of a `SimpleDateFormat` pattern.
#[derive(Debug, Clone, Copy)]
enum Item {
    /// A numeric calendar field (index into the parsed fields).
    Num(usize),
    /// A literal character.
    Lit(char),
}

/// `yyyy-MM-dd`: year, month, day.
const DATE_PATTERN: &[Item] = &[
    Item::Num(0),
    Item::Lit('-'),
    Item::Num(1),
    Item::Lit('-'),
    Item::Num(2),
];
/// `HH:mm:ss.SSS'Z'`: hour, minute, second, millisecond.
const TIME_PATTERN: &[Item] = &[
    Item::Num(3),
    Item::Lit(':'),
    Item::Num(4),
    Item::Lit(':'),
    Item::Num(5),
    Item::Lit('.'),
    Item::Num(6),
    Item::Lit('Z'),
];

/// `ValueParser.parseAsTemporal`: by its length (in UTF-16 units, `\:`
/// read as `:`), a time (13), timestamp (24) or date (10) when
/// `SimpleDateFormat` reads one from its start.
fn parse_as_temporal(token: &str) -> Option<Parsed> {
    let token = token.replace("\\:", ":");
    let chars: Vec<char> = token.chars().collect();
    let timestamp: Vec<Item> = DATE_PATTERN
        .iter()
        .copied()
        .chain([Item::Lit('T')])
        .chain(TIME_PATTERN.iter().copied())
        .collect();
    let (pattern, kind, name): (&[Item], Type, &str) = match token.encode_utf16().count() {
        13 => (TIME_PATTERN, Type::Int32, TIME_NAME),
        24 => (&timestamp, Type::Int64, TIMESTAMP_NAME),
        10 => (DATE_PATTERN, Type::Int32, DATE_NAME),
        _ => return None,
    };
    let fields = lenient_parse(&chars, pattern)?;
    Some(Parsed {
        schema: temporal_schema(kind, name),
        value: JVal::Date(lenient_millis(&fields)),
    })
}

/// `SimpleDateFormat.parse(text, pos)` with the lenient defaults: each
/// numeric field skips spaces and tabs, takes an optional `-` and every
/// digit that follows; literals must match; text after the pattern is
/// ignored. Returns year, month, day, hour, minute, second, ms (unset
/// fields at their epoch values).
fn lenient_parse(chars: &[char], pattern: &[Item]) -> Option<[i64; 7]> {
    let mut fields = [1970, 1, 1, 0, 0, 0, 0];
    let mut i = 0;
    for item in pattern {
        match *item {
            Item::Lit(c) => {
                if chars.get(i) != Some(&c) {
                    return None;
                }
                i += 1;
            }
            Item::Num(field) => {
                while matches!(chars.get(i), Some(' ' | '\t')) {
                    i += 1;
                }
                let negative = chars.get(i) == Some(&'-');
                let start = if negative { i + 1 } else { i };
                let mut end = start;
                while chars.get(end).is_some_and(char::is_ascii_digit) {
                    end += 1;
                }
                if end == start {
                    return None;
                }
                let text: String = chars[start..end].iter().collect();
                fields[field] = number_int_value(&text, negative);
                i = end;
            }
        }
    }
    Some(fields)
}

/// `Number.intValue()` of what `DecimalFormat` parsed: a long truncated
/// to an int, or a double (past the long range) saturated to one.
fn number_int_value(digits: &str, negative: bool) -> i64 {
    let magnitude: i128 = digits.parse().unwrap_or(i128::MAX);
    let v = if negative { -magnitude } else { magnitude };
    match i64::try_from(v) {
        Ok(l) => i64::from(l as i32),
        Err(_) if negative => i64::from(i32::MIN),
        Err(_) => i64::from(i32::MAX),
    }
}

/// The instant a lenient UTC `GregorianCalendar` computes from the fields
/// (months and days past their range roll over), in the proleptic
/// Gregorian calendar as walrelay renders dates.
fn lenient_millis(f: &[i64; 7]) -> i64 {
    let months = f[0] * 12 + (f[1] - 1);
    let year = months.div_euclid(12);
    let month = months.rem_euclid(12) + 1;
    let days = days_from_civil(year, month) + (f[2] - 1);
    days * MILLIS_PER_DAY + f[3] * 3_600_000 + f[4] * 60_000 + f[5] * 1000 + f[6]
}

/// Days from 1970-01-01 to the first of `month` of `year` (proleptic
/// Gregorian).
fn days_from_civil(year: i64, month: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Schema` type/name, and value, in the notation of the Java harness
    /// the expectations were taken from (Kafka 4.1.1's connect-api run on
    /// each literal with `-Duser.timezone=UTC`).
    fn parsed(text: &str) -> (Option<(Type, Option<String>)>, Value) {
        let lit = parse_string(text).expect("representable");
        (
            lit.schema
                .map(|s| (s.kind, s.name.as_deref().map(str::to_owned))),
            lit.value,
        )
    }

    fn plain(kind: Type, v: Value) -> (Option<(Type, Option<String>)>, Value) {
        (Some((kind, None)), v)
    }

    #[test]
    fn scalars_take_the_smallest_type() {
        assert_eq!(parsed("true"), plain(Type::Boolean, Value::Boolean(true)));
        assert_eq!(parsed("false"), plain(Type::Boolean, Value::Boolean(false)));
        assert_eq!(parsed("null"), (None, Value::Null));
        assert_eq!(parsed("1"), plain(Type::Int8, Value::Int8(1)));
        assert_eq!(parsed("128"), plain(Type::Int16, Value::Int16(128)));
        assert_eq!(parsed("40000"), plain(Type::Int32, Value::Int32(40000)));
        assert_eq!(
            parsed("3000000000"),
            plain(Type::Int64, Value::Int64(3_000_000_000))
        );
        assert_eq!(parsed("-129"), plain(Type::Int16, Value::Int16(-129)));
        assert_eq!(parsed("+5"), plain(Type::Int8, Value::Int8(5)));
        // Whole numbers written with a fraction or exponent are integers.
        assert_eq!(parsed("1.0"), plain(Type::Int8, Value::Int8(1)));
        assert_eq!(parsed("1."), plain(Type::Int8, Value::Int8(1)));
        assert_eq!(parsed("1e2"), plain(Type::Int8, Value::Int8(100)));
        assert_eq!(parsed("-0.0"), plain(Type::Int8, Value::Int8(0)));
        assert_eq!(parsed("1.5"), plain(Type::Float32, Value::Float32(1.5)));
        assert_eq!(parsed("0.1"), plain(Type::Float32, Value::Float32(0.1)));
        // parseAsExactDecimal refuses 0 < |x| < 1; the float underflows to 0.
        assert_eq!(parsed("1e-50"), plain(Type::Float32, Value::Float32(0.0)));
        // 1e19 is not above BIGGER_THAN_LONG but is past the long range;
        // its scale (-19) is not 0, so a float.
        assert_eq!(parsed("1e19"), plain(Type::Float32, Value::Float32(1e19)));
        assert_eq!(parsed("1e39"), plain(Type::Float64, Value::Float64(1e39)));
        assert_eq!(parsed("abc"), plain(Type::String, Value::string("abc")));
        assert_eq!(parsed(".5"), plain(Type::String, Value::string(".5")));
        assert_eq!(parsed("true}"), plain(Type::String, Value::string("true}")));
        assert_eq!(parsed(""), plain(Type::String, Value::string("")));
        // A top-level number ignores what follows it.
        assert_eq!(parsed("1,2"), plain(Type::Int8, Value::Int8(1)));
    }

    #[test]
    fn decimals_past_long_and_double() {
        let lit = parse_string("9223372036854775808").unwrap();
        let s = lit.schema.unwrap();
        assert_eq!(s.name.as_deref(), Some(DECIMAL_NAME));
        assert_eq!(s.version, Some(1));
        assert_eq!(s.decimal_scale(), Some(0));
        assert_eq!(
            lit.value,
            Value::Decimal(Decimal {
                negative: false,
                digits: "9223372036854775808".into(),
                scale: 0
            })
        );
        let lit = parse_string("1e400").unwrap();
        assert_eq!(lit.schema.unwrap().decimal_scale(), Some(-400));
        assert_eq!(
            lit.value,
            Value::Decimal(Decimal {
                negative: false,
                digits: "1".into(),
                scale: -400
            })
        );
    }

    #[test]
    fn temporals_by_length() {
        assert_eq!(
            parsed("2020-01-01"),
            (
                Some((Type::Int32, Some(DATE_NAME.to_owned()))),
                Value::Int32(18262)
            )
        );
        assert_eq!(
            parsed("12:34:56.789Z"),
            (
                Some((Type::Int32, Some(TIME_NAME.to_owned()))),
                Value::Int32(45_296_789)
            )
        );
        assert_eq!(
            parsed("2020-01-01T12:34:56.789Z"),
            (
                Some((Type::Int64, Some(TIMESTAMP_NAME.to_owned()))),
                Value::Int64(1_577_882_096_789)
            )
        );
        // Lenient SimpleDateFormat: short fields, trailing text ignored.
        assert_eq!(parsed("2020-1-1xx").1, Value::Int32(18262));
        // Hours roll over; Values keeps the Date as parsed.
        assert_eq!(parsed("25:00:00.000Z").1, Value::Int32(90_000_000));
        // A month past 12 rolls into the next year.
        assert_eq!(parsed("2019-13-01").1, Value::Int32(18262));
        let date_schema = parse_string("2020-01-01").unwrap().schema.unwrap();
        assert_eq!(date_schema.version, Some(1));
        assert!(!date_schema.optional);
    }

    #[test]
    fn arrays_merge_element_schemas() {
        let lit = parse_string("[1, 1.5]").unwrap();
        let s = lit.schema.unwrap();
        assert_eq!(s.kind, Type::Array);
        assert_eq!(s.value_schema.as_ref().unwrap().kind, Type::Float32);
        assert_eq!(
            lit.value,
            Value::Array(vec![Value::Float32(1.0), Value::Float32(1.5)])
        );
        // A null among values: convertTo refuses null for the required
        // element schema, so the whole literal is a string.
        assert_eq!(
            parsed("[1,null]"),
            plain(Type::String, Value::string("[1,null]"))
        );
        let lit = parse_string("[null,null]").unwrap();
        assert!(lit.schema.unwrap().value_schema.is_none());
        assert_eq!(lit.value, Value::Array(vec![Value::Null, Value::Null]));
        // No common schema: arrayOfNull, elements as parsed.
        let lit = parse_string("[true, 1]").unwrap();
        assert!(lit.schema.unwrap().value_schema.is_none());
        assert_eq!(
            lit.value,
            Value::Array(vec![Value::Boolean(true), Value::Int8(1)])
        );
        assert_eq!(parsed("[1 2]"), plain(Type::String, Value::string("[1 2]")));
        // Blank tokens before a delimiter are dropped; backslashes stay.
        assert_eq!(
            parse_string("[ \" , \" ]").unwrap().value,
            Value::Array(vec![Value::string(",")])
        );
        assert_eq!(
            parse_string("[\"a\\\"b\"]").unwrap().value,
            Value::Array(vec![Value::string("a\\\"b")])
        );
        // A Date merged with a number: the number is days.
        let lit = parse_string("[2020-01-01, 5]").unwrap();
        assert_eq!(
            lit.schema
                .unwrap()
                .value_schema
                .as_ref()
                .unwrap()
                .name
                .as_deref(),
            Some(DATE_NAME)
        );
        assert_eq!(
            lit.value,
            Value::Array(vec![Value::Int32(18262), Value::Int32(5)])
        );
        // Date then Timestamp: INT32 widens to the INT64 Timestamp.
        let lit = parse_string("[2020-01-01, 2020-01-02T00:00:00.000Z]").unwrap();
        assert_eq!(
            lit.value,
            Value::Array(vec![
                Value::Int64(1_577_836_800_000),
                Value::Int64(1_577_923_200_000)
            ])
        );
        // Same type, later schema: the inner lists are not converted.
        let lit = parse_string("[[1],[1.5]]").unwrap();
        assert_eq!(
            lit.value,
            Value::Array(vec![
                Value::Array(vec![Value::Int8(1)]),
                Value::Array(vec![Value::Float32(1.5)])
            ])
        );
    }

    #[test]
    fn maps_need_quoted_keys() {
        let lit = parse_string("{\"a\":1,\"b\":2}").unwrap();
        let s = lit.schema.unwrap();
        assert_eq!(s.key_schema.as_ref().unwrap().kind, Type::String);
        assert_eq!(s.value_schema.as_ref().unwrap().kind, Type::Int8);
        assert_eq!(
            lit.value,
            Value::Map(vec![
                (Value::string("a"), Value::Int8(1)),
                (Value::string("b"), Value::Int8(2))
            ])
        );
        let lit = parse_string("{\"a\":null}").unwrap();
        let s = lit.schema.unwrap();
        assert!(s.key_schema.is_some() && s.value_schema.is_none());
        assert_eq!(
            lit.value,
            Value::Map(vec![(Value::string("a"), Value::Null)])
        );
        assert_eq!(parsed("{a:1}"), plain(Type::String, Value::string("{a:1}")));
        // Keys widened to INT16.
        let lit = parse_string("{1:\"x\", 1000:\"y\"}").unwrap();
        assert_eq!(
            lit.value,
            Value::Map(vec![
                (Value::Int16(1), Value::string("x")),
                (Value::Int16(1000), Value::string("y"))
            ])
        );
        // Keys equal once widened to FLOAT32 merge, as LinkedHashMap.put
        // does: the first key's place, the last value.
        let lit = parse_string("{16777217:\"a\", 16777216.5:\"b\"}").unwrap();
        assert_eq!(
            lit.value,
            Value::Map(vec![(Value::Float32(16_777_216.0), Value::string("b"))])
        );
        let lit = parse_string("{\"k\":[1,2], \"j\":[3]}").unwrap();
        assert_eq!(
            lit.value,
            Value::Map(vec![
                (
                    Value::string("k"),
                    Value::Array(vec![Value::Int8(1), Value::Int8(2)])
                ),
                (Value::string("j"), Value::Array(vec![Value::Int8(3)]))
            ])
        );
    }

    #[test]
    fn unrepresentable_dates_and_deep_nesting() {
        // A date with no common schema has nothing to say what it counts.
        assert!(parse_string("[2020-01-01, true]").is_err());
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(parse_string(&deep).unwrap().value, Value::string(deep));
    }

    /// `Values.parseString` as Kafka 4.1.1's connect-api printed it for each
    /// literal (run with `-Duser.timezone=UTC`; the Java harness renders the
    /// schema as `TYPE<name>{parameters}[items]{keys,values}` and each
    /// value with its class; dates as `Date(ms)`).
    const JAVA_OUTPUT: &str = r##"true	=> BOOLEAN Boolean(true)
false	=> BOOLEAN Boolean(false)
null	=> NULL
TRUE	=> STRING String(TRUE)
1	=> INT8 Byte(1)
128	=> INT16 Short(128)
-129	=> INT16 Short(-129)
40000	=> INT32 Integer(40000)
3000000000	=> INT64 Long(3000000000)
-9223372036854775808	=> INT64 Long(-9223372036854775808)
9223372036854775807	=> INT64 Long(9223372036854775807)
9223372036854775808	=> BYTES<org.apache.kafka.connect.data.Decimal>{scale=0} BD(9223372036854775808,0)
99999999999999999999	=> BYTES<org.apache.kafka.connect.data.Decimal>{scale=0} BD(99999999999999999999,0)
1.5	=> FLOAT32 Float(1.5)
1.0	=> INT8 Byte(1)
1.	=> INT8 Byte(1)
1e2	=> INT8 Byte(100)
1E+2	=> INT8 Byte(100)
1e19	=> FLOAT32 Float(1.0E19)
1e39	=> FLOAT64 Double(1.0E39)
1e400	=> BYTES<org.apache.kafka.connect.data.Decimal>{scale=-400} BD(1,-400)
1.5e400	=> BYTES<org.apache.kafka.connect.data.Decimal>{scale=-399} BD(15,-399)
-0.0	=> INT8 Byte(0)
0.1	=> FLOAT32 Float(0.1)
0.001	=> FLOAT32 Float(0.001)
1e-3	=> FLOAT32 Float(0.001)
1e-50	=> FLOAT32 Float(0.0)
+5	=> INT8 Byte(5)
.5	=> STRING String(.5)
-.5	=> FLOAT32 Float(-0.5)
- 5	=> STRING String(- 5)
abc	=> STRING String(abc)
1,2	=> INT8 Byte(1)
1 2	=> STRING String(1 2)
1e	=> STRING String(1e)
1e+	=> STRING String(1e+)
0x10	=> STRING String(0x10)
[1,2]	=> ARRAY[INT8] [Byte(1),Byte(2),]
[1, 1.5]	=> ARRAY[FLOAT32] [Float(1.0),Float(1.5),]
[1,null]	=> STRING String([1,null])
[null,null]	=> ARRAY[null] [null,null,]
[null]	=> ARRAY[null] [null,]
[]	=> ARRAY[null] []
{}	=> MAP{null,null} {}
["a","b"]	=> ARRAY[STRING] [String(a),String(b),]
[ " , " ]	=> ARRAY[STRING] [String(,),]
["a\"b"]	=> ARRAY[STRING] [String(a\"b),]
[true, 1]	=> ARRAY[null] [Boolean(true),Byte(1),]
[ true , false ]	=> ARRAY[BOOLEAN] [Boolean(true),Boolean(false),]
[[1],[1.5]]	=> ARRAY[ARRAY[FLOAT32]] [[Byte(1),],[Float(1.5),],]
[[1,2],[3]]	=> ARRAY[ARRAY[INT8]] [[Byte(1),Byte(2),],[Byte(3),],]
[1 2]	=> STRING String([1 2])
[1,]	=> ARRAY[INT8] [Byte(1),]
[,1]	=> STRING String([,1])
[1]x	=> ARRAY[INT8] [Byte(1),]
[-5, +6]	=> ARRAY[INT8] [Byte(-5),Byte(6),]
[9223372036854775807, 1]	=> ARRAY[INT64] [Long(9223372036854775807),Long(1),]
[1, 1e39]	=> ARRAY[FLOAT64] [Double(1.0),Double(1.0E39),]
[1, 3000000000]	=> ARRAY[INT64] [Long(1),Long(3000000000),]
[0.1, 1e39]	=> ARRAY[FLOAT64] [Double(0.10000000149011612),Double(1.0E39),]
[1, 99999999999999999999]	=> ARRAY[null] [Byte(1),BD(99999999999999999999,0),]
[1e400, 1]	=> ARRAY[null] [BD(1,-400),Byte(1),]
[1.5, 2020-01-01]	=> STRING String([1.5, 2020-01-01])
[2020-01-01, 5]	=> ARRAY[INT32<org.apache.kafka.connect.data.Date>] [Date(1577836800000),Date(432000000),]
[5, 2020-01-01]	=> ARRAY[INT32<org.apache.kafka.connect.data.Date>] [Date(432000000),Date(1577836800000),]
[2020-01-01, 2020-01-02T00:00:00.000Z]	=> ARRAY[INT64<org.apache.kafka.connect.data.Timestamp>] [Date(1577836800000),Date(1577923200000),]
[2020-01-02T00:00:00.000Z, 2020-01-01]	=> ARRAY[INT64<org.apache.kafka.connect.data.Timestamp>] [Date(1577923200000),Date(1577836800000),]
[12:00:00.000Z, 5]	=> ARRAY[INT32<org.apache.kafka.connect.data.Time>] [Date(43200000),Date(5),]
[12:00:00.000Z, 100000000]	=> STRING String([12:00:00.000Z, 100000000])
[ "2020-01-01" ]	=> ARRAY[INT32<org.apache.kafka.connect.data.Date>] [Date(1577836800000),]
["12:34:56.789Z", 1]	=> ARRAY[INT32<org.apache.kafka.connect.data.Time>] [Date(45296789),Date(1),]
[1, 1.5, 1e39]	=> ARRAY[FLOAT64] [Double(1.0),Double(1.5),Double(1.0E39),]
["a", 1]	=> ARRAY[null] [String(a),Byte(1),]
[a]	=> STRING String([a])
[[1], 1]	=> ARRAY[null] [[Byte(1),],Byte(1),]
{"a":1,"b":2}	=> MAP{STRING,INT8} {String(a)=Byte(1),String(b)=Byte(2),}
{"a":null}	=> MAP{STRING,null} {String(a)=null,}
{"a":1,"b":null}	=> STRING String({"a":1,"b":null})
{a:1}	=> STRING String({a:1})
{"a":1,"a":2}	=> MAP{STRING,INT8} {String(a)=Byte(2),}
{"a":1 "b":2}	=> MAP{STRING,INT8} {String(a)=Byte(1),String(b)=Byte(2),}
{"a":true,"b":1}	=> MAP{STRING,null} {String(a)=Boolean(true),String(b)=Byte(1),}
{1:"x", 1000:"y"}	=> MAP{INT16,STRING} {Short(1)=String(x),Short(1000)=String(y),}
{16777217:"a", 16777216.5:"b"}	=> MAP{FLOAT32,STRING} {Float(1.6777216E7)=String(b),}
{"k":[1,2], "j":[3]}	=> MAP{STRING,ARRAY[INT8]} {String(k)=[Byte(1),Byte(2),],String(j)=[Byte(3),],}
{"x":{"y":1}}	=> MAP{STRING,MAP{STRING,INT8}} {String(x)={String(y)=Byte(1),},}
{null:1}	=> STRING String({null:1})
{"a"}	=> STRING String({"a"})
{"a":1	=> STRING String({"a":1)
[1,2	=> STRING String([1,2)
{"a":[1,null]}	=> STRING String({"a":[1,null]})
"abc"	=> STRING String("abc")
a,b	=> STRING String(a,b)
a:b	=> STRING String(a:b)
x[1]	=> STRING String(x[1])
2020-01-01	=> INT32<org.apache.kafka.connect.data.Date> Date(1577836800000)
2020-1-1xx	=> INT32<org.apache.kafka.connect.data.Date> Date(1577836800000)
2019-13-01	=> INT32<org.apache.kafka.connect.data.Date> Date(1577836800000)
2020-02-30	=> INT32<org.apache.kafka.connect.data.Date> Date(1583020800000)
12:34:56.789Z	=> INT32<org.apache.kafka.connect.data.Time> Date(45296789)
25:00:00.000Z	=> INT32<org.apache.kafka.connect.data.Time> Date(90000000)
12:34:56.5Z  	=> INT32<org.apache.kafka.connect.data.Time> Date(45296005)
2020-01-01T12:34:56.789Z	=> INT64<org.apache.kafka.connect.data.Timestamp> Date(1577882096789)
2020-01-01T12:34:56.789X	=> STRING String(2020-01-01T12:34:56.789X)
2020-01-01,x	=> INT32<org.apache.kafka.connect.data.Date> Date(1577836800000)
12:34:56.789Z,foo	=> INT32<org.apache.kafka.connect.data.Time> Date(45296789)
1234567890	=> INT32 Integer(1234567890)
12\:34\:56.789Z	=> INT32<org.apache.kafka.connect.data.Time> Date(45296789)
1e0000000000001	=> INT8 Byte(10)
1e12345678901	=> STRING String(1e12345678901)
1e-2147483648	=> STRING String(1e-2147483648)
1e2147483647	=> BYTES<org.apache.kafka.connect.data.Decimal>{scale=-2147483647} BD(1,-2147483647)
1e-2147483647	=> FLOAT32 Float(0.0)
[1,2,3,1000,70000,1.5]	=> ARRAY[FLOAT32] [Float(1.0),Float(2.0),Float(3.0),Float(1000.0),Float(70000.0),Float(1.5),]
{"a":{"b":[true,false]},"c":{}}	=> MAP{STRING,MAP{null,null}} {String(a)={String(b)=[Boolean(true),Boolean(false),],},String(c)={},}
2020-02-29T23:59:59.999Z	=> INT64<org.apache.kafka.connect.data.Timestamp> Date(1583020799999)
00:00:00.000Z	=> INT32<org.apache.kafka.connect.data.Time> Date(0)
[2020-01-01,]	=> ARRAY[INT32<org.apache.kafka.connect.data.Date>] [Date(1577836800000),]"##;

    /// The harness's rendering of a schema.
    fn render_schema(s: Option<&Schema>) -> String {
        let Some(s) = s else {
            return "null".to_owned();
        };
        let mut out = s.kind.java_name().to_owned();
        if s.optional {
            out.push('?');
        }
        if let Some(n) = &s.name {
            out.push_str(&format!("<{n}>"));
        }
        if !s.parameters.is_empty() {
            let p: Vec<String> = s
                .parameters
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            out.push_str(&format!("{{{}}}", p.join(", ")));
        }
        match s.kind {
            Type::Array => out.push_str(&format!("[{}]", render_schema(s.value_schema.as_deref()))),
            Type::Map => out.push_str(&format!(
                "{{{},{}}}",
                render_schema(s.key_schema.as_deref()),
                render_schema(s.value_schema.as_deref())
            )),
            _ => {}
        }
        out
    }

    /// The harness's rendering of a value under its schema.
    fn render_value(s: Option<&Schema>, v: &Value) -> String {
        use crate::connect::java::{double_to_string, float_to_string};
        let name = s.and_then(|s| s.name.as_deref());
        match (name, v) {
            (Some(DATE_NAME), Value::Int32(d)) => {
                format!("Date({})", i64::from(*d) * MILLIS_PER_DAY)
            }
            (Some(TIME_NAME), Value::Int32(ms)) => format!("Date({ms})"),
            (Some(TIMESTAMP_NAME), Value::Int64(ms)) => format!("Date({ms})"),
            (_, Value::Null) => "null".to_owned(),
            (_, Value::Boolean(b)) => format!("Boolean({b})"),
            (_, Value::Int8(x)) => format!("Byte({x})"),
            (_, Value::Int16(x)) => format!("Short({x})"),
            (_, Value::Int32(x)) => format!("Integer({x})"),
            (_, Value::Int64(x)) => format!("Long({x})"),
            (_, Value::Float32(x)) => format!("Float({})", float_to_string(*x)),
            (_, Value::Float64(x)) => format!("Double({})", double_to_string(*x)),
            (_, Value::String(t)) => format!("String({})", t.as_str()),
            (_, Value::Decimal(d)) => {
                format!(
                    "BD({}{},{})",
                    if d.negative { "-" } else { "" },
                    d.digits,
                    d.scale
                )
            }
            (_, Value::Array(items)) => {
                let is = s.and_then(|s| s.value_schema.as_deref());
                let parts: String = items.iter().map(|i| render_value(is, i) + ",").collect();
                format!("[{parts}]")
            }
            (_, Value::Map(entries)) => {
                let ks = s.and_then(|s| s.key_schema.as_deref());
                let vs = s.and_then(|s| s.value_schema.as_deref());
                let parts: String = entries
                    .iter()
                    .map(|(k, v)| format!("{}={},", render_value(ks, k), render_value(vs, v)))
                    .collect();
                format!("{{{parts}}}")
            }
            (_, other) => format!("{other:?}"),
        }
    }

    #[test]
    fn every_literal_parses_as_kafka_parsed_it() {
        let mut checked = 0;
        for line in JAVA_OUTPUT.lines() {
            let Some((input, expected)) = line.split_once("\t=> ") else {
                continue;
            };
            let got = match parse_string(input) {
                Ok(Literal { schema: None, .. }) => "NULL".to_owned(),
                Ok(Literal {
                    schema: Some(s),
                    value,
                }) => format!(
                    "{} {}",
                    render_schema(Some(&s)),
                    render_value(Some(&s), &value)
                ),
                Err(e) => format!("ERR {e}"),
            };
            assert_eq!(got, expected, "literal {input:?}");
            checked += 1;
        }
        assert_eq!(checked, JAVA_OUTPUT.lines().count());
    }
}
