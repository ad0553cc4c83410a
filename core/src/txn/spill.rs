//! Spill files: the changes of one streamed, still uncommitted transaction,
//! kept on disk until its Stream Commit.
//!
//! With pgoutput protocol version 2 the server sends a large transaction in
//! chunks while it is still running; whether it commits is only known at
//! the end. A [`SpillFile`] is an unlinked temporary file (it disappears with
//! the process, whatever happens) holding the transaction's relevant changes
//! as compact records, and the offset at which each subtransaction first
//! appeared, so that a subtransaction abort can cut the file back there, as
//! PostgreSQL's own apply worker does with its stream files. At commit the
//! file is read back front to back by a [`SpillReader`], one record at a
//! time. This module owns the file format and nothing else: it never decides
//! what to spill, never routes, and never holds a whole transaction in
//! memory.
//!
//! Record format (little endian, private to this process):
//!
//! ```text
//!  kind u8 | lsn u64 | subxid u32 | binding u32 | body_len u32 | body
//!  body = ncols u16, then per column: tag u8 ('n' null, 'u' unchanged
//!         toast, 't' text, 'b' binary) and, for 't'/'b', len u32 + bytes
//! ```

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use bytes::{Bytes, BytesMut};
use walrelay_proto::pgoutput::{ColumnValue, TupleData};
use walrelay_proto::Lsn;

/// Buffer size of the writer and the reader.
const IO_BUFFER: usize = 64 * 1024;
/// Fixed part of a record: kind, lsn, subxid, binding, body length.
const HEADER_LEN: usize = 1 + 8 + 4 + 4 + 4;

/// Errors of a spill file.
#[derive(Debug, thiserror::Error)]
pub enum SpillError {
    /// The temporary file could not be created.
    #[error("cannot create a spill file in {dir} (replication.spill_dir, or TMPDIR when unset)")]
    Create {
        /// The directory tried.
        dir: String,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// Writing, truncating or rewinding failed (disk full, I/O error).
    #[error("cannot write the spill file at offset {offset}")]
    Write {
        /// Where the write started.
        offset: u64,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// Reading back failed.
    #[error("cannot read the spill file at offset {offset}")]
    Read {
        /// Where the read started.
        offset: u64,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The file does not hold what this module wrote.
    #[error("spill file corrupt at offset {offset}: {reason}")]
    Corrupt {
        /// Where the bad record starts.
        offset: u64,
        /// What was wrong.
        reason: &'static str,
    },
    /// A row too wide for the record format.
    #[error("row with {columns} columns or a value over 4 GiB cannot be spilled")]
    TooLarge {
        /// Column count of the row.
        columns: usize,
    },
}

/// What a spilled change was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeKind {
    /// An INSERT into the outbox table: becomes an event.
    Insert,
    /// An UPDATE of an outbox row: the operation policy applies at commit.
    Update,
    /// A selected transactional logical decoding message: becomes an
    /// event; its row holds the prefix and the content as two text columns.
    Message,
}

impl ChangeKind {
    fn tag(self) -> u8 {
        match self {
            ChangeKind::Insert => b'I',
            ChangeKind::Update => b'U',
            ChangeKind::Message => b'M',
        }
    }

    fn from_tag(tag: u8) -> Option<Self> {
        match tag {
            b'I' => Some(ChangeKind::Insert),
            b'U' => Some(ChangeKind::Update),
            b'M' => Some(ChangeKind::Message),
            _ => None,
        }
    }
}

/// One change read back from a spill file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpilledChange {
    /// Insert or update.
    pub(crate) kind: ChangeKind,
    /// XLogData start of the change.
    pub(crate) lsn: Lsn,
    /// The (sub)transaction that made it.
    pub(crate) subxid: u32,
    /// Caller's index of the relation binding current when it was received.
    pub(crate) binding: u32,
    /// The new row (empty for updates, whose row is never used).
    pub(crate) row: TupleData,
}

/// Where a subtransaction's changes begin.
#[derive(Debug, Clone, Copy)]
struct SubxactMark {
    subxid: u32,
    offset: u64,
    records: u64,
}

/// The spill file of one streamed transaction, open for appending.
#[derive(Debug)]
pub struct SpillFile {
    xid: u32,
    writer: BufWriter<File>,
    /// Bytes written so far (buffered ones included).
    len: u64,
    records: u64,
    /// First offset of every subtransaction seen, in order of appearance.
    subxacts: Vec<SubxactMark>,
    /// The last subxid noted, to skip the search for runs of one subxact.
    last_subxid: Option<u32>,
    /// Reused encoding buffer.
    scratch: Vec<u8>,
}

impl SpillFile {
    /// A new, empty spill file for top-level transaction `xid`: an unlinked
    /// file in `dir`, or in the system temporary directory (`TMPDIR`).
    pub fn new(xid: u32, dir: Option<&Path>) -> Result<Self, SpillError> {
        let dir = dir.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let file = tempfile::tempfile_in(&dir).map_err(|source| SpillError::Create {
            dir: dir.display().to_string(),
            source,
        })?;
        Ok(SpillFile {
            xid,
            writer: BufWriter::with_capacity(IO_BUFFER, file),
            len: 0,
            records: 0,
            subxacts: Vec::new(),
            last_subxid: None,
            scratch: Vec::new(),
        })
    }

