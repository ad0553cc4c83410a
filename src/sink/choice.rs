//! The pipeline's sink, whichever broker the configuration chose
//! (`sink.type`): Kafka's own ([`KafkaSink`], with exactly-once) or a
//! [`QueuedSink`] for a broker with an asynchronous client.
//!
//! An enum, not a trait object: the pipeline calls it once per batch or
//! per session, and each variant's per-event path is monomorphised.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::aws::kinesis::Kinesis;
use super::aws::sns::Sns;
use super::aws::sqs::Sqs;
use super::config::{ErrorsConfig, SinkConfig, SinkKind};
use super::dlq::LetterFormat;
use super::http::Http;
use super::nats::Nats;
use super::pubsub::PubSub;
use super::pulsar::PulsarSink;
use super::queued::{Publisher, QueuedSink};
use super::rabbitmq::RabbitMq;
use super::rabbitmq_stream::RabbitMqStream;
use super::redis::Redis;
use super::transactional::Eos;
use super::{KafkaSink, SinkError};
use crate::checkpoint::SharedTracker;
use crate::metrics::Metrics;
use crate::router::Router;
use crate::sink::config::KafkaConfig;
use crate::txn::OutboxEvent;

/// The sink of one pipeline.
pub(crate) enum Sink {
    /// Kafka, through librdkafka (idempotent, or transactional).
    Kafka(KafkaSink),
    /// NATS JetStream.
    Nats(QueuedSink<Nats>),
    /// Redis Streams.
    Redis(QueuedSink<Redis>),
    /// RabbitMQ (AMQP 0-9-1, publisher confirms).
    RabbitMq(QueuedSink<RabbitMq>),
    /// RabbitMQ streams (the stream protocol, publish confirms).
    RabbitMqStream(QueuedSink<RabbitMqStream>),
    /// HTTP: a POST per record (or per batch) to one URL.
    Http(QueuedSink<Http>),
    /// Amazon SQS (`SendMessageBatch`).
    Sqs(QueuedSink<Sqs>),
    /// Amazon Kinesis Data Streams (`PutRecords`).
    Kinesis(QueuedSink<Kinesis>),
    /// Amazon SNS (`PublishBatch`).
    Sns(QueuedSink<Sns>),
    /// Google Cloud Pub/Sub (`Publish`, ordering keys).
    PubSub(QueuedSink<PubSub>),
    /// Apache Pulsar (a producer per topic, send receipts).
    Pulsar(QueuedSink<PulsarSink>),
}

/// Calls `$call` on the queued sink of any broker but Kafka.
macro_rules! queued {
    ($sink:expr, $q:ident => $call:expr, kafka $k:ident => $kafka:expr) => {
        match $sink {
            Sink::Kafka($k) => $kafka,
            Sink::Nats($q) => $call,
            Sink::Redis($q) => $call,
            Sink::RabbitMq($q) => $call,
            Sink::RabbitMqStream($q) => $call,
            Sink::Http($q) => $call,
            Sink::Sqs($q) => $call,
            Sink::Kinesis($q) => $call,
            Sink::Sns($q) => $call,
            Sink::PubSub($q) => $call,
            Sink::Pulsar($q) => $call,
        }
    };
}

