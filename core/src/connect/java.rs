//! Java's text renderings that Kafka Connect output depends on.
//!
//! Owns `Double.toString`/`Float.toString` (JDK 19+ shortest-digit
//! algorithm, which Jackson's `NumberOutput` and `StringBuilder.append`
//! share), `BigDecimal.toString`, `BigInteger.toByteArray` for decimal
//! digits, `java.util.Base64` and `UUID.randomUUID().toString()`. Nothing
//! here allocates more than its output, and it must never panic on input or
//! round differently from the JDK.

use super::{Decimal, Value};

/// `Double.toString(v)`.
pub(crate) fn double_to_string(v: f64) -> String {
    if v.is_nan() {
        return "NaN".to_owned();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    render_shortest(&format!("{v:e}"), v.abs() >= 1e-3 && v.abs() < 1e7)
}

/// `Float.toString(v)`.
pub(crate) fn float_to_string(v: f32) -> String {
    if v.is_nan() {
        return "NaN".to_owned();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    render_shortest(&format!("{v:e}"), v.abs() >= 1e-3 && v.abs() < 1e7)
}

/// Re-renders Rust's shortest `{:e}` form (`-1.2345e6`) the way Java does:
/// plain with at least one fraction digit inside [1e-3, 1e7), otherwise
/// `d.dddE[-]n` with at least one fraction digit.
fn render_shortest(sci: &str, plain: bool) -> String {
    let (negative, rest) = match sci.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, sci),
    };
    let (mantissa, exp) = rest.split_once('e').unwrap_or((rest, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let mut out = String::with_capacity(digits.len() + 8);
    if negative {
        out.push('-');
    }
    if plain {
        if exp >= 0 {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.push_str(&digits);
                out.push_str(&"0".repeat(int_len - digits.len()));
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        } else {
            out.push_str("0.");
            out.push_str(&"0".repeat((-exp - 1) as usize));
            out.push_str(&digits);
        }
    } else {
        out.push_str(&digits[..1]);
        out.push('.');
        if digits.len() > 1 {
            out.push_str(&digits[1..]);
        } else {
            out.push('0');
        }
        out.push('E');
        out.push_str(&exp.to_string());
    }
    out
}

/// `BigDecimal.toString()`: plain unless the scale is negative or the
/// adjusted exponent is below -6.
pub(crate) fn big_decimal_to_string(d: &Decimal) -> String {
    let coeff = &*d.digits;
    let mut out = String::with_capacity(coeff.len() + 8);
    if d.negative {
        out.push('-');
    }
    let scale = i64::from(d.scale);
    let adjusted = -scale + (coeff.len() as i64 - 1);
    if scale == 0 {
        out.push_str(coeff);
    } else if scale > 0 && adjusted >= -6 {
        let scale = scale as usize;
        if coeff.len() > scale {
            out.push_str(&coeff[..coeff.len() - scale]);
            out.push('.');
            out.push_str(&coeff[coeff.len() - scale..]);
        } else {
            out.push_str("0.");
            out.push_str(&"0".repeat(scale - coeff.len()));
            out.push_str(coeff);
        }
    } else {
        out.push_str(&coeff[..1]);
        if coeff.len() > 1 {
            out.push('.');
            out.push_str(&coeff[1..]);
        }
        out.push('E');
        if adjusted >= 0 {
            out.push('+');
        }
        out.push_str(&adjusted.to_string());
    }
    out
}

/// `new BigDecimal(text)`: an optional sign, digits with at most one
/// point (at least one digit), an optional exponent; the exponent and the
/// resulting scale must fit an `int` (JDK 17; JDK 25 checks only the
/// scale, so it also takes `1e2147483648`). Only ASCII digits are read
/// (Java also takes other Unicode decimal digits). `None` where Java
/// throws `NumberFormatException`.
pub(crate) fn parse_big_decimal(text: &str) -> Option<Decimal> {
    let (negative, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int_part.len() + frac_part.len() == 0 || !all_digits(int_part) || !all_digits(frac_part) {
        return None;
    }
    let exp = match exponent {
        Some(e) => big_decimal_exponent(e)?,
        None => 0,
    };
    let scale = i32::try_from(i64::try_from(frac_part.len()).ok()? - exp).ok()?;
    let joined = format!("{int_part}{frac_part}");
    let digits = joined.trim_start_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    Some(Decimal {
        negative: negative && digits != "0",
        digits: digits.into(),
        scale,
    })
}

/// `BigDecimal.parseExp` and the constructor's overflow check: an
/// optional sign and at least one ASCII digit, at most ten of them
/// significant, within `int` range.
fn big_decimal_exponent(e: &str) -> Option<i64> {
    let body = e.strip_prefix(['+', '-']).unwrap_or(e);
    let significant = body.trim_start_matches('0');
    if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit()) || significant.len() > 10 {
        return None;
    }
    let magnitude: i64 = if significant.is_empty() {
        0
    } else {
        significant.parse().ok()?
    };
    let exp = if e.starts_with('-') {
        -magnitude
    } else {
        magnitude
    };
    i32::try_from(exp).ok().map(i64::from)
}

/// `BigInteger.toByteArray()` of the unscaled value: minimal big-endian
/// two's complement.
pub(crate) fn unscaled_bytes(d: &Decimal) -> Vec<u8> {
    // Magnitude in base 256 by repeated division of the decimal digits.
    let mut digits: Vec<u8> = d.digits.bytes().map(|b| b.wrapping_sub(b'0')).collect();
    let mut mag = Vec::new();
    while digits.iter().any(|&x| x != 0) {
        let mut rem: u32 = 0;
        let mut next = Vec::with_capacity(digits.len());
        for &x in &digits {
            let cur = rem * 10 + u32::from(x);
            let q = cur / 256;
            rem = cur % 256;
            if !next.is_empty() || q != 0 {
                next.push(q as u8);
            }
        }
        mag.push(rem as u8);
        digits = next;
    }
    mag.reverse();
    if mag.is_empty() {
        return vec![0];
    }
    if !d.negative {
        if mag[0] & 0x80 != 0 {
            mag.insert(0, 0);
        }
        return mag;
    }
    // Two's complement of the magnitude.
    let mut carry = true;
    for b in mag.iter_mut().rev() {
        *b = !*b;
        if carry {
            let (v, overflow) = b.overflowing_add(1);
            *b = v;
            carry = overflow;
        }
    }
    if mag[0] & 0x80 == 0 {
        mag.insert(0, 0xFF);
    }
    mag
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// `Base64.getEncoder().encodeToString(bytes)` (standard alphabet, padded),
/// which is also what Jackson writes for binary nodes.
pub(crate) fn base64(bytes: &[u8], out: &mut String) {
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(BASE64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8], out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(HEX[usize::from(b >> 4)] as char);
        out.push(HEX[usize::from(b & 15)] as char);
    }
}

/// `UUID.randomUUID().toString()`: a version 4 UUID in lower-case hex.
#[cfg(test)]
pub(crate) fn random_uuid() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    uuid_text(&b)
}

/// A time-ordered version 7 UUID (RFC 9562) for `unix_ms`, as Debezium
/// draws `__debezium.context.runId` (observed: `01a22b5c-b89a-7857-...`).
pub(crate) fn uuid_v7(unix_ms: u64) -> String {
    let mut b: [u8; 16] = rand::random();
    b[..6].copy_from_slice(&unix_ms.to_be_bytes()[2..]);
    b[6] = (b[6] & 0x0f) | 0x70;
    b[8] = (b[8] & 0x3f) | 0x80;
    uuid_text(&b)
}

fn uuid_text(b: &[u8; 16]) -> String {
    let mut out = String::with_capacity(36);
    for (i, range) in [0..4, 4..6, 6..8, 8..10, 10..16].into_iter().enumerate() {
        if i > 0 {
            out.push('-');
        }
        hex(&b[range], &mut out);
    }
    out
}

/// Java's `String.hashCode`: over UTF-16 code units,
/// `s[0]*31^(n-1) + ... + s[n-1]` with wrapping arithmetic.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(i32::from(u)))
}

