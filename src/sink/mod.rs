//! The Kafka sink: routed records into an idempotent librdkafka producer,
//! delivery reports into the checkpoint tracker.
//!
//! Owns the producer, its configuration (`enable.idempotence=true`,
//! `acks=all`, `partitioner=murmur2_random` so a key lands on the partition
//! the Java client would pick) and backpressure: a full local queue makes
//! the sink wait, never fail and never buffer more. It never confirms an LSN
//! itself: it only reports deliveries to the tracker, tagged with the
//! session generation so reports from an earlier session are ignored.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Message};
use tokio::sync::{mpsc, Notify};
use tracing::{debug, error};

use crate::checkpoint::SharedTracker;
use crate::config::{is_secret_key, KafkaConfig};
use crate::metrics::{metrics, CodeLabel, TopicLabel};
use crate::router::{RouteError, Router};
use crate::txn::OutboxEvent;

/// Producer settings walrelay insists on or defaults.
const FORCED: &[(&str, &str)] = &[("enable.idempotence", "true"), ("acks", "all")];
/// Defaults the user may override.
const DEFAULTS: &[(&str, &str)] = &[
    ("partitioner", "murmur2_random"),
    ("linger.ms", "5"),
    // Infinite local timeout: a broker outage is backpressure, not data loss.
    ("message.timeout.ms", "0"),
    // Bound librdkafka's own buffer: 64 MiB or 100k messages.
    ("queue.buffering.max.kbytes", "65536"),
    ("queue.buffering.max.messages", "100000"),
];
/// How often an idle sink looks for a permanent delivery failure.
const FAILURE_CHECK: Duration = Duration::from_millis(100);
/// Bits of the delivery opaque that carry the transaction sequence; the
/// bits above carry the session generation.
const SEQ_BITS: u32 = 48;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;
/// Delivery opaque of records outside any transaction (heartbeats):
/// generation 0, which no session has ([`KafkaSink::begin_session`] numbers
/// them from 1), so the tracker never sees their reports.
const UNTRACKED: usize = 0;

/// Errors of the sink.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The producer could not be created (bad librdkafka property).
    #[error("cannot create the kafka producer")]
    Create(#[source] KafkaError),
    /// Routing an event failed.
    #[error(transparent)]
    Route(#[from] RouteError),
    /// librdkafka refused a record outright.
    #[error("cannot produce event at lsn {lsn} to topic {topic}")]
    Produce {
        /// Source position.
        lsn: walrelay_proto::Lsn,
        /// Intended topic.
        topic: String,
        /// librdkafka's error.
        #[source]
        source: KafkaError,
    },
    /// Kafka reported a permanent delivery failure.
    #[error("kafka could not deliver a record to {topic}: {error}; nothing after it is confirmed")]
    Delivery {
        /// Topic.
        topic: String,
        /// librdkafka's error text.
        error: String,
    },
}

/// What the delivery callback shares with the sink.
pub struct DeliveryContext {
    tracker: Mutex<Option<(u64, SharedTracker)>>,
    failure: Mutex<Option<SinkError>>,
    wake: Notify,
    delivered: AtomicU64,
}

impl ClientContext for DeliveryContext {}

impl ProducerContext for DeliveryContext {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, opaque: usize) {
        let opaque = opaque as u64;
        let generation = opaque >> SEQ_BITS;
        let seq = opaque & SEQ_MASK;
        let tracker = {
            let guard = self.tracker.lock().expect("tracker slot lock poisoned");
            match guard.as_ref() {
                Some((g, t)) if *g == generation => Some(t.clone()),
                _ => None,
            }
        };
        match result {
            Ok(_) => {
                self.delivered.fetch_add(1, Ordering::Relaxed);
                if let Some(commit_us) = tracker.and_then(|t| t.ack(seq, 1)) {
                    let now_us = crate::source::unix_now_micros();
                    metrics()
                        .commit_to_ack
                        .observe((now_us - commit_us).max(0) as f64 / 1e6);
                }
            }
            Err((err, msg)) => {
                if let Some(t) = tracker {
                    t.fail(seq);
                }
                let code = match err.rdkafka_error_code() {
                    Some(c) => format!("{c:?}"),
                    None => "unknown".to_owned(),
                };
                metrics()
                    .delivery_errors
                    .get_or_create(&CodeLabel { code })
                    .inc();
                let topic = msg.topic().to_owned();
                error!(topic, error = %err, "kafka delivery failed permanently");
                let mut failure = self.failure.lock().expect("failure slot lock poisoned");
                if failure.is_none() {
                    *failure = Some(SinkError::Delivery {
                        topic,
                        error: err.to_string(),
                    });
                }
            }
        }
        self.wake.notify_waiters();
    }
}

/// The producer, shared by every replication session of the process.
pub struct KafkaSink {
    producer: ThreadedProducer<DeliveryContext>,
    generation: AtomicU64,
}

impl KafkaSink {
    /// Creates the producer. librdkafka connects lazily, so an unreachable
    /// broker is not an error here.
    pub fn new(config: &KafkaConfig) -> Result<Self, SinkError> {
        let mut props: BTreeMap<&str, &str> = DEFAULTS.iter().copied().collect();
        for (k, v) in config.properties() {
            props.insert(k, v);
        }
        props.extend(FORCED.iter().copied());
        props.insert("bootstrap.servers", &config.bootstrap_servers);
        let mut cc = ClientConfig::new();
        for (k, v) in &props {
            cc.set(*k, *v);
        }
        let shown: Vec<String> = props
            .iter()
            .map(|(k, v)| format!("{k}={}", if is_secret_key(k) { "<redacted>" } else { v }))
            .collect();
        debug!(config = ?shown, "kafka producer");
        let context = DeliveryContext {
            tracker: Mutex::new(None),
            failure: Mutex::new(None),
            wake: Notify::new(),
            delivered: AtomicU64::new(0),
        };
        let producer = cc.create_with_context(context).map_err(SinkError::Create)?;
        Ok(KafkaSink {
            producer,
            generation: AtomicU64::new(0),
        })
    }

