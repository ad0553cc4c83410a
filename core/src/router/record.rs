//! The routed record and where it comes from: [`EventMeta`] in,
//! [`KafkaRecord`] out, assembled from the topic, the headers (inherited
//! context, tracing, `id`, placements, the headers column), the key, the
//! value, partition and timestamp. Never does I/O or logs.

use std::sync::Arc;

use bytes::Bytes;
use walrelay_proto::pgoutput::TupleData;
use walrelay_proto::Lsn;

use super::bind::TimestampUnit;
use super::config::NullPolicy;
use super::{BoundColumn, BoundRelation, Headers, Part, RouteError, Router, Row, ID_HEADER};
use crate::connect::pg;
use crate::connect::transforms::{ConnectHeader, ConnectRecord};
use crate::connect::Value;

/// Where an event comes from; used for error context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventMeta {
    /// LSN of the change.
    pub lsn: Lsn,
    /// Commit LSN of its transaction.
    pub commit_lsn: Lsn,
    /// Transaction id.
    pub xid: u32,
    /// Commit time, Unix µs.
    pub commit_time_us: i64,
    /// When walrelay read the change off the replication socket, Unix µs;
    /// 0 when it did not come from one (polling, the snapshot). Only for
    /// the latency metrics.
    pub received_us: i64,
    /// Debezium's `lastCommitLsn` when the change was read: the end of the
    /// last transaction committed before it (its `source.sequence`).
    pub last_commit_lsn: Option<Lsn>,
}

/// One Kafka header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordHeader {
    /// Header name, shared between records.
    pub name: Arc<str>,
    /// Header value; `None` is a null header.
    pub value: Option<Bytes>,
}

/// A record ready for the producer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaRecord {
    /// Destination topic, shared with every record of the same route value.
    pub topic: Arc<str>,
    /// Key bytes; `None` is a null key.
    pub key: Option<Bytes>,
    /// Value bytes; `None` is a tombstone.
    pub value: Option<Bytes>,
    /// Headers in order.
    pub headers: Vec<RecordHeader>,
    /// Explicit partition; `None` lets the producer's partitioner decide.
    pub partition: Option<i32>,
    /// Explicit timestamp, Unix ms; `None` uses the producer's clock.
    pub timestamp_ms: Option<i64>,
}

impl Router {
    /// Turns one inserted outbox row into a record; `None` when a
    /// transform after the router dropped it.
    pub fn route(
        &mut self,
        bound: &BoundRelation,
        row: &TupleData,
        meta: &EventMeta,
    ) -> Result<Option<KafkaRecord>, RouteError> {
        if let Some(problem) = &bound.problem {
            return Err(RouteError::Layout {
                column: problem.column().unwrap_or("?").to_owned(),
                lsn: meta.lsn,
                event_id: bound.event_id(row).unwrap_or_else(|| "unknown".to_owned()),
                source: Box::new(problem.clone()),
            });
        }
        let r = Row {
            bound,
            row,
            meta,
            cells: None,
        };
        // Debezium builds the whole change event first: a NaN its `after`
        // struct cannot hold fails the event before the router runs.
        for c in &bound.strict_numerics {
            if let Some(text) = r.raw(c)? {
                if pg::is_special_numeric(text) {
                    return Err(RouteError::InvalidValue {
                        column: c.name.to_string(),
                        lsn: meta.lsn,
                        event_id: r.event_id(),
                        source: pg::unrepresentable_in_required(text),
                    });
                }
            }
        }
        self.route_row(&r)
    }

    /// [`Router::route`] once the row (or message) is in hand. The parts
    /// are computed in Debezium's order, so the first problem of an event
    /// is the one reported: topic, timestamp, headers, key, value.
    pub(super) fn route_row(&mut self, r: &Row<'_>) -> Result<Option<KafkaRecord>, RouteError> {
        // One copy of the path per mode, so the one without a chain never
        // looks at Connect data.
        if self.connect_mode() {
            self.route_row_connect(r)
        } else {
            self.route_row_as::<false>(r)
        }
    }

