//! The broker seam: what the publish step ([`super::publish`]) needs of a
//! broker, and nothing else.
//!
//! A broker says three things. What a record is on its wire
//! ([`WireRecord`]: destination, key, value, headers, ordering key, and the
//! Kafka-only partition and timestamp, which another broker ignores or
//! refuses); what an acknowledgement is (its delivery callback hands each
//! record's ticket back with a [`Delivery`] outcome, which the publish step
//! settles in the tracker); and which guarantees it gives ([`Guarantees`]),
//! so that the configuration refuses what it cannot give before anything
//! is sent. Everything else — routing or dead-lettering, per-destination
//! limits and counts, backpressure, the tracker — is the publish step's,
//! written once for every broker.
//!
//! The trait is generic, never a trait object: the per-event path is
//! monomorphised for the broker the pipeline chose. A broker never decides
//! whether an event is bad and never touches the tracker itself.

use std::fmt;

use crate::router::{KafkaRecord, RecordHeader};

/// One record as a broker sends it, borrowed from the routed record (or a
/// dead-letter, heartbeat or progress record): building one allocates
/// nothing.
#[derive(Debug, Clone, Copy)]
pub struct WireRecord<'a> {
    /// Topic, subject, stream, queue or URL path, as the router chose it.
    pub(crate) destination: &'a str,
    /// `None` is a null key.
    pub(crate) key: Option<&'a [u8]>,
    /// `None` is a tombstone (a broker without tombstones refuses it).
    pub(crate) value: Option<&'a [u8]>,
    /// In order; a broker without headers refuses a record that has some.
    pub(crate) headers: &'a [RecordHeader],
    /// Records with equal ordering keys are delivered in the order sent
    /// (per aggregate, the outbox's key); `None`: no order is asked for.
    pub(crate) ordering_key: Option<&'a [u8]>,
    /// Kafka's explicit partition (EventRouter `route.partition`-style
    /// settings); `None` lets the broker's partitioner use the key.
    pub(crate) partition: Option<i32>,
    /// Kafka's record timestamp, Unix ms; `None` uses the broker's clock.
    pub(crate) timestamp_ms: Option<i64>,
}

impl<'a> WireRecord<'a> {
    /// The wire form of a routed record: its key is also its ordering key
    /// (Debezium's outbox keys records by aggregate id for exactly that).
    pub fn of(record: &'a KafkaRecord) -> WireRecord<'a> {
        let key = record.key.as_deref();
        WireRecord {
            destination: &record.topic,
            key,
            value: record.value.as_deref(),
            headers: &record.headers,
            ordering_key: key,
            partition: record.partition,
            timestamp_ms: record.timestamp_ms,
        }
    }

    /// A record with no headers, partition or timestamp (heartbeats,
    /// progress records).
    pub(crate) fn plain(
        destination: &'a str,
        key: Option<&'a [u8]>,
        value: Option<&'a [u8]>,
    ) -> WireRecord<'a> {
        WireRecord {
            destination,
            key,
            value,
            headers: &[],
            ordering_key: key,
            partition: None,
            timestamp_ms: None,
        }
    }

    /// Bytes of key, value and headers: what size limits count.
    pub(crate) fn bytes(&self) -> usize {
        self.key.map_or(0, <[u8]>::len)
            + self.value.map_or(0, <[u8]>::len)
            + self
                .headers
                .iter()
                .map(|h| h.name.len() + h.value.as_ref().map_or(0, bytes::Bytes::len))
                .sum::<usize>()
    }
}

/// What a broker promises about what it was handed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Guarantees {
    /// A retried send never writes the record twice (Kafka's idempotent
    /// producer).
    pub(crate) idempotent: bool,
    /// Records and a progress record commit or vanish together, so
    /// exactly-once delivery is possible (Kafka transactions).
    pub(crate) transactional: bool,
    /// The broker drops a record whose id it saw within a window (NATS
    /// `Nats-Msg-Id`, SQS FIFO deduplication ids).
    pub(crate) dedup_by_id: bool,
    /// Records with equal ordering keys are stored in the order sent.
    pub(crate) per_key_order: bool,
}

/// What a configuration asks of the broker, each with the key that asks it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Wanted {
    /// Exactly-once delivery (`kafka.exactly_once`,
    /// `exactly.once.support=required`).
    pub(crate) transactional: Option<&'static str>,
    /// No duplicates from retries inside one session.
    pub(crate) idempotent: Option<&'static str>,
    /// Per-aggregate order.
    pub(crate) per_key_order: Option<&'static str>,
}

/// A guarantee the configuration asks for and the broker cannot give.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key} asks for {guarantee}, which the {broker} broker cannot give; remove the key or choose a broker that gives it")]
pub(crate) struct Unmet {
    /// The configuration key that asks for it.
    pub(crate) key: &'static str,
    /// The guarantee, in words.
    pub(crate) guarantee: &'static str,
    /// The broker's name.
    pub(crate) broker: &'static str,
}

impl Guarantees {
    /// Refuses, by key, the first guarantee `wanted` asks for that this
    /// broker lacks.
    pub(crate) fn check(&self, broker: &'static str, wanted: &Wanted) -> Result<(), Unmet> {
        let asks = [
            (
                wanted.transactional,
                self.transactional,
                "transactional (exactly-once) delivery",
            ),
            (wanted.idempotent, self.idempotent, "idempotent delivery"),
            (wanted.per_key_order, self.per_key_order, "per-key ordering"),
        ];
        for (key, given, guarantee) in asks {
            if let (Some(key), false) = (key, given) {
                return Err(Unmet {
                    key,
                    guarantee,
                    broker,
                });
            }
        }
        Ok(())
    }
}

