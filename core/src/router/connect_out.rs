//! The router's output when transforms follow it: the record stays a
//! Connect record ([`ConnectRecord`]: schemas and values, headers with
//! schemas) through the chain, and the converters run after it, as in
//! Connect's `WorkerSourceTask` (headers, then key, then value). Without a
//! chain the router converts as it goes and none of this runs. Never does
//! I/O or logs.

use std::sync::Arc;

use bytes::Bytes;

use super::{BoundColumn, KafkaRecord, RecordHeader, RouteError, Router, Row};
use crate::connect::convert::ConvertError;
use crate::connect::transforms::{ConnectHeader, ConnectRecord};
use crate::connect::{Schema, Type, Value};

/// The logical name of a header whose bytes walrelay made itself (a
/// headers column's members): the header converter leaves them as they
/// are, with or without a chain.
pub(crate) const RAW_HEADER: &str = "io.walrelay.RawHeader";

/// Headers being assembled: converted at once (no chain), or kept as
/// Connect headers for the chain.
pub(super) enum Headers {
    /// Serialised by the header converter as they are added.
    Bytes(Vec<RecordHeader>),
    /// Connect headers, serialised after the chain.
    Connect(Vec<ConnectHeader>),
}

impl Headers {
    /// Room for `n` headers, in the router's mode.
    #[inline]
    pub(super) fn with_capacity(connect: bool, n: usize) -> Headers {
        if connect {
            Headers::Connect(Vec::with_capacity(n))
        } else {
            Headers::Bytes(Vec::with_capacity(n))
        }
    }

    /// `headers.add(name, struct.get(column), columnSchema)`.
    #[inline]
    pub(super) fn push_column(
        &mut self,
        router: &Router,
        r: &Row<'_>,
        c: &BoundColumn,
        name: &Arc<str>,
    ) -> Result<(), RouteError> {
        match self {
            Headers::Bytes(h) => {
                let value = router.header_value(r, c, name)?;
                h.push(RecordHeader {
                    name: Arc::clone(name),
                    value,
                });
            }
            Headers::Connect(h) => h.push(ConnectHeader {
                key: Arc::clone(name),
                schema: Some(Arc::clone(&c.ty.schema)),
                value: r.get(c)?,
            }),
        }
        Ok(())
    }

    /// A STRING header.
    pub(super) fn push_string(
        &mut self,
        router: &Router,
        r: &Row<'_>,
        name: &Arc<str>,
        value: String,
    ) -> Result<(), RouteError> {
        match self {
            Headers::Bytes(h) => {
                let string = Schema::new(Type::String);
                let v = r.convert(
                    &format!("header {name}"),
                    router
                        .header_converter
                        .from_connect_header(Some(&string), &Value::string(value)),
                )?;
                h.push(RecordHeader {
                    name: Arc::clone(name),
                    value: v,
                });
            }
            Headers::Connect(h) => h.push(ConnectHeader {
                key: Arc::clone(name),
                schema: Some(Arc::clone(&router.string_schema)),
                value: Value::string(value),
            }),
        }
        Ok(())
    }

    /// Headers whose bytes are already made (a headers column's members).
    pub(super) fn extend_raw(&mut self, raw: Vec<RecordHeader>, raw_schema: &Arc<Schema>) {
        match self {
            Headers::Bytes(h) => h.extend(raw),
            Headers::Connect(h) => h.extend(raw.into_iter().map(|r| ConnectHeader {
                key: r.name,
                schema: Some(Arc::clone(raw_schema)),
                value: r.value.map_or(Value::Null, Value::Bytes),
            })),
        }
    }
}

/// A key or value: converted at once (no chain) or as Connect data.
pub(super) enum Part {
    /// Serialised.
    Bytes(Option<Bytes>),
    /// Schema and value, serialised after the chain (boxed: the part
    /// stays as small as the bytes on the path without a chain).
    Connect(Box<(Option<Arc<Schema>>, Value)>),
}

