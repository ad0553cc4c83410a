//! RabbitMQ (AMQP 0-9-1) behind the broker seam, as Debezium Server's
//! `rabbitmq` sink publishes (docs/debezium-server-sinks.md §5, §8.5): one
//! `basic.publish` per record to the exchange `exchange` names, or to the
//! exchange named after the topic when it is empty (the default); the
//! routing key from `routing_key_source` (`static`: `routing_key`, `""` by
//! default; `topic`: the topic name; `key`: the record key, `""` for a
//! null key); properties `delivery_mode` (2, persistent, by default) and
//! `headers` and nothing else (no content type, no message id); the
//! headers as an AMQP table whose values are long strings (a header whose
//! bytes are not UTF-8 goes as a byte array, a null one as void); the body
//! the value's bytes, or `null_value` (`default`) for a null value. The key
//! is not sent unless it is the routing key.
//!
//! Acknowledgement: one channel in confirm mode. A batch is published
//! whole, then every confirm is awaited in order (pipelined, within
//! `ack_timeout_ms` for the batch, 30 s by default as Debezium Server's
//! `ackTimeout`): a `basic.ack` is the acknowledgement the tracker hears.
//!
//! What walrelay does differently on purpose:
//! - `mandatory` publishes (Debezium Server publishes with
//!   `mandatory=false`, so an unroutable message is confirmed and lost): a
//!   message no binding routes comes back as `basic.return` and is refused
//!   as `unroutable`, so `[errors]` applies (dead-letter or stop).
//!   `mandatory = false` restores Debezium Server's behaviour.
//! - A missing exchange: Debezium Server's channel is closed with 404 and
//!   the process exits. walrelay checks each exchange once per connection
//!   (a passive `exchange.declare` on a channel of its own) and refuses a
//!   record whose exchange does not exist as `no_exchange`, so `[errors]`
//!   applies to it like to any other record the broker refuses.
//! - Right after a reconnection, an unroutable record is published again
//!   (with the records after it) for `unroutable_retry_ms` (30 s by
//!   default) from when the broker came back, and refused only after
//!   that: a restarted RabbitMQ node routes nothing until it has restored
//!   its bindings, and a durable queue's binding to a durable exchange
//!   comes back a moment after the node accepts connections. At the first
//!   connection an unroutable record is refused at once.
//! - A `basic.nack` (the broker could not store the message: a queue
//!   process failed, a quorum queue lost its majority, a full disk) is not
//!   fatal: the record and the ones after it are published again after a
//!   pause, as is everything after a channel or connection error (the
//!   connection is dropped and the worker opens a new one) or a confirm
//!   not received in time. Debezium Server stops on all of these.
//! - A message larger than `max_message_bytes` (RabbitMQ's own
//!   `max_message_size`, 128 MiB by default) is refused as
//!   `message_too_large` before it is sent: the broker would close the
//!   channel for it.
//! - The header table's wire order is by name (an AMQP table is a map;
//!   Debezium Server's follows Java's `HashMap`).
//!
//! Order: one connection and one channel; records are published in the
//! order the pipeline sent them and RabbitMQ confirms a channel's messages
//! in order; after a failure the worker publishes again from the first
//! record not confirmed, so a queue keeps the events' order per key unless
//! the broker stored a later record of the batch while refusing an earlier
//! one (a nack in between: the earlier one then follows it). No
//! transactions, no deduplication: a record published again after a crash
//! or a retry is delivered again (at least once).

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use lapin::options::{
    BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions, QueueDeclareOptions,
};
use lapin::protocol::{AMQPErrorKind, AMQPSoftError};
use lapin::tcp::{OwnedIdentity, OwnedTLSConfig};
use lapin::types::{AMQPValue, ByteArray, FieldTable, LongString, ShortString};
use lapin::uri::{AMQPAuthority, AMQPQueryString, AMQPScheme, AMQPUri, AMQPUserInfo};
use lapin::{
    BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, ErrorKind,
    ExchangeKind, PublisherConfirm,
};
use serde::Deserialize;
use tokio::time::{timeout_at, Instant};

use super::broker::{FailureClass, Guarantees};
use super::queued::{Outcome, Outgoing, Publisher};
use crate::secret::Secret;
use crate::setting::SettingError;

/// RabbitMQ's default `max_message_size` (3.8+): 128 MiB.
pub(crate) const DEFAULT_MAX_MESSAGE_BYTES: usize = 128 << 20;
/// Debezium Server's `ackTimeout`.
const DEFAULT_ACK_TIMEOUT_MS: u64 = 30_000;
/// How long after the broker came back an unroutable record is published
/// again rather than refused, ms.
const DEFAULT_UNROUTABLE_RETRY_MS: u64 = 30_000;
/// Debezium Server's `null.value`.
const NULL_DEFAULT: &str = "default";
/// AMQP's limit on a short string (exchange, routing key, header name).
const SHORT_STRING: usize = 255;

