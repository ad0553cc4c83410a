//! NATS JetStream behind the broker seam, as Debezium Server's
//! `nats-jetstream` sink publishes: the record's value to the subject the
//! router named (the topic name as it is), its headers as NATS headers
//! (null-valued ones left out), no key, and a record with a null value not
//! published at all (Debezium Server skips it and counts it processed).
//! Each publish waits for JetStream's `PubAck`, which is the
//! acknowledgement the tracker hears.
//!
//! What walrelay adds on purpose: `Nats-Msg-Id` = the event id (on by
//! default, `message_id = false` turns it off), so that JetStream's
//! duplicate window (`duplicate_window`, 2 minutes by default) drops an
//! event published again after a crash or a retry: effectively once
//! within the window, at least once beyond it.
//!
//! Order: one connection, records published in the order the pipeline
//! sent them and acknowledged in that order; after a failure the worker
//! publishes again from the first record not acknowledged, so a subject
//! keeps the events' order unless JetStream stored a later record of the
//! batch while refusing an earlier one (then the earlier one follows it,
//! once; its later copies are dropped as duplicates).
//!
//! Publishing speaks the protocol itself ([`wire`], [`conn`]): a batch is
//! one buffer of `HPUB`s written at once, and every `PubAck` comes back on
//! one subscription. async-nats stays for what is not per event: creating
//! the stream and `walrelay check`.

mod conn;
mod wire;

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use async_nats::jetstream::{self, stream};
use async_nats::ConnectOptions;
use bytes::{Bytes, BytesMut};
use serde::Deserialize;

use self::conn::{Answer, Conn, Event};
use super::broker::{FailureClass, Guarantees};
use super::queued::{debezium_header_order, Outcome, Outgoing, Publisher};
use crate::secret::Secret;
use crate::setting::SettingError;

/// The stream Debezium Server creates with `create-stream=true`.
pub(crate) const DEFAULT_STREAM: &str = "DebeziumStream";
/// The description Debezium Server gives the stream it creates.
pub(crate) const DEBEZIUM_STREAM_DESCRIPTION: &str =
    "The debezium stream, contains messages which are coming from debezium";
/// The description of the stream `create_stream` makes in the native form.
const WALRELAY_STREAM_DESCRIPTION: &str = "Outbox events published by walrelay";
/// The subjects Debezium Server's stream captures by default: three
/// tokens, as `outbox.event.<aggregate type>` has.
pub(crate) const DEFAULT_SUBJECTS: &str = "*.*.*";
/// NATS's default `max_payload`: what a dead-letter record must fit.
pub(crate) const DEFAULT_MAX_PAYLOAD: usize = 1 << 20;

/// `[sink.nats]`: NATS JetStream (`debezium.sink.nats-jetstream.*`).
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NatsConfig {
    /// Server URLs, comma-separated (`nats://host:4222`, `tls://...`).
    pub(crate) url: String,
    /// Create the stream at start when it does not exist (Debezium
    /// Server's `create-stream`, mostly for tests); off, the stream must
    /// exist.
    #[serde(default)]
    pub(crate) create_stream: bool,
    /// Name of the stream `create_stream` creates (Debezium Server's is
    /// always `DebeziumStream`).
    #[serde(default)]
    pub(crate) stream: Option<String>,
    /// Its description: Debezium Server's when the configuration is
    /// Debezium Server's (set by that translation; not a key).
    #[serde(skip)]
    pub(crate) stream_description: Option<&'static str>,
    /// Subjects that stream captures (default `*.*.*`).
    #[serde(default)]
    pub(crate) subjects: Option<Vec<String>>,
    /// Its storage: `memory` (Debezium Server's default) or `file`.
    #[serde(default)]
    pub(crate) storage: Option<String>,
    /// User name, with `password`.
    #[serde(default)]
    pub(crate) user: Option<String>,
    /// Password of `user`.
    #[serde(default)]
    pub(crate) password: Option<Secret>,
    /// A user JWT, with `seed` (decentralised authentication).
    #[serde(default)]
    pub(crate) jwt: Option<Secret>,
    /// The user's NKey seed that signs the server's nonce.
    #[serde(default)]
    pub(crate) seed: Option<Secret>,
    /// An authentication token.
    #[serde(default)]
    pub(crate) token: Option<Secret>,
    /// CA certificates (PEM) that sign the server's; setting it requires
    /// TLS.
    #[serde(default)]
    pub(crate) tls_ca_file: Option<PathBuf>,
    /// Client certificate (PEM), with `tls_key_file`.
    #[serde(default)]
    pub(crate) tls_cert_file: Option<PathBuf>,
    /// Client key (PEM).
    #[serde(default)]
    pub(crate) tls_key_file: Option<PathBuf>,
    /// Set `Nats-Msg-Id` to the event id (default on).
    #[serde(default)]
    pub(crate) message_id: Option<bool>,
    /// How long a publish waits for its `PubAck` before it is published
    /// again (default 10 s).
    #[serde(default)]
    pub(crate) ack_timeout_ms: Option<u64>,
}