impl Part {
    /// Whether it is a null key or value.
    #[inline]
    pub(super) fn is_null(&self) -> bool {
        match self {
            Part::Bytes(b) => b.is_none(),
            Part::Connect(c) => c.1.is_null(),
        }
    }
}

impl Router {
    /// Whether the router keeps Connect data until after the chain: there
    /// are transforms, headers copied from the change event, or a value
    /// converter that reads the headers.
    #[inline]
    pub fn connect_mode(&self) -> bool {
        !self.chain.is_empty() || self.envelope_headers.is_some() || self.cloudevents.is_some()
    }

    /// Runs the chain on `record` and converts what comes out: `None` when
    /// a transform dropped the record.
    pub(super) fn finish(
        &self,
        r: &Row<'_>,
        record: ConnectRecord,
    ) -> Result<Option<KafkaRecord>, RouteError> {
        let out = self.transform(record, r.meta.lsn, || r.event_id())?;
        if let Some(rec) = &out {
            if rec.key.is_none() && self.cfg.null_key == super::config::NullPolicy::Error {
                return Err(RouteError::NullKey {
                    column: r.bound.key.name.to_string(),
                    lsn: r.meta.lsn,
                    event_id: r.event_id(),
                });
            }
        }
        Ok(out)
    }

    /// Runs the chain on a record that did not come from the router's
    /// own rows (a message record, a transaction metadata record), or on
    /// one that did; errors name `lsn` and the event id `event_id` gives.
    pub fn transform(
        &self,
        record: ConnectRecord,
        lsn: walrelay_proto::Lsn,
        event_id: impl Fn() -> String,
    ) -> Result<Option<KafkaRecord>, RouteError> {
        let out = self
            .chain
            .apply(record)
            .map_err(|e| RouteError::Transform {
                lsn,
                event_id: event_id(),
                alias: e.alias,
                class: e.class,
                reason: e.source.message,
            })?;
        let Some(rec) = out else {
            return Ok(None);
        };
        self.convert_record(rec)
            .map(Some)
            .map_err(|(what, source)| RouteError::Convert {
                what,
                lsn,
                event_id: event_id(),
                source,
            })
    }

    /// Connect's conversion of a transformed record: headers, key, value.
    pub(crate) fn convert_record(
        &self,
        rec: ConnectRecord,
    ) -> Result<KafkaRecord, (String, ConvertError)> {
        let mut headers = Vec::with_capacity(rec.headers.len());
        for h in &rec.headers {
            let value = match (&h.schema, &h.value) {
                (Some(s), Value::Bytes(b)) if s.name.as_deref() == Some(RAW_HEADER) => {
                    Some(b.clone())
                }
                (Some(s), Value::Null) if s.name.as_deref() == Some(RAW_HEADER) => None,
                _ => self
                    .header_converter
                    .from_connect_header(h.schema.as_deref(), &h.value)
                    .map_err(|e| (format!("header {}", h.key), e))?,
            };
            headers.push(RecordHeader {
                name: Arc::clone(&h.key),
                value,
            });
        }
        let key = self
            .key_converter
            .from_connect_data(rec.key_schema.as_deref(), &rec.key)
            .map_err(|e| ("key".to_owned(), e))?;
        let value = match &self.cloudevents {
            Some(ce) => ce.from_connect_data(
                &rec.topic,
                &rec.headers,
                rec.value_schema.as_deref(),
                &rec.value,
            ),
            None => self
                .value_converter
                .from_connect_data(rec.value_schema.as_deref(), &rec.value),
        }
        .map_err(|e| ("value".to_owned(), e))?;
        let (partition, timestamp_ms) = if self.server_mode {
            (None, None)
        } else {
            (rec.partition, rec.timestamp)
        };
        Ok(KafkaRecord {
            topic: rec.topic,
            key,
            value,
            headers,
            partition,
            timestamp_ms,
        })
    }
}

/// The schema of a raw header.
pub(super) fn raw_header_schema() -> Arc<Schema> {
    Arc::new(Schema::optional(Type::Bytes).named(RAW_HEADER, None))
}
