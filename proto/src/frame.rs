//! Replication frames carried inside CopyData on a CopyBoth stream.
//!
//! Owns the payloads of the CopyData messages of a physical or logical
//! replication stream (PostgreSQL docs, "Streaming Replication Protocol"):
//! decoding the server's XLogData (`w`) and primary keepalive (`k`), and
//! encoding the client's standby status update (`r`). It knows nothing of the
//! CopyData envelope (`d` + length) nor of what is inside XLogData (see
//! [`crate::pgoutput`]), and never panics on input.

use bytes::{BufMut, Bytes, BytesMut};

use crate::wire::Reader;
use crate::{DecodeError, Lsn};

/// A server-to-client message inside CopyData.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicationMessage {
    /// `w`: a chunk of WAL data (for pgoutput: one logical message).
    XLogData(XLogData),
    /// `k`: the server's heartbeat, possibly asking for a status update.
    PrimaryKeepalive(PrimaryKeepalive),
}

/// `w`: WAL data sent by the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XLogData {
    /// The starting point of the WAL data in this message.
    pub wal_start: Lsn,
    /// The current end of WAL on the server.
    pub wal_end: Lsn,
    /// The server's clock at transmission, µs since 2000-01-01 UTC.
    pub send_time: i64,
    /// The WAL data: a zero-copy slice of the frame.
    pub data: Bytes,
}

/// `k`: primary keepalive message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrimaryKeepalive {
    /// The current end of WAL on the server.
    pub wal_end: Lsn,
    /// The server's clock at transmission, µs since 2000-01-01 UTC.
    pub send_time: i64,
    /// The server asks for a reply as soon as possible, to avoid a timeout
    /// disconnect.
    pub reply_requested: bool,
}

/// Decodes the payload of one CopyData message sent by the server.
pub fn decode_replication_message(buf: Bytes) -> Result<ReplicationMessage, DecodeError> {
    let mut r = Reader::new(buf);
    let tag = r.u8("replication message tag")?;
    match tag {
        b'w' => {
            let wal_start = r.lsn("xlogdata wal start")?;
            let wal_end = r.lsn("xlogdata wal end")?;
            let send_time = r.i64("xlogdata send time")?;
            Ok(ReplicationMessage::XLogData(XLogData {
                wal_start,
                wal_end,
                send_time,
                data: r.rest(),
            }))
        }
        b'k' => {
            let wal_end = r.lsn("keepalive wal end")?;
            let send_time = r.i64("keepalive send time")?;
            // walreceiver treats any non-zero byte as "reply requested".
            let reply_requested = r.u8("keepalive reply flag")? != 0;
            r.finish("keepalive message")?;
            Ok(ReplicationMessage::PrimaryKeepalive(PrimaryKeepalive {
                wal_end,
                send_time,
                reply_requested,
            }))
        }
        other => Err(DecodeError::UnknownTag {
            what: "replication message",
            tag: other,
            offset: 0,
        }),
    }
}

/// `r`: the client's standby status update.
///
/// walrelay reports the confirmable LSN as `flush` and `apply`; the server
/// may recycle WAL up to `flush` on a logical slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandbyStatusUpdate {
    /// Last WAL byte + 1 received and written by the client.
    pub write: Lsn,
    /// Last WAL byte + 1 durably handled by the client.
    pub flush: Lsn,
    /// Last WAL byte + 1 applied by the client.
    pub apply: Lsn,
    /// The client's clock, µs since 2000-01-01 UTC.
    pub client_time: i64,
    /// Ask the server to reply immediately (used to probe the connection).
    pub reply_requested: bool,
}

impl StandbyStatusUpdate {
    /// Length of the encoded payload: tag + three LSNs + time + flag.
    pub const ENCODED_LEN: usize = 1 + 8 + 8 + 8 + 8 + 1;