/// `[sink.rabbitmq]`: RabbitMQ over AMQP 0-9-1 (`debezium.sink.rabbitmq.*`).
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RabbitMqConfig {
    /// An AMQP URI (`amqp://user:password@host:5672/vhost`, `amqps://...`),
    /// instead of `host`, `port`, `vhost`, `user`, `password` and `tls`
    /// (the `connection.uri` key).
    #[serde(default)]
    pub(crate) url: Option<Secret>,
    /// Server host (default `localhost`).
    #[serde(default)]
    pub(crate) host: Option<String>,
    /// Server port (default 5672, 5671 with TLS).
    #[serde(default)]
    pub(crate) port: Option<u16>,
    /// Virtual host (default `/`).
    #[serde(default)]
    pub(crate) vhost: Option<String>,
    /// User name (default `guest`).
    #[serde(default)]
    pub(crate) user: Option<String>,
    /// Password (default `guest`).
    #[serde(default)]
    pub(crate) password: Option<Secret>,
    /// TLS (AMQPS); the server's certificate and host name are verified.
    #[serde(default)]
    pub(crate) tls: bool,
    /// CA certificates (PEM) that sign the server's (default: the
    /// system's).
    #[serde(default)]
    pub(crate) tls_ca_file: Option<PathBuf>,
    /// Client certificate (PEM), with `tls_key_file`.
    #[serde(default)]
    pub(crate) tls_cert_file: Option<PathBuf>,
    /// Client key (PEM).
    #[serde(default)]
    pub(crate) tls_key_file: Option<PathBuf>,
    /// TCP connection timeout, ms (default 10000).
    #[serde(default)]
    pub(crate) connection_timeout_ms: Option<u64>,
    /// Heartbeat interval asked of the server, seconds (default: the
    /// server's, 60).
    #[serde(default)]
    pub(crate) heartbeat_s: Option<u16>,
    /// Largest frame asked for, bytes (default: the server's).
    #[serde(default)]
    pub(crate) frame_max: Option<u32>,
    /// Most channels asked for (default: the server's; walrelay uses 2).
    #[serde(default)]
    pub(crate) channel_max: Option<u16>,
    /// Client properties sent when connecting (`connection_name`, ...).
    #[serde(default)]
    pub(crate) client_properties: BTreeMap<String, String>,
    /// The exchange; empty or unset: the exchange named after the record's
    /// topic (Debezium Server's `exchange`). It is never declared.
    #[serde(default)]
    pub(crate) exchange: Option<String>,
    /// The routing key with `routing_key_source = "static"` (default `""`).
    #[serde(default)]
    pub(crate) routing_key: Option<String>,
    /// `static` (default): `routing_key`; `topic`: the topic name; `key`:
    /// the record key (`""` when null).
    #[serde(default)]
    pub(crate) routing_key_source: Option<String>,
    /// Declare a queue named after the routing key (Debezium Server's
    /// `autoCreateRoutingKey`): once at connect with `static`, per routing
    /// key with `topic`. No binding is declared.
    #[serde(default)]
    pub(crate) auto_create_routing_key: bool,
    /// Whether that queue is durable (default true).
    #[serde(default)]
    pub(crate) routing_key_durable: Option<bool>,
    /// AMQP delivery mode: 2 persistent (default), 1 transient.
    #[serde(default)]
    pub(crate) delivery_mode: Option<u8>,
    /// How long a batch waits for its confirms before it is published
    /// again, ms (default 30000).
    #[serde(default)]
    pub(crate) ack_timeout_ms: Option<u64>,
    /// The body of a record with a null value (default `default`).
    #[serde(default)]
    pub(crate) null_value: Option<String>,
    /// Publish `mandatory` (default true): an unroutable message is
    /// refused (`unroutable`) instead of dropped by the broker.
    #[serde(default)]
    pub(crate) mandatory: Option<bool>,
    /// After a reconnection, how long an unroutable record is published
    /// again before it is refused, ms (default 30000; 0: refused at once).
    /// A restarted node routes nothing until its bindings are restored.
    #[serde(default)]
    pub(crate) unroutable_retry_ms: Option<u64>,
    /// Largest body published (default 128 MiB, RabbitMQ's
    /// `max_message_size`); a larger record is refused.
    #[serde(default)]
    pub(crate) max_message_bytes: Option<usize>,
    /// Header values as AMQP byte arrays (`x`) instead of long strings:
    /// what Debezium Server publishes under
    /// `debezium.format.header=jsonbytearray`, whose converter hands the
    /// sink `byte[]` (the Debezium Server form sets it from that key).
    #[serde(default)]
    pub(crate) header_byte_arrays: bool,
}

impl fmt::Debug for RabbitMqConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RabbitMqConfig")
            .field("url", &self.url.as_ref().map(|u| redact_url(u.expose())))
            .field("host", &self.host)
            .field("port", &self.port)
            .field("vhost", &self.vhost)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("tls", &self.tls)
            .field("tls_ca_file", &self.tls_ca_file)
            .field("tls_cert_file", &self.tls_cert_file)
            .field("tls_key_file", &self.tls_key_file)
            .field("connection_timeout_ms", &self.connection_timeout_ms)
            .field("heartbeat_s", &self.heartbeat_s)
            .field("frame_max", &self.frame_max)
            .field("channel_max", &self.channel_max)
            .field("client_properties", &self.client_properties)
            .field("exchange", &self.exchange)
            .field("routing_key", &self.routing_key)
            .field("routing_key_source", &self.routing_key_source)
            .field("auto_create_routing_key", &self.auto_create_routing_key)
            .field("routing_key_durable", &self.routing_key_durable)
            .field("delivery_mode", &self.delivery_mode)
            .field("ack_timeout_ms", &self.ack_timeout_ms)
            .field("null_value", &self.null_value)
            .field("mandatory", &self.mandatory)
            .field("unroutable_retry_ms", &self.unroutable_retry_ms)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("header_byte_arrays", &self.header_byte_arrays)
            .finish()
    }
}

