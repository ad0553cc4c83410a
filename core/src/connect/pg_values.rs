//! numeric, money, bytea and hstore text as Debezium's PostgreSQL
//! connector converts it under `decimal.handling.mode`,
//! `money.fraction.digits`, `binary.handling.mode` and
//! `hstore.handling.mode`.
//!
//! Owns pgjdbc's `PostgresMoney`/`HStoreConverter` parsing, Java's
//! `HashMap` iteration order for the hstore maps Debezium builds, and the
//! renderings of each mode. It never talks to the database.

use super::java::{base64, java_hash_map_order};
use super::pg_modes::{BinaryMode, DecimalMode};
use super::{Decimal, Text, Value};

/// numeric text in a non-precise mode: `double` gives
/// `BigDecimal.doubleValue` (NaN and infinities as such), `string`
/// `toPlainString` (special values as `NAN`, `POSITIVE_INFINITY`,
/// `NEGATIVE_INFINITY`, `SpecialValueDecimal`'s enum names).
pub(crate) fn numeric_loose(mode: DecimalMode, s: &str) -> Option<Value> {
    let special = match s {
        "NaN" => Some((f64::NAN, "NAN")),
        "Infinity" => Some((f64::INFINITY, "POSITIVE_INFINITY")),
        "-Infinity" => Some((f64::NEG_INFINITY, "NEGATIVE_INFINITY")),
        _ => None,
    };
    if let Some((d, name)) = special {
        return Some(match mode {
            DecimalMode::String => Value::string(name),
            _ => Value::Float64(d),
        });
    }
    let d = super::pg::parse_numeric(s)?;
    Some(match mode {
        DecimalMode::String => Value::String(Text::from(plain_string(&d))),
        _ => Value::Float64(to_double(&d)?),
    })
}

/// `BigDecimal.toPlainString` of a non-negative scale.
fn plain_string(d: &Decimal) -> String {
    let digits: &str = &d.digits;
    let scale = usize::try_from(d.scale.max(0)).unwrap_or(0);
    let mut out = String::with_capacity(digits.len() + 3);
    if d.negative {
        out.push('-');
    }
    if scale == 0 {
        out.push_str(digits);
    } else if digits.len() > scale {
        let (i, f) = digits.split_at(digits.len() - scale);
        out.push_str(i);
        out.push('.');
        out.push_str(f);
    } else {
        out.push_str("0.");
        out.push_str(&"0".repeat(scale - digits.len()));
        out.push_str(digits);
    }
    out
}

/// `BigDecimal.doubleValue` (correctly rounded, as Rust's parser is).
fn to_double(d: &Decimal) -> Option<f64> {
    let text = format!(
        "{}{}e-{}",
        if d.negative { "-" } else { "" },
        d.digits,
        d.scale
    );
    text.parse().ok()
}

/// `PostgresMoney.parse`: `$1,234.56`, `-$1,234.56` or `($1,234.56)` →
/// the number (currency symbol and thousands separators dropped).
pub(crate) fn parse_money(s: &str) -> Option<Decimal> {
    let negative = s.starts_with('(') || s.starts_with('-');
    let mut v = s.strip_prefix('-').unwrap_or(s);
    v = v.strip_prefix('(').unwrap_or(v);
    v = v.strip_suffix(')').unwrap_or(v);
    if let Some(c) = v.chars().next() {
        if !c.is_ascii_digit() && c != '.' {
            v = &v[c.len_utf8()..];
        }
    }
    let body: String = v.chars().filter(|c| *c != ',').collect();
    let mut d = super::pg::parse_numeric(&body)?;
    d.negative = negative && &*d.digits != "0";
    Some(d)
}

/// money text in `mode`: precise is a Decimal at `digits` scale
/// (`setScale(digits, HALF_UP)`), double `doubleValue`, string
/// `toPlainString` at the text's own scale.
pub(crate) fn money_value(mode: DecimalMode, digits: u8, s: &str) -> Option<Value> {
    let d = parse_money(s)?;
    Some(match mode {
        DecimalMode::Precise => Value::Decimal(set_scale_half_up(d, i32::from(digits))),
        DecimalMode::Double => Value::Float64(to_double(&d)?),
        DecimalMode::String => Value::String(Text::from(plain_string(&d))),
    })
}

