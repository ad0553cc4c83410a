//! RabbitMQ streams over the native stream protocol (port 5552) behind the
//! broker seam, as Debezium Server 3.6.1's `rabbitmqstream` sink publishes
//! (`RabbitMqStreamNativeChangeConsumer`, docs/debezium-server-sinks.md §6):
//! one AMQP 1.0 message per record to the stream `stream` names, or to the
//! stream named after the topic when it is unset (the default); the
//! message's application-properties are the record headers, name → string;
//! its properties carry only `message-id`, the record key as a string; its
//! one data section is the value's bytes, or `null_value` (`default`) for a
//! null value. A stream that does not exist is created on first use (with
//! `stream_max_age_s`, `stream_max_length_bytes`, `stream_max_segment_size_bytes`),
//! as Debezium Server always does; `create_streams = false` refuses a
//! record whose stream is missing instead (`no_stream`, `[errors]` applies).
//!
//! Acknowledgement: the broker's publish confirm, per message. A batch is
//! handed to one producer per stream, then every confirm is awaited
//! (within `confirm_timeout_ms` for the batch, 30 s by default as Debezium
//! Server's `batchConfirmTimeout`). A publish error the broker reports for
//! a message, a broken connection or a confirm not received in time
//! publishes again from the first record not confirmed, on new
//! connections; access refused stops the sink; a message larger than the
//! connection's frame is refused (`message_too_large`) before it is sent,
//! since the broker would close the connection for it.
//!
//! Deduplication: with `producer_name` set the producer is named, and the
//! broker drops a message whose publishing id is not above the last one
//! it stored for that name and stream (it still confirms it). walrelay
//! numbers each connection's messages from the broker's last id + 1 (never
//! from 0 again, which the stream clients do when the last id is 0 and so
//! would have a new message dropped as a duplicate). The ids are not the
//! events': a record published again after a crash or a retry gets a new
//! id and is stored again. So a named producer gives what Debezium
//! Server's gives (the broker knows the producer and its last id), not
//! deduplication of republished events: at least once.
//!
//! Order: records are handed to the producers in the order the pipeline
//! sent them and a stream stores one producer's messages in that order;
//! after a failure the worker publishes again from the first record not
//! confirmed, so a stream keeps the events' order unless the broker stored
//! a later record of the batch while refusing an earlier one.
//!
//! Never logs payloads, keys or the password.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use rabbitmq_stream_client::error::ClientError;
use rabbitmq_stream_client::types::{
    Message, MessageResult, ResponseCode, ResponseKind, SimpleValue,
};
use rabbitmq_stream_client::{Client, ClientOptions, TlsConfiguration};
use rabbitmq_stream_protocol::codec::Encoder;
use serde::Deserialize;
use tokio::sync::mpsc;
use tokio::time::{timeout, timeout_at, Instant};

use super::broker::{FailureClass, Guarantees};
use super::queued::{Outcome, Outgoing, Publisher};
use crate::secret::Secret;
use crate::setting::SettingError;

/// The stream protocol's port (Debezium Server's `port`).
const DEFAULT_PORT: u16 = 5552;
/// Debezium Server's `batchConfirmTimeout` (30 s).
const DEFAULT_CONFIRM_TIMEOUT_MS: u64 = 30_000;
/// Debezium Server's `rpcTimeout` (10 s): connecting, creating a stream,
/// declaring a producer.
const DEFAULT_RPC_TIMEOUT_MS: u64 = 10_000;
/// Debezium Server's `producer.batchSize`: messages per publish frame.
const DEFAULT_BATCH_SIZE: usize = 100;
/// The client's frame size request (1 MiB), RabbitMQ's default too.
const DEFAULT_MAX_FRAME: u32 = 1 << 20;
/// Room in a frame for what is not the record's bytes (the publish
/// command, the AMQP 1.0 sections).
const FRAME_OVERHEAD: usize = 1024;
/// Debezium Server's `null.value`.
const NULL_DEFAULT: &str = "default";
/// A publish frame's own bytes: size, key, version, publisher id, count.
const PUBLISH_OVERHEAD: usize = 13;
/// Each message's bytes in a publish frame besides its AMQP 1.0 encoding:
/// publishing id, length.
const MESSAGE_OVERHEAD: usize = 12;