    /// Starts a new replication session: later delivery reports go to
    /// `tracker`; reports for earlier sessions are ignored.
    pub fn begin_session(&self, tracker: SharedTracker) -> u64 {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        *self
            .producer
            .context()
            .tracker
            .lock()
            .expect("tracker slot lock poisoned") = Some((generation, tracker));
        generation
    }

    /// Takes a recorded permanent delivery failure.
    pub fn take_failure(&self) -> Option<SinkError> {
        self.producer
            .context()
            .failure
            .lock()
            .expect("failure slot lock poisoned")
            .take()
    }

    /// Records handed to librdkafka and not yet reported.
    pub fn in_flight(&self) -> i32 {
        self.producer.in_flight_count()
    }

    /// Successful deliveries since start.
    pub fn delivered(&self) -> u64 {
        self.producer.context().delivered.load(Ordering::Relaxed)
    }

    /// Whether a broker answers a metadata request within `timeout`
    /// (blocking; call from a blocking thread).
    pub fn probe(&self, timeout: Duration) -> bool {
        self.producer.client().fetch_metadata(None, timeout).is_ok()
    }

    /// Waits up to `timeout` for every record to be reported.
    pub fn flush(&self, timeout: Duration) -> bool {
        self.producer.flush(timeout).is_ok()
    }

    /// Produces one record that belongs to no transaction (a heartbeat): its
    /// delivery confirms nothing. `partition` `None` lets the partitioner
    /// hash the key. A permanent delivery failure still stops
    /// the sink, as it stops Debezium's task. Never waits: a full local
    /// queue is an error the caller may skip.
    pub fn produce_untracked(
        &self,
        topic: &str,
        partition: Option<i32>,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Result<(), KafkaError> {
        let mut base: BaseRecord<'_, [u8], [u8], usize> =
            BaseRecord::with_opaque_to(topic, UNTRACKED);
        if let Some(key) = key {
            base = base.key(key);
        }
        if let Some(value) = value {
            base = base.payload(value);
        }
        if let Some(p) = partition {
            base = base.partition(p);
        }
        self.producer.send(base).map_err(|(e, _)| e)
    }

    /// Routes and produces batches until the channel closes, a route error
    /// or a permanent delivery failure. Waits (backpressure) while
    /// librdkafka's queue is full.
    pub async fn run(
        &self,
        router: &mut Router,
        mut rx: mpsc::Receiver<Vec<OutboxEvent>>,
    ) -> Result<(), SinkError> {
        let generation = self.generation.load(Ordering::Relaxed) << SEQ_BITS;
        let ctx = self.producer.context();
        // Per-batch topic counts, flushed to the metrics once per batch.
        let mut per_topic: Vec<(Arc<str>, u64)> = Vec::new();
        loop {
            let batch = tokio::select! {
                biased;
                batch = rx.recv() => match batch {
                    Some(batch) => batch,
                    None => break,
                },
                // A failure of the last records sent must stop the pipeline
                // even when no further batch arrives.
                _ = tokio::time::sleep(FAILURE_CHECK) => {
                    match self.take_failure() {
                        Some(err) => return Err(err),
                        None => continue,
                    }
                }
            };
            if let Some(err) = self.take_failure() {
                return Err(err);
            }
            for event in &batch {
                let record = router.route(&event.bound, &event.row, &event.meta)?;
                match per_topic
                    .iter_mut()
                    .find(|(t, _)| Arc::ptr_eq(t, &record.topic) || **t == *record.topic)
                {
                    Some((_, n)) => *n += 1,
                    None => per_topic.push((Arc::clone(&record.topic), 1)),
                }
                let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
                for h in &record.headers {
                    headers = headers.insert(Header {
                        key: &h.name,
                        value: h.value.as_deref(),
                    });
                }
                let opaque = (generation | (event.seq & SEQ_MASK)) as usize;
                let mut base = BaseRecord::with_opaque_to(&record.topic, opaque).headers(headers);
                if let Some(key) = record.key.as_deref() {
                    base = base.key(key);
                }
                if let Some(value) = record.value.as_deref() {
                    base = base.payload(value);
                }
                if let Some(p) = record.partition {
                    base = base.partition(p);
                }
                if let Some(ts) = record.timestamp_ms {
                    base = base.timestamp(ts);
                }
                loop {
                    match self.producer.send(base) {
                        Ok(()) => break,
                        Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                            base = back;
                            // Backpressure: wait for deliveries to make room.
                            let _ = tokio::time::timeout(
                                Duration::from_millis(10),
                                ctx.wake.notified(),
                            )
                            .await;
                            if let Some(err) = self.take_failure() {
                                return Err(err);
                            }
                        }
                        Err((source, _)) => {
                            return Err(SinkError::Produce {
                                lsn: event.meta.lsn,
                                topic: record.topic.to_string(),
                                source,
                            })
                        }
                    }
                }
            }
            for (topic, n) in per_topic.drain(..) {
                metrics()
                    .events
                    .get_or_create(&TopicLabel {
                        topic: topic.to_string(),
                    })
                    .inc_by(n);
            }
        }
        match self.take_failure() {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }
}
