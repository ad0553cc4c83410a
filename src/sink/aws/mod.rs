//! Amazon's queues behind the broker seam: SQS ([`sqs`]), SNS ([`sns`])
//! and Kinesis ([`kinesis`]), each through the official AWS SDK for Rust.
//!
//! Owns what the three share: the client settings (`region`, `endpoint`,
//! `tls_ca_file`, `[sink.<broker>.credentials]`) turned into an SDK
//! configuration, the SDK's errors sorted into walrelay's outcomes, and
//! the batch loop ([`publish_in_batches`]): a batch API answers each entry
//! on its own, so an entry that failed for a passing reason (throttling, a
//! server error) is sent again alone, never with the entries that were
//! stored, and a request never holds two entries of one ordering key, so
//! that a retried entry cannot land after a later record of its key.
//!
//! Credentials: explicit keys (`access_key_id` with `secret_access_key`,
//! each also from an environment variable or a file) or a named profile;
//! otherwise the SDK's default chain (environment, profile files, web
//! identity, container and instance roles), as Debezium Server's Java SDK
//! does. A secret never reaches `Debug`, logs or errors.

pub(crate) mod kinesis;
pub(crate) mod sns;
pub(crate) mod sqs;

use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode, TlsContext, TrustStore};
use serde::Deserialize;

use super::broker::FailureClass;
use super::queued::{Outcome, Outgoing};
use crate::secret::Secret;
use crate::setting::SettingError;

/// First pause before an entry that failed for a passing reason is sent
/// again; doubled up to [`ENTRY_RETRY_MAX`].
const ENTRY_RETRY_MIN: Duration = Duration::from_millis(100);
const ENTRY_RETRY_MAX: Duration = Duration::from_secs(5);
/// Rounds of entry retries inside one publish call; then the worker's own
/// retry takes over (it looks whether the sink stopped meanwhile).
const ENTRY_ROUNDS: u32 = 12;

/// `[sink.<broker>.credentials]`: how the SDK signs requests. Empty: the
/// SDK's default chain.
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AwsCredentials {
    /// A profile of the shared config and credentials files
    /// (`~/.aws/config`; Debezium Server's `credentials.profile`).
    #[serde(default)]
    pub(crate) profile: Option<String>,
    /// An access key id, with `secret_access_key`.
    #[serde(default)]
    pub(crate) access_key_id: Option<String>,
    /// Environment variable holding the access key id.
    #[serde(default)]
    pub(crate) access_key_id_env: Option<String>,
    /// The secret access key.
    #[serde(default)]
    pub(crate) secret_access_key: Option<Secret>,
    /// Environment variable holding the secret access key.
    #[serde(default)]
    pub(crate) secret_access_key_env: Option<String>,
    /// File holding the secret access key (a trailing newline is ignored).
    #[serde(default)]
    pub(crate) secret_access_key_file: Option<PathBuf>,
    /// A session token of temporary credentials.
    #[serde(default)]
    pub(crate) session_token: Option<Secret>,
    /// Environment variable holding the session token.
    #[serde(default)]
    pub(crate) session_token_env: Option<String>,
}

impl fmt::Debug for AwsCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |s: &Option<Secret>| s.as_ref().map(|_| "<redacted>");
        f.debug_struct("AwsCredentials")
            .field("profile", &self.profile)
            .field("access_key_id", &self.access_key_id)
            .field("access_key_id_env", &self.access_key_id_env)
            .field("secret_access_key", &set(&self.secret_access_key))
            .field("secret_access_key_env", &self.secret_access_key_env)
            .field("secret_access_key_file", &self.secret_access_key_file)
            .field("session_token", &set(&self.session_token))
            .field("session_token_env", &self.session_token_env)
            .finish()
    }
}

