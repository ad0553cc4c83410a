//! Property tests: no decoder entry point panics on any input.
//!
//! Feeds random bytes, random bytes behind every known tag, and mutated or
//! truncated copies of the recorded fixture messages to
//! `decode_replication_message` and to `decode_message` for protocol versions
//! 1 to 4 inside and outside a stream block. A decoder may return any
//! `Result`; it must never panic, hang or allocate from an untrusted count.
//! Also checks that encoding a generated message and decoding it gives it
//! back, so the no-panic property is not satisfied by rejecting everything.

mod fixture_file;

use std::collections::HashMap;

use bytes::{BufMut, Bytes, BytesMut};
use proptest::prelude::*;
use walrelay_proto::frame::{decode_replication_message, ReplicationMessage};
use walrelay_proto::pgoutput::{
    decode, decode_message, ColumnValue, DecoderState, Insert, LogicalMessage, OldTuple, TupleData,
    Update,
};
use walrelay_proto::{DecodeError, Lsn};

const TAGS: &[u8] = b"BCORYIUDTMSEcAbPKrpwk";

/// Runs every entry point on `buf`; only a panic can fail.
fn exercise(buf: &Bytes) {
    let frame = decode_replication_message(buf.clone());
    // Inside a CopyData the pgoutput message is the XLogData payload.
    let inner = match &frame {
        Ok(ReplicationMessage::XLogData(x)) => Some(x.data.clone()),
        _ => None,
    };
    for v in 1..=4 {
        for in_stream in [false, true] {
            check_error_offset(buf, decode_message(buf.clone(), v, in_stream));
            if let Some(inner) = &inner {
                check_error_offset(inner, decode_message(inner.clone(), v, in_stream));
            }
        }
        let mut st = DecoderState::new(v);
        let _ = decode(&mut st, buf.clone());
    }
}

/// An error's offset always points inside (or just past) the input.
fn check_error_offset(buf: &Bytes, res: Result<LogicalMessage, DecodeError>) {
    let offset = match res {
        Ok(_) | Err(DecodeError::UnsupportedVersion { .. }) => return,
        Err(DecodeError::Truncated { offset, needed, .. }) => {
            assert!(needed >= 1, "truncated error with needed = 0");
            offset
        }
        Err(DecodeError::UnknownTag { offset, .. } | DecodeError::Invalid { offset, .. }) => {
            assert!(
                offset < buf.len(),
                "tag/invalid offset {offset} past input {}",
                buf.len()
            );
            offset
        }
        Err(DecodeError::TrailingBytes { offset, extra, .. }) => {
            assert_eq!(offset + extra, buf.len());
            offset
        }
    };
    assert!(
        offset <= buf.len(),
        "offset {offset} past input {}",
        buf.len()
    );
}

/// Every fixture message, raw and wrapped in an XLogData frame.
fn fixture_messages() -> Vec<Bytes> {
    let mut out = Vec::new();
    for scenario in fixture_file::load_all() {
        for m in scenario.messages {
            let mut frame = BytesMut::with_capacity(25 + m.data.len());
            frame.put_u8(b'w');
            frame.put_u64(m.lsn.0);
            frame.put_u64(m.lsn.0);
            frame.put_i64(0);
            frame.put_slice(&m.data);
            out.push(m.data);
            out.push(frame.freeze());
        }
    }
    out
}

#[derive(Debug, Clone)]
enum Mutation {
    Truncate(usize),
    Flip {
        at: usize,
        xor: u8,
    },
    Set {
        at: usize,
        byte: u8,
    },
    Insert {
        at: usize,
        bytes: Vec<u8>,
    },
    Remove {
        at: usize,
        len: usize,
    },
    /// Overwrite 4 bytes with an extreme Int32 (lengths, counts).
    Int32 {
        at: usize,
        value: i32,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), 1..=255u8).prop_map(|(at, xor)| Mutation::Flip { at, xor }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Set { at, byte }),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        (any::<usize>(), 1..8usize).prop_map(|(at, len)| Mutation::Remove { at, len }),
        (
            any::<usize>(),
            prop_oneof![
                Just(-1),
                Just(i32::MIN),
                Just(i32::MAX),
                Just(0),
                Just(0x7FFF)
            ]
        )
            .prop_map(|(at, value)| Mutation::Int32 { at, value }),
    ]
}