/// `[sink.rabbitmqstream]`: RabbitMQ streams over the stream protocol
/// (`debezium.sink.rabbitmqstream.*`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RabbitMqStreamConfig {
    /// Server host (default `localhost`). The client then connects to the
    /// address the broker advertises for each stream's leader
    /// (`stream.advertised_host`, `stream.advertised_port`).
    #[serde(default)]
    pub(crate) host: Option<String>,
    /// Stream protocol port (default 5552).
    #[serde(default)]
    pub(crate) port: Option<u16>,
    /// Virtual host (default `/`).
    #[serde(default)]
    pub(crate) vhost: Option<String>,
    /// User name (default `guest`).
    #[serde(default)]
    pub(crate) user: Option<String>,
    /// Password (default `guest`); never shown.
    #[serde(default)]
    pub(crate) password: Option<Secret>,
    /// TLS; the server is verified against `tls_ca_file`, which it needs.
    #[serde(default)]
    pub(crate) tls: bool,
    /// CA certificates (PEM) that sign the server's.
    #[serde(default)]
    pub(crate) tls_ca_file: Option<PathBuf>,
    /// Client certificate (PEM), with `tls_key_file`.
    #[serde(default)]
    pub(crate) tls_cert_file: Option<PathBuf>,
    /// Client key (PEM).
    #[serde(default)]
    pub(crate) tls_key_file: Option<PathBuf>,
    /// Heartbeat asked of the server, seconds (default 60).
    #[serde(default)]
    pub(crate) heartbeat_s: Option<u32>,
    /// Largest frame asked for, bytes (default 1 MiB; 0: the server's).
    #[serde(default)]
    pub(crate) max_frame_size: Option<u32>,
    /// Debezium Server's `id` (the connections' name); accepted, but the
    /// stream client walrelay uses (0.4) sends no connection name, so the
    /// management UI shows the connections unnamed.
    #[serde(default)]
    pub(crate) client_name: Option<String>,
    /// Bound of connecting, creating a stream, declaring a producer, ms
    /// (default 10000).
    #[serde(default)]
    pub(crate) rpc_timeout_ms: Option<u64>,
    /// One stream for every record; unset: the stream named after the
    /// record's topic.
    #[serde(default)]
    pub(crate) stream: Option<String>,
    /// Create a stream that does not exist on first use (default true, as
    /// Debezium Server always does); false refuses its records
    /// (`no_stream`).
    #[serde(default)]
    pub(crate) create_streams: Option<bool>,
    /// A created stream's `max-age`, seconds.
    #[serde(default)]
    pub(crate) stream_max_age_s: Option<u64>,
    /// A created stream's `max-length-bytes`.
    #[serde(default)]
    pub(crate) stream_max_length_bytes: Option<u64>,
    /// A created stream's `stream-max-segment-size-bytes`.
    #[serde(default)]
    pub(crate) stream_max_segment_size_bytes: Option<u64>,
    /// Names the producers (the broker keeps each name's last publishing
    /// id per stream; see the module's note on deduplication).
    #[serde(default)]
    pub(crate) producer_name: Option<String>,
    /// Messages per publish frame (default 100).
    #[serde(default)]
    pub(crate) batch_size: Option<usize>,
    /// How long a batch waits for its confirms before it is published
    /// again, ms (default 30000).
    #[serde(default)]
    pub(crate) confirm_timeout_ms: Option<u64>,
    /// The body of a record with a null value (default `default`).
    #[serde(default)]
    pub(crate) null_value: Option<String>,
}

impl RabbitMqStreamConfig {
    /// Checks the section; the error names the key.
    pub(crate) fn validate(&self) -> Result<(), SettingError> {
        let key = |k: &str| format!("sink.rabbitmqstream.{k}");
        if self.host.as_deref().is_some_and(|h| h.trim().is_empty()) {
            return Err(SettingError::invalid(key("host"), "must not be empty"));
        }
        if self.port == Some(0) {
            return Err(SettingError::invalid(key("port"), "must be above 0"));
        }
        if self.tls && self.tls_ca_file.is_none() {
            return Err(SettingError::invalid(
                key("tls_ca_file"),
                "tls = true needs the CA file that signs the server's certificate \
                 (the stream client does not read the system's store, and walrelay never \
                 connects without verifying)",
            ));
        }
        if !self.tls && (self.tls_ca_file.is_some() || self.tls_cert_file.is_some()) {
            return Err(SettingError::invalid(
                key("tls_ca_file"),
                "tls_ca_file, tls_cert_file and tls_key_file need tls = true",
            ));
        }
        if self.tls_cert_file.is_some() != self.tls_key_file.is_some() {
            return Err(SettingError::invalid(
                key("tls_key_file"),
                "tls_cert_file and tls_key_file go together",
            ));
        }
        for (name, value) in [
            ("rpc_timeout_ms", self.rpc_timeout_ms),
            ("confirm_timeout_ms", self.confirm_timeout_ms),
        ] {
            if value == Some(0) {
                return Err(SettingError::invalid(key(name), "must be above 0"));
            }
        }
        if self.batch_size == Some(0) {
            return Err(SettingError::invalid(key("batch_size"), "must be above 0"));
        }
        if let Some(frame) = self.max_frame_size {
            if frame != 0 && (frame as usize) < 2 * FRAME_OVERHEAD {
                return Err(SettingError::invalid(
                    key("max_frame_size"),
                    "too small for a message (0 takes the server's)",
                ));
            }
        }
        for (name, value) in [
            ("stream", self.stream.as_deref()),
            ("producer_name", self.producer_name.as_deref()),
        ] {
            if let Some(v) = value {
                if v.is_empty() || v.len() > 255 {
                    return Err(SettingError::invalid(key(name), "a name of 1 to 255 bytes"));
                }
            }
        }
        if self.user.is_some() != self.password.is_some() {
            return Err(SettingError::invalid(
                key("password"),
                "user and password go together",
            ));
        }
        Ok(())
    }