/// `scheme://user:secret@host/...` with the password left out.
fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "<redacted>".to_owned();
    };
    match rest.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{scheme}://{user}:<redacted>@{host}")
        }
        None => url.to_owned(),
    }
}

/// Where the routing key comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RoutingKey {
    Static(String),
    Topic,
    Key,
}

impl RabbitMqConfig {
    /// Checks the section; the error names the key.
    pub(crate) fn validate(&self) -> Result<(), SettingError> {
        let key = |k: &str| format!("sink.rabbitmq.{k}");
        if self.url.is_some() {
            self.uri()
                .map_err(|why| SettingError::invalid(key("url"), why))?;
            for (name, set) in [
                ("host", self.host.is_some()),
                ("port", self.port.is_some()),
                ("vhost", self.vhost.is_some()),
                ("user", self.user.is_some()),
                ("password", self.password.is_some()),
                ("tls", self.tls),
            ] {
                if set {
                    return Err(SettingError::invalid(
                        key(name),
                        "url says it already; give either url or host, port, vhost, user, password and tls",
                    ));
                }
            }
        }
        if self.host.as_deref().is_some_and(|h| h.trim().is_empty()) {
            return Err(SettingError::invalid(key("host"), "must not be empty"));
        }
        if self.port == Some(0) {
            return Err(SettingError::invalid(key("port"), "must be above 0"));
        }
        let tls = self.tls
            || self
                .url
                .as_ref()
                .is_some_and(|u| u.expose().starts_with("amqps:"));
        if !tls && (self.tls_ca_file.is_some() || self.tls_cert_file.is_some()) {
            return Err(SettingError::invalid(
                key("tls_ca_file"),
                "tls_ca_file, tls_cert_file and tls_key_file need tls = true (or an amqps:// url)",
            ));
        }
        if self.tls_cert_file.is_some() != self.tls_key_file.is_some() {
            return Err(SettingError::invalid(
                key("tls_key_file"),
                "tls_cert_file and tls_key_file go together",
            ));
        }
        for (name, value) in [
            ("connection_timeout_ms", self.connection_timeout_ms),
            ("ack_timeout_ms", self.ack_timeout_ms),
        ] {
            if value == Some(0) {
                return Err(SettingError::invalid(key(name), "must be above 0"));
            }
        }
        if self.max_message_bytes == Some(0) {
            return Err(SettingError::invalid(
                key("max_message_bytes"),
                "must be above 0",
            ));
        }
        if let Some(exchange) = &self.exchange {
            if exchange.len() > SHORT_STRING {
                return Err(SettingError::invalid(
                    key("exchange"),
                    "longer than 255 bytes (an AMQP short string)",
                ));
            }
        }
        if let Some(rk) = &self.routing_key {
            if rk.len() > SHORT_STRING {
                return Err(SettingError::invalid(
                    key("routing_key"),
                    "longer than 255 bytes (an AMQP short string)",
                ));
            }
        }
        let source = self
            .routing()
            .map_err(|why| SettingError::invalid(key("routing_key_source"), why))?;
        if !matches!(source, RoutingKey::Static(_)) && self.routing_key.is_some() {
            return Err(SettingError::invalid(
                key("routing_key"),
                "is the routing key of routing_key_source = \"static\" only; remove it or change the source",
            ));
        }
        if self.auto_create_routing_key && source == RoutingKey::Key {
            return Err(SettingError::invalid(
                key("auto_create_routing_key"),
                "declares a queue per routing key with routing_key_source = \"static\" or \"topic\" (as Debezium Server does), not \"key\"",
            ));
        }
        match self.delivery_mode {
            None | Some(1 | 2) => {}
            Some(other) => {
                return Err(SettingError::invalid(
                    key("delivery_mode"),
                    format!("{other}: must be 1 (transient) or 2 (persistent)"),
                ))
            }
        }
        if self.user.is_some() != self.password.is_some() {
            return Err(SettingError::invalid(
                key("password"),
                "user and password go together",
            ));
        }
        for name in self.client_properties.keys() {
            if name.is_empty() || name.len() > SHORT_STRING {
                return Err(SettingError::invalid(
                    key("client_properties"),
                    format!("{name:?}: a name of 1 to 255 bytes"),
                ));
            }
        }
        Ok(())
    }

    fn routing(&self) -> Result<RoutingKey, String> {
        match self.routing_key_source.as_deref() {
            None | Some("static") => Ok(RoutingKey::Static(
                self.routing_key.clone().unwrap_or_default(),
            )),
            Some("topic") => Ok(RoutingKey::Topic),
            Some("key") => Ok(RoutingKey::Key),
            Some(other) => Err(format!(
                "{other:?}: must be \"static\", \"topic\" or \"key\""
            )),
        }
    }

    /// The largest record body the broker takes.
    pub(crate) fn max_message_bytes(&self) -> usize {
        self.max_message_bytes.unwrap_or(DEFAULT_MAX_MESSAGE_BYTES)
    }