impl fmt::Debug for NatsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NatsConfig")
            .field("url", &self.shown_url())
            .field("create_stream", &self.create_stream)
            .field("stream", &self.stream)
            .field("stream_description", &self.stream_description)
            .field("subjects", &self.subjects)
            .field("storage", &self.storage)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("jwt", &self.jwt.as_ref().map(|_| "<redacted>"))
            .field("seed", &self.seed.as_ref().map(|_| "<redacted>"))
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("tls_ca_file", &self.tls_ca_file)
            .field("tls_cert_file", &self.tls_cert_file)
            .field("tls_key_file", &self.tls_key_file)
            .field("message_id", &self.message_id)
            .field("ack_timeout_ms", &self.ack_timeout_ms)
            .finish()
    }
}

impl NatsConfig {
    /// Checks the section; the error names the key.
    pub(crate) fn validate(&self) -> Result<(), SettingError> {
        if self.url.split(',').all(|u| u.trim().is_empty()) {
            return Err(SettingError::invalid("sink.nats.url", "must not be empty"));
        }
        match self.storage.as_deref() {
            None | Some("memory" | "file") => {}
            Some(other) => {
                return Err(SettingError::invalid(
                    "sink.nats.storage",
                    format!("{other:?}: must be \"memory\" or \"file\""),
                ))
            }
        }
        if self.user.is_some() != self.password.is_some() {
            return Err(SettingError::invalid(
                "sink.nats.password",
                "user and password go together",
            ));
        }
        if self.jwt.is_some() != self.seed.is_some() {
            return Err(SettingError::invalid(
                "sink.nats.seed",
                "jwt and seed go together (the seed signs the server's nonce)",
            ));
        }
        if self.tls_cert_file.is_some() != self.tls_key_file.is_some() {
            return Err(SettingError::invalid(
                "sink.nats.tls_key_file",
                "tls_cert_file and tls_key_file go together",
            ));
        }
        if self.ack_timeout_ms == Some(0) {
            return Err(SettingError::invalid(
                "sink.nats.ack_timeout_ms",
                "must be above 0",
            ));
        }
        if !self.create_stream && (self.stream.is_some() || self.subjects.is_some()) {
            return Err(SettingError::invalid(
                "sink.nats.stream",
                "stream, subjects and storage describe the stream create_stream = true creates; without it they would be ignored",
            ));
        }
        Ok(())
    }

    /// The largest record the server takes (its default `max_payload`;
    /// the server's own answer bounds every publish anyway).
    pub(crate) fn max_payload_hint(&self) -> usize {
        DEFAULT_MAX_PAYLOAD
    }

    fn ack_timeout(&self) -> Duration {
        Duration::from_millis(self.ack_timeout_ms.unwrap_or(10_000))
    }

