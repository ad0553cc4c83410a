//! Progress records of exactly-once mode: what a pipeline has committed to
//! Kafka, written inside each Kafka transaction to a compacted topic and
//! read back (read_committed) when walrelay starts.
//!
//! Owns the record's format (a Kafka Connect offsets-topic shape: the key
//! is the JSON array `["<pipeline>",{"walrelay":"progress"}]`, the value a
//! JSON object, so the record can share Connect's `offsets.storage.topic`)
//! and the reader. It never produces: the transactional sink does
//! ([`super::transactional`]).
//!
//! A position is either a transaction boundary (`events` 0: everything up
//! to the commit end LSN `lsn` is in Kafka) or inside one split large
//! transaction (`events` > 0: that many of the events of the transaction
//! whose commit record is at `commit_lsn` are in Kafka too; `lsn` is then
//! the end of the last whole transaction before it).

use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::{Message, Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use walrelay_proto::Lsn;

/// Version of the value format.
const FORMAT: u32 = 1;

/// What a pipeline's progress record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Progress {
    /// The pipeline (the key).
    pub(crate) pipeline: String,
    /// PostgreSQL's system identifier.
    pub(crate) system_id: String,
    /// The timeline of the server walrelay read from.
    pub(crate) timeline: u32,
    /// The replication slot.
    pub(crate) slot: String,
    /// Commit end LSN of the last whole source transaction in Kafka.
    pub(crate) lsn: Lsn,
    /// The split transaction's commit record LSN, when `events` > 0.
    pub(crate) commit_lsn: Lsn,
    /// Events of the split transaction already in Kafka; 0 at a boundary.
    pub(crate) events: u64,
    /// Where the pipeline stands.
    pub(crate) phase: Phase,
    /// Rows the initial snapshot delivered (in the record that ends it).
    pub(crate) snapshot_rows: Option<u64>,
    /// When the record was written, Unix ms.
    pub(crate) ts_ms: i64,
}

/// The phase a progress record names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Phase {
    /// An initial snapshot began and has not been committed: its slot (if
    /// any) must be dropped and the snapshot done again.
    Snapshot,
    /// Streaming: the position is meaningful.
    Stream,
}

/// The value's JSON shape.
#[derive(Serialize, Deserialize)]
struct Wire {
    format: u32,
    pipeline: String,
    system_id: String,
    timeline: u32,
    slot: String,
    lsn: String,
    lsn_bytes: u64,
    commit_lsn: String,
    events: u64,
    phase: Phase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    snapshot_rows: Option<u64>,
    ts_ms: i64,
}

/// Errors reading progress.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProgressError {
    /// The consumer could not be created or assigned.
    #[error("cannot read the progress topic {topic}")]
    Consumer {
        topic: String,
        /// librdkafka's error.
        #[source]
        source: KafkaError,
    },
    /// Reading did not reach the end of the topic in time (an open
    /// transaction of another producer holds it, or the brokers are away).
    #[error("reading the progress topic {topic} did not reach its end within {timeout:?}")]
    Timeout {
        topic: String,
        /// The bound.
        timeout: Duration,
    },
    /// A record under this pipeline's key does not parse.
    #[error("the progress record of pipeline {pipeline} in {topic} (partition {partition}, offset {offset}) is not walrelay's: {reason}")]
    Malformed {
        pipeline: String,
        topic: String,
        partition: i32,
        offset: i64,
        /// What is wrong.
        reason: String,
    },
}

