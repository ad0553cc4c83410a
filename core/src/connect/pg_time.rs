//! PostgreSQL date, time, timetz, timestamp and interval text as
//! Debezium's PostgreSQL connector converts it under each
//! `time.precision.mode` and `interval.handling.mode`.
//!
//! Owns the parsing of pgoutput's text (`DateStyle=ISO`,
//! `IntervalStyle=postgres`, the server defaults walrelay's walsender
//! session keeps) and the renderings of `io.debezium.time.*` and Kafka
//! Connect's own `Date`/`Time`/`Timestamp`. It never talks to the database.

use super::java::double_to_string;
use super::pg::{civil_from_days, days_from_civil, parse_date, zoned_timestamp};
use super::{Text, Value};

/// `PGStatement.DATE_POSITIVE_INFINITY` as Debezium reads `timestamp
/// 'infinity'`: an instant that many microseconds after the epoch.
pub(crate) const POSITIVE_INFINITY_MICROS: i64 = 9_223_372_036_825_200_000;
/// `PGStatement.DATE_NEGATIVE_INFINITY`, likewise for `'-infinity'`.
pub(crate) const NEGATIVE_INFINITY_MICROS: i64 = -9_223_372_036_832_400_000;
/// `PostgresValueConverter.POSITIVE_INFINITY_LOCAL_DATE` (sic: a
/// negative year) for `date 'infinity'`.
const POSITIVE_INFINITY_DATE: (i64, u32, u32) = (-5_877_611, 6, 21);
/// `NEGATIVE_INFINITY_LOCAL_DATE` for `'-infinity'`.
const NEGATIVE_INFINITY_DATE: (i64, u32, u32) = (-5_877_611, 6, 22);

const NANOS_PER_DAY: i64 = 86_400_000_000_000;

/// The unit of a time or timestamp value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimeUnit {
    /// INT32 (time) or INT64 (timestamp) milliseconds: Debezium's `Time`
    /// and `Timestamp`, and Connect's own (connect mode).
    Millis,
    /// INT64 microseconds (`MicroTime`, `MicroTimestamp`).
    Micros,
    /// INT64 nanoseconds (`NanoTime`, `NanoTimestamp`).
    Nanos,
    /// ISO-8601 STRING (`IsoTime`, `IsoTimestamp`).
    Iso,
}

/// `date` text → epoch day (`infinity` as Debezium's odd dates).
pub(crate) fn date_days(s: &str) -> Option<i64> {
    match s {
        "infinity" => {
            let (y, m, d) = POSITIVE_INFINITY_DATE;
            Some(days_from_civil(y, m, d))
        }
        "-infinity" => {
            let (y, m, d) = NEGATIVE_INFINITY_DATE;
            Some(days_from_civil(y, m, d))
        }
        _ => {
            let (days, rest) = parse_date(s)?;
            rest.is_empty().then_some(days)
        }
    }
}

/// `ISO_LOCAL_DATE`: four digits at least, `+` above 9999, `-` below 0.
fn push_year(out: &mut String, y: i64) {
    if y > 9999 {
        out.push_str(&format!("+{y}"));
    } else if y < 0 {
        out.push_str(&format!("-{:04}", -y));
    } else {
        out.push_str(&format!("{y:04}"));
    }
}

/// `IsoDate.toIsoString`: `ISO_OFFSET_DATE` at UTC (`2019-03-24Z`).
pub(crate) fn iso_date(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    let mut out = String::with_capacity(12);
    push_year(&mut out, y);
    out.push_str(&format!("-{m:02}-{d:02}Z"));
    out
}

/// `Strings.asDuration` of pgoutput's `time` text (`HH:MM:SS[.f]`, 24:00
/// included) → nanoseconds.
pub(crate) fn time_nanos(s: &str) -> Option<i64> {
    let mut parts = s.splitn(3, ':');
    let h: i64 = digits(parts.next()?)?;
    let m: i64 = digits(parts.next()?)?;
    let rest = parts.next()?;
    let (sec, frac) = rest.split_once('.').unwrap_or((rest, ""));
    let sec: i64 = digits(sec)?;
    let mut nanos = 0;
    if !frac.is_empty() {
        if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        nanos = frac.parse::<i64>().ok()? * 10_i64.pow(9 - frac.len() as u32);
    }
    Some(((h * 60 + m) * 60 + sec) * 1_000_000_000 + nanos)
}

