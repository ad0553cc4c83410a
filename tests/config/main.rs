//! The server-free configuration tests: walrelay's configuration forms
//! (native TOML, Kafka Connect worker + connector, Debezium Server) and the
//! CLI's validation paths, with no PostgreSQL or Kafka needed. They run in
//! their own binary, which does not compile the integration tests' harness.

mod debezium_forms;
mod exactly_once;
mod messages;
mod native;
mod tables;
