//! Debezium Server's sinks other than Kafka: `debezium.sink.type` and the
//! `debezium.sink.<type>.*` keys of `nats-jetstream`, `redis`, `rabbitmq`,
//! `rabbitmqstream` and `http` (and, through [`super::aws_sinks`], `sqs`, `sns` and `kinesis`;
//! through [`super::pubsub`] and [`super::pulsar`], `pubsub` and `pulsar`),
//! onto `[sink]`. Every key is honoured, noted as walrelay's own behaviour, or
//! refused by name with the reason (docs/debezium-server-sinks.md lists
//! them).

use std::collections::BTreeMap;

use super::{Keys, Notes};
use crate::config::ConfigError;
use crate::secret::Secret;
use crate::sink::config::{SinkConfig, SinkKind};
use crate::sink::http::HttpConfig;
use crate::sink::nats::NatsConfig;
use crate::sink::rabbitmq::RabbitMqConfig;
use crate::sink::rabbitmq_stream::RabbitMqStreamConfig;
use crate::sink::redis::RedisConfig;

/// What `debezium.format.key`, `debezium.format.value` and
/// `debezium.format.header` say, as the file spells them (`None`: not
/// set): some sinks depend on them.
#[derive(Debug, Clone, Default)]
pub(in crate::config) struct ServerFormats {
    /// `debezium.format.key`.
    pub(in crate::config) key: Option<String>,
    /// `debezium.format.value`.
    pub(in crate::config) value: Option<String>,
    /// `debezium.format.header`.
    pub(in crate::config) header: Option<String>,
}

/// The sink `debezium.sink.type` names, from its keys (given without the
/// `debezium.sink.` prefix); Kafka's keys are the caller's.
pub(in crate::config) fn translate_sink(
    kind: SinkKind,
    keys: BTreeMap<String, String>,
    formats: &ServerFormats,
    notes: &mut Notes,
) -> Result<SinkConfig, ConfigError> {
    let mut keys = Keys::new(keys, "debezium.sink.");
    let mut sink = SinkConfig {
        kind,
        ..SinkConfig::default()
    };
    match kind {
        SinkKind::Kafka => {}
        SinkKind::NatsJetStream => {
            let mut own = Keys::new(
                keys.take_prefixed("nats-jetstream."),
                "debezium.sink.nats-jetstream.",
            );
            sink.nats = Some(nats(&mut own, notes)?);
            rest(&mut own)?;
        }
        SinkKind::Redis => {
            let mut own = Keys::new(keys.take_prefixed("redis."), "debezium.sink.redis.");
            sink.redis = Some(redis(&mut own, notes)?);
            rest(&mut own)?;
        }
        SinkKind::RabbitMq => {
            let (own, others) = case_insensitive(keys.drain(), "rabbitmq.");
            keys = Keys::new(others, "debezium.sink.");
            let mut own = Keys::new(own, "debezium.sink.rabbitmq.");
            sink.rabbitmq = Some(rabbitmq(&mut own, formats, notes)?);
            rest(&mut own)?;
        }
        SinkKind::RabbitMqStream => {
            let (own, others) = case_insensitive(keys.drain(), "rabbitmqstream.");
            keys = Keys::new(others, "debezium.sink.");
            let mut own = Keys::new(own, "debezium.sink.rabbitmqstream.");
            sink.rabbitmqstream = Some(rabbitmq_stream(&mut own, notes)?);
            rest(&mut own)?;
        }
        SinkKind::Http => {
            let mut own = Keys::new(keys.take_prefixed("http."), "debezium.sink.http.");
            sink.http = Some(http(&mut own, formats, notes)?);
            rest(&mut own)?;
        }
        SinkKind::Sqs => {
            let mut own = Keys::new(keys.take_prefixed("sqs."), "debezium.sink.sqs.");
            sink.sqs = Some(super::aws_sinks::sqs(&mut own, notes)?);
            rest(&mut own)?;
        }
        SinkKind::Kinesis => {
            let mut own = Keys::new(keys.take_prefixed("kinesis."), "debezium.sink.kinesis.");
            sink.kinesis = Some(super::aws_sinks::kinesis(&mut own, notes)?);
            rest(&mut own)?;
        }
        SinkKind::Sns => {
            let mut own = Keys::new(keys.take_prefixed("sns."), "debezium.sink.sns.");
            sink.sns = Some(super::aws_sinks::sns(&mut own, notes)?);
            rest(&mut own)?;
        }
        SinkKind::PubSub => {
            let mut own = Keys::new(keys.take_prefixed("pubsub."), "debezium.sink.pubsub.");
            sink.pubsub = Some(super::pubsub::pubsub(&mut own, notes)?);
            rest(&mut own)?;
        }
        SinkKind::Pulsar => {
            let mut own = Keys::new(keys.take_prefixed("pulsar."), "debezium.sink.pulsar.");
            sink.pulsar = Some(super::pulsar::pulsar(&mut own, notes)?);
            rest(&mut own)?;
        }
    }
    for key in keys.drain().into_keys() {
        notes.ignore(
            format!("debezium.sink.{key}"),
            format!(
                "ignored: a setting of another sink than debezium.sink.type={}",
                kind.as_str()
            ),
        );
    }
    Ok(sink)
}

/// The keys under `prefix` lower-cased and without it, and the others as
/// they were: 3.6.1 reads the RabbitMQ sinks' keys case-insensitively
/// (`BaseChangeConsumer.getConfiguration`), except the names under
/// `connection.client.properties.`.
fn case_insensitive(
    keys: BTreeMap<String, String>,
    prefix: &str,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let mut own = BTreeMap::new();
    let mut others = BTreeMap::new();
    for (key, value) in keys {
        let lower = key.to_ascii_lowercase();
        match lower.strip_prefix(prefix) {
            Some(rest) => {
                let name = match rest.strip_prefix(CLIENT_PROPERTIES) {
                    Some(_) => format!(
                        "{CLIENT_PROPERTIES}{}",
                        &key[prefix.len() + CLIENT_PROPERTIES.len()..]
                    ),
                    None => rest.to_owned(),
                };
                own.insert(name, value);
            }
            None => {
                others.insert(key, value);
            }
        }
    }
    (own, others)
}

/// `debezium.sink.type` as walrelay knows it.
pub(in crate::config) fn sink_kind(value: &str) -> Option<SinkKind> {
    match value {
        "kafka" => Some(SinkKind::Kafka),
        "nats-jetstream" => Some(SinkKind::NatsJetStream),
        "redis" => Some(SinkKind::Redis),
        "http" => Some(SinkKind::Http),
        "rabbitmq" => Some(SinkKind::RabbitMq),
        "rabbitmqstream" => Some(SinkKind::RabbitMqStream),
        "sqs" => Some(SinkKind::Sqs),
        "kinesis" => Some(SinkKind::Kinesis),
        "sns" => Some(SinkKind::Sns),
        "pubsub" => Some(SinkKind::PubSub),
        "pulsar" => Some(SinkKind::Pulsar),
        _ => None,
    }
}

/// Why a sink of Debezium Server's that walrelay does not implement is
/// refused, when there is more to say than that.
/// (Every sink of Debezium Server 3.6.1 that walrelay lacks is refused with
/// the list of those it has; none needs more words today.)
pub(in crate::config) fn unsupported_sink(_value: &str) -> Option<&'static str> {
    None
}

/// A key of the sink's own that walrelay does not know: refused, so a
/// setting is never silently dropped.
pub(in crate::config) fn rest(own: &mut Keys) -> Result<(), ConfigError> {
    match own.drain().into_keys().next() {
        None => Ok(()),
        Some(key) => Err(own.unsupported(
            &key,
            "not a key of Debezium Server 3.6.1's sink that walrelay knows",
        )),
    }
}

