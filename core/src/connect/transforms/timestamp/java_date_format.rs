//! `java.text.SimpleDateFormat` as Kafka's `TimestampConverter` and
//! `TimestampRouter` use it: default (en_US) locale, lenient, time zone
//! UTC, `GregorianCalendar` with its 1582-10-15 switch to the Julian
//! calendar before it.
//!
//! Owns pattern compilation (Java's `IllegalArgumentException` texts),
//! formatting, and parsing with Java's rules: fields abutting a numeric
//! field take exactly their letter count of characters, spaces and tabs
//! before a field are skipped, text after the last field is ignored, and
//! out-of-range values roll over as a lenient `Calendar` does. Pattern
//! letters walrelay does not implement (week-based `w`, `W`, `Y`, and long
//! era names) are refused at compile time, and inputs whose Java result
//! depends on something outside the pattern (a two-digit year is placed
//! relative to today; zone names other than UTC/GMT) are refused at parse
//! time, rather than giving a different answer. Pure.

use crate::connect::pg::{civil_from_days, days_from_civil};

/// Milliseconds in a day.
const DAY_MS: i64 = 86_400_000;
/// 1582-10-15, the first Gregorian day, in days since the epoch.
const CUTOVER_DAY: i64 = -141_427;
/// Days from Rata Die day 0 to the epoch (RD 1 = 0001-01-01, a Monday).
const RD_EPOCH: i64 = 719_163;

/// English month names (`MMMM`, `MMM`).
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
/// English weekday names, Sunday first (`Calendar.DAY_OF_WEEK` 1..7).
const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// A pattern letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Letter {
    /// `G`.
    Era,
    /// `y`.
    Year,
    /// `M`.
    Month,
    /// `L`.
    MonthStandalone,
    /// `d`.
    DayOfMonth,
    /// `k` (1-24).
    HourOfDay1,
    /// `H` (0-23).
    HourOfDay0,
    /// `m`.
    Minute,
    /// `s`.
    Second,
    /// `S` (milliseconds, not a fraction).
    Millisecond,
    /// `E`.
    DayOfWeek,
    /// `D`.
    DayOfYear,
    /// `F`.
    DayOfWeekInMonth,
    /// `a`.
    AmPm,
    /// `h` (1-12).
    Hour1,
    /// `K` (0-11).
    Hour0,
    /// `z`.
    ZoneName,
    /// `Z`.
    ZoneValue,
    /// `u` (Monday = 1).
    IsoDayOfWeek,
    /// `X`.
    IsoZone,
}

impl Letter {
    /// The letter of a pattern character; `Err` for Java letters walrelay
    /// does not implement, `Ok(None)` for characters Java refuses.
    fn of(c: char) -> Result<Option<Letter>, String> {
        Ok(Some(match c {
            'G' => Letter::Era,
            'y' => Letter::Year,
            'M' => Letter::Month,
            'L' => Letter::MonthStandalone,
            'd' => Letter::DayOfMonth,
            'k' => Letter::HourOfDay1,
            'H' => Letter::HourOfDay0,
            'm' => Letter::Minute,
            's' => Letter::Second,
            'S' => Letter::Millisecond,
            'E' => Letter::DayOfWeek,
            'D' => Letter::DayOfYear,
            'F' => Letter::DayOfWeekInMonth,
            'a' => Letter::AmPm,
            'h' => Letter::Hour1,
            'K' => Letter::Hour0,
            'z' => Letter::ZoneName,
            'Z' => Letter::ZoneValue,
            'u' => Letter::IsoDayOfWeek,
            'X' => Letter::IsoZone,
            'w' | 'W' | 'Y' => {
                return Err(format!(
                    "walrelay does not implement the week-based SimpleDateFormat letter '{c}'"
                ))
            }
            _ => return Ok(None),
        }))
    }

    /// `shouldObeyCount`: whether a field before this one stops after its
    /// letter count of characters.
    fn is_numeric(self, count: usize) -> bool {
        match self {
            Letter::Month | Letter::MonthStandalone => count <= 2,
            Letter::Era
            | Letter::DayOfWeek
            | Letter::AmPm
            | Letter::ZoneName
            | Letter::ZoneValue
            | Letter::IsoZone => false,
            _ => true,
        }
    }
}

/// One element of a compiled pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Item {
    /// Text copied as is (UTF-16 units, as Java compares them).
    Literal(Vec<u16>),
    /// A field and its letter count.
    Field(Letter, usize),
}

/// Why a pattern cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::connect::transforms) enum PatternError {
    /// Java refuses it: its `IllegalArgumentException` message.
    Illegal(String),
    /// Java accepts it but walrelay does not implement it.
    Unsupported(String),
}