    /// Bytes in the file.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Whether no record was written (or all were cut off again).
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Records in the file.
    pub(crate) fn records(&self) -> u64 {
        self.records
    }

    /// Notes that subtransaction `subxid` made a change now (whether or not
    /// it is spilled), so an abort of it cuts the file back to here. The
    /// top-level xid is never a mark: its abort drops the whole file.
    pub(crate) fn note_subxact(&mut self, subxid: u32) {
        if subxid == self.xid || self.last_subxid == Some(subxid) {
            return;
        }
        self.last_subxid = Some(subxid);
        if self.subxacts.iter().any(|m| m.subxid == subxid) {
            return;
        }
        self.subxacts.push(SubxactMark {
            subxid,
            offset: self.len,
            records: self.records,
        });
    }

    /// Appends one change; returns the bytes written.
    pub(crate) fn append(
        &mut self,
        kind: ChangeKind,
        lsn: Lsn,
        subxid: u32,
        binding: u32,
        row: &TupleData,
    ) -> Result<u64, SpillError> {
        self.note_subxact(subxid);
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        let encoded = encode(&mut buf, kind, lsn, subxid, binding, row);
        let written = encoded.and_then(|()| {
            self.writer
                .write_all(&buf)
                .map_err(|source| SpillError::Write {
                    offset: self.len,
                    source,
                })
        });
        let n = buf.len() as u64;
        self.scratch = buf;
        written?;
        self.len += n;
        self.records += 1;
        Ok(n)
    }

    /// Discards the changes of subtransaction `subxid` and of every change
    /// written after its first one (its own subtransactions and later ones,
    /// which a ROLLBACK TO SAVEPOINT also rolls back). Returns the bytes
    /// cut, or `None` when `subxid` never made a change here.
    pub(crate) fn abort_subxact(&mut self, subxid: u32) -> Result<Option<u64>, SpillError> {
        let Some(i) = self.subxacts.iter().position(|m| m.subxid == subxid) else {
            return Ok(None);
        };
        let mark = self.subxacts[i];
        let cut = self.len - mark.offset;
        let offset = mark.offset;
        let io = |e| SpillError::Write { offset, source: e };
        self.writer.flush().map_err(io)?;
        let file = self.writer.get_mut();
        file.set_len(offset).map_err(io)?;
        file.seek(SeekFrom::Start(offset)).map_err(io)?;
        self.len = offset;
        self.records = mark.records;
        self.subxacts.truncate(i);
        self.last_subxid = None;
        Ok(Some(cut))
    }