    fn options(&self) -> Result<ConnectOptions, String> {
        let mut o = ConnectOptions::new()
            .name("walrelay")
            .connection_timeout(Duration::from_secs(5))
            // walrelay reconnects itself (a new client after a failure).
            .max_reconnects(Some(1));
        if let (Some(user), Some(password)) = (&self.user, &self.password) {
            o = o.user_and_password(user.clone(), password.expose().to_owned());
        }
        if let (Some(jwt), Some(seed)) = (&self.jwt, &self.seed) {
            let creds = format!(
                "-----BEGIN NATS USER JWT-----\n{}\n------END NATS USER JWT------\n\n\
                 -----BEGIN USER NKEY SEED-----\n{}\n------END USER NKEY SEED------\n",
                jwt.expose(),
                seed.expose()
            );
            o = o
                .credentials(&creds)
                .map_err(|e| format!("sink.nats.jwt / sink.nats.seed: {e}"))?;
        }
        if let Some(token) = &self.token {
            o = o.token(token.expose().to_owned());
        }
        if let Some(ca) = &self.tls_ca_file {
            o = o.add_root_certificates(ca.clone()).require_tls(true);
        }
        if let (Some(cert), Some(key)) = (&self.tls_cert_file, &self.tls_key_file) {
            o = o
                .add_client_certificate(cert.clone(), key.clone())
                .require_tls(true);
        }
        Ok(o)
    }