/// Where and how an AWS client connects: the part of `[sink.sqs]`,
/// `[sink.sns]` and `[sink.kinesis]` they share.
#[derive(Debug, Clone, Default)]
pub(crate) struct AwsClient<'a> {
    /// The section's name, for errors (`sink.sqs`).
    pub(crate) section: &'static str,
    /// `region`; `None`: the SDK's chain (`AWS_REGION`, the profile).
    pub(crate) region: Option<&'a str>,
    /// `endpoint`: another endpoint than the region's (a VPC endpoint, a
    /// local emulator).
    pub(crate) endpoint: Option<&'a str>,
    /// `tls_ca_file`: PEM certificates trusted besides the platform's.
    pub(crate) tls_ca_file: Option<&'a PathBuf>,
    /// `[<section>.credentials]`.
    pub(crate) credentials: Option<&'a AwsCredentials>,
    /// `request_timeout_ms`: how long one attempt of a request may take
    /// (a hung endpoint is then retried, not waited for forever).
    pub(crate) request_timeout_ms: Option<u64>,
}

/// The default of `request_timeout_ms`.
pub(crate) const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 30_000;

impl AwsClient<'_> {
    /// Where `broker` is reached, for `walrelay check`'s connection row.
    pub(crate) fn place(&self, broker: &str) -> String {
        match (self.endpoint, self.region) {
            (Some(endpoint), _) => format!("{broker} at {endpoint}"),
            (None, Some(region)) => format!("{broker} in {region}"),
            (None, None) => format!("{broker} in the SDK's region"),
        }
    }

    /// Checks the shared keys; errors name the key.
    pub(crate) fn validate(&self) -> Result<(), SettingError> {
        let key = |name: &str| format!("{}.{name}", self.section);
        if let Some(endpoint) = self.endpoint {
            let parsed = url::Url::parse(endpoint).map_err(|e| {
                SettingError::invalid(key("endpoint"), format!("{endpoint:?}: {e}"))
            })?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err(SettingError::invalid(
                    key("endpoint"),
                    format!("{endpoint:?}: must be an http:// or https:// URL"),
                ));
            }
        }
        if self.request_timeout_ms == Some(0) {
            return Err(SettingError::invalid(
                key("request_timeout_ms"),
                "must be above 0",
            ));
        }
        if self.region.is_some_and(str::is_empty) {
            return Err(SettingError::invalid(key("region"), "must not be empty"));
        }
        if let Some(c) = self.credentials {
            c.validate(&key("credentials"))?;
        }
        Ok(())
    }

    /// The SDK's configuration for this client: credentials resolved, the
    /// HTTPS client built (rustls on ring, the platform's roots plus
    /// `tls_ca_file`).
    pub(crate) async fn sdk_config(&self) -> Result<SdkConfig, String> {
        let mut trust = TrustStore::default();
        if let Some(path) = self.tls_ca_file {
            let pem = std::fs::read(path).map_err(|e| {
                format!(
                    "{}.tls_ca_file: cannot read {}: {e}",
                    self.section,
                    path.display()
                )
            })?;
            trust = trust.with_pem_certificate(pem.as_slice());
        }
        let tls = TlsContext::builder()
            .with_trust_store(trust)
            .build()
            .map_err(|e| format!("{}: TLS settings: {e}", self.section))?;
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
            .tls_context(tls)
            .build_https();
        let attempt = Duration::from_millis(
            self.request_timeout_ms
                .unwrap_or(DEFAULT_REQUEST_TIMEOUT_MS),
        );
        let timeouts = aws_config::timeout::TimeoutConfig::builder()
            .connect_timeout(attempt.min(Duration::from_secs(10)))
            .operation_attempt_timeout(attempt)
            .build();
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .http_client(http)
            .timeout_config(timeouts);
        if let Some(region) = self.region {
            loader = loader.region(Region::new(region.to_owned()));
        }
        if let Some(endpoint) = self.endpoint {
            loader = loader.endpoint_url(endpoint);
        }
        if let Some(c) = self.credentials {
            if let Some(profile) = &c.profile {
                loader = loader.profile_name(profile);
            }
            if let Some(explicit) = c.explicit(&format!("{}.credentials", self.section))? {
                loader = loader.credentials_provider(explicit);
            }
        }
        let config = loader.load().await;
        if config.region().is_none() {
            return Err(format!(
                "{}.region is not set and the SDK found no region (AWS_REGION, the profile)",
                self.section
            ));
        }
        Ok(config)
    }
}

