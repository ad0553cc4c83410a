//! Decodes the pgoutput bytes recorded from a real PostgreSQL 15 by
//! `scripts/record-fixtures.sh` and checks them against what the recording
//! SQL did.
//!
//! Each scenario file is decoded message by message through the stateful
//! `decode`, so stream blocks change how later messages are read exactly as
//! on a live connection. Two kinds of checks:
//! - invariants every pgoutput stream obeys, tied to the file's own `lsn` and
//!   `xid` columns (which change on re-recording): a Begin's xid is the row's
//!   xid, a Commit's end LSN is the row's LSN, a Begin's final LSN is its
//!   Commit's commit LSN, in-stream changes carry an xid and others do not;
//! - per scenario, the exact message sequence rendered as text, with literal
//!   relation and type names, column values, prefixes, contents and gids
//!   taken from the SQL in `scripts/record-fixtures.sh`.
//!
//! A scenario file with no expectations here fails, so a new recording cannot
//! pass unchecked; a scenario expected here but not recorded is reported on
//! stderr (the recording script may not have produced it yet).

mod fixture_file;

use std::collections::HashMap;
use std::fmt::Write as _;

use bytes::Bytes;
use fixture_file::Scenario;
use walrelay_proto::pgoutput::{
    decode, ColumnValue, DecoderState, LogicalMessage, OldTuple, TupleData,
};
use walrelay_proto::{Lsn, RelationCache};

/// A decoded message with the file columns it came with.
struct Decoded {
    line: usize,
    lsn: Lsn,
    xid: u32,
    msg: LogicalMessage,
    /// `msg` rendered by [`Renderer::render`].
    text: String,
}

/// Text as a person reads it; only control characters are escaped, and values
/// longer than 200 bytes are shortened to their length, first 64 and last 32
/// bytes (the scenario checks compare those long values in full).
fn bytes_text(b: &Bytes) -> String {
    let text = String::from_utf8_lossy(b);
    let esc = |t: &str| -> String {
        t.chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_debug().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect()
    };
    match (text.get(..64), text.get(text.len().saturating_sub(32)..)) {
        (Some(head), Some(tail)) if text.len() > 200 => {
            format!("{}…({} bytes)…{}", esc(head), text.len(), esc(tail))
        }
        _ => esc(&text),
    }
}

fn tuple_text(t: &TupleData) -> String {
    let cols: Vec<String> = t
        .iter()
        .map(|c| match c {
            ColumnValue::Null => "null".to_owned(),
            ColumnValue::UnchangedToast => "toast".to_owned(),
            ColumnValue::Text(b) => format!("'{}'", bytes_text(b)),
            ColumnValue::Binary(b) => {
                let mut s = String::from("b'");
                for byte in b {
                    let _ = write!(s, "{byte:02x}");
                }
                s.push('\'');
                s
            }
        })
        .collect();
    format!("({})", cols.join(", "))
}

/// Renders messages as one line each: what a person would write down reading
/// the SQL. LSNs, xids and timestamps are left out (checked against the file
/// columns instead); relation and user type OIDs, which change on each
/// recording, are replaced by their announced names.
#[derive(Default)]
struct Renderer {
    rels: RelationCache,
    types: HashMap<u32, String>,
}

impl Renderer {
    fn rel(&self, id: u32) -> String {
        self.rels
            .get(id)
            .map(|r| r.qualified_name())
            .unwrap_or_else(|| format!("<unannounced relation {id}>"))
    }

