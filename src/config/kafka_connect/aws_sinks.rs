//! Debezium Server's Amazon sinks: the `debezium.sink.sqs.*` and
//! `debezium.sink.kinesis.*` keys onto `[sink.sqs]` and `[sink.kinesis]`. Every key of Debezium Server 3.6.1's sink is honoured or
//! refused by name; what walrelay does differently is in
//! docs/debezium-server-sinks.md.

use super::{Keys, Notes};
use crate::config::ConfigError;
use crate::sink::aws::kinesis::KinesisConfig;
use crate::sink::aws::sns::SnsConfig;
use crate::sink::aws::sqs::SqsConfig;
use crate::sink::aws::AwsCredentials;

/// `credentials.profile`: the profile the SDK reads from the shared
/// files; unset: the SDK's default chain (Debezium Server's too).
fn credentials(k: &mut Keys) -> Option<AwsCredentials> {
    k.take("credentials.profile")
        .filter(|p| !p.is_empty())
        .map(|profile| AwsCredentials {
            profile: Some(profile),
            ..AwsCredentials::default()
        })
}

/// The sqs sink's keys (without `debezium.sink.sqs.`). 3.6.1 sends every
/// record to `queue.url` with `SendMessage`, the value as the body; on a
/// FIFO queue with `fifo.message.group.id` (default `cdc-group`) as the
/// group and no deduplication id. walrelay keeps the queue and the body;
/// on a FIFO queue it groups by record key unless the file sets
/// `fifo.message.group.id`, and always sends the event id as the
/// deduplication id (noted at start).
pub(super) fn sqs(k: &mut Keys, notes: &mut Notes) -> Result<SqsConfig, ConfigError> {
    let queue_url = k.take_required("queue.url", "the SQS queue every record is sent to")?;
    let region = k.take("region").filter(|r| !r.is_empty());
    let endpoint = k.take("endpoint").filter(|e| !e.is_empty());
    let message_group_id = k.take("fifo.message.group.id").filter(|g| !g.is_empty());
    if queue_url.ends_with(".fifo") {
        let (group, hint) = if message_group_id.is_some() {
            (
                "every record in the one message group fifo.message.group.id names, as Debezium Server",
                "",
            )
        } else {
            (
                "each record in the message group of its key (Debezium Server puts all in cdc-group)",
                "; set fifo.message.group.id for one group",
            )
        };
        notes.ignore(
            k.name("queue.url"),
            format!(
                "a FIFO queue: walrelay sends {group}, and the event id as MessageDeduplicationId \
                 (Debezium Server sends none, which a queue without content-based deduplication \
                 refuses){hint}"
            ),
        );
    }
    // Checked with the rest of the configuration once translated.
    Ok(SqsConfig {
        region,
        endpoint,
        credentials: credentials(k),
        queue_url: Some(queue_url),
        message_group_id,
        ..SqsConfig::default()
    })
}