    /// The URLs as they may be shown (logs, `Debug`, `walrelay check`):
    /// credentials written into a URL (`nats://user:password@host`)
    /// replaced by `<redacted>`.
    pub(crate) fn shown_url(&self) -> String {
        self.url
            .split(',')
            .map(|u| crate::secret::redact_userinfo(u.trim()))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn servers(&self) -> Vec<String> {
        self.url
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(str::to_owned)
            .collect()
    }
}

/// An async-nats client with the section's servers, credentials and TLS
/// (for `walrelay check` and creating the stream; publishing is
/// [`conn::Conn`]'s).
async fn async_nats_client(config: &NatsConfig) -> Result<async_nats::Client, String> {
    let servers: Vec<async_nats::ServerAddr> = config
        .servers()
        .iter()
        .map(|u| {
            u.parse()
                .map_err(|e| format!("sink.nats.url {:?}: {e}", crate::secret::redact_userinfo(u)))
        })
        .collect::<Result<_, _>>()?;
    let client = config
        .options()?
        .connect(servers)
        .await
        .map_err(|e| format!("cannot connect to {}: {e}", config.shown_url()))?;
    Ok(client)
}

/// What `walrelay check` reads of a NATS server (never creating
/// anything): the server's name and version, and whether JetStream
/// answers for the account.
pub(crate) async fn probe(config: &NatsConfig) -> Result<(String, jetstream::Context), String> {
    let client = async_nats_client(config).await?;
    let info = client.server_info();
    let context = jetstream::new(client);
    context
        .query_account()
        .await
        .map_err(|e| format!("JetStream does not answer ({e}); start nats-server with -js"))?;
    Ok((
        format!(
            "nats-server {} ({}), JetStream on",
            info.version, info.server_name
        ),
        context,
    ))
}

/// The stream that captures `subject`, if any.
pub(crate) async fn stream_for(
    context: &jetstream::Context,
    subject: &str,
) -> Result<Option<String>, String> {
    match context.stream_by_subject(subject).await {
        Ok(name) => Ok(Some(name)),
        Err(e) if e.to_string().to_lowercase().contains("not found") => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// A connected JetStream publisher.
pub(crate) struct Nats {
    conn: Conn,
    message_id: bool,
    ack_timeout: Duration,
    /// The batch's bytes, kept between batches.
    out: BytesMut,
}

impl Publisher for Nats {
    const NAME: &'static str = "nats-jetstream";
    /// JetStream drops a record whose `Nats-Msg-Id` it stored within the
    /// duplicate window, and one connection keeps the order; it has no
    /// transactions and no idempotent producer beyond that window.
    const GUARANTEES: Guarantees = Guarantees {
        idempotent: false,
        transactional: false,
        dedup_by_id: true,
        per_key_order: true,
    };
    const ERROR_CLASS: &'static str = "io.nats.jetstream.api.v1.pub_ack_response";
    type Config = NatsConfig;

    async fn connect(config: &NatsConfig) -> Result<Nats, String> {
        if config.create_stream {
            create_stream(config).await?;
        }
        Ok(Nats {
            conn: Conn::open(config).await?,
            message_id: config.message_id.unwrap_or(true),
            ack_timeout: config.ack_timeout(),
            out: BytesMut::with_capacity(64 * 1024),
        })
    }

    async fn publish(&mut self, batch: &[Outgoing]) -> Vec<Outcome> {
        // Outcomes known before sending (no value, a bad subject or
        // header); the others wait for their answer by sequence number.
        let mut outcomes: Vec<Option<Outcome>> = Vec::with_capacity(batch.len());
        // The batch positions of the records sent; the n-th of them has
        // sequence number first_seq + n.
        let mut sent: Vec<usize> = Vec::with_capacity(batch.len());
        let mut first_seq = None;
        self.out.clear();
        for (i, record) in batch.iter().enumerate() {
            let known = match self.frame(record) {
                Ok(Some((headers, value))) => {
                    let (reply, seq) = self.conn.reply();
                    first_seq.get_or_insert(seq);
                    let headers = headers.as_deref();
                    wire::publish(&mut self.out, &record.destination, &reply, headers, value);
                    sent.push(i);
                    None
                }
                // Debezium Server publishes nothing for a null value.
                Ok(None) => Some(Outcome::Acked),
                Err(refusal) => Some(refusal),
            };
            outcomes.push(known);
        }
        let mut waiting = sent.len();
        let mut broken = None;
        if waiting > 0 {
            if let Err(e) = self.conn.write(&self.out).await {
                broken = Some(e);
            }
        }
        let first_seq = first_seq.unwrap_or(0);
        let deadline = tokio::time::Instant::now() + self.ack_timeout;
        while waiting > 0 && broken.is_none() {
            match self.conn.event(deadline).await {
                None => {
                    broken = Some(format!(
                        "no PubAck from {} within {:?}",
                        self.conn.origin, self.ack_timeout
                    ));
                }
                Some(Event::Answer { seq, answer }) => {
                    let Some(&i) = seq
                        .checked_sub(first_seq)
                        .and_then(|n| sent.get(usize::try_from(n).ok()?))
                    else {
                        continue;
                    };
                    if outcomes[i].is_none() {
                        outcomes[i] = Some(answer_outcome(&batch[i].destination, answer));
                        waiting -= 1;
                    }
                }
                Some(Event::ServerError(text)) => {
                    broken = Some(format!("{} answered -ERR {text:?}", self.conn.origin));
                }
                Some(Event::Closed(why)) => {
                    broken = Some(format!(
                        "the connection to {} broke: {why}",
                        self.conn.origin
                    ));
                }
            }
        }
        let mut done = Vec::with_capacity(outcomes.len());
        for outcome in outcomes {
            match outcome {
                Some(o) => done.push(o),
                None => {
                    done.push(Outcome::Retry(
                        broken.unwrap_or_else(|| "no answer".to_owned()),
                    ));
                    break;
                }
            }
        }
        done
    }
}

/// A record as it goes out: its header block (if it has headers) and its
/// value.
type Frame<'r> = (Option<Vec<u8>>, &'r [u8]);

impl Nats {
    /// The record's header block and value as they go out; `None` for a
    /// null value (not published); a refusal when NATS cannot carry it.
    fn frame<'r>(&self, record: &'r Outgoing) -> Result<Option<Frame<'r>>, Outcome> {
        let Some(value) = &record.value else {
            return Ok(None);
        };
        check_subject(&record.destination).map_err(|why| refused("invalid_subject", false, why))?;
        let mut lines: Vec<(&str, &[u8])> = nats_header_order(&record.headers)
            .into_iter()
            .map(|(name, value)| (name, &value[..]))
            .collect();
        for (name, value) in &lines {
            if !is_header_name(name)
                || value.contains(&b'\r')
                || value.contains(&b'\n')
                || std::str::from_utf8(value).is_err()
            {
                return Err(refused(
                    "invalid_header",
                    false,
                    format!(
                        "header {name:?} cannot be a NATS header (a name without ':' or spaces, a one-line UTF-8 value)"
                    ),
                ));
            }
        }
        if let (true, Some(id)) = (self.message_id, &record.dedup_id) {
            lines.push(("Nats-Msg-Id", id.as_bytes()));
        }
        let headers = (!lines.is_empty()).then(|| wire::header_block(lines));
        let size = headers.as_ref().map_or(0, Vec::len) + value.len();
        let max = self.conn.info.max_payload;
        if max > 0 && size > max {
            return Err(refused(
                "message_too_large",
                true,
                format!(
                    "a message of {size} bytes is larger than the server's max_payload of {max} bytes"
                ),
            ));
        }
        Ok(Some((headers, value)))
    }
}

