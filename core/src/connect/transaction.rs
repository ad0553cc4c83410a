//! Debezium's transaction metadata (`provide.transaction.metadata=true`):
//! the BEGIN and END records the PostgreSQL connector sends to
//! `<topic.prefix>.<topic.transaction>` around every transaction it
//! decodes, and the `transaction` block (`event.block`) it puts in the
//! envelopes of that transaction's events.
//!
//! Owns the key (`io.debezium.connector.common.TransactionMetadataKey`
//! {id}) and the value (`io.debezium.connector.common.TransactionMetadataValue`
//! {status, id, event_count, data_collections[{data_collection,
//! event_count}], ts_ms}) as Connect schemas and values, field for field as
//! Debezium 3.6.1.Final builds them (`SchemaFactory`,
//! `AbstractTransactionStructMaker`, `PostgresTransactionMonitor`), and
//! their bytes through the configured converters, compared with the real
//! Debezium by the compatibility suite's `txmeta-*` cases.
//!
//! It never decides what the facts are: the stream assembly says which
//! transaction, which LSN and which counts ([`Marker`]). No I/O, no clock.

use std::sync::Arc;

use bytes::Bytes;
use walrelay_proto::Lsn;

use super::convert::{ConvertError, Converter};
use super::{Field, Schema, Type, Value};

/// Debezium's default `topic.transaction`.
pub(crate) const DEFAULT_TOPIC: &str = "transaction";
/// Logical name of the key schema.
pub(crate) const KEY_SCHEMA_NAME: &str = "io.debezium.connector.common.TransactionMetadataKey";
/// Logical name of the value schema.
pub(crate) const VALUE_SCHEMA_NAME: &str = "io.debezium.connector.common.TransactionMetadataValue";
/// Logical name of an element of `data_collections`.
pub(crate) const COLLECTION_SCHEMA_NAME: &str = "event.collection";
/// Logical name of the envelope's `transaction` block.
pub(crate) const BLOCK_SCHEMA_NAME: &str = "event.block";

/// Debezium's transaction id on PostgreSQL: `<xid>:<lsn>`, the LSN being
/// the position of the message the record or event was made at (so a
/// transaction's BEGIN, events and END carry different ids).
pub(crate) fn transaction_id(xid: u32, lsn: Lsn) -> String {
    format!("{xid}:{}", lsn.0)
}

/// One BEGIN or END record's facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Marker {
    /// The transaction started (pgoutput's Begin).
    Begin {
        /// [`transaction_id`] at the Begin message.
        id: String,
        /// The commit time, Unix ms.
        ts_ms: i64,
    },
    /// The transaction committed (pgoutput's Commit).
    End {
        /// [`transaction_id`] at the Commit message.
        id: String,
        /// The commit time, Unix ms.
        ts_ms: i64,
        /// Every event Debezium counted in it.
        event_count: u64,
        /// Per data collection, in the order Debezium lists them.
        data_collections: Vec<(Arc<str>, u64)>,
    },
}

/// An event's `transaction` block: `{id, total_order, data_collection_order}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Block {
    /// [`transaction_id`] at the event.
    pub(crate) id: String,
    /// Its place among the transaction's events, from 1.
    pub(crate) total_order: u64,
    /// Its place among the events of its data collection, from 1.
    pub(crate) data_collection_order: u64,
}

/// The envelope's `transaction` block schema
/// (`SchemaFactory.transactionBlockSchema()`), optional.
pub(crate) fn block_schema() -> Schema {
    Schema::structure(
        None,
        vec![
            field("id", Schema::new(Type::String)),
            field("total_order", Schema::new(Type::Int64)),
            field("data_collection_order", Schema::new(Type::Int64)),
        ],
    )
    .with_optional(true)
    .named(BLOCK_SCHEMA_NAME, Some(1))
}

/// The block as a value of [`block_schema`]; `None` is null.
pub(crate) fn block_value(block: Option<&Block>) -> Value {
    match block {
        None => Value::Null,
        Some(b) => Value::Struct(vec![
            Value::string(b.id.as_str()),
            Value::Int64(b.total_order as i64),
            Value::Int64(b.data_collection_order as i64),
        ]),
    }
}

fn field(name: &str, schema: Schema) -> Field {
    Field {
        name: Arc::from(name),
        schema: Arc::new(schema),
    }
}

/// The transaction topic of one connector, its schemas and converters.
#[derive(Debug, Clone)]
pub struct TransactionTopic {
    topic: Arc<str>,
    key_schema: Arc<Schema>,
    value_schema: Arc<Schema>,
    key_converter: Converter,
    value_converter: Converter,
}

/// A BEGIN or END record, converted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rendered {
    /// Key bytes.
    pub(crate) key: Option<Bytes>,
    /// Value bytes.
    pub(crate) value: Option<Bytes>,
}

