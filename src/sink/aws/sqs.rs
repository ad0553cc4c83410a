//! Amazon SQS behind the broker seam (`sink.type = "sqs"`), through the
//! AWS SDK's `SendMessageBatch`.
//!
//! What a message is, as Debezium Server 3.6.1's `sqs` sink sends it: the
//! body is the record's value as text, and nothing else of the record goes
//! along (no key, no attributes) unless `message_attributes` asks for the
//! headers as String attributes. The queue is `queue_url` for every record
//! (Debezium Server's only form), else `queue_url_prefix` and the router's
//! topic, else the queue named by the topic (its URL asked once with
//! `GetQueueUrl`).
//!
//! FIFO queues (a URL ending in `.fifo`): `MessageGroupId` is the record
//! key, so each aggregate keeps its order and different aggregates go in
//! parallel (a key that is not a valid group id becomes `h-` and its
//! SHA-256; a null key `null_key_group`), or one fixed `message_group_id`
//! for all, as Debezium Server does (`cdc-group`). `MessageDeduplicationId`
//! is the event id: a record sent again within SQS's five-minute window
//! (a retry, or a restart after a crash that had sent it) is dropped by
//! SQS. Later than five minutes, or on a standard queue, a resent record
//! arrives twice (at least once).
//!
//! Order: a request never holds two records of one message group, and an
//! entry SQS did not store for a passing reason is sent again alone before
//! the next request ([`super::publish_in_batches`]): so a group's records
//! are stored in the order sent. A standard queue keeps no order anyway.
//!
//! Limits, checked before sending: the body must be UTF-8 text of the
//! characters SQS accepts and not empty (a tombstone has none), and body
//! plus attributes at most `max_message_bytes` (256 KiB by default;
//! SQS takes up to 1 MiB where raised): such a record is refused for
//! itself, so `[errors]` decides (stop, or the dead-letter queue). A
//! dead letter is a JSON object (the record's key and value, and the
//! context headers by name), bounded by SQS's 1 MiB only: see
//! [`letter_body`].

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use aws_sdk_sqs::error::ProvideErrorMetadata;
use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};
use aws_sdk_sqs::Client;
use serde::Deserialize;

use super::{
    body_text, failed_entry, fifo_id, letter_body, refuse, request_outcome, request_prefix,
    string_attributes, AwsClient, AwsCredentials, BatchApi, Entry,
};
use crate::setting::SettingError;
use crate::sink::broker::{FailureClass, Guarantees};
use crate::sink::queued::{Outcome, Outgoing, Publisher};

/// SQS's limits on one `SendMessageBatch`.
const MAX_ENTRIES: usize = 10;
/// The default of `max_message_bytes`: SQS's long-standing limit, also on
/// a whole batch.
pub(crate) const DEFAULT_MAX_BYTES: usize = 256 * 1024;
/// What SQS takes at most, where the queue allows it.
const HARD_MAX_BYTES: usize = 1024 * 1024;
/// The bound of a dead letter's key and value (JSON escaping may grow
/// them; the letter's body stays under SQS's own limit).
pub(crate) const LETTER_MAX_BYTES: usize = HARD_MAX_BYTES / 2;
/// Debezium Server's default `fifo.message.group.id`.
pub(crate) const DEBEZIUM_GROUP: &str = "cdc-group";

