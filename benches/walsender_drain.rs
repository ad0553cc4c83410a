//! The "walsender" baseline of `benches/walbench`: drains a logical slot up
//! to an end LSN with a client that does the least a client can, so that the
//! measured rate is the walsender's own (decoding and sending pgoutput), not
//! the client's.
//!
//! `pg_recvlogical` is not that: it reads through libpq (16 KB reads), writes
//! each message to its output with two `write()` calls and reads the clock
//! per message, and on this machine it drains W1 slower than walrelay while
//! its walsender burns more CPU per event. This program uses walrelay's own
//! replication connection (256 KB reads), reads in batches (after a read
//! that brought little it sleeps 1 ms, so the walsender is not woken to send
//! every message; see [`DEFAULT_NAP`]), decodes only the replication frame
//! headers and the first byte of each pgoutput message (its type, to count
//! inserts, deletes and logical decoding messages; never the rest), answers
//! keepalives that ask for a reply, sends a status update about every 10 s (as `pg_recvlogical` does)
//! and stops as `pg_recvlogical -E` does: at the first XLogData whose
//! `wal_start` passes the end LSN (not counted), at one equal to it (counted),
//! or at a keepalive whose `wal_end` reaches it.
//!
//! Usage: `walsender_drain HOST PORT USER DBNAME SLOT ENDPOS [KEY=VALUE...]`,
//! the pairs being pgoutput options (`proto_version=1`,
//! `publication_names=bench`, `messages=true` for logical decoding
//! messages, ...); the password, if the server asks for one,
//! comes from `PGPASSWORD`, the pause from `WALSENDER_DRAIN_NAP_US`; no
//! TLS. It prints nothing per message, one line at the end
//! (`messages=... keepalives=... bytes=... seconds=... begins=... commits=...
//! inserts=... deletes=... logical_messages=...`), and exits
//! non-zero on any error. Built by `benches/run.sh` with
//! `cargo build --release --bench walsender_drain`. It never creates or drops
//! slots: the driver (`benches/walbench`) owns them.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use walrelay::clock::pg_now_micros;
use walrelay::postgres::config::{Endpoint, TargetSessionAttrs};
use walrelay::postgres::replication::{
    ConnectParams, ReplicationConnection, ReplicationError, ReplicationStream, StreamWriter,
};
use walrelay::postgres::tls::TlsParams;
use walrelay::secret::Secret;
use walrelay_proto::frame::{decode_replication_message, ReplicationMessage, StandbyStatusUpdate};
use walrelay_proto::{DecodeError, Lsn};

/// How often an unsolicited status update goes out (`pg_recvlogical -s`'s
/// default).
const STATUS_INTERVAL: Duration = Duration::from_secs(10);

/// Pause before the next read when the last one brought little, so that
/// the walsender's sends land in the socket buffer without waking us. A
/// reader that waits in `epoll_wait` is woken by nearly every message, and
/// the wake-up is paid in the walsender's `send()`: with a 0 µs pause W1's
/// walsender burned about 40 CPU s per million events and drained 25,000
/// events/s, with 1 ms 14 CPU s and 70,000 events/s (W2: 185,000 rows/s);
/// 3 ms let the socket buffer fill in W2 and stall the walsender.
/// `WALSENDER_DRAIN_NAP_US` overrides it (0: read as soon as bytes arrive).
const DEFAULT_NAP: Duration = Duration::from_millis(1);

/// A pass that consumed at least this much means the walsender is ahead of
/// us: read again at once rather than let the socket buffer fill.
const NAP_BELOW_BYTES: usize = 256 * 1024;

