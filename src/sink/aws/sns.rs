//! Amazon SNS behind the broker seam (`sink.type = "sns"`), through the
//! AWS SDK's `PublishBatch`.
//!
//! What a message is, as Debezium Server 3.6.1's `sns` sink publishes it:
//! the message is the record's value as text and every header a String
//! message attribute. Debezium Server takes both from the record before
//! its converters (a String value as its text, headers by `toString()`);
//! the translation of `debezium.sink.sns.*` sets walrelay's converters so
//! that they give those bytes ([`crate::config`]'s sns rule). The topic is
//! the router's topic when it is an ARN, else `topic_arn_prefix` and the
//! topic, else the one `topic_arn`.
//!
//! FIFO topics (an ARN ending in `.fifo`): `MessageGroupId` is the value
//! of the header `message_group_id_header` names when the record has it
//! (Debezium Server's `aggregateId`), else the record key (each aggregate
//! keeps its order), else `default_group_id`; a group that is not a
//! valid id becomes `h-` and its SHA-256. `MessageDeduplicationId` is the
//! header `dedup_id_header` names when set and present (Debezium
//! Server's rule), else the event id, so SNS drops a record published
//! again within its five-minute window.
//!
//! Order, limits and failures as for SQS ([`super::sqs`]): a request never
//! holds two records of one message group on a FIFO topic, an entry SNS
//! did not take for a passing reason is sent again alone before the next
//! request; a message (text plus attributes) over 256 KiB, more than ten
//! attributes, a tombstone, or text SNS cannot carry is refused for
//! itself and `[errors]` decides. A dead letter is a JSON letter
//! ([`super::letter_body`]).

use std::fmt;
use std::path::PathBuf;

use aws_sdk_sns::error::ProvideErrorMetadata;
use aws_sdk_sns::types::{MessageAttributeValue, PublishBatchRequestEntry};
use aws_sdk_sns::Client;
use serde::Deserialize;

use super::{
    body_text, failed_entry, fifo_id, letter_body, refuse, request_outcome, request_prefix,
    string_attributes, AwsClient, AwsCredentials, BatchApi, Entry,
};
use crate::setting::SettingError;
use crate::sink::broker::{FailureClass, Guarantees};
use crate::sink::queued::{Outcome, Outgoing, Publisher};

/// Most entries in one `PublishBatch`.
const MAX_ENTRIES: usize = 10;
/// SNS's largest message, and largest `PublishBatch`.
pub(crate) const MAX_BYTES: usize = 256 * 1024;
/// The bound of a dead letter's key and value (JSON escaping may grow
/// them).
pub(crate) const LETTER_MAX_BYTES: usize = MAX_BYTES / 2;
/// Debezium Server's default `fifo.default.group.id`.
pub(crate) const DEBEZIUM_DEFAULT_GROUP: &str = "default";

/// `[sink.sns]`: Amazon SNS (`debezium.sink.sns.*`).
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SnsConfig {
    /// The AWS region (`region`); unset: the SDK's chain.
    #[serde(default)]
    pub(crate) region: Option<String>,
    /// Another endpoint than the region's (`endpoint`).
    #[serde(default)]
    pub(crate) endpoint: Option<String>,
    /// PEM certificates to trust besides the platform's.
    #[serde(default)]
    pub(crate) tls_ca_file: Option<PathBuf>,
    /// How requests are signed; unset: the SDK's default chain.
    #[serde(default)]
    pub(crate) credentials: Option<AwsCredentials>,
    /// How long one attempt of a request may take, ms (default 30000).
    #[serde(default)]
    pub(crate) request_timeout_ms: Option<u64>,
    /// The topic of a record whose topic is not an ARN, when there is no
    /// prefix (`topic.arn`).
    #[serde(default)]
    pub(crate) topic_arn: Option<String>,
    /// The topic's ARN is this and the router's topic (`topic.arn.prefix`).
    #[serde(default)]
    pub(crate) topic_arn_prefix: Option<String>,
    /// Where dead-letter records go; unset: the dead-letter topic resolved
    /// as any topic.
    #[serde(default)]
    pub(crate) dead_letter_topic_arn: Option<String>,
    /// FIFO: the header whose value is the message group, when present
    /// (`fifo.message.group.id.header`; Debezium Server's default
    /// `aggregateId`).
    #[serde(default)]
    pub(crate) message_group_id_header: Option<String>,
    /// FIFO: the group of a record with neither that header nor a key
    /// (`fifo.default.group.id`, default `default`).
    #[serde(default)]
    pub(crate) default_group_id: Option<String>,
    /// FIFO: the header whose value is the deduplication id, when present
    /// (`fifo.message.dedup.id.header`); otherwise the event id.
    #[serde(default)]
    pub(crate) dedup_id_header: Option<String>,
    /// Set by the pipeline: the dead-letter topic, whose records are JSON
    /// letters.
    #[serde(skip)]
    pub(crate) dead_letter_topic: Option<String>,
}