    fn host(&self) -> &str {
        self.host.as_deref().unwrap_or("localhost")
    }

    fn port(&self) -> u16 {
        self.port.unwrap_or(DEFAULT_PORT)
    }

    /// `host:port`, for messages (never the credentials).
    fn address(&self) -> String {
        format!("{}:{}", self.host(), self.port())
    }

    fn rpc_timeout(&self) -> Duration {
        Duration::from_millis(self.rpc_timeout_ms.unwrap_or(DEFAULT_RPC_TIMEOUT_MS))
    }

    /// The largest record (key, value and headers) a frame carries; a
    /// dead-letter record is cut to fit.
    pub(crate) fn max_message_bytes(&self) -> usize {
        self.max_record_bytes()
    }

    /// The largest record (key, value and headers) a frame carries.
    fn max_record_bytes(&self) -> usize {
        match self.max_frame_size.unwrap_or(DEFAULT_MAX_FRAME) {
            // The server's frame: RabbitMQ's largest message.
            0 => super::rabbitmq::DEFAULT_MAX_MESSAGE_BYTES,
            frame => (frame as usize).saturating_sub(FRAME_OVERHEAD),
        }
    }

    /// The client's TLS settings. The client panics on a CA or key file
    /// it cannot read or parse, so walrelay reads them first and refuses
    /// with the file's name instead.
    fn tls_configuration(&self) -> Result<TlsConfiguration, String> {
        // The client's own default has TLS on: say off explicitly.
        let builder = TlsConfiguration::builder().enable(self.tls);
        if !self.tls {
            return Ok(builder.build());
        }
        let mut builder = builder.trust_certificates(false);
        if let Some(ca) = &self.tls_ca_file {
            pem_file(ca, "CERTIFICATE", "tls_ca_file")?;
            builder = builder.add_root_certificates(ca.display().to_string());
        }
        if let (Some(cert), Some(key)) = (&self.tls_cert_file, &self.tls_key_file) {
            pem_file(cert, "CERTIFICATE", "tls_cert_file")?;
            pem_file(key, "PRIVATE KEY", "tls_key_file")?;
            builder = builder.add_client_certificates_keys(
                cert.display().to_string(),
                key.display().to_string(),
            );
        }
        Ok(builder.build())
    }

    /// Options of a connection to `host:port` (the configured server, or
    /// a stream's leader as the broker advertises it).
    fn client_options(&self, host: &str, port: u16) -> Result<ClientOptions, String> {
        let user = self.user.as_deref().unwrap_or("guest");
        let password = self.password.as_ref().map_or("guest", Secret::expose);
        Ok(ClientOptions::builder()
            .host(host)
            .port(port)
            .user(user)
            .password(password)
            .v_host(self.vhost.as_deref().unwrap_or("/"))
            .heartbeat(self.heartbeat_s.unwrap_or(60))
            .max_frame_size(self.max_frame_size.unwrap_or(DEFAULT_MAX_FRAME))
            .tls(self.tls_configuration()?)
            .build())
    }

    /// The bytes one publish frame may carry: the frame asked for, or,
    /// when the server's is taken (0), RabbitMQ's default frame (a message
    /// larger than that travels alone).
    fn frame_bytes(&self) -> usize {
        match self.max_frame_size.unwrap_or(DEFAULT_MAX_FRAME) {
            0 => DEFAULT_MAX_FRAME as usize,
            frame => frame as usize,
        }
    }

    /// The arguments of a stream walrelay creates.
    fn stream_arguments(&self) -> HashMap<String, String> {
        let mut args = HashMap::new();
        if let Some(age) = self.stream_max_age_s {
            args.insert("max-age".to_owned(), format!("{age}s"));
        }
        if let Some(len) = self.stream_max_length_bytes {
            args.insert("max-length-bytes".to_owned(), len.to_string());
        }
        if let Some(seg) = self.stream_max_segment_size_bytes {
            args.insert("stream-max-segment-size-bytes".to_owned(), seg.to_string());
        }
        args
    }
}

/// Checks that `path` is readable and holds a PEM block of `label`
/// (`CERTIFICATE`, or `PRIVATE KEY`: PKCS#8, the only key form the client
/// reads).
fn pem_file(path: &Path, label: &str, key: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "sink.rabbitmqstream.{key}: cannot read {}: {e}",
            path.display()
        )
    })?;
    if !text.contains(&format!("-----BEGIN {label}-----")) {
        return Err(format!(
            "sink.rabbitmqstream.{key}: {} holds no PEM \"{label}\" block{}",
            path.display(),
            if label == "PRIVATE KEY" {
                " (the stream client reads PKCS#8 keys only: \
                 openssl pkcs8 -topk8 -nocrypt converts one)"
            } else {
                ""
            }
        ));
    }
    Ok(())
}