/// Orders entries as a `java.util.HashMap<String, _>` filled in this
/// order iterates them: by bucket of the final table size (16, doubled
/// while more than three quarters full), insertion order within a bucket
/// (resizing keeps it). Debezium builds such maps for transaction counts,
/// hstores and the headers Debezium Server's sinks write. Buckets of 8 or
/// more in a table of 64 or more become trees in Java; their order is not
/// reproduced (it needs eight keys of one bucket).
pub fn java_hash_map_order<K: AsRef<str>, V>(entries: Vec<(K, V)>) -> Vec<(K, V)> {
    let mut capacity: usize = 16;
    while entries.len() > capacity * 3 / 4 {
        capacity *= 2;
    }
    java_hash_map_order_sized(entries, capacity)
}

/// The table size of a `HashMap` made as a copy of a map of `n` entries
/// (`new HashMap<>(map)`, `putAll` into an empty one): since JDK 19 the
/// power of two at or above `ceil(n / 0.75)`, which can be smaller than
/// the 16 a map filled entry by entry starts with, so a copy can iterate
/// in another order than its source.
pub fn java_hash_map_copy_capacity(n: usize) -> usize {
    n.saturating_mul(4).div_ceil(3).max(1).next_power_of_two()
}

/// Orders entries as a `java.util.HashMap<String, _>` of `capacity`
/// buckets (a power of two), filled in this order with `put`, iterates
/// them: by bucket, insertion order within a bucket.
pub fn java_hash_map_order_sized<K: AsRef<str>, V>(
    entries: Vec<(K, V)>,
    capacity: usize,
) -> Vec<(K, V)> {
    bucket_order(entries, capacity, false, |k| java_string_hash(k.as_ref()))
}

