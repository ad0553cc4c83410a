//! The replication socket's reader, on a thread of its own.
//!
//! The walsender can only send as fast as its client reads: when the socket
//! buffers are full its `send()` blocks, and every small read that frees a
//! little room wakes it again for a little more. Decoding, routing and
//! handing records to librdkafka run on the relay's runtime thread; if that
//! thread also read the socket, the walsender would wait whenever it was
//! busy. So each WAL session gets a [`WalIo`] thread with a runtime of its
//! own: the replication connection is opened there (its socket is then
//! registered with that thread's reactor, whose readiness never waits for
//! the relay's thread), and a [`FrameReceiver`]'s task reads the socket
//! there, cuts the bytes into runs of whole protocol messages and hands
//! them over a bounded channel, each with the time it was read.
//!
//! Backpressure only when truly full: while the channel (at most
//! [`CHANNEL_CHUNKS`] runs of at most [`CHUNK_MAX`] bytes each) has no room
//! the reader goes on reading into its own buffer, up to [`READER_LIMIT`]
//! bytes; only then does it stop reading (and TCP flow control makes the
//! walsender wait, as it must when Kafka is slower than the slot).
//!
//! The read rhythm: after every read the thread sleeps
//! `replication.read_coalesce_us` before the next one, so the walsender's
//! sends meanwhile land in the socket buffer without waking anyone (a reader waiting in `epoll_wait` is
//! woken by nearly every message, and that wake-up is paid inside the
//! walsender's `send()`). The pause is a thread sleep, not a timer: a timer
//! would leave the thread in `epoll_wait` on the socket. It happens after
//! the bytes read were handed over, so it delays no event that was read.
//! After every read, not only after a small one: a large read followed at
//! once by the next one left the thread parked in `epoll_wait` whenever the
//! socket was empty, and W1 drained at 38,046 events/s with the walsender
//! at 26.1 CPU s per million events, against 62,060 and 15.8 with a pause
//! after every read (same run, docs/benchmarks.md).

use std::collections::VecDeque;
use std::io;
use std::thread;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use postgres_protocol::message::backend::Message;
use tokio::io::{AsyncReadExt, ReadHalf};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::replication::{
    frame_len, server_error, BoxedTransport, ConnectParams, ReplicationConnection,
    ReplicationError, StreamReader, READ_CHUNK,
};
use crate::clock::unix_now_micros;

/// Bytes the reader holds while the channel is full before it stops
/// reading the socket.
pub(crate) const READER_LIMIT: usize = 2 * 1024 * 1024;

/// Runs of messages in the channel between the reader and the decoder.
const CHANNEL_CHUNKS: usize = 4;

/// A run handed over holds at most this many bytes (or one larger
/// message): so the channel holds at most about 1 MiB, and a run, which
/// stays in memory while any event cut from it is in flight, is small.
const CHUNK_MAX: usize = READ_CHUNK;

/// One run of whole protocol messages, as read.
struct Chunk {
    bytes: Bytes,
    /// When its first byte was read off the socket, Unix µs.
    received_us: i64,
}

/// The thread that owns a WAL session's replication socket: a
/// single-threaded runtime that hosts the connection's reactor
/// registration and the reader task. Dropping it ends the thread (and with
/// it any socket still registered there), so it must outlive the
/// connection and the stream made on it.
pub(crate) struct WalIo {
    handle: tokio::runtime::Handle,
    stop: Option<oneshot::Sender<()>>,
}

impl WalIo {
    /// Starts the thread, named `walrelay-wal` (the pipeline's name is in
    /// the log lines' span, not in the 15-byte thread name).
    pub(crate) fn start() -> io::Result<WalIo> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        thread::Builder::new()
            .name("walrelay-wal".into())
            .spawn(move || {
                // Ends when the sender is dropped too.
                let _ = runtime.block_on(stopped);
            })?;
        Ok(WalIo {
            handle,
            stop: Some(stop),
        })
    }

    /// Opens the replication connection on this thread, so its socket is
    /// registered with this thread's reactor.
    pub(crate) async fn connect(
        &self,
        params: &ConnectParams,
    ) -> Result<ReplicationConnection, ReplicationError> {
        let params = params.clone();
        self.handle
            .spawn(async move { ReplicationConnection::connect(&params).await })
            .await
            .map_err(|e| ReplicationError::Io(io::Error::other(e)))?
    }

    /// Moves the stream's reading side to this thread: from now on the
    /// socket is read there, `coalesce` being the pause after every read.
    pub(crate) fn receive(&self, reader: StreamReader, coalesce: Duration) -> FrameReceiver {
        let (io, buf) = reader.into_parts();
        let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
        let task = self.handle.spawn(read_loop(io, buf, tx, coalesce));
        FrameReceiver {
            rx,
            current: Bytes::new(),
            received_us: 0,
            heard: false,
            task,
        }
    }
}

