//! The dead-letter topic: where a bad event goes with `errors.tolerance = all`.
//!
//! Owns the dead-letter record (the event's original bytes plus context
//! headers), its own producer, and settling the event's transaction when
//! that record is acknowledged: a dead-lettered event counts as delivered
//! only once Kafka has the dead-letter record, and a dead-letter record that
//! cannot be delivered stops the pipeline. It never decides whether an event
//! is bad (the router and the delivery reports do) and never skips one.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::producer::{DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Message};
use tracing::warn;
use walrelay_proto::Lsn;

use super::broker::{Delivery, FailureClass, WireRecord};
use super::publish::{send_blocking, Refused, Shared};
use super::SinkError;
use crate::chain::DisplayChain;
use crate::router::{RecordHeader, RouteError};
use crate::txn::OutboxEvent;

/// Kafka Connect's header: the topic the record was meant for.
pub(crate) const HEADER_TOPIC: &str = "__connect.errors.topic";
/// Kafka Connect's header: the stage that failed (`TRANSFORMATION` for a
/// routing error, `KAFKA_PRODUCE` for a delivery failure).
pub(crate) const HEADER_STAGE: &str = "__connect.errors.stage";
/// Kafka Connect's header: the error's class (walrelay: the Rust error type).
pub(crate) const HEADER_EXCEPTION_CLASS: &str = "__connect.errors.exception.class.name";
/// Kafka Connect's header: the error message, with its causes.
pub(crate) const HEADER_EXCEPTION_MESSAGE: &str = "__connect.errors.exception.message";
/// The kind of problem, as in `walrelay_dead_lettered_total{reason}`.
pub(crate) const HEADER_KIND: &str = "walrelay.error.kind";
/// LSN of the outbox INSERT.
pub(crate) const HEADER_SOURCE_LSN: &str = "walrelay.source.lsn";
/// LSN of its transaction's commit record.
pub(crate) const HEADER_COMMIT_LSN: &str = "walrelay.commit.lsn";
/// Its transaction id.
pub(crate) const HEADER_XID: &str = "walrelay.xid";
/// The event id column's text (absent when NULL).
pub(crate) const HEADER_EVENT_ID: &str = "walrelay.event.id";
/// `schema.table` of the outbox.
pub(crate) const HEADER_SOURCE_TABLE: &str = "walrelay.source.table";
/// Present when the original value (or key) was left out because the
/// dead-letter record would be too large; says what was dropped and why.
pub(crate) const HEADER_DROPPED: &str = "walrelay.original.dropped";

/// Room kept for headers and record overhead below the producer's
/// `message.max.bytes` when deciding whether the original bytes fit.
const HEADER_ROOM: usize = 4096;

/// Where a failure happened, for `__connect.errors.stage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// The router refused the row.
    Transformation,
    /// Kafka refused the record.
    Produce,
}

impl Stage {
    fn as_str(self) -> &'static str {
        match self {
            Stage::Transformation => "TRANSFORMATION",
            Stage::Produce => "KAFKA_PRODUCE",
        }
    }
}

/// What is known about a bad event.
#[derive(Debug, Clone)]
pub(crate) struct Letter {
    /// Delivery tag of the event: session generation and transaction.
    pub(crate) tag: u64,
    /// LSN of the INSERT.
    pub(crate) lsn: Lsn,
    /// LSN of the transaction's commit record.
    pub(crate) commit_lsn: Lsn,
    /// Transaction id.
    pub(crate) xid: u32,
    /// The event id column's text, if not NULL.
    pub(crate) event_id: Option<String>,
    /// `schema.table`.
    pub(crate) table: String,
    /// The key column's text.
    pub(crate) key: Option<Bytes>,
    /// The payload column's bytes.
    pub(crate) value: Option<Bytes>,
    /// The topic the event was meant for, if known.
    pub(crate) topic: Option<String>,
    /// Short kind name (metric label).
    pub(crate) kind: &'static str,
    /// Rust type of the error.
    pub(crate) class: &'static str,
    /// The error message with its causes.
    pub(crate) message: String,
    /// Which stage failed.
    pub(crate) stage: Stage,
    /// The producer refused the record for its size (its own
    /// `message.max.bytes`): never resend the value.
    pub(crate) too_large: bool,
}

impl Letter {
    /// The parts of a dead-letter record that come from the event itself.
    pub(crate) fn for_event(event: &OutboxEvent, tag: u64) -> Letter {
        let (key, value) = event.original();
        Letter {
            tag,
            lsn: event.meta.lsn,
            commit_lsn: event.meta.commit_lsn,
            xid: event.meta.xid,
            event_id: event.event_id(),
            table: event.origin(),
            key,
            value,
            topic: None,
            kind: "unknown",
            class: "",
            message: String::new(),
            stage: Stage::Transformation,
            too_large: false,
        }
    }