impl Progress {
    /// The key of `pipeline`'s records.
    pub(crate) fn key_for(pipeline: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!([pipeline, {"walrelay": "progress"}]))
            .expect("a JSON array of strings serialises")
    }

    /// This record's key.
    pub(crate) fn key(&self) -> Vec<u8> {
        Self::key_for(&self.pipeline)
    }

    /// The value bytes.
    pub(crate) fn value(&self) -> Vec<u8> {
        serde_json::to_vec(&Wire {
            format: FORMAT,
            pipeline: self.pipeline.clone(),
            system_id: self.system_id.clone(),
            timeline: self.timeline,
            slot: self.slot.clone(),
            lsn: self.lsn.to_string(),
            lsn_bytes: self.lsn.0,
            commit_lsn: self.commit_lsn.to_string(),
            events: self.events,
            phase: self.phase,
            snapshot_rows: self.snapshot_rows,
            ts_ms: self.ts_ms,
        })
        .expect("the progress record serialises")
    }

    /// Parses a value; the error says what is wrong.
    pub(crate) fn parse(value: &[u8]) -> Result<Progress, String> {
        let w: Wire = serde_json::from_slice(value).map_err(|e| e.to_string())?;
        if w.format != FORMAT {
            return Err(format!(
                "format {} (this walrelay writes {FORMAT})",
                w.format
            ));
        }
        let lsn: Lsn = w.lsn.parse().map_err(|_| format!("lsn {:?}", w.lsn))?;
        let commit_lsn: Lsn = w
            .commit_lsn
            .parse()
            .map_err(|_| format!("commit_lsn {:?}", w.commit_lsn))?;
        Ok(Progress {
            pipeline: w.pipeline,
            system_id: w.system_id,
            timeline: w.timeline,
            slot: w.slot,
            lsn,
            commit_lsn,
            events: w.events,
            phase: w.phase,
            snapshot_rows: w.snapshot_rows,
            ts_ms: w.ts_ms,
        })
    }

    /// Where the stream must start so that nothing after this record is
    /// missed: the split transaction's commit record, else the end of the
    /// last whole transaction.
    pub(crate) fn resume_lsn(&self) -> Lsn {
        if self.events > 0 {
            self.commit_lsn
        } else {
            self.lsn
        }
    }

    /// Whether the event that is number `index` (from 0) of the source
    /// transaction whose commit record is at `commit_lsn` is already in
    /// Kafka according to this record.
    pub(crate) fn covers(&self, commit_lsn: Lsn, index: u64) -> bool {
        if self.events > 0 && commit_lsn == self.commit_lsn {
            return index < self.events;
        }
        // A transaction whose commit record begins before the end of the
        // last whole one is that one or an earlier one.
        commit_lsn < self.lsn
    }
}

/// Consumer properties taken over from the producer's: how to reach and
/// authenticate to the brokers, nothing about producing.
fn is_connection_property(key: &str) -> bool {
    key == "bootstrap.servers"
        || key == "client.id"
        || key == "broker.address.family"
        || key.starts_with("security.")
        || key.starts_with("sasl.")
        || key.starts_with("ssl.")
        || key.starts_with("ssl_")
        || key.starts_with("socket.")
        || key.starts_with("reconnect.")
        || key.starts_with("api.version")
        || key.starts_with("broker.version")
}

/// A read_committed consumer for the progress topic, with the producer's
/// connection settings.
fn consumer(producer: &ClientConfig, topic: &str) -> Result<BaseConsumer, ProgressError> {
    let mut cc = ClientConfig::new();
    for (k, v) in producer.config_map() {
        if is_connection_property(k) {
            cc.set(k, v);
        }
    }
    cc.set("group.id", "walrelay-progress-reader")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "false");
    cc.create().map_err(|source| ProgressError::Consumer {
        topic: topic.to_owned(),
        source,
    })
}

