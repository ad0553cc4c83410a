//! Debezium Server's Google Cloud Pub/Sub sink: the `debezium.sink.pubsub.*`
//! keys onto `[sink.pubsub]`. Every key of Debezium Server 3.6.1's sink is
//! honoured, noted or refused by name; what walrelay does differently is in
//! docs/debezium-server-sinks.md.

use super::{Keys, Notes};
use crate::config::ConfigError;
use crate::sink::pubsub::PubSubConfig;

/// Keys of the Java client's batching, flow control, retries, threads and
/// channel that walrelay has no use for, with why (noted when set).
const CLIENT_TUNING: &[(&str, &str)] = &[
    (
        "batch.delay.threshold.ms",
        "walrelay sends what its queue holds at once, up to 1,000 messages or 10 MB per request",
    ),
    (
        "batch.element.count.threshold",
        "walrelay sends what its queue holds at once, up to 1,000 messages or 10 MB per request",
    ),
    (
        "batch.request.byte.threshold",
        "walrelay sends what its queue holds at once, up to 1,000 messages or 10 MB per request",
    ),
    (
        "flowcontrol.enabled",
        "walrelay's queue is bounded (8,192 records, 32 MiB) and the source waits when it is full",
    ),
    (
        "flowcontrol.max.outstanding.messages",
        "walrelay's queue is bounded (8,192 records, 32 MiB) and the source waits when it is full",
    ),
    (
        "flowcontrol.max.outstanding.bytes",
        "walrelay's queue is bounded (8,192 records, 32 MiB) and the source waits when it is full",
    ),
    (
        "retry.max.rpc.timeout.ms",
        "the client's own per-attempt timeouts apply; walrelay retries until stored",
    ),
    (
        "retry.initial.delay.ms",
        "the client's own backoff applies; walrelay retries until stored",
    ),
    (
        "retry.delay.multiplier",
        "the client's own backoff applies; walrelay retries until stored",
    ),
    (
        "retry.max.delay.ms",
        "the client's own backoff applies; walrelay retries until stored",
    ),
    (
        "retry.initial.rpc.timeout.ms",
        "the client's own per-attempt timeouts apply; walrelay retries until stored",
    ),
    (
        "retry.rpc.timeout.multiplier",
        "the client's own per-attempt timeouts apply; walrelay retries until stored",
    ),
    (
        "wait.message.delivery.timeout.ms",
        "walrelay waits for every message until Pub/Sub stored it, holding the slot meanwhile",
    ),
    (
        "concurrency.threads",
        "walrelay's publisher is asynchronous, on the pipeline's runtime",
    ),
    (
        "compression.threshold.bytes",
        "walrelay's client sends requests uncompressed; the stored messages are the same",
    ),
    (
        "channel.shutdown.timeout.ms",
        "walrelay drains its queue for up to 10 s when stopping",
    ),
];

/// The pubsub sink's keys (without `debezium.sink.pubsub.`). 3.6.1
/// publishes each record to `projects/<project.id>/topics/<topic>`, the
/// value as data, every header an attribute, and, with `ordering.enabled`
/// (default true), `ordering.key` or the record key or `null.key`
/// (`default`) as the ordering key; `address` is an emulator (plain text,
/// no credentials), `region` a regional endpoint.
pub(super) fn pubsub(k: &mut Keys, notes: &mut Notes) -> Result<PubSubConfig, ConfigError> {
    let ordering = k.take_bool("ordering.enabled", true)?;
    let retry_total = k.take_u64("retry.total.timeout.ms")?;
    if retry_total == Some(0) {
        return Err(k.invalid("retry.total.timeout.ms", "must be above 0"));
    }
    for (key, why) in CLIENT_TUNING {
        if k.take(key).is_some() {
            notes.ignore(k.name(key), format!("ignored: {why}"));
        }
    }
    let config = PubSubConfig {
        project_id: k.take("project.id").filter(|p| !p.is_empty()),
        emulator_host: k.take("address").filter(|a| !a.is_empty()),
        region: k.take("region").filter(|r| !r.is_empty()),
        ordering: Some(ordering),
        ordering_key: k.take("ordering.key"),
        null_key: k.take("null.key"),
        request_timeout_ms: retry_total,
        ..PubSubConfig::default()
    };
    if config.emulator_host.is_some() && config.region.is_some() {
        notes.ignore(
            k.name("region"),
            "ignored: debezium.sink.pubsub.address (an emulator) is set, and wins as in Debezium Server",
        );
        return Ok(PubSubConfig {
            region: None,
            ..config
        });
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(pairs: &[(&str, &str)]) -> Keys {
        super::super::test_keys(pairs, "debezium.sink.pubsub.")
    }

    #[test]
    fn pubsub_keys_become_the_section() {
        let mut notes = Notes::default();
        let mut k = keys(&[
            ("project.id", "shop"),
            ("address", "127.0.0.1:8085"),
            ("ordering.enabled", "true"),
            ("null.key", "none"),
            ("batch.element.count.threshold", "10"),
            ("retry.total.timeout.ms", "5000"),
        ]);
        let c = pubsub(&mut k, &mut notes).unwrap();
        assert!(k.drain().is_empty());
        assert_eq!(c.project_id.as_deref(), Some("shop"));
        assert_eq!(c.emulator_host.as_deref(), Some("127.0.0.1:8085"));
        assert_eq!(c.null_key.as_deref(), Some("none"));
        assert_eq!(c.request_timeout_ms, Some(5000));
        assert_eq!(
            notes.into_vec()[0].key,
            "debezium.sink.pubsub.batch.element.count.threshold"
        );
        let err = pubsub(
            &mut keys(&[("ordering.enabled", "maybe")]),
            &mut Notes::default(),
        )
        .unwrap_err();
        assert!(err
            .to_string()
            .contains("debezium.sink.pubsub.ordering.enabled"));
    }
}