    /// Finishes writing and rewinds for reading back.
    pub(crate) fn into_reader(self) -> Result<SpillReader, SpillError> {
        let len = self.len;
        let mut file = self.writer.into_inner().map_err(|e| SpillError::Write {
            offset: len,
            source: e.into_error(),
        })?;
        file.seek(SeekFrom::Start(0))
            .map_err(|source| SpillError::Read { offset: 0, source })?;
        Ok(SpillReader {
            reader: BufReader::with_capacity(IO_BUFFER, file),
            offset: 0,
            len,
        })
    }
}

fn encode(
    buf: &mut Vec<u8>,
    kind: ChangeKind,
    lsn: Lsn,
    subxid: u32,
    binding: u32,
    row: &TupleData,
) -> Result<(), SpillError> {
    let too_large = || SpillError::TooLarge {
        columns: row.columns.len(),
    };
    buf.push(kind.tag());
    buf.extend_from_slice(&lsn.0.to_le_bytes());
    buf.extend_from_slice(&subxid.to_le_bytes());
    buf.extend_from_slice(&binding.to_le_bytes());
    buf.extend_from_slice(&[0; 4]); // body length, patched below
    let ncols = u16::try_from(row.columns.len()).map_err(|_| too_large())?;
    buf.extend_from_slice(&ncols.to_le_bytes());
    for col in &row.columns {
        match col {
            ColumnValue::Null => buf.push(b'n'),
            ColumnValue::UnchangedToast => buf.push(b'u'),
            ColumnValue::Text(b) | ColumnValue::Binary(b) => {
                buf.push(if matches!(col, ColumnValue::Text(_)) {
                    b't'
                } else {
                    b'b'
                });
                let len = u32::try_from(b.len()).map_err(|_| too_large())?;
                buf.extend_from_slice(&len.to_le_bytes());
                buf.extend_from_slice(b);
            }
        }
    }
    let body = u32::try_from(buf.len() - HEADER_LEN).map_err(|_| too_large())?;
    buf[HEADER_LEN - 4..HEADER_LEN].copy_from_slice(&body.to_le_bytes());
    Ok(())
}

/// A spill file being read back, front to back.
#[derive(Debug)]
pub(crate) struct SpillReader {
    reader: BufReader<File>,
    offset: u64,
    len: u64,
}

impl SpillReader {
    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> u64 {
        self.len - self.offset
    }