    fn render(&mut self, msg: &LogicalMessage) -> String {
        match msg {
            LogicalMessage::Begin(_) => "BEGIN".into(),
            LogicalMessage::Commit(c) => format!("COMMIT flags={}", c.flags),
            LogicalMessage::Origin(o) => {
                format!("ORIGIN {} commit_lsn={}", bytes_text(&o.name), o.commit_lsn)
            }
            LogicalMessage::Relation(r) => {
                let info = self.rels.apply(r);
                let cols: Vec<String> = info
                    .columns
                    .iter()
                    .map(|c| {
                        let ty = self
                            .types
                            .get(&c.type_oid)
                            .cloned()
                            .unwrap_or_else(|| c.type_oid.to_string());
                        let typmod = if c.type_modifier == -1 {
                            String::new()
                        } else {
                            format!("({})", c.type_modifier)
                        };
                        let key = if c.is_key { " key" } else { "" };
                        format!("{} {ty}{typmod}{key}", c.name)
                    })
                    .collect();
                format!(
                    "RELATION {} identity={} [{}]",
                    info.qualified_name(),
                    info.replica_identity as char,
                    cols.join(", ")
                )
            }
            LogicalMessage::Type(t) => {
                let name = format!("{}.{}", bytes_text(&t.namespace), bytes_text(&t.name));
                self.types.insert(t.id, name.clone());
                format!("TYPE {name}")
            }
            LogicalMessage::Insert(i) => {
                format!("INSERT {} {}", self.rel(i.relation_id), tuple_text(&i.new))
            }
            LogicalMessage::Update(u) => {
                let old = match &u.old {
                    None => String::new(),
                    Some(OldTuple::Key(t)) => format!(" key{}", tuple_text(t)),
                    Some(OldTuple::Full(t)) => format!(" old{}", tuple_text(t)),
                };
                format!(
                    "UPDATE {}{old} new{}",
                    self.rel(u.relation_id),
                    tuple_text(&u.new)
                )
            }
            LogicalMessage::Delete(d) => {
                let old = match &d.old {
                    OldTuple::Key(t) => format!("key{}", tuple_text(t)),
                    OldTuple::Full(t) => format!("old{}", tuple_text(t)),
                };
                format!("DELETE {} {old}", self.rel(d.relation_id))
            }
            LogicalMessage::Truncate(t) => {
                let names: Vec<String> = t.relation_ids.iter().map(|&id| self.rel(id)).collect();
                format!(
                    "TRUNCATE{}{} {}",
                    if t.cascade() { " cascade" } else { "" },
                    if t.restart_identity() {
                        " restart_identity"
                    } else {
                        ""
                    },
                    names.join(", ")
                )
            }
            LogicalMessage::Message(m) => format!(
                "MESSAGE {} prefix='{}' content='{}'",
                if m.transactional {
                    "transactional"
                } else {
                    "non-transactional"
                },
                bytes_text(&m.prefix),
                bytes_text(&m.content)
            ),
            LogicalMessage::StreamStart(s) => {
                if s.first_segment {
                    "STREAM START first".into()
                } else {
                    "STREAM START".into()
                }
            }
            LogicalMessage::StreamStop => "STREAM STOP".into(),
            LogicalMessage::StreamCommit(c) => format!("STREAM COMMIT flags={}", c.flags),
            LogicalMessage::StreamAbort(a) => {
                if a.subxid == a.xid {
                    "STREAM ABORT".into()
                } else {
                    "STREAM ABORT subtransaction".into()
                }
            }
            LogicalMessage::BeginPrepare(p) => {
                format!("BEGIN PREPARE gid='{}'", bytes_text(&p.gid))
            }
            LogicalMessage::Prepare(p) => format!("PREPARE gid='{}'", bytes_text(&p.gid)),
            LogicalMessage::CommitPrepared(p) => {
                format!("COMMIT PREPARED gid='{}'", bytes_text(&p.gid))
            }
            LogicalMessage::RollbackPrepared(p) => {
                format!("ROLLBACK PREPARED gid='{}'", bytes_text(&p.gid))
            }
            LogicalMessage::StreamPrepare(p) => {
                format!("STREAM PREPARE gid='{}'", bytes_text(&p.gid))
            }
        }
    }
}

/// Decodes a whole scenario, failing on the first message that does not
/// decode.
fn decode_scenario(s: &Scenario) -> Vec<Decoded> {
    let mut state = DecoderState::new(s.proto_version);
    let mut renderer = Renderer::default();
    s.messages
        .iter()
        .map(|m| {
            let msg = decode(&mut state, m.data.clone()).unwrap_or_else(|e| {
                panic!(
                    "{} line {}: {e} (in_stream={})",
                    s.name, m.line, state.in_stream
                )
            });
            let text = renderer.render(&msg);
            Decoded {
                line: m.line,
                lsn: m.lsn,
                xid: m.xid,
                msg,
                text,
            }
        })
        .collect()
}

