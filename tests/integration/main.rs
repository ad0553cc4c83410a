//! The server-backed integration tests, one binary: every module runs
//! against the real PostgreSQL and Kafka of `scripts/test.sh` (or private
//! servers it starts through `scripts/pg.sh` and `scripts/kafka.sh`), and
//! `common` is their shared harness, compiled once.
//!
//! The tests of every module run side by side (libtest's default: one
//! thread per core), so none may assume a server to itself. Each owns its
//! tables, publications, slots, topics and databases
//! (`common::unique_name`); a test that stops, restarts or reconfigures a
//! server, or whose assertions depend on the whole cluster's WAL (retained
//! WAL, `restart_lsn`), uses a private one.
//!
//! One area: `cargo test --test integration faults::` (a name filter).

mod common;

/// Brokers other than Kafka (NATS JetStream, Redis Streams), each a real
/// server of the test's own.
mod brokers;
/// Amazon SQS on the moto server (a local AWS endpoint of the test's own):
/// bodies, groups and deduplication ids, FIFO order, SIGKILL with no
/// duplicate, a hung endpoint, refusals under both error policies, the
/// polling source.
mod brokers_aws;
/// The HTTP sink against an HTTP receiver of the test's own (a hyper
/// server in the test process): bytes and headers, retries, timeouts,
/// SIGKILL, refusals under both error policies, the polling source.
mod brokers_http;
mod brokers_pubsub;
mod brokers_pulsar;
/// RabbitMQ (AMQP 0-9-1 with publisher confirms), on a server of the
/// test's own: bytes, headers and properties as Debezium Server's, SIGKILL,
/// an outage, unroutable records and missing exchanges under both error
/// policies, the polling source.
mod brokers_rabbitmq;
/// RabbitMQ streams (the stream protocol, publish confirms), on a server
/// of the test's own with the stream plugin: bytes, message-id and
/// application-properties as Debezium Server's, SIGKILL, an outage,
/// refused records under both error policies, the polling source.
mod brokers_stream;

/// Bad events under both error policies, and their dead-letter records.
mod bad_input;
/// `walrelay check` and `walrelay status`.
mod cli;
/// Byte-for-byte comparison with the real Debezium on Kafka Connect.
mod compatibility;
/// Side by side with the real Debezium Server on its NATS JetStream,
/// Redis, RabbitMQ and HTTP sinks: the same `application.properties`, every
/// message compared.
mod compatibility_server;
/// The relay end to end: routing, order, partitions, restarts, outages.
mod delivery;
/// `walrelay connect-distributed`: a group of workers, failover, REST.
mod distributed;
/// Connect's REST API, side by side with the real distributed worker.
mod distributed_rest;
/// The test environment itself: the shared and private servers.
mod environment;
/// Exactly-once mode: SIGKILLs, server restarts, a million-row transaction,
/// fencing, a slot ahead of the progress, the Kafka Connect form.
mod exactly_once;
/// Primary failover (17+: failover slots, a host list) and decoding on a
/// standby (16+).
mod failover;
/// Failover slots (PostgreSQL 17+): created, turned on, refused below 17,
/// `walrelay check`'s standby warnings, continuing after a promotion.
mod failover_slots;
/// The fault suite: kills, outages, restarts, black holes, takeovers.
mod faults;
/// The headers column (`router.headers_field`): members as headers through
/// both sources, bad values and collisions under both error policies,
/// refusals at start, `walrelay check`.
mod headers_column;
/// Several hosts in `postgres.host`: order, `target_session_attrs`, check.
mod hosts;
/// Streamed (protocol v2) and spilled large transactions.
mod large_transactions;
/// The metrics listener secured by a web configuration file: TLS, HTTP/2
/// through ALPN, client certificates, basic auth, `walrelay status` through
/// each, a bad file refusing the start.
mod listener_security;
/// The logical-message outbox (`pg_logical_emit_message`): records, order
/// with rows, heartbeats, kills, a million messages, bad input, streaming.
mod messages;
/// Metrics, lag alerts, heartbeats, hot standby and fatal stops.
mod operations;
/// The operator's page (`/` of the metrics listener) in headless Chromium:
/// two pipelines, their states, positions, counts and charts, a failure.
mod operator_page;
/// Several pipelines in one process: isolation, failures, restarts.
mod pipelines;
/// The polling source on a `wal_level = replica` server: records and
/// marks, kills between publish and mark, late commits, hot standbys and
/// shards, retention, delete-on-publish, bad rows, Kafka down, replay.
mod poll;
/// `walrelay check` and `walrelay replay` with the polling source.
mod poll_cli;
/// Exactly-once's progress topic: created compacted, refused otherwise.
mod progress_topic;
/// The publication walrelay creates (no deletes in native mode, Debezium's
/// in its forms) and `walrelay check`'s suggestion about deletes.
mod publication;
/// The replication connection: authentication and a decoded stream.
mod replication_connection;
/// TLS and SASL to both servers, and secrets kept out of every output.
mod security;
/// Debezium's `snapshot.mode`.
mod snapshot;
/// Several outbox tables in one pipeline: interleaved transactions, both
/// configuration forms, tables of different shapes, restarts, refusals.
mod tables;
/// Transaction metadata (Debezium's BEGIN and END records) under SIGKILL.
mod transaction_metadata;
/// Behaviour per PostgreSQL major, 13 to 18: the protocol chosen, streamed
/// aborts and their LSNs, restarts, and refusing servers below 14.
mod versions;