impl TransactionTopic {
    /// The records of a connector writing to `topic`
    /// (`<topic.prefix>.<topic.transaction>`) through these converters.
    /// Fails when a converter cannot write a struct (ByteArrayConverter,
    /// BinaryDataConverter): Debezium's task would fail at the first BEGIN.
    pub fn new(
        topic: &str,
        key_converter: Converter,
        value_converter: Converter,
    ) -> Result<Self, ConvertError> {
        let key_schema = Schema::structure(None, vec![field("id", Schema::new(Type::String))])
            .named(KEY_SCHEMA_NAME, Some(1));
        let collection = Schema::structure(
            None,
            vec![
                field("data_collection", Schema::new(Type::String)),
                field("event_count", Schema::new(Type::Int64)),
            ],
        )
        .with_optional(true)
        .named(COLLECTION_SCHEMA_NAME, Some(1));
        let value_schema = Schema::structure(
            None,
            vec![
                field("status", Schema::new(Type::String)),
                field("id", Schema::new(Type::String)),
                field("event_count", Schema::optional(Type::Int64)),
                field(
                    "data_collections",
                    Schema::array(Arc::new(collection)).with_optional(true),
                ),
                field("ts_ms", Schema::new(Type::Int64)),
            ],
        )
        .named(VALUE_SCHEMA_NAME, Some(1));
        let t = TransactionTopic {
            topic: Arc::from(topic),
            key_schema: Arc::new(key_schema),
            value_schema: Arc::new(value_schema),
            key_converter,
            value_converter,
        };
        // The CloudEvents converter runs in the router, after the chain.
        if value_converter.kind != crate::connect::config::ConverterKind::CloudEvents {
            t.render(&Marker::End {
                id: transaction_id(1, Lsn(1)),
                ts_ms: 0,
                event_count: 1,
                data_collections: vec![(Arc::from("public.outbox"), 1)],
            })?;
        }
        Ok(t)
    }

    /// `<topic.prefix>.<topic.transaction>`.
    pub(crate) fn topic(&self) -> &Arc<str> {
        &self.topic
    }

    /// Key and value as Connect data.
    pub(crate) fn connect_data(&self, m: &Marker) -> ((Arc<Schema>, Value), (Arc<Schema>, Value)) {
        let (status, id, event_count, collections, ts_ms) = match m {
            Marker::Begin { id, ts_ms } => ("BEGIN", id, Value::Null, Value::Null, *ts_ms),
            Marker::End {
                id,
                ts_ms,
                event_count,
                data_collections,
            } => (
                "END",
                id,
                Value::Int64(*event_count as i64),
                Value::Array(
                    data_collections
                        .iter()
                        .map(|(name, n)| {
                            Value::Struct(vec![Value::string(&**name), Value::Int64(*n as i64)])
                        })
                        .collect(),
                ),
                *ts_ms,
            ),
        };
        let key = Value::Struct(vec![Value::string(id.as_str())]);
        let value = Value::Struct(vec![
            Value::string(status),
            Value::string(id.as_str()),
            event_count,
            collections,
            Value::Int64(ts_ms),
        ]);
        (
            (Arc::clone(&self.key_schema), key),
            (Arc::clone(&self.value_schema), value),
        )
    }

    /// Key and value bytes through the converters.
    pub(crate) fn render(&self, m: &Marker) -> Result<Rendered, ConvertError> {
        let ((ks, k), (vs, v)) = self.connect_data(m);
        Ok(Rendered {
            key: self.key_converter.from_connect_data(Some(&ks), &k)?,
            value: self.value_converter.from_connect_data(Some(&vs), &v)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::config::ConverterKind;

    const JSON: Converter = Converter {
        kind: ConverterKind::Json,
        schemas_enable: true,
    };

    fn end() -> Marker {
        Marker::End {
            id: transaction_id(771, Lsn(24023928)),
            ts_ms: 1_700_000_000_123,
            event_count: 3,
            data_collections: vec![(Arc::from("public.outbox"), 3)],
        }
    }

    #[test]
    fn ids_are_xid_colon_decimal_lsn() {
        assert_eq!(transaction_id(771, Lsn(0x16E_9A78)), "771:24025720");
    }

    #[test]
    fn converters_that_cannot_write_a_struct_are_refused() {
        for kind in [ConverterKind::ByteArray, ConverterKind::BinaryData] {
            let c = Converter {
                kind,
                schemas_enable: false,
            };
            assert!(TransactionTopic::new("p.transaction", JSON, c).is_err());
            assert!(TransactionTopic::new("p.transaction", c, JSON).is_err());
        }
    }

    #[test]
    fn json_without_schemas() {
        let plain = Converter {
            schemas_enable: false,
            ..JSON
        };
        let t = TransactionTopic::new("p.transaction", plain, plain).unwrap();
        let r = t.render(&end()).unwrap();
        assert_eq!(r.key.as_deref(), Some(&br#"{"id":"771:24023928"}"#[..]));
        assert_eq!(
            std::str::from_utf8(r.value.as_deref().unwrap()).unwrap(),
            r#"{"status":"END","id":"771:24023928","event_count":3,"data_collections":[{"data_collection":"public.outbox","event_count":3}],"ts_ms":1700000000123}"#
        );
        let b = t
            .render(&Marker::Begin {
                id: transaction_id(771, Lsn(5)),
                ts_ms: 7,
            })
            .unwrap();
        assert_eq!(
            std::str::from_utf8(b.value.as_deref().unwrap()).unwrap(),
            r#"{"status":"BEGIN","id":"771:5","event_count":null,"data_collections":null,"ts_ms":7}"#
        );
    }
}