/// The invariants of a pgoutput stream, checked against the file columns
/// (see the write locations set in PostgreSQL's `logical.c` callbacks).
fn check_invariants(s: &Scenario, msgs: &[Decoded]) {
    let at = |d: &Decoded| format!("{} line {} ({})", s.name, d.line, d.text);
    // The Begin or Begin Prepare of the transaction being sent.
    let mut open: Option<&Decoded> = None;
    let mut stream_xid: Option<u32> = None;
    for d in msgs {
        let change_xid = match &d.msg {
            LogicalMessage::Relation(r) => Some(r.xid),
            LogicalMessage::Type(t) => Some(t.xid),
            LogicalMessage::Insert(i) => Some(i.xid),
            LogicalMessage::Update(u) => Some(u.xid),
            LogicalMessage::Delete(x) => Some(x.xid),
            LogicalMessage::Truncate(t) => Some(t.xid),
            LogicalMessage::Message(m) => Some(m.xid),
            _ => None,
        };
        if let Some(xid) = change_xid {
            // Inside a stream block every change says which (sub)transaction
            // it belongs to; outside none does.
            assert_eq!(xid.is_some(), stream_xid.is_some(), "{}", at(d));
            assert_ne!(xid, Some(0), "{}", at(d));
            if stream_xid.is_none()
                && !matches!(&d.msg, LogicalMessage::Message(m) if !m.transactional)
            {
                let begin =
                    open.unwrap_or_else(|| panic!("{}: change outside a transaction", at(d)));
                assert_eq!(d.xid, begin.xid, "{}: xid column", at(d));
            }
        }
        match &d.msg {
            LogicalMessage::Begin(b) => {
                assert!(open.is_none(), "{}: nested begin", at(d));
                assert_eq!(b.xid, d.xid, "{}: begin xid vs xid column", at(d));
                // Written at the transaction's first LSN, before its commit.
                assert!(d.lsn <= b.final_lsn, "{}", at(d));
                open = Some(d);
            }
            LogicalMessage::Commit(c) => {
                let begin = open
                    .take()
                    .unwrap_or_else(|| panic!("{}: commit without begin", at(d)));
                let LogicalMessage::Begin(b) = &begin.msg else {
                    panic!("{}: commit closes {}", at(d), begin.text)
                };
                assert_eq!(
                    c.commit_lsn,
                    b.final_lsn,
                    "{}: commit lsn vs begin final lsn",
                    at(d)
                );
                assert_eq!(c.end_lsn, d.lsn, "{}: end lsn vs lsn column", at(d));
                assert!(c.commit_lsn < c.end_lsn, "{}", at(d));
                assert_eq!(d.xid, begin.xid, "{}: xid column", at(d));
                assert_eq!(c.flags, 0, "{}", at(d));
            }
            LogicalMessage::Origin(_) => {
                let begin =
                    open.unwrap_or_else(|| panic!("{}: origin outside a transaction", at(d)));
                assert_eq!((d.lsn, d.xid), (begin.lsn, begin.xid), "{}", at(d));
            }
            LogicalMessage::Message(m) => {
                assert_eq!(m.lsn, d.lsn, "{}: message lsn vs lsn column", at(d));
                if !m.transactional {
                    assert_eq!(d.xid, 0, "{}: non-transactional message xid", at(d));
                }
            }
            LogicalMessage::StreamStart(st) => {
                assert!(stream_xid.is_none(), "{}: nested stream start", at(d));
                assert!(open.is_none(), "{}: stream inside a transaction", at(d));
                assert_eq!(st.xid, d.xid, "{}", at(d));
                stream_xid = Some(st.xid);
            }
            LogicalMessage::StreamStop => {
                assert!(stream_xid.take().is_some(), "{}: stop without start", at(d));
            }
            LogicalMessage::StreamCommit(c) => {
                assert!(stream_xid.is_none(), "{}", at(d));
                assert_eq!(c.xid, d.xid, "{}", at(d));
                assert_eq!(c.end_lsn, d.lsn, "{}", at(d));
                assert!(c.commit_lsn < c.end_lsn, "{}", at(d));
                assert_eq!(c.flags, 0, "{}", at(d));
            }
            LogicalMessage::StreamAbort(a) => {
                assert!(stream_xid.is_none(), "{}", at(d));
                // Written under the aborted (sub)transaction's own xid.
                assert_eq!(a.subxid, d.xid, "{}", at(d));
                // PostgreSQL 15 never writes the version 4 abort fields.
                assert_eq!((a.abort_lsn, a.abort_time), (None, None), "{}", at(d));
            }
            LogicalMessage::BeginPrepare(p) => {
                assert!(open.is_none(), "{}: nested begin", at(d));
                assert_eq!(p.xid, d.xid, "{}", at(d));
                assert!(p.prepare_lsn < p.end_lsn, "{}", at(d));
                open = Some(d);
            }
            LogicalMessage::Prepare(p) => {
                let begin = open
                    .take()
                    .unwrap_or_else(|| panic!("{}: prepare without begin", at(d)));
                let LogicalMessage::BeginPrepare(b) = &begin.msg else {
                    panic!("{}: prepare closes {}", at(d), begin.text)
                };
                assert_eq!(p.xid, d.xid, "{}", at(d));
                assert_eq!(p.xid, b.xid, "{}", at(d));
                assert_eq!(p.gid, b.gid, "{}", at(d));
                assert_eq!(
                    (p.prepare_lsn, p.end_lsn),
                    (b.prepare_lsn, b.end_lsn),
                    "{}",
                    at(d)
                );
                assert_eq!(p.end_lsn, d.lsn, "{}", at(d));
            }
            LogicalMessage::StreamPrepare(p) => {
                assert!(stream_xid.is_none(), "{}", at(d));
                assert_eq!(p.xid, d.xid, "{}", at(d));
                assert_eq!(p.end_lsn, d.lsn, "{}", at(d));
                assert!(p.prepare_lsn < p.end_lsn, "{}", at(d));
            }
            LogicalMessage::CommitPrepared(p) => {
                assert!(open.is_none() && stream_xid.is_none(), "{}", at(d));
                assert_eq!(p.xid, d.xid, "{}", at(d));
                assert_eq!(p.end_lsn, d.lsn, "{}", at(d));
                assert!(p.commit_lsn < p.end_lsn, "{}", at(d));
            }
            LogicalMessage::RollbackPrepared(p) => {
                assert!(open.is_none() && stream_xid.is_none(), "{}", at(d));
                assert_eq!(p.xid, d.xid, "{}", at(d));
                assert_eq!(p.rollback_end_lsn, d.lsn, "{}", at(d));
                assert!(p.prepare_end_lsn < p.rollback_end_lsn, "{}", at(d));
            }
            _ => {}
        }
    }
    assert!(open.is_none(), "{}: transaction left open", s.name);
    assert!(stream_xid.is_none(), "{}: stream block left open", s.name);
}