    /// Where to connect: `url`, else the separate keys.
    fn uri(&self) -> Result<AMQPUri, String> {
        let mut uri = match &self.url {
            Some(url) => url
                .expose()
                .parse::<AMQPUri>()
                .map_err(|e| format!("not an AMQP URI: {e}"))?,
            None => {
                let scheme = if self.tls {
                    AMQPScheme::AMQPS
                } else {
                    AMQPScheme::AMQP
                };
                let port = self.port.unwrap_or(if self.tls { 5671 } else { 5672 });
                AMQPUri {
                    scheme,
                    authority: AMQPAuthority {
                        userinfo: AMQPUserInfo {
                            username: self.user.clone().unwrap_or_else(|| "guest".to_owned()),
                            password: self
                                .password
                                .as_ref()
                                .map_or_else(|| "guest".to_owned(), |p| p.expose().to_owned()),
                        },
                        host: self.host.clone().unwrap_or_else(|| "localhost".to_owned()),
                        port,
                    },
                    vhost: self.vhost.clone().unwrap_or_else(|| "/".to_owned()),
                    query: AMQPQueryString::default(),
                }
            }
        };
        let q = &mut uri.query;
        q.connection_timeout = Some(self.connection_timeout().as_millis() as u64);
        if let Some(h) = self.heartbeat_s {
            q.heartbeat = Some(h);
        }
        if let Some(f) = self.frame_max {
            q.frame_max = Some(f);
        }
        if let Some(c) = self.channel_max {
            q.channel_max = Some(c);
        }
        Ok(uri)
    }

    fn connection_timeout(&self) -> Duration {
        Duration::from_millis(self.connection_timeout_ms.unwrap_or(10_000))
    }

    /// `host:port`, for messages (never the credentials).
    fn address(&self) -> String {
        match self.uri() {
            Ok(u) => format!("{}:{}", u.authority.host, u.authority.port),
            Err(_) => "the configured server".to_owned(),
        }
    }

    fn tls_config(&self) -> Result<OwnedTLSConfig, String> {
        let read = |p: &PathBuf, key: &str| {
            std::fs::read(p).map_err(|e| format!("sink.rabbitmq.{key} {}: {e}", p.display()))
        };
        let cert_chain = match &self.tls_ca_file {
            Some(p) => Some(
                String::from_utf8(read(p, "tls_ca_file")?)
                    .map_err(|_| format!("sink.rabbitmq.tls_ca_file {}: not PEM", p.display()))?,
            ),
            None => None,
        };
        let identity = match (&self.tls_cert_file, &self.tls_key_file) {
            (Some(cert), Some(key)) => Some(OwnedIdentity::PKCS8 {
                pem: read(cert, "tls_cert_file")?,
                key: read(key, "tls_key_file")?,
            }),
            _ => None,
        };
        Ok(OwnedTLSConfig {
            identity,
            cert_chain,
        })
    }
}

/// What `walrelay check` reads of a RabbitMQ server (declaring nothing:
/// `auto_create_routing_key` is not applied): that it takes a connection
/// and a channel in confirm mode, and whether each exchange the records
/// would go to exists (`sink.rabbitmq.exchange`, else each destination).
pub(crate) async fn probe(
    config: &RabbitMqConfig,
    destinations: &[String],
) -> Result<(String, Vec<(String, bool)>), String> {
    let config = RabbitMqConfig {
        auto_create_routing_key: false,
        ..config.clone()
    };
    let mut publisher = <RabbitMq as Publisher>::connect(&config).await?;
    let exchanges: Vec<String> = match &publisher.exchange {
        Some(e) => vec![e.clone()],
        None => destinations.to_vec(),
    };
    let mut found = Vec::with_capacity(exchanges.len());
    for name in exchanges {
        let exists = publisher.exchange_exists(&name).await?;
        found.push((name, exists));
    }
    let _ = publisher.connection.close(200, "OK".into()).await;
    Ok((
        format!("rabbitmq at {}, publisher confirms on", config.address()),
        found,
    ))
}

/// A connected RabbitMQ publisher: one connection, one channel in confirm
/// mode.
pub(crate) struct RabbitMq {
    connection: Connection,
    channel: Channel,
    exchange: Option<String>,
    routing: RoutingKey,
    auto_create: bool,
    durable: bool,
    delivery_mode: u8,
    ack_timeout: Duration,
    null_value: Bytes,
    mandatory: bool,
    max_bytes: usize,
    header_byte_arrays: bool,
    /// Exchanges known to exist on this connection.
    exchanges: HashSet<String>,
    /// Queues declared on this connection (`auto_create_routing_key`).
    queues: HashSet<String>,
    /// `unroutable_retry_ms`.
    unroutable_retry: Duration,
    /// Until when an unroutable record is published again: set on a
    /// reconnection, from when the broker came back.
    unroutable_until: Option<Instant>,
}

impl Publisher for RabbitMq {
    const NAME: &'static str = "rabbitmq";
    /// One channel keeps the order and RabbitMQ confirms in order; no
    /// transactions (walrelay does not use AMQP's `tx` class, which would
    /// not span its progress anyway) and no deduplication.
    const GUARANTEES: Guarantees = Guarantees {
        idempotent: false,
        transactional: false,
        dedup_by_id: false,
        per_key_order: true,
    };
    const ERROR_CLASS: &'static str = "lapin::Error";
    type Config = RabbitMqConfig;

