//! walrelay: a Debezium-compatible transactional outbox relay.
//!
//! PostgreSQL logical replication (`pgoutput`) in, Kafka records out, routed
//! exactly as Debezium's outbox EventRouter routes them, with the slot's LSN
//! confirmed only after Kafka acknowledged every event up to it.
//! `docs/architecture.md` has the layers, the path of one event and where
//! further sources plug in; each module's own documentation says what it
//! owns and what it must never do.

pub use walrelay_proto as proto;

pub mod chain;
pub mod check;
pub mod checkpoint;
pub mod clock;
pub mod config;
pub mod connect;
pub mod heartbeat;
pub mod human;
pub mod lag;
pub mod metrics;
pub mod pipeline;
pub mod postgres;
pub mod properties;
pub mod retry;
pub mod router;
pub mod secret;
pub mod setting;
pub mod sink;
pub mod source;
pub mod status;
pub mod txn;
