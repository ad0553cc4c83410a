//! Google Cloud Pub/Sub behind the broker seam (`sink.type = "pubsub"`),
//! through Google's official client for Rust.
//!
//! What a message is, as Debezium Server 3.6.1's `pubsub` sink publishes
//! it: the topic is `projects/<project_id>/topics/<the router's topic>`,
//! the data is the record's value bytes (empty for a tombstone), every
//! header an attribute (its value as text), and, with ordering on (the
//! default), the ordering key is `ordering_key` when set, else the record
//! key as text, else `null_key` (`default`).
//!
//! Order: Pub/Sub delivers the messages of one ordering key in the order
//! it stored them, to subscriptions with message ordering on. The client
//! sends the messages of one key one request at a time; walrelay publishes
//! in pipeline order and, when a message is not stored, sends nothing later
//! of any key before it has been stored: every later message waits and is
//! sent again. That is the rule Google's clients impose on ordered
//! publishing (a failed key is paused until the application resumes it):
//! walrelay resumes a key only once the failed message has been settled
//! (stored on a retry, dead-lettered, or the pipeline stopped before it).
//!
//! Limits, checked before sending, each a refusal of that record alone
//! (`[errors]` decides): at most 100 attributes, names of 1 to 256 bytes
//! not starting with `goog`, values of at most 1,024 bytes of text; an
//! ordering key of at most 1,024 bytes of text; data, attributes and
//! ordering key at most `max_message_bytes` (10,000,000); a message with
//! neither data nor attributes; a topic name Pub/Sub does not accept. A
//! dead letter is an ordinary message on the dead-letter topic (its
//! headers, with the context headers, as attributes).

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use google_cloud_gax::retry_policy::RetryPolicyExt;
use google_cloud_pubsub::client::{BasePublisher, Publisher as TopicPublisher};
use google_cloud_pubsub::error::PublishError;
use google_cloud_pubsub::model::Message;
use google_cloud_pubsub::retry_policy::RetryableErrors;
use serde::Deserialize;

use super::broker::{FailureClass, Guarantees};
use super::queued::{debezium_header_order, Outcome, Outgoing, Publisher};
use crate::setting::SettingError;

/// Pub/Sub's largest message (data, attributes and ordering key) and
/// largest publish request.
pub(crate) const MAX_MESSAGE_BYTES: usize = 10_000_000;
/// Most messages in one publish request.
const MAX_REQUEST_MESSAGES: u32 = 1000;
/// Most attributes on one message.
const MAX_ATTRIBUTES: usize = 100;
/// Longest attribute name, bytes.
const MAX_ATTRIBUTE_NAME_BYTES: usize = 256;
/// Longest attribute value, bytes.
const MAX_ATTRIBUTE_VALUE_BYTES: usize = 1024;
/// Longest ordering key, bytes.
const MAX_ORDERING_KEY_BYTES: usize = 1024;
/// Debezium Server's default `null.key`.
const NULL_KEY: &str = "default";
/// How long the client retries one request that failed for a passing
/// reason before walrelay's own retry takes over (Debezium Server's
/// `retry.total.timeout.ms` default).
const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 60_000;
/// The bound of a dead letter's key and value.
pub(crate) const LETTER_MAX_BYTES: usize = MAX_MESSAGE_BYTES / 2;