    async fn connect(config: &RabbitMqConfig) -> Result<RabbitMq, String> {
        let uri = config.uri()?;
        let address = config.address();
        let mut props =
            ConnectionProperties::default().with_connection_name(LongString::from("walrelay"));
        for (name, value) in &config.client_properties {
            props = props.with_client_property(
                ShortString::try_new(name.clone()).map_err(|e| e.to_string())?,
                LongString::from(value.clone()),
            );
        }
        let runtime = lapin::runtime::default_runtime().map_err(|e| e.to_string())?;
        let tls = config.tls_config()?;
        let connect = Connection::connect_uri_with_config(uri, props, tls, runtime);
        let connection = tokio::time::timeout(config.connection_timeout(), connect)
            .await
            .map_err(|_| format!("cannot connect to rabbitmq at {address}: timed out"))?
            .map_err(|e| format!("cannot connect to rabbitmq at {address}: {e}"))?;
        let channel = connection
            .create_channel()
            .await
            .map_err(|e| format!("cannot open a channel on {address}: {e}"))?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| format!("confirm.select on {address}: {e}"))?;
        let routing = config.routing()?;
        let mut publisher = RabbitMq {
            connection,
            channel,
            exchange: config.exchange.clone().filter(|e| !e.is_empty()),
            routing,
            auto_create: config.auto_create_routing_key,
            durable: config.routing_key_durable.unwrap_or(true),
            delivery_mode: config.delivery_mode.unwrap_or(2),
            ack_timeout: Duration::from_millis(
                config.ack_timeout_ms.unwrap_or(DEFAULT_ACK_TIMEOUT_MS),
            ),
            null_value: Bytes::from(
                config
                    .null_value
                    .clone()
                    .unwrap_or_else(|| NULL_DEFAULT.to_owned()),
            ),
            mandatory: config.mandatory.unwrap_or(true),
            max_bytes: config.max_message_bytes(),
            header_byte_arrays: config.header_byte_arrays,
            exchanges: HashSet::new(),
            queues: HashSet::new(),
            unroutable_retry: Duration::from_millis(
                config
                    .unroutable_retry_ms
                    .unwrap_or(DEFAULT_UNROUTABLE_RETRY_MS),
            ),
            unroutable_until: None,
        };
        // Debezium Server declares the static routing key's queue at start.
        if let (true, RoutingKey::Static(name)) = (publisher.auto_create, publisher.routing.clone())
        {
            publisher
                .declare_queue(&name)
                .await
                .map_err(|e| format!("cannot declare the queue {name:?}: {e}"))?;
        }
        Ok(publisher)
    }

    /// Every record of the batch is handed to the channel before any is
    /// waited for: lapin queues a publish's frames when its future is first
    /// polled, so its I/O thread writes the batch in few writes and the
    /// publishing task does not sleep once per message.
    async fn publish(&mut self, batch: &[Outgoing]) -> Vec<Outcome> {
        let deadline = Instant::now() + self.ack_timeout;
        let mut pending = Vec::with_capacity(batch.len());
        for record in batch {
            let p = self.send(record, deadline).await;
            let retry = matches!(p, Pending::Done(Outcome::Retry(_)));
            pending.push(p);
            if retry {
                break;
            }
        }
        let mut outcomes = Vec::with_capacity(pending.len());
        for p in pending {
            let outcome = self.answer(p, deadline).await;
            let retry = matches!(outcome, Outcome::Retry(_));
            outcomes.push(outcome);
            if retry {
                break;
            }
        }
        outcomes
    }

    fn reconnected(&mut self, back_since: std::time::Instant) {
        self.unroutable_until = Some(Instant::from_std(back_since) + self.unroutable_retry);
    }
}

/// A `basic.publish` whose frames are queued, waiting to be written.
type Publishing = Pin<Box<dyn Future<Output = lapin::Result<PublisherConfirm>> + Send>>;

enum Pending {
    Done(Outcome),
    /// Queued on the channel: written, then confirmed.
    Publishing(Publishing),
    /// Written already when first polled; its confirm to come.
    Written(PublisherConfirm),
}

