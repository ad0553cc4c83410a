//! Debezium's PostgreSQL type-mapping options ([`TypeModes`]):
//! `decimal.handling.mode`, `time.precision.mode`, `binary.handling.mode`,
//! `interval.handling.mode`, `hstore.handling.mode` and
//! `money.fraction.digits`, with Debezium 3.6's names and defaults.
//!
//! Owns the option values and their parsing from Debezium's property text;
//! the mapping itself is in [`super::pg`]. It never reads a row.

use serde::Deserialize;

/// Debezium key of [`TypeModes::decimal_handling_mode`].
pub const KEY_DECIMAL_HANDLING_MODE: &str = "decimal.handling.mode";
/// Debezium key of [`TypeModes::time_precision_mode`].
pub const KEY_TIME_PRECISION_MODE: &str = "time.precision.mode";
/// Debezium key of [`TypeModes::binary_handling_mode`].
pub const KEY_BINARY_HANDLING_MODE: &str = "binary.handling.mode";
/// Debezium key of [`TypeModes::interval_handling_mode`].
pub const KEY_INTERVAL_HANDLING_MODE: &str = "interval.handling.mode";
/// Debezium key of [`TypeModes::hstore_handling_mode`].
pub const KEY_HSTORE_HANDLING_MODE: &str = "hstore.handling.mode";
/// Debezium key of [`TypeModes::money_fraction_digits`].
pub const KEY_MONEY_FRACTION_DIGITS: &str = "money.fraction.digits";
/// Debezium's default `money.fraction.digits`.
pub(crate) const DEFAULT_MONEY_FRACTION_DIGITS: u8 = 2;

/// `decimal.handling.mode`: numeric and money columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum DecimalMode {
    /// Connect `Decimal` (numeric(p,s), money) or `VariableScaleDecimal`
    /// (numeric); NaN and infinities stop Debezium's task.
    #[default]
    Precise,
    /// FLOAT64 (`BigDecimal.doubleValue`; NaN and infinities as doubles).
    Double,
    /// STRING (`toPlainString`; NaN and infinities as `NAN`,
    /// `POSITIVE_INFINITY`, `NEGATIVE_INFINITY`).
    String,
}

/// `time.precision.mode`: date, time and timestamp columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub(crate) enum TimePrecisionMode {
    /// Milliseconds up to precision 3, microseconds above.
    #[default]
    Adaptive,
    /// As adaptive, but time always in microseconds.
    AdaptiveTimeMicroseconds,
    /// ISO-8601 strings (`IsoDate`, `IsoTime`, `IsoTimestamp`).
    Isostring,
    /// Kafka Connect's own `Date`, `Time` and `Timestamp` (milliseconds).
    Connect,
    /// Time and timestamp in microseconds.
    Microseconds,
    /// Time and timestamp in nanoseconds.
    Nanoseconds,
}

/// `binary.handling.mode`: bytea columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
pub enum BinaryMode {
    /// BYTES.
    #[default]
    #[serde(rename = "bytes")]
    Bytes,
    /// STRING, Base64.
    #[serde(rename = "base64")]
    Base64,
    /// STRING, URL-safe Base64 (with padding).
    #[serde(rename = "base64-url-safe")]
    Base64UrlSafe,
    /// STRING, lowercase hexadecimal.
    #[serde(rename = "hex")]
    Hex,
}

/// `interval.handling.mode`: interval columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum IntervalMode {
    /// INT64 `MicroDuration` (a month counts 30.4375 days).
    #[default]
    Numeric,
    /// STRING `Interval`, ISO-8601 `PnYnMnDTnHnMnS`.
    String,
}

/// `hstore.handling.mode`: hstore columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum HstoreMode {
    /// STRING `io.debezium.data.Json`.
    #[default]
    Json,
    /// MAP of STRING to optional STRING.
    Map,
}

/// How Debezium's PostgreSQL connector maps column types, as its options
/// say (native TOML: `[debezium.column_types]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TypeModes {
    /// `precise`, `double` or `string` (`decimal.handling.mode`).
    pub(crate) decimal_handling_mode: DecimalMode,
    /// `adaptive`, `adaptive_time_microseconds`, `isostring`, `connect`,
    /// `microseconds` or `nanoseconds` (`time.precision.mode`).
    pub(crate) time_precision_mode: TimePrecisionMode,
    /// `bytes`, `base64`, `base64-url-safe` or `hex` (`binary.handling.mode`).
    pub binary_handling_mode: BinaryMode,
    /// `numeric` or `string` (`interval.handling.mode`).
    pub(crate) interval_handling_mode: IntervalMode,
    /// `json` or `map` (`hstore.handling.mode`).
    pub(crate) hstore_handling_mode: HstoreMode,
    /// Scale of money in `precise` mode (`money.fraction.digits`).
    pub(crate) money_fraction_digits: u8,
}