/// The kinesis sink's keys (without `debezium.sink.kinesis.`). 3.6.1
/// sends each destination's records to the stream of that name with
/// `PutRecords` (`batch.size` at a time, at most 500), the serialised key
/// as the partition key (`null.key` for a null one), and stops after
/// `default.retries` failed attempts; walrelay sends a record refused for
/// a passing reason again until it is stored (noted).
pub(super) fn kinesis(k: &mut Keys, notes: &mut Notes) -> Result<KinesisConfig, ConfigError> {
    let batch_size = match k.take_u64("batch.size")? {
        None => None,
        Some(n) if n == 0 || n > crate::sink::aws::kinesis::MAX_BATCH as u64 => {
            return Err(k.invalid("batch.size", "must be 1 to 500, as Debezium Server checks"))
        }
        Some(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
    };
    if k.take("default.retries").is_some() {
        notes.ignore(
            k.name("default.retries"),
            "ignored: walrelay sends a record Kinesis did not store for a passing reason \
             (throughput, an internal failure) again until it is stored, holding the slot \
             meanwhile, rather than stopping after so many attempts",
        );
    }
    Ok(KinesisConfig {
        region: k.take("region").filter(|r| !r.is_empty()),
        endpoint: k.take("endpoint").filter(|e| !e.is_empty()),
        credentials: credentials(k),
        batch_size,
        null_key: k.take("null.key"),
        ..KinesisConfig::default()
    })
}

/// The sns sink's keys (without `debezium.sink.sns.`). 3.6.1 publishes
/// with `PublishBatch` to the topic the destination names (an ARN, or
/// `topic.arn.prefix` and the name, or `topic.arn`), the value and the
/// headers as they are before the converters (see [`sns_converters`]),
/// on a FIFO topic the group from the `fifo.message.group.id.header`
/// header (default `aggregateId`), the key, or `fifo.default.group.id`,
/// and the deduplication id from `fifo.message.dedup.id.header` when set
/// (walrelay: else the event id, noted).
pub(super) fn sns(k: &mut Keys, notes: &mut Notes) -> Result<SnsConfig, ConfigError> {
    if k.take("default.retries").is_some() {
        notes.ignore(
            k.name("default.retries"),
            "ignored: walrelay sends an entry SNS did not take for a passing reason again until \
             it is taken, holding the slot meanwhile, rather than stopping after so many attempts",
        );
    }
    let dedup_id_header = k
        .take("fifo.message.dedup.id.header")
        .filter(|h| !h.is_empty());
    if dedup_id_header.is_none() {
        notes.ignore(
            k.name("fifo.message.dedup.id.header"),
            "unset: on a FIFO topic walrelay sends the event id as MessageDeduplicationId \
             (Debezium Server sends none, which a topic without content-based deduplication refuses)",
        );
    }
    Ok(SnsConfig {
        region: k.take("region").filter(|r| !r.is_empty()),
        endpoint: k.take("endpoint").filter(|e| !e.is_empty()),
        credentials: credentials(k),
        topic_arn: k.take("topic.arn").filter(|a| !a.is_empty()),
        topic_arn_prefix: k.take("topic.arn.prefix").filter(|a| !a.is_empty()),
        message_group_id_header: Some(
            k.take("fifo.message.group.id.header")
                .unwrap_or_else(|| "aggregateId".to_owned()),
        ),
        default_group_id: k.take("fifo.default.group.id"),
        dedup_id_header,
        ..SnsConfig::default()
    })
}

/// The converters that give the bytes Debezium Server's sns sink sends:
/// it takes a String value and every header from the record before the
/// converters (`toString()`), and the key too for a FIFO group. So the key
/// and the value go through the StringConverter (a String's own text) and
/// the headers through the SimpleHeaderConverter, unless the EventRouter
/// makes the value a struct (`table.expand.json.payload`, an envelope
/// placement), where the sink falls back to the converter's output.
pub(in crate::config) fn sns_converters(
    converters: &mut crate::connect::config::ConvertersConfig,
    router: &crate::router::RouterConfig,
    notes: &mut Notes,
) {
    use crate::connect::config::{ConverterKind, HeaderConverterKind};
    let envelope = router.placements().is_ok_and(|p| {
        p.iter()
            .any(|f| f.placement == crate::router::Placement::Envelope)
    });
    converters.key = ConverterKind::String;
    converters.header = HeaderConverterKind::Simple;
    if !(router.expand_json_payload || envelope) {
        converters.value = ConverterKind::String;
    }
    notes.ignore(
        "debezium.format.value",
        "the sns sink publishes a text value and the headers as they are before the \
         converters, as Debezium Server's does: the format applies only to a struct value",
    );
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn keys(pairs: &[(&str, &str)]) -> Keys {
        super::super::test_keys(pairs, "debezium.sink.sqs.")
    }

    #[test]
    fn sqs_keys_become_the_section() {
        let mut notes = Notes::default();
        let mut k = keys(&[
            (
                "queue.url",
                "http://127.0.0.1:5000/000000000000/orders.fifo",
            ),
            ("region", "eu-west-1"),
            ("endpoint", "http://127.0.0.1:5000"),
            ("credentials.profile", "prod"),
        ]);
        let c = sqs(&mut k, &mut notes).unwrap();
        assert!(k.drain().is_empty());
        assert_eq!(c.region.as_deref(), Some("eu-west-1"));
        assert_eq!(c.endpoint.as_deref(), Some("http://127.0.0.1:5000"));
        assert_eq!(c.credentials.unwrap().profile.as_deref(), Some("prod"));
        assert_eq!(c.message_group_id, None);
        let notes = notes.into_vec();
        assert_eq!(notes[0].key, "debezium.sink.sqs.queue.url");
        assert!(
            notes[0]
                .reason
                .ends_with("; set fifo.message.group.id for one group"),
            "{}",
            notes[0].reason
        );
        let err = sqs(&mut keys(&[("region", "eu-west-1")]), &mut Notes::default()).unwrap_err();
        assert!(err.to_string().contains("debezium.sink.sqs.queue.url"));
    }

    #[test]
    fn kinesis_keys_become_the_section() {
        let mut notes = Notes::default();
        let map: BTreeMap<String, String> = [
            ("region", "us-east-1"),
            ("batch.size", "100"),
            ("null.key", "none"),
            ("default.retries", "3"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        let mut k = Keys::new(map, "debezium.sink.kinesis.");
        let c = kinesis(&mut k, &mut notes).unwrap();
        assert!(k.drain().is_empty());
        assert_eq!(c.batch_size, Some(100));
        assert_eq!(c.null_key.as_deref(), Some("none"));
        assert_eq!(
            notes.into_vec()[0].key,
            "debezium.sink.kinesis.default.retries"
        );
        let map: BTreeMap<String, String> = [("batch.size".to_owned(), "501".to_owned())]
            .into_iter()
            .collect();
        let err = kinesis(
            &mut Keys::new(map, "debezium.sink.kinesis."),
            &mut Notes::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("debezium.sink.kinesis.batch.size"));
    }
}