impl RabbitMq {
    /// Hands one record to the channel; its confirm comes later.
    async fn send(&mut self, record: &Outgoing, deadline: Instant) -> Pending {
        let exchange = self
            .exchange
            .clone()
            .unwrap_or_else(|| record.destination.to_string());
        let Ok(exchange_name) = ShortString::try_new(exchange.clone()) else {
            return Pending::Done(refused(
                "invalid_exchange",
                false,
                format!("the exchange name {exchange:?} is longer than 255 bytes"),
            ));
        };
        let routing_key = match &self.routing {
            RoutingKey::Static(k) => k.clone(),
            RoutingKey::Topic => record.destination.to_string(),
            RoutingKey::Key => match &record.key {
                None => String::new(),
                Some(k) => match std::str::from_utf8(k) {
                    Ok(s) => s.to_owned(),
                    Err(_) => {
                        return Pending::Done(refused(
                            "invalid_routing_key",
                            false,
                            "the record key is not UTF-8 text, so it cannot be the routing key"
                                .to_owned(),
                        ))
                    }
                },
            },
        };
        let Ok(routing_key_name) = ShortString::try_new(routing_key.clone()) else {
            return Pending::Done(refused(
                "invalid_routing_key",
                false,
                format!(
                    "the routing key is {} bytes; AMQP allows 255",
                    routing_key.len()
                ),
            ));
        };
        let body = record
            .value
            .clone()
            .unwrap_or_else(|| self.null_value.clone());
        if body.len() > self.max_bytes {
            return Pending::Done(refused(
                "message_too_large",
                true,
                format!(
                    "the message body is {} bytes, above max_message_bytes {}",
                    body.len(),
                    self.max_bytes
                ),
            ));
        }
        let headers = match header_table(record, self.header_byte_arrays) {
            Ok(h) => h,
            Err(why) => return Pending::Done(refused("invalid_header", false, why)),
        };
        match timeout_at(deadline, self.exchange_exists(&exchange)).await {
            Err(_) => return Pending::Done(Outcome::Retry("checking the exchange timed out".into())),
            Ok(Err(why)) => return Pending::Done(Outcome::Retry(why)),
            Ok(Ok(false)) => {
                return Pending::Done(refused(
                    "no_exchange",
                    false,
                    format!(
                        "no exchange {exchange:?} in the virtual host (RabbitMQ answered 404 NOT_FOUND to a passive exchange.declare); walrelay does not declare exchanges"
                    ),
                ))
            }
            Ok(Ok(true)) => {}
        }
        if self.auto_create && self.routing == RoutingKey::Topic {
            match timeout_at(deadline, self.declare_queue(&routing_key)).await {
                Err(_) => return Pending::Done(Outcome::Retry("queue.declare timed out".into())),
                Ok(Err(e)) => {
                    return Pending::Done(Outcome::Failed {
                        class: FailureClass::Broker,
                        code: "queue_declare".to_owned(),
                        error: format!(
                            "auto_create_routing_key: cannot declare the queue {routing_key:?}: {e}"
                        ),
                    })
                }
                Ok(Ok(())) => {}
            }
        }
        let properties = BasicProperties::default()
            .with_delivery_mode(self.delivery_mode)
            .with_headers(headers);
        let channel = self.channel.clone();
        let options = BasicPublishOptions {
            mandatory: self.mandatory,
            immediate: false,
        };
        let mut publish: Publishing = Box::pin(async move {
            channel
                .basic_publish(exchange_name, routing_key_name, options, &body, properties)
                .await
        });
        // The first poll queues the frames (and takes the delivery tag the
        // confirm will carry), so records leave in the batch's order; the
        // write itself is waited for with the confirms.
        match futures_util::poll!(publish.as_mut()) {
            std::task::Poll::Ready(Err(e)) => Pending::Done(Outcome::Retry(channel_error(&e))),
            std::task::Poll::Ready(Ok(confirm)) => Pending::Written(confirm),
            std::task::Poll::Pending => Pending::Publishing(publish),
        }
    }

    /// What became of a record handed over: written, then confirmed, by
    /// `deadline`.
    async fn answer(&self, pending: Pending, deadline: Instant) -> Outcome {
        let confirm = match pending {
            Pending::Done(outcome) => return outcome,
            Pending::Written(confirm) => confirm,
            Pending::Publishing(publishing) => match timeout_at(deadline, publishing).await {
                Err(_) => return Outcome::Retry("basic.publish timed out".into()),
                Ok(Err(e)) => return Outcome::Retry(channel_error(&e)),
                Ok(Ok(confirm)) => confirm,
            },
        };
        match timeout_at(deadline, confirm).await {
            Err(_) => Outcome::Retry(format!(
                "no publisher confirm within ack_timeout_ms ({} ms)",
                self.ack_timeout.as_millis()
            )),
            Ok(result) => recovering(confirmation(result), self.unroutable_until, Instant::now()),
        }
    }