/// A compiled `SimpleDateFormat` in UTC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::connect::transforms) struct JavaDateFormat {
    /// The pattern as given (`toPattern()`).
    pattern: String,
    items: Vec<Item>,
}

impl JavaDateFormat {
    /// `new SimpleDateFormat(pattern)`.
    pub(in crate::connect::transforms) fn compile(
        pattern: &str,
    ) -> Result<JavaDateFormat, PatternError> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut items: Vec<Item> = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c == '\'' {
                i = quoted(&chars, i, &mut items)?;
                continue;
            }
            if !c.is_ascii_alphabetic() {
                push_literal(&mut items, c);
                i += 1;
                continue;
            }
            let letter = Letter::of(c)
                .map_err(PatternError::Unsupported)?
                .ok_or_else(|| PatternError::Illegal(format!("Illegal pattern character '{c}'")))?;
            let mut count = 1;
            while chars.get(i + count) == Some(&c) {
                count += 1;
            }
            check_count(letter, count)?;
            items.push(Item::Field(letter, count));
            i += count;
        }
        Ok(JavaDateFormat {
            pattern: pattern.to_owned(),
            items,
        })
    }

    /// `toPattern()`.
    pub(in crate::connect::transforms) fn pattern(&self) -> &str {
        &self.pattern
    }

    /// `format(new Date(millis))`.
    pub(in crate::connect::transforms) fn format(&self, millis: i64) -> String {
        let f = Fields::of(millis);
        let mut out = String::new();
        for item in &self.items {
            match item {
                Item::Literal(units) => out.push_str(&String::from_utf16_lossy(units)),
                Item::Field(letter, count) => format_field(&mut out, &f, *letter, *count),
            }
        }
        out
    }

    /// `parse(text)`: `Ok(None)` where Java throws `ParseException`,
    /// `Err` where walrelay cannot reproduce Java's answer.
    pub(in crate::connect::transforms) fn parse(&self, text: &str) -> Result<Option<i64>, String> {
        let t: Vec<u16> = text.encode_utf16().collect();
        let mut b = Builder::default();
        let mut start = 0;
        for (i, item) in self.items.iter().enumerate() {
            match item {
                Item::Literal(units) => {
                    for u in units {
                        if t.get(start) != Some(u) {
                            return Ok(None);
                        }
                        start += 1;
                    }
                }
                Item::Field(letter, count) => {
                    let obey = matches!(self.items.get(i + 1), Some(Item::Field(n, c)) if n.is_numeric(*c));
                    let p = Parser {
                        t: &t,
                        start,
                        count: *count,
                        obey,
                    };
                    match p.field(*letter, &mut b)? {
                        Some(next) => start = next,
                        None => return Ok(None),
                    }
                }
            }
        }
        Ok(Some(b.establish()))
    }
}

/// Appends a literal character, joining it to a preceding literal.
fn push_literal(items: &mut Vec<Item>, c: char) {
    let mut buf = [0u16; 2];
    let units = c.encode_utf16(&mut buf);
    if let Some(Item::Literal(v)) = items.last_mut() {
        v.extend_from_slice(units);
    } else {
        items.push(Item::Literal(units.to_vec()));
    }
}

/// A quote at `i`: `''` is one quote, otherwise text up to the closing
/// quote (where `''` is again one quote). Returns the index after it.
fn quoted(chars: &[char], i: usize, items: &mut Vec<Item>) -> Result<usize, PatternError> {
    if chars.get(i + 1) == Some(&'\'') {
        push_literal(items, '\'');
        return Ok(i + 2);
    }
    let mut j = i + 1;
    let mut text = Vec::new();
    loop {
        match chars.get(j) {
            None => return Err(PatternError::Illegal("Unterminated quote".to_owned())),
            Some('\'') if chars.get(j + 1) == Some(&'\'') => {
                text.push('\'');
                j += 2;
            }
            Some('\'') => break,
            Some(c) => {
                text.push(*c);
                j += 1;
            }
        }
    }
    for c in text {
        push_literal(items, c);
    }
    Ok(j + 1)
}

/// Letter counts Java refuses or walrelay does not implement.
fn check_count(letter: Letter, count: usize) -> Result<(), PatternError> {
    match letter {
        Letter::IsoZone if count >= 4 => Err(PatternError::Illegal(format!(
            "invalid ISO 8601 format: length={count}"
        ))),
        Letter::Era if count >= 4 => Err(PatternError::Unsupported(
            "walrelay does not implement long era names (GGGG)".to_owned(),
        )),
        _ => Ok(()),
    }
}

