//! The decoding error shared by every decoder in this crate.
//!
//! Owns [`DecodeError`]: what was being read, at which byte offset of the
//! input (counted from the first byte handed to the decoder) and why it
//! failed. It must never carry the input bytes themselves, because they may
//! hold row data that must not reach logs.

/// Why a frame or pgoutput message could not be decoded.
///
/// Every variant names the field or message being read (`what`) so a person
/// can find the spot in the protocol documentation without a hex dump.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ended inside a field.
    #[error("unexpected end of {what} at offset {offset}: needed {needed} more bytes")]
    Truncated {
        /// The field being read.
        what: &'static str,
        /// Offset at which the field starts.
        offset: usize,
        /// How many more bytes the field needs (for a NUL-terminated string:
        /// at least one, the missing terminator).
        needed: usize,
    },
    /// A message, tuple or column kind byte this crate does not know.
    #[error("unknown {what} tag {tag:?} at offset {offset}")]
    UnknownTag {
        /// The kind of tag being read.
        what: &'static str,
        /// The tag byte found.
        tag: u8,
        /// Offset of the tag byte.
        offset: usize,
    },
    /// A field that is present but holds an impossible value (a negative
    /// length or count, a message the negotiated protocol version cannot
    /// carry).
    #[error("invalid {what} at offset {offset}: {reason}")]
    Invalid {
        /// The field being read.
        what: &'static str,
        /// Offset at which the field starts.
        offset: usize,
        /// Why the value is impossible.
        reason: &'static str,
    },
    /// The message was fully decoded but bytes were left after it.
    #[error("{what} has {extra} trailing bytes at offset {offset}")]
    TrailingBytes {
        /// The message that was decoded.
        what: &'static str,
        /// Offset of the first byte after the decoded message.
        offset: usize,
        /// How many bytes were left.
        extra: usize,
    },
    /// The caller asked for a pgoutput protocol version this crate does not
    /// implement (only 1 to 4 exist as of PostgreSQL 16).
    #[error("unsupported pgoutput protocol version {version}")]
    UnsupportedVersion {
        /// The requested protocol version.
        version: u32,
    },
}