/// `[sink.sqs]`: Amazon SQS (`debezium.sink.sqs.*`).
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SqsConfig {
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
    /// Every record to this queue (`queue.url`).
    #[serde(default)]
    pub(crate) queue_url: Option<String>,
    /// The queue's URL is this and the router's topic.
    #[serde(default)]
    pub(crate) queue_url_prefix: Option<String>,
    /// Where dead-letter records go; unset: the queue named by the
    /// dead-letter topic (as any topic).
    #[serde(default)]
    pub(crate) dead_letter_queue_url: Option<String>,
    /// FIFO: one message group for every record (`fifo.message.group.id`);
    /// unset: the record key.
    #[serde(default)]
    pub(crate) message_group_id: Option<String>,
    /// FIFO: the group of a record with a null key (default `cdc-group`).
    #[serde(default)]
    pub(crate) null_key_group: Option<String>,
    /// Send the record's headers as String message attributes.
    #[serde(default)]
    pub(crate) message_attributes: bool,
    /// Largest message (body plus attributes), bytes; also bounds a batch.
    #[serde(default)]
    pub(crate) max_message_bytes: Option<usize>,
    /// Set by the pipeline: the dead-letter topic, routed to
    /// `dead_letter_queue_url`.
    #[serde(skip)]
    pub(crate) dead_letter_topic: Option<String>,
}

impl fmt::Debug for SqsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqsConfig")
            .field("region", &self.region)
            .field("endpoint", &self.endpoint)
            .field("credentials", &self.credentials)
            .field("queue_url", &self.queue_url)
            .field("queue_url_prefix", &self.queue_url_prefix)
            .field("dead_letter_queue_url", &self.dead_letter_queue_url)
            .field("message_group_id", &self.message_group_id)
            .field("message_attributes", &self.message_attributes)
            .field("max_message_bytes", &self.max_message_bytes)
            .finish_non_exhaustive()
    }
}

impl SqsConfig {
    fn client(&self) -> AwsClient<'_> {
        AwsClient {
            section: "sink.sqs",
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
        if self.queue_url.is_some() && self.queue_url_prefix.is_some() {
            return Err(SettingError::invalid(
                "sink.sqs.queue_url_prefix",
                "give queue_url (one queue) or queue_url_prefix (a queue per topic), not both",
            ));
        }
        for (key, url) in [
            ("sink.sqs.queue_url", &self.queue_url),
            ("sink.sqs.queue_url_prefix", &self.queue_url_prefix),
            (
                "sink.sqs.dead_letter_queue_url",
                &self.dead_letter_queue_url,
            ),
        ] {
            if let Some(url) = url {
                if !(url.starts_with("https://") || url.starts_with("http://")) {
                    return Err(SettingError::invalid(key, format!("{url:?}: must be a queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>)")));
                }
            }
        }
        for (key, id) in [
            ("sink.sqs.message_group_id", &self.message_group_id),
            ("sink.sqs.null_key_group", &self.null_key_group),
        ] {
            if id.as_deref().is_some_and(|g| fifo_id(g.as_bytes()) != g) {
                return Err(SettingError::invalid(
                    key,
                    "must be 1 to 128 ASCII letters, digits or punctuation",
                ));
            }
        }
        match self.max_message_bytes {
            Some(n) if n == 0 || n > HARD_MAX_BYTES => Err(SettingError::invalid(
                "sink.sqs.max_message_bytes",
                format!("{n}: must be 1 to {HARD_MAX_BYTES} (SQS's largest message)"),
            )),
            _ => Ok(()),
        }
    }

    /// The largest message, bytes.
    pub(crate) fn max_bytes(&self) -> usize {
        self.max_message_bytes.unwrap_or(DEFAULT_MAX_BYTES)
    }
}

/// What `walrelay check` reads (never writing): for each destination the
/// router will use, its queue's URL and kind (`GetQueueUrl`,
/// `GetQueueAttributes`), or why there is none. An error of the first
/// call (credentials, the endpoint) is the connection's.
pub(crate) async fn probe(
    config: &SqsConfig,
    destinations: &[String],
) -> Result<(String, Vec<(String, Result<String, String>)>), String> {
    let mut sqs = <Sqs as Publisher>::connect(config).await?;
    let mut found = Vec::with_capacity(destinations.len());
    for d in destinations {
        let answer = match sqs.queue_url(&Arc::from(d.as_str())).await {
            Ok(url) => sqs
                .queue_kind(&url)
                .await
                .map(|kind| format!("{kind} queue {url}")),
            Err((_, e)) => Err(e),
        };
        found.push((d.clone(), answer));
    }
    Ok((config.client().place("sqs"), found))
}

