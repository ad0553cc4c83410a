//! Bounds-checked reading of PostgreSQL's network byte order primitives.
//!
//! Owns the cursor every decoder uses over a `Bytes` buffer: fixed-width
//! big-endian integers, length-prefixed byte strings and NUL-terminated
//! strings, each returned as a zero-copy slice of the input. It must never
//! index or slice without checking the bounds first: every short read becomes
//! a [`DecodeError`] carrying the offset of the field.

use bytes::Bytes;

use crate::{DecodeError, Lsn};

/// A read position over one message.
pub(crate) struct Reader {
    buf: Bytes,
    pos: usize,
}

impl Reader {
    /// Starts reading at the first byte of `buf`.
    pub(crate) fn new(buf: Bytes) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Offset of the next byte to be read.
    pub(crate) fn offset(&self) -> usize {
        self.pos
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    fn truncated(&self, what: &'static str, len: usize) -> DecodeError {
        DecodeError::Truncated {
            what,
            offset: self.pos,
            needed: len.saturating_sub(self.remaining()),
        }
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DecodeError> {
        let arr = self
            .pos
            .checked_add(N)
            .and_then(|end| self.buf.get(self.pos..end))
            .and_then(|s| <[u8; N]>::try_from(s).ok())
            .ok_or_else(|| self.truncated(what, N))?;
        self.pos += N;
        Ok(arr)
    }

    /// Reads an Int8/Byte1.
    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        self.array::<1>(what).map(|[b]| b)
    }

    /// Reads a signed Int16.
    pub(crate) fn i16(&mut self, what: &'static str) -> Result<i16, DecodeError> {
        self.array(what).map(i16::from_be_bytes)
    }

    /// Reads an Int32 as unsigned (OIDs and transaction ids are unsigned on
    /// the server even though the protocol documentation calls them Int32).
    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        self.array(what).map(u32::from_be_bytes)
    }

    /// Reads a signed Int32.
    pub(crate) fn i32(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        self.array(what).map(i32::from_be_bytes)
    }

    /// Reads a signed Int64 (timestamps: µs since 2000-01-01).
    pub(crate) fn i64(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        self.array(what).map(i64::from_be_bytes)
    }

    /// Reads an Int64 LSN.
    pub(crate) fn lsn(&mut self, what: &'static str) -> Result<Lsn, DecodeError> {
        self.array(what).map(|a| Lsn(u64::from_be_bytes(a)))
    }

    /// Reads a signed Int32 count or length, refusing negative values.
    pub(crate) fn len_i32(&mut self, what: &'static str) -> Result<usize, DecodeError> {
        let offset = self.pos;
        let n = self.i32(what)?;
        usize::try_from(n).map_err(|_| DecodeError::Invalid {
            what,
            offset,
            reason: "negative length",
        })
    }

    /// Reads a signed Int16 count, refusing negative values.
    pub(crate) fn count_i16(&mut self, what: &'static str) -> Result<usize, DecodeError> {
        let offset = self.pos;
        let n = self.i16(what)?;
        usize::try_from(n).map_err(|_| DecodeError::Invalid {
            what,
            offset,
            reason: "negative count",
        })
    }

    /// Takes the next `len` bytes as a zero-copy slice.
    pub(crate) fn bytes(&mut self, len: usize, what: &'static str) -> Result<Bytes, DecodeError> {
        if len > self.remaining() {
            return Err(self.truncated(what, len));
        }
        let end = self.pos + len;
        let out = self.buf.slice(self.pos..end);
        self.pos = end;
        Ok(out)
    }

    /// Takes a NUL-terminated string, without its terminator, and skips the
    /// terminator.
    pub(crate) fn cstring(&mut self, what: &'static str) -> Result<Bytes, DecodeError> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        let Some(len) = rest.iter().position(|&b| b == 0) else {
            // At least the terminator is missing; the real string may be longer.
            return Err(self.truncated(what, self.remaining().saturating_add(1)));
        };
        let out = self.bytes(len, what)?;
        self.pos += 1;
        Ok(out)
    }

    /// Takes everything not read yet.
    pub(crate) fn rest(&mut self) -> Bytes {
        let len = self.remaining();
        let out = self.buf.slice(self.pos..self.pos + len);
        self.pos += len;
        out
    }

    /// Fails if any byte was left unread after a complete `what`.
    pub(crate) fn finish(&self, what: &'static str) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            extra => Err(DecodeError::TrailingBytes {
                what,
                offset: self.pos,
                extra,
            }),
        }
    }
}