/// `[sink.pubsub]`: Google Cloud Pub/Sub (`debezium.sink.pubsub.*`).
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PubSubConfig {
    /// The Google Cloud project of the topics (`project.id`); unset: the
    /// environment's `GOOGLE_CLOUD_PROJECT`, else the `project_id` of the
    /// credentials file.
    #[serde(default)]
    pub(crate) project_id: Option<String>,
    /// An emulator's `host:port` (`address`): plain-text gRPC, no
    /// credentials.
    #[serde(default)]
    pub(crate) emulator_host: Option<String>,
    /// The region of a regional endpoint (`region`):
    /// `https://<region>-pubsub.googleapis.com`.
    #[serde(default)]
    pub(crate) region: Option<String>,
    /// Another endpoint than Google's global one (an `https://` URL).
    #[serde(default)]
    pub(crate) endpoint: Option<String>,
    /// A service-account key or authorized-user file; unset: Application
    /// Default Credentials (`GOOGLE_APPLICATION_CREDENTIALS`, gcloud's
    /// file, the metadata server).
    #[serde(default)]
    pub(crate) credentials_file: Option<PathBuf>,
    /// Whether messages carry ordering keys (`ordering.enabled`, default
    /// true).
    #[serde(default)]
    pub(crate) ordering: Option<bool>,
    /// One ordering key for every message (`ordering.key`).
    #[serde(default)]
    pub(crate) ordering_key: Option<String>,
    /// The ordering key of a record with a null key (`null.key`, default
    /// `default`).
    #[serde(default)]
    pub(crate) null_key: Option<String>,
    /// Largest message, bytes (default and most 10,000,000).
    #[serde(default)]
    pub(crate) max_message_bytes: Option<usize>,
    /// How long the client retries a request that failed for a passing
    /// reason before walrelay's own retry (reconnecting) takes over, ms
    /// (`retry.total.timeout.ms`, default 60000).
    #[serde(default)]
    pub(crate) request_timeout_ms: Option<u64>,
    /// Set by the pipeline: the dead-letter topic.
    #[serde(skip)]
    pub(crate) dead_letter_topic: Option<String>,
}

impl fmt::Debug for PubSubConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PubSubConfig")
            .field("project_id", &self.project_id)
            .field("emulator_host", &self.emulator_host)
            .field("region", &self.region)
            .field("endpoint", &self.endpoint)
            .field("credentials_file", &self.credentials_file)
            .field("ordering", &self.ordering)
            .field("null_key", &self.null_key)
            .field("max_message_bytes", &self.max_message_bytes)
            .finish_non_exhaustive()
    }
}

impl PubSubConfig {
    /// Checks the section; the error names the key.
    pub(crate) fn validate(&self) -> Result<(), SettingError> {
        let places = [
            ("sink.pubsub.emulator_host", self.emulator_host.is_some()),
            ("sink.pubsub.region", self.region.is_some()),
            ("sink.pubsub.endpoint", self.endpoint.is_some()),
        ];
        let set: Vec<&str> = places.iter().filter(|p| p.1).map(|p| p.0).collect();
        if set.len() > 1 {
            return Err(SettingError::invalid(
                set[1],
                format!("{} is set too: name one place to publish to", set[0]),
            ));
        }
        if let Some(host) = &self.emulator_host {
            if host.is_empty() || host.contains("://") {
                return Err(SettingError::invalid(
                    "sink.pubsub.emulator_host",
                    format!("{host:?}: must be host:port (plain-text gRPC)"),
                ));
            }
        }
        if let Some(url) = &self.endpoint {
            if !url.starts_with("https://") && !url.starts_with("http://") {
                return Err(SettingError::invalid(
                    "sink.pubsub.endpoint",
                    format!("{url:?}: must be an https:// URL"),
                ));
            }
        }
        if self.emulator_host.is_some() && self.credentials_file.is_some() {
            return Err(SettingError::invalid(
                "sink.pubsub.credentials_file",
                "an emulator takes no credentials (sink.pubsub.emulator_host is set)",
            ));
        }
        for (key, value) in [
            ("sink.pubsub.null_key", &self.null_key),
            ("sink.pubsub.ordering_key", &self.ordering_key),
        ] {
            if value
                .as_ref()
                .is_some_and(|v| v.len() > MAX_ORDERING_KEY_BYTES)
            {
                return Err(SettingError::invalid(
                    key,
                    format!("an ordering key is at most {MAX_ORDERING_KEY_BYTES} bytes"),
                ));
            }
        }
        if let Some(n) = self.max_message_bytes {
            if n == 0 || n > MAX_MESSAGE_BYTES {
                return Err(SettingError::invalid(
                    "sink.pubsub.max_message_bytes",
                    format!("{n}: must be 1 to {MAX_MESSAGE_BYTES} (Pub/Sub's largest message)"),
                ));
            }
        }
        if self.request_timeout_ms == Some(0) {
            return Err(SettingError::invalid(
                "sink.pubsub.request_timeout_ms",
                "must be above 0",
            ));
        }
        self.project().map(|_| ())
    }