    /// The dead-letter record of an event the router refused; `intended`
    /// is the topic it was meant for, when the router could tell.
    pub(crate) fn route_error(
        event: &OutboxEvent,
        tag: u64,
        err: &RouteError,
        intended: Option<std::sync::Arc<str>>,
    ) -> Letter {
        Letter {
            kind: err.kind(),
            class: "walrelay::router::RouteError",
            message: DisplayChain(err).to_string(),
            stage: Stage::Transformation,
            topic: err
                .topic()
                .map(str::to_owned)
                .or_else(|| intended.map(|t| t.to_string())),
            ..Letter::for_event(event, tag)
        }
    }

    /// The dead-letter record that replaces an event whose record the
    /// broker refused in an aborted Kafka transaction.
    pub(super) fn refused(event: &OutboxEvent, tag: u64, refused: Refused) -> Letter {
        Letter {
            kind: refused.kind,
            class: super::kafka::ERROR_CLASS,
            message: refused.message,
            stage: Stage::Produce,
            topic: Some(refused.topic),
            ..Letter::for_event(event, tag)
        }
    }
}

/// What a dead-letter delivery report needs.
pub(crate) struct LetterTag {
    tag: u64,
    kind: &'static str,
}

/// Delivery reports of dead-letter records settle the original event.
pub(crate) struct DeadLetterContext {
    shared: Arc<Shared>,
}

impl ClientContext for DeadLetterContext {}

impl ProducerContext for DeadLetterContext {
    type DeliveryOpaque = Box<LetterTag>;

    fn delivery(&self, result: &DeliveryResult<'_>, letter: Box<LetterTag>) {
        let outcome = match result {
            Ok(_) => Ok(()),
            Err((err, msg)) => Err(Delivery {
                broker: "kafka",
                destination: msg.topic().to_owned(),
                class: FailureClass::Broker,
                error: err.to_string(),
                code: "dead_letter".to_owned(),
                record_bytes: 0,
            }),
        };
        self.shared.settle_letter(letter.tag, letter.kind, outcome);
    }
}

/// The dead-letter producer and topic.
pub(crate) struct DeadLetter {
    producer: ThreadedProducer<DeadLetterContext>,
    format: LetterFormat,
}

/// What a dead-letter record looks like on any broker: where it goes,
/// whether it carries the context headers, and the size its original
/// bytes must fit.
#[derive(Debug, Clone)]
pub(crate) struct LetterFormat {
    /// The dead-letter topic (subject, stream, ...).
    pub(crate) topic: String,
    /// Whether the `__connect.errors.*` and `walrelay.*` headers are added.
    pub(crate) context_headers: bool,
    /// The largest record the broker takes: original bytes beyond it are
    /// left out (and the header `walrelay.original.dropped` says so).
    pub(crate) max_bytes: usize,
}

impl DeadLetter {
    /// A producer for `topic` with the same properties as the main one.
    pub(super) fn new(
        cc: &ClientConfig,
        topic: &str,
        context_headers: bool,
        shared: Arc<Shared>,
    ) -> Result<Self, SinkError> {
        let max_bytes = cc
            .get("message.max.bytes")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_000_000);
        let producer = cc
            .create_with_context(DeadLetterContext { shared })
            .map_err(SinkError::Create)?;
        Ok(DeadLetter {
            producer,
            format: LetterFormat {
                topic: topic.to_owned(),
                context_headers,
                max_bytes,
            },
        })
    }

    /// The dead-letter topic.
    pub(crate) fn topic(&self) -> &str {
        &self.format.topic
    }

    /// The key, value and headers of `letter`'s dead-letter record; see
    /// [`LetterFormat::record_parts`].
    pub(crate) fn record_parts(
        &self,
        letter: &Letter,
    ) -> (Option<Bytes>, Option<Bytes>, Vec<RecordHeader>) {
        self.format.record_parts(letter)
    }

    /// Produces the dead-letter record for `letter` through the publish
    /// step's blocking send (a delivery callback calls this), waiting while
    /// the local queue is full. Its delivery report settles the event.
    pub(crate) fn send(&self, letter: &Letter) -> Result<(), KafkaError> {
        let (key, value, headers) = self.record_parts(letter);
        let tag = Box::new(LetterTag {
            tag: letter.tag,
            kind: letter.kind,
        });
        let record = WireRecord {
            headers: &headers,
            ..WireRecord::plain(&self.format.topic, key.as_deref(), value.as_deref())
        };
        send_blocking(&self.producer, &record, tag)
    }

    /// Records handed to the dead-letter producer and not yet reported.
    pub(crate) fn in_flight(&self) -> i32 {
        self.producer.in_flight_count()
    }

    /// Waits up to `timeout` for every dead-letter record to be reported.
    pub(crate) fn flush(&self, timeout: Duration) -> bool {
        self.producer.flush(timeout).is_ok()
    }
}