    /// Whether `name` exists: a passive `exchange.declare` on a channel of
    /// its own (a 404 closes that channel, not the publishing one), once
    /// per connection for an exchange that exists.
    async fn exchange_exists(&mut self, name: &str) -> Result<bool, String> {
        if self.exchanges.contains(name) {
            return Ok(true);
        }
        let probe = self
            .connection
            .create_channel()
            .await
            .map_err(|e| channel_error(&e))?;
        let declared = probe
            .exchange_declare(
                ShortString::try_new(name).map_err(|e| e.to_string())?,
                ExchangeKind::Direct,
                ExchangeDeclareOptions {
                    passive: true,
                    ..ExchangeDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await;
        match declared {
            Ok(()) => {
                let _ = probe.close(200, "OK".into()).await;
                self.exchanges.insert(name.to_owned());
                Ok(true)
            }
            Err(e) if soft_error(&e) == Some(AMQPSoftError::NOTFOUND) => Ok(false),
            Err(e) => Err(channel_error(&e)),
        }
    }

    /// Declares the queue `name` as Debezium Server's
    /// `autoCreateRoutingKey` does (durable or not, not exclusive, not
    /// auto-deleted, no arguments), once per connection.
    async fn declare_queue(&mut self, name: &str) -> Result<(), String> {
        if self.queues.contains(name) {
            return Ok(());
        }
        let channel = self
            .connection
            .create_channel()
            .await
            .map_err(|e| channel_error(&e))?;
        channel
            .queue_declare(
                ShortString::try_new(name).map_err(|e| e.to_string())?,
                QueueDeclareOptions {
                    durable: self.durable,
                    exclusive: false,
                    auto_delete: false,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .map_err(|e| channel_error(&e))?;
        let _ = channel.close(200, "OK".into()).await;
        self.queues.insert(name.to_owned());
        Ok(())
    }
}

/// The record's headers as an AMQP table: a UTF-8 value as a long string
/// (Debezium Server's header values are Java strings at the json header
/// format), other bytes as a byte array, and every value as a byte array
/// with `byte_arrays` (its `jsonbytearray` format hands the sink `byte[]`,
/// which the Java client writes as `x`: observed side by side); a null
/// value as void; a later header of the same name replaces an earlier one
/// (a Java `HashMap`).
fn header_table(record: &Outgoing, byte_arrays: bool) -> Result<FieldTable, String> {
    let mut table = FieldTable::default();
    for h in &record.headers {
        let name = ShortString::try_new(h.name.to_string()).map_err(|_| {
            format!(
                "header name {:?}... is longer than 255 bytes (an AMQP short string)",
                h.name.chars().take(40).collect::<String>()
            )
        })?;
        let value = match &h.value {
            None => AMQPValue::Void,
            Some(v) => match std::str::from_utf8(v) {
                Ok(_) if !byte_arrays => AMQPValue::LongString(LongString::from(v.to_vec())),
                _ => AMQPValue::ByteArray(ByteArray::from(v.to_vec())),
            },
        };
        table.insert(name, value);
    }
    Ok(table)
}

/// What one confirm says.
fn confirmation(result: lapin::Result<Confirmation>) -> Outcome {
    match result {
        Ok(Confirmation::Ack(None) | Confirmation::NotRequested) => Outcome::Acked,
        Ok(Confirmation::Ack(Some(returned))) => refused(
            "unroutable",
            false,
            format!(
                "basic.return {} {}: no binding of exchange {:?} routes routing key {:?} (the message was published mandatory)",
                returned.reply_code,
                returned.reply_text,
                returned.delivery.exchange.as_str(),
                returned.delivery.routing_key.as_str()
            ),
        ),
        Ok(Confirmation::Nack(_)) => Outcome::Retry(
            "basic.nack: the broker could not store the message (a queue failed, or lost its majority); publishing it again"
                .to_owned(),
        ),
        Err(e) => Outcome::Retry(channel_error(&e)),
    }
}

/// `outcome`, with an unroutable record published again while `until`
/// (a reconnection's grace) has not passed: the node may still be
/// restoring its bindings.
fn recovering(outcome: Outcome, until: Option<Instant>, now: Instant) -> Outcome {
    match (outcome, until) {
        (
            Outcome::Failed {
                class: FailureClass::Record {
                    kind: "unroutable", ..
                },
                error,
                ..
            },
            Some(until),
        ) if now < until => Outcome::Retry(format!(
            "{error}; RabbitMQ came back only recently and may still be restoring its bindings: publishing it again (for {} ms more, unroutable_retry_ms)",
            (until - now).as_millis()
        )),
        (outcome, _) => outcome,
    }
}

/// The soft (channel-level) AMQP error `e` is, if any.
fn soft_error(e: &lapin::Error) -> Option<AMQPSoftError> {
    match e.kind() {
        ErrorKind::ProtocolError(amqp) => match amqp.kind() {
            AMQPErrorKind::Soft(soft) => Some(soft.clone()),
            AMQPErrorKind::Hard(_) => None,
        },
        _ => None,
    }
}

/// A channel or connection error, for a retry: the worker drops the
/// connection and opens a new one.
fn channel_error(e: &lapin::Error) -> String {
    let text = crate::chain::DisplayChain(e).to_string();
    match soft_error(e) {
        Some(AMQPSoftError::NOTFOUND) => {
            format!("{text} (an exchange was deleted while in use; it is checked again)")
        }
        Some(AMQPSoftError::ACCESSREFUSED) => {
            format!(
                "{text} (the user may not write to the exchange: grant it, or change the exchange)"
            )
        }
        _ => text,
    }
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

    fn base() -> RabbitMqConfig {
        RabbitMqConfig {
            host: Some("127.0.0.1".into()),
            ..RabbitMqConfig::default()
        }
    }

    fn refusal(c: &RabbitMqConfig) -> String {
        c.validate().unwrap_err().to_string()
    }

    #[test]
    fn the_section_names_the_key_it_refuses() {
        assert!(base().validate().is_ok());
        assert!(
            RabbitMqConfig::default().validate().is_ok(),
            "localhost, guest"
        );
        let c = RabbitMqConfig {
            delivery_mode: Some(3),
            ..base()
        };
        assert!(refusal(&c).contains("sink.rabbitmq.delivery_mode"));
        let c = RabbitMqConfig {
            routing_key_source: Some("header".into()),
            ..base()
        };
        assert!(refusal(&c).contains("sink.rabbitmq.routing_key_source"));
        let c = RabbitMqConfig {
            routing_key_source: Some("topic".into()),
            routing_key: Some("rk".into()),
            ..base()
        };
        assert!(refusal(&c).contains("sink.rabbitmq.routing_key"));
        let c = RabbitMqConfig {
            url: Some(Secret::new("amqp://u:p@h:5672/%2f")),
            host: Some("h".into()),
            ..RabbitMqConfig::default()
        };
        assert!(refusal(&c).contains("sink.rabbitmq.host"));
        let c = RabbitMqConfig {
            url: Some(Secret::new("http://h")),
            ..RabbitMqConfig::default()
        };
        assert!(refusal(&c).contains("sink.rabbitmq.url"));
        let c = RabbitMqConfig {
            ack_timeout_ms: Some(0),
            ..base()
        };
        assert!(refusal(&c).contains("sink.rabbitmq.ack_timeout_ms"));
        let c = RabbitMqConfig {
            user: Some("u".into()),
            ..base()
        };
        assert!(refusal(&c).contains("sink.rabbitmq.password"));
        let c = RabbitMqConfig {
            tls_ca_file: Some("/ca.pem".into()),
            ..base()
        };
        assert!(refusal(&c).contains("sink.rabbitmq.tls_ca_file"));
        let c = RabbitMqConfig {
            routing_key_source: Some("key".into()),
            auto_create_routing_key: true,
            ..base()
        };
        assert!(refusal(&c).contains("sink.rabbitmq.auto_create_routing_key"));
        let c = RabbitMqConfig {
            exchange: Some("x".repeat(256)),
            ..base()
        };
        assert!(refusal(&c).contains("sink.rabbitmq.exchange"));
    }

    #[test]
    fn secrets_stay_out_of_debug() {
        let c = RabbitMqConfig {
            user: Some("app".into()),
            password: Some(Secret::new("hunter2")),
            ..base()
        };
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("hunter2") && shown.contains("app"),
            "{shown}"
        );
        let c = RabbitMqConfig {
            url: Some(Secret::new("amqps://app:s3cr3t@rabbit.example:5671/prod")),
            ..RabbitMqConfig::default()
        };
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("s3cr3t") && shown.contains("rabbit.example:5671"),
            "{shown}"
        );
        assert_eq!(c.address(), "rabbit.example:5671");
    }

    #[test]
    fn the_separate_keys_make_the_uri() {
        let c = RabbitMqConfig {
            host: Some("h".into()),
            vhost: Some("v".into()),
            tls: true,
            heartbeat_s: Some(5),
            ..RabbitMqConfig::default()
        };
        let u = c.uri().unwrap();
        assert_eq!(u.scheme, AMQPScheme::AMQPS);
        assert_eq!(u.authority.port, 5671);
        assert_eq!(u.authority.userinfo.username, "guest");
        assert_eq!(u.vhost, "v");
        assert_eq!(u.query.heartbeat, Some(5));
        let c = RabbitMqConfig {
            url: Some(Secret::new("amqp://a:b@h:1234/%2f")),
            ..RabbitMqConfig::default()
        };
        let u = c.uri().unwrap();
        assert_eq!((u.authority.port, u.vhost.as_str()), (1234, "/"));
    }

    #[test]
    fn headers_are_long_strings_unless_they_are_not_text() {
        let record = Outgoing {
            destination: Arc::from("t"),
            key: None,
            value: None,
            headers: vec![
                RecordHeader {
                    name: Arc::from("id"),
                    value: Some(Bytes::from_static(b"{\"payload\":\"x\"}")),
                },
                RecordHeader {
                    name: Arc::from("bin"),
                    value: Some(Bytes::from_static(&[0xff, 0x00])),
                },
                RecordHeader {
                    name: Arc::from("null"),
                    value: None,
                },
            ],
            dedup_id: None,
        };
        let t = header_table(&record, false).unwrap();
        let get = |k: &str| t.inner().get(k).cloned();
        assert_eq!(
            get("id"),
            Some(AMQPValue::LongString(LongString::from(
                b"{\"payload\":\"x\"}".to_vec()
            )))
        );
        assert_eq!(
            get("bin"),
            Some(AMQPValue::ByteArray(ByteArray::from(vec![0xff, 0x00])))
        );
        assert_eq!(get("null"), Some(AMQPValue::Void));
        // jsonbytearray: every value a byte array, as Debezium Server's.
        let t = header_table(&record, true).unwrap();
        assert_eq!(
            t.inner().get("id").cloned(),
            Some(AMQPValue::ByteArray(ByteArray::from(
                b"{\"payload\":\"x\"}".to_vec()
            )))
        );
        assert_eq!(t.inner().get("null").cloned(), Some(AMQPValue::Void));
    }

    #[test]
    fn a_nack_is_retried_and_a_return_refuses_the_record() {
        assert_eq!(confirmation(Ok(Confirmation::Ack(None))), Outcome::Acked);
        assert!(matches!(
            confirmation(Ok(Confirmation::Nack(None))),
            Outcome::Retry(_)
        ));
    }

    #[test]
    fn an_unroutable_record_is_retried_only_in_a_reconnections_grace() {
        let unroutable = || refused("unroutable", false, "basic.return 312 NO_ROUTE".into());
        let now = Instant::now();
        let grace = Some(now + Duration::from_secs(30));
        // First connection: refused at once.
        assert_eq!(recovering(unroutable(), None, now), unroutable());
        // Within the grace: published again, the return named.
        match recovering(unroutable(), grace, now) {
            Outcome::Retry(why) => assert!(
                why.contains("312 NO_ROUTE") && why.contains("unroutable_retry_ms"),
                "{why}"
            ),
            other => panic!("{other:?}"),
        }
        // After it: refused.
        assert_eq!(
            recovering(unroutable(), grace, now + Duration::from_secs(31)),
            unroutable()
        );
        // Other refusals are not touched.
        let too_large = refused("message_too_large", true, "big".into());
        assert_eq!(recovering(too_large.clone(), grace, now), too_large);
        assert_eq!(recovering(Outcome::Acked, grace, now), Outcome::Acked);
    }
}