/// Orders entries as a `java.util.HashMap<String, _>` filled in this
/// order with `computeIfAbsent` iterates them. Unlike `put`, which appends
/// a new key to its bucket, `computeIfAbsent` puts it at the bucket's
/// head, so keys sharing a bucket come out in reverse. Its table grows
/// only before an insertion that finds it over three quarters full, so 13
/// keys still fit 16 buckets.
pub fn java_compute_if_absent_order<K: AsRef<str>, V>(entries: Vec<(K, V)>) -> Vec<(K, V)> {
    let mut capacity: usize = 16;
    while entries.len().saturating_sub(1) > capacity * 3 / 4 {
        capacity *= 2;
    }
    bucket_order(entries, capacity, true, |k| java_string_hash(k.as_ref()))
}

/// By bucket of a table of `capacity` (a power of two) under `hash`,
/// then insertion order within a bucket (or its reverse).
fn bucket_order<K, V>(
    entries: Vec<(K, V)>,
    capacity: usize,
    newest_first: bool,
    hash: impl Fn(&K) -> i32,
) -> Vec<(K, V)> {
    debug_assert!(capacity.is_power_of_two());
    let bucket = |k: &K| {
        #[allow(clippy::cast_sign_loss)]
        let h = hash(k) as u32;
        ((h ^ (h >> 16)) as usize) & (capacity - 1)
    };
    // Within a bucket: insertion order, or its reverse.
    let mut keyed: Vec<(usize, isize, (K, V))> = entries
        .into_iter()
        .zip(0isize..)
        .map(|(e, i)| (bucket(&e.0), if newest_first { -i } else { i }, e))
        .collect();
    keyed.sort_by_key(|(b, i, _)| (*b, *i));
    keyed.into_iter().map(|(_, _, e)| e).collect()
}