// ---- expected content ----

/// MD5 as hex, for the `md5(i::text)` values the recording SQL generates
/// (RFC 1321; a test-only reimplementation, since the crate takes no
/// dependency for it).
fn md5_hex(input: &[u8]) -> String {
    const S: [u32; 16] = [7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21];
    let k: Vec<u32> = (0..64)
        .map(|i| ((i as f64 + 1.0).sin().abs() * 4_294_967_296.0) as u32)
        .collect();
    let mut msg = input.to_vec();
    let bit_len = (input.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bit_len.to_le_bytes());
    let mut h: [u32; 4] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];
    for chunk in msg.chunks(64) {
        let m: Vec<u32> = chunk
            .chunks(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        let [mut a, mut b, mut c, mut d] = h;
        for i in 0..64 {
            let (f, g) = match i / 16 {
                0 => ((b & c) | (!b & d), i),
                1 => ((d & b) | (!d & c), (5 * i + 1) % 16),
                2 => (b ^ c ^ d, (3 * i + 5) % 16),
                _ => (c ^ (b | !d), (7 * i) % 16),
            };
            let rotated = a
                .wrapping_add(f)
                .wrapping_add(k[i])
                .wrapping_add(m[g])
                .rotate_left(S[(i / 16) * 4 + i % 4]);
            a = d;
            d = c;
            c = b;
            b = b.wrapping_add(rotated);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d]) {
            *x = x.wrapping_add(y);
        }
    }
    h.iter()
        .flat_map(|w| w.to_le_bytes())
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[test]
fn md5_matches_known_values() {
    assert_eq!(md5_hex(b""), "d41d8cd98f00b204e9800998ecf8427e");
    assert_eq!(md5_hex(b"1"), "c4ca4238a0b923820dcc509a6f75849b");
    assert_eq!(md5_hex(b"400"), "18d8042386b79e2c279fd162df0205c8");
    assert_eq!(md5_hex(b"2000"), "08f90c1a417155361a5c4b8d297e0d78");
}