/// What `walrelay check` reads of a RabbitMQ stream server (creating
/// nothing): that it takes a connection, and whether each stream the
/// records would go to exists (`sink.rabbitmqstream.stream`, else each
/// destination) and, if not, whether walrelay would create it.
pub(crate) async fn probe(
    config: &RabbitMqStreamConfig,
    destinations: &[String],
) -> Result<(String, Vec<(String, bool)>), String> {
    let client = connect(config, config.host(), config.port()).await?;
    let streams: Vec<String> = match &config.stream {
        Some(s) => vec![s.clone()],
        None => destinations.to_vec(),
    };
    let mut found = Vec::with_capacity(streams.len());
    for name in streams {
        let exists = timeout(config.rpc_timeout(), stream_exists(&client, &name))
            .await
            .unwrap_or_else(|_| Err(format!("metadata of stream {name:?}: timed out")));
        match exists {
            Ok(exists) => found.push((name, exists)),
            Err(why) => {
                close_client(client).await;
                return Err(why);
            }
        }
    }
    close_client(client).await;
    Ok((
        format!(
            "rabbitmq streams at {}, publisher confirms on{}{}",
            config.address(),
            if config.create_streams.unwrap_or(true) {
                "; missing streams are created"
            } else {
                ""
            },
            if config.client_name.is_some() {
                "; client_name is not sent (the stream client names no connection)"
            } else {
                ""
            }
        ),
        found,
    ))
}

/// A connection to `host:port`, within `rpc_timeout_ms`.
async fn connect(config: &RabbitMqStreamConfig, host: &str, port: u16) -> Result<Client, String> {
    let options = config.client_options(host, port)?;
    let failed =
        |why: String| format!("cannot connect to rabbitmq streams at {host}:{port}: {why}");
    timeout(config.rpc_timeout(), Client::connect(options))
        .await
        .map_err(|_| failed("timed out".to_owned()))?
        .map_err(|e| failed(client_error(&e)))
}

/// Closes `client`, bounded (a broken connection never answers).
async fn close_client(client: Client) {
    let _ = timeout(Duration::from_secs(1), client.close()).await;
}

async fn stream_exists(client: &Client, name: &str) -> Result<bool, String> {
    let metadata = client
        .metadata(vec![name.to_owned()])
        .await
        .map_err(|e| format!("metadata of stream {name:?}: {}", client_error(&e)))?;
    Ok(metadata
        .get(name)
        .is_some_and(|m| m.response_code == ResponseCode::Ok))
}

/// The publisher id of each producer on its own connection.
const PUBLISHER_ID: u8 = 1;

/// What a producer's connection reports, tagged with the producer's key.
enum Event {
    /// Publishing ids the broker stored (or dropped as duplicates).
    Confirmed(Vec<u64>),
    /// Publishing ids the broker refused, with its code.
    Refused(Vec<(u64, ResponseCode)>),
    /// The connection is gone: what it did not confirm never will be.
    Closed,
}

/// One stream's producer: a publisher declared on a connection of its
/// own to the stream's leader, driven through the client's raw API (its
/// `Producer` publishes from a timer task that outlives it, packs frames
/// without regard to their size and never reports a lost connection).
struct StreamProducer {
    client: Client,
    /// Tags this producer's events.
    key: u32,
    /// The next message's publishing id: the broker's last id for a named
    /// producer + 1 (1 for an unnamed one).
    next_id: u64,
    /// Messages waiting for the next publish frame: id, record index.
    frame: Vec<(Message, usize)>,
    frame_bytes: usize,
}

impl StreamProducer {
    async fn close(self) {
        let _ = timeout(
            Duration::from_secs(1),
            self.client.delete_publisher(PUBLISHER_ID),
        )
        .await;
        close_client(self.client).await;
    }
}

/// A connected publisher: a management connection, and one producer (a
/// connection to the stream's leader) per stream used.
pub(crate) struct RabbitMqStream {
    config: RabbitMqStreamConfig,
    management: Client,
    producers: HashMap<String, StreamProducer>,
    /// Streams known to exist (or created) on this connection.
    streams: HashSet<String>,
    events_tx: mpsc::UnboundedSender<(u32, Event)>,
    events: mpsc::UnboundedReceiver<(u32, Event)>,
    next_key: u32,
    null_value: Bytes,
    confirm_timeout: Duration,
    max_record_bytes: usize,
    frame_limit: usize,
    batch_size: usize,
}

/// What became of sending one record, before its confirm.
enum Sent {
    /// Waiting for its confirm: the producer's key, the publishing id.
    Pending(u32, u64),
    Done(Outcome),
}

impl Publisher for RabbitMqStream {
    const NAME: &'static str = "rabbitmqstream";
    /// A stream keeps one producer's order; no transactions; the named
    /// producer's deduplication does not cover republished events (the
    /// module's note).
    const GUARANTEES: Guarantees = Guarantees {
        idempotent: false,
        transactional: false,
        dedup_by_id: false,
        per_key_order: true,
    };
    const ERROR_CLASS: &'static str = "rabbitmq_stream_client::error::ClientError";
    type Config = RabbitMqStreamConfig;

