//! `walrelay connect-distributed`: Kafka Connect's distributed worker,
//! replaced. A group of walrelay processes shares Connect's three storage
//! topics, spreads the connectors (one pipeline each) over itself through
//! Kafka's group membership, and serves Connect's REST API.
//!
//! Owns the wiring; the layers are its modules: [`api`] (what the REST API
//! asks of a worker, as data), [`rest`] (the HTTP listener speaking
//! Connect's JSON), [`group`] (Kafka's group protocol with Connect's
//! assignment format).

pub(crate) mod api;
pub(crate) mod clients;
pub(crate) mod configs;
pub(crate) mod group;
pub(crate) mod herder;
pub(crate) mod log;
pub(crate) mod node;
pub(crate) mod offsets;
pub(crate) mod rest;
pub(crate) mod run;
pub(crate) mod statuses;
pub(crate) mod topics;
pub(crate) mod worker;