fn apply(buf: &[u8], muts: &[Mutation]) -> Bytes {
    let mut v = buf.to_vec();
    for m in muts {
        let len = v.len();
        let pos = |at: usize| if len == 0 { 0 } else { at % len };
        match m {
            Mutation::Truncate(at) => v.truncate(pos(*at)),
            Mutation::Flip { at, xor } if len > 0 => v[pos(*at)] ^= xor,
            Mutation::Set { at, byte } if len > 0 => v[pos(*at)] = *byte,
            Mutation::Insert { at, bytes } => {
                let p = if len == 0 { 0 } else { at % (len + 1) };
                v.splice(p..p, bytes.iter().copied());
            }
            Mutation::Remove { at, len: n } if len > 0 => {
                let p = pos(*at);
                v.drain(p..(p + n).min(len));
            }
            Mutation::Int32 { at, value } if len >= 4 => {
                let p = at % (len - 3);
                v[p..p + 4].copy_from_slice(&value.to_be_bytes());
            }
            _ => {}
        }
    }
    Bytes::from(v)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(buf in prop::collection::vec(any::<u8>(), 0..300)) {
        exercise(&Bytes::from(buf));
    }

    /// Random bytes after a valid tag reach the message bodies far more often.
    #[test]
    fn random_bodies_never_panic(
        tag in prop::sample::select(TAGS),
        body in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        let mut v = vec![tag];
        v.extend_from_slice(&body);
        exercise(&Bytes::from(v));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    /// Mutated and truncated real server messages. Skipped (passing) only
    /// while `tests/fixtures/` holds no recordings yet.
    #[test]
    fn mutated_fixtures_never_panic(
        pick in any::<prop::sample::Index>(),
        muts in prop::collection::vec(mutation(), 1..6),
    ) {
        let fixtures = FIXTURES.with(std::clone::Clone::clone);
        if fixtures.is_empty() {
            return Ok(());
        }
        let original = pick.get(&fixtures);
        exercise(original);
        exercise(&apply(original, &muts));
    }
}

thread_local! {
    static FIXTURES: Vec<Bytes> = fixture_messages();
}

#[test]
fn every_prefix_of_every_fixture_never_panics() {
    let fixtures = fixture_messages();
    if fixtures.is_empty() {
        eprintln!("note: tests/fixtures/ has no recordings yet; only random inputs ran");
    }
    // The thousands of streamed rows differ only in their values: a few of
    // each tag and length cover their structure (debug builds are slow).
    let mut seen: HashMap<(u8, usize), usize> = HashMap::new();
    for buf in fixtures {
        let shape = seen
            .entry((buf.first().copied().unwrap_or(0), buf.len()))
            .or_default();
        *shape += 1;
        if *shape > 3 {
            continue;
        }
        // Every cut of ordinary messages; for the 12 kB TOAST value a stride
        // keeps this linear instead of quadratic.
        let step = if buf.len() > 512 { 61 } else { 1 };
        let cuts = (0..buf.len().min(256))
            .chain((256..buf.len()).step_by(step))
            .chain(buf.len().saturating_sub(16)..=buf.len());
        for cut in cuts {
            exercise(&buf.slice(..cut));
        }
    }
}

// ---- round trip of generated messages ----

fn column_value() -> impl Strategy<Value = ColumnValue> {
    prop_oneof![
        Just(ColumnValue::Null),
        Just(ColumnValue::UnchangedToast),
        prop::collection::vec(any::<u8>(), 0..40).prop_map(|v| ColumnValue::Text(Bytes::from(v))),
        prop::collection::vec(any::<u8>(), 0..40).prop_map(|v| ColumnValue::Binary(Bytes::from(v))),
    ]
}

fn tuple() -> impl Strategy<Value = TupleData> {
    prop::collection::vec(column_value(), 0..12).prop_map(|columns| TupleData { columns })
}

/// Writes a tuple as proto.c's `logicalrep_write_tuple` does.
fn put_tuple(dst: &mut BytesMut, t: &TupleData) {
    dst.put_i16(t.columns.len() as i16);
    for c in &t.columns {
        match c {
            ColumnValue::Null => dst.put_u8(b'n'),
            ColumnValue::UnchangedToast => dst.put_u8(b'u'),
            ColumnValue::Text(b) | ColumnValue::Binary(b) => {
                dst.put_u8(if matches!(c, ColumnValue::Text(_)) {
                    b't'
                } else {
                    b'b'
                });
                dst.put_i32(b.len() as i32);
                dst.put_slice(b);
            }
        }
    }
}

proptest! {
    #[test]
    fn insert_and_update_round_trip(
        in_stream in any::<bool>(),
        xid in any::<u32>(),
        relid in any::<u32>(),
        old in prop::option::of((any::<bool>(), tuple())),
        new in tuple(),
        insert in any::<bool>(),
    ) {
        let xid = in_stream.then_some(xid);
        let mut buf = BytesMut::new();
        let expected = if insert {
            buf.put_u8(b'I');
            if let Some(x) = xid { buf.put_u32(x); }
            buf.put_u32(relid);
            buf.put_u8(b'N');
            put_tuple(&mut buf, &new);
            LogicalMessage::Insert(Insert { xid, relation_id: relid, new })
        } else {
            buf.put_u8(b'U');
            if let Some(x) = xid { buf.put_u32(x); }
            buf.put_u32(relid);
            let old = old.map(|(key, t)| {
                buf.put_u8(if key { b'K' } else { b'O' });
                put_tuple(&mut buf, &t);
                if key { OldTuple::Key(t) } else { OldTuple::Full(t) }
            });
            buf.put_u8(b'N');
            put_tuple(&mut buf, &new);
            LogicalMessage::Update(Update { xid, relation_id: relid, old, new })
        };
        let buf = buf.freeze();
        for v in 1..=4 {
            prop_assert_eq!(decode_message(buf.clone(), v, in_stream), Ok(expected.clone()));
        }
        // Every strict prefix is an error, never a panic and never a success.
        for cut in 0..buf.len() {
            prop_assert!(decode_message(buf.slice(..cut), 2, in_stream).is_err());
        }
    }

    #[test]
    fn xlogdata_round_trip(start in any::<u64>(), end in any::<u64>(), t in any::<i64>(),
                           data in prop::collection::vec(any::<u8>(), 0..64)) {
        let mut buf = BytesMut::new();
        buf.put_u8(b'w');
        buf.put_u64(start);
        buf.put_u64(end);
        buf.put_i64(t);
        buf.put_slice(&data);
        let Ok(ReplicationMessage::XLogData(x)) = decode_replication_message(buf.freeze()) else {
            panic!("xlogdata did not decode");
        };
        prop_assert_eq!(x.wal_start, Lsn(start));
        prop_assert_eq!(x.wal_end, Lsn(end));
        prop_assert_eq!(x.send_time, t);
        prop_assert_eq!(&x.data[..], &data[..]);
    }
}