fn nats(k: &mut Keys, notes: &mut Notes) -> Result<NatsConfig, ConfigError> {
    let url = k.take_required("url", "the NATS servers to publish to")?;
    let create_stream = k.take_bool("create-stream", false)?;
    let subjects = k
        .take("subjects")
        .map(|s| s.split(',').map(|x| x.trim().to_owned()).collect());
    // Debezium Server: `file` is file storage, any other value memory.
    let storage = k
        .take("storage")
        .map(|s| if s == "file" { s } else { "memory".to_owned() });
    let stream = k.take("stream-name");
    if !create_stream {
        for (key, set) in [
            ("stream-name", stream.is_some()),
            ("subjects", subjects.is_some()),
            ("storage", storage.is_some()),
        ] {
            if set {
                notes.ignore(
                    k.name(key),
                    "ignored: describes the stream create-stream=true creates (as in Debezium Server)",
                );
            }
        }
    }
    // Debezium Server waits for the acknowledgements of a batch
    // (async, the default) or of each message (sync), and stops on a
    // failure; walrelay waits for each PubAck and publishes again.
    let ack_timeout_ms = k.take_u64("async.timeout.ms")?;
    for key in [
        "async.enabled",
        "sync.retries",
        "sync.retry.interval.ms",
        "sync.retry.max.interval.ms",
        "sync.retry.backoff.multiplier",
    ] {
        if k.take(key).is_some() {
            notes.ignore(
                k.name(key),
                "ignored: walrelay waits for each message's PubAck and publishes it again after a \
                 failure (async.timeout.ms is how long it waits), instead of stopping",
            );
        }
    }
    let secret = |k: &mut Keys, key: &str| k.take_raw(key).map(Secret::new);
    let jwt = secret(k, "auth.jwt");
    let seed = secret(k, "auth.seed");
    let user = k.take("auth.user");
    let password = secret(k, "auth.password");
    for key in [
        "auth.tls.keystore",
        "auth.tls.keystore.password",
        "auth.tls.password",
    ] {
        if k.take_raw(key).is_some() {
            return Err(k.unsupported(
                key,
                "a Java keystore; walrelay reads PEM files: give the native [sink.nats] \
                 tls_ca_file, tls_cert_file and tls_key_file instead",
            ));
        }
    }
    Ok(NatsConfig {
        url,
        create_stream,
        stream: stream.filter(|_| create_stream),
        stream_description: Some(crate::sink::nats::DEBEZIUM_STREAM_DESCRIPTION),
        subjects: subjects.filter(|_| create_stream),
        storage: storage.filter(|_| create_stream),
        user,
        password,
        jwt,
        seed,
        ack_timeout_ms,
        ..NatsConfig::default()
    })
}

fn redis(k: &mut Keys, notes: &mut Notes) -> Result<RedisConfig, ConfigError> {
    let address = k.take_required("address", "the Redis server, host:port")?;
    let db = match k.take_u64("db.index")? {
        None => None,
        Some(n) => Some(i64::try_from(n).map_err(|_| k.invalid("db.index", "too large"))?),
    };
    let batch_size = k
        .take_u64("batch.size")?
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    let config = RedisConfig {
        address,
        user: k.take("user").filter(|u| !u.is_empty()),
        password: k
            .take_raw("password")
            .filter(|p| !p.is_empty())
            .map(Secret::new),
        db,
        tls: k.take_bool("ssl.enabled", false)?,
        null_key: k.take("null.key"),
        null_value: k.take("null.value"),
        message_format: k.take("message.format"),
        batch_size,
        memory_threshold_percentage: None,
        memory_limit_mb: k.take_u64("memory.limit.mb")?,
        connection_timeout_ms: k.take_u64("connection.timeout.ms")?,
        socket_timeout_ms: k.take_u64("socket.timeout.ms")?,
        skip_heartbeats: Some(k.take_bool("skip.heartbeat.messages", true)?),
    };
    // Removed from Debezium Server in 2.6.0: 3.6.1 checks used_memory
    // against the limit itself (100 %).
    let config = RedisConfig {
        memory_threshold_percentage: Some(100),
        ..config
    };
    if k.take("memory.threshold.percentage").is_some() {
        notes.ignore(
            k.name("memory.threshold.percentage"),
            "ignored, as Debezium Server 3.6.1 ignores it (removed in 2.6.0): writes wait while used_memory reaches the limit",
        );
    }
    if k.take("buffer.fill.rate").is_some() {
        notes.ignore(
            k.name("buffer.fill.rate"),
            "ignored: walrelay compares used_memory with the limit before each pipeline, without Debezium Server's estimate of what the pipeline adds",
        );
    }
    if k.take("retry.max.attempts").is_some() {
        notes.ignore(
            k.name("retry.max.attempts"),
            "ignored, as Debezium Server's redis sink ignores it: a failed pipeline is retried until it succeeds",
        );
    }
    if k.take_bool("cluster.enabled", false)? {
        return Err(k.unsupported(
            "cluster.enabled",
            "Redis Cluster is not supported by walrelay's redis sink; give one node's address",
        ));
    }
    for store in ["ssl.truststore", "ssl.keystore"] {
        let path = format!("{store}.path");
        if k.take_raw(&path).is_some_and(|v| !v.is_empty()) {
            return Err(k.unsupported(
                &path,
                "a Java key or trust store; walrelay's redis sink verifies the server with the system's CA certificates",
            ));
        }
        // Without a store its type (JKS by default) and password say
        // nothing, to Debezium Server either.
        for key in [format!("{store}.password"), format!("{store}.type")] {
            if k.take_raw(&key).is_some() {
                notes.ignore(k.name(&key), format!("ignored: {store}.path is not set"));
            }
        }
    }
    if k.take_bool("wait.enabled", false)? {
        return Err(k.unsupported(
            "wait.enabled",
            "asks Redis to WAIT until replicas have each write, which walrelay's redis sink \
             does not do yet; remove it (or set it false) to publish with the primary's reply \
             as the acknowledgement",
        ));
    }
    for key in [
        "wait.timeout.ms",
        "wait.retry.enabled",
        "wait.retry.delay.ms",
    ] {
        if k.take(key).is_some() {
            notes.ignore(
                k.name(key),
                "ignored: belongs to wait.enabled, which is off",
            );
        }
    }
    for key in ["retry.initial.delay.ms", "retry.max.delay.ms"] {
        if k.take(key).is_some() {
            notes.ignore(
                k.name(key),
                "ignored: walrelay retries a failed pipeline after 100 ms, doubling to 5 s",
            );
        }
    }
    if k.take("ssl.hostname.verification.enabled").is_some() {
        notes.ignore(
            k.name("ssl.hostname.verification.enabled"),
            "ignored: walrelay always verifies the server's host name over TLS",
        );
    }
    Ok(config)
}

/// `connection.client.properties.`: the prefix of the AMQP client's
/// client properties.
const CLIENT_PROPERTIES: &str = "connection.client.properties.";

/// The rabbitmq sink's keys (lower-cased, without the
/// `debezium.sink.rabbitmq.` prefix). `connection.*` are the AMQP Java
/// client's `ConnectionFactoryConfigurator` keys (amqp-client 5.16).
fn rabbitmq(
    k: &mut Keys,
    formats: &ServerFormats,
    notes: &mut Notes,
) -> Result<RabbitMqConfig, ConfigError> {
    let mut config = rabbitmq_connection(k)?;
    config.tls = rabbitmq_tls(k, notes)?;
    rabbitmq_tuning(k, notes, &mut config)?;
    rabbitmq_routing(k, notes, &mut config)?;
    rabbitmq_key_format(k, formats, &config)?;
    config.null_value = k.take_raw("null.value");
    Ok(config)
}

/// A port key's value.
fn u16_of(k: &mut Keys, key: &str) -> Result<Option<u16>, ConfigError> {
    match k.take_u64(key)? {
        None => Ok(None),
        Some(n) => u16::try_from(n)
            .map(Some)
            .map_err(|_| k.invalid(key, "must be at most 65535")),
    }
}