impl AwsCredentials {
    fn validate(&self, section: &str) -> Result<(), SettingError> {
        let key = |name: &str| format!("{section}.{name}");
        let id = self.access_key_id.is_some() || self.access_key_id_env.is_some();
        let secret = [
            self.secret_access_key.is_some(),
            self.secret_access_key_env.is_some(),
            self.secret_access_key_file.is_some(),
        ];
        let secrets = secret.iter().filter(|s| **s).count();
        if self.access_key_id.is_some() && self.access_key_id_env.is_some() {
            return Err(SettingError::invalid(
                key("access_key_id_env"),
                "give access_key_id or access_key_id_env, not both",
            ));
        }
        if secrets > 1 {
            return Err(SettingError::invalid(
                key("secret_access_key"),
                "give one of secret_access_key, secret_access_key_env and secret_access_key_file",
            ));
        }
        if id != (secrets == 1) {
            return Err(SettingError::invalid(
                key(if id {
                    "secret_access_key"
                } else {
                    "access_key_id"
                }),
                "an access key id and its secret access key go together",
            ));
        }
        if (self.session_token.is_some() || self.session_token_env.is_some()) && !id {
            return Err(SettingError::invalid(
                key("session_token"),
                "a session token needs access_key_id and secret_access_key",
            ));
        }
        Ok(())
    }

    /// The explicit keys, read from their variables or file now; `None`
    /// when none are configured.
    fn explicit(&self, section: &str) -> Result<Option<Credentials>, String> {
        let env = |name: &str, key: &str| {
            std::env::var(name)
                .map_err(|_| format!("{section}.{key}: the environment variable {name} is not set"))
        };
        let id = match (&self.access_key_id, &self.access_key_id_env) {
            (Some(id), _) => id.clone(),
            (None, Some(var)) => env(var, "access_key_id_env")?,
            (None, None) => return Ok(None),
        };
        let secret = match (
            &self.secret_access_key,
            &self.secret_access_key_env,
            &self.secret_access_key_file,
        ) {
            (Some(s), _, _) => s.expose().to_owned(),
            (None, Some(var), _) => env(var, "secret_access_key_env")?,
            (None, None, Some(path)) => std::fs::read_to_string(path)
                .map(|s| s.trim_end_matches(['\r', '\n']).to_owned())
                .map_err(|e| {
                    format!(
                        "{section}.secret_access_key_file: cannot read {}: {e}",
                        path.display()
                    )
                })?,
            (None, None, None) => return Ok(None),
        };
        let token = match (&self.session_token, &self.session_token_env) {
            (Some(t), _) => Some(t.expose().to_owned()),
            (None, Some(var)) => Some(env(var, "session_token_env")?),
            (None, None) => None,
        };
        Ok(Some(Credentials::new(id, secret, token, None, "walrelay")))
    }
}

/// What a batch API said about one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Entry {
    /// Stored.
    Stored,
    /// Not stored, for a passing reason: sent again (alone).
    Again(String),
    /// Refused for good.
    Refused {
        class: FailureClass,
        code: String,
        error: String,
    },
}

/// A broker's batch call, as [`publish_in_batches`] drives it.
pub(crate) trait BatchApi: Send {
    /// How many of `pending` (at least one) the next request carries: at
    /// most the API's limits, and where order matters no two entries of
    /// one ordering key.
    fn next_request(&self, pending: &[Outgoing]) -> usize;

    /// Sends `entries` in one request: one answer per entry, in order; or
    /// what became of the whole request (a retry, or a failure for good
    /// of every entry). An entry it refuses itself (too large, no body)
    /// ends the request there: the entries after it are not sent and are
    /// answered [`Entry::Again`].
    fn send(
        &mut self,
        entries: &[&Outgoing],
    ) -> impl Future<Output = Result<Vec<Entry>, Outcome>> + Send;
}