    /// Appends the CopyData payload (`r` + 34 bytes), not the `d` envelope.
    pub fn encode(&self, dst: &mut BytesMut) {
        dst.reserve(Self::ENCODED_LEN);
        dst.put_u8(b'r');
        dst.put_u64(self.write.0);
        dst.put_u64(self.flush.0);
        dst.put_u64(self.apply.0);
        dst.put_i64(self.client_time);
        dst.put_u8(u8::from(self.reply_requested));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(parts: &[&[u8]]) -> Bytes {
        Bytes::from(parts.concat())
    }

    #[test]
    fn decodes_xlogdata_zero_copy() {
        let buf = frame(&[
            b"w",
            &0x16_B374_D848u64.to_be_bytes(),
            &0x16_B374_D900u64.to_be_bytes(),
            &(-5i64).to_be_bytes(),
            b"B\x00payload",
        ]);
        let msg = decode_replication_message(buf.clone()).unwrap();
        let ReplicationMessage::XLogData(x) = msg else {
            panic!("expected xlogdata, got {msg:?}")
        };
        assert_eq!(x.wal_start, Lsn(0x16_B374_D848));
        assert_eq!(x.wal_end, Lsn(0x16_B374_D900));
        assert_eq!(x.send_time, -5);
        assert_eq!(&x.data[..], b"B\x00payload");
        // The data is a view into the frame, not a copy.
        assert_eq!(x.data.as_ptr(), buf[25..].as_ptr());
    }

    #[test]
    fn decodes_xlogdata_with_empty_data() {
        let buf = frame(&[b"w", &[0; 24]]);
        let ReplicationMessage::XLogData(x) = decode_replication_message(buf).unwrap() else {
            panic!("expected xlogdata")
        };
        assert!(x.data.is_empty());
        assert_eq!(x.wal_start, Lsn::ZERO);
    }

    #[test]
    fn decodes_keepalive() {
        for (flag, want) in [(0u8, false), (1, true)] {
            let buf = frame(&[
                b"k",
                &0x1_0000_0010u64.to_be_bytes(),
                &789_000_000i64.to_be_bytes(),
                &[flag],
            ]);
            assert_eq!(
                decode_replication_message(buf).unwrap(),
                ReplicationMessage::PrimaryKeepalive(PrimaryKeepalive {
                    wal_end: Lsn(0x1_0000_0010),
                    send_time: 789_000_000,
                    reply_requested: want,
                })
            );
        }
    }

    #[test]
    fn errors_carry_offsets() {
        assert_eq!(
            decode_replication_message(Bytes::new()),
            Err(DecodeError::Truncated {
                what: "replication message tag",
                offset: 0,
                needed: 1
            })
        );
        assert_eq!(
            decode_replication_message(Bytes::from_static(b"x123")),
            Err(DecodeError::UnknownTag {
                what: "replication message",
                tag: b'x',
                offset: 0
            })
        );
        // wal_end cut after 3 of its 8 bytes.
        assert_eq!(
            decode_replication_message(frame(&[b"w", &[0; 8], &[0; 3]])),
            Err(DecodeError::Truncated {
                what: "xlogdata wal end",
                offset: 9,
                needed: 5
            })
        );
        assert_eq!(
            decode_replication_message(frame(&[b"w", &[0; 16], &[0; 7]])),
            Err(DecodeError::Truncated {
                what: "xlogdata send time",
                offset: 17,
                needed: 1
            })
        );
        assert_eq!(
            decode_replication_message(frame(&[b"k", &[0; 16]])),
            Err(DecodeError::Truncated {
                what: "keepalive reply flag",
                offset: 17,
                needed: 1
            })
        );
        assert_eq!(
            decode_replication_message(frame(&[b"k", &[0; 17], b"zz"])),
            Err(DecodeError::TrailingBytes {
                what: "keepalive message",
                offset: 18,
                extra: 2
            })
        );
    }

    #[test]
    fn encodes_standby_status_update() {
        let upd = StandbyStatusUpdate {
            write: Lsn(0x16_B374_D848),
            flush: Lsn(0x16_B374_D000),
            apply: Lsn(0x15_0000_0001),
            client_time: 0x0102_0304_0506_0708,
            reply_requested: true,
        };
        let mut dst = BytesMut::from(&b"prefix"[..]);
        upd.encode(&mut dst);
        let want = frame(&[
            b"prefix",
            b"r",
            &[0, 0, 0, 0x16, 0xB3, 0x74, 0xD8, 0x48],
            &[0, 0, 0, 0x16, 0xB3, 0x74, 0xD0, 0x00],
            &[0, 0, 0, 0x15, 0, 0, 0, 1],
            &[1, 2, 3, 4, 5, 6, 7, 8],
            &[1],
        ]);
        assert_eq!(&dst[..], &want[..]);
        assert_eq!(dst.len() - 6, StandbyStatusUpdate::ENCODED_LEN);

        let mut dst = BytesMut::new();
        StandbyStatusUpdate {
            reply_requested: false,
            ..upd
        }
        .encode(&mut dst);
        assert_eq!(dst.last(), Some(&0));
    }
}
