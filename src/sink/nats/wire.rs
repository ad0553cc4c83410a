//! The part of the NATS client protocol that publishing to JetStream
//! takes (<https://docs.nats.io/reference/reference-protocols/nats-protocol>):
//! the server's `INFO`, `PUB`/`HPUB` with a reply subject and a header
//! block, and the server's `MSG`/`HMSG`, `PING`, `PONG`, `+OK` and `-ERR`.
//! Written here rather than taken from async-nats because Debezium
//! Server's header bytes (`name:value` lines in its maps' order) and one
//! buffer per batch are the point; async-nats writes `name: value` from
//! its own hash map and makes a request (an inbox, a future, timers) of
//! each message.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use serde::Deserialize;

/// The first line of a header block (no status).
const HEADER_VERSION: &[u8] = b"NATS/1.0\r\n";
/// A control line longer than this is not NATS (the server's own limit
/// is 4 KiB).
const MAX_CONTROL_LINE: usize = 64 * 1024;

/// The server's `INFO`: what the connection needs of it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(super) struct ServerInfo {
    pub(super) server_name: String,
    pub(super) version: String,
    /// The largest message (headers and payload) it takes.
    pub(super) max_payload: usize,
    /// Whether it takes `HPUB`.
    pub(super) headers: bool,
    pub(super) tls_required: bool,
    /// What a JWT user signs with its NKey seed.
    pub(super) nonce: Option<String>,
}

impl ServerInfo {
    pub(super) fn parse(json: &[u8]) -> Result<ServerInfo, String> {
        serde_json::from_slice(json).map_err(|e| format!("the server's INFO is not NATS's: {e}"))
    }
}

/// What the server sent.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Op {
    /// `INFO {json}`: at the start, and when the cluster changes.
    Info(Bytes),
    /// `MSG` or `HMSG` to a subscription.
    Msg {
        subject: Bytes,
        /// The header block as sent (`NATS/1.0 503\r\n...`), if any.
        headers: Option<Bytes>,
        payload: Bytes,
    },
    Ping,
    Pong,
    /// `+OK` (verbose mode only; walrelay asks for none).
    Ok,
    /// `-ERR 'text'`: most close the connection.
    Err(String),
}

/// Takes one operation off the front of `buf`; `None` when `buf` does not
/// hold a whole one yet (nothing is consumed then).
pub(super) fn parse(buf: &mut BytesMut) -> Result<Option<Op>, String> {
    let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else {
        if buf.len() > MAX_CONTROL_LINE {
            return Err(format!(
                "no end of line in {} bytes from the server",
                buf.len()
            ));
        }
        return Ok(None);
    };
    let line = &buf[..end];
    let (verb, args) = match line.iter().position(|b| *b == b' ' || *b == b'\t') {
        Some(i) => (&line[..i], line[i + 1..].trim_ascii()),
        None => (line, &b""[..]),
    };
    let op = match verb.to_ascii_uppercase().as_slice() {
        b"MSG" | b"HMSG" => {
            let with_headers = verb.len() == 4;
            let fields: Vec<&[u8]> = args
                .split(|b| *b == b' ' || *b == b'\t')
                .filter(|f| !f.is_empty())
                .collect();
            // subject sid [reply] [header bytes] total bytes
            let sizes = if with_headers { 2 } else { 1 };
            if fields.len() != 2 + sizes && fields.len() != 3 + sizes {
                return Err(format!(
                    "a malformed {} line from the server: {:?}",
                    String::from_utf8_lossy(verb),
                    String::from_utf8_lossy(line)
                ));
            }
            let number = |f: &[u8]| {
                std::str::from_utf8(f)
                    .ok()
                    .and_then(|s| s.parse::<usize>().ok())
                    .ok_or_else(|| {
                        format!(
                            "a malformed size in {:?} from the server",
                            String::from_utf8_lossy(line)
                        )
                    })
            };
            let total = number(fields[fields.len() - 1])?;
            let header_len = if with_headers {
                number(fields[fields.len() - 2])?
            } else {
                0
            };
            if header_len > total {
                return Err(format!(
                    "header bytes beyond the message in {:?}",
                    String::from_utf8_lossy(line)
                ));
            }
            let subject = Bytes::copy_from_slice(fields[0]);
            if buf.len() < end + 2 + total + 2 {
                return Ok(None);
            }
            buf.advance(end + 2);
            let mut body = buf.split_to(total).freeze();
            buf.advance(2);
            let headers = with_headers.then(|| body.split_to(header_len));
            return Ok(Some(Op::Msg {
                subject,
                headers,
                payload: body,
            }));
        }
        b"PING" => Op::Ping,
        b"PONG" => Op::Pong,
        b"+OK" => Op::Ok,
        b"-ERR" => Op::Err(String::from_utf8_lossy(args).trim_matches('\'').to_owned()),
        b"INFO" => Op::Info(Bytes::copy_from_slice(args)),
        _ => {
            return Err(format!(
                "an unknown operation from the server: {:?}",
                String::from_utf8_lossy(line)
            ))
        }
    };
    buf.advance(end + 2);
    Ok(Some(op))
}

