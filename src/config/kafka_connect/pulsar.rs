//! Debezium Server's Apache Pulsar sink: the `debezium.sink.pulsar.*` keys
//! onto `[sink.pulsar]`. 3.6.1 hands `client.*` to the Java client's
//! `loadConf` and `producer.*` to the producer's; walrelay honours the
//! keys that change where messages go or what they are, notes the Java
//! client's tuning, and refuses by name what it cannot do (another
//! authentication plugin, chunking, exclusive access modes, ...).

use super::{Keys, Notes};
use crate::config::ConfigError;
use crate::secret::Secret;
use crate::sink::pulsar::PulsarConfig;

/// `client.*` and `producer.*` keys of the Java client's tuning, noted
/// when set, with why walrelay has no use for them.
const TUNING: &[(&str, &str)] = &[
    (
        "client.numIoThreads",
        "walrelay's client runs on the pipeline's runtime",
    ),
    (
        "client.numListenerThreads",
        "walrelay's client runs on the pipeline's runtime",
    ),
    (
        "client.connectionsPerBroker",
        "walrelay opens one connection per broker",
    ),
    (
        "client.connectionTimeoutMs",
        "walrelay retries connecting until the broker answers",
    ),
    (
        "client.keepAliveIntervalSeconds",
        "the client's own keep-alive applies",
    ),
    (
        "client.statsIntervalSeconds",
        "walrelay's metrics are on /metrics",
    ),
    (
        "client.memoryLimitBytes",
        "walrelay's queue is bounded (8,192 records, 32 MiB)",
    ),
    (
        "client.maxLookupRequest",
        "the client's own lookup limits apply",
    ),
    (
        "client.maxNumberOfRejectedRequestPerConnection",
        "the client's own limits apply",
    ),
    (
        "client.concurrentLookupRequest",
        "the client's own lookup limits apply",
    ),
    ("client.useTcpNoDelay", "the client sets TCP_NODELAY"),
    (
        "client.useTls",
        "TLS follows the service URL's scheme (pulsar+ssl://)",
    ),
    (
        "producer.sendTimeoutMs",
        "walrelay waits for each receipt, retrying until the broker stores it",
    ),
    (
        "producer.blockIfQueueFull",
        "walrelay's queue is bounded and the source waits when it is full",
    ),
    (
        "producer.maxPendingMessages",
        "walrelay's queue is bounded (8,192 records, 32 MiB)",
    ),
    (
        "producer.maxPendingMessagesAcrossPartitions",
        "walrelay's queue is bounded (8,192 records, 32 MiB)",
    ),
    (
        "producer.batchingMaxPublishDelayMicros",
        "walrelay sends what its queue holds at once",
    ),
    (
        "producer.batchingMaxBytes",
        "a batch holds up to 128 KiB, the Java client's default",
    ),
    (
        "producer.messageRoutingMode",
        "a key picks the partition by its hash (RoundPartition's rule for keyed messages)",
    ),
    (
        "producer.autoUpdatePartitions",
        "the client follows the topic's partitions",
    ),
    (
        "producer.autoUpdatePartitionsIntervalSeconds",
        "the client follows the topic's partitions",
    ),
    (
        "producer.lazyStartPartitionedProducers",
        "walrelay starts a topic's producers at its first record",
    ),
    ("producer.properties", "producer metadata is not sent"),
];

/// Keys of the Java client that walrelay cannot honour, with why.
const REFUSED: &[(&str, &str)] = &[
    ("producer.chunkingEnabled", "walrelay does not split messages into chunks: a record over max_message_bytes is refused and follows [errors]"),
    ("producer.accessMode", "walrelay's producers are shared ones"),
    ("producer.encryptionKeys", "walrelay does not encrypt payloads end to end"),
    ("producer.cryptoFailureAction", "walrelay does not encrypt payloads end to end"),
    ("producer.initialSequenceId", "walrelay leaves sequence ids to the client"),
    ("client.proxyServiceUrl", "walrelay connects to brokers directly"),
    ("client.proxyProtocol", "walrelay connects to brokers directly"),
    ("client.tlsCertificateFilePath", "walrelay authenticates to Pulsar with a token, not a client certificate"),
    ("client.tlsKeyFilePath", "walrelay authenticates to Pulsar with a token, not a client certificate"),
];