impl Drop for WalIo {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The length of the longest prefix of `buf` made of whole messages and
/// at most `max` bytes long (or one whole message, if the first is
/// longer), and the length of the first incomplete message (0 when there
/// is none, its header is incomplete, or the prefix stopped at `max`).
fn whole_prefix(buf: &[u8], max: usize) -> Result<(usize, usize), ReplicationError> {
    let mut at = 0;
    while buf.len() - at >= 5 {
        let len = frame_len(&buf[at..])?;
        if buf.len() - at < len {
            return Ok((at, len));
        }
        if at > 0 && at + len > max {
            return Ok((at, 0));
        }
        at += len;
    }
    Ok((at, 0))
}

/// Cuts the first `whole` bytes off `buf` as one run, read at
/// `*first_unsent_us`; what stays behind came with the latest read, at
/// `last_read_us`.
fn cut(buf: &mut BytesMut, whole: usize, first_unsent_us: &mut i64, last_read_us: i64) -> Chunk {
    let chunk = Chunk {
        bytes: buf.split_to(whole).freeze(),
        received_us: *first_unsent_us,
    };
    *first_unsent_us = last_read_us;
    chunk
}

/// Makes room in `buf` for a read of `want` bytes without ever growing an
/// allocation: `BytesMut::reserve` on a buffer it holds alone grows it to
/// twice its size, and every run cut from it afterwards keeps the larger
/// allocation alive while any event cut from that run is in flight (a W2
/// drain had 22.5 MB of read buffers alive at its peak that way, against
/// a few MB of WAL in flight: docs/benchmarks.md, "Memory"). The buffer is
/// reused when no run cut from it is left and its bytes fit once moved to
/// its front; otherwise its bytes (a partial message at most: runs are
/// cut as soon as they are whole) move to a new allocation of `want` more.
fn make_room(buf: &mut BytesMut, want: usize) {
    if buf.capacity() - buf.len() >= want / 4 || buf.try_reclaim(want) {
        return;
    }
    let mut fresh = BytesMut::with_capacity(buf.len() + want);
    fresh.extend_from_slice(buf);
    *buf = fresh;
}

/// Runs cut off the buffer and not yet handed over (the channel was full),
/// oldest first.
#[derive(Default)]
struct Pending {
    runs: VecDeque<Chunk>,
    bytes: usize,
}

impl Pending {
    fn push(&mut self, chunk: Chunk) {
        self.bytes += chunk.bytes.len();
        self.runs.push_back(chunk);
    }