/// `INSERT INTO stream_rows SELECT i, 'stream-row-' || i || '-' || md5(i::text)`.
fn stream_row(i: u32) -> String {
    format!(
        "INSERT public.stream_rows ('{i}', 'stream-row-{i}-{}')",
        md5_hex(i.to_string().as_bytes())
    )
}

const STREAM_ROWS_RELATION: &str = "RELATION public.stream_rows identity=d [id 23 key, payload 25]";

fn assert_lines(name: &str, got: &[&str], want: &[&str]) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g, w, "{name}: message {} differs", i + 1);
    }
    assert_eq!(
        got.len(),
        want.len(),
        "{name}: {} messages decoded, {} expected; got {got:#?}",
        got.len(),
        want.len()
    );
}

/// Checks a streamed transaction: at least `min_blocks` blocks of
/// `STREAM START` .. `STREAM STOP` (only the first one marked first) whose contents, concatenated, are
/// `changes`, possibly interleaved with the messages in `between` (which come
/// outside blocks, in that order), then `ending` after the last block.
/// Returns the in-block messages in order, for further checks.
fn check_streamed<'a>(
    name: &str,
    msgs: &'a [Decoded],
    min_blocks: usize,
    between: &[&str],
    ending: &[&str],
) -> Vec<&'a Decoded> {
    let mut in_block = false;
    let mut blocks = 0;
    let mut inside = Vec::new();
    let mut outside = Vec::new();
    for d in msgs {
        match d.text.as_str() {
            "STREAM START first" | "STREAM START" => {
                assert!(!in_block, "{name} line {}", d.line);
                assert_eq!(
                    d.text == "STREAM START first",
                    blocks == 0,
                    "{name} line {}: only the first block is marked first",
                    d.line
                );
                in_block = true;
                blocks += 1;
            }
            "STREAM STOP" => {
                assert!(in_block, "{name} line {}", d.line);
                in_block = false;
            }
            _ if in_block => inside.push(d),
            _ => outside.push(d.text.as_str()),
        }
    }
    assert!(
        blocks >= min_blocks,
        "{name}: {blocks} stream blocks, expected at least {min_blocks}"
    );
    let mut want_outside: Vec<&str> = between.to_vec();
    want_outside.extend_from_slice(ending);
    assert_lines(name, &outside, &want_outside);
    // The ending comes after the last block.
    let tail: Vec<&str> = msgs[msgs.len() - ending.len()..]
        .iter()
        .map(|d| d.text.as_str())
        .collect();
    assert_eq!(tail, ending, "{name}: ending");
    inside
}

/// In-block changes: their xid (the stream xid or a subtransaction's).
fn change_xid(d: &Decoded) -> Option<u32> {
    match &d.msg {
        LogicalMessage::Relation(r) => r.xid,
        LogicalMessage::Insert(i) => i.xid,
        _ => None,
    }
}