    async fn connect(config: &RabbitMqStreamConfig) -> Result<RabbitMqStream, String> {
        let management = connect(config, config.host(), config.port()).await?;
        let (events_tx, events) = mpsc::unbounded_channel();
        Ok(RabbitMqStream {
            config: config.clone(),
            management,
            producers: HashMap::new(),
            streams: HashSet::new(),
            events_tx,
            events,
            next_key: 0,
            null_value: Bytes::from(
                config
                    .null_value
                    .clone()
                    .unwrap_or_else(|| NULL_DEFAULT.to_owned()),
            ),
            confirm_timeout: Duration::from_millis(
                config
                    .confirm_timeout_ms
                    .unwrap_or(DEFAULT_CONFIRM_TIMEOUT_MS),
            ),
            max_record_bytes: config.max_record_bytes(),
            frame_limit: config.frame_bytes(),
            batch_size: config.batch_size.unwrap_or(DEFAULT_BATCH_SIZE),
        })
    }

    async fn publish(&mut self, batch: &[Outgoing]) -> Vec<Outcome> {
        let deadline = Instant::now() + self.confirm_timeout;
        // Events of an earlier batch (confirms after its timeout) say
        // nothing of this one.
        while self.events.try_recv().is_ok() {}
        let mut sent: Vec<Sent> = Vec::with_capacity(batch.len());
        for (i, record) in batch.iter().enumerate() {
            let s = match timeout_at(deadline, self.send(i, record, &mut sent)).await {
                Ok(s) => s,
                Err(_) => Sent::Done(Outcome::Retry(
                    "handing the message to the producer timed out".into(),
                )),
            };
            let retry = matches!(s, Sent::Done(Outcome::Retry(_)));
            sent.push(s);
            if retry {
                break;
            }
        }
        // The frames not full yet (records before a retry among them: what
        // the broker confirms of them is not sent again).
        let streams: Vec<String> = self.producers.keys().cloned().collect();
        for stream in streams {
            if timeout_at(deadline, self.flush(&stream, &mut sent))
                .await
                .is_err()
            {
                self.fail_frame(&stream, &mut sent, "publishing timed out".to_owned());
            }
        }
        let mut waiting: HashMap<(u32, u64), usize> = sent
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                Sent::Pending(key, id) => Some(((*key, *id), i)),
                Sent::Done(_) => None,
            })
            .collect();
        let mut confirmed: Vec<Option<Outcome>> = vec![None; sent.len()];
        while !waiting.is_empty() {
            let (key, event) = match timeout_at(deadline, self.events.recv()).await {
                Ok(Some(e)) => e,
                Ok(None) | Err(_) => break,
            };
            match event {
                Event::Confirmed(ids) => {
                    for id in ids {
                        if let Some(i) = waiting.remove(&(key, id)) {
                            confirmed[i] = Some(Outcome::Acked);
                        }
                    }
                }
                Event::Refused(ids) => {
                    for (id, code) in ids {
                        if let Some(i) = waiting.remove(&(key, id)) {
                            confirmed[i] =
                                Some(response_failure(&code, "the broker refused the message"));
                        }
                    }
                }
                Event::Closed => {
                    waiting.retain(|(k, _), i| {
                        if *k == key {
                            confirmed[*i] = Some(Outcome::Retry(
                                "the connection to the stream's leader closed before the \
                                 publish confirm"
                                    .to_owned(),
                            ));
                        }
                        *k != key
                    });
                }
            }
        }
        let mut outcomes = Vec::with_capacity(sent.len());
        for (s, confirm) in sent.into_iter().zip(confirmed) {
            let outcome = match (s, confirm) {
                (Sent::Done(outcome), _) => outcome,
                (Sent::Pending(..), Some(outcome)) => outcome,
                (Sent::Pending(..), None) => Outcome::Retry(format!(
                    "no publish confirm within confirm_timeout_ms ({} ms)",
                    self.confirm_timeout.as_millis()
                )),
            };
            let retry = matches!(outcome, Outcome::Retry(_));
            outcomes.push(outcome);
            if retry {
                // The worker drops this publisher for a new one: close the
                // producers while the runtime can still wait for them.
                self.close().await;
                break;
            }
        }
        outcomes
    }
}

