//! Connect's payloads inside Kafka's group protocol: the worker metadata a
//! member puts in JoinGroup (`ConnectProtocol` version 0 and
//! `IncrementalCooperativeConnectProtocol` versions 1 and 2) and the
//! assignment the leader puts in SyncGroup (`ExtendedAssignment`).
//!
//! These are Kafka's old-style schemas (not the generated messages): big
//! endian, `STRING` = int16 length + UTF-8, `NULLABLE_BYTES` = int32 length
//! or -1, arrays = int32 count (or -1 for a nullable one's null). Version 1
//! schemas tolerate missing trailing fields (they take their defaults). Each
//! connector of an assignment is one entry `{connector, tasks[]}` whose task
//! list holds -1 (`CONNECTOR_TASK`, the connector itself) and its task
//! numbers: walrelay writes a connector `c` as `{c, [-1, 0]}`, which a Connect
//! worker reads as the connector plus its task 0. Pure: bytes in, bytes out.

use std::collections::BTreeSet;

/// Connect's group protocol type.
pub(crate) const PROTOCOL_TYPE: &str = "connect";
/// The one protocol walrelay offers: incremental cooperative, unsessioned.
pub(crate) const PROTOCOL_COMPATIBLE: &str = "compatible";
/// The sentinel task number that stands for the connector instance itself.
pub(crate) const CONNECTOR_TASK: i32 = -1;
/// `Assignment.CONFIG_MISMATCH`: a member's config offset is ahead of the
/// leader's; everyone reads the config topic further and rejoins.
pub(crate) const CONFIG_MISMATCH: i16 = 1;
/// The metadata and assignment version walrelay writes (`compatible`).
const VERSION_COMPATIBLE: i16 = 1;

/// A payload that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum WireError {
    /// The bytes end inside a field.
    #[error("Connect {what}: truncated reading {field} at byte {at}")]
    Truncated {
        /// Which payload (`worker metadata`, `assignment`).
        what: &'static str,
        /// The field being read.
        field: &'static str,
        /// Its offset.
        at: usize,
    },
    /// A length or count is negative where null is not allowed.
    #[error("Connect {what}: {field} has the invalid length {len}")]
    BadLength {
        /// Which payload.
        what: &'static str,
        /// The field being read.
        field: &'static str,
        /// The length read.
        len: i64,
    },
    /// A string is not UTF-8.
    #[error("Connect {what}: {field} is not UTF-8")]
    Utf8 {
        /// Which payload.
        what: &'static str,
        /// The field being read.
        field: &'static str,
    },
    /// A version below 0 (Connect refuses it too).
    #[error("Connect {what}: unsupported version {version}")]
    Version {
        /// Which payload.
        what: &'static str,
        /// The version read.
        version: i16,
    },
}

/// Connect's assignment (`ExtendedAssignment`), reduced to connector names:
/// a name is listed when the entry holds the connector or any of its tasks.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ConnectAssignment {
    /// The protocol version of the payload (1 when walrelay writes it).
    pub(crate) version: i16,
    /// 0, or [`CONFIG_MISMATCH`].
    pub(crate) error: i16,
    /// The leader's member id.
    pub(crate) leader: String,
    /// The leader's REST URL.
    pub(crate) leader_url: String,
    /// The config topic offset the assignment is based on.
    pub(crate) config_offset: i64,
    /// Connectors assigned (with their task 0).
    pub(crate) assigned: Vec<String>,
    /// Connectors revoked (with their task 0).
    pub(crate) revoked: Vec<String>,
    /// Connect's scheduled rebalance delay (walrelay's leader writes 0).
    pub(crate) delay_ms: i32,
}

/// A member's JoinGroup metadata (`ExtendedWorkerState`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WorkerMetadata {
    /// 0 (eager), 1 (compatible) or 2 (sessioned).
    pub(crate) version: i16,
    /// The worker's REST URL.
    pub(crate) url: String,
    /// The config topic offset the worker has read to.
    pub(crate) config_offset: i64,
    /// What it holds now (`allocation`); `None` when null or version 0.
    pub(crate) allocation: Option<ConnectAssignment>,
}

