//! Per-topic batch limits: each topic's `max.message.bytes`, read with an
//! admin request the first time the sink meets the topic, and the producer
//! `batch.size` that keeps every batch under it.
//!
//! The broker applies `max.message.bytes` to a whole record batch, not to
//! one record. The Java producer splits a batch the broker refused as too
//! large and sends the halves again; librdkafka does not: every record of
//! the batch fails. A topic whose limit is below the producer's batch size
//! would then refuse ordinary small events whenever enough of them queue up
//! together. This module only finds limits and sizes; it never produces and
//! never applies an error policy.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::RDKafkaErrorCode;

/// librdkafka's default `batch.size`.
pub(crate) const DEFAULT_BATCH_SIZE: u64 = 1_000_000;

/// The topic setting that bounds a record batch.
const MAX_MESSAGE_BYTES: &str = "max.message.bytes";

/// Bound on one admin request.
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Bytes a record batch holding one record takes beyond the record's key,
/// value and header bytes: the batch header (61) plus the record's own
/// length, attribute, delta and count varints, with room to spare.
const ONE_RECORD_OVERHEAD: u64 = 128;

/// `topic`'s `max.message.bytes` as its broker reports it; `Ok(None)`
/// when the topic does not exist yet (it will get the broker's default,
/// which is not below librdkafka's default batch size unless an operator
/// lowered it). `cc` is the producer's configuration (same brokers and
/// security settings). The error text names what failed; it carries no
/// configuration values.
pub(crate) async fn topic_limit(cc: &ClientConfig, topic: &str) -> Result<Option<u64>, String> {
    // An admin client is a producer inside librdkafka: without this it
    // would ask the cluster for a producer id of its own.
    let mut cc = cc.clone();
    cc.set("enable.idempotence", "false");
    let admin: AdminClient<DefaultClientContext> = cc
        .create()
        .map_err(|e| format!("cannot create a kafka admin client: {e}"))?;
    let opts = AdminOptions::new().request_timeout(Some(DESCRIBE_TIMEOUT));
    let resource = ResourceSpecifier::Topic(topic);
    let answer = tokio::time::timeout(
        DESCRIBE_TIMEOUT + Duration::from_secs(1),
        admin.describe_configs([&resource], &opts),
    )
    .await;
    // Dropping an admin client joins librdkafka's threads: not on a
    // runtime thread.
    tokio::task::spawn_blocking(move || drop(admin));
    let results = match answer {
        Ok(Ok(results)) => results,
        Ok(Err(e)) => return Err(format!("describing topic {topic} failed: {e}")),
        Err(_) => return Err(format!("no answer within {DESCRIBE_TIMEOUT:?}")),
    };
    match results.into_iter().next() {
        Some(Ok(config)) => match config.get(MAX_MESSAGE_BYTES) {
            Some(entry) => match entry.value.as_deref().map(str::parse::<u64>) {
                Some(Ok(limit)) => Ok(Some(limit)),
                other => Err(format!("{MAX_MESSAGE_BYTES} of {topic} is {other:?}")),
            },
            None => Err(format!(
                "the broker did not report {MAX_MESSAGE_BYTES} of {topic}"
            )),
        },
        Some(Err(RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic)) => {
            Ok(None)
        }
        Some(Err(code)) => Err(format!("describing topic {topic} failed: {code}")),
        None => Err(format!("no configuration returned for {topic}")),
    }
}

/// The largest `batch.size` whose batches a topic with `limit` accepts:
/// room for the batch header, and for compression of input that does not
/// compress (LZ4 and zstd grow it by well under 1 %).
pub(crate) fn batch_size_for(limit: u64) -> u64 {
    limit
        .saturating_sub(limit / 100)
        .saturating_sub(ONE_RECORD_OVERHEAD)
        .max(1)
}

/// Whether a record with `bytes` of key, value and headers fits alone in a
/// batch under `limit` (uncompressed: a conservative answer).
pub(crate) fn fits_alone(bytes: usize, limit: u64) -> bool {
    (bytes as u64).saturating_add(ONE_RECORD_OVERHEAD) <= limit
}

/// The `batch.size` a producer configuration sets, or librdkafka's default.
pub(crate) fn configured_batch_size(value: Option<&str>) -> u64 {
    value
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(DEFAULT_BATCH_SIZE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_fit_the_limit_with_room() {
        // The broker's default limit leaves librdkafka's default as is.
        assert!(batch_size_for(1_048_588) >= DEFAULT_BATCH_SIZE);
        let b = batch_size_for(20_000);
        assert!(b < 20_000 && b > 19_000, "{b}");
        // A batch of that size, compressed at worst 1 % larger, plus its
        // header, is within the limit.
        assert!(b + b / 100 + 61 <= 20_000);
        assert_eq!(batch_size_for(10), 1);
    }

    #[test]
    fn one_record_fits_or_not() {
        assert!(fits_alone(1_000, 20_000));
        assert!(!fits_alone(19_950, 20_000));
    }

    #[test]
    fn configured_size_or_default() {
        assert_eq!(configured_batch_size(None), DEFAULT_BATCH_SIZE);
        assert_eq!(configured_batch_size(Some("16384")), 16_384);
        assert_eq!(configured_batch_size(Some("x")), DEFAULT_BATCH_SIZE);
    }
}
