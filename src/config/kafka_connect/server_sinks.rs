//! Debezium Server's sinks other than Kafka: `debezium.sink.type` and the
//! `debezium.sink.<type>.*` keys of `nats-jetstream` and `redis`, onto
//! `[sink]`. Every key is honoured, noted as walrelay's own behaviour, or
//! refused by name with the reason (docs/debezium-server-sinks.md lists
//! them).

use std::collections::BTreeMap;

use super::{Keys, Notes};
use crate::config::ConfigError;
use crate::secret::Secret;
use crate::sink::config::{SinkConfig, SinkKind};
use crate::sink::nats::NatsConfig;
use crate::sink::redis::RedisConfig;

/// The sink `debezium.sink.type` names, from its keys (given without the
/// `debezium.sink.` prefix); Kafka's keys are the caller's.
pub(in crate::config) fn translate_sink(
    kind: SinkKind,
    keys: BTreeMap<String, String>,
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

/// `debezium.sink.type` as walrelay knows it.
pub(in crate::config) fn sink_kind(value: &str) -> Option<SinkKind> {
    match value {
        "kafka" => Some(SinkKind::Kafka),
        "nats-jetstream" => Some(SinkKind::NatsJetStream),
        "redis" => Some(SinkKind::Redis),
        _ => None,
    }
}

/// A key of the sink's own that walrelay does not know: refused, so a
/// setting is never silently dropped.
fn rest(own: &mut Keys) -> Result<(), ConfigError> {
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
            translate_sink(SinkKind::NatsJetStream, keys(&all), notes)
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
            &mut Notes::default(),
        )
        .unwrap_err();
        assert!(err
            .to_string()
            .contains("debezium.sink.nats-jetstream.auth.tls.keystore"));
        let err = translate_sink(
            SinkKind::Redis,
            keys(&[("redis.address", "h:1"), ("redis.colour", "blue")]),
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
            &mut Notes::default(),
        )
        .unwrap();
        let redis = sink.redis.unwrap();
        assert_eq!(redis.message_format.as_deref(), Some("extended"));
        assert_eq!(redis.null_key.as_deref(), Some("nk"));
        assert_eq!(redis.db, Some(2));
    }
}