/// How a failure of one record (refused at send, or in its delivery
/// report) is to be treated. A broker maps its own error codes onto this;
/// the publish step decides from it alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailureClass {
    /// About this record alone (its size, its destination, a policy):
    /// dead-lettered under `errors.tolerance = all`. The kind is the
    /// metric label and the dead-letter record's `walrelay.error.kind`.
    Record {
        /// Short name of the problem (`message_too_large`,
        /// `unknown_topic`, ...).
        kind: &'static str,
        /// A size limit: the record, or the batch it travelled in, was too
        /// large.
        too_large: bool,
    },
    /// Dropped because an earlier failure stopped the sink: it only echoes
    /// that one.
    Purged,
    /// The broker or the cluster (authorisation, a fatal producer state,
    /// a timeout): stops the pipeline under any policy.
    Broker,
}

/// A failed delivery, in the publish step's terms.
#[derive(Debug, Clone)]
pub(crate) struct Delivery {
    /// The broker's name ([`Broker::NAME`]), for messages.
    pub(crate) broker: &'static str,
    /// Where the record was going.
    pub(crate) destination: String,
    /// What the failure means for the record.
    pub(crate) class: FailureClass,
    /// The broker's error, for people.
    pub(crate) error: String,
    /// The broker's error code, a metric label of low cardinality.
    pub(crate) code: String,
    /// Key, value and header bytes of the refused record.
    pub(crate) record_bytes: usize,
}

/// Why a broker did not take a record.
pub(crate) enum Refusal<T, E> {
    /// Its local queue is full: wait for acknowledgements, then send the
    /// record again (backpressure, never a failure).
    Full(T),
    /// Refused outright.
    Refused(T, E),
}

impl<T, E: fmt::Debug> fmt::Debug for Refusal<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Full(_) => f.write_str("Full"),
            Refusal::Refused(_, e) => f.debug_tuple("Refused").field(e).finish(),
        }
    }
}

/// A broker behind the publish seam.
///
/// `send` hands one record over without waiting for its acknowledgement;
/// the broker's own delivery callback later hands the ticket back to
/// [`super::publish::Shared::settle`] with the outcome. A send that cannot
/// take the record now returns it ([`Refusal::Full`]) so the publish step
/// can wait without buffering more.
pub(crate) trait Broker {
    /// Travels with a record and comes back with its acknowledgement.
    type Ticket;
    /// What a refused send carries.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The broker's name in messages (`kafka`, `nats-jetstream`, ...).
    const NAME: &'static str;

    /// What the broker promises; the configuration is checked against it
    /// ([`Guarantees::check`]) before anything is sent.
    const GUARANTEES: Guarantees;

    /// Hands `record` over; its acknowledgement arrives later.
    fn send(
        &self,
        record: &WireRecord<'_>,
        ticket: Self::Ticket,
    ) -> Result<(), Refusal<Self::Ticket, Self::Error>>;

    /// What a refused send means for the record.
    fn classify(error: &Self::Error) -> FailureClass;

    /// Records handed over and not yet acknowledged.
    fn in_flight(&self) -> usize;
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT_MOST_ONCE: Guarantees = Guarantees {
        idempotent: false,
        transactional: false,
        dedup_by_id: false,
        per_key_order: true,
    };

    #[test]
    fn an_unmet_guarantee_is_refused_by_its_key() {
        let wanted = Wanted {
            transactional: Some("kafka.exactly_once"),
            ..Wanted::default()
        };
        let err = AT_MOST_ONCE.check("http", &wanted).unwrap_err();
        assert_eq!(err.key, "kafka.exactly_once");
        assert_eq!(
            err.to_string(),
            "kafka.exactly_once asks for transactional (exactly-once) delivery, which the http \
             broker cannot give; remove the key or choose a broker that gives it"
        );
        let order = Wanted {
            per_key_order: Some("sink.ordered"),
            ..Wanted::default()
        };
        assert_eq!(AT_MOST_ONCE.check("http", &order), Ok(()));
        let all = Guarantees {
            idempotent: true,
            transactional: true,
            dedup_by_id: false,
            per_key_order: true,
        };
        assert_eq!(all.check("kafka", &wanted), Ok(()));
    }

    #[test]
    fn a_wire_record_borrows_the_routed_one() {
        let record = KafkaRecord {
            topic: "outbox.event.order".into(),
            key: Some(bytes::Bytes::from_static(b"k1")),
            value: Some(bytes::Bytes::from_static(b"{}")),
            headers: vec![RecordHeader {
                name: "id".into(),
                value: Some(bytes::Bytes::from_static(b"abc")),
            }],
            partition: Some(2),
            timestamp_ms: None,
        };
        let wire = WireRecord::of(&record);
        assert_eq!(wire.destination, "outbox.event.order");
        assert_eq!(wire.ordering_key, Some(&b"k1"[..]));
        assert_eq!(wire.partition, Some(2));
        // 2 (key) + 2 (value) + 2 + 3 (header).
        assert_eq!(wire.bytes(), 9);
        assert_eq!(WireRecord::plain("t", None, Some(b"v")).bytes(), 1);
    }
}