/// Publishes `batch` request by request: one outcome per record, in order.
/// Entries of a request that failed for a passing reason are sent again,
/// alone, before the next request (with a pause, doubled each round);
/// after [`ENTRY_ROUNDS`] rounds the first unsettled record ends the call
/// as a retry, as a failed whole request does. A record refused for good
/// ends the call after it (and the settled records just after it): the
/// caller settles the refusal before anything later is sent, so when it
/// stops the sink nothing after it goes out ([`BatchApi::send`] sends
/// nothing after an entry it refuses itself, and the entries after a
/// refusal are not sent again in its rounds).
pub(crate) async fn publish_in_batches<A: BatchApi>(
    api: &mut A,
    batch: &[Outgoing],
) -> Vec<Outcome> {
    let mut outcomes = Vec::with_capacity(batch.len());
    while outcomes.len() < batch.len() {
        let start = outcomes.len();
        let n = api
            .next_request(&batch[start..])
            .clamp(1, batch.len() - start);
        let request = &batch[start..start + n];
        let mut answers: Vec<Option<Outcome>> = vec![None; n];
        let mut pause = ENTRY_RETRY_MIN;
        let mut rounds = 0;
        loop {
            // Nothing at or after the first refusal is sent (again).
            let cut = answers
                .iter()
                .position(|a| matches!(a, Some(Outcome::Failed { .. })))
                .unwrap_or(n);
            let pending: Vec<usize> = (0..cut).filter(|i| answers[*i].is_none()).collect();
            if pending.is_empty() {
                break;
            }
            let entries: Vec<&Outgoing> = pending.iter().map(|i| &request[*i]).collect();
            let again = match api.send(&entries).await {
                Err(whole) => {
                    settled_prefix(&mut outcomes, answers, whole);
                    return outcomes;
                }
                Ok(replies) => apply_replies(&mut answers, &pending, replies),
            };
            let Some(why) = again else { continue };
            rounds += 1;
            if rounds >= ENTRY_ROUNDS {
                settled_prefix(&mut outcomes, answers, Outcome::Retry(why));
                return outcomes;
            }
            tracing::debug!(error = why, retry_in = ?pause, "entries not stored; sending them again");
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(ENTRY_RETRY_MAX);
        }
        let refused = answers
            .iter()
            .any(|a| matches!(a, Some(Outcome::Failed { .. })));
        let settled = answers.iter().take_while(|a| a.is_some()).count();
        outcomes.extend(answers.into_iter().map_while(|a| a));
        if refused || settled < n {
            return outcomes;
        }
    }
    outcomes
}

/// Records the answers of one reply; the reason of the first entry to be
/// sent again, if any.
fn apply_replies(
    answers: &mut [Option<Outcome>],
    pending: &[usize],
    replies: Vec<Entry>,
) -> Option<String> {
    let mut again = None;
    for (at, reply) in pending
        .iter()
        .zip(replies.into_iter().map(Some).chain(std::iter::repeat(None)))
    {
        match reply {
            Some(Entry::Stored) => answers[*at] = Some(Outcome::Acked),
            Some(Entry::Refused { class, code, error }) => {
                answers[*at] = Some(Outcome::Failed { class, code, error });
            }
            Some(Entry::Again(why)) => {
                again.get_or_insert(why);
            }
            None => {
                again.get_or_insert_with(|| {
                    "the broker answered fewer entries than sent".to_owned()
                });
            }
        }
    }
    again
}

/// The settled answers up to the first unsettled one, then `last` for it.
fn settled_prefix(outcomes: &mut Vec<Outcome>, answers: Vec<Option<Outcome>>, last: Outcome) {
    for answer in answers {
        match answer {
            Some(outcome) => outcomes.push(outcome),
            None => {
                outcomes.push(last);
                return;
            }
        }
    }
}