/// Where and as whom: `connection.uri`, or the separate keys.
fn rabbitmq_connection(k: &mut Keys) -> Result<RabbitMqConfig, ConfigError> {
    let url = k.take_raw("connection.uri").map(Secret::new);
    let host = k.take("connection.host");
    let port = u16_of(k, "connection.port")?;
    let user = k.take("connection.username");
    let password = k.take_raw("connection.password").map(Secret::new);
    let vhost = k.take("connection.virtual.host");
    if url.is_some() {
        for key in [
            "connection.host",
            "connection.port",
            "connection.username",
            "connection.password",
            "connection.virtual.host",
        ] {
            let set = match key {
                "connection.host" => host.is_some(),
                "connection.port" => port.is_some(),
                "connection.username" => user.is_some(),
                "connection.password" => password.is_some(),
                _ => vhost.is_some(),
            };
            if set {
                return Err(k.unsupported(
                    key,
                    "overrides a part of connection.uri; give the whole URI, or the separate keys without it",
                ));
            }
        }
    }
    // The Java client's defaults are guest/guest; walrelay's are the same,
    // and wants both or neither.
    let (user, password) = match (user, password) {
        (Some(u), None) => (Some(u), Some(Secret::new("guest"))),
        (None, Some(p)) => (Some("guest".to_owned()), Some(p)),
        both => both,
    };
    Ok(RabbitMqConfig {
        url,
        host,
        port,
        vhost,
        user,
        password,
        ..RabbitMqConfig::default()
    })
}

/// `connection.ssl.*`: whether TLS is on; what walrelay cannot do refused.
fn rabbitmq_tls(k: &mut Keys, notes: &mut Notes) -> Result<bool, ConfigError> {
    let tls = k.take_bool("connection.ssl.enabled", false)?;
    for key in [
        "connection.ssl.validate.server.certificate",
        "connection.ssl.validate-server-certificate",
        "connection.ssl.verify.hostname",
        "connection.ssl.verify-hostname",
    ] {
        match k.take(key) {
            None => {}
            Some(v) if v.eq_ignore_ascii_case("true") => {}
            Some(_) => {
                return Err(k.unsupported(
                    key,
                    "walrelay always verifies the server's certificate and host name over TLS",
                ))
            }
        }
    }
    for key in [
        "connection.ssl.key.store",
        "connection.ssl.key-store",
        "connection.ssl.key.store.password",
        "connection.ssl.key-store-password",
        "connection.ssl.key.store.type",
        "connection.ssl.key-store-type",
        "connection.ssl.key.store.algorithm",
        "connection.ssl.key-store-algorithm",
        "connection.ssl.trust.store",
        "connection.ssl.trust-store",
        "connection.ssl.trust.store.password",
        "connection.ssl.trust-store-password",
        "connection.ssl.trust.store.type",
        "connection.ssl.trust-store-type",
        "connection.ssl.trust.store.algorithm",
        "connection.ssl.trust-store-algorithm",
    ] {
        if k.take_raw(key).is_some() {
            return Err(k.unsupported(
                key,
                "a Java keystore; walrelay reads PEM files: give the native [sink.rabbitmq] \
                 tls_ca_file, tls_cert_file and tls_key_file instead",
            ));
        }
    }
    if k.take("connection.ssl.algorithm").is_some() {
        notes.ignore(
            k.name("connection.ssl.algorithm"),
            "ignored: OpenSSL negotiates the highest TLS version both sides support",
        );
    }
    Ok(tls)
}

/// The connection's tuning and the Java client's own settings.
fn rabbitmq_tuning(
    k: &mut Keys,
    notes: &mut Notes,
    config: &mut RabbitMqConfig,
) -> Result<(), ConfigError> {
    let connection_timeout_ms = k.take_u64("connection.connection.timeout")?;
    let heartbeat_s = u16_of(k, "connection.connection.heartbeat")?;
    let frame_max = match k.take_u64("connection.connection.frame.max")? {
        None => None,
        Some(n) => Some(
            u32::try_from(n)
                .map_err(|_| k.invalid("connection.connection.frame.max", "too large"))?,
        ),
    };
    let channel_max = u16_of(k, "connection.connection.channel.max")?;
    for (key, why) in [
        (
            "connection.handshake.timeout",
            "walrelay bounds the whole connect by connection.timeout",
        ),
        (
            "connection.shutdown.timeout",
            "walrelay closes its connection without waiting for consumers (it has none)",
        ),
        (
            "connection.channel.rpc.timeout",
            "walrelay bounds each batch by ackTimeout",
        ),
        (
            "connection.channel.should.check.rpc.response.type",
            "a Java client check",
        ),
        (
            "connection.connection.recovery.enabled",
            "walrelay opens a new connection itself after any failure",
        ),
        (
            "connection.topology.recovery.enabled",
            "walrelay opens a new connection itself after any failure",
        ),
        (
            "connection.connection.recovery.interval",
            "walrelay retries after 100 ms, doubling to 5 s",
        ),
        ("connection.use.nio", "the Java client's I/O mode"),
    ] {
        if k.take(key).is_some() {
            notes.ignore(k.name(key), format!("ignored: {why}"));
        }
    }
    for (key, _) in k.take_prefixed("connection.nio.") {
        notes.ignore(
            k.name(&format!("connection.nio.{key}")),
            "ignored: the Java client's I/O mode",
        );
    }
    let client_properties = k
        .take_prefixed(CLIENT_PROPERTIES)
        .into_iter()
        .filter(|(name, _)| !name.is_empty())
        .collect();
    config.connection_timeout_ms = connection_timeout_ms;
    config.heartbeat_s = heartbeat_s;
    config.frame_max = frame_max;
    config.channel_max = channel_max;
    config.client_properties = client_properties;
    Ok(())
}

/// routingKey.source=key with a byte-array key format: 3.6.1's sink takes
/// the routing key from a key that is a String (or null) only, and stops on
/// the first record otherwise ("Unexpected data type '[B'").
fn rabbitmq_key_format(
    k: &Keys,
    formats: &ServerFormats,
    config: &RabbitMqConfig,
) -> Result<(), ConfigError> {
    if config.routing_key_source.as_deref() != Some("key") {
        return Ok(());
    }
    let key = formats.key.as_deref().map(str::to_ascii_lowercase);
    match key.as_deref() {
        Some(byte_array @ ("jsonbytearray" | "binary")) => Err(ConfigError::Unsupported {
            key: k.name("routingkey.source"),
            reason: format!(
                "key with debezium.format.key={byte_array}, which gives byte arrays: Debezium \
                 Server 3.6.1's rabbitmq sink takes the routing key from a String key only and \
                 stops on the first record (\"Unexpected data type '[B'\"); use json or \
                 simplestring for the key, or another routingKey.source"
            ),
        }),
        _ => Ok(()),
    }
}

