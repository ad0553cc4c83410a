//! walrelay: a Debezium-compatible transactional outbox relay.
//!
//! PostgreSQL logical replication (`pgoutput`) in, Kafka records out, routed
//! exactly as Debezium's outbox EventRouter routes them, with the slot's LSN
//! confirmed only after Kafka acknowledged every event up to it.
//! `docs/architecture.md` has the layers, the path of one event and where
//! further sources plug in; each module's own documentation says what it
//! owns and what it must never do.

pub use walrelay_proto as proto;
// The I/O-free layers (walrelay-core), under their own names, so that
// `crate::router::...` here and `walrelay::router::...` outside resolve as
// they did before the split.
pub use walrelay_core::{
    chain, checkpoint, clock, connect, human, properties, retry, router, secret, setting, txn,
};

pub mod check;
pub mod cli;
pub mod config;
pub(crate) mod distributed;
pub mod heartbeat;
pub mod lag;
pub mod metrics;
pub mod pipeline;
pub mod postgres;
pub mod sink;
pub mod source;
pub mod status;