impl RabbitMqStream {
    /// Puts record `i` into its stream's next publish frame (publishing
    /// the frame first when the record does not fit); `sent` holds the
    /// records before it.
    async fn send(&mut self, i: usize, record: &Outgoing, sent: &mut [Sent]) -> Sent {
        let stream = self
            .config
            .stream
            .clone()
            .unwrap_or_else(|| record.destination.to_string());
        let size = record_bytes(record, &self.null_value);
        if size > self.max_record_bytes {
            return Sent::Done(self.too_large(size, self.max_record_bytes));
        }
        if let Err(outcome) = self.producer(&stream).await {
            return Sent::Done(outcome);
        }
        let producer = self
            .producers
            .get_mut(&stream)
            .expect("the producer was made above");
        let id = producer.next_id;
        let message = message(record, id, &self.null_value);
        let bytes = MESSAGE_OVERHEAD + message.encoded_size() as usize;
        if PUBLISH_OVERHEAD + bytes > self.frame_limit && self.config.max_frame_size != Some(0) {
            return Sent::Done(self.too_large(bytes, self.frame_limit - PUBLISH_OVERHEAD));
        }
        let full = producer.frame.len() >= self.batch_size
            || (!producer.frame.is_empty()
                && PUBLISH_OVERHEAD + producer.frame_bytes + bytes > self.frame_limit);
        if full && !self.flush(&stream, sent).await {
            return Sent::Done(Outcome::Retry(format!(
                "publishing to stream {stream:?} failed"
            )));
        }
        let producer = self
            .producers
            .get_mut(&stream)
            .expect("the producer was made above");
        producer.next_id += 1;
        producer.frame.push((message, i));
        producer.frame_bytes += bytes;
        Sent::Pending(producer.key, id)
    }

    fn too_large(&self, size: usize, limit: usize) -> Outcome {
        refused(
            "message_too_large",
            true,
            format!(
                "the message is {size} bytes, more than a frame of this connection carries \
                 ({limit} bytes)"
            ),
        )
    }

    /// Publishes `stream`'s waiting messages in one frame; a failure turns
    /// them into retries in `sent` (false).
    async fn flush(&mut self, stream: &str, sent: &mut [Sent]) -> bool {
        let Some(producer) = self.producers.get_mut(stream) else {
            return true;
        };
        if producer.frame.is_empty() {
            return true;
        }
        let messages: Vec<Message> = producer.frame.iter().map(|(m, _)| m.clone()).collect();
        match producer.client.publish(PUBLISHER_ID, messages).await {
            Ok(_) => {
                producer.frame.clear();
                producer.frame_bytes = 0;
                true
            }
            Err(e) => {
                let why = format!(
                    "publishing to stream {stream:?} failed: {}",
                    client_error(&e)
                );
                self.fail_frame(stream, sent, why);
                false
            }
        }
    }

    /// Turns `stream`'s waiting messages into retries.
    fn fail_frame(&mut self, stream: &str, sent: &mut [Sent], why: String) {
        if let Some(producer) = self.producers.get_mut(stream) {
            for (_, i) in producer.frame.drain(..) {
                if let Some(s) = sent.get_mut(i) {
                    *s = Sent::Done(Outcome::Retry(why.clone()));
                }
            }
            producer.frame_bytes = 0;
        }
    }

    /// Makes sure `stream` has a producer: creates the stream if needed
    /// (and allowed), then declares the producer.
    async fn producer(&mut self, stream: &str) -> Result<(), Outcome> {
        if self.producers.contains_key(stream) {
            return Ok(());
        }
        let rpc = self.config.rpc_timeout();
        if !self.streams.contains(stream) {
            match timeout(rpc, self.ensure_stream(stream)).await {
                Err(_) => {
                    return Err(Outcome::Retry(format!(
                        "checking or creating stream {stream:?} timed out"
                    )))
                }
                Ok(r) => r?,
            }
            self.streams.insert(stream.to_owned());
        }
        let made = timeout(rpc.saturating_mul(2), self.declare(stream))
            .await
            .unwrap_or_else(|_| {
                Err(Outcome::Retry(format!(
                    "declaring a producer on stream {stream:?} timed out"
                )))
            })?;
        self.producers.insert(stream.to_owned(), made);
        Ok(())
    }

