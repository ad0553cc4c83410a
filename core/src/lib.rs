//! walrelay-core: the layers of walrelay that never do I/O.
//!
//! Owns, bottom up (the order is `docs/architecture.md`'s table): the base
//! pieces with no domain knowledge (`chain`, `clock`, `human`,
//! `properties`, `secret`, `setting`), the checkpoint tracker and its
//! acknowledgement contract (`checkpoint`), Kafka Connect's data model,
//! converters and Debezium's type mapping (`connect`), the EventRouter
//! (`router`) and transaction assembly (`txn`). The main crate `walrelay`
//! re-exports each module under its own name and drives them with sockets,
//! tasks and brokers.
//!
//! It must never reach the network: no socket, no PostgreSQL or Kafka
//! client, no HTTP, no TLS. Its manifest admits none of those crates (no
//! tokio `net`, no rdkafka, tokio-postgres, hyper or openssl; only tokio's
//! `sync`, for the tracker's wake-ups), so an import of one is a compile
//! error here, not a review finding. The only file it touches is a
//! streamed transaction's unlinked spill file (`txn::spill`). It never
//! depends on the main crate; what it needs from above is passed in.

// Docs link to crate-private items on purpose; they resolve under
// `cargo doc --document-private-items`.
#![allow(rustdoc::private_intra_doc_links)]

pub mod chain;
pub mod checkpoint;
pub mod clock;
pub mod connect;
pub mod human;
pub mod properties;
pub mod retry;
pub mod router;
pub mod secret;
pub mod setting;
pub mod txn;