impl LetterFormat {
    /// The key, value and headers of `letter`'s dead-letter record, for a
    /// producer of the caller's (exactly-once mode produces it inside the
    /// Kafka transaction; another broker sends it itself). Logs the event.
    pub(crate) fn record_parts(
        &self,
        letter: &Letter,
    ) -> (Option<Bytes>, Option<Bytes>, Vec<RecordHeader>) {
        warn!(
            event_id = letter.event_id.as_deref().unwrap_or("null"),
            lsn = %letter.lsn,
            reason = letter.kind,
            topic = self.topic,
            error = letter.message,
            "bad event sent to the dead-letter topic"
        );
        let (key, value, dropped) = self.fit(letter);
        (key, value, self.headers(letter, dropped))
    }

    fn headers(&self, letter: &Letter, dropped: Option<String>) -> Vec<RecordHeader> {
        let mut headers = Vec::with_capacity(11);
        if !self.context_headers {
            return headers;
        }
        let mut add = |name: &str, value: Option<String>| {
            if let Some(v) = value {
                headers.push(RecordHeader {
                    name: name.into(),
                    value: Some(Bytes::from(v)),
                });
            }
        };
        add(HEADER_TOPIC, letter.topic.clone());
        add(HEADER_STAGE, Some(letter.stage.as_str().to_owned()));
        add(HEADER_EXCEPTION_CLASS, Some(letter.class.to_owned()));
        add(HEADER_EXCEPTION_MESSAGE, Some(letter.message.clone()));
        add(HEADER_KIND, Some(letter.kind.to_owned()));
        add(HEADER_SOURCE_LSN, Some(letter.lsn.to_string()));
        add(HEADER_COMMIT_LSN, Some(letter.commit_lsn.to_string()));
        add(HEADER_XID, Some(letter.xid.to_string()));
        add(HEADER_EVENT_ID, letter.event_id.clone());
        add(HEADER_SOURCE_TABLE, Some(letter.table.clone()));
        add(HEADER_DROPPED, dropped);
        headers
    }

    /// The key and value to send: the original bytes, or without the value
    /// (then the key) when they cannot be sent as they are.
    fn fit(&self, letter: &Letter) -> (Option<Bytes>, Option<Bytes>, Option<String>) {
        let len = |b: &Option<Bytes>| b.as_ref().map_or(0, Bytes::len);
        let limit = self
            .max_bytes
            .saturating_sub(HEADER_ROOM + letter.message.len());
        let mut key = letter.key.clone();
        let mut value = letter.value.clone();
        let mut dropped = None;
        if value.is_some() && (letter.too_large || len(&key) + len(&value) > limit) {
            dropped = Some(format!(
                "value: the original payload ({} bytes) is too large to send",
                len(&value)
            ));
            value = None;
        }
        if len(&key) > limit {
            dropped = Some(format!(
                "key and value: the original key alone is {} bytes",
                len(&key)
            ));
            key = None;
        }
        (key, value, dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letter(key: usize, value: usize, too_large: bool) -> Letter {
        Letter {
            tag: 1,
            lsn: Lsn(1),
            commit_lsn: Lsn(2),
            xid: 3,
            event_id: Some("e".into()),
            table: "public.outbox".into(),
            key: Some(Bytes::from(vec![b'k'; key])),
            value: Some(Bytes::from(vec![b'v'; value])),
            topic: None,
            kind: "null_key",
            class: "walrelay::router::RouteError",
            message: "m".into(),
            stage: Stage::Transformation,
            too_large,
        }
    }

    fn dead_letter(max: usize) -> DeadLetter {
        let mut cc = ClientConfig::new();
        cc.set("bootstrap.servers", "127.0.0.1:1")
            .set("message.max.bytes", max.to_string());
        let shared = Arc::new(Shared::default());
        DeadLetter::new(&cc, "dlq", true, shared).expect("producer")
    }

    #[test]
    fn original_bytes_fit_or_are_dropped() {
        let d = dead_letter(1_000_000);
        let (k, v, dropped) = d.format.fit(&letter(3, 10, false));
        assert_eq!(k.map(|b| b.len()), Some(3));
        assert_eq!(v.map(|b| b.len()), Some(10));
        assert_eq!(dropped, None);
        // A local size refusal never resends the value, however small.
        let (k, v, dropped) = d.format.fit(&letter(3, 10, true));
        assert!(k.is_some() && v.is_none());
        assert!(dropped.unwrap().starts_with("value"));
        // Larger than the producer allows: the value goes, then the key.
        let (k, v, _) = d.format.fit(&letter(3, 2_000_000, false));
        assert!(k.is_some() && v.is_none());
        let (k, v, dropped) = d.format.fit(&letter(2_000_000, 3, false));
        assert!(k.is_none() && v.is_none());
        assert!(dropped.unwrap().starts_with("key and value"));
    }
}