/// Exchange, routing key, queue declaration, delivery mode and ackTimeout.
fn rabbitmq_routing(
    k: &mut Keys,
    notes: &mut Notes,
    config: &mut RabbitMqConfig,
) -> Result<(), ConfigError> {
    if k.take_bool("routingkeyfromtopicname", false)? {
        notes.ignore(
            k.name("routingkeyfromtopicname"),
            "ignored: deprecated; in 3.6.1 it only logs a warning (routingKey.source=topic routes by topic)",
        );
    }
    let source = k.take("routingkey.source");
    let routing_key = k.take("routingkey").filter(|r| !r.is_empty());
    let (routing_key_source, routing_key) = match source.as_deref() {
        None | Some("static") => (None, routing_key),
        Some("topic" | "key") => {
            if routing_key.is_some() {
                notes.ignore(
                    k.name("routingkey"),
                    "ignored: used only with routingKey.source=static",
                );
            }
            (source, None)
        }
        // Any other value routes with "" in 3.6.1.
        Some(_) => {
            notes.ignore(
                k.name("routingkey.source"),
                "ignored: not static, topic or key, which routes with the empty routing key in 3.6.1",
            );
            if routing_key.is_some() {
                notes.ignore(
                    k.name("routingkey"),
                    "ignored: routingKey.source is not static",
                );
            }
            (None, None)
        }
    };
    let auto_create = k.take_bool("autocreateroutingkey", false)?;
    if auto_create && routing_key_source.as_deref() == Some("key") {
        notes.ignore(
            k.name("autocreateroutingkey"),
            "ignored: 3.6.1 declares queues for routingKey.source=static or topic only",
        );
    }
    let auto_create = auto_create && routing_key_source.as_deref() != Some("key");
    let durable = k.take_bool("routingkeydurable", true)?;
    let delivery_mode = match k.take("deliverymode") {
        None => None,
        Some(v) => match v.as_str() {
            "1" => Some(1),
            "2" => Some(2),
            _ => {
                return Err(k.invalid(
                    "deliverymode",
                    format!("{v:?}: walrelay takes 1 (transient) or 2 (persistent)"),
                ))
            }
        },
    };
    let ack_timeout_ms = k.take_u64("acktimeout")?;
    if ack_timeout_ms == Some(0) {
        return Err(k.invalid("acktimeout", "must be above 0"));
    }
    config.exchange = k.take("exchange").filter(|e| !e.is_empty());
    config.routing_key = routing_key;
    config.routing_key_source = routing_key_source;
    config.auto_create_routing_key = auto_create;
    config.routing_key_durable = (!durable).then_some(false);
    config.delivery_mode = delivery_mode;
    config.ack_timeout_ms = ack_timeout_ms;
    Ok(())
}

/// The rabbitmqstream sink's keys (lower-cased, without the
/// `debezium.sink.rabbitmqstream.` prefix), as
/// `RabbitMqStreamNativeChangeConsumerConfig` 3.6.1 reads them.
fn rabbitmq_stream(k: &mut Keys, notes: &mut Notes) -> Result<RabbitMqStreamConfig, ConfigError> {
    let mut config = rabbitmq_stream_connection(k, notes)?;
    rabbitmq_stream_streams(k, &mut config)?;
    rabbitmq_stream_producer(k, notes, &mut config)?;
    config.null_value = k.take_raw("null.value");
    if k.take("acktimeout").is_some() {
        notes.ignore(
            k.name("acktimeout"),
            "ignored, as Debezium Server 3.6.1 ignores it (its documentation names it; the code \
             reads batchConfirmTimeout)",
        );
    }
    Ok(config)
}

/// A whole number of seconds as milliseconds.
fn seconds_ms(k: &mut Keys, key: &str) -> Result<Option<u64>, ConfigError> {
    match k.take_u64(key)? {
        None => Ok(None),
        Some(0) => Err(k.invalid(key, "must be above 0")),
        Some(s) => Ok(Some(s.saturating_mul(1000))),
    }
}

fn rabbitmq_stream_connection(
    k: &mut Keys,
    notes: &mut Notes,
) -> Result<RabbitMqStreamConfig, ConfigError> {
    // connection.host and connection.port are deprecated; when set they win.
    let host = k.take("host");
    let port = u16_of(k, "port")?;
    let host = k.take("connection.host").or(host);
    let port = u16_of(k, "connection.port")?.or(port);
    let user = k.take("username");
    let password = k.take_raw("password").map(Secret::new);
    let (user, password) = match (user, password) {
        (Some(u), None) => (Some(u), Some(Secret::new("guest"))),
        (None, Some(p)) => (Some("guest".to_owned()), Some(p)),
        both => both,
    };
    if k.take_bool("tls.enable", false)? {
        return Err(k.unsupported(
            "tls.enable",
            "Debezium Server verifies the server with the JVM's trust store, which no key of \
             its names; walrelay's stream client verifies against a CA file: use the native \
             [sink.rabbitmqstream] tls = true with tls_ca_file",
        ));
    }
    if k.take("tls.servername").is_some() {
        notes.ignore(
            k.name("tls.servername"),
            "ignored, as Debezium Server 3.6.1 builds it but never applies it",
        );
    }
    for key in [
        "maxproducersbyconnection",
        "maxtrackingconsumersbyconnection",
        "maxconsumersbyconnection",
    ] {
        if k.take(key).is_some() {
            notes.ignore(
                k.name(key),
                "ignored: the Java client's sharing of connections; walrelay's client opens a \
                 connection per stream it publishes to",
            );
        }
    }
    let heartbeat_s = match k.take_u64("requestedheartbeat")? {
        None => None,
        Some(n) => {
            Some(u32::try_from(n).map_err(|_| k.invalid("requestedheartbeat", "too large"))?)
        }
    };
    let max_frame_size = match k.take_u64("requestedmaxframesize")? {
        None => None,
        Some(n) => {
            Some(u32::try_from(n).map_err(|_| k.invalid("requestedmaxframesize", "too large"))?)
        }
    };
    Ok(RabbitMqStreamConfig {
        host,
        port,
        vhost: k.take("virtualhost"),
        user,
        password,
        heartbeat_s,
        max_frame_size,
        client_name: k.take("id"),
        rpc_timeout_ms: seconds_ms(k, "rpctimeout")?,
        ..RabbitMqStreamConfig::default()
    })
}

/// The stream and what a created one gets; super streams are refused.
fn rabbitmq_stream_streams(
    k: &mut Keys,
    config: &mut RabbitMqStreamConfig,
) -> Result<(), ConfigError> {
    config.stream = k.take("stream").filter(|s| !s.is_empty());
    if let Some(age) = k.take("stream.maxage") {
        let secs = iso_duration_seconds(&age).ok_or_else(|| {
            k.invalid(
                "stream.maxage",
                format!("{age:?}: not an ISO-8601 duration (PT1H, P7D, ...)"),
            )
        })?;
        config.stream_max_age_s = Some(secs);
    }
    for (key, slot) in [
        ("stream.maxlength", &mut config.stream_max_length_bytes),
        (
            "stream.maxsegmentsize",
            &mut config.stream_max_segment_size_bytes,
        ),
    ] {
        if let Some(v) = k.take(key) {
            *slot =
                Some(byte_capacity(&v).ok_or_else(|| {
                    k.invalid(key, format!("{v:?}: a size such as 500mb or 10gb"))
                })?);
        }
    }
    if k.take_bool("superstream.enable", false)? {
        return Err(k.unsupported(
            "superstream.enable",
            "super streams (partitioned by the message id) are not implemented by walrelay's \
             rabbitmqstream sink; publish to one stream per topic, or use Kafka",
        ));
    }
    for key in ["superstream.partitions", "superstream.bindingkeys"] {
        if k.take(key).is_some() {
            return Err(k.unsupported(
                key,
                "belongs to super streams, which walrelay does not implement",
            ));
        }
    }
    Ok(())
}

fn rabbitmq_stream_producer(
    k: &mut Keys,
    notes: &mut Notes,
    config: &mut RabbitMqStreamConfig,
) -> Result<(), ConfigError> {
    config.producer_name = k.take("producer.name").filter(|n| !n.is_empty());
    if k.take("producer.filtervalue").is_some() {
        return Err(k.unsupported(
            "producer.filtervalue",
            "stream filtering (RabbitMQ 3.13+) is not implemented by walrelay's rabbitmqstream \
             sink; consumers must read every message",
        ));
    }
    config.batch_size = match k.take_u64("producer.batchsize")? {
        None => None,
        Some(0) => return Err(k.invalid("producer.batchsize", "must be above 0")),
        Some(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
    };
    match k.take_u64("producer.subentrysize")? {
        None | Some(0 | 1) => {}
        Some(_) => {
            return Err(k.unsupported(
                "producer.subentrysize",
                "sub-entry batching (several messages in one stream entry) is not supported by \
                 the Rust stream client; remove it or set 1",
            ))
        }
    }
    for (key, why) in [
        (
            "producer.maxunconfirmedmessages",
            "walrelay waits for the confirms of at most 512 records at a time",
        ),
        (
            "producer.batchpublishingdelay",
            "walrelay's client sends what is queued at once",
        ),
        (
            "producer.enqueuetimeout",
            "walrelay's own queue makes the source wait instead",
        ),
    ] {
        if k.take(key).is_some() {
            notes.ignore(k.name(key), format!("ignored: {why}"));
        }
    }
    // A message fails after producer.confirmTimeout, the batch after
    // batchConfirmTimeout: the batch waits for the shorter.
    let confirm = seconds_ms(k, "producer.confirmtimeout")?;
    let batch = seconds_ms(k, "batchconfirmtimeout")?;
    config.confirm_timeout_ms = match (confirm, batch) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(30_000).min(b.unwrap_or(30_000))),
    };
    Ok(())
}