/// Bound on connect plus authentication.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Errors of the drain.
#[derive(Debug, thiserror::Error)]
enum DrainError {
    /// The command line is wrong; the message says how.
    #[error("{0}\nusage: walsender_drain HOST PORT USER DBNAME SLOT ENDPOS [KEY=VALUE...]")]
    Usage(String),
    /// Connecting, START_REPLICATION or the stream failed.
    #[error("replication connection")]
    Replication(#[from] ReplicationError),
    /// A CopyData payload is not a replication message.
    #[error("undecodable replication message after {messages} messages")]
    Decode {
        /// XLogData messages received before it.
        messages: u64,
        /// The decoder's error.
        #[source]
        source: DecodeError,
    },
    /// The async runtime could not start.
    #[error("cannot start the tokio runtime")]
    Runtime(#[source] std::io::Error),
}

/// What the command line asks for.
struct Args {
    params: ConnectParams,
    slot: String,
    endpos: Lsn,
    options: Vec<(String, String)>,
}

/// What was received, printed at the end.
#[derive(Default)]
struct Counts {
    /// XLogData messages.
    messages: u64,
    keepalives: u64,
    /// pgoutput bytes inside the XLogData messages.
    bytes: u64,
    seconds: f64,
    /// pgoutput messages by type (their first byte): what the walsender
    /// decoded, so the bench can check a drain carried what was written.
    begins: u64,
    commits: u64,
    inserts: u64,
    deletes: u64,
    /// Logical decoding messages ('M'; sent only with `messages=true`).
    logical_messages: u64,
}

impl Counts {
    fn count_type(&mut self, data: &[u8]) {
        match data.first() {
            Some(b'B') => self.begins += 1,
            Some(b'C') => self.commits += 1,
            Some(b'I') => self.inserts += 1,
            Some(b'D') => self.deletes += 1,
            Some(b'M') => self.logical_messages += 1,
            _ => {}
        }
    }
}

fn parse_args(argv: &[String]) -> Result<Args, DrainError> {
    let [host, port, user, dbname, slot, endpos, options @ ..] = argv else {
        return Err(DrainError::Usage(format!(
            "expected at least 6 arguments, got {}",
            argv.len()
        )));
    };
    let port = port
        .parse()
        .map_err(|_| DrainError::Usage(format!("bad port {port:?}")))?;
    let endpos = endpos
        .parse()
        .map_err(|_| DrainError::Usage(format!("bad end lsn {endpos:?}")))?;
    let options = options
        .iter()
        .map(|o| {
            o.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .ok_or_else(|| DrainError::Usage(format!("option {o:?} is not KEY=VALUE")))
        })
        .collect::<Result<_, _>>()?;
    Ok(Args {
        params: ConnectParams {
            hosts: vec![Endpoint::new(host.clone(), port)],
            target_session_attrs: TargetSessionAttrs::Any,
            user: user.clone(),
            password: std::env::var("PGPASSWORD").ok().map(Secret::new),
            dbname: dbname.clone(),
            application_name: "walsender_drain".to_owned(),
            connect_timeout: CONNECT_TIMEOUT,
            tls: TlsParams::default(),
        },
        slot: slot.clone(),
        endpos,
        options,
    })
}

/// Reports `received` as written and flushed, as `pg_recvlogical` does for
/// what it wrote to its output.
async fn send_status(writer: &mut StreamWriter, received: Lsn) -> Result<(), DrainError> {
    let update = StandbyStatusUpdate {
        write: received,
        flush: received,
        apply: Lsn::ZERO,
        client_time: pg_now_micros(),
        reply_requested: false,
    };
    writer.send_status(&update).await?;
    Ok(())
}

async fn drain(args: &Args, nap: Duration) -> Result<Counts, DrainError> {
    let conn = ReplicationConnection::connect(&args.params).await?;
    let options: Vec<(&str, String)> = args
        .options
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    // LSN zero: the server starts at the slot's confirmed_flush_lsn, as
    // pg_recvlogical --start without -I does.
    let ReplicationStream {
        mut reader,
        mut writer,
    } = conn
        .start_replication(&args.slot, Lsn::ZERO, &options)
        .await?;
    let started = Instant::now();
    let mut last_status = started;
    let mut received = Lsn::ZERO;
    let mut counts = Counts::default();
    'stream: loop {
        let mut pass_bytes = 0;
        while let Some(frame) = reader.try_next()? {
            pass_bytes += frame.len();
            let message =
                decode_replication_message(frame).map_err(|source| DrainError::Decode {
                    messages: counts.messages,
                    source,
                })?;
            match message {
                ReplicationMessage::XLogData(x) => {
                    if x.wal_start > args.endpos {
                        break 'stream;
                    }
                    counts.messages += 1;
                    counts.bytes += x.data.len() as u64;
                    counts.count_type(&x.data);
                    received = received.max(x.wal_start);
                    if x.wal_start == args.endpos {
                        break 'stream;
                    }
                }
                ReplicationMessage::PrimaryKeepalive(k) => {
                    counts.keepalives += 1;
                    if k.wal_end >= args.endpos {
                        break 'stream;
                    }
                    if k.reply_requested {
                        send_status(&mut writer, received).await?;
                        last_status = Instant::now();
                    }
                }
            }
        }
        // One clock read per socket read, not per message.
        let now = Instant::now();
        if now.duration_since(last_status) >= STATUS_INTERVAL {
            send_status(&mut writer, received).await?;
            last_status = now;
        }
        if pass_bytes < NAP_BELOW_BYTES && !nap.is_zero() {
            // A thread sleep, not a tokio one: the runtime would wait in
            // epoll_wait with the socket registered, and every send of the
            // walsender would wake it again.
            std::thread::sleep(nap);
        }
        reader.read_more().await?;
    }
    counts.seconds = started.elapsed().as_secs_f64();
    send_status(&mut writer, received).await?;
    // The slot is released when the connection goes; a failed goodbye
    // changes nothing measured.
    let _ = writer.close().await;
    Ok(counts)
}

fn run() -> Result<Counts, DrainError> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = parse_args(&argv)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(DrainError::Runtime)?;
    let nap = match std::env::var("WALSENDER_DRAIN_NAP_US") {
        Ok(v) => v.parse().map(Duration::from_micros).map_err(|_| {
            DrainError::Usage(format!("WALSENDER_DRAIN_NAP_US={v:?} is not microseconds"))
        })?,
        Err(_) => DEFAULT_NAP,
    };
    runtime.block_on(drain(&args, nap))
}

fn main() -> ExitCode {
    match run() {
        Ok(c) => {
            println!(
                "messages={} keepalives={} bytes={} seconds={:.3} begins={} commits={} inserts={} \
                 deletes={} logical_messages={}",
                c.messages,
                c.keepalives,
                c.bytes,
                c.seconds,
                c.begins,
                c.commits,
                c.inserts,
                c.deletes,
                c.logical_messages
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            let mut line = e.to_string();
            let mut cause = std::error::Error::source(&e);
            while let Some(c) = cause {
                line.push_str(": ");
                line.push_str(&c.to_string());
                cause = c.source();
            }
            eprintln!("walsender_drain: {line}");
            ExitCode::FAILURE
        }
    }
}