/// `BigDecimal.setScale(scale, RoundingMode.HALF_UP)`.
pub(crate) fn set_scale_half_up(d: Decimal, scale: i32) -> Decimal {
    if scale >= d.scale {
        let extra = (scale - d.scale) as usize;
        let digits = if &*d.digits == "0" {
            d.digits
        } else {
            let mut s = d.digits.into_string();
            s.push_str(&"0".repeat(extra));
            s.into()
        };
        return Decimal {
            negative: d.negative,
            digits,
            scale,
        };
    }
    let cut = (d.scale - scale) as usize;
    let digits: &str = &d.digits;
    let (keep, dropped) = if digits.len() > cut {
        digits.split_at(digits.len() - cut)
    } else {
        ("", digits)
    };
    // The first dropped digit decides (the dropped part is left-padded
    // with zeros when shorter than `cut`).
    let first_dropped = if dropped.len() == cut {
        dropped.as_bytes().first().copied().unwrap_or(b'0')
    } else {
        b'0'
    };
    let mut kept: Vec<u8> = if keep.is_empty() {
        vec![b'0']
    } else {
        keep.as_bytes().to_vec()
    };
    if first_dropped >= b'5' {
        let mut i = kept.len();
        loop {
            if i == 0 {
                kept.insert(0, b'1');
                break;
            }
            i -= 1;
            if kept[i] == b'9' {
                kept[i] = b'0';
            } else {
                kept[i] += 1;
                break;
            }
        }
    }
    let s = String::from_utf8(kept).unwrap_or_default();
    let trimmed = s.trim_start_matches('0');
    let digits = if trimmed.is_empty() { "0" } else { trimmed };
    Decimal {
        negative: d.negative && digits != "0",
        digits: digits.into(),
        scale,
    }
}

/// bytea bytes in a STRING `binary.handling.mode`.
pub(crate) fn binary_text(mode: BinaryMode, bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    match mode {
        BinaryMode::Hex => super::java::hex(bytes, &mut out),
        BinaryMode::Base64 | BinaryMode::Bytes => base64(bytes, &mut out),
        BinaryMode::Base64UrlSafe => {
            base64(bytes, &mut out);
            out = out.replace('+', "-").replace('/', "_");
        }
    }
    out
}

/// pgjdbc's `HStoreConverter.fromString` of hstore's text
/// (`"k"=>"v", "n"=>NULL`), in the iteration order of the `HashMap` it
/// builds.
pub(crate) fn parse_hstore(s: &str) -> Option<Vec<(String, Option<String>)>> {
    let chars: Vec<char> = s.chars().collect();
    let mut pos = 0;
    let mut entries: Vec<(String, Option<String>)> = Vec::new();
    while pos < chars.len() {
        let start = pos + chars[pos..].iter().position(|c| *c == '"')?;
        let (key, end) = until_quote(&chars, start)?;
        pos = end + 3;
        let value = if *chars.get(pos)? == 'N' {
            pos += 4;
            None
        } else {
            let (v, end) = until_quote(&chars, pos)?;
            pos = end;
            Some(v)
        };
        pos += 1;
        match entries.iter_mut().find(|(k, _)| *k == key) {
            Some(e) => e.1 = value,
            None => entries.push((key, value)),
        }
    }
    Some(java_hash_map_order(entries))
}

/// The text after the quote at `pos` up to the closing quote, `\`
/// escaping the next character; and the closing quote's position.
fn until_quote(chars: &[char], pos: usize) -> Option<(String, usize)> {
    let mut out = String::new();
    let mut i = pos + 1;
    while i < chars.len() {
        let mut c = chars[i];
        if c == '"' {
            return Some((out, i));
        }
        if c == '\\' {
            i += 1;
            c = *chars.get(i)?;
        }
        out.push(c);
        i += 1;
    }
    Some((out, i))
}

/// The hstore as Debezium's json mode writes it (Jackson's
/// `writeValueAsString`, compact: characters outside the BMP unescaped).
pub(crate) fn hstore_json(entries: &[(String, Option<String>)]) -> String {
    let mut out = String::from("{");
    for (i, (k, v)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        super::json::write_string_chars(&mut out, k);
        out.push(':');
        match v {
            Some(v) => super::json::write_string_chars(&mut out, v),
            None => out.push_str("null"),
        }
    }
    out.push('}');
    out
}