    async fn ensure_stream(&self, stream: &str) -> Result<(), Outcome> {
        let transient =
            |e: &ClientError| Outcome::Retry(format!("stream {stream:?}: {}", client_error(e)));
        if self.config.create_streams.unwrap_or(true) {
            let response = self
                .management
                .create_stream(stream, self.config.stream_arguments())
                .await
                .map_err(|e| transient(&e))?;
            return match response.code() {
                ResponseCode::Ok | ResponseCode::StreamAlreadyExists => Ok(()),
                code => Err(response_failure(
                    code,
                    &format!("creating stream {stream:?}"),
                )),
            };
        }
        match stream_exists(&self.management, stream).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(refused(
                "no_stream",
                false,
                format!("no stream {stream:?} in the virtual host, and create_streams = false"),
            )),
            Err(why) => Err(Outcome::Retry(why)),
        }
    }

    /// Connects to `stream`'s leader (the address the broker advertises)
    /// and declares a publisher there, named if `producer_name` is set.
    async fn declare(&mut self, stream: &str) -> Result<StreamProducer, Outcome> {
        let what = format!("declaring a producer on stream {stream:?}");
        let metadata = self
            .management
            .metadata(vec![stream.to_owned()])
            .await
            .map_err(|e| Outcome::Retry(format!("{what}: {}", client_error(&e))))?;
        let Some(leader) = metadata
            .get(stream)
            .filter(|m| m.response_code == ResponseCode::Ok)
            .map(|m| m.leader.clone())
        else {
            return Err(Outcome::Retry(format!(
                "{what}: the stream has no leader (it may be starting or gone)"
            )));
        };
        let port = u16::try_from(leader.port)
            .map_err(|_| Outcome::Retry(format!("{what}: leader port {}", leader.port)))?;
        let client = connect(&self.config, &leader.host, port)
            .await
            .map_err(|why| Outcome::Retry(format!("{what}: {why}")))?;
        let key = self.next_key;
        self.next_key = self.next_key.wrapping_add(1);
        let events = self.events_tx.clone();
        client
            .set_handler(move |item: MessageResult| {
                let events = events.clone();
                async move {
                    let event = match item {
                        Some(Ok(response)) => match response.kind() {
                            ResponseKind::PublishConfirm(c) => {
                                Some(Event::Confirmed(c.publishing_ids))
                            }
                            ResponseKind::PublishError(e) => Some(Event::Refused(
                                e.publishing_errors
                                    .into_iter()
                                    .map(|p| (p.publishing_id, p.error_code))
                                    .collect(),
                            )),
                            // The stream was deleted or moved: its
                            // publisher is gone.
                            ResponseKind::MetadataUpdate(_) => Some(Event::Closed),
                            _ => None,
                        },
                        Some(Err(_)) | None => Some(Event::Closed),
                    };
                    if let Some(event) = event {
                        let _ = events.send((key, event));
                    }
                    Ok(())
                }
            })
            .await;
        let made = self.declare_on(&client, stream, &what).await;
        match made {
            Ok(next_id) => Ok(StreamProducer {
                client,
                key,
                next_id,
                frame: Vec::new(),
                frame_bytes: 0,
            }),
            Err(outcome) => {
                close_client(client).await;
                Err(outcome)
            }
        }
    }

    /// Declares the publisher on `client`; its first publishing id.
    async fn declare_on(&self, client: &Client, stream: &str, what: &str) -> Result<u64, Outcome> {
        let name = self.config.producer_name.clone();
        let response = client
            .declare_publisher(PUBLISHER_ID, name.clone(), stream)
            .await
            .map_err(|e| Outcome::Retry(format!("{what}: {}", client_error(&e))))?;
        if !response.is_ok() {
            return Err(response_failure(response.code(), what));
        }
        let Some(name) = name else {
            return Ok(1);
        };
        // Numbered from the broker's last id + 1 even when it is 0 (the
        // module's note on deduplication).
        let last = client
            .query_publisher_sequence(&name, stream)
            .await
            .map_err(|e| {
                Outcome::Retry(format!(
                    "the last publishing id of producer {name:?}: {}",
                    client_error(&e)
                ))
            })?;
        Ok(last + 1)
    }

    /// Closes every producer, each bounded.
    async fn close(&mut self) {
        for (_, producer) in self.producers.drain() {
            producer.close().await;
        }
        self.streams.clear();
    }
}

/// The AMQP 1.0 message of `record`, as Debezium Server builds it, with
/// publishing id `id`.
fn message(record: &Outgoing, id: u64, null_value: &Bytes) -> Message {
    let mut props = Message::builder().publising_id(id).application_properties();
    for h in &record.headers {
        props = match &h.value {
            None => props.insert(h.name.to_string(), SimpleValue::Null),
            Some(v) => match std::str::from_utf8(v) {
                Ok(s) => props.insert(h.name.to_string(), s),
                Err(_) => props.insert(h.name.to_string(), v.to_vec()),
            },
        };
    }
    let mut builder = props.message_builder();
    if let Some(key) = &record.key {
        builder = match std::str::from_utf8(key) {
            Ok(s) => builder
                .properties()
                .message_id(s.to_owned())
                .message_builder(),
            Err(_) => builder
                .properties()
                .message_id(key.to_vec())
                .message_builder(),
        };
    }
    let body = record.value.as_ref().unwrap_or(null_value);
    builder.body(body.to_vec()).build()
}

impl Drop for RabbitMqStream {
    /// Closes the connections from a task, so no runtime thread blocks on
    /// a connection that may be gone.
    fn drop(&mut self) {
        let producers: Vec<StreamProducer> = self.producers.drain().map(|(_, p)| p).collect();
        let management = self.management.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                for producer in producers {
                    producer.close().await;
                }
                close_client(management).await;
            });
        }
    }
}

/// Bytes of the record's message body, key and headers.
fn record_bytes(record: &Outgoing, null_value: &Bytes) -> usize {
    record.value.as_ref().unwrap_or(null_value).len()
        + record.key.as_ref().map_or(0, Bytes::len)
        + record
            .headers
            .iter()
            .map(|h| h.name.len() + h.value.as_ref().map_or(0, Bytes::len) + 8)
            .sum::<usize>()
}

