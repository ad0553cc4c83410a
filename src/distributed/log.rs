//! A compacted Kafka topic read as a log of keyed records, as Connect's
//! `KafkaBasedLog`: every worker reads the whole topic from its beginning,
//! applies each record to its in-memory state in order, and can wait until
//! it has read everything written before a point ("read to end"); writes
//! go through an idempotent producer with `acks=all` and Java's partitioner
//! (murmur2), so that a key lands on the partition Connect's workers would
//! choose.
//!
//! Owns the consumer task and the read-to-end barrier; what a record means
//! is the [`Apply`] implementation's.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use tokio::sync::watch;
use tracing::{debug, warn};

/// How long a write or a read to the end may take (Connect's
/// `READ_WRITE_TOTAL_TIMEOUT_MS` is 30 s).
pub(crate) const READ_WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// An error of a storage topic.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LogError {
    /// A Kafka client failed.
    #[error("storage topic {topic}: {source}")]
    Kafka {
        /// The topic.
        topic: String,
        /// librdkafka's error.
        #[source]
        source: KafkaError,
    },
    /// The topic has no partition (it does not exist).
    #[error("storage topic {topic} has no partitions (does it exist?)")]
    NoPartitions {
        /// The topic.
        topic: String,
    },
    /// A write or read did not finish in time.
    #[error("storage topic {topic}: timed out after {timeout:?} while {what}")]
    Timeout {
        /// The topic.
        topic: String,
        /// What was waited for.
        what: &'static str,
        /// How long.
        timeout: Duration,
    },
    /// The consumer task ended.
    #[error("storage topic {topic}: its reader stopped")]
    ReaderGone {
        /// The topic.
        topic: String,
    },
}

/// What a log's records do to a state.
pub(crate) trait Apply: Send + 'static {
    /// Applies one record (`value` `None`: a tombstone).
    fn apply(&mut self, key: &str, value: Option<&[u8]>, partition: i32, offset: i64);
}

/// A storage topic being read into a state `A`.
pub(crate) struct KafkaLog<A> {
    topic: String,
    partitions: i32,
    producer: FutureProducer,
    consumer: Arc<StreamConsumer>,
    /// The next offset to read, per partition, as the reader has applied.
    read: watch::Receiver<Vec<i64>>,
    state: Arc<Mutex<A>>,
}

impl<A: Apply> KafkaLog<A> {
    /// Starts reading `topic` from its beginning into `state`; the clients
    /// take `clients` (bootstrap and security). The reader stops when
    /// `shutdown` turns true.
    pub(crate) async fn start(
        clients: &ClientConfig,
        topic: &str,
        state: A,
        shutdown: watch::Receiver<bool>,
    ) -> Result<Self, LogError> {
        let err = |source| LogError::Kafka {
            topic: topic.to_owned(),
            source,
        };
        let mut pc = clients.clone();
        pc.set("acks", "all")
            .set("enable.idempotence", "true")
            .set("partitioner", "murmur2_random")
            .set("linger.ms", "0");
        let producer: FutureProducer = pc.create().map_err(err)?;
        let mut cc = clients.clone();
        cc.set("group.id", "walrelay-storage-reader")
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("isolation.level", "read_committed")
            .set("fetch.wait.max.ms", "50");
        let consumer: Arc<StreamConsumer> = Arc::new(cc.create().map_err(err)?);
        let partitions = partition_count(&consumer, topic).await?;
        let mut list = TopicPartitionList::new();
        for p in 0..partitions {
            list.add_partition_offset(topic, p, Offset::Beginning)
                .map_err(err)?;
        }
        consumer.assign(&list).map_err(err)?;
        let (read_tx, read) = watch::channel(vec![0; partitions as usize]);
        let state = Arc::new(Mutex::new(state));
        tokio::spawn(read_loop(
            Arc::clone(&consumer),
            Arc::clone(&state),
            read_tx,
            shutdown,
        ));
        Ok(KafkaLog {
            topic: topic.to_owned(),
            partitions,
            producer,
            consumer,
            read,
            state,
        })
    }

    /// The topic's partitions.
    pub(crate) fn partitions(&self) -> i32 {
        self.partitions
    }

    /// The state, as read so far.
    pub(crate) fn state(&self) -> &Arc<Mutex<A>> {
        &self.state
    }

    /// Writes one record (`None`: a tombstone) and returns its partition
    /// and offset once the brokers have it.
    pub(crate) async fn send(
        &self,
        key: &str,
        value: Option<&[u8]>,
    ) -> Result<(i32, i64), LogError> {
        let mut record: FutureRecord<'_, str, [u8]> = FutureRecord::to(&self.topic).key(key);
        if let Some(v) = value {
            record = record.payload(v);
        }
        match self.producer.send(record, READ_WRITE_TIMEOUT).await {
            Ok(delivered) => Ok(delivered),
            Err((source, _)) => Err(LogError::Kafka {
                topic: self.topic.clone(),
                source,
            }),
        }
    }

    /// Writes records in order, then waits until this worker has read them.
    pub(crate) async fn send_and_read(
        &self,
        records: &[(String, Option<Vec<u8>>)],
    ) -> Result<(), LogError> {
        let mut last = Vec::new();
        for (key, value) in records {
            last.push(self.send(key, value.as_deref()).await?);
        }
        self.wait_read(&last, "reading back its own write").await
    }