impl Sink {
    /// The sink `sink` chooses; `kafka` configures Kafka's, `errors`
    /// where bad events go. Must run on the runtime (a queued sink starts
    /// its worker).
    pub(crate) fn start(
        sink: &SinkConfig,
        kafka: &KafkaConfig,
        errors: &ErrorsConfig,
        status_interval: Duration,
        metrics: Arc<Metrics>,
        slot: &str,
    ) -> Result<Sink, SinkError> {
        fn queued<P: Publisher>(
            config: P::Config,
            max_bytes: usize,
            errors: &ErrorsConfig,
            status_interval: Duration,
            metrics: Arc<Metrics>,
        ) -> QueuedSink<P> {
            let letters = errors.dead_letter().map(|topic| LetterFormat {
                topic: topic.to_owned(),
                context_headers: errors.dead_letter_context_headers,
                max_bytes,
            });
            QueuedSink::start(config, letters, status_interval, metrics)
        }
        if sink.kind == SinkKind::Kafka {
            metrics
                .broker_info
                .get_or_create(&crate::metrics::BrokerLabel { broker: "kafka" })
                .set(1);
        }
        Ok(match sink.kind {
            SinkKind::Kafka => Sink::Kafka(KafkaSink::with_errors(
                kafka,
                errors,
                status_interval,
                metrics,
                slot,
            )?),
            SinkKind::NatsJetStream => {
                let config = sink.nats.clone().unwrap_or_default();
                let max = config.max_payload_hint();
                Sink::Nats(queued(config, max, errors, status_interval, metrics))
            }
            SinkKind::Redis => {
                let config = sink.redis.clone().unwrap_or_default();
                Sink::Redis(queued(
                    config,
                    super::redis::MAX_BYTES,
                    errors,
                    status_interval,
                    metrics,
                ))
            }
            SinkKind::RabbitMq => {
                let config = sink.rabbitmq.clone().unwrap_or_default();
                let max = config.max_message_bytes();
                Sink::RabbitMq(queued(config, max, errors, status_interval, metrics))
            }
            SinkKind::RabbitMqStream => {
                let config = sink.rabbitmqstream.clone().unwrap_or_default();
                let max = config.max_message_bytes();
                Sink::RabbitMqStream(queued(config, max, errors, status_interval, metrics))
            }
            SinkKind::Http => {
                let mut config = sink.http.clone().unwrap_or_default();
                // The URL is fixed: dead-letter records go to it too, told
                // apart by a header naming the dead-letter topic.
                config.dead_letter_topic = errors.dead_letter().map(str::to_owned);
                Sink::Http(queued(
                    config,
                    super::http::MAX_BYTES,
                    errors,
                    status_interval,
                    metrics,
                ))
            }
            SinkKind::Sqs => {
                let mut config = sink.sqs.clone().unwrap_or_default();
                config.dead_letter_topic = errors.dead_letter().map(str::to_owned);
                Sink::Sqs(queued(
                    config,
                    super::aws::sqs::LETTER_MAX_BYTES,
                    errors,
                    status_interval,
                    metrics,
                ))
            }
            SinkKind::Kinesis => {
                let mut config = sink.kinesis.clone().unwrap_or_default();
                config.dead_letter_topic = errors.dead_letter().map(str::to_owned);
                Sink::Kinesis(queued(
                    config,
                    super::aws::kinesis::LETTER_MAX_BYTES,
                    errors,
                    status_interval,
                    metrics,
                ))
            }
            SinkKind::Sns => {
                let mut config = sink.sns.clone().unwrap_or_default();
                config.dead_letter_topic = errors.dead_letter().map(str::to_owned);
                Sink::Sns(queued(
                    config,
                    super::aws::sns::LETTER_MAX_BYTES,
                    errors,
                    status_interval,
                    metrics,
                ))
            }
            SinkKind::PubSub => {
                let mut config = sink.pubsub.clone().unwrap_or_default();
                config.dead_letter_topic = errors.dead_letter().map(str::to_owned);
                Sink::PubSub(queued(
                    config,
                    super::pubsub::LETTER_MAX_BYTES,
                    errors,
                    status_interval,
                    metrics,
                ))
            }
            SinkKind::Pulsar => {
                let mut config = sink.pulsar.clone().unwrap_or_default();
                config.dead_letter_topic = errors.dead_letter().map(str::to_owned);
                Sink::Pulsar(queued(
                    config,
                    super::pulsar::LETTER_MAX_BYTES,
                    errors,
                    status_interval,
                    metrics,
                ))
            }
        })
    }

    /// Kafka's sink, if Kafka was chosen.
    pub(crate) fn kafka(&self) -> Option<&KafkaSink> {
        match self {
            Sink::Kafka(k) => Some(k),
            _ => None,
        }
    }

    /// Exactly-once mode's state, if on (Kafka only).
    pub(crate) fn exactly_once(&self) -> Option<&Arc<Eos>> {
        self.kafka().and_then(KafkaSink::exactly_once)
    }

    /// Starts a new session: later acknowledgements go to `tracker`.
    pub(crate) fn begin_session(&self, tracker: SharedTracker) -> u64 {
        queued!(self, q => q.begin_session(tracker), kafka k => k.begin_session(tracker))
    }

    /// Takes a recorded permanent delivery failure.
    pub(crate) fn take_failure(&self) -> Option<SinkError> {
        queued!(self, q => q.take_failure(), kafka k => k.take_failure())
    }

    /// Whether the broker answers (blocking: call from a blocking thread).
    pub(crate) fn probe(&self, timeout: Duration) -> bool {
        queued!(self, q => q.probe(), kafka k => k.probe(timeout))
    }

    /// Waits up to `timeout` for every record to be acknowledged
    /// (blocking).
    pub(crate) fn flush(&self, timeout: Duration) -> bool {
        queued!(self, q => q.flush(timeout), kafka k => k.flush(timeout))
    }

    /// Sends a record that settles nothing (a heartbeat); never waits.
    pub(crate) fn produce_untracked(
        &self,
        record: &crate::router::KafkaRecord,
    ) -> Result<(), String> {
        queued!(self,
            q => q.produce_untracked(record),
            kafka k => k.produce_untracked(record).map_err(|e| e.to_string()))
    }

    /// Exactly-once: commits the snapshot's start marker (no-op otherwise).
    pub(crate) async fn mark_snapshot_started(&self) -> Result<(), SinkError> {
        match self {
            Sink::Kafka(k) => k.mark_snapshot_started().await,
            _ => Ok(()),
        }
    }

    /// Exactly-once: takes the transactional id and reads the last
    /// committed progress (Kafka only; no-op otherwise).
    pub(crate) async fn start_exactly_once(&self) -> Result<(), SinkError> {
        match self {
            Sink::Kafka(k) => k.start_exactly_once().await,
            _ => Ok(()),
        }
    }

    /// Routes and publishes what the source hands over, until it stops
    /// or a failure stops the sink.
    pub(crate) async fn run(
        &self,
        router: &mut Router,
        rx: mpsc::Receiver<Vec<OutboxEvent>>,
    ) -> Result<(), SinkError> {
        queued!(self, q => q.run(router, rx).await, kafka k => k.run(router, rx).await)
    }
}
