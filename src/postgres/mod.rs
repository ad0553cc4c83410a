//! The PostgreSQL side: connections (a host list tried with libpq's rules,
//! TLS, SCRAM, channel binding), the replication protocol, the catalog
//! (every SQL statement walrelay runs, the snapshot's included), slot
//! policy, and the WAL stream that is walrelay's first
//! [`crate::source::Source`].
//!
//! ```text
//!  walsender ──CopyData('w' XLogData / 'k' keepalive)──▶ WalIo thread ▶ FrameReceiver (reader)
//!      ▲                                                   │ walrelay_proto decode (wal)
//!      │ 'r' standby status update                         ▼
//!      │  write = received, flush = apply = durable       Assembler (txn) ──▶ bounded channel ──▶ sink
//!      └──────────── StreamWriter ◀── Frontier::durable() ◀── tracker ◀── delivery reports ◀──────┘
//! ```
//!
//! Progress rules: the LSN reported as flushed is only ever the frontier's
//! durable position; with the slot as the progress store that is the
//! checkpoint tracker's confirmed LSN (the commit end of the longest fully
//! delivered prefix of transactions, or the keepalive's `wal_end` when
//! nothing is in flight). The merely received position is only reported as
//! `write`. Status updates go out every `status_interval` and at once when
//! the server asks, also while the sink applies backpressure, so the
//! walsender never times us out. While a streamed transaction is open,
//! keepalives confirm nothing.
//!
//! With protocol version 2 the server streams large transactions while they
//! run; the assembler spills them to disk and, at their Stream Commit, the
//! read loop reads them back batch by batch through the same bounded
//! hand-off, sending status updates as it goes and taking no new frames
//! meanwhile (the reader thread fills its bounded buffer, then the server
//! waits; TCP flow control bounds what it can push).
//!
//! The socket itself is read on a thread of its own ([`reader::WalIo`]),
//! so the walsender does not wait while the read loop decodes and hands
//! batches over; the reader stops reading only when its 2 MiB buffer and
//! the channel to the read loop are full.
//!
//! This layer never imports the sink, the monitors or the configuration
//! layer: what it needs from them arrives as values (settings sections, a
//! frontier, a channel).

pub mod catalog;
pub mod config;
pub(crate) mod hosts;
pub(crate) mod poll;
pub(crate) mod reader;
pub mod replication;
pub(crate) mod slot;
pub mod tls;
pub mod wal;
