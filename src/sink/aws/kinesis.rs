//! Amazon Kinesis Data Streams behind the broker seam
//! (`sink.type = "kinesis"`), through the AWS SDK's `PutRecords`.
//!
//! What a record is, as Debezium Server 3.6.1's `kinesis` sink writes it:
//! the stream is the router's topic, the data is the record's value bytes
//! (none for a tombstone), and the partition key is the record key as
//! text (`null_key`, default `default`, for a null key).
//!
//! Order: Kinesis keeps order per shard, and a partition key maps to one
//! shard; but `PutRecords` answers each record on its own, so a record
//! refused for throughput could be followed by a later record of its key
//! that was stored. walrelay never puts two records of one partition key
//! in a request, and sends a record refused for a passing reason again,
//! alone, before the next request ([`super::publish_in_batches`]): a key's
//! records are stored in the order sent. Throughput errors
//! (`ProvisionedThroughputExceededException`) are backpressure: the
//! records wait, the source with them.
//!
//! Limits, checked before sending: a partition key of 1 to 256
//! characters, data plus key at most 1 MiB (`max_record_bytes`), a
//! request at most 500 records (`batch_size`) and 5 MiB. A record over a
//! limit is refused for itself: `[errors]` decides. A dead letter is a
//! JSON object (the record's key and value, and the context headers by
//! name), bounded by Kinesis's 1 MiB only ([`letter_body`]).

use std::fmt;
use std::path::PathBuf;

use aws_sdk_kinesis::error::ProvideErrorMetadata;
use aws_sdk_kinesis::primitives::Blob;
use aws_sdk_kinesis::types::PutRecordsRequestEntry;
use aws_sdk_kinesis::Client;
use serde::Deserialize;

use super::{
    letter_body, request_outcome, request_prefix, AwsClient, AwsCredentials, BatchApi, Entry,
};
use crate::setting::SettingError;
use crate::sink::broker::{FailureClass, Guarantees};
use crate::sink::queued::{Outcome, Outgoing, Publisher};

/// Most records in one `PutRecords` (Debezium Server's default
/// `batch.size`, and Kinesis's limit).
pub(crate) const MAX_BATCH: usize = 500;
/// Most bytes (data and partition keys) in one `PutRecords`.
const MAX_REQUEST_BYTES: usize = 5 << 20;
/// Most bytes of one record (data and partition key).
pub(crate) const MAX_RECORD_BYTES: usize = 1 << 20;
/// Longest partition key, in characters.
const MAX_KEY_CHARS: usize = 256;
/// The bound of a dead letter's key and value (JSON escaping may grow
/// them; the letter stays under Kinesis's own limit).
pub(crate) const LETTER_MAX_BYTES: usize = MAX_RECORD_BYTES / 2;
/// Debezium Server's default `null.key`.
const NULL_KEY: &str = "default";

/// `[sink.kinesis]`: Amazon Kinesis Data Streams
/// (`debezium.sink.kinesis.*`).
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct KinesisConfig {
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
    /// Records per `PutRecords` (`batch.size`, default and most 500).
    #[serde(default)]
    pub(crate) batch_size: Option<usize>,
    /// The partition key of a record with a null key (`null.key`, default
    /// `default`).
    #[serde(default)]
    pub(crate) null_key: Option<String>,
    /// Largest record (data and partition key), bytes (default and most
    /// 1 MiB).
    #[serde(default)]
    pub(crate) max_record_bytes: Option<usize>,
    /// Set by the pipeline: the dead-letter topic, whose records are JSON
    /// letters ([`letter_body`]).
    #[serde(skip)]
    pub(crate) dead_letter_topic: Option<String>,
}

impl fmt::Debug for KinesisConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KinesisConfig")
            .field("region", &self.region)
            .field("endpoint", &self.endpoint)
            .field("credentials", &self.credentials)
            .field("batch_size", &self.batch_size)
            .field("null_key", &self.null_key)
            .field("max_record_bytes", &self.max_record_bytes)
            .finish_non_exhaustive()
    }
}

impl KinesisConfig {
    fn client(&self) -> AwsClient<'_> {
        AwsClient {
            section: "sink.kinesis",
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
        if let Some(n) = self.batch_size {
            if n == 0 || n > MAX_BATCH {
                return Err(SettingError::invalid(
                    "sink.kinesis.batch_size",
                    format!("{n}: must be 1 to {MAX_BATCH} (PutRecords' limit)"),
                ));
            }
        }
        if let Some(key) = &self.null_key {
            if key.is_empty() || key.chars().count() > MAX_KEY_CHARS {
                return Err(SettingError::invalid(
                    "sink.kinesis.null_key",
                    "must be 1 to 256 characters (a partition key)",
                ));
            }
        }
        match self.max_record_bytes {
            Some(n) if n == 0 || n > MAX_RECORD_BYTES => Err(SettingError::invalid(
                "sink.kinesis.max_record_bytes",
                format!("{n}: must be 1 to {MAX_RECORD_BYTES} (Kinesis's largest record)"),
            )),
            _ => Ok(()),
        }
    }