/// The status of a header block (`NATS/1.0 503` → 503), if it has one.
pub(super) fn status(headers: &[u8]) -> Option<u16> {
    let first = headers.split(|b| *b == b'\n').next()?;
    let rest = first.strip_prefix(b"NATS/1.0")?.trim_ascii();
    let code = rest.split(|b| *b == b' ').next()?;
    std::str::from_utf8(code).ok()?.parse().ok()
}

/// A header block: `NATS/1.0`, one `name:value` line per header as
/// jnats writes them (no blank after the colon), and the empty line.
/// The caller has checked names and values (no CR, LF, or `:` in a name).
pub(super) fn header_block<'a>(lines: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Vec<u8> {
    let mut block = Vec::with_capacity(256);
    block.extend_from_slice(HEADER_VERSION);
    for (name, value) in lines {
        block.extend_from_slice(name.as_bytes());
        block.push(b':');
        block.extend_from_slice(value);
        block.extend_from_slice(b"\r\n");
    }
    block.extend_from_slice(b"\r\n");
    block
}

/// Appends one publish: `PUB subject reply size` or, with a header block,
/// `HPUB subject reply header-size total-size`, then the bytes.
pub(super) fn publish(
    out: &mut BytesMut,
    subject: &str,
    reply: &str,
    headers: Option<&[u8]>,
    payload: &[u8],
) {
    use std::fmt::Write as _;
    let mut line = String::with_capacity(subject.len() + reply.len() + 32);
    match headers {
        Some(h) => {
            let _ = write!(
                line,
                "HPUB {subject} {reply} {} {}\r\n",
                h.len(),
                h.len() + payload.len()
            );
        }
        None => {
            let _ = write!(line, "PUB {subject} {reply} {}\r\n", payload.len());
        }
    }
    out.reserve(line.len() + headers.map_or(0, <[u8]>::len) + payload.len() + 2);
    out.put_slice(line.as_bytes());
    if let Some(h) = headers {
        out.put_slice(h);
    }
    out.put_slice(payload);
    out.put_slice(b"\r\n");
}

/// JetStream's answer to a publish.
#[derive(Debug, Deserialize)]
pub(super) struct PubAck {
    /// Set on success: the stream that stored it.
    #[serde(default)]
    pub(super) stream: Option<String>,
    /// Set on a refusal.
    #[serde(default)]
    pub(super) error: Option<ApiError>,
}

/// JetStream's error object.
#[derive(Debug, Deserialize)]
pub(super) struct ApiError {
    #[serde(default)]
    pub(super) code: u16,
    #[serde(default)]
    pub(super) err_code: u32,
    #[serde(default)]
    pub(super) description: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(bytes: &[u8]) -> Vec<Op> {
        let mut buf = BytesMut::from(bytes);
        let mut ops = Vec::new();
        while let Some(op) = parse(&mut buf).expect("valid") {
            ops.push(op);
        }
        assert!(buf.is_empty(), "left: {buf:?}");
        ops
    }