/// A connected SQS publisher.
pub(crate) struct Sqs {
    client: Client,
    config: SqsConfig,
    /// Queue URL of each destination, asked once.
    urls: HashMap<Arc<str>, String>,
}

impl Publisher for Sqs {
    const NAME: &'static str = "sqs";
    /// FIFO queues keep per-group order and drop a resent event id within
    /// five minutes; standard queues neither. The queue's kind is known
    /// only from its URL or attributes, so these are a FIFO queue's; no
    /// configuration key asks for order or deduplication today, and
    /// `walrelay check` shows each queue's kind.
    const GUARANTEES: Guarantees = Guarantees {
        idempotent: false,
        transactional: false,
        dedup_by_id: true,
        per_key_order: true,
    };
    const ERROR_CLASS: &'static str = "aws_sdk_sqs::Error";
    type Config = SqsConfig;

    async fn connect(config: &SqsConfig) -> Result<Sqs, String> {
        let sdk = config.client().sdk_config().await?;
        Ok(Sqs {
            client: Client::new(&sdk),
            config: config.clone(),
            urls: HashMap::new(),
        })
    }

    async fn publish(&mut self, batch: &[Outgoing]) -> Vec<Outcome> {
        super::publish_in_batches(self, batch).await
    }
}

impl Sqs {
    /// The queue URL of `destination`, or why there is none (the record is
    /// refused for itself, or the request retried).
    async fn queue_url(&mut self, destination: &Arc<str>) -> Result<String, (bool, String)> {
        if let Some(url) = self.urls.get(destination) {
            return Ok(url.clone());
        }
        let dead_letter = self.is_dead_letter(destination);
        let fixed = match (&self.config.dead_letter_queue_url, &self.config.queue_url) {
            (Some(url), _) if dead_letter => Some(url.clone()),
            (_, Some(url)) if !dead_letter => Some(url.clone()),
            _ => self
                .config
                .queue_url_prefix
                .as_ref()
                .map(|p| format!("{p}{destination}")),
        };
        let url = match fixed {
            Some(url) => url,
            None => self.ask_url(destination).await?,
        };
        self.urls.insert(Arc::clone(destination), url.clone());
        Ok(url)
    }