    /// Hands the oldest run over with `permit`.
    fn send(&mut self, permit: mpsc::Permit<'_, Result<Chunk, ReplicationError>>) {
        if let Some(chunk) = self.runs.pop_front() {
            self.bytes -= chunk.bytes.len();
            permit.send(Ok(chunk));
        }
    }
}

/// The reader task: reads the socket, hands whole messages to `tx`, ends at
/// the first error (handed over too, after the runs before it) or when the
/// receiver is gone.
async fn read_loop(
    mut io: ReadHalf<BoxedTransport>,
    mut buf: BytesMut,
    tx: mpsc::Sender<Result<Chunk, ReplicationError>>,
    coalesce: Duration,
) {
    // When the first byte not yet cut off was read, and the latest read.
    let mut first_unsent_us = unix_now_micros();
    let mut last_read_us = first_unsent_us;
    // A read happened: pause once what it completed is handed over.
    let mut pause = false;
    let mut pending = Pending::default();
    loop {
        // Cut every whole run off, so that the buffer keeps a partial
        // message at most and a new allocation copies little.
        let cut_all = loop {
            match whole_prefix(&buf, CHUNK_MAX) {
                Ok((0, next_len)) => break Ok(next_len),
                Ok((whole, _)) => {
                    pending.push(cut(&mut buf, whole, &mut first_unsent_us, last_read_us));
                }
                Err(e) => break Err(e),
            }
        };
        let next_len = match cut_all {
            Ok(next_len) => next_len,
            Err(e) => return end(&tx, pending, e).await,
        };
        // Hand over what the channel has room for; wait for room only
        // when what is held is at its limit.
        while !pending.runs.is_empty() {
            match tx.try_reserve() {
                Ok(permit) => pending.send(permit),
                Err(mpsc::error::TrySendError::Full(())) => break,
                Err(mpsc::error::TrySendError::Closed(())) => return,
            }
        }
        if !pending.runs.is_empty() && pending.bytes + buf.len() >= READER_LIMIT {
            match tx.reserve().await {
                Ok(permit) => {
                    pending.send(permit);
                    continue;
                }
                Err(_) => return,
            }
        }
        if std::mem::take(&mut pause) {
            thread::sleep(coalesce);
        }
        // Room for the next read: a chunk, or the rest of a large message.
        let want = READ_CHUNK.max(next_len.saturating_sub(buf.len()));
        make_room(&mut buf, want);
        let was_empty = buf.is_empty();
        let read = tokio::select! {
            biased;
            // Room appeared for a run already cut.
            permit = tx.reserve(), if !pending.runs.is_empty() => {
                match permit {
                    Ok(permit) => {
                        pending.send(permit);
                        continue;
                    }
                    Err(_) => return,
                }
            }
            r = io.read_buf(&mut buf) => r,
        };
        match read {
            Ok(0) => return end(&tx, pending, ReplicationError::Closed).await,
            Ok(_) => {
                last_read_us = unix_now_micros();
                if was_empty {
                    first_unsent_us = last_read_us;
                }
                pause = !coalesce.is_zero();
            }
            Err(e) => return end(&tx, pending, e.into()).await,
        }
    }
}

/// Hands over the runs already cut (a server's last messages before it
/// closed the connection are often its error), then the error that ends
/// the reader.
async fn end(
    tx: &mpsc::Sender<Result<Chunk, ReplicationError>>,
    pending: Pending,
    error: ReplicationError,
) {
    for chunk in pending.runs {
        if tx.send(Ok(chunk)).await.is_err() {
            return;
        }
    }
    let _ = tx.send(Err(error)).await;
}

/// The decoder's side: CopyData payloads from the reader thread, each run
/// with the time it was read.
pub(crate) struct FrameReceiver {
    rx: mpsc::Receiver<Result<Chunk, ReplicationError>>,
    /// What is left of the current run: whole messages only.
    current: Bytes,
    received_us: i64,
    /// A run arrived since [`FrameReceiver::take_heard`] last looked.
    heard: bool,
    task: JoinHandle<()>,
}

impl FrameReceiver {
    /// The next CopyData payload already read, without waiting; `Ok(None)`
    /// when everything read so far was taken.
    pub(crate) fn try_next(&mut self) -> Result<Option<Bytes>, ReplicationError> {
        loop {
            if self.current.is_empty() {
                match self.rx.try_recv() {
                    Ok(chunk) => self.take(chunk?),
                    Err(mpsc::error::TryRecvError::Empty) => return Ok(None),
                    Err(mpsc::error::TryRecvError::Disconnected) => {
                        return Err(ReplicationError::Closed)
                    }
                }
                continue;
            }
            // The reader hands over whole messages only.
            let total = frame_len(&self.current)?;
            let mut frame = self.current.split_to(total);
            match frame[0] {
                b'd' => {
                    frame.advance(5);
                    return Ok(Some(frame));
                }
                // CopyDone, or CommandComplete/ReadyForQuery after it: the
                // server ended the stream (e.g. at shutdown).
                b'c' | b'C' | b'Z' => return Err(ReplicationError::Closed),
                b'E' => {
                    let mut owned = BytesMut::from(&frame[..]);
                    return match Message::parse(&mut owned)? {
                        Some(Message::ErrorResponse(body)) => Err(server_error(&body)),
                        _ => Err(ReplicationError::Protocol(
                            "malformed error response".into(),
                        )),
                    };
                }
                // NoticeResponse, ParameterStatus: skip.
                b'N' | b'S' => {}
                tag => {
                    return Err(ReplicationError::Protocol(format!(
                        "unexpected message tag {:?} in CopyBoth mode",
                        tag as char
                    )))
                }
            }
        }
    }