/// What a record counts for against an SQS or SNS size limit: its value
/// and each header as a String attribute (name, `String`, value).
pub(crate) fn message_bytes(record: &Outgoing) -> usize {
    record.value.as_ref().map_or(0, bytes::Bytes::len)
        + record
            .headers
            .iter()
            .map(|h| h.name.len() + "String".len() + h.value.as_ref().map_or(0, bytes::Bytes::len))
            .sum::<usize>()
}

/// How many of `pending`, from the first, fit one request: at most
/// `max_entries` entries and `max_bytes` bytes (`size` of each), and, when
/// `ordered`, no ordering key twice (`key` of each). Always at least one.
pub(crate) fn request_prefix<K: PartialEq>(
    pending: &[Outgoing],
    max_entries: usize,
    max_bytes: usize,
    ordered: bool,
    size: impl Fn(&Outgoing) -> usize,
    key: impl Fn(&Outgoing) -> K,
) -> usize {
    let mut bytes = 0;
    let mut keys: Vec<K> = Vec::new();
    for (i, record) in pending.iter().enumerate().take(max_entries) {
        bytes += size(record);
        if i > 0 && bytes > max_bytes {
            return i;
        }
        if ordered {
            let k = key(record);
            if keys.contains(&k) {
                return i.max(1);
            }
            keys.push(k);
        }
    }
    pending.len().min(max_entries).max(1)
}