/// The headers in the order Debezium Server's sink has jnats write them:
/// its Java `HashMap` of the record's headers (`put`: a repeated name
/// keeps its first place and its last value), jnats's `Headers` map filled
/// from it with `computeIfAbsent` (names sharing a bucket reversed), and
/// the copy of that map JetStream's publish makes, whose table is sized to
/// the count ([`crate::connect::java::java_hash_map_copy_capacity`]): 3
/// headers iterate in a 4-bucket table's order, 5 in an 8-bucket one's.
/// Null values are left out, as the sink does.
fn nats_header_order(headers: &[crate::router::RecordHeader]) -> Vec<(&str, &Bytes)> {
    use crate::connect::java::{
        java_compute_if_absent_order, java_hash_map_copy_capacity, java_hash_map_order_sized,
    };
    let put: Vec<(&str, &Bytes)> = debezium_header_order(headers)
        .into_iter()
        .filter_map(|(name, value)| Some((name, value?)))
        .collect();
    let capacity = java_hash_map_copy_capacity(put.len());
    java_hash_map_order_sized(java_compute_if_absent_order(put), capacity)
}

/// Creates the stream `create_stream` asks for (when missing), with
/// async-nats: once per connection, not per event.
async fn create_stream(config: &NatsConfig) -> Result<(), String> {
    let client = async_nats_client(config).await?;
    let context = jetstream::new(client);
    let name = config.stream.as_deref().unwrap_or(DEFAULT_STREAM);
    let subjects = config
        .subjects
        .clone()
        .unwrap_or_else(|| vec![DEFAULT_SUBJECTS.to_owned()]);
    let storage = match config.storage.as_deref() {
        Some("file") => stream::StorageType::File,
        _ => stream::StorageType::Memory,
    };
    context
        .get_or_create_stream(stream::Config {
            name: name.to_owned(),
            description: Some(
                config
                    .stream_description
                    .unwrap_or(WALRELAY_STREAM_DESCRIPTION)
                    .to_owned(),
            ),
            subjects,
            storage,
            ..Default::default()
        })
        .await
        .map_err(|e| format!("cannot create the stream {name}: {e}"))?;
    Ok(())
}

/// What JetStream's answer to one publish means.
fn answer_outcome(subject: &str, answer: Answer) -> Outcome {
    match answer {
        // No stream captures the subject (or JetStream is recovering
        // after a restart): nothing is stored, so it is published again;
        // the slot holds the events meanwhile.
        Answer::Status(503) => Outcome::Retry(format!(
            "no responders for {subject:?}: no JetStream stream captures the subject (yet); create one, or set create_stream"
        )),
        Answer::Status(code) => Outcome::Retry(format!("status {code} for {subject:?}")),
        Answer::Json(json) => match serde_json::from_slice::<wire::PubAck>(&json) {
            Ok(wire::PubAck { error: Some(e), .. }) => jetstream_error(format!(
                "{} (code {}, err_code={})",
                e.description, e.code, e.err_code
            )),
            Ok(wire::PubAck { stream: Some(_), .. }) => Outcome::Acked,
            _ => Outcome::Retry(format!(
                "an answer that is not a PubAck for {subject:?}: {}",
                String::from_utf8_lossy(&json)
            )),
        },
    }
}