    /// `FIFO` or `standard`, from the queue's attributes.
    async fn queue_kind(&self, url: &str) -> Result<&'static str, String> {
        use aws_sdk_sqs::types::QueueAttributeName;
        let out = self
            .client
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::FifoQueue)
            .send()
            .await
            .map_err(|e| {
                format!(
                    "{url}: {}: {}",
                    e.code().unwrap_or("error"),
                    e.message()
                        .map_or_else(|| crate::chain::DisplayChain(&e).to_string(), str::to_owned)
                )
            })?;
        let fifo = out
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::FifoQueue))
            .is_some_and(|v| v == "true");
        Ok(if fifo { "FIFO" } else { "standard" })
    }

    async fn ask_url(&self, name: &str) -> Result<String, (bool, String)> {
        match self.client.get_queue_url().queue_name(name).send().await {
            Ok(out) => out
                .queue_url
                .ok_or_else(|| (false, format!("GetQueueUrl answered no URL for {name}"))),
            Err(e) => {
                let code = e.code().unwrap_or_default().to_owned();
                if code.contains("NonExistentQueue") || code == "QueueDoesNotExist" {
                    Err((false, format!("no SQS queue is named {name:?}")))
                } else {
                    match request_outcome(&e, e.code(), e.message()) {
                        Outcome::Retry(why) => Err((true, why)),
                        _ => Err((
                            false,
                            format!(
                                "GetQueueUrl {name:?}: {code}: {}",
                                e.message().unwrap_or("")
                            ),
                        )),
                    }
                }
            }
        }
    }

    /// The batch entry of `record`, or why it is refused for itself.
    fn entry(
        &self,
        id: usize,
        record: &Outgoing,
        fifo: bool,
    ) -> Result<SendMessageBatchRequestEntry, Entry> {
        let letter;
        let body = if self.is_dead_letter(&record.destination) {
            letter = letter_body(record);
            letter.as_str()
        } else {
            body_text(record.value.as_ref()).map_err(|(kind, e)| refuse(kind, false, e))?
        };
        let mut entry = SendMessageBatchRequestEntry::builder()
            .id(id.to_string())
            .message_body(body);
        let mut size = body.len();
        if self.config.message_attributes {
            let (attributes, bytes) = string_attributes(&record.headers, "SQS")?;
            size += bytes;
            for (name, text) in attributes {
                let value = MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value(text)
                    .build()
                    .map_err(|e| refuse("invalid_attribute", false, e.to_string()))?;
                entry = entry.message_attributes(name, value);
            }
        }
        // A dead letter carries the refused value and its context: bounded
        // by SQS's own limit only, so a record refused for its size can
        // still be dead-lettered.
        let max = if self.is_dead_letter(&record.destination) {
            HARD_MAX_BYTES
        } else {
            self.config.max_bytes()
        };
        if size > max {
            return Err(refuse(
                "message_too_large",
                true,
                format!("{size} bytes of body and attributes, above max_message_bytes {max}"),
            ));
        }
        if fifo {
            entry = entry
                .message_group_id(self.group(record))
                .message_deduplication_id(dedup_id(record));
        }
        entry
            .build()
            .map_err(|e| refuse("invalid_message", false, e.to_string()))
    }

    fn is_dead_letter(&self, destination: &str) -> bool {
        self.config.dead_letter_topic.as_deref() == Some(destination)
    }

    /// The record's message group on a FIFO queue.
    fn group(&self, record: &Outgoing) -> String {
        if let Some(fixed) = &self.config.message_group_id {
            return fixed.clone();
        }
        match &record.key {
            Some(key) => fifo_id(key),
            None => self
                .config
                .null_key_group
                .clone()
                .unwrap_or_else(|| DEBEZIUM_GROUP.to_owned()),
        }
    }
}

/// The deduplication id: the event id; a record without one (a heartbeat)
/// gets the SHA-256 of its destination, key and value.
pub(crate) fn dedup_id(record: &Outgoing) -> String {
    if let Some(id) = &record.dedup_id {
        return fifo_id(id.as_bytes());
    }
    let mut all = Vec::new();
    for part in [
        Some(record.destination.as_bytes()),
        record.key.as_deref(),
        record.value.as_deref(),
    ] {
        all.extend_from_slice(&(part.map_or(0, <[u8]>::len) as u64).to_be_bytes());
        all.extend_from_slice(part.unwrap_or_default());
    }
    // Longer than 128: always the digest.
    fifo_id(&[all.as_slice(), &[0u8; 129]].concat())
}

impl BatchApi for Sqs {
    fn next_request(&self, pending: &[Outgoing]) -> usize {
        let first = &pending[0].destination;
        let same = pending
            .iter()
            .take_while(|r| &r.destination == first)
            .count();
        // Whether the queue is FIFO is known once its URL is; until then
        // (the first request to it) the order rule applies anyway.
        let ordered = self.urls.get(first).is_none_or(|u| u.ends_with(".fifo"));
        let max = if self.is_dead_letter(first) {
            HARD_MAX_BYTES
        } else {
            self.config.max_bytes()
        };
        request_prefix(
            &pending[..same],
            MAX_ENTRIES,
            max,
            ordered,
            super::message_bytes,
            |r| self.group(r),
        )
    }