/// Orders distinct keys as a `java.util.HashMap` of `capacity` buckets
/// (a power of two), filled in this order with `put`, iterates them, for
/// keys of any type whose `hashCode()` `hash` gives (see
/// [`java_hash_code`] for Connect values).
pub(crate) fn java_hash_map_order_by<K, V>(
    entries: Vec<(K, V)>,
    capacity: usize,
    hash: impl Fn(&K) -> i32,
) -> Vec<(K, V)> {
    bucket_order(entries, capacity, false, hash)
}

/// `Float.floatToIntBits`: every NaN is `0x7fc00000`.
pub(crate) fn java_float_bits(f: f32) -> u32 {
    if f.is_nan() {
        0x7fc0_0000
    } else {
        f.to_bits()
    }
}

/// `Double.doubleToLongBits`: every NaN is `0x7ff8000000000000`.
pub(crate) fn java_double_bits(f: f64) -> u64 {
    if f.is_nan() {
        0x7ff8_0000_0000_0000
    } else {
        f.to_bits()
    }
}

/// `Object.hashCode()` of a Connect value as a `HashMap` key: null,
/// strings, booleans, integers and floating-point numbers, which Java
/// hashes by value. `None` for the rest: a `byte[]` hashes by identity,
/// and walrelay does not reproduce the hash of a `BigDecimal`, `List`,
/// `Map` or `Struct`.
pub(crate) fn java_hash_code(v: &Value) -> Option<i32> {
    #[allow(clippy::cast_possible_truncation, clippy::cast_possible_wrap)]
    Some(match v {
        Value::Null => 0,
        Value::String(t) => java_string_hash(t.as_str()),
        Value::Boolean(b) => {
            if *b {
                1231
            } else {
                1237
            }
        }
        Value::Int8(x) => i32::from(*x),
        Value::Int16(x) => i32::from(*x),
        Value::Int32(x) => *x,
        Value::Int64(x) => (*x ^ ((*x as u64) >> 32) as i64) as i32,
        Value::Float32(f) => java_float_bits(*f) as i32,
        Value::Float64(f) => {
            let b = java_double_bits(*f);
            (b ^ (b >> 32)) as i32
        }
        Value::Bytes(_)
        | Value::Decimal(_)
        | Value::Array(_)
        | Value::Map(_)
        | Value::Struct(_) => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_of_small_maps_have_small_tables() {
        let sizes: Vec<usize> = [1, 2, 3, 4, 6, 7, 12, 13]
            .into_iter()
            .map(java_hash_map_copy_capacity)
            .collect();
        assert_eq!(sizes, [2, 4, 4, 8, 8, 16, 16, 32]);
        // Read from Debezium Server 3.6.1's NATS messages: three headers
        // put into a HashMap, added to jnats's with computeIfAbsent (`id`
        // and `eventType` share bucket 11 of 16: reversed), then copied
        // into a 4-bucket one.
        let put = java_hash_map_order(vec![("id", ()), ("eventType", ()), ("tenant", ())]);
        let names = |v: Vec<(&'static str, ())>| v.into_iter().map(|(k, ())| k).collect::<Vec<_>>();
        assert_eq!(names(put.clone()), ["id", "eventType", "tenant"]);
        let computed = java_compute_if_absent_order(put);
        assert_eq!(names(computed.clone()), ["eventType", "id", "tenant"]);
        let copied = java_hash_map_order_sized(computed, java_hash_map_copy_capacity(3));
        assert_eq!(names(copied), ["tenant", "eventType", "id"]);
    }

    #[test]
    fn hash_codes_of_map_keys() {
        assert_eq!(java_hash_code(&Value::Int64(-1)), Some(0));
        assert_eq!(java_hash_code(&Value::Boolean(true)), Some(1231));
        assert_eq!(java_hash_code(&Value::Float64(f64::NAN)), Some(0x7ff8_0000));
        assert_eq!(java_hash_code(&Value::string("a")), Some(97));
        assert_eq!(java_hash_code(&Value::Array(vec![])), None);
        let by_value = java_hash_map_order_by(vec![(17, ()), (1, ())], 16, |k| *k);
        assert_eq!(by_value, [(17, ()), (1, ())]);
    }

    fn dec(negative: bool, digits: &str, scale: i32) -> Decimal {
        Decimal {
            negative,
            digits: digits.into(),
            scale,
        }
    }

    #[test]
    fn doubles_render_like_java() {
        for (v, java) in [
            (1.0, "1.0"),
            (1.5, "1.5"),
            (100.0, "100.0"),
            (0.001, "0.001"),
            (0.0001, "1.0E-4"),
            (1e7, "1.0E7"),
            (9_999_999.0, "9999999.0"),
            (1.2345e10, "1.2345E10"),
            (-2.5e-5, "-2.5E-5"),
            (0.1, "0.1"),
            (123.456, "123.456"),
            (f64::MAX, "1.7976931348623157E308"),
            (f64::MIN_POSITIVE, "2.2250738585072014E-308"),
            (-0.0, "-0.0"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-Infinity"),
        ] {
            assert_eq!(double_to_string(v), java, "{v}");
        }
        assert_eq!(float_to_string(1.1f32), "1.1");
        assert_eq!(float_to_string(3.4028235e38f32), "3.4028235E38");
    }

    #[test]
    fn big_decimals_render_like_java() {
        assert_eq!(big_decimal_to_string(&dec(false, "12345", 2)), "123.45");
        assert_eq!(big_decimal_to_string(&dec(true, "5", 1)), "-0.5");
        assert_eq!(big_decimal_to_string(&dec(false, "0", 2)), "0.00");
        assert_eq!(big_decimal_to_string(&dec(false, "1", 6)), "0.000001");
        assert_eq!(big_decimal_to_string(&dec(false, "1", 7)), "1E-7");
        assert_eq!(big_decimal_to_string(&dec(false, "123", 10)), "1.23E-8");
        assert_eq!(big_decimal_to_string(&dec(false, "1", -3)), "1E+3");
        assert_eq!(big_decimal_to_string(&dec(false, "42", 0)), "42");
    }

    #[test]
    fn unscaled_bytes_match_big_integer() {
        assert_eq!(unscaled_bytes(&dec(false, "0", 0)), [0]);
        assert_eq!(unscaled_bytes(&dec(false, "127", 0)), [0x7f]);
        assert_eq!(unscaled_bytes(&dec(false, "128", 0)), [0x00, 0x80]);
        assert_eq!(unscaled_bytes(&dec(false, "12345", 2)), [0x30, 0x39]);
        assert_eq!(unscaled_bytes(&dec(true, "1", 0)), [0xff]);
        assert_eq!(unscaled_bytes(&dec(true, "128", 0)), [0x80]);
        assert_eq!(unscaled_bytes(&dec(true, "129", 0)), [0xff, 0x7f]);
        assert_eq!(unscaled_bytes(&dec(true, "256", 0)), [0xff, 0x00]);
        assert_eq!(unscaled_bytes(&dec(true, "32768", 0)), [0x80, 0x00]);
    }

    #[test]
    fn base64_is_padded_standard() {
        let enc = |b: &[u8]| {
            let mut s = String::new();
            base64(b, &mut s);
            s
        };
        assert_eq!(enc(b""), "");
        assert_eq!(enc(b"f"), "Zg==");
        assert_eq!(enc(b"fo"), "Zm8=");
        assert_eq!(enc(b"foo"), "Zm9v");
        assert_eq!(enc(&[0xfb, 0xff]), "+/8=");
    }

    #[test]
    fn random_uuid_is_version_4() {
        let u = random_uuid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert!(matches!(&u[19..20], "8" | "9" | "a" | "b"), "{u}");
        let v7 = uuid_v7(0x01a2_2b5c_b89a);
        assert!(v7.starts_with("01a22b5c-b89a-7"), "{v7}");
        assert!(matches!(&v7[19..20], "8" | "9" | "a" | "b"), "{v7}");
    }
}