    /// Waits until the reader hands over more; returns how many bytes.
    /// Cancel-safe.
    pub(crate) async fn read_more(&mut self) -> Result<usize, ReplicationError> {
        match self.rx.recv().await {
            Some(chunk) => {
                let chunk = chunk?;
                let n = chunk.bytes.len();
                self.take(chunk);
                Ok(n)
            }
            None => Err(ReplicationError::Closed),
        }
    }

    /// When the bytes of the last payload returned were read, Unix µs.
    pub(crate) fn received_us(&self) -> i64 {
        self.received_us
    }

    /// Whether the server sent anything since the last call: a run taken
    /// by [`FrameReceiver::try_next`] counts as much as one `read_more`
    /// waited for (the reader thread hands over at any time, so an answer
    /// to a request for a reply is often taken without waiting).
    pub(crate) fn take_heard(&mut self) -> bool {
        std::mem::take(&mut self.heard)
    }

    fn take(&mut self, chunk: Chunk) {
        debug_assert!(self.current.is_empty());
        self.current = chunk.bytes;
        self.received_us = chunk.received_us;
        self.heard = true;
    }
}

impl Drop for FrameReceiver {
    fn drop(&mut self) {
        // The reader may be waiting on a silent socket.
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut f = vec![tag];
        f.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
        f.extend_from_slice(body);
        f
    }

    #[test]
    fn the_whole_prefix_stops_before_a_partial_message() {
        let mut buf = frame(b'd', b"abc");
        buf.extend(frame(b'd', b"defgh"));
        let whole = buf.len();
        assert_eq!(whole_prefix(&buf, 1 << 20).unwrap(), (whole, 0));
        // At most `max` bytes, but always the first message whole.
        assert_eq!(whole_prefix(&buf, 9).unwrap(), (8, 0));
        assert_eq!(whole_prefix(&buf, 1).unwrap(), (8, 0));
        let partial = frame(b'd', &[7u8; 100]);
        buf.extend_from_slice(&partial[..10]);
        assert_eq!(whole_prefix(&buf, 1 << 20).unwrap(), (whole, 105));
        // A partial header: nothing known of the next one yet.
        buf.truncate(whole + 3);
        assert_eq!(whole_prefix(&buf, 1 << 20).unwrap(), (whole, 0));
        assert!(
            whole_prefix(&[b'd', 0, 0, 0, 1], 1 << 20).is_err(),
            "length below 4"
        );
    }