    /// The next change, or `None` at the end. Only the one record is held
    /// in memory; its column values share one buffer.
    pub(crate) fn next_change(&mut self) -> Result<Option<SpilledChange>, SpillError> {
        if self.offset >= self.len {
            return Ok(None);
        }
        let start = self.offset;
        let corrupt = |reason| SpillError::Corrupt {
            offset: start,
            reason,
        };
        if self.len - start < HEADER_LEN as u64 {
            return Err(corrupt("truncated record header"));
        }
        let mut header = [0u8; HEADER_LEN];
        self.reader
            .read_exact(&mut header)
            .map_err(|source| SpillError::Read {
                offset: start,
                source,
            })?;
        let kind = ChangeKind::from_tag(header[0]).ok_or_else(|| corrupt("unknown record kind"))?;
        let le64 = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
        let le32 = |b: &[u8]| u32::from_le_bytes(b.try_into().unwrap_or([0; 4]));
        let lsn = Lsn(le64(&header[1..9]));
        let subxid = le32(&header[9..13]);
        let binding = le32(&header[13..17]);
        let body_len = le32(&header[17..21]) as u64;
        if self.len - start - (HEADER_LEN as u64) < body_len {
            return Err(corrupt("record runs past the end of the file"));
        }
        let body_len = usize::try_from(body_len).map_err(|_| corrupt("record too large"))?;
        let mut body = BytesMut::zeroed(body_len);
        self.reader
            .read_exact(&mut body)
            .map_err(|source| SpillError::Read {
                offset: start,
                source,
            })?;
        self.offset = start + (HEADER_LEN + body_len) as u64;
        let row = decode_row(body.freeze()).ok_or_else(|| corrupt("malformed row"))?;
        Ok(Some(SpilledChange {
            kind,
            lsn,
            subxid,
            binding,
            row,
        }))
    }
}

fn decode_row(body: Bytes) -> Option<TupleData> {
    let ncols = u16::from_le_bytes([*body.first()?, *body.get(1)?]) as usize;
    let mut at = 2;
    let mut columns = Vec::with_capacity(ncols);
    for _ in 0..ncols {
        let tag = *body.get(at)?;
        at += 1;
        let value = match tag {
            b'n' => ColumnValue::Null,
            b'u' => ColumnValue::UnchangedToast,
            b't' | b'b' => {
                let len = u32::from_le_bytes(body.get(at..at + 4)?.try_into().ok()?) as usize;
                at += 4;
                let end = at.checked_add(len)?;
                if end > body.len() {
                    return None;
                }
                let bytes = body.slice(at..end);
                at = end;
                if tag == b't' {
                    ColumnValue::Text(bytes)
                } else {
                    ColumnValue::Binary(bytes)
                }
            }
            _ => return None,
        };
        columns.push(value);
    }
    (at == body.len()).then_some(TupleData { columns })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(n: u32) -> TupleData {
        TupleData {
            columns: vec![
                ColumnValue::Text(Bytes::from(format!("id-{n}"))),
                ColumnValue::Null,
                ColumnValue::UnchangedToast,
                ColumnValue::Binary(Bytes::from(vec![0, 1, 2, n as u8])),
            ],
        }
    }

    fn read_all(spill: SpillFile) -> Vec<SpilledChange> {
        let mut reader = spill.into_reader().expect("rewind");
        let mut out = Vec::new();
        while let Some(c) = reader.next_change().expect("read back") {
            out.push(c);
        }
        assert_eq!(reader.remaining(), 0);
        out
    }

    #[test]
    fn round_trip() {
        let mut spill = SpillFile::new(700, None).expect("tempfile");
        assert!(spill.is_empty());
        for n in 0..3 {
            spill
                .append(ChangeKind::Insert, Lsn(100 + u64::from(n)), 700, n, &row(n))
                .expect("append");
        }
        spill
            .append(ChangeKind::Update, Lsn(200), 700, 0, &TupleData::default())
            .expect("append");
        assert_eq!(spill.records(), 4);
        let got = read_all(spill);
        assert_eq!(got.len(), 4);
        for (n, c) in got.iter().take(3).enumerate() {
            assert_eq!(c.kind, ChangeKind::Insert);
            assert_eq!(c.lsn, Lsn(100 + n as u64));
            assert_eq!(c.binding, n as u32);
            assert_eq!(c.row, row(n as u32));
        }
        assert_eq!(got[3].kind, ChangeKind::Update);
        assert!(got[3].row.columns.is_empty());
    }

    #[test]
    fn subxact_abort_truncates_at_its_first_change() {
        let mut spill = SpillFile::new(700, None).expect("tempfile");
        spill
            .append(ChangeKind::Insert, Lsn(1), 700, 0, &row(1))
            .unwrap();
        // Subxact 701 (savepoint a) and its child 702 (savepoint b).
        spill
            .append(ChangeKind::Insert, Lsn(2), 701, 0, &row(2))
            .unwrap();
        spill.note_subxact(702); // a change that was not spilled
        spill
            .append(ChangeKind::Insert, Lsn(3), 702, 0, &row(3))
            .unwrap();
        let len_before = spill.len();
        // An unknown subxact changes nothing.
        assert_eq!(spill.abort_subxact(999).unwrap(), None);
        assert_eq!(spill.len(), len_before);
        // ROLLBACK TO b: only row 3 goes.
        assert!(spill.abort_subxact(702).unwrap().is_some());
        assert_eq!(spill.records(), 2);
        // More work in a later subxact, then ROLLBACK TO a: rows 2 and 4 go.
        spill
            .append(ChangeKind::Insert, Lsn(4), 703, 0, &row(4))
            .unwrap();
        let cut = spill.abort_subxact(701).unwrap().expect("701 known");
        assert!(cut > 0);
        // The top level goes on after the rollback.
        spill
            .append(ChangeKind::Insert, Lsn(5), 700, 0, &row(5))
            .unwrap();
        let lsns: Vec<u64> = read_all(spill).iter().map(|c| c.lsn.0).collect();
        assert_eq!(lsns, vec![1, 5]);
    }

    #[test]
    fn aborting_a_subxact_twice_is_harmless() {
        let mut spill = SpillFile::new(1, None).expect("tempfile");
        spill
            .append(ChangeKind::Insert, Lsn(1), 2, 0, &row(1))
            .unwrap();
        assert!(spill.abort_subxact(2).unwrap().is_some());
        assert_eq!(spill.abort_subxact(2).unwrap(), None);
        assert!(spill.is_empty());
        assert_eq!(spill.len(), 0);
        assert!(read_all(spill).is_empty());
    }

    #[test]
    fn corrupt_records_are_errors() {
        assert!(decode_row(Bytes::from_static(&[1, 0, b't', 9, 0, 0, 0, b'x'])).is_none());
        assert!(decode_row(Bytes::from_static(&[1, 0, b'z'])).is_none());
        assert!(decode_row(Bytes::from_static(&[0, 0, 0])).is_none());
        assert_eq!(
            decode_row(Bytes::from_static(&[0, 0])),
            Some(TupleData::default())
        );
    }
}