/// The calendar fields of an instant in UTC.
#[derive(Debug, Clone, Copy)]
struct Fields {
    /// Astronomical year (0 = 1 BC).
    year: i64,
    /// 1..=12.
    month: u32,
    /// 1..=31.
    day: u32,
    /// 1-based day of the year.
    day_of_year: i64,
    /// 1 = Sunday ... 7 = Saturday.
    day_of_week: i64,
    /// Milliseconds of the day.
    ms_of_day: i64,
}

impl Fields {
    /// `calendar.setTime(new Date(millis))`.
    fn of(millis: i64) -> Fields {
        let days = millis.div_euclid(DAY_MS);
        let gregorian = days >= CUTOVER_DAY;
        let (year, month, day) = if gregorian {
            civil_from_days(days)
        } else {
            julian_from_days(days)
        };
        // The switch year starts on its Julian 1 January.
        let jan1 = if gregorian && year != 1582 {
            days_from_civil(year, 1, 1)
        } else {
            julian_days(year, 1, 1)
        };
        Fields {
            year,
            month,
            day,
            day_of_year: days - jan1 + 1,
            day_of_week: (days + 4).rem_euclid(7) + 1,
            ms_of_day: millis.rem_euclid(DAY_MS),
        }
    }

    /// `HOUR_OF_DAY`.
    fn hour(&self) -> i64 {
        self.ms_of_day / 3_600_000
    }
}

/// `subFormat` of one field.
fn format_field(out: &mut String, f: &Fields, letter: Letter, count: usize) {
    let number = |out: &mut String, v: i64| pad(out, v, count);
    match letter {
        Letter::Era => out.push_str(if f.year <= 0 { "BC" } else { "AD" }),
        Letter::Year => {
            let y = if f.year <= 0 { 1 - f.year } else { f.year };
            if count == 2 {
                out.push_str(&format!("{:02}", y % 100));
            } else {
                number(out, y);
            }
        }
        Letter::Month | Letter::MonthStandalone => match count {
            1 | 2 => number(out, i64::from(f.month)),
            3 => out.push_str(&MONTHS[f.month as usize - 1][..3]),
            _ => out.push_str(MONTHS[f.month as usize - 1]),
        },
        Letter::DayOfMonth => number(out, i64::from(f.day)),
        Letter::HourOfDay1 => number(out, if f.hour() == 0 { 24 } else { f.hour() }),
        Letter::HourOfDay0 => number(out, f.hour()),
        Letter::Minute => number(out, f.ms_of_day / 60_000 % 60),
        Letter::Second => number(out, f.ms_of_day / 1000 % 60),
        Letter::Millisecond => number(out, f.ms_of_day % 1000),
        Letter::DayOfWeek => {
            let name = WEEKDAYS[f.day_of_week as usize - 1];
            out.push_str(if count >= 4 { name } else { &name[..3] });
        }
        Letter::DayOfYear => number(out, f.day_of_year),
        Letter::DayOfWeekInMonth => number(out, (i64::from(f.day) - 1) / 7 + 1),
        Letter::AmPm => out.push_str(if f.hour() < 12 { "AM" } else { "PM" }),
        Letter::Hour1 => number(
            out,
            if f.hour() % 12 == 0 {
                12
            } else {
                f.hour() % 12
            },
        ),
        Letter::Hour0 => number(out, f.hour() % 12),
        Letter::ZoneName => out.push_str(if count >= 4 {
            "Coordinated Universal Time"
        } else {
            "UTC"
        }),
        Letter::ZoneValue => out.push_str("+0000"),
        Letter::IsoDayOfWeek => number(out, (f.day_of_week + 5) % 7 + 1),
        Letter::IsoZone => out.push('Z'),
    }
}

/// `zeroPaddingNumber(value, count, Integer.MAX_VALUE)`: at least `count`
/// digits (`DecimalFormat` caps the minimum at 309).
fn pad(out: &mut String, v: i64, count: usize) {
    let width = count.min(309);
    out.push_str(&format!("{v:0width$}"));
}

/// Epoch days of a Julian calendar date (astronomical year).
fn julian_days(y: i64, m: u32, d: u32) -> i64 {
    let m = i64::from(m);
    let a = (14 - m) / 12;
    let y2 = y + 4800 - a;
    let m2 = m + 12 * a - 3;
    let jdn = i64::from(d) + (153 * m2 + 2) / 5 + 365 * y2 + y2.div_euclid(4) - 32_083;
    jdn - 2_440_588
}

/// The Julian calendar date of epoch days.
fn julian_from_days(days: i64) -> (i64, u32, u32) {
    let c = days + 2_440_588 + 32_082;
    let d = (4 * c + 3).div_euclid(1461);
    let e = c - (1461 * d).div_euclid(4);
    let m = (5 * e + 2) / 153;
    let day = e - (153 * m + 2) / 5 + 1;
    let month = m + 3 - 12 * (m / 10);
    let year = d - 4800 + m / 10;
    (year, month as u32, day as u32)
}