/// Seconds of a `java.time.Duration.parse` text (`PT1H`, `P7D`,
/// `P1DT2H30M`, `PT0.5S`), fractions of a second dropped as the Java
/// client's `maxAge` does; `None` for anything else (or a negative one).
fn iso_duration_seconds(text: &str) -> Option<u64> {
    let upper = text.trim().to_ascii_uppercase();
    let rest = upper.strip_prefix('P')?;
    let (days, time) = match rest.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (rest, None),
    };
    let mut secs: f64 = 0.0;
    if !days.is_empty() {
        secs += days.strip_suffix('D')?.parse::<u64>().ok()? as f64 * 86_400.0;
    }
    if let Some(mut t) = time {
        if t.is_empty() {
            return None;
        }
        for (unit, factor) in [('H', 3600.0), ('M', 60.0), ('S', 1.0)] {
            if let Some(i) = t.find(unit) {
                let n: f64 = t[..i].parse().ok()?;
                if n < 0.0 || (unit != 'S' && n.fract() != 0.0) {
                    return None;
                }
                secs += n * factor;
                t = &t[i + 1..];
            }
        }
        if !t.is_empty() {
            return None;
        }
    } else if days.is_empty() {
        return None;
    }
    Some(secs as u64)
}

/// Bytes of the stream client's `ByteCapacity.from` text: digits, then
/// `kb`, `mb`, `gb` or `tb` (powers of 1000) or nothing (bytes).
fn byte_capacity(text: &str) -> Option<u64> {
    let lower = text.trim().to_ascii_lowercase();
    let digits = lower.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let factor: u64 = match &lower[digits.len()..] {
        "" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => return None,
    };
    digits.parse::<u64>().ok()?.checked_mul(factor)
}

/// The keys of each of Debezium Server's `authentication.type`s.
const JWT_KEYS: &[&str] = &[
    "authentication.jwt.username",
    "authentication.jwt.password",
    "authentication.jwt.url",
    "authentication.jwt.token_expiration",
    "authentication.jwt.refresh_token_expiration",
];
const OAUTH2_KEYS: &[&str] = &[
    "authentication.oauth2.client-id",
    "authentication.oauth2.client-secret",
    "authentication.oauth2.token-url",
    "authentication.oauth2.scope",
];
const WEBHOOK_KEYS: &[&str] = &["authentication.webhook.secret"];

fn http(
    k: &mut Keys,
    formats: &ServerFormats,
    notes: &mut Notes,
) -> Result<HttpConfig, ConfigError> {
    http_formats(formats)?;
    let mut config = http_request(k)?;
    http_authentication(k, notes, &mut config)?;
    http_validate(k, &config)?;
    Ok(config)
}

/// The formats the http sink depends on: it reads debezium.format.value
/// itself and casts values and headers to String.
fn http_formats(formats: &ServerFormats) -> Result<(), ConfigError> {
    let value = formats.value.as_deref().map(str::to_ascii_lowercase);
    match value.as_deref() {
        None | Some("") => {
            return Err(ConfigError::Missing {
                key: "debezium.format.value".into(),
                reason: "Debezium Server 3.6.1's http sink reads it to choose the content-type \
                         and does not start without it (SRCFG00014); set json"
                    .into(),
            })
        }
        Some(byte_array @ ("jsonbytearray" | "binary")) => {
            return Err(ConfigError::Unsupported {
                key: "debezium.format.value".into(),
                reason: format!(
                    "{byte_array} gives byte arrays, and Debezium Server 3.6.1's http sink casts \
                     each value to a String, failing on the first record; use json or simplestring"
                ),
            })
        }
        Some(_) => {}
    }
    if formats
        .header
        .as_deref()
        .map(str::to_ascii_lowercase)
        .as_deref()
        == Some("jsonbytearray")
    {
        return Err(ConfigError::Unsupported {
            key: "debezium.format.header".into(),
            reason: "jsonbytearray gives byte arrays, and Debezium Server 3.6.1's http sink \
                     needs each header as a String, failing on the first record; use json"
                .into(),
        });
    }
    Ok(())
}

/// URL, timeouts, retries, headers and batches.
fn http_request(k: &mut Keys) -> Result<HttpConfig, ConfigError> {
    let url = k.take_required("url", "the URL every record is POSTed to")?;
    let int = |k: &mut Keys, key: &str| -> Result<Option<usize>, ConfigError> {
        Ok(k.take_u64(key)?
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX)))
    };
    let config = HttpConfig {
        url,
        timeout_ms: k.take_u64("timeout.ms")?,
        // The number of attempts in all: 0 sends once, as 1 does.
        retries: k
            .take_u64("retries")?
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX).max(1)),
        retry_interval_ms: k.take_u64("retry.interval.ms")?,
        headers_encode_base64: Some(k.take_bool("headers.encode.base64", true)?),
        headers_prefix: k.take("headers.prefix"),
        batch: k.take_bool("batch.enabled", false)?,
        batch_max_size: int(k, "batch.max-size")?,
        // Debezium Server's sink sends one request at a time: its receiver
        // sees the commit order across keys too.
        max_in_flight: Some(1),
        // json gives application/json, and so does anything but avro and
        // cloudevents, which walrelay does not implement.
        content_type: Some("application/json".into()),
        ..HttpConfig::default()
    };
    if config.timeout_ms == Some(0) {
        return Err(k.invalid("timeout.ms", "must be above 0"));
    }
    if config.batch_max_size == Some(0) {
        return Err(k.invalid("batch.max-size", "must be above 0"));
    }
    Ok(config)
}

/// `authentication.*`: the chosen type's keys, the others ignored.
fn http_authentication(
    k: &mut Keys,
    notes: &mut Notes,
    config: &mut HttpConfig,
) -> Result<(), ConfigError> {
    let kind = k
        .take("authentication.type")
        .map(|t| t.to_ascii_lowercase());
    let others: Vec<&[&str]> = match kind.as_deref() {
        None | Some("") => vec![JWT_KEYS, OAUTH2_KEYS, WEBHOOK_KEYS],
        Some("jwt") => vec![OAUTH2_KEYS, WEBHOOK_KEYS],
        Some("oauth2") => vec![JWT_KEYS, WEBHOOK_KEYS],
        Some("standard-webhooks") => vec![JWT_KEYS, OAUTH2_KEYS],
        Some(other) => {
            return Err(k.invalid(
                "authentication.type",
                format!(
                    "{other:?}: Debezium Server 3.6.1 knows jwt, oauth2 and standard-webhooks \
                     (and stops on anything else)"
                ),
            ))
        }
    };
    for keys in others {
        for key in keys {
            if k.take_raw(key).is_some() {
                notes.ignore(
                    k.name(key),
                    "ignored: belongs to another authentication.type than the one set, or none \
                     is set (as in Debezium Server)",
                );
            }
        }
    }
    let required = |k: &mut Keys, key: &str, secret: bool| -> Result<String, ConfigError> {
        let v = if secret { k.take_raw(key) } else { k.take(key) };
        v.filter(|v| !v.is_empty())
            .ok_or_else(|| ConfigError::Missing {
                key: k.name(key),
                reason: format!(
                    "authentication.type={} needs it (Debezium Server stops without it)",
                    kind.as_deref().unwrap_or_default()
                ),
            })
    };
    match kind.as_deref() {
        Some("jwt") => {
            config.jwt_username = Some(required(k, "authentication.jwt.username", false)?);
            config.jwt_password = Some(Secret::new(required(
                k,
                "authentication.jwt.password",
                true,
            )?));
            config.jwt_url = Some(required(k, "authentication.jwt.url", false)?);
            config.jwt_token_expiration_minutes =
                k.take_u64("authentication.jwt.token_expiration")?;
            config.jwt_refresh_token_expiration_minutes =
                k.take_u64("authentication.jwt.refresh_token_expiration")?;
        }
        Some("oauth2") => {
            config.oauth2_client_id = Some(required(k, "authentication.oauth2.client-id", false)?);
            config.oauth2_client_secret = Some(Secret::new(required(
                k,
                "authentication.oauth2.client-secret",
                true,
            )?));
            config.oauth2_token_url = Some(required(k, "authentication.oauth2.token-url", false)?);
            config.oauth2_scope = k
                .take("authentication.oauth2.scope")
                .filter(|s| !s.is_empty());
        }
        Some("standard-webhooks") => {
            config.webhook_secret = Some(Secret::new(required(
                k,
                "authentication.webhook.secret",
                true,
            )?));
        }
        _ => {}
    }
    Ok(())
}