/// Encodes walrelay's JoinGroup metadata for [`PROTOCOL_COMPATIBLE`].
pub(crate) fn encode_metadata(
    url: &str,
    config_offset: i64,
    allocation: Option<&ConnectAssignment>,
) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&VERSION_COMPATIBLE.to_be_bytes());
    put_string(&mut out, url);
    out.extend_from_slice(&config_offset.to_be_bytes());
    match allocation {
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        Some(a) => {
            let bytes = encode_assignment(a);
            out.extend_from_slice(&len_i32(bytes.len()).to_be_bytes());
            out.extend_from_slice(&bytes);
        }
    }
    out
}

/// Decodes any Connect worker's JoinGroup metadata (versions 0, 1, 2).
pub(crate) fn decode_metadata(bytes: &[u8]) -> Result<WorkerMetadata, WireError> {
    let mut r = Reader::new("worker metadata", bytes);
    let version = r.i16("version")?;
    if version < 0 {
        return Err(WireError::Version {
            what: r.what,
            version,
        });
    }
    let url = r.string("url")?;
    let config_offset = r.i64("config-offset")?;
    let allocation = if version >= 1 && !r.is_empty() {
        match r.nullable_bytes("allocation")? {
            Some(inner) => Some(decode_assignment(inner)?),
            None => None,
        }
    } else {
        None
    };
    Ok(WorkerMetadata {
        version,
        url,
        config_offset,
        allocation,
    })
}

/// Encodes an assignment as version 1 (`compatible`): every connector as
/// `{name, [-1, 0]}`, assigned and revoked as (possibly empty) arrays.
pub(crate) fn encode_assignment(a: &ConnectAssignment) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&VERSION_COMPATIBLE.to_be_bytes());
    out.extend_from_slice(&a.error.to_be_bytes());
    put_string(&mut out, &a.leader);
    put_string(&mut out, &a.leader_url);
    out.extend_from_slice(&a.config_offset.to_be_bytes());
    put_connectors(&mut out, &a.assigned);
    put_connectors(&mut out, &a.revoked);
    out.extend_from_slice(&a.delay_ms.to_be_bytes());
    out
}

/// Decodes an assignment of any version (0: no revoked list, no delay).
pub(crate) fn decode_assignment(bytes: &[u8]) -> Result<ConnectAssignment, WireError> {
    let mut r = Reader::new("assignment", bytes);
    let version = r.i16("version")?;
    if version < 0 {
        return Err(WireError::Version {
            what: r.what,
            version,
        });
    }
    let error = r.i16("error")?;
    let leader = r.string("leader")?;
    let leader_url = r.string("leader-url")?;
    let config_offset = r.i64("config-offset")?;
    let assigned = r.connectors("assignment")?;
    let revoked = r.connectors("revoked")?;
    let delay_ms = if r.is_empty() { 0 } else { r.i32("delay")? };
    Ok(ConnectAssignment {
        version,
        error,
        leader,
        leader_url,
        config_offset,
        assigned,
        revoked,
        delay_ms,
    })
}

/// A length as Kafka's int32 (payloads here are far below 2 GiB).
fn len_i32(len: usize) -> i32 {
    i32::try_from(len).unwrap_or(i32::MAX)
}

/// Writes a `STRING`: int16 length, then the UTF-8 bytes (cut at 32767).
fn put_string(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    let len = bytes.len().min(i16::MAX as usize);
    out.extend_from_slice(&i16::try_from(len).unwrap_or(i16::MAX).to_be_bytes());
    out.extend_from_slice(&bytes[..len]);
}

/// Writes a nullable array of connector entries, each `{name, [-1, 0]}`.
fn put_connectors(out: &mut Vec<u8>, names: &[String]) {
    let unique: BTreeSet<&str> = names.iter().map(String::as_str).collect();
    out.extend_from_slice(&len_i32(unique.len()).to_be_bytes());
    for name in unique {
        put_string(out, name);
        out.extend_from_slice(&2i32.to_be_bytes());
        out.extend_from_slice(&CONNECTOR_TASK.to_be_bytes());
        out.extend_from_slice(&0i32.to_be_bytes());
    }
}