    /// The largest record, bytes.
    pub(crate) fn max_bytes(&self) -> usize {
        self.max_record_bytes.unwrap_or(MAX_RECORD_BYTES)
    }
}

/// What `walrelay check` reads (never writing): each stream's status and
/// shard count (`DescribeStreamSummary`), or why there is none. An error
/// of the first call (credentials, the endpoint) is the connection's.
pub(crate) async fn probe(
    config: &KinesisConfig,
    streams: &[String],
) -> Result<(String, Vec<(String, Result<String, String>)>), String> {
    let kinesis = <Kinesis as Publisher>::connect(config).await?;
    let mut found = Vec::with_capacity(streams.len());
    for name in streams {
        let answer = kinesis
            .client
            .describe_stream_summary()
            .stream_name(name)
            .send()
            .await;
        let answer = match answer {
            Ok(out) => Ok(out.stream_description_summary().map_or_else(
                || "no summary".to_owned(),
                |s| {
                    format!(
                        "{} with {} open shard(s)",
                        s.stream_status(),
                        s.open_shard_count()
                    )
                },
            )),
            Err(e) => Err(format!(
                "{}: {}",
                e.code().unwrap_or("error"),
                e.message().unwrap_or("")
            )),
        };
        found.push((name.clone(), answer));
    }
    Ok((config.client().place("kinesis"), found))
}

/// A connected Kinesis publisher.
pub(crate) struct Kinesis {
    client: Client,
    config: KinesisConfig,
}

impl Publisher for Kinesis {
    const NAME: &'static str = "kinesis";
    /// Per partition key order (see the module doc); no deduplication, no
    /// transactions.
    const GUARANTEES: Guarantees = Guarantees {
        idempotent: false,
        transactional: false,
        dedup_by_id: false,
        per_key_order: true,
    };
    const ERROR_CLASS: &'static str = "aws_sdk_kinesis::Error";
    type Config = KinesisConfig;

    async fn connect(config: &KinesisConfig) -> Result<Kinesis, String> {
        let sdk = config.client().sdk_config().await?;
        Ok(Kinesis {
            client: Client::new(&sdk),
            config: config.clone(),
        })
    }

    async fn publish(&mut self, batch: &[Outgoing]) -> Vec<Outcome> {
        super::publish_in_batches(self, batch).await
    }
}

impl Kinesis {
    /// The record's partition key, or why it has none.
    fn partition_key<'a>(
        &'a self,
        record: &'a Outgoing,
    ) -> Result<&'a str, (&'static str, String)> {
        let Some(key) = &record.key else {
            return Ok(self.config.null_key.as_deref().unwrap_or(NULL_KEY));
        };
        let text = std::str::from_utf8(key).map_err(|_| {
            (
                "invalid_partition_key",
                "the record key is not UTF-8 text; a partition key must be".to_owned(),
            )
        })?;
        let chars = text.chars().count();
        if chars == 0 || chars > MAX_KEY_CHARS {
            return Err((
                "invalid_partition_key",
                format!(
                    "the record key is {chars} characters; a partition key is 1 to {MAX_KEY_CHARS}"
                ),
            ));
        }
        Ok(text)
    }

    /// The request entry of `record`, or why it is refused for itself.
    fn entry(&self, record: &Outgoing) -> Result<PutRecordsRequestEntry, Entry> {
        let refuse = |kind: &'static str, too_large: bool, error: String| Entry::Refused {
            class: FailureClass::Record { kind, too_large },
            code: kind.to_owned(),
            error,
        };
        let dead_letter = self.config.dead_letter_topic.as_deref() == Some(&*record.destination);
        let key = match self.partition_key(record) {
            Ok(key) => key,
            // A dead letter keeps its record's key where it can.
            Err(_) if dead_letter => self.config.null_key.as_deref().unwrap_or(NULL_KEY),
            Err((kind, e)) => return Err(refuse(kind, false, e)),
        };
        let letter;
        let (data, max) = if dead_letter {
            letter = letter_body(record);
            (letter.as_bytes(), MAX_RECORD_BYTES)
        } else {
            (
                record.value.as_deref().unwrap_or_default(),
                self.config.max_bytes(),
            )
        };
        let size = data.len() + key.len();
        if size > max {
            return Err(refuse(
                "message_too_large",
                true,
                format!("{size} bytes of data and partition key, above max_record_bytes {max}"),
            ));
        }
        PutRecordsRequestEntry::builder()
            .partition_key(key)
            .data(Blob::new(data))
            .build()
            .map_err(|e| refuse("invalid_record", false, e.to_string()))
    }
}