    /// The project of the topics; the error names the key.
    pub(crate) fn project(&self) -> Result<String, SettingError> {
        if let Some(p) = &self.project_id {
            return check_project(p);
        }
        if let Some(p) = std::env::var("GOOGLE_CLOUD_PROJECT")
            .ok()
            .filter(|p| !p.is_empty())
        {
            return check_project(&p);
        }
        if let Some(path) = &self.credentials_file {
            if let Some(p) = read_key_file(path)?
                .get("project_id")
                .and_then(serde_json::Value::as_str)
            {
                return check_project(p);
            }
        }
        Err(SettingError::Missing {
            key: "sink.pubsub.project_id".into(),
            reason: "the project of the topics (neither GOOGLE_CLOUD_PROJECT nor the credentials file names one)".into(),
        })
    }

    /// Whether messages carry ordering keys.
    fn ordered(&self) -> bool {
        self.ordering.unwrap_or(true)
    }

    /// The largest message, bytes.
    pub(crate) fn max_bytes(&self) -> usize {
        self.max_message_bytes.unwrap_or(MAX_MESSAGE_BYTES)
    }

    /// Where requests go, for messages and `walrelay check`.
    pub(crate) fn place(&self) -> String {
        match (&self.emulator_host, &self.region, &self.endpoint) {
            (Some(host), ..) => format!("the emulator at {host}"),
            (_, Some(region), _) => format!("https://{region}-pubsub.googleapis.com"),
            (.., Some(url)) => url.clone(),
            _ => "https://pubsub.googleapis.com".to_owned(),
        }
    }

    /// The endpoint URL the client is given, if not Google's global one.
    fn endpoint_url(&self) -> Option<String> {
        match (&self.emulator_host, &self.region, &self.endpoint) {
            (Some(host), ..) => Some(format!("http://{host}")),
            (_, Some(region), _) => Some(format!("https://{region}-pubsub.googleapis.com")),
            (.., Some(url)) => Some(url.clone()),
            _ => None,
        }
    }

    /// The credentials requests are signed with.
    fn credentials(&self) -> Result<google_cloud_auth::credentials::Credentials, String> {
        use google_cloud_auth::credentials;
        if self.emulator_host.is_some() {
            return Ok(credentials::anonymous::Builder::new().build());
        }
        let Some(path) = &self.credentials_file else {
            return credentials::Builder::default()
                .build()
                .map_err(|e| format!("Application Default Credentials: {e}"));
        };
        let key = read_key_file(path).map_err(|e| e.to_string())?;
        let built = match key.get("type").and_then(serde_json::Value::as_str) {
            Some("service_account") => credentials::service_account::Builder::new(key).build(),
            Some("authorized_user") => credentials::user_account::Builder::new(key).build(),
            other => {
                return Err(format!(
                    "sink.pubsub.credentials_file {}: type {other:?} is neither a service-account key nor an authorized user",
                    path.display()
                ))
            }
        };
        built.map_err(|e| format!("sink.pubsub.credentials_file {}: {e}", path.display()))
    }