/// The pulsar sink's keys (without `debezium.sink.pulsar.`).
pub(super) fn pulsar(k: &mut Keys, notes: &mut Notes) -> Result<PulsarConfig, ConfigError> {
    for (key, why) in REFUSED {
        if k.take(key).is_some() {
            return Err(k.invalid(key, format!("not supported: {why}")));
        }
    }
    let (token, token_file) = auth(k)?;
    let tls_allow_insecure = match k.take("client.tlsAllowInsecureConnection") {
        None => None,
        Some(v) => Some(parse_bool(k, "client.tlsAllowInsecureConnection", &v)?),
    };
    for (key, why) in TUNING {
        if k.take(key).is_some() {
            notes.ignore(k.name(key), format!("ignored: {why}"));
        }
    }
    if k.take("timeout").is_some() {
        notes.ignore(
            k.name("timeout"),
            "ignored: walrelay drains its queue for up to 10 s when stopping",
        );
    }
    let batch_max_messages = match k.take_u64("producer.batchingMaxMessages")? {
        Some(0) => return Err(k.invalid("producer.batchingMaxMessages", "must be above 0")),
        Some(n) => Some(u32::try_from(n).unwrap_or(u32::MAX)),
        None => None,
    };
    let operation_timeout_ms = k.take_u64("client.operationTimeoutMs")?;
    Ok(PulsarConfig {
        service_url: k.take("client.serviceUrl"),
        tenant: k.take("tenant"),
        namespace: k.take("namespace"),
        null_key: k.take("null.key"),
        token,
        token_file,
        tls_ca_file: k.take("client.tlsTrustCertsFilePath").map(Into::into),
        tls_allow_insecure,
        tls_hostname_verification: match k.take("client.tlsHostnameVerificationEnable") {
            None => None,
            Some(v) => Some(parse_bool(k, "client.tlsHostnameVerificationEnable", &v)?),
        },
        producer_name: k.take("producer.producerName"),
        compression: k.take("producer.compressionType"),
        batching: match k.take("producer.batchingEnabled") {
            None => None,
            Some(v) => Some(parse_bool(k, "producer.batchingEnabled", &v)?),
        },
        batch_max_messages,
        batcher: k.take("producer.batcherBuilder"),
        hashing_scheme: k.take("producer.hashingScheme").map(|h| match h.as_str() {
            "JavaStringHash" => "java_string_hash".to_owned(),
            "Murmur3_32Hash" => "murmur3_32_hash".to_owned(),
            _ => h,
        }),
        // Debezium Server's JSON formats hand the sink Java strings, for
        // which it declares Pulsar's STRING schema.
        schema: Some("string".to_owned()),
        operation_timeout_ms,
        ..PulsarConfig::default()
    })
}

fn parse_bool(k: &Keys, key: &str, value: &str) -> Result<bool, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(k.invalid(key, "must be true or false")),
    }
}

/// `client.authPluginClassName` and `client.authParams`: the token plugin
/// (`token:<jwt>` or `file:///path`); any other plugin is refused by name.
fn auth(k: &mut Keys) -> Result<(Option<Secret>, Option<std::path::PathBuf>), ConfigError> {
    let plugin = k.take("client.authPluginClassName");
    let params = k.take("client.authParams");
    match plugin.as_deref() {
        None | Some("") => {
            if params.is_some() {
                return Err(k.invalid(
                    "client.authParams",
                    "set without client.authPluginClassName",
                ));
            }
            Ok((None, None))
        }
        Some("org.apache.pulsar.client.impl.auth.AuthenticationToken") => {
            let params = params.unwrap_or_default();
            if let Some(token) = params.strip_prefix("token:") {
                Ok((Some(Secret::new(token)), None))
            } else if let Some(path) = params.strip_prefix("file://") {
                Ok((None, Some(path.into())))
            } else {
                // The value is a secret: never quoted.
                Err(k.invalid(
                    "client.authParams",
                    "must be token:<jwt> or file:///path for AuthenticationToken",
                ))
            }
        }
        Some(other) => Err(k.invalid(
            "client.authPluginClassName",
            format!("{other}: walrelay authenticates to Pulsar with AuthenticationToken only"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(pairs: &[(&str, &str)]) -> Keys {
        super::super::test_keys(pairs, "debezium.sink.pulsar.")
    }

    #[test]
    fn pulsar_keys_become_the_section() {
        let mut notes = Notes::default();
        let mut k = keys(&[
            ("client.serviceUrl", "pulsar://127.0.0.1:6650"),
            ("tenant", "shop"),
            ("null.key", "none"),
            ("producer.batcherBuilder", "KEY_BASED"),
            ("producer.hashingScheme", "Murmur3_32Hash"),
            ("producer.sendTimeoutMs", "1000"),
            (
                "client.authPluginClassName",
                "org.apache.pulsar.client.impl.auth.AuthenticationToken",
            ),
            ("client.authParams", "token:eyJsecret"),
        ]);
        let c = pulsar(&mut k, &mut notes).unwrap();
        assert!(k.drain().is_empty());
        assert_eq!(c.service_url.as_deref(), Some("pulsar://127.0.0.1:6650"));
        assert_eq!(c.tenant.as_deref(), Some("shop"));
        assert_eq!(c.hashing_scheme.as_deref(), Some("murmur3_32_hash"));
        assert_eq!(c.token.as_ref().map(Secret::expose), Some("eyJsecret"));
        assert!(c.validate().is_ok());
        assert_eq!(
            notes.into_vec()[0].key,
            "debezium.sink.pulsar.producer.sendTimeoutMs"
        );
    }

    #[test]
    fn what_walrelay_cannot_do_is_refused_by_name() {
        for (key, value) in [
            ("producer.chunkingEnabled", "true"),
            (
                "client.authPluginClassName",
                "org.apache.pulsar.client.impl.auth.AuthenticationTls",
            ),
        ] {
            let err = pulsar(&mut keys(&[(key, value)]), &mut Notes::default()).unwrap_err();
            assert!(
                err.to_string()
                    .contains(&format!("debezium.sink.pulsar.{key}")),
                "{err}"
            );
        }
        let err = pulsar(
            &mut keys(&[
                (
                    "client.authPluginClassName",
                    "org.apache.pulsar.client.impl.auth.AuthenticationToken",
                ),
                ("client.authParams", "secret-without-prefix"),
            ]),
            &mut Notes::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("client.authParams") && !err.contains("secret-without-prefix"),
            "{err}"
        );
    }
}