/// The hstore as Debezium's map mode gives it.
pub(crate) fn hstore_map(entries: Vec<(String, Option<String>)>) -> Value {
    Value::Map(
        entries
            .into_iter()
            .map(|(k, v)| {
                (
                    Value::String(Text::from(k)),
                    v.map_or(Value::Null, |v| Value::String(Text::from(v))),
                )
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(negative: bool, digits: &str, scale: i32) -> Decimal {
        Decimal {
            negative,
            digits: digits.into(),
            scale,
        }
    }

    #[test]
    fn numeric_in_double_and_string_modes() {
        assert_eq!(
            numeric_loose(DecimalMode::Double, "1.50"),
            Some(Value::Float64(1.5))
        );
        assert_eq!(
            numeric_loose(DecimalMode::String, "1.50"),
            Some(Value::string("1.50"))
        );
        assert_eq!(
            numeric_loose(DecimalMode::String, "NaN"),
            Some(Value::string("NAN"))
        );
        assert_eq!(
            numeric_loose(DecimalMode::String, "-Infinity"),
            Some(Value::string("NEGATIVE_INFINITY"))
        );
        assert!(matches!(
            numeric_loose(DecimalMode::Double, "NaN"),
            Some(Value::Float64(d)) if d.is_nan()
        ));
        assert_eq!(
            numeric_loose(DecimalMode::String, "-0.000001"),
            Some(Value::string("-0.000001"))
        );
        assert_eq!(
            numeric_loose(DecimalMode::Double, "0.00000000000000000001"),
            Some(Value::Float64(1e-20))
        );
    }

    #[test]
    fn money_as_postgres_money_parses_it() {
        assert_eq!(parse_money("$12.35"), Some(dec(false, "1235", 2)));
        assert_eq!(
            parse_money("-$1,234,567.89"),
            Some(dec(true, "123456789", 2))
        );
        assert_eq!(parse_money("($0.50)"), Some(dec(true, "50", 2)));
        assert_eq!(
            money_value(DecimalMode::Precise, 3, "$12.35"),
            Some(Value::Decimal(dec(false, "12350", 3)))
        );
        assert_eq!(
            money_value(DecimalMode::Precise, 0, "$12.50"),
            Some(Value::Decimal(dec(false, "13", 0)))
        );
        assert_eq!(
            money_value(DecimalMode::Precise, 0, "-$0.50"),
            Some(Value::Decimal(dec(true, "1", 0)))
        );
        assert_eq!(
            money_value(DecimalMode::Precise, 1, "$9.99"),
            Some(Value::Decimal(dec(false, "100", 1)))
        );
        assert_eq!(
            money_value(DecimalMode::String, 2, "-$1,234.50"),
            Some(Value::string("-1234.50"))
        );
    }

    #[test]
    fn binary_strings() {
        assert_eq!(binary_text(BinaryMode::Base64, &[0xfb, 0xff]), "+/8=");
        assert_eq!(
            binary_text(BinaryMode::Base64UrlSafe, &[0xfb, 0xff]),
            "-_8="
        );
        assert_eq!(binary_text(BinaryMode::Hex, &[0xde, 0xad]), "dead");
        assert_eq!(binary_text(BinaryMode::Hex, &[]), "");
    }

    #[test]
    fn hstore_in_hash_map_order() {
        let e = parse_hstore(r#""b"=>"2", "a"=>NULL"#).unwrap();
        // "a" hashes to 97, "b" to 98: buckets 1 and 2.
        assert_eq!(
            e,
            vec![
                ("a".to_owned(), None),
                ("b".to_owned(), Some("2".to_owned()))
            ]
        );
        assert_eq!(hstore_json(&e), r#"{"a":null,"b":"2"}"#);
        let e = parse_hstore(r#""k\"q"=>"v,w""#).unwrap();
        assert_eq!(e, vec![("k\"q".to_owned(), Some("v,w".to_owned()))]);
        assert_eq!(parse_hstore("").unwrap(), vec![]);
    }
}