    #[test]
    fn server_operations_are_read_whole_or_not_at_all() {
        let wire = b"INFO {\"max_payload\":1048576,\"headers\":true}\r\nPING\r\n\
                     MSG _INBOX.a.1 1 28\r\n{\"stream\":\"S\",\"seq\":1,\"x\":1}\r\n\
                     HMSG _INBOX.a.2 1 16 16\r\nNATS/1.0 503\r\n\r\n\r\n-ERR 'Stale Connection'\r\n+OK\r\npong\r\n";
        let ops = all(wire);
        assert_eq!(
            ops[0],
            Op::Info(Bytes::from_static(
                b"{\"max_payload\":1048576,\"headers\":true}"
            ))
        );
        assert_eq!(ops[1], Op::Ping);
        assert_eq!(
            ops[2],
            Op::Msg {
                subject: Bytes::from_static(b"_INBOX.a.1"),
                headers: None,
                payload: Bytes::from_static(b"{\"stream\":\"S\",\"seq\":1,\"x\":1}"),
            }
        );
        let Op::Msg {
            headers, payload, ..
        } = &ops[3]
        else {
            panic!("{:?}", ops[3])
        };
        assert_eq!(status(headers.as_ref().expect("headers")), Some(503));
        assert!(payload.is_empty());
        assert_eq!(ops[4], Op::Err("Stale Connection".into()));
        assert_eq!(&ops[5..], [Op::Ok, Op::Pong]);
        // Cut anywhere, nothing is taken until the operation is whole.
        for cut in 0..wire.len() {
            let mut buf = BytesMut::from(&wire[..cut]);
            let mut n = 0;
            while parse(&mut buf).expect("valid").is_some() {
                n += 1;
            }
            let mut rest = buf;
            rest.extend_from_slice(&wire[cut..]);
            n += all(&rest).len();
            assert_eq!(n, ops.len(), "cut at {cut}");
        }
    }

    #[test]
    fn malformed_lines_are_errors() {
        assert!(parse(&mut BytesMut::from(&b"MSG a 1 x\r\n"[..])).is_err());
        assert!(parse(&mut BytesMut::from(&b"HMSG a 1 9 3\r\n"[..])).is_err());
        assert!(parse(&mut BytesMut::from(&b"WHAT\r\n"[..])).is_err());
        assert!(parse(&mut BytesMut::from(&vec![b'x'; MAX_CONTROL_LINE + 1][..])).is_err());
    }

    #[test]
    fn publishes_are_written_as_jnats_writes_headers() {
        let block = header_block([("id", &b"{\"a\":1}"[..]), ("Nats-Msg-Id", b"e1")]);
        assert_eq!(block, b"NATS/1.0\r\nid:{\"a\":1}\r\nNats-Msg-Id:e1\r\n\r\n");
        let mut out = BytesMut::new();
        publish(&mut out, "a.b", "_INBOX.x.7", Some(&block), b"{}");
        publish(&mut out, "a.b", "_INBOX.x.8", None, b"hi");
        let want = format!(
            "HPUB a.b _INBOX.x.7 {} {}\r\n{}{{}}\r\nPUB a.b _INBOX.x.8 2\r\nhi\r\n",
            block.len(),
            block.len() + 2,
            String::from_utf8_lossy(&block)
        );
        assert_eq!(String::from_utf8_lossy(&out), want);
    }

    #[test]
    fn acks_and_refusals_are_told_apart() {
        let ok: PubAck =
            serde_json::from_slice(br#"{"stream":"S","seq":3,"duplicate":true}"#).expect("ack");
        assert_eq!(ok.stream.as_deref(), Some("S"));
        assert!(ok.error.is_none());
        let no: PubAck = serde_json::from_slice(
            br#"{"error":{"code":400,"err_code":10054,"description":"message size exceeds maximum allowed"}}"#,
        )
        .expect("refusal");
        let e = no.error.expect("error");
        assert_eq!((e.code, e.err_code), (400, 10054));
        assert_eq!(status(b"NATS/1.0\r\nx:y\r\n\r\n"), None);
    }
}
