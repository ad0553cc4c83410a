//! What assembly hands on: an [`OutboxEvent`] (a row, a logical decoding
//! message or a transaction metadata marker, with its tracker entry and
//! origin) and how each kind is routed, named and shown in a dead-letter
//! record. Never does I/O.

use std::sync::Arc;

use bytes::Bytes;
use walrelay_proto::pgoutput::TupleData;

use super::MessageEvent;
use crate::checkpoint::TxnSeq;
use crate::connect::transaction::{Marker, TransactionTopic};
use crate::connect::transforms::ConnectRecord;
use crate::router::{BoundRelation, EventMeta, KafkaRecord, RouteError, Router};

/// One outbox event on its way to Kafka.
#[derive(Debug, Clone)]
pub struct OutboxEvent {
    /// The transaction's entry in the checkpoint tracker.
    pub seq: TxnSeq,
    /// Where it came from.
    pub meta: EventMeta,
    /// The row or the message.
    pub(crate) body: EventBody,
}

/// What an event carries.
#[derive(Debug, Clone)]
pub(crate) enum EventBody {
    /// A row inserted into the outbox table.
    Row {
        /// The outbox relation with the router's columns resolved.
        bound: Arc<BoundRelation>,
        /// The inserted row.
        row: TupleData,
    },
    /// A logical decoding message with a selected prefix.
    Message(MessageEvent),
    /// A BEGIN or END record of transaction metadata
    /// (`outbox.transaction_metadata`).
    Transaction {
        /// The transaction topic and its converters.
        topic: Arc<TransactionTopic>,
        /// Which record.
        marker: Marker,
    },
}

/// The routing outcome of one event: its record (none when a transform
/// after the router dropped it) and, for error context later on, its
/// event id.
pub(crate) type Routed = (Option<KafkaRecord>, Option<String>);

impl OutboxEvent {
    /// A row event.
    pub fn row(seq: TxnSeq, meta: EventMeta, bound: Arc<BoundRelation>, row: TupleData) -> Self {
        OutboxEvent {
            seq,
            meta,
            body: EventBody::Row { bound, row },
        }
    }

    /// Routes the event to its record.
    pub fn route(&self, router: &mut Router) -> Result<Routed, RouteError> {
        match &self.body {
            EventBody::Row { bound, row } => {
                let record = router.route(bound, row, &self.meta)?;
                Ok((record, bound.event_id(row)))
            }
            EventBody::Message(m) => router.route_message(m, &self.meta),
            EventBody::Transaction { topic, marker } if router.connect_mode() => {
                let ((key_schema, key), (value_schema, value)) = topic.connect_data(marker);
                let record = ConnectRecord {
                    topic: Arc::clone(topic.topic()),
                    partition: None,
                    key_schema: Some(key_schema),
                    key,
                    value_schema: Some(value_schema),
                    value,
                    timestamp: None,
                    headers: Vec::new(),
                };
                Ok((
                    router.transform(record, self.meta.lsn, || "unknown".to_owned())?,
                    None,
                ))
            }
            EventBody::Transaction { topic, marker } => {
                let r = topic.render(marker).map_err(|source| RouteError::Convert {
                    what: "transaction metadata record".to_owned(),
                    lsn: self.meta.lsn,
                    event_id: "unknown".to_owned(),
                    source,
                })?;
                let record = KafkaRecord {
                    topic: Arc::clone(topic.topic()),
                    key: r.key,
                    value: r.value,
                    // Debezium's TransactionMonitor adds no headers, and
                    // leaves partition and timestamp to the producer.
                    headers: Vec::new(),
                    partition: None,
                    timestamp_ms: None,
                };
                Ok((Some(record), None))
            }
        }
    }

    /// The topic the event was meant for, where it can be told; for the
    /// context of an event the router refused.
    pub fn intended_topic(&self, router: &mut Router) -> Option<Arc<str>> {
        match &self.body {
            EventBody::Row { bound, row } => router.intended_topic(bound, row),
            EventBody::Message(m) => router.intended_message_topic(m),
            EventBody::Transaction { topic, .. } => Some(Arc::clone(topic.topic())),
        }
    }

    /// The event's original bytes for a dead-letter record: the key
    /// column's and payload column's text of a row, or no key and the
    /// message's content as it was written.
    pub fn original(&self) -> (Option<Bytes>, Option<Bytes>) {
        match &self.body {
            EventBody::Row { bound, row } => bound.original(row),
            EventBody::Message(m) => (None, Some(m.content.clone())),
            EventBody::Transaction { .. } => (None, None),
        }
    }

    /// The event id, where the row or message has one (error context).
    pub fn event_id(&self) -> Option<String> {
        match &self.body {
            EventBody::Row { bound, row } => bound.event_id(row),
            // Only known once the router has read the content
            // (`Router::route_message` returns it).
            EventBody::Message(_) => None,
            EventBody::Transaction { .. } => None,
        }
    }

    /// Where the event came from, for error context and dead-letter
    /// headers: `schema.table`, or `message prefix <prefix>`.
    pub fn origin(&self) -> String {
        match &self.body {
            EventBody::Row { bound, .. } => bound.table_name(),
            EventBody::Message(m) => format!("message prefix {}", m.prefix),
            EventBody::Transaction { .. } => "transaction metadata".to_owned(),
        }
    }
}