/// A response code other than OK: access refused stops the sink; a stream
/// or publisher gone, or a server error, publishes again on new
/// connections.
fn response_failure(code: &ResponseCode, what: &str) -> Outcome {
    match code {
        ResponseCode::AccessRefused
        | ResponseCode::AuthenticationFailure
        | ResponseCode::AuthenticationFailureLoopback
        | ResponseCode::VirtualHostAccessFailure => Outcome::Failed {
            class: FailureClass::Broker,
            code: "access_refused".to_owned(),
            error: format!(
                "{what}: {code:?} (the user may not write to the stream, or create it: grant it)"
            ),
        },
        // sic: the client's spelling.
        ResponseCode::PrecoditionFailed => refused(
            "precondition_failed",
            false,
            format!(
                "{what}: {code:?} (the stream exists with other arguments, or is not a stream)"
            ),
        ),
        ResponseCode::FrameTooLarge => {
            refused("message_too_large", true, format!("{what}: {code:?}"))
        }
        _ => Outcome::Retry(format!("{what}: {code:?}")),
    }
}

/// A client error, for people (the client's own text).
fn client_error(e: &ClientError) -> String {
    crate::chain::DisplayChain(e).to_string()
}

fn refused(kind: &'static str, too_large: bool, error: String) -> Outcome {
    Outcome::Failed {
        class: FailureClass::Record { kind, too_large },
        code: kind.to_owned(),
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use walrelay_core::router::RecordHeader;

    fn base() -> RabbitMqStreamConfig {
        RabbitMqStreamConfig {
            host: Some("127.0.0.1".into()),
            ..RabbitMqStreamConfig::default()
        }
    }

    fn refusal(c: &RabbitMqStreamConfig) -> String {
        c.validate().unwrap_err().to_string()
    }

    #[test]
    fn the_section_names_the_key_it_refuses() {
        assert!(base().validate().is_ok());
        assert!(RabbitMqStreamConfig::default().validate().is_ok());
        let c = RabbitMqStreamConfig {
            tls: true,
            ..base()
        };
        assert!(refusal(&c).contains("sink.rabbitmqstream.tls_ca_file"));
        let c = RabbitMqStreamConfig {
            confirm_timeout_ms: Some(0),
            ..base()
        };
        assert!(refusal(&c).contains("sink.rabbitmqstream.confirm_timeout_ms"));
        let c = RabbitMqStreamConfig {
            user: Some("u".into()),
            ..base()
        };
        assert!(refusal(&c).contains("sink.rabbitmqstream.password"));
        let c = RabbitMqStreamConfig {
            producer_name: Some(String::new()),
            ..base()
        };
        assert!(refusal(&c).contains("sink.rabbitmqstream.producer_name"));
        let c = RabbitMqStreamConfig {
            port: Some(0),
            ..base()
        };
        assert!(refusal(&c).contains("sink.rabbitmqstream.port"));
    }

    #[test]
    fn secrets_stay_out_of_debug() {
        let c = RabbitMqStreamConfig {
            user: Some("app".into()),
            password: Some(Secret::new("hunter2")),
            ..base()
        };
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("hunter2") && shown.contains("app"),
            "{shown}"
        );
        assert_eq!(c.address(), "127.0.0.1:5552");
    }

    #[test]
    fn created_streams_take_the_limits() {
        let c = RabbitMqStreamConfig {
            stream_max_age_s: Some(3600),
            stream_max_length_bytes: Some(10_000_000_000),
            ..base()
        };
        let args = c.stream_arguments();
        assert_eq!(args["max-age"], "3600s");
        assert_eq!(args["max-length-bytes"], "10000000000");
        assert!(!args.contains_key("stream-max-segment-size-bytes"));
    }

    fn record(key: Option<&'static [u8]>, value: Option<&'static [u8]>) -> Outgoing {
        Outgoing {
            destination: Arc::from("outbox.event.Order"),
            key: key.map(Bytes::from_static),
            value: value.map(Bytes::from_static),
            headers: vec![RecordHeader {
                name: Arc::from("id"),
                value: Some(Bytes::from_static(b"{\"payload\":\"x\"}")),
            }],
            dedup_id: None,
        }
    }

    #[test]
    fn the_frame_bounds_a_record() {
        let c = RabbitMqStreamConfig {
            max_frame_size: Some(4096),
            ..base()
        };
        assert_eq!(c.max_record_bytes(), 3072);
        let null = Bytes::from_static(b"default");
        assert_eq!(
            record_bytes(&record(Some(b"k"), None), &null),
            7 + 1 + 2 + 15 + 8
        );
    }

    #[test]
    fn a_refused_confirm_is_retried_unless_access_is_refused() {
        assert!(matches!(
            response_failure(&ResponseCode::StreamNotAvailable, "x"),
            Outcome::Retry(_)
        ));
        assert!(matches!(
            response_failure(&ResponseCode::AccessRefused, "x"),
            Outcome::Failed {
                class: FailureClass::Broker,
                ..
            }
        ));
        assert!(matches!(
            response_failure(&ResponseCode::FrameTooLarge, "x"),
            Outcome::Failed {
                class: FailureClass::Record {
                    too_large: true,
                    ..
                },
                ..
            }
        ));
    }
}