    /// The ordering key of `record`, or why it has none it can use.
    fn ordering_key_of<'a>(&'a self, record: &'a Outgoing) -> Result<&'a str, Refusal> {
        if !self.ordered() {
            return Ok("");
        }
        if let Some(fixed) = &self.ordering_key {
            return Ok(fixed);
        }
        let Some(key) = &record.key else {
            return Ok(self.null_key.as_deref().unwrap_or(NULL_KEY));
        };
        let text = std::str::from_utf8(key).map_err(|_| {
            refusal(
                "invalid_ordering_key",
                false,
                "the record key is not UTF-8 text; an ordering key must be".to_owned(),
            )
        })?;
        if text.len() > MAX_ORDERING_KEY_BYTES {
            return Err(refusal(
                "invalid_ordering_key",
                false,
                format!(
                    "the record key is {} bytes; an ordering key is at most {MAX_ORDERING_KEY_BYTES}",
                    text.len()
                ),
            ));
        }
        Ok(text)
    }
}

/// A project id as Pub/Sub names them: 6 to 30 characters (domain-scoped
/// projects have a `domain:` prefix).
fn check_project(p: &str) -> Result<String, SettingError> {
    if p.is_empty() || p.contains('/') || p.chars().any(char::is_whitespace) {
        return Err(SettingError::invalid(
            "sink.pubsub.project_id",
            format!("{p:?} is not a project id"),
        ));
    }
    Ok(p.to_owned())
}

/// The JSON of a credentials file; the error names the key and the file.
fn read_key_file(path: &std::path::Path) -> Result<serde_json::Value, SettingError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        SettingError::invalid(
            "sink.pubsub.credentials_file",
            format!("{}: {e}", path.display()),
        )
    })?;
    // The file holds a private key: serde's error could quote it, so only
    // the position is told.
    serde_json::from_str(&text).map_err(|e| {
        SettingError::invalid(
            "sink.pubsub.credentials_file",
            format!(
                "{}: not JSON (line {}, column {})",
                path.display(),
                e.line(),
                e.column()
            ),
        )
    })
}

/// Whether `topic` is a topic id Pub/Sub accepts: 3 to 255 characters,
/// a letter first, then letters, digits and `-_.~+%`, not starting with
/// `goog`.
fn valid_topic_id(topic: &str) -> bool {
    let len = topic.len();
    (3..=255).contains(&len)
        && topic.starts_with(|c: char| c.is_ascii_alphabetic())
        && topic
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.~+%".contains(c))
        && !topic.to_ascii_lowercase().starts_with("goog")
}

/// Why a record is refused for itself.
struct Refusal {
    kind: &'static str,
    too_large: bool,
    error: String,
}

fn refusal(kind: &'static str, too_large: bool, error: String) -> Refusal {
    Refusal {
        kind,
        too_large,
        error,
    }
}

impl From<Refusal> for Outcome {
    fn from(r: Refusal) -> Outcome {
        Outcome::Failed {
            class: FailureClass::Record {
                kind: r.kind,
                too_large: r.too_large,
            },
            code: r.kind.to_owned(),
            error: r.error,
        }
    }
}