/// A calendar system of `GregorianCalendar`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cal {
    Gregorian,
    Julian,
}

impl Cal {
    /// Epoch days of a date.
    fn days(self, y: i64, m: u32, d: u32) -> i64 {
        match self {
            Cal::Gregorian => days_from_civil(y, m, d),
            Cal::Julian => julian_days(y, m, d),
        }
    }

    /// Days in month `m0` (0-based) of year `y`.
    fn month_len(self, y: i64, m0: i64) -> i64 {
        const LEN: [i64; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
        let leap = match self {
            Cal::Gregorian => {
                y.rem_euclid(4) == 0 && (y.rem_euclid(100) != 0 || y.rem_euclid(400) == 0)
            }
            Cal::Julian => y.rem_euclid(4) == 0,
        };
        LEN[m0 as usize] + i64::from(m0 == 1 && leap)
    }
}

/// A calendar field the parser sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cf {
    Era = 0,
    Year,
    Month,
    Date,
    HourOfDay,
    Hour,
    AmPm,
    Minute,
    Second,
    Millisecond,
    DayOfWeek,
    DayOfYear,
    DowInMonth,
    ZoneOffset,
    DstOffset,
}

/// `CalendarBuilder`: each field's value and the order it was set in
/// (0: unset), which decides which fields `Calendar` resolves a date from.
#[derive(Debug, Default)]
struct Builder {
    fields: [(i32, u32); 15],
    next: u32,
}

impl Builder {
    /// Sets a field, stamping it as the latest.
    fn set(&mut self, f: Cf, v: i32) {
        self.next += 1;
        self.fields[f as usize] = (v, self.next);
    }

    /// The stamp of a field (0 when unset).
    fn stamp(&self, f: Cf) -> u32 {
        self.fields[f as usize].1
    }

    /// The value of a field (0 when unset, as `internalGet`).
    fn get(&self, f: Cf) -> i64 {
        i64::from(self.fields[f as usize].0)
    }

    /// `GregorianCalendar.computeTime` in lenient mode.
    fn establish(&self) -> i64 {
        let mut year = if self.stamp(Cf::Year) > 0 {
            self.get(Cf::Year)
        } else {
            1970
        };
        if self.stamp(Cf::Era) > 0 && self.get(Cf::Era) == 0 {
            year = 1 - year;
        }
        let mode = self.date_mode();
        let fixed = match year.cmp(&1582) {
            std::cmp::Ordering::Less => self.fixed_date(Cal::Julian, year, mode),
            std::cmp::Ordering::Equal if mode == DateMode::YearDay => {
                self.fixed_date(Cal::Julian, year, mode)
            }
            _ => {
                let g = self.fixed_date(Cal::Gregorian, year, mode);
                if g >= CUTOVER_DAY {
                    g
                } else {
                    self.fixed_date(Cal::Julian, year, mode)
                }
            }
        };
        let millis = fixed.wrapping_mul(DAY_MS).wrapping_add(self.time_of_day());
        let zone = self.get(Cf::ZoneOffset) + self.get(Cf::DstOffset);
        millis.wrapping_sub(zone)
    }

    /// Milliseconds from the hour fields `Calendar.selectFields` picks.
    fn time_of_day(&self) -> i64 {
        let hod = self.stamp(Cf::HourOfDay);
        let hour = aggregate(self.stamp(Cf::Hour), self.stamp(Cf::AmPm));
        let mut best = hod.max(hour);
        if best == 0 {
            best = self.stamp(Cf::Hour).max(self.stamp(Cf::AmPm));
        }
        let h = if best != 0 && best == hod {
            self.get(Cf::HourOfDay)
        } else {
            let pm = if best != 0 && self.stamp(Cf::AmPm) > 0 {
                12 * self.get(Cf::AmPm)
            } else {
                0
            };
            self.get(Cf::Hour) + pm
        };
        ((h * 60 + self.get(Cf::Minute)) * 60 + self.get(Cf::Second)) * 1000
            + self.get(Cf::Millisecond)
    }

    /// Which fields `Calendar.selectFields` resolves the date from.
    fn date_mode(&self) -> DateMode {
        let dow = self.stamp(Cf::DayOfWeek);
        let mut dom = self.stamp(Cf::Date);
        let mut dowim = aggregate(self.stamp(Cf::DowInMonth), dow);
        let doy = self.stamp(Cf::DayOfYear);
        let mut best = dom.max(dowim).max(doy);
        if best == 0 {
            dowim = self.stamp(Cf::DowInMonth).max(dow);
            best = dowim;
            if best == 0 {
                dom = self.stamp(Cf::Month);
                best = dom;
            }
        }
        if best == dom {
            DateMode::MonthDay
        } else if best == dowim {
            DateMode::MonthWeekday
        } else {
            DateMode::YearDay
        }
    }