    /// The path with Connect data kept, out of line.
    #[inline(never)]
    fn route_row_connect(&mut self, r: &Row<'_>) -> Result<Option<KafkaRecord>, RouteError> {
        self.route_row_as::<true>(r)
    }

    /// [`Router::route_row`] with Connect data kept (`CONNECT`) or not.
    #[inline]
    fn route_row_as<const CONNECT: bool>(
        &mut self,
        r: &Row<'_>,
    ) -> Result<Option<KafkaRecord>, RouteError> {
        let topic = self.route_topic(r)?;
        let timestamp_ms = record_timestamp(r)?;
        let mut headers = self.leading_headers::<CONNECT>(r)?;
        let key = self.record_key::<CONNECT>(r)?;
        let mut partition = None;
        let value = if !CONNECT && self.direct_value_applies(r.bound) {
            Part::Bytes(self.direct_value(r, &mut headers)?)
        } else {
            self.general_value::<CONNECT>(r, &mut headers, &mut partition)?
        };
        if let Some(h) = &r.bound.headers {
            self.column_headers(r, h, &mut headers)?;
        }
        let (key, value, headers) = match (key, value, headers) {
            (Part::Bytes(k), Part::Bytes(v), Headers::Bytes(h)) => (k, v, h),
            (k, v, h) => return self.finish_parts(r, topic, partition, timestamp_ms, k, v, h),
        };
        if self.server_mode {
            // KafkaChangeConsumer builds `new ProducerRecord<>(topic, null, null, key, value, headers)`.
            return Ok(Some(KafkaRecord {
                topic,
                key,
                value,
                headers,
                partition: None,
                timestamp_ms: None,
            }));
        }
        Ok(Some(KafkaRecord {
            topic,
            key,
            value,
            headers,
            partition,
            timestamp_ms,
        }))
    }

    /// The record of a router keeping Connect data: the chain, then the
    /// converters. Out of line, so the path without a chain stays small.
    #[inline(never)]
    #[allow(clippy::too_many_arguments, reason = "the parts route_row assembled")]
    fn finish_parts(
        &self,
        r: &Row<'_>,
        topic: Arc<str>,
        partition: Option<i32>,
        timestamp_ms: Option<i64>,
        key: Part,
        value: Part,
        headers: Headers,
    ) -> Result<Option<KafkaRecord>, RouteError> {
        let (Part::Connect(k), Part::Connect(v), Headers::Connect(headers)) = (key, value, headers)
        else {
            unreachable!("a router keeps every part as Connect data, or none");
        };
        let ((key_schema, key), (value_schema, value)) = (*k, *v);
        let record = ConnectRecord {
            topic,
            partition,
            key_schema,
            key,
            value_schema,
            value,
            // Debezium's record always has one: the column's, or the
            // change event's `ts_ms` (when it was processed).
            timestamp: timestamp_ms.or_else(|| Some(crate::clock::unix_now_micros() / 1000)),
            headers,
        };
        self.finish(r, record)
    }

    /// Topic: `getString(route.by.field)` with no default (a null route is
    /// an error naming the event), then `RegexRouter` through the cache.
    #[inline]
    fn route_topic(&mut self, r: &Row<'_>) -> Result<Arc<str>, RouteError> {
        let route = r
            .raw(&r.bound.route)?
            .ok_or_else(|| RouteError::NullRouteValue {
                column: r.bound.route.name.to_string(),
                lsn: r.meta.lsn,
                event_id: r.event_id(),
            })?;
        self.topic(r, route)
    }