/// The headers of `record` as attributes, in Debezium Server's order
/// (name, text). A header without a value is left out.
fn attributes(record: &Outgoing) -> Result<Vec<(String, String)>, Refusal> {
    let present: Vec<_> = debezium_header_order(&record.headers)
        .into_iter()
        .filter_map(|(n, v)| Some((n, v?)))
        .collect();
    if present.len() > MAX_ATTRIBUTES {
        return Err(refusal(
            "too_many_attributes",
            false,
            format!(
                "{} headers, and Pub/Sub takes at most {MAX_ATTRIBUTES} attributes",
                present.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(present.len());
    for (name, value) in present {
        if name.is_empty()
            || name.len() > MAX_ATTRIBUTE_NAME_BYTES
            || name.to_ascii_lowercase().starts_with("goog")
        {
            return Err(refusal(
                "invalid_attribute",
                false,
                format!("header {name:?}: an attribute name is 1 to {MAX_ATTRIBUTE_NAME_BYTES} bytes, not starting with \"goog\""),
            ));
        }
        let text = std::str::from_utf8(value).map_err(|_| {
            refusal(
                "invalid_attribute",
                false,
                format!("header {name:?} is not UTF-8 text"),
            )
        })?;
        if text.len() > MAX_ATTRIBUTE_VALUE_BYTES {
            return Err(refusal(
                "attribute_too_large",
                true,
                format!(
                    "header {name:?} is {} bytes; an attribute value is at most {MAX_ATTRIBUTE_VALUE_BYTES}",
                    text.len()
                ),
            ));
        }
        out.push((name.to_owned(), text.to_owned()));
    }
    Ok(out)
}

/// A connected Pub/Sub publisher: one client, a batching publisher per
/// topic.
pub(crate) struct PubSub {
    client: BasePublisher,
    topics: HashMap<String, TopicPublisher>,
    project: String,
    config: PubSubConfig,
    /// Ordering keys the client paused after a failure, resumed at the
    /// next call (once the worker has settled that failure).
    paused: Vec<(String, String)>,
}

impl Publisher for PubSub {
    const NAME: &'static str = "pubsub";
    /// Per ordering key order (see the module doc); no deduplication, no
    /// transactions.
    const GUARANTEES: Guarantees = Guarantees {
        idempotent: false,
        transactional: false,
        dedup_by_id: false,
        per_key_order: true,
    };
    const ERROR_CLASS: &'static str = "google_cloud_pubsub::Error";
    type Config = PubSubConfig;

    async fn connect(config: &PubSubConfig) -> Result<PubSub, String> {
        install_crypto_provider();
        let project = config.project().map_err(|e| e.to_string())?;
        let timeout = Duration::from_millis(
            config
                .request_timeout_ms
                .unwrap_or(DEFAULT_REQUEST_TIMEOUT_MS),
        );
        let mut builder = BasePublisher::builder()
            .with_credentials(config.credentials()?)
            .with_retry_policy(RetryableErrors.with_time_limit(timeout));
        if let Some(url) = config.endpoint_url() {
            builder = builder.with_endpoint(url);
        }
        let client = builder
            .build()
            .await
            .map_err(|e| format!("Pub/Sub client for {}: {e}", config.place()))?;
        Ok(PubSub {
            client,
            topics: HashMap::new(),
            project,
            config: config.clone(),
            paused: Vec::new(),
        })
    }

    async fn publish(&mut self, batch: &[Outgoing]) -> Vec<Outcome> {
        self.resume_paused();
        let mut outcomes = Vec::with_capacity(batch.len());
        let mut pending = Vec::with_capacity(batch.len());
        for record in batch {
            match self.message(record) {
                Ok((topic, message)) => {
                    let key = message.ordering_key.clone();
                    let publisher = self.topic(&topic);
                    pending.push((topic, key, publisher.publish(message)));
                }
                // Nothing after a refused record is sent in this call: the
                // worker settles the refusal first (it may stop the
                // pipeline), and the next call starts after it.
                Err(refused) if pending.is_empty() => return vec![refused.into()],
                Err(_) => break,
            }
        }
        let several = pending.len() > 1;
        for publisher in self.topics.values() {
            publisher.flush().await;
        }
        let mut first_failure = None;
        for (i, (topic, key, answer)) in pending.into_iter().enumerate() {
            match answer.await {
                Ok(_) if first_failure.is_none() => outcomes.push(Outcome::Acked),
                Ok(_) => {}
                Err(e) => {
                    // The client paused the key: resumed at the next call,
                    // once the worker has settled what failed.
                    if !key.is_empty() && !self.paused.contains(&(topic.clone(), key.clone())) {
                        self.paused.push((topic, key));
                    }
                    if first_failure.is_none() {
                        first_failure = Some((i, outcome_of(&e)));
                    }
                }
            }
        }
        match first_failure {
            // A refusal of a request that may have held other messages of
            // its key: this message alone decides (the others were not
            // stored either; they are sent again after it).
            Some((i, Outcome::Failed { .. })) if several => {
                outcomes.push(self.publish_alone(&batch[i]).await);
            }
            Some((_, outcome)) => outcomes.push(outcome),
            None => {}
        }
        // Nothing after the first failure is settled here: the worker
        // sends it again (a message of another key the service stored
        // meanwhile arrives twice).
        outcomes
    }
}

impl PubSub {
    /// Resumes the ordering keys the client paused after a failure (the
    /// worker has settled it since).
    fn resume_paused(&mut self) {
        for (topic, key) in self.paused.drain(..) {
            if let Some(p) = self.topics.get(&topic) {
                p.resume_publish(key);
            }
        }
    }

    /// Publishes `record` by itself (its key resumed first) and waits.
    async fn publish_alone(&mut self, record: &Outgoing) -> Outcome {
        self.resume_paused();
        let (topic, message) = match self.message(record) {
            Ok(m) => m,
            Err(refused) => return refused.into(),
        };
        let key = message.ordering_key.clone();
        let publisher = self.topic(&topic);
        let answer = publisher.publish(message);
        publisher.flush().await;
        match answer.await {
            Ok(_) => Outcome::Acked,
            Err(e) => {
                if !key.is_empty() {
                    self.paused.push((topic, key));
                }
                outcome_of(&e)
            }
        }
    }

    /// The topic path and message of `record`, or why it is refused.
    fn message(&self, record: &Outgoing) -> Result<(String, Message), Refusal> {
        if !valid_topic_id(&record.destination) {
            return Err(refusal(
                "invalid_topic",
                false,
                format!(
                    "topic {:?}: a Pub/Sub topic id is 3 to 255 letters, digits or -_.~+%, starting with a letter and not with \"goog\"",
                    &*record.destination
                ),
            ));
        }
        let topic = format!("projects/{}/topics/{}", self.project, record.destination);
        let dead_letter = self.config.dead_letter_topic.as_deref() == Some(&*record.destination);
        let key = match self.config.ordering_key_of(record) {
            Ok(key) => key,
            // A dead letter keeps its record's key where it can.
            Err(_) if dead_letter => self.config.null_key.as_deref().unwrap_or(NULL_KEY),
            Err(e) => return Err(e),
        };
        let attributes = attributes(record)?;
        let data = record.value.clone().unwrap_or_default();
        if data.is_empty() && attributes.is_empty() {
            return Err(refusal(
                "empty_message",
                false,
                "no data and no attributes: Pub/Sub refuses an empty message".to_owned(),
            ));
        }
        let size = data.len()
            + key.len()
            + attributes
                .iter()
                .map(|(n, v)| n.len() + v.len())
                .sum::<usize>();
        // A dead letter is bounded by the service alone: a record refused
        // for its size can still be dead-lettered.
        let max = if dead_letter {
            MAX_MESSAGE_BYTES
        } else {
            self.config.max_bytes()
        };
        if size > max {
            return Err(refusal(
                "message_too_large",
                true,
                format!("{size} bytes of data, attributes and ordering key, above max_message_bytes {max}"),
            ));
        }
        let message = Message::new()
            .set_data(data)
            .set_attributes(attributes)
            .set_ordering_key(key);
        Ok((topic, message))
    }

    /// The batching publisher of `topic`: thresholds at Pub/Sub's limits,
    /// because the worker's batch is sent at once ([`TopicPublisher::flush`]);
    /// no hedged requests (a hedge stores a message twice).
    fn topic(&mut self, topic: &str) -> &TopicPublisher {
        let client = &self.client;
        self.topics.entry(topic.to_owned()).or_insert_with(|| {
            client
                .publisher(topic)
                .set_message_count_threshold(MAX_REQUEST_MESSAGES)
                .set_byte_threshold(MAX_MESSAGE_BYTES as u32)
                .set_delay_threshold(Duration::from_secs(3600))
                .set_or_clear_hedging_options(None)
                .build()
        })
    }
}

/// The outcome of a message the client did not get stored.
fn outcome_of(e: &PublishError) -> Outcome {
    use google_cloud_gax::error::rpc::Code;
    let PublishError::Rpc(rpc) = e else {
        // Paused behind an earlier failure of its key, or shut down.
        return Outcome::Retry(e.to_string());
    };
    let Some(status) = rpc.status() else {
        return Outcome::Retry(format!("Pub/Sub: {rpc}"));
    };
    let (kind, class) = match status.code {
        Code::InvalidArgument => ("invalid_message", true),
        Code::NotFound => ("unknown_topic", true),
        // Credentials, permissions, a missing project, quotas, an outage:
        // the events wait for an operator or the service.
        _ => ("", false),
    };
    if !class {
        return Outcome::Retry(format!("Pub/Sub {:?}: {}", status.code, status.message));
    }
    Outcome::Failed {
        class: FailureClass::Record {
            kind,
            too_large: false,
        },
        code: kind.to_owned(),
        error: format!("Pub/Sub {:?}: {}", status.code, status.message),
    }
}

/// Google's client uses rustls with the process's default provider; walrelay
/// builds ring (not aws-lc), installed once here. rustls 0.23.48 deprecates
/// ring's provider for its lack of post-quantum key exchange, which only
/// aws-lc offers; ring keeps the C build out.
#[allow(deprecated)]
fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// What `walrelay check` reads: each topic (`GetTopic`), or why there is
/// none. An error of the credentials or the endpoint is the connection's.
pub(crate) async fn probe(
    config: &PubSubConfig,
    topics: &[String],
) -> Result<(String, Vec<(String, Result<String, String>)>), String> {
    use google_cloud_pubsub::client::TopicAdmin;
    install_crypto_provider();
    let project = config.project().map_err(|e| e.to_string())?;
    let mut builder = TopicAdmin::builder().with_credentials(config.credentials()?);
    if let Some(url) = config.endpoint_url() {
        builder = builder.with_endpoint(url);
    }
    let admin = builder
        .build()
        .await
        .map_err(|e| format!("Pub/Sub client for {}: {e}", config.place()))?;
    let mut found = Vec::with_capacity(topics.len());
    for name in topics {
        let path = format!("projects/{project}/topics/{name}");
        let answer = match admin.get_topic().set_topic(&path).send().await {
            Ok(t) => Ok(if t.message_retention_duration.is_some() {
                "found (retains messages)".to_owned()
            } else {
                "found".to_owned()
            }),
            Err(e) => match e.status() {
                Some(s) if s.code == google_cloud_gax::error::rpc::Code::NotFound => {
                    Err(format!("{path} does not exist"))
                }
                Some(s) if found.is_empty() => {
                    return Err(format!("{:?}: {}", s.code, s.message));
                }
                _ if found.is_empty() => return Err(e.to_string()),
                _ => Err(e.to_string()),
            },
        };
        found.push((name.clone(), answer));
    }
    Ok((config.place(), found))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::RecordHeader;
    use bytes::Bytes;

    fn config() -> PubSubConfig {
        PubSubConfig {
            project_id: Some("walrelay-test".into()),
            emulator_host: Some("127.0.0.1:8085".into()),
            ..PubSubConfig::default()
        }
    }

    fn record(key: Option<&[u8]>, value: Option<&[u8]>, headers: &[(&str, &str)]) -> Outgoing {
        Outgoing {
            destination: "outbox.event.order".into(),
            key: key.map(Bytes::copy_from_slice),
            value: value.map(Bytes::copy_from_slice),
            headers: headers
                .iter()
                .map(|(n, v)| RecordHeader {
                    name: (*n).into(),
                    value: Some(Bytes::copy_from_slice(v.as_bytes())),
                })
                .collect(),
            dedup_id: None,
        }
    }

    #[test]
    fn topic_ids_follow_pubsub_rules() {
        assert!(valid_topic_id("outbox.event.order"));
        assert!(valid_topic_id("abc"));
        assert!(!valid_topic_id("ab"));
        assert!(!valid_topic_id("1abc"));
        assert!(!valid_topic_id("google-things"));
        assert!(!valid_topic_id("with space"));
        assert!(!valid_topic_id(&"a".repeat(256)));
    }

    #[test]
    fn ordering_key_is_the_record_key_or_null_key() {
        let c = config();
        assert_eq!(
            c.ordering_key_of(&record(Some(b"42"), Some(b"v"), &[]))
                .ok(),
            Some("42")
        );
        assert_eq!(
            c.ordering_key_of(&record(None, Some(b"v"), &[])).ok(),
            Some("default")
        );
        let fixed = PubSubConfig {
            ordering_key: Some("all".into()),
            ..config()
        };
        assert_eq!(
            fixed.ordering_key_of(&record(Some(b"42"), None, &[])).ok(),
            Some("all")
        );
        let off = PubSubConfig {
            ordering: Some(false),
            ..config()
        };
        assert_eq!(
            off.ordering_key_of(&record(Some(b"42"), None, &[])).ok(),
            Some("")
        );
        let not_text = record(Some(&[0xff, 0xfe]), None, &[]);
        let bad = c.ordering_key_of(&not_text);
        assert_eq!(bad.err().map(|r| r.kind), Some("invalid_ordering_key"));
        let long = record(Some(&[b'k'; MAX_ORDERING_KEY_BYTES + 1]), None, &[]);
        let bad = c.ordering_key_of(&long);
        assert_eq!(bad.err().map(|r| r.kind), Some("invalid_ordering_key"));
    }

    #[test]
    fn attributes_are_checked_before_sending() {
        let ok = attributes(&record(None, None, &[("id", "1"), ("type", "t")])).ok();
        assert_eq!(ok.map(|a| a.len()), Some(2));
        let goog = attributes(&record(None, None, &[("googthing", "1")]));
        assert_eq!(goog.err().map(|r| r.kind), Some("invalid_attribute"));
        let big = "x".repeat(MAX_ATTRIBUTE_VALUE_BYTES + 1);
        let r = attributes(&record(None, None, &[("id", &big)]));
        assert_eq!(
            r.err().map(|r| (r.kind, r.too_large)),
            Some(("attribute_too_large", true))
        );
        let names: Vec<String> = (0..=MAX_ATTRIBUTES).map(|i| format!("h{i}")).collect();
        let many: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "v")).collect();
        let r = attributes(&record(None, None, &many));
        assert_eq!(r.err().map(|r| r.kind), Some("too_many_attributes"));
    }

    #[test]
    fn validate_names_the_key() {
        assert!(config().validate().is_ok());
        let both = PubSubConfig {
            region: Some("europe-west1".into()),
            ..config()
        };
        let e = both.validate().unwrap_err().to_string();
        assert!(e.contains("sink.pubsub.region"), "{e}");
        let url = PubSubConfig {
            emulator_host: Some("http://127.0.0.1:1".into()),
            ..config()
        };
        let e = url.validate().unwrap_err().to_string();
        assert!(e.contains("sink.pubsub.emulator_host"), "{e}");
        let big = PubSubConfig {
            max_message_bytes: Some(MAX_MESSAGE_BYTES + 1),
            ..config()
        };
        let e = big.validate().unwrap_err().to_string();
        assert!(e.contains("sink.pubsub.max_message_bytes"), "{e}");
    }

    #[test]
    fn credentials_file_errors_never_quote_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key.json");
        std::fs::write(&path, "{\"private_key\": \"-----BEGIN SECRET\" oops").unwrap();
        let c = PubSubConfig {
            project_id: None,
            emulator_host: None,
            credentials_file: Some(path),
            ..config()
        };
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("sink.pubsub.credentials_file"), "{e}");
        assert!(!e.contains("BEGIN SECRET"), "{e}");
    }
}