    /// `getFixedDate` in epoch days.
    fn fixed_date(&self, cal: Cal, year: i64, mode: DateMode) -> i64 {
        if mode == DateMode::YearDay {
            return cal.days(year, 1, 1) + self.get(Cf::DayOfYear) - 1;
        }
        let month = self.get(Cf::Month);
        let year = year + month.div_euclid(12);
        let m0 = month.rem_euclid(12);
        let first = cal.days(year, m0 as u32 + 1, 1);
        if mode == DateMode::MonthDay {
            return if self.stamp(Cf::Date) > 0 {
                first + self.get(Cf::Date) - 1
            } else {
                first
            };
        }
        let dow = if self.stamp(Cf::DayOfWeek) > 0 {
            self.get(Cf::DayOfWeek)
        } else {
            1
        };
        let n = if self.stamp(Cf::DowInMonth) > 0 {
            self.get(Cf::DowInMonth)
        } else {
            1
        };
        if n >= 0 {
            on_or_before(first + 7 * n - 1, dow)
        } else {
            let last = cal.month_len(year, m0) + 7 * (n + 1);
            on_or_before(first + last - 1, dow)
        }
    }
}

/// How the date is resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DateMode {
    /// Year, month, day of month.
    MonthDay,
    /// Year, month, day of week (in its `n`th week).
    MonthWeekday,
    /// Year and day of year.
    YearDay,
}

/// `Calendar.aggregateStamp`: unset if either is.
fn aggregate(a: u32, b: u32) -> u32 {
    if a == 0 || b == 0 {
        0
    } else {
        a.max(b)
    }
}

/// The latest day on or before `days` that is weekday `dow` (1 = Sunday).
fn on_or_before(days: i64, dow: i64) -> i64 {
    let rd = days + RD_EPOCH;
    days - (rd - (dow - 1)).rem_euclid(7)
}

/// One field's parse (`subParse`).
struct Parser<'a> {
    t: &'a [u16],
    /// Where the field starts (before skipped spaces).
    start: usize,
    count: usize,
    /// Whether a numeric field follows directly.
    obey: bool,
}