    #[tokio::test]
    async fn frames_cross_reads_and_arrive_whole_in_order() {
        // A socket pair: one side written in awkward pieces, the other read
        // by the reader task on a WalIo thread.
        let (client, mut server) = tokio::io::duplex(64);
        let io: BoxedTransport = Box::new(client);
        let (read_half, _write_half) = tokio::io::split(io);
        let wal = WalIo::start().unwrap();
        let reader = StreamReader::from_parts(read_half, BytesMut::new());
        let mut rx = wal.receive(reader, Duration::ZERO);
        let mut wire = Vec::new();
        let mut expected = Vec::new();
        for i in 0..200u32 {
            let body = vec![i as u8; (i as usize * 7) % 300 + 1];
            wire.extend(frame(b'd', &body));
            if i % 50 == 0 {
                wire.extend(frame(b'N', b"notice"));
            }
            expected.push(body);
        }
        wire.extend(frame(b'c', b""));
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for piece in wire.chunks(37) {
                server.write_all(piece).await.unwrap();
            }
            server
        });
        let mut got = Vec::new();
        loop {
            match rx.try_next() {
                Ok(Some(f)) => {
                    assert!(rx.received_us() > 0);
                    got.push(f.to_vec());
                }
                Ok(None) => {
                    rx.read_more().await.unwrap();
                }
                Err(ReplicationError::Closed) => break,
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(got, expected);
        drop(writer.await.unwrap());
    }

    /// A run taken without waiting (by `try_next`) counts as hearing from
    /// the server as much as one `read_more` waited for, a notice alone
    /// too; looking clears it.
    #[tokio::test]
    async fn a_run_taken_either_way_is_heard_once() {
        let (client, mut server) = tokio::io::duplex(1024);
        let io: BoxedTransport = Box::new(client);
        let (read_half, _write_half) = tokio::io::split(io);
        let wal = WalIo::start().unwrap();
        let reader = StreamReader::from_parts(read_half, BytesMut::new());
        let mut rx = wal.receive(reader, Duration::ZERO);
        assert!(!rx.take_heard(), "nothing sent yet");
        use tokio::io::AsyncWriteExt;
        server.write_all(&frame(b'd', b"keepalive")).await.unwrap();
        // Taken by try_next alone, once the reader thread handed it over.
        let frame_taken = loop {
            if let Some(f) = rx.try_next().unwrap() {
                break f;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        assert_eq!(&frame_taken[..], b"keepalive");
        assert!(rx.take_heard(), "a run taken by try_next");
        assert!(!rx.take_heard(), "looking clears it");
        server.write_all(&frame(b'N', b"notice")).await.unwrap();
        rx.read_more().await.unwrap();
        assert!(rx.try_next().unwrap().is_none(), "a notice is no payload");
        assert!(rx.take_heard(), "but the server was heard");
    }

    /// Room for a read never grows an allocation: a buffer whose runs are
    /// still held moves its partial message to a new allocation of the
    /// size asked for, and one held alone is reused in place.
    #[test]
    fn making_room_never_doubles_a_buffer() {
        let mut buf = BytesMut::with_capacity(READ_CHUNK);
        buf.extend_from_slice(&vec![1u8; READ_CHUNK - 1000]);
        let held = buf.split_to(READ_CHUNK - 1100).freeze();
        make_room(&mut buf, READ_CHUNK);
        assert_eq!(&buf[..], &[1u8; 100][..]);
        assert!(
            buf.capacity() >= READ_CHUNK && buf.capacity() < READ_CHUNK + 4096,
            "{}",
            buf.capacity()
        );
        drop(held);

        // Alone: its bytes move to the front of the same allocation.
        let mut alone = BytesMut::with_capacity(2 * READ_CHUNK);
        alone.extend_from_slice(&vec![2u8; 2 * READ_CHUNK - 10]);
        drop(alone.split_to(2 * READ_CHUNK - 20));
        let at = alone.as_ptr() as usize;
        make_room(&mut alone, READ_CHUNK);
        assert_eq!(&alone[..], &[2u8; 10][..]);
        assert!(alone.capacity() - alone.len() >= READ_CHUNK);
        assert!(
            alone.capacity() <= 2 * READ_CHUNK,
            "grown to {}",
            alone.capacity()
        );
        assert_ne!(alone.as_ptr() as usize, at, "moved to the front");

        // The rest of a large message: room for all of it.
        let mut big = BytesMut::from(&[3u8; 10][..]);
        make_room(&mut big, 4 * READ_CHUNK);
        assert!(big.capacity() - big.len() >= 4 * READ_CHUNK);
    }

    /// Runs the channel had no room for are handed over before the end of
    /// the stream, in order.
    #[tokio::test]
    async fn runs_held_back_arrive_before_the_end() {
        let (client, mut server) = tokio::io::duplex(1 << 20);
        let io: BoxedTransport = Box::new(client);
        let (read_half, _write_half) = tokio::io::split(io);
        let wal = WalIo::start().unwrap();
        let reader = StreamReader::from_parts(read_half, BytesMut::new());
        let mut rx = wal.receive(reader, Duration::ZERO);
        let bodies: Vec<Vec<u8>> = (0..12u8).map(|i| vec![i; 100_000]).collect();
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for body in (0..12u8).map(|i| vec![i; 100_000]) {
                server.write_all(&frame(b'd', &body)).await.unwrap();
            }
            // The end of the stream, before anything was taken.
        });
        writer.await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut got = Vec::new();
        loop {
            match rx.try_next() {
                Ok(Some(f)) => got.push(f.to_vec()),
                Ok(None) => match rx.read_more().await {
                    Ok(_) => {}
                    Err(ReplicationError::Closed) => break,
                    Err(e) => panic!("{e}"),
                },
                Err(ReplicationError::Closed) => break,
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(got, bodies);
    }
}