impl Default for TypeModes {
    fn default() -> Self {
        TypeModes {
            decimal_handling_mode: DecimalMode::Precise,
            time_precision_mode: TimePrecisionMode::Adaptive,
            binary_handling_mode: BinaryMode::Bytes,
            interval_handling_mode: IntervalMode::Numeric,
            hstore_handling_mode: HstoreMode::Json,
            money_fraction_digits: DEFAULT_MONEY_FRACTION_DIGITS,
        }
    }
}

/// A Debezium property value that is not one of the option's values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not one of {allowed}")]
pub struct InvalidMode {
    /// The value given.
    pub(crate) value: String,
    /// The values Debezium accepts.
    pub(crate) allowed: &'static str,
}

fn pick<T: Copy>(
    value: &str,
    table: &[(&str, T)],
    allowed: &'static str,
) -> Result<T, InvalidMode> {
    // Debezium's EnumeratedValue.parse trims and ignores case.
    let v = value.trim();
    table
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(v))
        .map(|(_, m)| *m)
        .ok_or_else(|| InvalidMode {
            value: value.to_owned(),
            allowed,
        })
}

impl TypeModes {
    /// Sets the option of Debezium key `key` from its property text;
    /// `Ok(false)` when `key` is not one of these options.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, InvalidMode> {
        match key {
            KEY_DECIMAL_HANDLING_MODE => {
                self.decimal_handling_mode = pick(
                    value,
                    &[
                        ("precise", DecimalMode::Precise),
                        ("double", DecimalMode::Double),
                        ("string", DecimalMode::String),
                    ],
                    "precise, double, string",
                )?;
            }
            KEY_TIME_PRECISION_MODE => {
                self.time_precision_mode = pick(
                    value,
                    &[
                        ("adaptive", TimePrecisionMode::Adaptive),
                        (
                            "adaptive_time_microseconds",
                            TimePrecisionMode::AdaptiveTimeMicroseconds,
                        ),
                        ("isostring", TimePrecisionMode::Isostring),
                        ("connect", TimePrecisionMode::Connect),
                        ("microseconds", TimePrecisionMode::Microseconds),
                        ("nanoseconds", TimePrecisionMode::Nanoseconds),
                    ],
                    "adaptive, adaptive_time_microseconds, isostring, connect, microseconds, nanoseconds",
                )?;
            }
            KEY_BINARY_HANDLING_MODE => {
                self.binary_handling_mode = pick(
                    value,
                    &[
                        ("bytes", BinaryMode::Bytes),
                        ("base64", BinaryMode::Base64),
                        ("base64-url-safe", BinaryMode::Base64UrlSafe),
                        ("hex", BinaryMode::Hex),
                    ],
                    "bytes, base64, base64-url-safe, hex",
                )?;
            }
            KEY_INTERVAL_HANDLING_MODE => {
                self.interval_handling_mode = pick(
                    value,
                    &[
                        ("numeric", IntervalMode::Numeric),
                        ("string", IntervalMode::String),
                    ],
                    "numeric, string",
                )?;
            }
            KEY_HSTORE_HANDLING_MODE => {
                self.hstore_handling_mode = pick(
                    value,
                    &[("json", HstoreMode::Json), ("map", HstoreMode::Map)],
                    "json, map",
                )?;
            }
            KEY_MONEY_FRACTION_DIGITS => {
                // Debezium's Type.SHORT; a scale beyond what money can hold
                // (PostgreSQL's is 2 under most locales) is kept as given,
                // up to what walrelay renders.
                self.money_fraction_digits = value
                    .trim()
                    .parse::<u8>()
                    .ok()
                    .filter(|d| *d <= 38)
                    .ok_or_else(|| InvalidMode {
                    value: value.to_owned(),
                    allowed: "an integer from 0 to 38",
                })?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debezium_values_parse_by_key() {
        let mut m = TypeModes::default();
        assert!(m.set(KEY_DECIMAL_HANDLING_MODE, " DOUBLE ").unwrap());
        assert_eq!(m.decimal_handling_mode, DecimalMode::Double);
        assert!(m.set(KEY_BINARY_HANDLING_MODE, "base64-url-safe").unwrap());
        assert_eq!(m.binary_handling_mode, BinaryMode::Base64UrlSafe);
        assert!(m
            .set(KEY_TIME_PRECISION_MODE, "adaptive_time_microseconds")
            .unwrap());
        assert!(m.set(KEY_MONEY_FRACTION_DIGITS, "0").unwrap());
        assert_eq!(m.money_fraction_digits, 0);
        assert!(m.set(KEY_TIME_PRECISION_MODE, "millis").is_err());
        assert!(m.set(KEY_MONEY_FRACTION_DIGITS, "-1").is_err());
        assert!(!m.set("decimal.mode", "double").unwrap());
    }
}
