//! Kafka behind the broker seam: librdkafka's producer as a [`Broker`], its
//! error codes mapped onto the publish step's [`FailureClass`], and its
//! delivery callback handing each report to the publish step.
//!
//! Owns what is Kafka's alone: the `BaseRecord` built from a
//! [`WireRecord`], which error codes are about one record (its size, its
//! topic, a policy) and which are about the cluster, and the client-level
//! errors that never heal (a refused authentication). It never routes,
//! never counts and never touches the tracker: [`Shared::settle`] does.

use std::sync::Arc;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::util::IntoOpaque;
use rdkafka::{ClientContext, Message};
use tracing::{error, warn};

use super::broker::{Broker, Delivery, FailureClass, Guarantees, Refusal, WireRecord};
use super::dlq::DeadLetter;
use super::publish::{RecordContext, Shared};
use super::SinkError;

/// What Kafka gives: an idempotent producer (`enable.idempotence`, forced),
/// transactions, and order per partition, which the key picks.
pub(crate) const GUARANTEES: Guarantees = Guarantees {
    idempotent: true,
    transactional: true,
    dedup_by_id: false,
    per_key_order: true,
};

/// The exception class named in dead-letter records of Kafka's refusals.
pub(crate) const ERROR_CLASS: &str = "rdkafka::error::KafkaError";

impl<C: ProducerContext + 'static> Broker for ThreadedProducer<C> {
    type Ticket = C::DeliveryOpaque;
    type Error = KafkaError;

    const NAME: &'static str = "kafka";
    const GUARANTEES: Guarantees = GUARANTEES;

    fn send(
        &self,
        record: &WireRecord<'_>,
        ticket: Self::Ticket,
    ) -> Result<(), Refusal<Self::Ticket, KafkaError>> {
        match ThreadedProducer::send(self, base_record(record, ticket)) {
            Ok(()) => Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                Err(Refusal::Full(back.delivery_opaque))
            }
            Err((e, back)) => Err(Refusal::Refused(back.delivery_opaque, e)),
        }
    }

    fn classify(error: &KafkaError) -> FailureClass {
        class_of(error.rdkafka_error_code())
    }

    fn in_flight(&self) -> usize {
        usize::try_from(self.in_flight_count()).unwrap_or(0)
    }
}

/// The librdkafka record for `record`: topic, headers, key, value, and the
/// partition and timestamp the router chose, if any. librdkafka hashes the
/// key for the partition, so the ordering key is the key.
pub fn base_record<'a, O: IntoOpaque>(
    record: &WireRecord<'a>,
    opaque: O,
) -> BaseRecord<'a, [u8], [u8], O> {
    // Kafka keeps order per partition, which the key picks: it can order
    // by no other key than the record's own.
    debug_assert!(
        record.ordering_key.is_none() || record.ordering_key == record.key,
        "kafka orders records by their key"
    );
    let mut base = BaseRecord::with_opaque_to(record.destination, opaque);
    if !record.headers.is_empty() {
        let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
        for h in record.headers {
            headers = headers.insert(Header {
                key: &h.name,
                value: h.value.as_deref(),
            });
        }
        base = base.headers(headers);
    }
    if let Some(key) = record.key {
        base = base.key(key);
    }
    if let Some(value) = record.value {
        base = base.payload(value);
    }
    if let Some(p) = record.partition {
        base = base.partition(p);
    }
    if let Some(ts) = record.timestamp_ms {
        base = base.timestamp(ts);
    }
    base
}

/// Kind names of the failures that are about one record (its size, its
/// topic, a broker policy) rather than the cluster; under
/// `errors.tolerance = all` those records are dead-lettered.
pub(crate) fn per_record_failure(code: RDKafkaErrorCode) -> Option<&'static str> {
    Some(match code {
        RDKafkaErrorCode::MessageSizeTooLarge | RDKafkaErrorCode::InvalidMessageSize => {
            "message_too_large"
        }
        RDKafkaErrorCode::MessageBatchTooLarge => "record_list_too_large",
        RDKafkaErrorCode::InvalidTopic => "invalid_topic",
        RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic => {
            "unknown_topic"
        }
        RDKafkaErrorCode::PolicyViolation => "policy_violation",
        RDKafkaErrorCode::InvalidRecord => "invalid_record",
        RDKafkaErrorCode::InvalidTimestamp => "invalid_timestamp",
        RDKafkaErrorCode::InvalidMessage => "corrupt_message",
        _ => return None,
    })
}

fn is_size_failure(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::MessageSizeTooLarge
            | RDKafkaErrorCode::InvalidMessageSize
            | RDKafkaErrorCode::MessageBatchTooLarge
    )
}

/// What a librdkafka error code means for the record it came with.
fn class_of(code: Option<RDKafkaErrorCode>) -> FailureClass {
    match code {
        Some(RDKafkaErrorCode::PurgeQueue | RDKafkaErrorCode::PurgeInflight) => {
            FailureClass::Purged
        }
        Some(c) => match per_record_failure(c) {
            Some(kind) => FailureClass::Record {
                kind,
                too_large: is_size_failure(c),
            },
            None => FailureClass::Broker,
        },
        None => FailureClass::Broker,
    }
}