/// A cursor over a payload that names the payload in its errors.
struct Reader<'a> {
    /// Which payload.
    what: &'static str,
    /// The bytes.
    bytes: &'a [u8],
    /// The next byte to read.
    at: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`.
    fn new(what: &'static str, bytes: &'a [u8]) -> Self {
        Reader { what, bytes, at: 0 }
    }

    /// Whether every byte has been read (later fields take defaults).
    fn is_empty(&self) -> bool {
        self.at >= self.bytes.len()
    }

    /// The next `n` bytes.
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], WireError> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.bytes.len());
        let Some(end) = end else {
            return Err(WireError::Truncated {
                what: self.what,
                field,
                at: self.at,
            });
        };
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    /// The next `N` bytes as an array.
    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], WireError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, field)?);
        Ok(out)
    }

    /// An `INT16`.
    fn i16(&mut self, field: &'static str) -> Result<i16, WireError> {
        Ok(i16::from_be_bytes(self.array(field)?))
    }

    /// An `INT32`.
    fn i32(&mut self, field: &'static str) -> Result<i32, WireError> {
        Ok(i32::from_be_bytes(self.array(field)?))
    }

    /// An `INT64`.
    fn i64(&mut self, field: &'static str) -> Result<i64, WireError> {
        Ok(i64::from_be_bytes(self.array(field)?))
    }

    /// A `STRING` (non-nullable).
    fn string(&mut self, field: &'static str) -> Result<String, WireError> {
        let len = self.i16(field)?;
        let len = usize::try_from(len).map_err(|_| WireError::BadLength {
            what: self.what,
            field,
            len: i64::from(len),
        })?;
        let bytes = self.take(len, field)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| WireError::Utf8 {
            what: self.what,
            field,
        })
    }

    /// A `NULLABLE_BYTES`.
    fn nullable_bytes(&mut self, field: &'static str) -> Result<Option<&'a [u8]>, WireError> {
        let len = self.i32(field)?;
        if len < 0 {
            return Ok(None);
        }
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        Ok(Some(self.take(len, field)?))
    }

    /// An array count: `None` for null (-1) or for a missing trailing field.
    fn count(&mut self, field: &'static str) -> Result<Option<usize>, WireError> {
        if self.is_empty() {
            return Ok(None);
        }
        let n = self.i32(field)?;
        if n < 0 {
            return Ok(None);
        }
        Ok(Some(usize::try_from(n).unwrap_or(usize::MAX)))
    }

    /// A nullable array of `{connector, tasks[]}`: the names that hold the
    /// connector or at least one task, in order, each once.
    fn connectors(&mut self, field: &'static str) -> Result<Vec<String>, WireError> {
        let mut names = Vec::new();
        for _ in 0..self.count(field)?.unwrap_or(0) {
            let name = self.string("connector")?;
            let tasks = self.i32("tasks")?;
            let tasks = usize::try_from(tasks).map_err(|_| WireError::BadLength {
                what: self.what,
                field: "tasks",
                len: i64::from(tasks),
            })?;
            self.take(tasks.saturating_mul(4), "tasks")?;
            if tasks > 0 && !names.contains(&name) {
                names.push(name);
            }
        }
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Appends a Java `STRING` to a hand-written expectation.
    fn s(out: &mut Vec<u8>, text: &str) {
        out.extend_from_slice(&(text.len() as i16).to_be_bytes());
        out.extend_from_slice(text.as_bytes());
    }

    /// An assignment used by the byte tests.
    fn sample() -> ConnectAssignment {
        ConnectAssignment {
            version: 1,
            error: 0,
            leader: "m-1".into(),
            leader_url: "http://a:8083/".into(),
            config_offset: 7,
            assigned: vec!["b".into(), "a".into()],
            revoked: vec!["c".into()],
            delay_ms: 0,
        }
    }

    /// The bytes of `sample()`, written field by field from
    /// `IncrementalCooperativeConnectProtocol.ASSIGNMENT_V1`.
    fn sample_bytes() -> Vec<u8> {
        let mut e = Vec::new();
        e.extend_from_slice(&[0, 1]); // header: version INT16 = 1
        e.extend_from_slice(&[0, 0]); // error INT16 = 0
        s(&mut e, "m-1"); // leader STRING
        s(&mut e, "http://a:8083/"); // leader-url STRING
        e.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 7]); // config-offset INT64
        e.extend_from_slice(&[0, 0, 0, 2]); // assignment: ARRAY count 2
        s(&mut e, "a"); //   connector STRING (sorted)
        e.extend_from_slice(&[0, 0, 0, 2]); //   tasks: ARRAY count 2
        e.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]); //     -1 = the connector itself
        e.extend_from_slice(&[0, 0, 0, 0]); //     task 0
        s(&mut e, "b");
        e.extend_from_slice(&[0, 0, 0, 2, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        e.extend_from_slice(&[0, 0, 0, 1]); // revoked: ARRAY count 1
        s(&mut e, "c");
        e.extend_from_slice(&[0, 0, 0, 2, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        e.extend_from_slice(&[0, 0, 0, 0]); // delay INT32 = 0
        e
    }

    #[test]
    fn assignment_bytes_match_connects_schema() {
        assert_eq!(encode_assignment(&sample()), sample_bytes());
        let back = decode_assignment(&sample_bytes()).unwrap();
        assert_eq!(back.assigned, vec!["a".to_string(), "b".to_string()]);
        assert_eq!(back.revoked, vec!["c".to_string()]);
        assert_eq!(back.leader, "m-1");
        assert_eq!(back.config_offset, 7);
    }

    #[test]
    fn metadata_bytes_match_connects_schema() {
        let mut e = Vec::new();
        e.extend_from_slice(&[0, 1]); // header: version INT16 = 1
        s(&mut e, "http://w:8083/"); // url STRING
        e.extend_from_slice(&(-5i64).to_be_bytes()); // config-offset INT64
        let inner = sample_bytes();
        e.extend_from_slice(&(inner.len() as i32).to_be_bytes()); // allocation NULLABLE_BYTES length
        e.extend_from_slice(&inner); //                          and the assignment (with its own header)
        assert_eq!(encode_metadata("http://w:8083/", -5, Some(&sample())), e);
        let back = decode_metadata(&e).unwrap();
        assert_eq!(back.version, 1);
        assert_eq!(back.url, "http://w:8083/");
        assert_eq!(back.config_offset, -5);
        assert_eq!(back.allocation.unwrap().assigned, vec!["a", "b"]);

        // A first join: allocation is null (length -1).
        let mut first = Vec::new();
        first.extend_from_slice(&[0, 1]);
        s(&mut first, "u");
        first.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
        first.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(encode_metadata("u", 0, None), first);
        assert_eq!(decode_metadata(&first).unwrap().allocation, None);
    }

    #[test]
    fn reads_eager_and_sessioned_and_connect_task_layouts() {
        // Version 0 (eager "default"): header, url, offset, nothing else.
        let mut v0 = Vec::new();
        v0.extend_from_slice(&[0, 0]);
        s(&mut v0, "http://old/");
        v0.extend_from_slice(&9i64.to_be_bytes());
        let m = decode_metadata(&v0).unwrap();
        assert_eq!((m.version, m.config_offset, m.allocation), (0, 9, None));

        // A version 2 (sessioned) assignment as a Connect worker may write
        // it: a connector-only entry "x" [-1], a tasks-only entry "y"
        // [0, 1], an empty entry "z" [], then a null revoked array and no
        // delay field (both take their defaults).
        let mut a = Vec::new();
        a.extend_from_slice(&[0, 2, 0, 0]);
        s(&mut a, "L");
        s(&mut a, "http://l/");
        a.extend_from_slice(&3i64.to_be_bytes());
        a.extend_from_slice(&[0, 0, 0, 3]);
        s(&mut a, "x");
        a.extend_from_slice(&[0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff]);
        s(&mut a, "y");
        a.extend_from_slice(&[0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1]);
        s(&mut a, "z");
        a.extend_from_slice(&[0, 0, 0, 0]);
        a.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]);
        let got = decode_assignment(&a).unwrap();
        assert_eq!(got.assigned, vec!["x", "y"]);
        assert!(got.revoked.is_empty());
        assert_eq!(got.delay_ms, 0);
    }

    #[test]
    fn truncated_payloads_are_errors_not_panics() {
        let full = sample_bytes();
        for cut in 0..full.len() - 4 {
            // Cutting before the delay field is tolerated only at field
            // boundaries of the trailing nullable fields; everything else
            // must be an error, never a panic.
            let _ = decode_assignment(&full[..cut]);
        }
        assert!(matches!(
            decode_assignment(&full[..5]),
            Err(WireError::Truncated { .. })
        ));
        assert!(matches!(
            decode_metadata(&[0xff, 0xff]),
            Err(WireError::Version { version: -1, .. })
        ));
    }
}