impl BatchApi for Kinesis {
    fn next_request(&self, pending: &[Outgoing]) -> usize {
        let first = &pending[0].destination;
        let same = pending
            .iter()
            .take_while(|r| &r.destination == first)
            .count();
        request_prefix(
            &pending[..same],
            self.config.batch_size.unwrap_or(MAX_BATCH),
            MAX_REQUEST_BYTES,
            true,
            |r| {
                r.value.as_ref().map_or(0, bytes::Bytes::len)
                    + r.key.as_ref().map_or(0, bytes::Bytes::len)
            },
            |r| self.partition_key(r).ok().map(str::to_owned),
        )
    }

    async fn send(&mut self, entries: &[&Outgoing]) -> Result<Vec<Entry>, Outcome> {
        let stream = entries[0].destination.to_string();
        let mut answers: Vec<Option<Entry>> = vec![None; entries.len()];
        let mut sent = Vec::with_capacity(entries.len());
        let mut request = self.client.put_records().stream_name(&stream);
        for (i, record) in entries.iter().enumerate() {
            match self.entry(record) {
                Ok(entry) => {
                    request = request.records(entry);
                    sent.push(i);
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
        if !sent.is_empty() {
            let out = match request.send().await {
                Ok(out) => out,
                Err(e) => return whole_request(&e, e.code(), e.message(), &stream, entries.len()),
            };
            for (at, result) in sent.iter().zip(out.records()) {
                answers[*at] = Some(match result.error_code() {
                    None => Entry::Stored,
                    Some(code) => record_error(code, result.error_message().unwrap_or("")),
                });
            }
        }
        Ok(answers
            .into_iter()
            .map(|a| {
                a.unwrap_or_else(|| Entry::Again("Kinesis did not answer this record".to_owned()))
            })
            .collect())
    }
}

/// A record's own error in a `PutRecords` answer: throughput and
/// Kinesis's internal failures pass; anything else (a KMS key the stream
/// cannot use, ...) is the stream's, and stops the sink.
fn record_error(code: &str, message: &str) -> Entry {
    if super::passing_code(code) {
        Entry::Again(format!("{code}: {message}"))
    } else {
        Entry::Refused {
            class: FailureClass::Broker,
            code: code.to_ascii_lowercase(),
            error: format!("{code}: {message}"),
        }
    }
}

/// A failed `PutRecords` as a whole: a stream that does not exist is the
/// records' own problem (as Kafka's unknown topic); the rest as
/// [`request_outcome`] sorts it.
fn whole_request<E, R>(
    err: &aws_smithy_runtime_api::client::result::SdkError<E, R>,
    code: Option<&str>,
    message: Option<&str>,
    stream: &str,
    n: usize,
) -> Result<Vec<Entry>, Outcome>
where
    E: std::error::Error + 'static,
    R: fmt::Debug + 'static,
{
    if code == Some("ResourceNotFoundException") {
        let error = format!("no Kinesis stream {stream:?}: {}", message.unwrap_or(""));
        return Ok((0..n)
            .map(|_| Entry::Refused {
                class: FailureClass::Record {
                    kind: "unknown_stream",
                    too_large: false,
                },
                code: "unknown_stream".to_owned(),
                error: error.clone(),
            })
            .collect());
    }
    Err(request_outcome(err, code, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_named_by_key() {
        let c = KinesisConfig {
            batch_size: Some(501),
            ..KinesisConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("sink.kinesis.batch_size"));
        let c = KinesisConfig {
            null_key: Some(String::new()),
            ..KinesisConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("sink.kinesis.null_key"));
        let c = KinesisConfig {
            max_record_bytes: Some(2 << 20),
            ..KinesisConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("sink.kinesis.max_record_bytes"));
    }

    #[test]
    fn throughput_errors_pass_and_others_stop() {
        assert!(matches!(
            record_error("ProvisionedThroughputExceededException", "slow"),
            Entry::Again(_)
        ));
        assert!(matches!(
            record_error("InternalFailure", ""),
            Entry::Again(_)
        ));
        assert!(matches!(
            record_error("KMSAccessDeniedException", ""),
            Entry::Refused {
                class: FailureClass::Broker,
                ..
            }
        ));
    }
}