    async fn send(&mut self, entries: &[&Outgoing]) -> Result<Vec<Entry>, Outcome> {
        let url = match self.queue_url(&entries[0].destination).await {
            Ok(url) => url,
            Err((true, why)) => return Err(Outcome::Retry(why)),
            Err((false, why)) => {
                return Ok(entries
                    .iter()
                    .map(|_| Entry::Refused {
                        class: FailureClass::Record {
                            kind: "unknown_queue",
                            too_large: false,
                        },
                        code: "unknown_queue".to_owned(),
                        error: why.clone(),
                    })
                    .collect())
            }
        };
        let fifo = url.ends_with(".fifo");
        let mut answers: Vec<Option<Entry>> = vec![None; entries.len()];
        let mut request = self.client.send_message_batch().queue_url(&url);
        let mut any = false;
        for (i, record) in entries.iter().enumerate() {
            match self.entry(i, record, fifo) {
                Ok(entry) => {
                    request = request.entries(entry);
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
                Err(e) => return Err(whole_request(&e, e.code(), e.message(), &url)),
            };
            for ok in out.successful() {
                if let Some(slot) = ok
                    .id()
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| answers.get_mut(i))
                {
                    *slot = Some(Entry::Stored);
                }
            }
            for failed in out.failed() {
                let Some(slot) = failed
                    .id()
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| answers.get_mut(i))
                else {
                    continue;
                };
                *slot = Some(failed_entry(
                    failed.code(),
                    failed.message(),
                    failed.sender_fault(),
                ));
            }
        }
        Ok(answers
            .into_iter()
            .map(|a| a.unwrap_or_else(|| Entry::Again("SQS did not answer this entry".to_owned())))
            .collect())
    }
}

/// A failed `SendMessageBatch` as a whole: a queue that does not exist
/// is the records' own problem (as Kafka's unknown topic); the rest as
/// [`request_outcome`] sorts it.
fn whole_request<E, R>(
    err: &aws_smithy_runtime_api::client::result::SdkError<E, R>,
    code: Option<&str>,
    message: Option<&str>,
    url: &str,
) -> Outcome
where
    E: std::error::Error + 'static,
    R: fmt::Debug + 'static,
{
    let c = code.unwrap_or_default();
    if c.contains("NonExistentQueue") || c == "QueueDoesNotExist" {
        return Outcome::Failed {
            class: FailureClass::Record {
                kind: "unknown_queue",
                too_large: false,
            },
            code: "unknown_queue".to_owned(),
            error: format!("no SQS queue at {url}"),
        };
    }
    request_outcome(err, code, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_queue_or_a_prefix_not_both() {
        let c = SqsConfig {
            queue_url: Some("https://sqs.eu-west-1.amazonaws.com/1/q".into()),
            queue_url_prefix: Some("https://sqs.eu-west-1.amazonaws.com/1/".into()),
            ..SqsConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("sink.sqs.queue_url_prefix"));
        let c = SqsConfig {
            queue_url: Some("sqs://nowhere".into()),
            ..SqsConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("sink.sqs.queue_url"));
        let c = SqsConfig {
            max_message_bytes: Some(2 << 20),
            ..SqsConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("sink.sqs.max_message_bytes"));
        let c = SqsConfig {
            message_group_id: Some("has space".into()),
            ..SqsConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("sink.sqs.message_group_id"));
    }

    #[test]
    fn dedup_ids_are_event_ids_or_a_digest() {
        let mut r = Outgoing {
            destination: Arc::from("q"),
            key: None,
            value: Some(bytes::Bytes::from_static(b"v")),
            headers: Vec::new(),
            dedup_id: Some("3f1c2d9e-0000-4000-8000-000000000001".into()),
        };
        assert_eq!(dedup_id(&r), "3f1c2d9e-0000-4000-8000-000000000001");
        r.dedup_id = None;
        let a = dedup_id(&r);
        assert!(a.starts_with("h-"));
        r.value = Some(bytes::Bytes::from_static(b"w"));
        assert_ne!(dedup_id(&r), a);
    }
}