impl fmt::Debug for SnsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SnsConfig")
            .field("region", &self.region)
            .field("endpoint", &self.endpoint)
            .field("credentials", &self.credentials)
            .field("topic_arn", &self.topic_arn)
            .field("topic_arn_prefix", &self.topic_arn_prefix)
            .field("dead_letter_topic_arn", &self.dead_letter_topic_arn)
            .field("message_group_id_header", &self.message_group_id_header)
            .field("default_group_id", &self.default_group_id)
            .field("dedup_id_header", &self.dedup_id_header)
            .finish_non_exhaustive()
    }
}

impl SnsConfig {
    fn client(&self) -> AwsClient<'_> {
        AwsClient {
            section: "sink.sns",
            region: self.region.as_deref(),
            endpoint: self.endpoint.as_deref(),
            tls_ca_file: self.tls_ca_file.as_ref(),
            credentials: self.credentials.as_ref(),
            request_timeout_ms: self.request_timeout_ms,
        }
    }

    /// Checks the section; the error names the key.
    pub(crate) fn validate(&self) -> Result<(), SettingError> {
        self.client().validate()?;
        for (key, arn) in [
            ("sink.sns.topic_arn", &self.topic_arn),
            ("sink.sns.topic_arn_prefix", &self.topic_arn_prefix),
            (
                "sink.sns.dead_letter_topic_arn",
                &self.dead_letter_topic_arn,
            ),
        ] {
            if arn.as_deref().is_some_and(|a| !a.starts_with("arn:")) {
                return Err(SettingError::invalid(
                    key,
                    "must be a topic ARN (arn:aws:sns:<region>:<account>:<name>) or its beginning",
                ));
            }
        }
        if let Some(g) = &self.default_group_id {
            if fifo_id(g.as_bytes()) != *g {
                return Err(SettingError::invalid(
                    "sink.sns.default_group_id",
                    "must be 1 to 128 ASCII letters, digits or punctuation",
                ));
            }
        }
        Ok(())
    }

    /// The topic ARN of `destination`, Debezium Server's way; `None` when
    /// the topic is no ARN and neither key gives one.
    fn topic(&self, destination: &str) -> Option<String> {
        if let (Some(arn), Some(letters)) = (&self.dead_letter_topic_arn, &self.dead_letter_topic) {
            if letters == destination {
                return Some(arn.clone());
            }
        }
        if destination.starts_with("arn:") {
            return Some(destination.to_owned());
        }
        if let Some(prefix) = &self.topic_arn_prefix {
            return Some(format!("{prefix}{destination}"));
        }
        self.topic_arn.clone()
    }
}

/// What `walrelay check` reads (never writing): for each destination, its
/// topic's ARN and whether it exists (`GetTopicAttributes`).
pub(crate) async fn probe(
    config: &SnsConfig,
    destinations: &[String],
) -> Result<(String, Vec<(String, Result<String, String>)>), String> {
    let sns = <Sns as Publisher>::connect(config).await?;
    let mut found = Vec::with_capacity(destinations.len());
    for d in destinations {
        let answer = match config.topic(d) {
            None => Err(no_topic(d)),
            Some(arn) => match sns
                .client
                .get_topic_attributes()
                .topic_arn(&arn)
                .send()
                .await
            {
                Ok(_) => Ok(format!("topic {arn}")),
                Err(e) => Err(format!(
                    "{arn}: {}: {}",
                    e.code().unwrap_or("error"),
                    e.message().unwrap_or("")
                )),
            },
        };
        found.push((d.clone(), answer));
    }
    Ok((config.client().place("sns"), found))
}

fn no_topic(destination: &str) -> String {
    format!(
        "topic {destination:?} is not an ARN, and neither topic_arn_prefix nor topic_arn is set"
    )
}

/// A connected SNS publisher.
pub(crate) struct Sns {
    client: Client,
    config: SnsConfig,
}

impl Publisher for Sns {
    const NAME: &'static str = "sns";
    /// FIFO topics keep per-group order and drop a resent deduplication
    /// id within five minutes; standard topics neither.
    const GUARANTEES: Guarantees = Guarantees {
        idempotent: false,
        transactional: false,
        dedup_by_id: true,
        per_key_order: true,
    };
    const ERROR_CLASS: &'static str = "aws_sdk_sns::Error";
    type Config = SnsConfig;