impl Parser<'_> {
    /// Parses the field; `Ok(None)` on a mismatch.
    fn field(&self, letter: Letter, b: &mut Builder) -> Result<Option<usize>, String> {
        let mut pos = self.start;
        loop {
            match self.t.get(pos) {
                None => return Ok(None),
                Some(&c) if c == u16::from(b' ') || c == u16::from(b'\t') => pos += 1,
                Some(_) => break,
            }
        }
        let text_field = |names: &[&str], f: Cf, b: &mut Builder| {
            Ok(match_names(self.t, self.start, names).map(|(i, end)| {
                b.set(f, i as i32);
                end
            }))
        };
        match letter {
            Letter::Era => {
                let names = ["BC", "AD", "Before Christ", "Anno Domini"];
                Ok(match_names(self.t, self.start, &names).map(|(i, end)| {
                    b.set(Cf::Era, (i % 2) as i32);
                    end
                }))
            }
            Letter::Month | Letter::MonthStandalone if self.count >= 3 => {
                let short: Vec<&str> = MONTHS.iter().map(|m| &m[..3]).collect();
                match match_names(self.t, self.start, &MONTHS)
                    .or_else(|| match_names(self.t, self.start, &short))
                {
                    Some((i, end)) => {
                        b.set(Cf::Month, i as i32);
                        Ok(Some(end))
                    }
                    None => Ok(None),
                }
            }
            Letter::DayOfWeek => {
                let short: Vec<&str> = WEEKDAYS.iter().map(|d| &d[..3]).collect();
                match match_names(self.t, self.start, &WEEKDAYS)
                    .or_else(|| match_names(self.t, self.start, &short))
                {
                    Some((i, end)) => {
                        b.set(Cf::DayOfWeek, i as i32 + 1);
                        Ok(Some(end))
                    }
                    None => Ok(None),
                }
            }
            Letter::AmPm => text_field(&["AM", "PM"], Cf::AmPm, b),
            Letter::ZoneName | Letter::ZoneValue => self.zone(pos, b),
            Letter::IsoZone => Ok(self.iso_zone(pos, b)),
            _ => self.numeric(letter, pos, b),
        }
    }

    /// A numeric field.
    fn numeric(
        &self,
        letter: Letter,
        pos: usize,
        b: &mut Builder,
    ) -> Result<Option<usize>, String> {
        let limit = if self.obey {
            if self.start + self.count > self.t.len() {
                return Ok(None);
            }
            self.start + self.count
        } else {
            self.t.len()
        };
        let Some((v, end)) = number(self.t, pos, limit)? else {
            return Ok(None);
        };
        let (field, value) = match letter {
            Letter::Year => {
                let digits = |i: usize| self.t.get(i).is_some_and(|c| (0x30..=0x39).contains(c));
                if self.count <= 2 && end - pos == 2 && digits(pos) && digits(pos + 1) {
                    return Err("walrelay does not parse two-digit years: Java places them in the century that starts 80 years before today".to_owned());
                }
                (Cf::Year, v)
            }
            Letter::Month | Letter::MonthStandalone => (Cf::Month, v.wrapping_sub(1)),
            Letter::HourOfDay1 => (Cf::HourOfDay, if v == 24 { 0 } else { v }),
            Letter::Hour1 => (Cf::Hour, if v == 12 { 0 } else { v }),
            Letter::DayOfMonth => (Cf::Date, v),
            Letter::HourOfDay0 => (Cf::HourOfDay, v),
            Letter::Minute => (Cf::Minute, v),
            Letter::Second => (Cf::Second, v),
            Letter::Millisecond => (Cf::Millisecond, v),
            Letter::DayOfYear => (Cf::DayOfYear, v),
            Letter::DayOfWeekInMonth => (Cf::DowInMonth, v),
            Letter::Hour0 => (Cf::Hour, v),
            // CalendarBuilder turns an ISO day of week into DAY_OF_WEEK.
            _ => (
                Cf::DayOfWeek,
                if (1..=7).contains(&v) { v % 7 + 1 } else { v },
            ),
        };
        b.set(field, value);
        Ok(Some(end))
    }

    /// `z` and `Z`: `+hhmm`, `GMT[+h:mm]`, or the zone's own names.
    fn zone(&self, pos: usize, b: &mut Builder) -> Result<Option<usize>, String> {
        let c = self.t[pos];
        let sign_of = |c: u16| match c {
            0x2B => 1,
            0x2D => -1,
            _ => 0,
        };
        let sign = sign_of(c);
        if sign != 0 {
            return Ok(numeric_zone(self.t, pos + 1, sign, 0, false, b));
        }
        if (c == u16::from(b'G') || c == u16::from(b'g'))
            && region_matches(self.t, self.start, "GMT")
        {
            let p = self.start + 3;
            let sign = self.t.get(p).map_or(0, |c| sign_of(*c));
            if sign == 0 {
                b.set(Cf::ZoneOffset, 0);
                b.set(Cf::DstOffset, 0);
                return Ok(Some(p));
            }
            return Ok(numeric_zone(self.t, p + 1, sign, 0, true, b));
        }
        // UTC's own names: the zone stays UTC and no offset is set.
        for name in ["Coordinated Universal Time", "UTC"] {
            if region_matches(self.t, pos, name) {
                return Ok(Some(pos + name.len()));
            }
        }
        Err(format!(
            "walrelay parses only the zone names UTC and GMT, not ({})",
            String::from_utf16_lossy(&self.t[pos..])
        ))
    }

    /// `X`: `Z`, or `+hh`, `+hhmm`, `+hh:mm` by letter count.
    fn iso_zone(&self, pos: usize, b: &mut Builder) -> Option<usize> {
        let sign = match self.t[pos] {
            0x5A => {
                b.set(Cf::ZoneOffset, 0);
                b.set(Cf::DstOffset, 0);
                return Some(pos + 1);
            }
            0x2B => 1,
            0x2D => -1,
            _ => return None,
        };
        numeric_zone(self.t, pos + 1, sign, self.count, self.count == 3, b)
    }
}

/// `subParseNumericZone`: `hh[[:]mm]` after a sign.
fn numeric_zone(
    t: &[u16],
    start: usize,
    sign: i32,
    count: usize,
    colon: bool,
    b: &mut Builder,
) -> Option<usize> {
    let digit = |i: usize| {
        t.get(i)
            .filter(|c| (0x30..=0x39).contains(*c))
            .map(|c| i32::from(*c) - 0x30)
    };
    let mut i = start;
    let mut hours = digit(i)?;
    i += 1;
    match digit(i) {
        Some(d) => {
            hours = hours * 10 + d;
            i += 1;
        }
        None if count > 0 || !colon => return None,
        None => {
            t.get(i)?;
        }
    }
    if hours > 23 {
        return None;
    }
    let mut minutes = 0;
    if count != 1 {
        if colon {
            if *t.get(i)? != 0x3A {
                return None;
            }
            i += 1;
        }
        minutes = digit(i)? * 10 + digit(i + 1)?;
        i += 2;
        if minutes > 59 {
            return None;
        }
    }
    b.set(Cf::ZoneOffset, (minutes + hours * 60) * 60_000 * sign);
    b.set(Cf::DstOffset, 0);
    Some(i)
}