/// Checks one scenario's exact content. Returns false for a scenario this
/// file has no expectations for.
fn check_expected(s: &Scenario, msgs: &[Decoded]) -> bool {
    let got: Vec<&str> = msgs.iter().map(|d| d.text.as_str()).collect();
    let name = s.name.as_str();
    const OUTBOX_RELATION: &str = "RELATION public.outbox identity=d [id 2950 key, aggregatetype 1043(259), aggregateid 1043(259), type 1043(259), payload 3802, attempt 23, urgent 16]";
    let header = |v: u32, binary: bool, streaming: bool| {
        assert_eq!(
            (s.proto_version, s.binary, s.streaming),
            (v, binary, streaming),
            "{name}: header"
        );
    };
    match name {
        "insert" | "insert_v1" => {
            header(if name == "insert" { 2 } else { 1 }, false, false);
            assert_lines(
                name,
                &got,
                &[
                    "BEGIN",
                    OUTBOX_RELATION,
                    r#"INSERT public.outbox ('6f1d6d9a-8f4b-4c1e-9a77-0c1d2e3f4a5b', 'order', '42', 'OrderCreated', '{"id": 42, "total": 9.99}', '1', 't')"#,
                    "INSERT public.outbox ('0b9e2c4d-1a2b-4c3d-8e4f-5a6b7c8d9e0f', 'customer', 'c-7', 'CustomerUpdated', null, '-5', 'f')",
                    "COMMIT flags=0",
                ],
            );
        }
        "binary" => {
            header(2, true, false);
            // uuid: 16 bytes; varchar: the text; jsonb: version 1 then the
            // text; int4: 4 bytes big-endian; bool: 1 byte.
            let json = hex(br#"{"id": 42, "total": 9.99}"#);
            let row1 = format!(
                "INSERT public.outbox (b'6f1d6d9a8f4b4c1e9a770c1d2e3f4a5b', b'{}', b'{}', b'{}', b'01{json}', b'00000001', b'01')",
                hex(b"order"),
                hex(b"42"),
                hex(b"OrderCreated")
            );
            let row2 = format!(
                "INSERT public.outbox (b'0b9e2c4d1a2b4c3d8e4f5a6b7c8d9e0f', b'{}', b'{}', b'{}', null, b'fffffffb', b'00')",
                hex(b"customer"),
                hex(b"c-7"),
                hex(b"CustomerUpdated")
            );
            assert_lines(
                name,
                &got,
                &["BEGIN", OUTBOX_RELATION, &row1, &row2, "COMMIT flags=0"],
            );
        }
        "insert_delete" => {
            header(2, false, false);
            assert_lines(
                name,
                &got,
                &[
                    "BEGIN",
                    OUTBOX_RELATION,
                    r#"INSERT public.outbox ('6f1d6d9a-8f4b-4c1e-9a77-0c1d2e3f4a5b', 'order', '42', 'OrderCreated', '{"id": 42}', '0', 'f')"#,
                    // Replica identity default: only the key is set.
                    "DELETE public.outbox key('6f1d6d9a-8f4b-4c1e-9a77-0c1d2e3f4a5b', null, null, null, null, null, null)",
                    "COMMIT flags=0",
                ],
            );
        }
        "update_default" => {
            header(2, false, false);
            assert_lines(
                name,
                &got,
                &[
                    "BEGIN",
                    "RELATION public.accounts_default identity=d [id 23 key, name 25, balance 20]",
                    "UPDATE public.accounts_default new('1', 'ada', '200')",
                    "COMMIT flags=0",
                    "BEGIN",
                    "UPDATE public.accounts_default key('1', null, null) new('2', 'ada', '200')",
                    "COMMIT flags=0",
                ],
            );
        }
        "update_full" => {
            header(2, false, false);
            assert_lines(
                name,
                &got,
                &[
                    "BEGIN",
                    // Replica identity full: every column is part of the key.
                    "RELATION public.accounts_full identity=f [id 23 key, name 25 key, balance 20 key]",
                    "UPDATE public.accounts_full old('1', 'ada', '100') new('1', 'ada', '200')",
                    "COMMIT flags=0",
                    "BEGIN",
                    "DELETE public.accounts_full old('1', 'ada', '200')",
                    "COMMIT flags=0",
                ],
            );
        }
        "toast_unchanged" => {
            header(2, false, false);
            let body: String = (1..=400)
                .map(|i: u32| md5_hex(i.to_string().as_bytes()))
                .collect();
            assert_eq!(body.len(), 12800);
            let insert = format!(
                "INSERT public.docs ('1', 'v1', '{}')",
                bytes_text(&Bytes::from(body.clone()))
            );
            assert_lines(
                name,
                &got,
                &[
                    "BEGIN",
                    "RELATION public.docs identity=d [id 23 key, title 25, body 25]",
                    &insert,
                    "COMMIT flags=0",
                    "BEGIN",
                    "UPDATE public.docs new('1', 'v2', toast)",
                    "COMMIT flags=0",
                ],
            );
            // The rendering shortens the body: compare it in full.
            let Some(LogicalMessage::Insert(ins)) = msgs.get(2).map(|d| &d.msg) else {
                panic!("{name}: message 3 is not the insert")
            };
            assert_eq!(ins.new.get(2), Some(&ColumnValue::Text(Bytes::from(body))));
        }
        "truncate" => {
            header(2, false, false);
            assert_lines(
                name,
                &got,
                &[
                    "BEGIN",
                    "RELATION public.truncate_a identity=d [id 23 key, v 25]",
                    "RELATION public.truncate_b identity=d [id 23 key, v 25]",
                    "TRUNCATE restart_identity public.truncate_a, public.truncate_b",
                    "COMMIT flags=0",
                    "BEGIN",
                    // The first TRUNCATE gave truncate_a a new relfilenode, so
                    // its schema is sent again.
                    "RELATION public.truncate_a identity=d [id 23 key, v 25]",
                    "TRUNCATE cascade public.truncate_a",
                    "COMMIT flags=0",
                ],
            );
        }
        "message_transactional" => {
            header(2, false, false);
            assert_lines(
                name,
                &got,
                &[
                    "BEGIN",
                    "MESSAGE transactional prefix='walrelay' content='hello'",
                    "COMMIT flags=0",
                ],
            );
        }
        "message_nontransactional" => {
            header(2, false, false);
            assert_lines(
                name,
                &got,
                &["MESSAGE non-transactional prefix='walrelay' content='hello'"],
            );
        }
        "stream_commit" | "stream_prepare" => {
            let ending: &[&str] = if name == "stream_commit" {
                header(2, false, true);
                &["STREAM COMMIT flags=0"]
            } else {
                header(3, false, true);
                &[
                    "STREAM PREPARE gid='gid_stream'",
                    "COMMIT PREPARED gid='gid_stream'",
                ]
            };
            let inside = check_streamed(name, msgs, 2, &[], ending);
            let got: Vec<&str> = inside.iter().map(|d| d.text.as_str()).collect();
            let rows: Vec<String> = (1..=2000).map(stream_row).collect();
            let mut want = vec![STREAM_ROWS_RELATION];
            want.extend(rows.iter().map(String::as_str));
            assert_lines(name, &got, &want);
            for d in &inside {
                assert_eq!(change_xid(d), Some(d.xid), "{name} line {}", d.line);
            }
        }
        "stream_abort" => {
            header(2, false, true);
            let inside = check_streamed(name, msgs, 1, &[], &["STREAM ABORT"]);
            // The server may stop a block early once it sees the transaction
            // has aborted: whatever was streamed is a prefix of the rows.
            let got: Vec<&str> = inside.iter().map(|d| d.text.as_str()).collect();
            let rows: Vec<String> = (1..=got.len().saturating_sub(1) as u32)
                .map(stream_row)
                .collect();
            let mut want = vec![STREAM_ROWS_RELATION];
            want.extend(rows.iter().map(String::as_str));
            if !got.is_empty() {
                assert_lines(name, &got, &want);
            }
        }
        "stream_subxact_abort" => {
            header(2, false, true);
            let inside = check_streamed(
                name,
                msgs,
                2,
                &["STREAM ABORT subtransaction"],
                &["STREAM COMMIT flags=0"],
            );
            // Rows 1..1000 under the top-level xid, then the prefix of
            // 2001..3000 streamed before ROLLBACK TO SAVEPOINT under the
            // savepoint's xid. pgoutput forgets which schemas it sent for the
            // transaction on a stream abort, so the Relation comes again,
            // then row 5000 under the new savepoint's xid.
            let top = msgs.first().map(|d| d.xid);
            let got: Vec<&str> = inside.iter().map(|d| d.text.as_str()).collect();
            let sub_rows = got.len().saturating_sub(1 + 1000 + 2);
            let rows: Vec<String> = (1..=1000)
                .chain(2001..2001 + sub_rows as u32)
                .map(stream_row)
                .collect();
            let mut want = vec![STREAM_ROWS_RELATION];
            want.extend(rows.iter().map(String::as_str));
            want.push(STREAM_ROWS_RELATION);
            want.push("INSERT public.stream_rows ('5000', 'after-rollback')");
            assert_lines(name, &got, &want);
            let abort = msgs
                .iter()
                .find_map(|d| match &d.msg {
                    LogicalMessage::StreamAbort(a) => Some(a.clone()),
                    _ => None,
                })
                .unwrap_or_else(|| panic!("{name}: no stream abort"));
            assert_eq!(
                Some(abort.xid),
                top,
                "{name}: abort names the top-level xid"
            );
            assert_ne!(abort.subxid, abort.xid, "{name}");
            let last_xid = inside.last().and_then(|d| change_xid(d));
            assert!(
                last_xid.is_some_and(|x| x != abort.xid && x != abort.subxid),
                "{name}: row 5000 belongs to the savepoint re-established after the rollback"
            );
            for (i, d) in inside.iter().enumerate() {
                let want_xid = if i <= 1000 {
                    Some(abort.xid)
                } else if i <= 1000 + sub_rows {
                    Some(abort.subxid)
                } else {
                    last_xid
                };
                assert_eq!(change_xid(d), want_xid, "{name} line {}", d.line);
            }
        }
        "two_phase" => {
            header(3, false, false);
            assert_lines(
                name,
                &got,
                &[
                    "BEGIN PREPARE gid='gid1'",
                    "RELATION public.tp identity=d [id 23 key, note 25]",
                    "INSERT public.tp ('1', 'committed')",
                    "PREPARE gid='gid1'",
                    "COMMIT PREPARED gid='gid1'",
                    "BEGIN PREPARE gid='gid2'",
                    "INSERT public.tp ('2', 'rolled back')",
                    "PREPARE gid='gid2'",
                    "ROLLBACK PREPARED gid='gid2'",
                ],
            );
        }
        "origin" => {
            header(2, false, false);
            assert_lines(
                name,
                &got,
                &[
                    "BEGIN",
                    "ORIGIN walrelay_origin commit_lsn=0/ABCDEF",
                    "RELATION public.origin_rows identity=d [id 23 key]",
                    "INSERT public.origin_rows ('1')",
                    "COMMIT flags=0",
                ],
            );
        }
        "custom_type" => {
            header(2, false, false);
            assert_lines(
                name,
                &got,
                &[
                    "BEGIN",
                    "TYPE public.mood",
                    "RELATION public.moods identity=d [id 23 key, m public.mood]",
                    "INSERT public.moods ('1', 'happy')",
                    "COMMIT flags=0",
                ],
            );
        }
        _ => return false,
    }
    true
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

const EXPECTED_SCENARIOS: &[&str] = &[
    "insert",
    "insert_v1",
    "binary",
    "insert_delete",
    "update_default",
    "update_full",
    "toast_unchanged",
    "truncate",
    "message_transactional",
    "message_nontransactional",
    "stream_commit",
    "stream_abort",
    "stream_subxact_abort",
    "two_phase",
    "stream_prepare",
    "origin",
    "custom_type",
];

#[test]
fn recorded_fixtures_decode_exactly() {
    let scenarios = fixture_file::load_all();
    if scenarios.is_empty() {
        eprintln!("note: tests/fixtures/ has no recordings yet; nothing to check");
        return;
    }
    let mut unchecked = Vec::new();
    for s in &scenarios {
        assert!(!s.messages.is_empty(), "{}: no messages recorded", s.name);
        let msgs = decode_scenario(s);
        check_invariants(s, &msgs);
        if !check_expected(s, &msgs) {
            unchecked.push(s.name.clone());
            eprintln!(
                "--- {} (proto_version={}) decoded as:",
                s.name, s.proto_version
            );
            for d in &msgs {
                eprintln!("{:>5} {} {} {}", d.line, d.lsn, d.xid, d.text);
            }
        }
    }
    for want in EXPECTED_SCENARIOS {
        if !scenarios.iter().any(|s| s.name == *want) {
            eprintln!("note: scenario {want} has expectations but no recording");
        }
    }
    assert!(
        unchecked.is_empty(),
        "no expectations written for scenarios {unchecked:?}"
    );
}

/// The scenario checks can fail: a one-byte change in a recorded column
/// value must be caught.
#[test]
fn a_changed_value_fails_its_scenario() {
    let path = fixture_file::fixtures_dir().join("insert.txt");
    if !path.exists() {
        eprintln!("note: no insert.txt recording yet");
        return;
    }
    let mut s = fixture_file::load(&path);
    let m = s
        .messages
        .iter_mut()
        .find(|m| m.data.windows(12).any(|w| w == b"OrderCreated"))
        .expect("insert.txt has the OrderCreated row");
    let mut data = m.data.to_vec();
    let at = data
        .windows(12)
        .position(|w| w == b"OrderCreated")
        .expect("found above");
    data[at] = b'o';
    m.data = Bytes::from(data);
    let msgs = decode_scenario(&s);
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check_expected(&s, &msgs)));
    assert!(res.is_err(), "a changed value went unnoticed");
}