    async fn connect(config: &SnsConfig) -> Result<Sns, String> {
        let sdk = config.client().sdk_config().await?;
        Ok(Sns {
            client: Client::new(&sdk),
            config: config.clone(),
        })
    }

    async fn publish(&mut self, batch: &[Outgoing]) -> Vec<Outcome> {
        super::publish_in_batches(self, batch).await
    }
}

impl Sns {
    fn is_dead_letter(&self, destination: &str) -> bool {
        self.config.dead_letter_topic.as_deref() == Some(destination)
    }

    /// The header `name`'s text, when the record has it.
    fn header<'a>(record: &'a Outgoing, name: Option<&str>) -> Option<&'a [u8]> {
        let name = name?;
        record
            .headers
            .iter()
            .rev()
            .find(|h| &*h.name == name)
            .and_then(|h| h.value.as_deref())
    }

    /// The record's message group on a FIFO topic.
    fn group(&self, record: &Outgoing) -> String {
        if let Some(v) = Self::header(record, self.config.message_group_id_header.as_deref()) {
            return fifo_id(v);
        }
        match &record.key {
            Some(key) => fifo_id(key),
            None => self
                .config
                .default_group_id
                .clone()
                .unwrap_or_else(|| DEBEZIUM_DEFAULT_GROUP.to_owned()),
        }
    }

    /// The deduplication id on a FIFO topic.
    fn dedup_id(&self, record: &Outgoing) -> String {
        if let Some(v) = Self::header(record, self.config.dedup_id_header.as_deref()) {
            return fifo_id(v);
        }
        super::sqs::dedup_id(record)
    }

    /// The batch entry of `record`, or why it is refused for itself.
    fn entry(
        &self,
        id: usize,
        record: &Outgoing,
        fifo: bool,
    ) -> Result<PublishBatchRequestEntry, Entry> {
        let letter;
        let dead_letter = self.is_dead_letter(&record.destination);
        let text = if dead_letter {
            letter = letter_body(record);
            letter.as_str()
        } else {
            body_text(record.value.as_ref()).map_err(|(kind, e)| refuse(kind, false, e))?
        };
        let mut entry = PublishBatchRequestEntry::builder()
            .id(id.to_string())
            .message(text);
        let mut size = text.len();
        if !dead_letter {
            let (attributes, bytes) = string_attributes(&record.headers, "SNS")?;
            size += bytes;
            for (name, value) in attributes {
                let value = MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value(value)
                    .build()
                    .map_err(|e| refuse("invalid_attribute", false, e.to_string()))?;
                entry = entry.message_attributes(name, value);
            }
        }
        if size > MAX_BYTES {
            return Err(refuse(
                "message_too_large",
                true,
                format!("{size} bytes of message and attributes, above SNS's {MAX_BYTES}"),
            ));
        }
        if fifo {
            entry = entry
                .message_group_id(self.group(record))
                .message_deduplication_id(self.dedup_id(record));
        }
        entry
            .build()
            .map_err(|e| refuse("invalid_message", false, e.to_string()))
    }
}

impl BatchApi for Sns {
    fn next_request(&self, pending: &[Outgoing]) -> usize {
        let first = &pending[0].destination;
        let same = pending
            .iter()
            .take_while(|r| &r.destination == first)
            .count();
        let fifo = self
            .config
            .topic(first)
            .is_some_and(|a| a.ends_with(".fifo"));
        request_prefix(
            &pending[..same],
            MAX_ENTRIES,
            MAX_BYTES,
            fifo,
            super::message_bytes,
            |r| self.group(r),
        )
    }