/// The last committed progress record of `pipeline` in `topic` (blocking;
/// call from a blocking thread). `None` when the topic holds none. Reads
/// every partition from the start to its end as it stands when reading
/// begins; a transaction still open there (another pipeline's, or a zombie
/// walrelay's not yet fenced) holds read_committed readers back until it
/// ends, bounded by `timeout`.
pub(crate) fn read_last(
    producer: &ClientConfig,
    topic: &str,
    pipeline: &str,
    timeout: Duration,
) -> Result<Option<Progress>, ProgressError> {
    let deadline = Instant::now() + timeout;
    let consumer = consumer(producer, topic)?;
    let err = |source| ProgressError::Consumer {
        topic: topic.to_owned(),
        source,
    };
    let metadata = consumer.fetch_metadata(Some(topic), timeout).map_err(err)?;
    let partitions: Vec<i32> = metadata
        .topics()
        .iter()
        .filter(|t| t.name() == topic && t.error().is_none())
        .flat_map(|t| {
            t.partitions()
                .iter()
                .map(rdkafka::metadata::MetadataPartition::id)
        })
        .collect();
    if partitions.is_empty() {
        return Ok(None);
    }
    let key = Progress::key_for(pipeline);
    let mut ends = Vec::new();
    let mut tpl = TopicPartitionList::new();
    for &p in &partitions {
        let (low, high) = consumer.fetch_watermarks(topic, p, timeout).map_err(err)?;
        if high > low {
            ends.push((p, high));
            tpl.add_partition_offset(topic, p, Offset::Beginning)
                .map_err(err)?;
        }
    }
    if ends.is_empty() {
        return Ok(None);
    }
    consumer.assign(&tpl).map_err(err)?;
    // The latest record by partition order: one pipeline's key always
    // lands on one partition, so its records are in order there.
    let mut last: Option<(i32, i64, Vec<u8>)> = None;
    loop {
        // Done once every partition's position reached its end (aborted
        // records and transaction markers are skipped, so positions jump).
        let position = consumer.position().map_err(err)?;
        let done = ends.iter().all(|&(p, high)| {
            matches!(
                position.find_partition(topic, p).map(|e| e.offset()),
                Some(Offset::Offset(o)) if o >= high
            )
        });
        if done {
            break;
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(ProgressError::Timeout {
                topic: topic.to_owned(),
                timeout,
            });
        }
        match consumer.poll((deadline - now).min(Duration::from_millis(200))) {
            Some(Ok(m)) if m.key() == Some(key.as_slice()) => {
                // A tombstone resets the pipeline's progress.
                last = m.payload().map(|v| (m.partition(), m.offset(), v.to_vec()));
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(err(e)),
            None => {}
        }
    }
    match last {
        None => Ok(None),
        Some((partition, offset, value)) => {
            Progress::parse(&value)
                .map(Some)
                .map_err(|reason| ProgressError::Malformed {
                    pipeline: pipeline.to_owned(),
                    topic: topic.to_owned(),
                    partition,
                    offset,
                    reason,
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(events: u64) -> Progress {
        Progress {
            pipeline: "orders".into(),
            system_id: "7312345678901234567".into(),
            timeline: 2,
            slot: "walrelay".into(),
            lsn: Lsn(0x1000),
            commit_lsn: if events > 0 { Lsn(0x2000) } else { Lsn::ZERO },
            events,
            phase: Phase::Stream,
            snapshot_rows: None,
            ts_ms: 1,
        }
    }

    #[test]
    fn the_record_round_trips_and_the_key_is_connect_shaped() {
        let p = record(7);
        assert_eq!(Progress::parse(&p.value()).unwrap(), p);
        assert_eq!(p.key(), br#"["orders",{"walrelay":"progress"}]"#.to_vec());
        let v: serde_json::Value = serde_json::from_slice(&p.value()).unwrap();
        assert_eq!(v["lsn"], "0/1000");
        assert_eq!(v["commit_lsn"], "0/2000");
        assert_eq!(v["slot"], "walrelay");
        assert!(Progress::parse(b"{}").is_err());
        assert!(Progress::parse(br#"{"format":2}"#).is_err());
    }

    #[test]
    fn coverage_at_a_boundary_and_inside_a_split_transaction() {
        let at_boundary = record(0);
        assert_eq!(at_boundary.resume_lsn(), Lsn(0x1000));
        // The transaction ending at 0x1000 has its commit record before it.
        assert!(at_boundary.covers(Lsn(0xf00), 5));
        assert!(!at_boundary.covers(Lsn(0x1000), 0));
        assert!(!at_boundary.covers(Lsn(0x1800), 0));
        let inside = record(3);
        assert_eq!(inside.resume_lsn(), Lsn(0x2000));
        assert!(inside.covers(Lsn(0x2000), 0));
        assert!(inside.covers(Lsn(0x2000), 2));
        assert!(!inside.covers(Lsn(0x2000), 3));
        assert!(inside.covers(Lsn(0xf00), 0));
        assert!(!inside.covers(Lsn(0x3000), 0));
    }

    #[test]
    fn the_consumer_takes_only_connection_properties() {
        assert!(is_connection_property("sasl.password"));
        assert!(is_connection_property("security.protocol"));
        assert!(is_connection_property("ssl.ca.location"));
        assert!(!is_connection_property("linger.ms"));
        assert!(!is_connection_property("transactional.id"));
        assert!(!is_connection_property("enable.idempotence"));
    }
}