/// Bytes of a delivered record's key, value, header names and values.
fn record_bytes(msg: &rdkafka::message::BorrowedMessage<'_>) -> usize {
    msg.payload_len()
        + msg.key_len()
        + msg.headers().map_or(0, |h| {
            h.iter()
                .map(|header| header.key.len() + header.value.map_or(0, <[u8]>::len))
                .sum()
        })
}

/// A failed delivery report in the publish step's terms.
fn failure_of(err: &KafkaError, msg: &rdkafka::message::BorrowedMessage<'_>) -> Delivery {
    let code = err.rdkafka_error_code();
    Delivery {
        broker: "kafka",
        destination: msg.topic().to_owned(),
        class: class_of(code),
        error: err.to_string(),
        code: code.map_or_else(|| "unknown".to_owned(), |c| format!("{c:?}")),
        record_bytes: record_bytes(msg),
    }
}

/// The main producer's context: delivery reports into the publish step.
pub(crate) struct DeliveryContext {
    pub(super) shared: Arc<Shared>,
    pub(super) dead_letter: Option<Arc<DeadLetter>>,
}

impl ClientContext for DeliveryContext {
    /// librdkafka's client-level errors. Most are transient (a broker
    /// down is backpressure); a refused authentication or a fatal producer
    /// error never heals by retrying, so it stops the pipeline clearly
    /// instead of waiting forever. The reason text carries no secrets.
    fn error(&self, error: KafkaError, reason: &str) {
        let fatal = matches!(
            error.rdkafka_error_code(),
            Some(
                RDKafkaErrorCode::Authentication
                    | RDKafkaErrorCode::SaslAuthenticationFailed
                    | RDKafkaErrorCode::Fatal
            )
        );
        if fatal {
            // librdkafka's own thread calls this, outside the pipeline's
            // span: name the pipeline here.
            error!(pipeline = self.shared.metrics.name(), error = %error, reason, "kafka refused the producer");
            self.shared.record_failure(SinkError::Cluster {
                error: format!("{error}: {reason}"),
            });
            self.shared.wake.notify_waiters();
        } else {
            warn!(pipeline = self.shared.metrics.name(), error = %error, reason, "kafka client error");
        }
    }
}

impl ProducerContext for DeliveryContext {
    type DeliveryOpaque = Box<RecordContext>;

    fn delivery(&self, result: &DeliveryResult<'_>, ctx: Box<RecordContext>) {
        let outcome = match result {
            Ok(_) => Ok(()),
            Err((err, msg)) => Err(failure_of(err, msg)),
        };
        self.shared
            .settle(&ctx, self.dead_letter.as_deref(), outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_failures_are_told_from_cluster_failures() {
        for (code, kind) in [
            (RDKafkaErrorCode::MessageSizeTooLarge, "message_too_large"),
            (
                RDKafkaErrorCode::MessageBatchTooLarge,
                "record_list_too_large",
            ),
            (RDKafkaErrorCode::InvalidTopic, "invalid_topic"),
            (RDKafkaErrorCode::UnknownTopicOrPartition, "unknown_topic"),
            (RDKafkaErrorCode::PolicyViolation, "policy_violation"),
            (RDKafkaErrorCode::InvalidRecord, "invalid_record"),
        ] {
            assert_eq!(per_record_failure(code), Some(kind), "{code:?}");
        }
        // The cluster, not the record: these stop walrelay under any policy.
        for code in [
            RDKafkaErrorCode::TopicAuthorizationFailed,
            RDKafkaErrorCode::ClusterAuthorizationFailed,
            RDKafkaErrorCode::SaslAuthenticationFailed,
            RDKafkaErrorCode::OutOfOrderSequenceNumber,
            RDKafkaErrorCode::InvalidProducerEpoch,
            RDKafkaErrorCode::Fatal,
            RDKafkaErrorCode::PurgeQueue,
            RDKafkaErrorCode::MessageTimedOut,
        ] {
            assert_eq!(per_record_failure(code), None, "{code:?}");
        }
        assert!(is_size_failure(RDKafkaErrorCode::MessageSizeTooLarge));
        assert!(!is_size_failure(RDKafkaErrorCode::InvalidTopic));
    }

    #[test]
    fn error_codes_map_onto_the_seams_classes() {
        assert_eq!(
            class_of(Some(RDKafkaErrorCode::MessageBatchTooLarge)),
            FailureClass::Record {
                kind: "record_list_too_large",
                too_large: true
            }
        );
        assert_eq!(
            class_of(Some(RDKafkaErrorCode::PolicyViolation)),
            FailureClass::Record {
                kind: "policy_violation",
                too_large: false
            }
        );
        assert_eq!(
            class_of(Some(RDKafkaErrorCode::PurgeInflight)),
            FailureClass::Purged
        );
        assert_eq!(
            class_of(Some(RDKafkaErrorCode::TopicAuthorizationFailed)),
            FailureClass::Broker
        );
        assert_eq!(class_of(None), FailureClass::Broker);
    }
}