    async fn send(&mut self, entries: &[&Outgoing]) -> Result<Vec<Entry>, Outcome> {
        let destination = &entries[0].destination;
        let Some(arn) = self.config.topic(destination) else {
            let error = no_topic(destination);
            return Ok(entries
                .iter()
                .map(|_| refuse("unknown_topic", false, error.clone()))
                .collect());
        };
        let fifo = arn.ends_with(".fifo");
        let mut answers: Vec<Option<Entry>> = vec![None; entries.len()];
        let mut request = self.client.publish_batch().topic_arn(&arn);
        let mut any = false;
        for (i, record) in entries.iter().enumerate() {
            match self.entry(i, record, fifo) {
                Ok(entry) => {
                    request = request.publish_batch_request_entries(entry);
                    any = true;
                }
                Err(refused) => {
                    // Nothing after a refused entry is sent (see
                    // `BatchApi::send`).
                    answers[i] = Some(refused);
                    for later in &mut answers[i + 1..] {
                        *later = Some(Entry::Again("not sent after a refused entry".to_owned()));
                    }
                    break;
                }
            }
        }
        if any {
            let out = match request.send().await {
                Ok(out) => out,
                Err(e) => return whole_request(&e, e.code(), e.message(), &arn, entries.len()),
            };
            for ok in out.successful() {
                if let Some(slot) = ok
                    .id()
                    .and_then(|i| i.parse::<usize>().ok())
                    .and_then(|i| answers.get_mut(i))
                {
                    *slot = Some(Entry::Stored);
                }
            }
            for failed in out.failed() {
                if let Some(slot) = failed
                    .id()
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| answers.get_mut(i))
                {
                    *slot = Some(failed_entry(
                        failed.code(),
                        failed.message(),
                        failed.sender_fault(),
                    ));
                }
            }
        }
        Ok(answers
            .into_iter()
            .map(|a| a.unwrap_or_else(|| Entry::Again("SNS did not answer this entry".to_owned())))
            .collect())
    }
}

/// A failed `PublishBatch` as a whole: a topic that does not exist is the
/// records' own problem (as Kafka's unknown topic); the rest as
/// [`request_outcome`] sorts it.
fn whole_request<E, R>(
    err: &aws_smithy_runtime_api::client::result::SdkError<E, R>,
    code: Option<&str>,
    message: Option<&str>,
    arn: &str,
    n: usize,
) -> Result<Vec<Entry>, Outcome>
where
    E: std::error::Error + 'static,
    R: fmt::Debug + 'static,
{
    if code == Some("NotFound") || code == Some("NotFoundException") {
        let error = format!("no SNS topic {arn}: {}", message.unwrap_or(""));
        return Ok((0..n)
            .map(|_| refuse("unknown_topic", false, error.clone()))
            .collect());
    }
    match request_outcome(err, code, message) {
        // A request SNS refused as invalid that walrelay's checks let
        // through is about the records, not the service.
        Outcome::Failed {
            class: FailureClass::Broker,
            code: c,
            error,
        } if c.starts_with("invalidparameter") => Ok((0..n)
            .map(|_| refuse("rejected", false, error.clone()))
            .collect()),
        other => Err(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn record(key: Option<&str>, headers: &[(&str, &str)]) -> Outgoing {
        Outgoing {
            destination: Arc::from("outbox.event.orders"),
            key: key.map(|k| bytes::Bytes::copy_from_slice(k.as_bytes())),
            value: Some(bytes::Bytes::from_static(b"{}")),
            headers: headers
                .iter()
                .map(|(n, v)| crate::router::RecordHeader {
                    name: (*n).into(),
                    value: Some(bytes::Bytes::copy_from_slice(v.as_bytes())),
                })
                .collect(),
            dedup_id: Some("e-1".into()),
        }
    }

    #[test]
    fn topics_as_debezium_server_resolves_them() {
        let mut c = SnsConfig {
            topic_arn: Some("arn:aws:sns:us-east-1:1:all".into()),
            ..SnsConfig::default()
        };
        assert_eq!(c.topic("t").as_deref(), Some("arn:aws:sns:us-east-1:1:all"));
        assert_eq!(
            c.topic("arn:aws:sns:us-east-1:1:x").as_deref(),
            Some("arn:aws:sns:us-east-1:1:x")
        );
        c.topic_arn_prefix = Some("arn:aws:sns:us-east-1:1:".into());
        assert_eq!(c.topic("t").as_deref(), Some("arn:aws:sns:us-east-1:1:t"));
        assert_eq!(SnsConfig::default().topic("t"), None);
        let bad = SnsConfig {
            topic_arn: Some("topic".into()),
            ..SnsConfig::default()
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("sink.sns.topic_arn"));
    }

    #[tokio::test]
    async fn groups_from_the_header_the_key_or_the_default() {
        let config = SnsConfig {
            region: Some("us-east-1".into()),
            message_group_id_header: Some("aggregateId".into()),
            dedup_id_header: Some("id".into()),
            ..SnsConfig::default()
        };
        let sns = <Sns as Publisher>::connect(&config).await.unwrap();
        assert_eq!(
            sns.group(&record(Some("k"), &[("aggregateId", "a-1")])),
            "a-1"
        );
        assert_eq!(sns.group(&record(Some("k"), &[])), "k");
        assert_eq!(sns.group(&record(None, &[])), "default");
        assert_eq!(sns.dedup_id(&record(None, &[("id", "u-1")])), "u-1");
        assert_eq!(sns.dedup_id(&record(None, &[])), "e-1");
    }
}