/// The section's own checks, named as the file spells the keys.
fn http_validate(k: &Keys, config: &HttpConfig) -> Result<(), ConfigError> {
    config.validate().map_err(|e| {
        let (key, reason) = match e {
            crate::setting::SettingError::Invalid { key, reason }
            | crate::setting::SettingError::Missing { key, reason } => (key, reason),
        };
        let server_key = match key.as_str() {
            "sink.http.url" => k.name("url"),
            "sink.http.headers_prefix" => k.name("headers.prefix"),
            "sink.http.retries" => k.name("retries"),
            "sink.http.jwt_url" => k.name("authentication.jwt.url"),
            "sink.http.oauth2_token_url" => k.name("authentication.oauth2.token-url"),
            "sink.http.webhook_secret" => k.name("authentication.webhook.secret"),
            _ => key,
        };
        ConfigError::Invalid {
            key: server_key,
            reason,
        }
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn nats_keys_become_the_section() {
        let mut notes = Notes::default();
        let sink = translate_sink(
            SinkKind::NatsJetStream,
            keys(&[
                ("nats-jetstream.url", "nats://127.0.0.1:4222"),
                ("nats-jetstream.create-stream", "true"),
                ("nats-jetstream.subjects", "outbox.>,other.*"),
                ("nats-jetstream.auth.user", "app"),
                ("nats-jetstream.auth.password", "pw "),
                ("redis.address", "h:1"),
            ]),
            &ServerFormats::default(),
            &mut notes,
        )
        .unwrap();
        let nats = sink.nats.unwrap();
        assert_eq!(nats.url, "nats://127.0.0.1:4222");
        assert!(nats.create_stream);
        assert_eq!(nats.subjects.unwrap(), ["outbox.>", "other.*"]);
        assert_eq!(nats.password.unwrap().expose(), "pw ");
        assert_eq!(
            nats.stream_description,
            Some(crate::sink::nats::DEBEZIUM_STREAM_DESCRIPTION)
        );
        let ignored = notes.into_vec();
        assert_eq!(ignored.len(), 1);
        assert_eq!(ignored[0].key, "debezium.sink.redis.address");
    }

    /// Every key of Debezium Server 3.6.1's NATS sink is taken: the
    /// stream's name, its storage as Debezium reads it, the async timeout
    /// as the PubAck timeout, the other waiting keys noted.
    #[test]
    fn nats_stream_and_acknowledgement_keys() {
        let nats = |pairs: &[(&str, &str)], notes: &mut Notes| {
            let mut all = vec![("nats-jetstream.url", "nats://h:1")];
            all.extend_from_slice(pairs);
            translate_sink(
                SinkKind::NatsJetStream,
                keys(&all),
                &ServerFormats::default(),
                notes,
            )
            .unwrap()
            .nats
            .unwrap()
        };
        let mut notes = Notes::default();
        let c = nats(
            &[
                ("nats-jetstream.create-stream", "true"),
                ("nats-jetstream.stream-name", "Outbox"),
                ("nats-jetstream.storage", "disk"),
                ("nats-jetstream.async.enabled", "true"),
                ("nats-jetstream.async.timeout.ms", "2500"),
                ("nats-jetstream.sync.retries", "3"),
            ],
            &mut notes,
        );
        assert_eq!(c.stream.as_deref(), Some("Outbox"));
        assert_eq!(c.storage.as_deref(), Some("memory"));
        assert_eq!(c.ack_timeout_ms, Some(2500));
        c.validate().unwrap();
        let ignored: Vec<String> = notes.into_vec().into_iter().map(|n| n.key).collect();
        assert_eq!(
            ignored,
            [
                "debezium.sink.nats-jetstream.async.enabled",
                "debezium.sink.nats-jetstream.sync.retries"
            ]
        );
        // Without create-stream the stream's description is ignored, as
        // Debezium Server ignores it.
        let mut notes = Notes::default();
        let c = nats(&[("nats-jetstream.stream-name", "Outbox")], &mut notes);
        assert_eq!(c.stream, None);
        c.validate().unwrap();
        assert_eq!(
            notes.into_vec()[0].key,
            "debezium.sink.nats-jetstream.stream-name"
        );
    }

    #[test]
    fn a_keystore_and_an_unknown_key_are_refused_by_name() {
        let err = translate_sink(
            SinkKind::NatsJetStream,
            keys(&[
                ("nats-jetstream.url", "nats://h:1"),
                ("nats-jetstream.auth.tls.keystore", "/k.jks"),
            ]),
            &ServerFormats::default(),
            &mut Notes::default(),
        )
        .unwrap_err();
        assert!(err
            .to_string()
            .contains("debezium.sink.nats-jetstream.auth.tls.keystore"));
        let err = translate_sink(
            SinkKind::Redis,
            keys(&[("redis.address", "h:1"), ("redis.colour", "blue")]),
            &ServerFormats::default(),
            &mut Notes::default(),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("debezium.sink.redis.colour"),
            "{err}"
        );
    }

    /// A store's type or password without the store is not a store.
    #[test]
    fn redis_store_settings_without_a_store_are_ignored() {
        let mut notes = Notes::default();
        translate_sink(
            SinkKind::Redis,
            keys(&[
                ("redis.address", "h:1"),
                ("redis.ssl.truststore.type", "JKS"),
                ("redis.ssl.keystore.password", ""),
            ]),
            &ServerFormats::default(),
            &mut notes,
        )
        .unwrap();
        let ignored: Vec<String> = notes.into_vec().into_iter().map(|n| n.key).collect();
        assert_eq!(
            ignored,
            [
                "debezium.sink.redis.ssl.keystore.password",
                "debezium.sink.redis.ssl.truststore.type"
            ]
        );
        let err = translate_sink(
            SinkKind::Redis,
            keys(&[
                ("redis.address", "h:1"),
                ("redis.ssl.truststore.path", "/t.jks"),
            ]),
            &ServerFormats::default(),
            &mut Notes::default(),
        )
        .unwrap_err();
        assert!(err
            .to_string()
            .contains("debezium.sink.redis.ssl.truststore.path"));
    }

    #[test]
    fn redis_wait_for_replicas_is_refused() {
        let err = translate_sink(
            SinkKind::Redis,
            keys(&[("redis.address", "h:1"), ("redis.wait.enabled", "true")]),
            &ServerFormats::default(),
            &mut Notes::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("debezium.sink.redis.wait.enabled"));
        let sink = translate_sink(
            SinkKind::Redis,
            keys(&[
                ("redis.address", "h:1"),
                ("redis.message.format", "extended"),
                ("redis.null.key", "nk"),
                ("redis.db.index", "2"),
            ]),
            &ServerFormats::default(),
            &mut Notes::default(),
        )
        .unwrap();
        let redis = sink.redis.unwrap();
        assert_eq!(redis.message_format.as_deref(), Some("extended"));
        assert_eq!(redis.null_key.as_deref(), Some("nk"));
        assert_eq!(redis.db, Some(2));
    }

    #[test]
    fn rabbitmq_keys_are_read_case_insensitively() {
        let mut notes = Notes::default();
        let sink = translate_sink(
            SinkKind::RabbitMq,
            keys(&[
                ("rabbitmq.connection.host", "127.0.0.1"),
                ("rabbitmq.connection.port", "5673"),
                ("rabbitmq.connection.username", "app"),
                ("rabbitmq.connection.password", "pw "),
                ("rabbitmq.connection.virtual.host", "v"),
                ("rabbitmq.connection.client.properties.App", "walrelay-test"),
                ("rabbitmq.connection.connection.recovery.enabled", "true"),
                ("rabbitmq.Exchange", "outbox"),
                ("rabbitmq.routingkey", "rk"),
                ("rabbitmq.DeliveryMode", "1"),
                ("rabbitmq.ackTimeout", "5000"),
                ("rabbitmq.null.value", "nothing"),
                ("rabbitmq.routingKeyFromTopicName", "true"),
                ("redis.address", "h:1"),
            ]),
            &ServerFormats::default(),
            &mut notes,
        )
        .unwrap();
        let r = sink.rabbitmq.unwrap();
        assert_eq!(r.host.as_deref(), Some("127.0.0.1"));
        assert_eq!(r.port, Some(5673));
        assert_eq!(r.user.as_deref(), Some("app"));
        assert_eq!(r.password.as_ref().unwrap().expose(), "pw ");
        assert_eq!(r.vhost.as_deref(), Some("v"));
        assert_eq!(r.client_properties["App"], "walrelay-test");
        assert_eq!(r.exchange.as_deref(), Some("outbox"));
        assert_eq!(r.routing_key.as_deref(), Some("rk"));
        assert_eq!(r.delivery_mode, Some(1));
        assert_eq!(r.ack_timeout_ms, Some(5000));
        assert_eq!(r.null_value.as_deref(), Some("nothing"));
        r.validate().unwrap();
        let ignored: Vec<String> = notes.into_vec().into_iter().map(|i| i.key).collect();
        assert_eq!(
            ignored,
            [
                "debezium.sink.rabbitmq.connection.connection.recovery.enabled",
                "debezium.sink.rabbitmq.routingkeyfromtopicname",
                "debezium.sink.redis.address",
            ]
        );
    }

    fn json() -> ServerFormats {
        ServerFormats {
            value: Some("json".into()),
            ..ServerFormats::default()
        }
    }

    #[test]
    fn http_keys_become_the_section() {
        let mut notes = Notes::default();
        let sink = translate_sink(
            SinkKind::Http,
            keys(&[
                ("http.url", "https://hooks.example/events"),
                ("http.timeout.ms", "5000"),
                ("http.retries", "0"),
                ("http.retry.interval.ms", "250"),
                ("http.headers.prefix", "X-CDC-"),
                ("http.headers.encode.base64", "false"),
                ("http.batch.enabled", "true"),
                ("http.batch.max-size", "50"),
                ("http.authentication.type", "standard-webhooks"),
                (
                    "http.authentication.webhook.secret",
                    "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                ),
                ("http.authentication.jwt.username", "u"),
            ]),
            &json(),
            &mut notes,
        )
        .unwrap();
        let http = sink.http.unwrap();
        assert_eq!(http.url, "https://hooks.example/events");
        assert_eq!(http.timeout_ms, Some(5000));
        assert_eq!(http.retries, Some(1), "0 attempts sends once, as 1");
        assert_eq!(http.retry_interval_ms, Some(250));
        assert_eq!(http.headers_prefix.as_deref(), Some("X-CDC-"));
        assert_eq!(http.headers_encode_base64, Some(false));
        assert!(http.batch);
        assert_eq!(http.batch_max_size, Some(50));
        assert_eq!(http.max_in_flight, Some(1), "one request at a time");
        assert!(http.webhook_secret.is_some());
        let ignored = notes.into_vec();
        assert_eq!(ignored.len(), 1);
        assert_eq!(
            ignored[0].key,
            "debezium.sink.http.authentication.jwt.username"
        );
    }

    #[test]
    fn rabbitmq_routing_sources_and_refusals() {
        let sink = translate_sink(
            SinkKind::RabbitMq,
            keys(&[
                ("rabbitmq.routingKey.source", "topic"),
                ("rabbitmq.autoCreateRoutingKey", "true"),
                ("rabbitmq.routingKeyDurable", "false"),
            ]),
            &ServerFormats::default(),
            &mut Notes::default(),
        )
        .unwrap();
        let r = sink.rabbitmq.unwrap();
        assert_eq!(r.routing_key_source.as_deref(), Some("topic"));
        assert!(r.auto_create_routing_key);
        assert_eq!(r.routing_key_durable, Some(false));
        r.validate().unwrap();
        for (key, value) in [
            ("rabbitmq.connection.ssl.trust.store", "/t.jks"),
            (
                "rabbitmq.connection.ssl.validate.server.certificate",
                "false",
            ),
            ("rabbitmq.deliveryMode", "3"),
            ("rabbitmq.colour", "blue"),
        ] {
            let err = translate_sink(
                SinkKind::RabbitMq,
                keys(&[(key, value)]),
                &ServerFormats::default(),
                &mut Notes::default(),
            )
            .unwrap_err();
            let want = format!("debezium.sink.{}", key.to_ascii_lowercase());
            assert!(err.to_string().contains(&want), "{err}");
        }
        let err = translate_sink(
            SinkKind::RabbitMq,
            keys(&[
                ("rabbitmq.connection.uri", "amqp://h"),
                ("rabbitmq.connection.host", "h"),
            ]),
            &ServerFormats::default(),
            &mut Notes::default(),
        )
        .unwrap_err();
        assert!(err
            .to_string()
            .contains("debezium.sink.rabbitmq.connection.host"));
        assert_eq!(sink_kind("rabbitmqstream"), Some(SinkKind::RabbitMqStream));
        assert!(unsupported_sink("rabbitmqstream").is_none());
    }

    #[test]
    fn rabbitmq_routing_by_a_byte_array_key_is_refused() {
        let by_key = || keys(&[("rabbitmq.routingKey.source", "key")]);
        for bytes in ["jsonbytearray", "binary", "JsonByteArray"] {
            let formats = ServerFormats {
                key: Some(bytes.into()),
                ..ServerFormats::default()
            };
            let err = translate_sink(
                SinkKind::RabbitMq,
                by_key(),
                &formats,
                &mut Notes::default(),
            )
            .unwrap_err();
            let ConfigError::Unsupported { key, reason } = &err else {
                panic!("{err}");
            };
            assert_eq!(key, "debezium.sink.rabbitmq.routingkey.source");
            assert!(reason.contains("debezium.format.key="), "{reason}");
            assert!(reason.contains("Unexpected data type '[B'"), "{reason}");
        }
        for fine in [None, Some("json"), Some("simplestring")] {
            let formats = ServerFormats {
                key: fine.map(Into::into),
                ..ServerFormats::default()
            };
            translate_sink(
                SinkKind::RabbitMq,
                by_key(),
                &formats,
                &mut Notes::default(),
            )
            .unwrap();
        }
        // Other sources never read the key.
        let formats = ServerFormats {
            key: Some("jsonbytearray".into()),
            ..ServerFormats::default()
        };
        translate_sink(
            SinkKind::RabbitMq,
            keys(&[("rabbitmq.routingKey.source", "topic")]),
            &formats,
            &mut Notes::default(),
        )
        .unwrap();
    }

    #[test]
    fn rabbitmqstream_keys_become_the_section() {
        let mut notes = Notes::default();
        let sink = translate_sink(
            SinkKind::RabbitMqStream,
            keys(&[
                ("rabbitmqstream.host", "h"),
                ("rabbitmqstream.connection.port", "15552"),
                ("rabbitmqstream.username", "app"),
                ("rabbitmqstream.password", "pw "),
                ("rabbitmqstream.virtualHost", "v"),
                ("rabbitmqstream.rpcTimeout", "5"),
                ("rabbitmqstream.requestedHeartbeat", "20"),
                ("rabbitmqstream.id", "dbz"),
                ("rabbitmqstream.stream", "all-events"),
                ("rabbitmqstream.stream.maxAge", "P1DT1H"),
                ("rabbitmqstream.stream.maxLength", "10gb"),
                ("rabbitmqstream.producer.name", "walrelay-1"),
                ("rabbitmqstream.producer.batchSize", "50"),
                ("rabbitmqstream.producer.confirmTimeout", "20"),
                ("rabbitmqstream.batchConfirmTimeout", "40"),
                ("rabbitmqstream.maxProducersByConnection", "10"),
                ("rabbitmqstream.null.value", "nothing"),
            ]),
            &ServerFormats::default(),
            &mut notes,
        )
        .unwrap();
        let c = sink.rabbitmqstream.unwrap();
        assert_eq!(c.host.as_deref(), Some("h"));
        assert_eq!(c.port, Some(15552));
        assert_eq!(c.password.unwrap().expose(), "pw ");
        assert_eq!(c.vhost.as_deref(), Some("v"));
        assert_eq!(c.rpc_timeout_ms, Some(5000));
        assert_eq!(c.heartbeat_s, Some(20));
        assert_eq!(c.client_name.as_deref(), Some("dbz"));
        assert_eq!(c.stream.as_deref(), Some("all-events"));
        assert_eq!(c.stream_max_age_s, Some(90_000));
        assert_eq!(c.stream_max_length_bytes, Some(10_000_000_000));
        assert_eq!(c.producer_name.as_deref(), Some("walrelay-1"));
        assert_eq!(c.batch_size, Some(50));
        assert_eq!(c.confirm_timeout_ms, Some(20_000));
        assert_eq!(c.null_value.as_deref(), Some("nothing"));
        let ignored = notes.into_vec();
        assert_eq!(ignored.len(), 1, "{ignored:?}");
        assert_eq!(
            ignored[0].key,
            "debezium.sink.rabbitmqstream.maxproducersbyconnection"
        );
        for (key, value) in [
            ("tls.enable", "true"),
            ("superStream.enable", "true"),
            ("producer.filterValue", "tenant"),
            ("producer.subEntrySize", "10"),
            ("nonsense", "1"),
        ] {
            let err = translate_sink(
                SinkKind::RabbitMqStream,
                keys(&[(&format!("rabbitmqstream.{key}"), value)]),
                &ServerFormats::default(),
                &mut Notes::default(),
            )
            .unwrap_err();
            let want = format!("debezium.sink.rabbitmqstream.{}", key.to_ascii_lowercase());
            assert!(err.to_string().contains(&want), "{err}");
        }
        let err = translate_sink(
            SinkKind::RabbitMqStream,
            keys(&[("rabbitmqstream.stream.maxAge", "1 hour")]),
            &ServerFormats::default(),
            &mut Notes::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("stream.maxage"), "{err}");
    }

    #[test]
    fn java_durations_and_capacities_parse() {
        assert_eq!(iso_duration_seconds("PT1H"), Some(3600));
        assert_eq!(iso_duration_seconds("P7D"), Some(604_800));
        assert_eq!(iso_duration_seconds("pt1m30.5s"), Some(90));
        assert_eq!(iso_duration_seconds("P"), None);
        assert_eq!(iso_duration_seconds("PT"), None);
        assert_eq!(iso_duration_seconds("1h"), None);
        assert_eq!(byte_capacity("500MB"), Some(500_000_000));
        assert_eq!(byte_capacity("42"), Some(42));
        assert_eq!(byte_capacity("1pb"), None);
        assert_eq!(byte_capacity("kb"), None);
    }

    #[test]
    fn http_authentication_flows_are_honoured() {
        let sink = translate_sink(
            SinkKind::Http,
            keys(&[
                ("http.url", "http://127.0.0.1:8080/"),
                ("http.authentication.type", "JWT"),
                ("http.authentication.jwt.username", "app"),
                ("http.authentication.jwt.password", " pw"),
                ("http.authentication.jwt.url", "http://127.0.0.1:9000/"),
                ("http.authentication.jwt.token_expiration", "5"),
            ]),
            &json(),
            &mut Notes::default(),
        )
        .unwrap()
        .http
        .unwrap();
        assert_eq!(sink.jwt_username.as_deref(), Some("app"));
        assert_eq!(sink.jwt_password.unwrap().expose(), " pw");
        assert_eq!(sink.jwt_token_expiration_minutes, Some(5));
        let sink = translate_sink(
            SinkKind::Http,
            keys(&[
                ("http.url", "http://127.0.0.1:8080/"),
                ("http.authentication.type", "oauth2"),
                ("http.authentication.oauth2.client-id", "c"),
                ("http.authentication.oauth2.client-secret", "s"),
                (
                    "http.authentication.oauth2.token-url",
                    "http://127.0.0.1:9000/token",
                ),
                ("http.authentication.oauth2.scope", "events:write"),
            ]),
            &json(),
            &mut Notes::default(),
        )
        .unwrap()
        .http
        .unwrap();
        assert_eq!(sink.oauth2_scope.as_deref(), Some("events:write"));
        let err = translate_sink(
            SinkKind::Http,
            keys(&[
                ("http.url", "http://h/"),
                ("http.authentication.type", "oauth2"),
                ("http.authentication.oauth2.client-id", "c"),
            ]),
            &json(),
            &mut Notes::default(),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("debezium.sink.http.authentication.oauth2.client-secret"),
            "{err}"
        );
        let err = translate_sink(
            SinkKind::Http,
            keys(&[
                ("http.url", "http://h/"),
                ("http.authentication.type", "kerberos"),
            ]),
            &json(),
            &mut Notes::default(),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("debezium.sink.http.authentication.type"),
            "{err}"
        );
    }

    #[test]
    fn http_needs_a_string_value_format_and_known_keys() {
        let url = keys(&[("http.url", "http://h/")]);
        let err = translate_sink(
            SinkKind::Http,
            url.clone(),
            &ServerFormats::default(),
            &mut Notes::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("debezium.format.value"), "{err}");
        for bytes in ["jsonbytearray", "binary"] {
            let formats = ServerFormats {
                value: Some(bytes.into()),
                ..ServerFormats::default()
            };
            let err = translate_sink(SinkKind::Http, url.clone(), &formats, &mut Notes::default())
                .unwrap_err();
            assert!(err.to_string().contains("debezium.format.value"), "{err}");
        }
        let formats = ServerFormats {
            value: Some("simplestring".into()),
            header: Some("jsonbytearray".into()),
            ..ServerFormats::default()
        };
        let err = translate_sink(SinkKind::Http, url.clone(), &formats, &mut Notes::default())
            .unwrap_err();
        assert!(err.to_string().contains("debezium.format.header"), "{err}");
        let err = translate_sink(
            SinkKind::Http,
            keys(&[("http.url", "http://h/"), ("http.proxy", "p:1")]),
            &json(),
            &mut Notes::default(),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("debezium.sink.http.proxy"),
            "{err}"
        );
        let err = translate_sink(
            SinkKind::Http,
            keys(&[("http.url", "ftp://h/")]),
            &json(),
            &mut Notes::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("debezium.sink.http.url"), "{err}");
        let err =
            translate_sink(SinkKind::Http, keys(&[]), &json(), &mut Notes::default()).unwrap_err();
        assert!(err.to_string().contains("debezium.sink.http.url"), "{err}");
    }
}