    /// The headers every record starts with, in Debezium's order: its
    /// context headers (table rows only), tracing, then the event id,
    /// which `router.null_id = "error"` requires.
    #[inline]
    fn leading_headers<const CONNECT: bool>(&self, r: &Row<'_>) -> Result<Headers, RouteError> {
        let bound = r.bound;
        // Debezium adds its context headers to table rows only, never to
        // a decoded message.
        let table_row = r.cells.is_none();
        let mut headers =
            Headers::with_capacity(CONNECT, self.inherited.len() + 1 + bound.placements.len());
        match &mut headers {
            Headers::Bytes(h) if table_row => h.extend(self.inherited.iter().cloned()),
            Headers::Connect(h) if table_row => h.extend(self.inherited_connect.iter().cloned()),
            _ => {}
        }
        if CONNECT {
            self.envelope_headers(r, &mut headers)?;
        }
        self.tracing_headers(r, &mut headers)?;
        let id_null = match &mut headers {
            Headers::Bytes(h) => {
                let id = self.header_value(r, &bound.id, ID_HEADER)?;
                let null = id.is_none();
                h.push(RecordHeader {
                    name: Arc::clone(&self.id_header),
                    value: id,
                });
                null
            }
            Headers::Connect(h) => {
                let id = r.get(&bound.id)?;
                let null = id.is_null();
                h.push(ConnectHeader {
                    key: Arc::clone(&self.id_header),
                    schema: Some(Arc::clone(&bound.id.ty.schema)),
                    value: id,
                });
                null
            }
        };
        if id_null && self.cfg.null_id == NullPolicy::Error {
            return Err(RouteError::NullId {
                column: bound.id.name.to_string(),
                lsn: r.meta.lsn,
            });
        }
        Ok(headers)
    }

    /// The key column through the key converter (the text itself where a
    /// `StringConverter` prints it so); a null key is refused under
    /// `router.null_key = "error"`.
    #[inline]
    fn record_key<const CONNECT: bool>(&self, r: &Row<'_>) -> Result<Part, RouteError> {
        let c = &r.bound.key;
        let key = if CONNECT {
            Part::Connect(Box::new((Some(Arc::clone(&c.ty.schema)), r.get(c)?)))
        } else if self.key_direct {
            Part::Bytes(r.direct(
                c,
                |v| self.key_converter.from_connect_data(Some(&c.ty.schema), v),
                "key",
            )?)
        } else {
            let v = r.get(c)?;
            Part::Bytes(r.convert(
                "key",
                self.key_converter.from_connect_data(Some(&c.ty.schema), &v),
            )?)
        };
        // Under a chain, the key published is checked after it (`finish`).
        if !CONNECT && key.is_null() && self.cfg.null_key == NullPolicy::Error {
            return Err(RouteError::NullKey {
                column: c.name.to_string(),
                lsn: r.meta.lsn,
                event_id: r.event_id(),
            });
        }
        Ok(key)
    }

    /// `headers.add(name, struct.get(column), columnSchema)` through the
    /// header converter.
    pub(super) fn header_value(
        &self,
        r: &Row<'_>,
        c: &BoundColumn,
        name: &str,
    ) -> Result<Option<Bytes>, RouteError> {
        let schema = &c.ty.schema;
        if self.header_direct {
            let what = format!("header {name}");
            return r.direct(
                c,
                |v| self.header_converter.from_connect_header(Some(schema), v),
                &what,
            );
        }
        let v = r.get(c)?;
        r.convert(
            &format!("header {name}"),
            self.header_converter.from_connect_header(Some(schema), &v),
        )
    }
}

/// The timestamp column in milliseconds (`getInt64`: null gives the
/// producer's clock).
#[inline]
fn record_timestamp(r: &Row<'_>) -> Result<Option<i64>, RouteError> {
    let Some((c, unit)) = &r.bound.timestamp else {
        return Ok(None);
    };
    Ok(match r.value(c)? {
        Value::Int64(t) => Some(match unit {
            TimestampUnit::Millis => t,
            // Java's long division truncates toward zero, as Rust's does.
            TimestampUnit::Micros => t / 1_000,
            TimestampUnit::Nanos => t / 1_000_000,
        }),
        _ => None,
    })
}