/// `text.regionMatches(true, at, name, 0, name.length())` for ASCII names.
fn region_matches(t: &[u16], at: usize, name: &str) -> bool {
    let Some(region) = t.get(at..at + name.len()) else {
        return false;
    };
    region
        .iter()
        .zip(name.bytes())
        .all(|(c, n)| u8::try_from(*c).is_ok_and(|c| c.eq_ignore_ascii_case(&n)))
}

/// `matchString`: the longest of `names` at `at`, case-insensitively.
fn match_names(t: &[u16], at: usize, names: &[&str]) -> Option<(usize, usize)> {
    let mut best: Option<(usize, usize)> = None;
    for (i, name) in names.iter().enumerate() {
        if best.is_none_or(|(_, len)| name.len() > len) && region_matches(t, at, name) {
            best = Some((i, name.len()));
        }
    }
    best.map(|(i, len)| (i, at + len))
}

/// `DecimalFormat.parse` of an integer (no grouping) at `pos`, reading
/// no further than `limit`: an optional minus and ASCII digits, as Java's
/// `Number.intValue()`.
fn number(t: &[u16], pos: usize, limit: usize) -> Result<Option<(i32, usize)>, String> {
    let mut i = pos;
    let negative = t.get(i) == Some(&0x2D) && i < limit;
    if negative {
        i += 1;
    }
    let digits_start = i;
    while i < limit && t.get(i).is_some_and(|c| (0x30..=0x39).contains(c)) {
        i += 1;
    }
    if i == digits_start {
        return Ok(None);
    }
    if i < limit && t.get(i) == Some(&0x45) {
        return Err("walrelay does not reproduce DecimalFormat's exponent parsing (an E after a date number)".to_owned());
    }
    let digits = String::from_utf16_lossy(&t[digits_start..i]);
    let value = match digits.parse::<i64>() {
        // A Long keeps its low 32 bits; a longer number is a Double, which saturates.
        Ok(v) => (if negative { v.wrapping_neg() } else { v }) as i32,
        Err(_) if negative => i32::MIN,
        Err(_) => i32::MAX,
    };
    Ok(Some((value, i)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(p: &str, ms: i64) -> String {
        JavaDateFormat::compile(p).unwrap().format(ms)
    }

    fn p(pattern: &str, text: &str) -> Option<i64> {
        JavaDateFormat::compile(pattern)
            .unwrap()
            .parse(text)
            .unwrap()
    }

    const T: i64 = 1_553_460_779_123; // 2019-03-24T20:52:59.123Z, a Sunday

    #[test]
    fn compiles_like_java() {
        let err = |p: &str| JavaDateFormat::compile(p).unwrap_err();
        assert_eq!(
            err("yyyy-qq"),
            PatternError::Illegal("Illegal pattern character 'q'".into())
        );
        assert_eq!(
            err("yyyy'T"),
            PatternError::Illegal("Unterminated quote".into())
        );
        assert_eq!(
            err("XXXX"),
            PatternError::Illegal("invalid ISO 8601 format: length=4".into())
        );
        assert!(matches!(err("YYYY"), PatternError::Unsupported(_)));
        assert!(matches!(err("ww"), PatternError::Unsupported(_)));
        assert!(matches!(err("GGGG"), PatternError::Unsupported(_)));
        assert_eq!(
            JavaDateFormat::compile("'it''s' h").unwrap().pattern(),
            "'it''s' h"
        );
    }

    #[test]
    fn formats_each_letter() {
        assert_eq!(
            f("yyyy-MM-dd'T'HH:mm:ss.SSSXXX", T),
            "2019-03-24T20:52:59.123Z"
        );
        assert_eq!(f("yyyyMMdd", T), "20190324");
        assert_eq!(f("yy y yyyyy", T), "19 2019 02019");
        assert_eq!(f("G MMM MMMM M LLL", T), "AD Mar March 3 Mar");
        assert_eq!(f("E EEEE u D F", T), "Sun Sunday 7 83 4");
        assert_eq!(f("h hh K k a", T), "8 08 8 20 PM");
        assert_eq!(f("h K k a", 0), "12 0 24 AM");
        assert_eq!(f("S SS SSSS", 5), "5 05 0005");
        assert_eq!(
            f("z zzzz Z X XX XXX", T),
            "UTC Coordinated Universal Time +0000 Z Z Z"
        );
        assert_eq!(f("''hh'o''clock'''", T), "'08o'clock'");
        assert_eq!(f("yyyy-MM-dd HH:mm:ss", -1), "1969-12-31 23:59:59");
    }

    #[test]
    fn formats_julian_dates_before_the_switch() {
        let switch = CUTOVER_DAY * DAY_MS;
        assert_eq!(f("yyyy-MM-dd D", switch), "1582-10-15 278");
        assert_eq!(f("yyyy-MM-dd", switch - DAY_MS), "1582-10-04");
        // Year 1 BC and the era.
        assert_eq!(f("yyyy G", julian_days(0, 6, 1) * DAY_MS), "0001 BC");
        assert_eq!(julian_from_days(julian_days(-44, 3, 15)), (-44, 3, 15));
    }

    #[test]
    fn parses_like_java() {
        assert_eq!(
            p("yyyy-MM-dd'T'HH:mm:ss.SSSXXX", "2019-03-24T20:52:59.123Z"),
            Some(T)
        );
        assert_eq!(
            p("yyyy-MM-dd'T'HH:mm:ss.SSSZ", "2019-03-24T22:52:59.123+0200"),
            Some(T)
        );
        assert_eq!(p("yyyyMMddHHmmssSSS", "20190324205259123"), Some(T));
        assert_eq!(
            p("yyyy-MM-dd", "2019-03-24 trailing text"),
            Some(T - T.rem_euclid(DAY_MS))
        );
        assert_eq!(
            p(
                "EEE, d MMM yyyy HH:mm:ss z",
                "Sun, 24 mar 2019 20:52:59 GMT"
            ),
            Some(T - 123)
        );
        assert_eq!(
            p("dd MMMM yyyy", "24 March 2019"),
            Some(T - T.rem_euclid(DAY_MS))
        );
        assert_eq!(p("hh:mm a", "12:30 PM"), Some(45_000_000));
        assert_eq!(p("hh:mm a", "12:30 am"), Some(1_800_000));
        assert_eq!(
            p("yyyy-MM-dd HH:mm z", "2019-03-24 20:52 UTC"),
            Some(T - 59_123)
        );
        assert_eq!(
            p("yyyy-MM-dd HH:mm z", "2019-03-24 22:52 GMT+2:00"),
            Some(T - 59_123)
        );
        assert_eq!(p("yyyy D", "2019 83"), Some(T - T.rem_euclid(DAY_MS)));
        // Spaces before a numeric field are skipped.
        assert_eq!(
            p("yyyy-MM-dd", "2019-  3-24"),
            Some(T - T.rem_euclid(DAY_MS))
        );
        // Lenient: the 32nd of February and hour 25 roll over.
        assert_eq!(
            p("yyyy-MM-dd HH", "2019-02-32 25"),
            p("yyyy-MM-dd HH", "2019-03-05 01")
        );
        assert_eq!(p("yyyy-MM-dd", "2019-13-01"), p("yyyy-MM-dd", "2020-01-01"));
        assert_eq!(p("yyyy-MM-dd", "2019-03"), None);
        assert_eq!(p("yyyy-MM-dd", "2019/03/24"), None);
        // Abutting fields take their count; the last one takes what is left.
        assert_eq!(
            p("yyyyMMdd", "2019032"),
            Some(days_from_civil(2019, 3, 2) * DAY_MS)
        );
        assert_eq!(p("yyyyMMdd", "201903"), None);
        assert_eq!(
            p("HH:mm", "10:00"),
            Some(36_000_000),
            "the date defaults to 1970-01-01"
        );
        assert_eq!(
            p("EEE", "Mon"),
            Some(4 * DAY_MS),
            "a weekday alone: the first of January 1970"
        );
        assert_eq!(
            p("yyyy-MM-dd G", "0044-03-15 BC"),
            Some(julian_days(-43, 3, 15) * DAY_MS)
        );
        assert_eq!(
            p("yyyy-MM-dd", "1582-10-10"),
            Some(julian_days(1582, 10, 10) * DAY_MS)
        );
    }

    #[test]
    fn refuses_what_it_cannot_reproduce() {
        let e = |pattern: &str, text: &str| {
            JavaDateFormat::compile(pattern)
                .unwrap()
                .parse(text)
                .unwrap_err()
        };
        assert!(e("yy-MM-dd", "19-03-24").contains("two-digit"));
        assert!(e("HH:mm z", "10:00 PST").contains("zone names"));
        assert!(e("yyyy-MM-dd", "2019-03-2E1").contains("exponent"));
        // A year of three digits is literal, not a two-digit year.
        assert_eq!(
            p("yy-MM-dd", "019-03-24"),
            Some(julian_days(19, 3, 24) * DAY_MS)
        );
    }
}
