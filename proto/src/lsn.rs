//! Log sequence numbers.
//!
//! Owns [`Lsn`], a byte position in PostgreSQL's write-ahead log, with the
//! server's own text form (`16/B374D848`: high and low 32 bits in upper-case
//! hexadecimal). Arithmetic never panics: subtraction is explicit
//! (`checked_sub`/`saturating_sub`) because a negative distance is almost
//! always a bug the caller must see.

use std::fmt;
use std::ops::{Add, AddAssign};
use std::str::FromStr;

/// A position in the write-ahead log, in bytes.
///
/// `Lsn(0)` ([`Lsn::ZERO`]) is PostgreSQL's `InvalidXLogRecPtr`.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lsn(pub u64);

impl Lsn {
    /// The invalid / unset LSN, `0/0`.
    pub const ZERO: Lsn = Lsn(0);

    /// Bytes from `other` to `self`, or `None` if `other` is later.
    pub fn checked_sub(self, other: Lsn) -> Option<u64> {
        self.0.checked_sub(other.0)
    }

    /// Bytes from `other` to `self`, or 0 if `other` is later (for lag
    /// metrics, where a racing read must not show a huge number).
    pub fn saturating_sub(self, other: Lsn) -> u64 {
        self.0.saturating_sub(other.0)
    }

    /// `self` advanced by `bytes`, or `None` past the end of the LSN space.
    pub fn checked_add(self, bytes: u64) -> Option<Lsn> {
        self.0.checked_add(bytes).map(Lsn)
    }
}

/// Advances by a number of bytes, saturating at `FFFFFFFF/FFFFFFFF` (no server
/// gets there; saturating keeps the operator panic-free).
impl Add<u64> for Lsn {
    type Output = Lsn;

    fn add(self, bytes: u64) -> Lsn {
        Lsn(self.0.saturating_add(bytes))
    }
}

/// Advances in place by a number of bytes, saturating like [`Add`].
impl AddAssign<u64> for Lsn {
    fn add_assign(&mut self, bytes: u64) {
        *self = *self + bytes;
    }
}

impl From<u64> for Lsn {
    fn from(v: u64) -> Lsn {
        Lsn(v)
    }
}

impl From<Lsn> for u64 {
    fn from(lsn: Lsn) -> u64 {
        lsn.0
    }
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xFFFF_FFFF)
    }
}

/// Same text as `Display`, so logs and assertion failures read like `pg_lsn`.
impl fmt::Debug for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Why a string is not an LSN.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid lsn {input:?}: {reason}")]
pub struct ParseLsnError {
    input: String,
    reason: &'static str,
}

impl ParseLsnError {
    fn new(input: &str, reason: &'static str) -> Self {
        ParseLsnError {
            input: input.to_owned(),
            reason,
        }
    }
}

/// Parses one half of `X/Y` as PostgreSQL's `pg_lsn_in` does: 1 to 8 hex
/// digits, no sign, no spaces.
fn parse_half(s: &str, input: &str) -> Result<u64, ParseLsnError> {
    if s.is_empty() || s.len() > 8 {
        return Err(ParseLsnError::new(
            input,
            "each half must have 1 to 8 hex digits",
        ));
    }
    // from_str_radix accepts a leading '+', pg_lsn does not.
    if !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ParseLsnError::new(input, "not a hexadecimal number"));
    }
    u64::from_str_radix(s, 16).map_err(|_| ParseLsnError::new(input, "not a hexadecimal number"))
}

/// Parses `X/Y` (upper- or lower-case hex), the form `pg_lsn` prints.
impl FromStr for Lsn {
    type Err = ParseLsnError;

    fn from_str(s: &str) -> Result<Lsn, ParseLsnError> {
        let (hi, lo) = s
            .split_once('/')
            .ok_or_else(|| ParseLsnError::new(s, "missing '/'"))?;
        Ok(Lsn((parse_half(hi, s)? << 32) | parse_half(lo, s)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_like_pg_lsn() {
        assert_eq!(Lsn(0x16_B374_D848).to_string(), "16/B374D848");
        assert_eq!(format!("{:?}", Lsn(0x16_B374_D848)), "16/B374D848");
        assert_eq!(Lsn::ZERO.to_string(), "0/0");
        assert_eq!(Lsn(0x0000_0001_0000_000A).to_string(), "1/A");
        assert_eq!(Lsn(u64::MAX).to_string(), "FFFFFFFF/FFFFFFFF");
    }

    #[test]
    fn parses_upper_and_lower_case() {
        assert_eq!("16/B374D848".parse::<Lsn>(), Ok(Lsn(0x16_B374_D848)));
        assert_eq!("16/b374d848".parse::<Lsn>(), Ok(Lsn(0x16_B374_D848)));
        assert_eq!("0/0".parse::<Lsn>(), Ok(Lsn::ZERO));
        assert_eq!("FFFFFFFF/FFFFFFFF".parse::<Lsn>(), Ok(Lsn(u64::MAX)));
        assert_eq!("00000001/0000000A".parse::<Lsn>(), Ok(Lsn(0x1_0000_000A)));
    }

    #[test]
    fn round_trips() {
        for v in [0, 1, 0xFFFF_FFFF, 0x1_0000_0000, 0x16_B374_D848, u64::MAX] {
            assert_eq!(Lsn(v).to_string().parse::<Lsn>(), Ok(Lsn(v)));
        }
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "",
            "/",
            "16",
            "16/",
            "/B374D848",
            "16/B374D84G",
            "+16/1",
            "16/-1",
            "16/ 1",
            "123456789/0",
            "0/123456789",
            "1/2/3",
            "0x16/1",
        ] {
            let err = bad.parse::<Lsn>().unwrap_err();
            assert!(err.to_string().starts_with("invalid lsn "), "{bad}: {err}");
        }
    }

    #[test]
    fn orders_by_position() {
        let a: Lsn = "0/FFFFFFFF".parse().unwrap();
        let b: Lsn = "1/0".parse().unwrap();
        assert!(a < b);
        assert!(Lsn::ZERO < a);
        let mut v = vec![b, Lsn::ZERO, a];
        v.sort();
        assert_eq!(v, vec![Lsn::ZERO, a, b]);
    }

    #[test]
    fn byte_arithmetic() {
        let a = Lsn(0xFFFF_FFFF);
        assert_eq!(a + 1, Lsn(0x1_0000_0000));
        assert_eq!((a + 1).to_string(), "1/0");
        assert_eq!(Lsn(u64::MAX) + 5, Lsn(u64::MAX));
        let mut c = Lsn(10);
        c += 5;
        assert_eq!(c, Lsn(15));
        assert_eq!(Lsn(15).checked_sub(Lsn(10)), Some(5));
        assert_eq!(Lsn(10).checked_sub(Lsn(15)), None);
        assert_eq!(Lsn(10).saturating_sub(Lsn(15)), 0);
        assert_eq!(Lsn(15).saturating_sub(Lsn(10)), 5);
        assert_eq!(Lsn(u64::MAX).checked_add(1), None);
        assert_eq!(u64::from(Lsn::from(42u64)), 42);
    }
}
