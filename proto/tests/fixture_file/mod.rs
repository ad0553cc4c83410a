//! Reading the recorded pgoutput fixture files under `tests/fixtures/`.
//!
//! Owns the file format agreed with `scripts/record-fixtures.sh`: one file
//! per scenario, `<scenario>.txt`, starting with a header comment
//! `# proto_version=N binary=on|off streaming=on|off`, then one line per
//! message, `<lsn> <xid> <hex of the message bytes>`, exactly the `lsn`,
//! `xid` and `data` columns of `pg_logical_slot_peek_binary_changes`. Other
//! `#` lines and blank lines are ignored. It must never decode messages:
//! that is what the tests using it check.

#![allow(dead_code)] // each test crate uses a different part

use std::path::{Path, PathBuf};

use bytes::Bytes;
use walrelay_proto::Lsn;

/// One recorded message.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    /// 1-based line number in the file, for failure messages.
    pub line: usize,
    /// The `lsn` column.
    pub lsn: Lsn,
    /// The `xid` column.
    pub xid: u32,
    /// The `data` column.
    pub data: Bytes,
}

/// One scenario file.
#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    /// File stem: the scenario name.
    pub name: String,
    /// `proto_version=` from the header.
    pub proto_version: u32,
    /// `binary=on` in the header.
    pub binary: bool,
    /// `streaming=on` in the header.
    pub streaming: bool,
    /// The messages, in file order.
    pub messages: Vec<Recorded>,
}

/// The fixtures directory of this crate.
pub(crate) fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every `*.txt` scenario in the fixtures directory, sorted by name; empty
/// when the directory does not exist yet.
pub(crate) fn load_all() -> Vec<Scenario> {
    let Ok(entries) = std::fs::read_dir(fixtures_dir()) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    paths.sort();
    paths.iter().map(|p| load(p)).collect()
}

/// Loads one scenario file, panicking with the file and line on a format error
/// (a broken fixture is a test failure, not something to skip).
pub(crate) fn load(path: &Path) -> Scenario {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut header: Option<(u32, bool, bool)> = None;
    let mut messages = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let where_ = || format!("{}:{}", path.display(), i + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            if comment.contains("proto_version=") {
                header =
                    Some(parse_header(comment).unwrap_or_else(|e| panic!("{}: {e}", where_())));
            }
            continue;
        }
        let mut cols = line.split_whitespace();
        let (Some(lsn), Some(xid), Some(hex), None) =
            (cols.next(), cols.next(), cols.next(), cols.next())
        else {
            panic!("{}: expected `<lsn> <xid> <hex>`, got {line:?}", where_());
        };
        let lsn: Lsn = lsn.parse().unwrap_or_else(|e| panic!("{}: {e}", where_()));
        let xid: u32 = xid
            .parse()
            .unwrap_or_else(|e| panic!("{}: bad xid {xid:?}: {e}", where_()));
        let data = decode_hex(hex).unwrap_or_else(|e| panic!("{}: {e}", where_()));
        messages.push(Recorded {
            line: i + 1,
            lsn,
            xid,
            data: Bytes::from(data),
        });
    }
    let (proto_version, binary, streaming) = header
        .unwrap_or_else(|| panic!("{}: missing `# proto_version=N ...` header", path.display()));
    Scenario {
        name,
        proto_version,
        binary,
        streaming,
        messages,
    }
}

fn parse_header(comment: &str) -> Result<(u32, bool, bool), String> {
    let mut version = None;
    let mut binary = false;
    let mut streaming = false;
    for kv in comment.split_whitespace() {
        let Some((k, v)) = kv.split_once('=') else {
            continue;
        };
        let on = || match v {
            "on" | "true" => Ok(true),
            "off" | "false" => Ok(false),
            _ => Err(format!("bad {k} value {v:?}")),
        };
        match k {
            "proto_version" => {
                version = Some(
                    v.parse()
                        .map_err(|e| format!("bad proto_version {v:?}: {e}"))?,
                );
            }
            "binary" => binary = on()?,
            "streaming" => streaming = on()?,
            _ => {}
        }
    }
    Ok((version.ok_or("no proto_version")?, binary, streaming))
}

/// Hex as `pg_logical_slot_peek_binary_changes` data prints it, with or
/// without psql's `\x` prefix.
fn decode_hex(hex: &str) -> Result<Vec<u8>, String> {
    let hex = hex.strip_prefix("\\x").unwrap_or(hex);
    if !hex.len().is_multiple_of(2) {
        return Err(format!("odd-length hex ({} digits)", hex.len()));
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|d| u8::from_str_radix(d, 16).ok())
                .ok_or_else(|| format!("bad hex digit pair at {i}"))
        })
        .collect()
}