    /// Waits until this worker has read everything written to the topic
    /// before the call. The end offsets are asked again while the brokers
    /// answer with a transient error (a topic just created has no leaders
    /// for a moment, a broker restarting has none for longer).
    pub(crate) async fn read_to_end(&self) -> Result<(), LogError> {
        let deadline = tokio::time::Instant::now() + READ_WRITE_TIMEOUT;
        let ends = loop {
            let consumer = Arc::clone(&self.consumer);
            let topic = self.topic.clone();
            let partitions = self.partitions;
            let fetched = tokio::task::spawn_blocking(move || {
                (0..partitions)
                    .map(|p| {
                        consumer
                            .fetch_watermarks(&topic, p, Duration::from_secs(5))
                            .map(|(_, high)| (p, high - 1))
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .await
            .map_err(|_| LogError::ReaderGone {
                topic: self.topic.clone(),
            })?;
            match fetched {
                Ok(ends) => break ends,
                Err(source) if tokio::time::Instant::now() >= deadline => {
                    return Err(LogError::Kafka {
                        topic: self.topic.clone(),
                        source,
                    })
                }
                Err(e) => {
                    debug!(topic = %self.topic, error = %e, "end offsets: retrying");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        };
        self.wait_read(&ends, "reading to its end").await
    }

    /// Waits until the reader has passed each `(partition, offset)`.
    async fn wait_read(&self, points: &[(i32, i64)], what: &'static str) -> Result<(), LogError> {
        let mut read = self.read.clone();
        let done = |next: &Vec<i64>| {
            points
                .iter()
                .all(|&(p, o)| o < 0 || next.get(p as usize).is_some_and(|n| *n > o))
        };
        let waited = tokio::time::timeout(READ_WRITE_TIMEOUT, async {
            read.wait_for(done).await.map(|_| ())
        })
        .await;
        match waited {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(LogError::ReaderGone {
                topic: self.topic.clone(),
            }),
            Err(_) => Err(LogError::Timeout {
                topic: self.topic.clone(),
                what,
                timeout: READ_WRITE_TIMEOUT,
            }),
        }
    }

    /// A receiver that changes whenever the reader applied records.
    pub(crate) fn changes(&self) -> watch::Receiver<Vec<i64>> {
        self.read.clone()
    }
}

/// The topic's partition count, from the brokers' metadata, once every
/// partition has a leader (a topic just created may not have them yet);
/// transient errors are retried for [`READ_WRITE_TIMEOUT`].
async fn partition_count(consumer: &Arc<StreamConsumer>, topic: &str) -> Result<i32, LogError> {
    let deadline = tokio::time::Instant::now() + READ_WRITE_TIMEOUT;
    loop {
        let c = Arc::clone(consumer);
        let t = topic.to_owned();
        let fetched = tokio::task::spawn_blocking(move || {
            c.fetch_metadata(Some(&t), Duration::from_secs(5))
                .map(|meta| {
                    meta.topics()
                        .iter()
                        .find(|m| m.name() == t)
                        .map(|m| {
                            let ready = m.error().is_none()
                                && m.partitions()
                                    .iter()
                                    .all(|p| p.error().is_none() && p.leader() >= 0);
                            (m.partitions().len(), ready)
                        })
                        .unwrap_or((0, false))
                })
        })
        .await
        .map_err(|_| LogError::ReaderGone {
            topic: topic.to_owned(),
        })?;
        match fetched {
            Ok((n, true)) if n > 0 => return Ok(n as i32),
            Ok(_) if tokio::time::Instant::now() >= deadline => {
                return Err(LogError::NoPartitions {
                    topic: topic.to_owned(),
                })
            }
            Err(source) if tokio::time::Instant::now() >= deadline => {
                return Err(LogError::Kafka {
                    topic: topic.to_owned(),
                    source,
                })
            }
            _ => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// Reads records into the state until shutdown; publishes the next offset
/// of each partition after applying.
async fn read_loop<A: Apply>(
    consumer: Arc<StreamConsumer>,
    state: Arc<Mutex<A>>,
    read: watch::Sender<Vec<i64>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut position = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            // Control records (transaction markers) are never delivered:
            // the consumer's position moves past them.
            _ = position.tick() => advance_to_position(&consumer, &read),
            msg = consumer.recv() => match msg {
                Ok(m) => {
                    let Some(Ok(key)) = m.key().map(std::str::from_utf8) else {
                        debug!(partition = m.partition(), offset = m.offset(), "storage record without a text key: skipped");
                        read.send_modify(|r| bump(r, m.partition(), m.offset() + 1));
                        continue;
                    };
                    state
                        .lock()
                        .expect("never poisoned")
                        .apply(key, m.payload(), m.partition(), m.offset());
                    read.send_modify(|r| bump(r, m.partition(), m.offset() + 1));
                }
                Err(e) => {
                    warn!(error = %e, "storage topic reader");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }
}

fn bump(next: &mut [i64], partition: i32, to: i64) {
    if let Some(n) = next.get_mut(partition as usize) {
        *n = (*n).max(to);
    }
}

/// Moves the read marks to the consumer's positions (past control
/// records, which are never delivered).
fn advance_to_position(consumer: &StreamConsumer, read: &watch::Sender<Vec<i64>>) {
    let Ok(list) = consumer.position() else {
        return;
    };
    let moved: Vec<(i32, i64)> = list
        .elements()
        .iter()
        .filter_map(|e| match e.offset() {
            Offset::Offset(o) => Some((e.partition(), o)),
            _ => None,
        })
        .filter(|(p, o)| read.borrow().get(*p as usize).is_some_and(|n| n < o))
        .collect();
    if !moved.is_empty() {
        read.send_modify(|r| {
            for (p, o) in moved {
                bump(r, p, o);
            }
        });
    }
}