/// Whether `c` may appear in an SQS message body (the XML character
/// ranges SQS accepts: tab, newline, carriage return, and from U+0020 on
/// except the surrogates, U+FFFE and U+FFFF).
pub(crate) fn body_char_allowed(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// A record's value as the text SQS and SNS carry, or why it cannot be
/// one (the record is refused for itself).
pub(crate) fn body_text(value: Option<&bytes::Bytes>) -> Result<&str, (&'static str, String)> {
    let Some(value) = value else {
        return Err((
            "tombstone",
            "a null value (a tombstone) has no message body to send".to_owned(),
        ));
    };
    let text = std::str::from_utf8(value).map_err(|e| {
        (
            "invalid_body",
            format!("the value is not UTF-8 text ({e}); the message body must be"),
        )
    })?;
    if text.is_empty() {
        return Err((
            "invalid_body",
            "an empty value is not a message body".to_owned(),
        ));
    }
    if let Some((at, c)) = text.char_indices().find(|(_, c)| !body_char_allowed(*c)) {
        return Err((
            "invalid_body",
            format!(
                "the value holds U+{:04X} at byte {at}, which the message body may not",
                c as u32
            ),
        ));
    }
    Ok(text)
}

/// The body of a dead letter on SQS or Kinesis: a JSON object with the
/// refused record's key and value (text, or `key_base64`/`value_base64`
/// when not UTF-8; null when dropped or a tombstone) and every context
/// header by name. Neither has null bodies or room for the context headers
/// (SQS takes 10 attributes, Kinesis none), so the letter carries them.
pub(crate) fn letter_body(record: &Outgoing) -> String {
    use serde_json::{Map, Value};
    let text = |b: &Option<bytes::Bytes>| match b {
        None => (Value::Null, None),
        Some(b) => match std::str::from_utf8(b) {
            Ok(t) => (Value::String(t.to_owned()), None),
            Err(_) => {
                use base64::Engine;
                (
                    Value::Null,
                    Some(Value::String(
                        base64::engine::general_purpose::STANDARD.encode(b),
                    )),
                )
            }
        },
    };
    let mut doc = Map::new();
    for (name, part) in [("key", &record.key), ("value", &record.value)] {
        let (value, encoded) = text(part);
        doc.insert(name.to_owned(), value);
        if let Some(encoded) = encoded {
            doc.insert(format!("{name}_base64"), encoded);
        }
    }
    let headers: Map<String, Value> = record
        .headers
        .iter()
        .map(|h| {
            let v = h.value.as_ref().map_or(Value::Null, |v| {
                Value::String(String::from_utf8_lossy(v).into_owned())
            });
            (h.name.to_string(), v)
        })
        .collect();
    doc.insert("headers".to_owned(), Value::Object(headers));
    Value::Object(doc).to_string()
}

/// A record refused for itself, of `kind` (also its code).
pub(crate) fn refuse(kind: &'static str, too_large: bool, error: String) -> Entry {
    Entry::Refused {
        class: FailureClass::Record { kind, too_large },
        code: kind.to_owned(),
        error,
    }
}

/// Most message attributes SQS and SNS take on one message.
const MAX_ATTRIBUTES: usize = 10;

/// The record's headers as String message attributes (SQS, SNS), in
/// Debezium Server's order: name, text, and the bytes they count for.
/// A null or empty value is left out (the services refuse an empty
/// String attribute); more than ten, or a value that is not text,
/// refuses the record.
pub(crate) fn string_attributes(
    headers: &[crate::router::RecordHeader],
    broker: &str,
) -> Result<(Vec<(String, String)>, usize), Entry> {
    let present: Vec<_> = super::queued::debezium_header_order(headers)
        .into_iter()
        .filter_map(|(n, v)| Some((n, v.filter(|v| !v.is_empty())?)))
        .collect();
    if present.len() > MAX_ATTRIBUTES {
        return Err(refuse(
            "too_many_attributes",
            false,
            format!(
                "{} headers, and {broker} takes at most {MAX_ATTRIBUTES} message attributes",
                present.len()
            ),
        ));
    }
    let mut size = 0;
    let mut out = Vec::with_capacity(present.len());
    for (name, value) in present {
        let text = std::str::from_utf8(value).map_err(|_| {
            refuse(
                "invalid_attribute",
                false,
                format!("header {name:?} is not UTF-8 text"),
            )
        })?;
        size += name.len() + "String".len() + text.len();
        out.push((name.to_owned(), text.to_owned()));
    }
    Ok((out, size))
}

/// One failed entry of an SQS or SNS batch: the service's fault, or a
/// passing one, is sent again; the sender's fault refuses the record.
pub(crate) fn failed_entry(code: &str, message: Option<&str>, sender_fault: bool) -> Entry {
    let error = format!("{code}: {}", message.unwrap_or(""));
    if !sender_fault || passing_code(code) {
        return Entry::Again(error);
    }
    let too_large =
        code.contains("TooLong") || code.contains("TooLarge") || code.contains("TooBig");
    Entry::Refused {
        class: FailureClass::Record {
            kind: if too_large {
                "message_too_large"
            } else {
                "rejected"
            },
            too_large,
        },
        code: code.to_ascii_lowercase(),
        error,
    }
}

/// A message group or deduplication id for `bytes`: the text itself when
/// it is 1 to 128 characters of what the ids allow (ASCII letters,
/// digits and punctuation), else `h-` and the SHA-256 of the bytes in hex
/// (stable, so a key keeps one group).
pub(crate) fn fifo_id(bytes: &[u8]) -> String {
    let ok = (1..=128).contains(&bytes.len()) && bytes.iter().all(u8::is_ascii_graphic);
    match std::str::from_utf8(bytes) {
        Ok(text) if ok => text.to_owned(),
        _ => {
            let digest = openssl::sha::sha256(bytes);
            let mut hex = String::with_capacity(66);
            hex.push_str("h-");
            for b in digest {
                hex.push_str(&format!("{b:02x}"));
            }
            hex
        }
    }
}

/// An SDK error, as an outcome of the whole request: a failure of the
/// connection, a timeout or a server fault is retried; a service error
/// the caller did not recognise stops the sink (an authorisation or
/// configuration problem no retry cures).
pub(crate) fn request_outcome<E, R>(
    err: &aws_smithy_runtime_api::client::result::SdkError<E, R>,
    code: Option<&str>,
    message: Option<&str>,
) -> Outcome
where
    E: std::error::Error + 'static,
    R: fmt::Debug + 'static,
{
    use aws_smithy_runtime_api::client::result::SdkError;
    let text = format!("{}", crate::chain::DisplayChain(err));
    match err {
        SdkError::ServiceError(_) => {
            let code = code.unwrap_or("unknown").to_owned();
            if passing_code(&code) {
                Outcome::Retry(format!("{code}: {}", message.unwrap_or(&text)))
            } else {
                Outcome::Failed {
                    class: FailureClass::Broker,
                    error: format!("{code}: {}", message.unwrap_or(&text)),
                    code: code.to_ascii_lowercase(),
                }
            }
        }
        _ => Outcome::Retry(text),
    }
}

/// Error codes of AWS services that pass: throttling and server faults.
pub(crate) fn passing_code(code: &str) -> bool {
    matches!(
        code,
        "Throttling"
            | "ThrottlingException"
            | "ThrottledException"
            | "RequestThrottled"
            | "RequestThrottledException"
            | "TooManyRequestsException"
            | "ProvisionedThroughputExceededException"
            | "LimitExceededException"
            | "SlowDown"
            | "ServiceUnavailable"
            | "ServiceUnavailableException"
            | "InternalError"
            | "InternalFailure"
            | "InternalErrorException"
            | "KMSThrottlingException"
            | "RequestTimeout"
            | "RequestTimeoutException"
            | "KmsThrottled"
            | "AWS.SimpleQueueService.ThrottledException"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::sync::Arc;

    fn rec(key: &str, value: &str) -> Outgoing {
        Outgoing {
            destination: Arc::from("q"),
            key: Some(Bytes::copy_from_slice(key.as_bytes())),
            value: Some(Bytes::copy_from_slice(value.as_bytes())),
            headers: Vec::new(),
            dedup_id: None,
        }
    }

    #[test]
    fn a_request_never_holds_a_key_twice_when_ordered() {
        let batch = [rec("a", "1"), rec("b", "2"), rec("a", "3"), rec("c", "4")];
        let key = |r: &Outgoing| r.key.clone();
        let size = |r: &Outgoing| r.value.as_ref().map_or(0, Bytes::len);
        assert_eq!(request_prefix(&batch, 10, 1000, true, size, key), 2);
        assert_eq!(request_prefix(&batch, 10, 1000, false, size, key), 4);
        assert_eq!(request_prefix(&batch, 3, 1000, false, size, key), 3);
        // The byte bound, but never fewer than one.
        assert_eq!(request_prefix(&batch, 10, 2, false, size, key), 2);
        assert_eq!(request_prefix(&batch, 10, 0, false, size, key), 1);
    }

    struct Scripted {
        replies: Vec<Result<Vec<Entry>, Outcome>>,
        sent: Vec<Vec<String>>,
    }

    impl BatchApi for Scripted {
        fn next_request(&self, pending: &[Outgoing]) -> usize {
            pending.len().min(3)
        }
        async fn send(&mut self, entries: &[&Outgoing]) -> Result<Vec<Entry>, Outcome> {
            self.sent.push(
                entries
                    .iter()
                    .map(|e| {
                        String::from_utf8_lossy(e.value.as_deref().unwrap_or(b"")).into_owned()
                    })
                    .collect(),
            );
            self.replies.remove(0)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn failed_entries_are_sent_again_alone_and_in_order() {
        let batch: Vec<Outgoing> = (1..=4).map(|i| rec("k", &i.to_string())).collect();
        let refused = Entry::Refused {
            class: FailureClass::Record {
                kind: "message_too_large",
                too_large: true,
            },
            code: "invalidparametervalue".into(),
            error: "too long".into(),
        };
        let mut api = Scripted {
            replies: vec![
                Ok(vec![
                    Entry::Stored,
                    Entry::Again("throttled".into()),
                    refused.clone(),
                ]),
                Ok(vec![Entry::Stored]),
                Err(Outcome::Retry("connection reset".into())),
            ],
            sent: Vec::new(),
        };
        let outcomes = publish_in_batches(&mut api, &batch).await;
        assert_eq!(api.sent, vec![vec!["1", "2", "3"], vec!["2"]]);
        // The call ends after the refusal: the caller settles it first.
        assert_eq!(outcomes.len(), 3);
        assert_eq!(outcomes[0], Outcome::Acked);
        assert_eq!(outcomes[1], Outcome::Acked);
        assert!(matches!(outcomes[2], Outcome::Failed { .. }));
        let outcomes = publish_in_batches(&mut api, &batch[3..]).await;
        assert_eq!(api.sent[2], vec!["4"]);
        assert_eq!(outcomes, vec![Outcome::Retry("connection reset".into())]);
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_after_a_refused_entry_is_sent_in_the_call() {
        let batch: Vec<Outgoing> = (1..=3)
            .map(|i| rec(&i.to_string(), &i.to_string()))
            .collect();
        let refused = Entry::Refused {
            class: FailureClass::Record {
                kind: "tombstone",
                too_large: false,
            },
            code: "tombstone".into(),
            error: "no body".into(),
        };
        let mut api = Scripted {
            replies: vec![Ok(vec![
                Entry::Stored,
                refused,
                Entry::Again("not sent after a refused entry".into()),
            ])],
            sent: Vec::new(),
        };
        let outcomes = publish_in_batches(&mut api, &batch).await;
        assert_eq!(api.sent, vec![vec!["1", "2", "3"]]);
        assert_eq!(outcomes.len(), 2, "the third is the next call's");
        assert!(matches!(outcomes[1], Outcome::Failed { .. }));
    }

    #[tokio::test(start_paused = true)]
    async fn a_whole_request_failure_settles_the_answered_prefix_only() {
        let batch: Vec<Outgoing> = (1..=3).map(|i| rec("k", &i.to_string())).collect();
        let mut api = Scripted {
            replies: vec![
                Ok(vec![
                    Entry::Again("slow".into()),
                    Entry::Stored,
                    Entry::Stored,
                ]),
                Err(Outcome::Retry("down".into())),
            ],
            sent: Vec::new(),
        };
        let outcomes = publish_in_batches(&mut api, &batch).await;
        // The first entry never settled: the call ends there (the stored
        // ones after it go again: at least once).
        assert_eq!(outcomes, vec![Outcome::Retry("down".into())]);
    }

    #[test]
    fn bodies_and_fifo_ids() {
        assert_eq!(
            body_text(Some(&Bytes::from_static(b"{\"a\":1}"))),
            Ok("{\"a\":1}")
        );
        assert_eq!(body_text(None).unwrap_err().0, "tombstone");
        assert_eq!(
            body_text(Some(&Bytes::from_static(b"a\0b"))).unwrap_err().0,
            "invalid_body"
        );
        assert_eq!(
            body_text(Some(&Bytes::from_static(b"\xff"))).unwrap_err().0,
            "invalid_body"
        );
        assert_eq!(
            body_text(Some(&Bytes::from_static("é €".as_bytes()))),
            Ok("é €")
        );
        assert_eq!(fifo_id(b"\"order-1\""), "\"order-1\"");
        let long = fifo_id(&[b'a'; 129]);
        assert!(long.starts_with("h-") && long.len() == 66);
        assert_eq!(fifo_id(b"with space"), fifo_id(b"with space"));
        assert!(fifo_id(b"with space").starts_with("h-"));
        assert!(fifo_id(b"").starts_with("h-"));
    }

    #[test]
    fn credentials_go_together_and_stay_out_of_debug() {
        let c = AwsCredentials {
            access_key_id: Some("AKIA".into()),
            ..AwsCredentials::default()
        };
        assert!(c
            .validate("sink.sqs.credentials")
            .unwrap_err()
            .to_string()
            .contains("sink.sqs.credentials.secret_access_key"));
        let c = AwsCredentials {
            access_key_id: Some("AKIA".into()),
            secret_access_key: Some(Secret::new("s3cr3t")),
            ..AwsCredentials::default()
        };
        assert!(c.validate("s").is_ok());
        assert!(!format!("{c:?}").contains("s3cr3t"));
        let explicit = c.explicit("s").unwrap().unwrap();
        assert_eq!(explicit.access_key_id(), "AKIA");
        assert!(!format!("{explicit:?}").contains("s3cr3t"));
    }
}