fn digits(s: &str) -> Option<i64> {
    if s.is_empty() || s.len() > 10 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `ISO_LOCAL_TIME` of a time of day: seconds always, the fraction only
/// when not zero and without trailing zeros.
fn push_local_time(out: &mut String, nanos_of_day: i64) {
    let secs = nanos_of_day / 1_000_000_000;
    let nanos = nanos_of_day % 1_000_000_000;
    out.push_str(&format!(
        "{:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    ));
    if nanos != 0 {
        let f = format!("{nanos:09}");
        out.push('.');
        out.push_str(f.trim_end_matches('0'));
    }
}

/// A `time` value in `unit`; `large` is Debezium's
/// `supportsLargeTimeValues` (false in connect and isostring modes, where
/// a value past 24:00:00 would be refused; PostgreSQL has none).
pub(crate) fn time_value(unit: TimeUnit, s: &str) -> Option<Value> {
    let n = time_nanos(s)?;
    if n > NANOS_PER_DAY {
        return None;
    }
    Some(match unit {
        TimeUnit::Millis => Value::Int32(i32::try_from(n / 1_000_000).ok()?),
        TimeUnit::Micros => Value::Int64(n / 1_000),
        TimeUnit::Nanos => Value::Int64(n),
        TimeUnit::Iso => {
            // LocalTime.MIDNIGHT.plus(duration) wraps 24:00 to 00:00.
            let mut out = String::with_capacity(24);
            push_local_time(&mut out, n % NANOS_PER_DAY);
            out.push('Z');
            Value::String(Text::from(out))
        }
    })
}

/// `timetz` text (`HH:MM:SS[.f]±HH[:MM]`) → `ZonedTime`: the same instant
/// at UTC, `ISO_OFFSET_TIME` (`08:15:12.5Z`).
pub(crate) fn zoned_time(s: &str) -> Option<String> {
    let sign_at = s.rfind(['+', '-'])?;
    let (time, offset) = s.split_at(sign_at);
    let mut n = time_nanos(time)?;
    // Java's LocalTime has no 24:00, but Debezium parses timetz with a
    // SMART resolver, which reads the end of the day as the next day's
    // 00:00 (the day dropped): `24:00:00+00` is `00:00:00Z`. PostgreSQL
    // allows nothing later.
    if n == NANOS_PER_DAY {
        n = 0;
    } else if n > NANOS_PER_DAY {
        return None;
    }
    let neg = offset.starts_with('-');
    let o = &offset[1..];
    let (oh, om) = match o.split_once(':') {
        Some((h, m)) if h.len() == 2 && m.len() == 2 => (digits(h)?, digits(m)?),
        None if o.len() == 2 => (digits(o)?, 0),
        _ => return None,
    };
    let mut off = (oh * 3600 + om * 60) * 1_000_000_000;
    if neg {
        off = -off;
    }
    let utc = (n - off).rem_euclid(NANOS_PER_DAY);
    let mut out = String::with_capacity(24);
    push_local_time(&mut out, utc);
    out.push('Z');
    Some(out)
}

/// A `timestamp` (UTC-less, read as UTC) given in epoch microseconds, in
/// `unit`. Nanoseconds out of INT64 range are null, as Debezium's
/// converter gives for an optional column (it logs a warning).
pub(crate) fn timestamp_value(unit: TimeUnit, micros: i64) -> Value {
    match unit {
        TimeUnit::Millis => Value::Int64(micros.div_euclid(1000)),
        TimeUnit::Micros => Value::Int64(micros),
        TimeUnit::Nanos => match micros {
            POSITIVE_INFINITY_MICROS => Value::Int64(i64::MAX),
            NEGATIVE_INFINITY_MICROS => Value::Int64(i64::MIN),
            m => m.checked_mul(1000).map_or(Value::Null, Value::Int64),
        },
        TimeUnit::Iso => Value::String(Text::from(zoned_timestamp(micros, None))),
    }
}

/// pgjdbc's `PGInterval` of `IntervalStyle=postgres` text: years, months,
/// days, hours, minutes and seconds (whole seconds plus rounded
/// microseconds, as `getSeconds()` gives them back).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PgInterval {
    pub(crate) years: i32,
    pub(crate) months: i32,
    pub(crate) days: i32,
    pub(crate) hours: i32,
    pub(crate) minutes: i32,
    /// Seconds with fraction.
    pub(crate) seconds: f64,
}

impl PgInterval {
    /// Parses `1 year 2 mons -3 days +04:05:06.789` (or `@ ... ago`).
    pub(crate) fn parse(text: &str) -> Option<PgInterval> {
        let postgres_format = !text.starts_with('@');
        let value = text.replace(['+', '@'], " ");
        let mut iv = PgInterval {
            years: 0,
            months: 0,
            days: 0,
            hours: 0,
            minutes: 0,
            seconds: 0.0,
        };
        let mut pending: Option<&str> = None;
        for (i, token) in value.split_whitespace().enumerate() {
            if i % 2 == 0 {
                let Some(colon) = token.find(':') else {
                    pending = Some(token);
                    continue;
                };
                let neg = token.starts_with('-');
                let start = usize::from(neg);
                let hours: i32 = token.get(start..colon)?.parse().ok()?;
                let minutes: i32 = token.get(colon + 1..colon + 3)?.parse().ok()?;
                let seconds: f64 = match token[colon + 1..].find(':') {
                    Some(c2) => token[colon + 1 + c2 + 1..].parse().ok()?,
                    None => 0.0,
                };
                if neg {
                    iv.hours = -hours;
                    iv.minutes = -minutes;
                    iv.seconds = -seconds;
                } else {
                    iv.hours = hours;
                    iv.minutes = minutes;
                    iv.seconds = seconds;
                }
                pending = None;
            } else {
                let v = pending?;
                if token.starts_with("year") {
                    iv.years = v.parse().ok()?;
                } else if token.starts_with("mon") {
                    iv.months = v.parse().ok()?;
                } else if token.starts_with("day") {
                    iv.days = v.parse().ok()?;
                } else if token.starts_with("hour") {
                    iv.hours = v.parse().ok()?;
                } else if token.starts_with("min") {
                    iv.minutes = v.parse().ok()?;
                } else if token.starts_with("sec") {
                    iv.seconds = v.parse().ok()?;
                } else if token != "ago" {
                    return None;
                }
            }
        }
        if !postgres_format && text.ends_with("ago") {
            iv.years = -iv.years;
            iv.months = -iv.months;
            iv.days = -iv.days;
            iv.hours = -iv.hours;
            iv.minutes = -iv.minutes;
            iv.seconds = -iv.seconds;
        }
        // setSeconds/getSeconds: whole seconds and rounded microseconds.
        let whole = iv.seconds.trunc();
        let micros = ((iv.seconds - whole) * 1e6).round();
        iv.seconds = whole + micros / 1e6;
        Some(iv)
    }

    /// `MicroDuration.durationMicros` with `DAYS_PER_MONTH_AVG` (365.25/12),
    /// in Java's int and double arithmetic.
    pub(crate) fn micro_duration(&self) -> i64 {
        let months = self.years.wrapping_mul(12).wrapping_add(self.months);
        let days = f64::from(months) * (365.25 / 12.0) + f64::from(self.days);
        let secs = ((days * 24.0 + f64::from(self.hours)) * 60.0 + f64::from(self.minutes)) * 60.0
            + self.seconds;
        // Java's (long) cast saturates, as Rust's does.
        (secs * 1e6 + 0.0) as i64
    }

    /// `Interval.toIsoString`: `P<y>Y<m>M<d>DT<h>H<m>M<s>S`, the seconds
    /// from `BigDecimal.valueOf(double)`, at most 9 fraction digits,
    /// trailing zeros stripped, plain.
    pub(crate) fn iso(&self) -> String {
        format!(
            "P{}Y{}M{}DT{}H{}M{}S",
            self.years,
            self.months,
            self.days,
            self.hours,
            self.minutes,
            plain_seconds(self.seconds)
        )
    }
}

/// `BigDecimal.valueOf(d)`, scale cut to 9 (rounding down),
/// `stripTrailingZeros().toPlainString()`.
fn plain_seconds(d: f64) -> String {
    let s = double_to_string(d);
    let (mantissa, exp) = match s.split_once('E') {
        Some((m, e)) => (m, e.parse::<i64>().unwrap_or(0)),
        None => (s.as_str(), 0),
    };
    let (neg, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut digits: String = format!("{int}{frac}");
    // value = digits * 10^-(scale)
    let mut scale = frac.len() as i64 - exp;
    if scale > 9 {
        let cut = (scale - 9) as usize;
        digits.truncate(digits.len().saturating_sub(cut));
        scale = 9;
    }
    let trimmed = digits.trim_start_matches('0');
    let mut digits = if trimmed.is_empty() {
        return "0".to_owned();
    } else {
        trimmed.to_owned()
    };
    while scale > 0 && digits.ends_with('0') {
        digits.pop();
        scale -= 1;
    }
    let body = if scale <= 0 {
        let mut d = digits;
        d.push_str(&"0".repeat((-scale) as usize));
        d
    } else {
        let scale = scale as usize;
        if digits.len() > scale {
            let (i, f) = digits.split_at(digits.len() - scale);
            format!("{i}.{f}")
        } else {
            format!("0.{}{}", "0".repeat(scale - digits.len()), digits)
        }
    };
    if neg {
        format!("-{body}")
    } else {
        body
    }
}

const MILLIS_PER_DAY: i64 = 86_400_000;

/// How a text rendering of a Connect value is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JavaText {
    /// `java.util.Date.toString()` (StringConverter): `EEE MMM dd
    /// HH:mm:ss zzz yyyy` in the worker's zone (UTC assumed).
    ToString,
    /// `Values.convertToString` (SimpleHeaderConverter): `HH:mm:ss.SSS'Z'`
    /// below one day after the epoch, `yyyy-MM-dd` on a midnight,
    /// `yyyy-MM-dd'T'HH:mm:ss.SSS'Z'` otherwise.
    Values,
}

/// A value of Kafka Connect's own `Date`, `Time` or `Timestamp` schema
/// (`time.precision.mode=connect`) is a `java.util.Date` in Java, which
/// renders as a date, not a number; `None` for any other schema.
/// Dates before 1582-10-15 are rendered in the proleptic Gregorian
/// calendar, where Java's `GregorianCalendar` switches to Julian.
pub(crate) fn connect_logical_text(
    schema_name: Option<&str>,
    value: &Value,
    how: JavaText,
) -> Option<String> {
    let millis = match (schema_name?, value) {
        (super::pg::names::CONNECT_DATE, Value::Int32(days)) => i64::from(*days) * MILLIS_PER_DAY,
        (super::pg::names::CONNECT_TIME, Value::Int32(ms)) => i64::from(*ms),
        (super::pg::names::CONNECT_TIMESTAMP, Value::Int64(ms)) => *ms,
        _ => return None,
    };
    let days = millis.div_euclid(MILLIS_PER_DAY);
    let ms = millis.rem_euclid(MILLIS_PER_DAY);
    let (y, mo, d) = civil_from_days(days);
    let (h, mi, sec, frac) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    Some(match how {
        JavaText::Values if millis < MILLIS_PER_DAY => {
            format!("{h:02}:{mi:02}:{sec:02}.{frac:03}Z")
        }
        JavaText::Values if ms == 0 => format!("{:04}-{mo:02}-{d:02}", era_year(y)),
        JavaText::Values => format!(
            "{:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{sec:02}.{frac:03}Z",
            era_year(y)
        ),
        JavaText::ToString => {
            const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
            const MONTHS: [&str; 12] = [
                "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
            ];
            format!(
                "{} {} {d:02} {h:02}:{mi:02}:{sec:02} UTC {}",
                DAYS[days.rem_euclid(7) as usize],
                MONTHS[(mo - 1) as usize],
                era_year(y)
            )
        }
    })
}

/// `SimpleDateFormat`'s `yyyy`: the year of era (1 BC is 1).
fn era_year(y: i64) -> i64 {
    if y <= 0 {
        1 - y
    } else {
        y
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_in_each_unit() {
        assert_eq!(
            time_value(TimeUnit::Micros, "13:45:12.123456"),
            Some(Value::Int64(49_512_123_456))
        );
        assert_eq!(
            time_value(TimeUnit::Millis, "24:00:00"),
            Some(Value::Int32(86_400_000))
        );
        assert_eq!(
            time_value(TimeUnit::Nanos, "00:00:00.000001"),
            Some(Value::Int64(1000))
        );
        assert_eq!(
            time_value(TimeUnit::Iso, "24:00:00"),
            Some(Value::string("00:00:00Z"))
        );
        assert_eq!(
            time_value(TimeUnit::Iso, "13:45:12.120"),
            Some(Value::string("13:45:12.12Z"))
        );
        assert_eq!(time_value(TimeUnit::Micros, "1:2"), None);
    }

    #[test]
    fn zoned_times_shift_to_utc() {
        assert_eq!(
            zoned_time("13:45:12.5+05:30").as_deref(),
            Some("08:15:12.5Z")
        );
        assert_eq!(zoned_time("00:00:00+14").as_deref(), Some("10:00:00Z"));
        assert_eq!(
            zoned_time("23:59:59.999999-12").as_deref(),
            Some("11:59:59.999999Z")
        );
        assert_eq!(zoned_time("24:00:00+00").as_deref(), Some("00:00:00Z"));
        assert_eq!(zoned_time("24:00:00+05:30").as_deref(), Some("18:30:00Z"));
        assert_eq!(zoned_time("24:00:00-08").as_deref(), Some("08:00:00Z"));
        assert_eq!(zoned_time("24:00:00.000001+00"), None);
    }

    #[test]
    fn dates_and_timestamps() {
        assert_eq!(iso_date(0), "1970-01-01Z");
        assert_eq!(
            iso_date(date_days("0044-03-15 BC").unwrap()),
            "-0043-03-15Z"
        );
        assert_eq!(iso_date(date_days("infinity").unwrap()), "-5877611-06-21Z");
        assert_eq!(iso_date(date_days("-infinity").unwrap()), "-5877611-06-22Z");
        assert_eq!(
            timestamp_value(TimeUnit::Millis, -1),
            Value::Int64(-1),
            "floor"
        );
        assert_eq!(
            timestamp_value(TimeUnit::Nanos, POSITIVE_INFINITY_MICROS),
            Value::Int64(i64::MAX)
        );
        assert_eq!(
            timestamp_value(TimeUnit::Nanos, -62_135_596_800_000_000),
            Value::Null
        );
        assert_eq!(
            timestamp_value(TimeUnit::Iso, 1_553_460_779_123_000),
            Value::string("2019-03-24T20:52:59.123Z")
        );
    }

    #[test]
    fn connect_dates_render_as_java_dates() {
        use super::super::pg::names;
        let v = |n: &str, x: Value, how| connect_logical_text(Some(n), &x, how).unwrap();
        assert_eq!(
            v(names::CONNECT_DATE, Value::Int32(17_979), JavaText::Values),
            "2019-03-24"
        );
        assert_eq!(
            v(names::CONNECT_DATE, Value::Int32(-1), JavaText::Values),
            "00:00:00.000Z"
        );
        assert_eq!(
            v(
                names::CONNECT_TIME,
                Value::Int32(49_512_123),
                JavaText::Values
            ),
            "13:45:12.123Z"
        );
        assert_eq!(
            v(
                names::CONNECT_TIMESTAMP,
                Value::Int64(1_553_460_779_123),
                JavaText::Values
            ),
            "2019-03-24T20:52:59.123Z"
        );
        assert_eq!(
            v(
                names::CONNECT_TIMESTAMP,
                Value::Int64(0),
                JavaText::ToString
            ),
            "Thu Jan 01 00:00:00 UTC 1970"
        );
        assert!(
            connect_logical_text(Some(names::TIMESTAMP), &Value::Int64(0), JavaText::Values)
                .is_none()
        );
    }

    #[test]
    fn intervals_as_pgjdbc_reads_them() {
        let iv = PgInterval::parse("1 year 2 mons -3 days +04:05:06.789").unwrap();
        assert_eq!(
            (iv.years, iv.months, iv.days, iv.hours, iv.minutes),
            (1, 2, -3, 4, 5)
        );
        assert_eq!(iv.iso(), "P1Y2M-3DT4H5M6.789S");
        let iv = PgInterval::parse("-00:00:01.5").unwrap();
        assert_eq!(iv.iso(), "P0Y0M0DT0H0M-1.5S");
        assert_eq!(iv.micro_duration(), -1_500_000);
        assert_eq!(
            PgInterval::parse("00:00:00").unwrap().iso(),
            "P0Y0M0DT0H0M0S"
        );
        assert_eq!(
            PgInterval::parse("1 mon").unwrap().micro_duration(),
            2_629_800_000_000
        );
        assert_eq!(
            PgInterval::parse("1 day 00:00:00.000001").unwrap().iso(),
            "P0Y0M1DT0H0M0.000001S"
        );
        assert_eq!(plain_seconds(100.0), "100");
        assert!(PgInterval::parse("1 fortnight").is_none());
    }
}