/// An error JetStream answered with (`err_code` in the text): limits of
/// the stream refuse the record for good; anything else is retried.
fn jetstream_error(text: String) -> Outcome {
    // 10054: message size exceeds the stream's max_msg_size.
    // 10077: the stream is full and discards new messages.
    if text.contains("10054") {
        return refused("message_too_large", true, text);
    }
    if text.contains("10077") || text.contains("maximum messages exceeded") {
        return refused("stream_full", false, text);
    }
    Outcome::Retry(text)
}

fn refused(kind: &'static str, too_large: bool, error: String) -> Outcome {
    Outcome::Failed {
        class: FailureClass::Record { kind, too_large },
        code: kind.to_owned(),
        error,
    }
}

/// A subject NATS accepts for a publish: dot-separated tokens, none empty,
/// no whitespace, no wildcard.
fn check_subject(subject: &str) -> Result<(), String> {
    let bad = subject.is_empty()
        || subject
            .split('.')
            .any(|t| t.is_empty() || t == "*" || t == ">")
        || subject.chars().any(char::is_whitespace);
    if bad {
        return Err(format!(
            "{subject:?} is not a NATS subject to publish to (dot-separated tokens, no whitespace or wildcard)"
        ));
    }
    Ok(())
}

fn is_header_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic() && b != b':')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_a_url_are_never_shown() {
        let config = NatsConfig {
            url: "nats://alice:hunter2@n1:4222, tls://tok3n@n2:4222/x,nats://n3:4222".to_owned(),
            ..NatsConfig::default()
        };
        let shown = config.shown_url();
        assert_eq!(
            shown,
            "nats://<redacted>@n1:4222,tls://<redacted>@n2:4222/x,nats://n3:4222"
        );
        let debug = format!("{config:?}");
        assert!(
            !debug.contains("hunter2") && !debug.contains("tok3n"),
            "{debug}"
        );
    }

    #[test]
    fn subjects_are_checked_before_publishing() {
        assert!(check_subject("outbox.event.order").is_ok());
        assert!(check_subject("outbox..order").is_err());
        assert!(check_subject("outbox.*.order").is_err());
        assert!(check_subject("outbox event").is_err());
        assert!(check_subject("").is_err());
    }

    #[test]
    fn the_section_refuses_half_credentials_by_key() {
        let c = NatsConfig {
            url: "nats://127.0.0.1:4222".into(),
            user: Some("u".into()),
            ..NatsConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("sink.nats.password"));
        let c = NatsConfig {
            url: "nats://127.0.0.1:4222".into(),
            subjects: Some(vec!["a.>".into()]),
            ..NatsConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("sink.nats.stream"));
        let c = NatsConfig {
            url: " , ".into(),
            ..NatsConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("sink.nats.url"));
    }

    #[test]
    fn secrets_stay_out_of_debug() {
        let c = NatsConfig {
            url: "nats://h".into(),
            user: Some("u".into()),
            password: Some(Secret::new("hunter2")),
            token: Some(Secret::new("tok-secret")),
            ..NatsConfig::default()
        };
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("tok-secret"),
            "{shown}"
        );
    }

    #[test]
    fn stream_limits_refuse_the_record_and_the_rest_is_retried() {
        assert!(matches!(
            jetstream_error("maximum message size exceeded (err_code=10054)".into()),
            Outcome::Failed { code, .. } if code == "message_too_large"
        ));
        assert!(matches!(
            jetstream_error("timeout".into()),
            Outcome::Retry(_)
        ));
    }
}
