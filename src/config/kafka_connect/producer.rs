//! The Java producer's properties (`producer.*` in a worker,
//! `producer.override.*` in a connector, `debezium.sink.kafka.producer.*` in
//! Debezium Server), translated into librdkafka properties: the lists of
//! keys passed as they are, renamed, ignored or accepted at their default
//! only, `acks` and idempotence, `buffer.memory`, the security protocol and
//! SASL (with the JAAS line's username and password). `transactional.id`
//! and `transaction.timeout.ms` are only collected: whether they are
//! refused or used is the form's exactly-once decision
//! (`super::exactly_once`).
//!
//! Owns the decision for every producer key walrelay knows of: read in
//! [`translate_producer`] (trust and key stores in `super::keystores`) or
//! listed here, one comment per key; any other key is warned about as
//! unknown. It never logs a value, keeps passwords in [`Secret`]s, never
//! puts the JAAS text or a password in an error, and never connects to
//! Kafka.

use std::collections::BTreeMap;

use super::keystores::{translate_keystore, translate_truststore};
use super::{parse_bool, KafkaDraft, Keys, Notes};
use crate::config::ConfigError;
use crate::secret::Secret;

/// Java producer properties with the same name and meaning in librdkafka.
pub(super) const PRODUCER_SAME: &[&str] = &[
    "batch.size",                            // bytes per partition batch
    "linger.ms",                             // batching delay
    "compression.type",                      // none, gzip, snappy, lz4, zstd
    "retries",                               // librdkafka alias of message.send.max.retries
    "retry.backoff.ms",                      // first retry delay
    "retry.backoff.max.ms",                  // longest retry delay
    "request.timeout.ms",                    // per produce request
    "client.id",                             // broker-side client name
    "max.in.flight.requests.per.connection", // librdkafka alias of max.in.flight
    "reconnect.backoff.ms",                  // broker reconnect delay
    "reconnect.backoff.max.ms",              // longest broker reconnect delay
    "metadata.max.age.ms",                   // metadata refresh
    "connections.max.idle.ms",               // idle connection close
    "socket.connection.setup.timeout.ms",    // connect timeout
    "client.dns.lookup", // use_all_dns_ips, resolve_canonical_bootstrap_servers_only
];

/// Java producer properties whose librdkafka name differs.
pub(super) const PRODUCER_RENAMED: &[(&str, &str)] = &[
    ("max.request.size", "message.max.bytes"),
    ("delivery.timeout.ms", "message.timeout.ms"),
    ("receive.buffer.bytes", "socket.receive.buffer.bytes"),
    ("send.buffer.bytes", "socket.send.buffer.bytes"),
];

/// Java producer properties ignored with a warning.
#[rustfmt::skip]
pub(super) const PRODUCER_IGNORED: &[(&str, &str)] = &[
    // Serializers: walrelay writes the converter's bytes.
    ("key.serializer", ""),
    ("value.serializer", ""),
    ("max.block.ms", "ignored: walrelay applies backpressure instead of blocking"),
    ("metric.reporters", "ignored: walrelay exposes its own metrics"),
    ("metrics.num.samples", "ignored"),
    ("metrics.sample.window.ms", "ignored"),
    ("metrics.recording.level", "ignored"),
    ("auto.include.jmx.reporter", "ignored"),
    ("enable.metrics.push", "ignored"),
    ("socket.connection.setup.timeout.max.ms", "ignored"),
    // Keyless records only; an outbox record has a key unless the key
    // column is NULL.
    ("partitioner.adaptive.partitioning.enable", "ignored: affects only records without a key"),
    ("partitioner.availability.timeout.ms", "ignored: affects only records without a key"),
    ("compression.gzip.level", "ignored: set librdkafka's compression.level in walrelay's own config if needed"),
    ("compression.lz4.level", "ignored: set librdkafka's compression.level in walrelay's own config if needed"),
    ("compression.zstd.level", "ignored: set librdkafka's compression.level in walrelay's own config if needed"),
    ("ssl.protocol", "ignored: librdkafka negotiates the TLS version"),
    ("ssl.enabled.protocols", "ignored: librdkafka negotiates the TLS version"),
    ("ssl.cipher.suites", "ignored: Java cipher suite names do not apply to OpenSSL"),
    ("ssl.truststore.password", "ignored: only PKCS12 truststores have a password"),
    ("ssl.keymanager.algorithm", "ignored"),
    ("ssl.trustmanager.algorithm", "ignored"),
    ("ssl.secure.random.implementation", "ignored"),
    ("sasl.login.refresh.window.factor", "ignored"),
    ("sasl.login.refresh.window.jitter", "ignored"),
    ("sasl.login.refresh.min.period.seconds", "ignored"),
    ("sasl.login.refresh.buffer.seconds", "ignored"),
    ("sasl.login.connect.timeout.ms", "ignored"),
    ("sasl.login.read.timeout.ms", "ignored"),
    ("sasl.login.retry.backoff.ms", "ignored"),
    ("sasl.login.retry.backoff.max.ms", "ignored"),
];

/// Java producer properties refused at any value but the listed ones.
#[rustfmt::skip]
pub(super) const PRODUCER_DEFAULT_ONLY: &[(&str, &[&str], &str)] = &[
    // Other partitioners put a key's records on other partitions than the
    // Java default (murmur2 of the key bytes), which walrelay reproduces.
    ("partitioner.class", &["", "org.apache.kafka.clients.producer.internals.DefaultPartitioner"], "walrelay partitions like the Java default partitioner (murmur2 of the key bytes)"),
    ("partitioner.ignore.keys", &["false"], "walrelay partitions by key"),
    ("interceptor.classes", &[""], "producer interceptors are Java code"),
    ("sasl.client.callback.handler.class", &[""], "callback handlers are Java code"),
    ("sasl.login.callback.handler.class", &[""], "callback handlers are Java code"),
    ("sasl.login.class", &[""], "login classes are Java code"),
    ("ssl.engine.factory.class", &[""], "ssl engine factories are Java code"),
];

/// Translates Java producer properties (without their prefix; `prefix` is
/// how the file spells it, e.g. `producer.`) into librdkafka properties.
///
/// The steps run in a fixed order, each taking its own keys, so that where
/// two keys are wrong the earlier step's is the one refused; what no step
/// took is classified last.
pub(in crate::config) fn translate_producer(
    props: BTreeMap<String, String>,
    prefix: &str,
    kafka: &mut KafkaDraft,
    notes: &mut Notes,
) -> Result<(), ConfigError> {
    let mut p = Keys::new(props, prefix);
    take_passthrough(&mut p, kafka);
    check_delivery(&mut p, kafka)?;
    translate_buffer_memory(&mut p, kafka)?;
    let protocol = translate_security_protocol(&mut p, kafka)?;
    let sasl = protocol.as_deref().is_some_and(|p| p.starts_with("sasl"));
    translate_sasl(&mut p, kafka, sasl)?;
    translate_endpoint_identification(&mut p, kafka);
    collect_transaction_keys(&mut p, kafka);
    translate_truststore(&mut p, kafka)?;
    translate_keystore(&mut p, kafka)?;
    classify_rest(&mut p, prefix, notes)
}

/// `bootstrap.servers` and the properties librdkafka reads under the same
/// name or another one ([`PRODUCER_SAME`], [`PRODUCER_RENAMED`]), copied
/// as they are: librdkafka judges their values when the producer starts.
fn take_passthrough(p: &mut Keys, kafka: &mut KafkaDraft) {
    if let Some(servers) = p.take("bootstrap.servers") {
        kafka.bootstrap = Some(servers);
    }
    for key in PRODUCER_SAME {
        if let Some(v) = p.take(key) {
            kafka.producer.insert((*key).to_owned(), v);
        }
    }
    for (java, rdkafka) in PRODUCER_RENAMED {
        if let Some(v) = p.take(java) {
            kafka.producer.insert((*rdkafka).to_owned(), v);
        }
    }
}

/// `acks` and `enable.idempotence`: walrelay's guarantee rests on every
/// in-sync replica having a record and on the idempotent producer, so any
/// weaker setting is refused.
fn check_delivery(p: &mut Keys, kafka: &mut KafkaDraft) -> Result<(), ConfigError> {
    if let Some(acks) = p.take("acks") {
        if acks != "all" && acks != "-1" {
            return Err(p.unsupported(
                "acks",
                "walrelay confirms an event to PostgreSQL only once every in-sync replica has it; use all",
            ));
        }
        kafka.producer.insert("acks".into(), "all".into());
    }
    if let Some(idem) = p.take("enable.idempotence") {
        if parse_bool(&idem) != Some(true) {
            return Err(p.unsupported(
                "enable.idempotence",
                "walrelay requires the idempotent producer (per-key order across retries)",
            ));
        }
    }
    Ok(())
}

/// `buffer.memory` (bytes) as librdkafka's `queue.buffering.max.kbytes`,
/// rounded up and at least 1.
fn translate_buffer_memory(p: &mut Keys, kafka: &mut KafkaDraft) -> Result<(), ConfigError> {
    if let Some(bytes) = p.take("buffer.memory") {
        let bytes: u64 = bytes
            .parse()
            .map_err(|_| p.invalid("buffer.memory", format!("{bytes:?} is not a byte count")))?;
        kafka.producer.insert(
            "queue.buffering.max.kbytes".into(),
            bytes.div_ceil(1024).max(1).to_string(),
        );
    }
    Ok(())
}

/// `security.protocol`, lower-cased as librdkafka spells it; returned too,
/// since a SASL protocol needs a mechanism walrelay implements.
fn translate_security_protocol(
    p: &mut Keys,
    kafka: &mut KafkaDraft,
) -> Result<Option<String>, ConfigError> {
    let protocol = p.take("security.protocol").map(|s| s.to_ascii_lowercase());
    if let Some(proto) = &protocol {
        if !matches!(
            proto.as_str(),
            "plaintext" | "ssl" | "sasl_plaintext" | "sasl_ssl"
        ) {
            return Err(p.invalid(
                "security.protocol",
                format!("{proto:?} is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
            ));
        }
        kafka
            .producer
            .insert("security.protocol".into(), proto.clone());
    }
    Ok(protocol)
}

/// `sasl.mechanism` (required with a SASL protocol: Java's default,
/// GSSAPI, is Kerberos) and the JAAS line's username and password; the
/// password becomes a [`Secret`] and the line never appears in an error.
fn translate_sasl(p: &mut Keys, kafka: &mut KafkaDraft, sasl: bool) -> Result<(), ConfigError> {
    let mechanism = p.take("sasl.mechanism");
    match mechanism.as_deref() {
        Some(m @ ("PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512")) => {
            kafka.producer.insert("sasl.mechanism".into(), m.into());
        }
        Some(other) => {
            return Err(p.unsupported(
                "sasl.mechanism",
                format!("walrelay supports PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, not {other}"),
            ))
        }
        None if sasl => {
            return Err(p.unsupported(
                "sasl.mechanism",
                "Java's default is GSSAPI (Kerberos), which walrelay does not support; set PLAIN or SCRAM-SHA-256/512",
            ))
        }
        None => {}
    }
    if let Some(jaas) = p.take_raw("sasl.jaas.config") {
        let (username, password) =
            parse_jaas(&jaas).map_err(|reason| p.unsupported("sasl.jaas.config", reason))?;
        kafka.producer.insert("sasl.username".into(), username);
        kafka
            .secrets
            .insert("sasl.password".into(), Secret::new(password));
    }
    Ok(())
}

/// `ssl.endpoint.identification.algorithm`: Java's empty value turns host
/// name verification off (librdkafka's `none`); any other is https.
fn translate_endpoint_identification(p: &mut Keys, kafka: &mut KafkaDraft) {
    if let Some(alg) = p.take("ssl.endpoint.identification.algorithm") {
        let v = if alg.is_empty() { "none" } else { "https" };
        kafka
            .producer
            .insert("ssl.endpoint.identification.algorithm".into(), v.into());
    }
}

/// `transactional.id` (by name only, never its value) and
/// `transaction.timeout.ms`, kept as the file spells them: whether they are
/// used or refused is the form's exactly-once decision
/// (`super::exactly_once`).
fn collect_transaction_keys(p: &mut Keys, kafka: &mut KafkaDraft) {
    if p.take("transactional.id").is_some() {
        kafka.transactional_id_key = Some(p.name("transactional.id"));
    }
    if let Some(v) = p.take("transaction.timeout.ms") {
        kafka.transaction_timeout = Some((p.name("transaction.timeout.ms"), v));
    }
}

/// The producer keys no step took: ignored with a warning, accepted at
/// their default only ([`PRODUCER_DEFAULT_ONLY`]), refused (Kerberos and
/// OAuth), or warned about as unknown; the first refused key, in key
/// order, is the error.
fn classify_rest(p: &mut Keys, prefix: &str, notes: &mut Notes) -> Result<(), ConfigError> {
    for (key, value) in p.drain() {
        if let Some((_, why)) = PRODUCER_IGNORED.iter().find(|(k, _)| *k == key) {
            if !why.is_empty() {
                notes.ignore(format!("{prefix}{key}"), *why);
            }
            continue;
        }
        if let Some((_, allowed, why)) = PRODUCER_DEFAULT_ONLY.iter().find(|(k, _, _)| *k == key) {
            if allowed.iter().any(|a| a.eq_ignore_ascii_case(value.trim())) {
                continue;
            }
            return Err(ConfigError::Unsupported {
                key: format!("{prefix}{key}"),
                reason: (*why).to_owned(),
            });
        }
        if key.starts_with("sasl.kerberos.") || key.starts_with("sasl.oauthbearer.") {
            return Err(ConfigError::Unsupported {
                key: format!("{prefix}{key}"),
                reason: "walrelay supports SASL PLAIN and SCRAM only".into(),
            });
        }
        notes.ignore(
            format!("{prefix}{key}"),
            "ignored: not a producer property walrelay translates to librdkafka",
        );
    }
    Ok(())
}

/// Extracts username and password from a PlainLoginModule or
/// ScramLoginModule JAAS line. Errors never contain the text.
fn parse_jaas(text: &str) -> Result<(String, String), String> {
    let text = text.trim();
    let body = text.strip_suffix(';').ok_or("it must end with ';'")?.trim();
    if body.contains(';') {
        return Err("walrelay supports a single login module".into());
    }
    let mut rest = body;
    let class_end = rest
        .find(char::is_whitespace)
        .ok_or("it has no control flag")?;
    let class = &rest[..class_end];
    rest = rest[class_end..].trim_start();
    if !matches!(
        class,
        "org.apache.kafka.common.security.plain.PlainLoginModule"
            | "org.apache.kafka.common.security.scram.ScramLoginModule"
    ) {
        return Err(format!(
            "walrelay supports PlainLoginModule and ScramLoginModule, not {class}"
        ));
    }
    let flag_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    if !matches!(
        &rest[..flag_end],
        "required" | "requisite" | "sufficient" | "optional"
    ) {
        return Err("the control flag must be required, requisite, sufficient or optional".into());
    }
    let mut options = parse_jaas_options(rest[flag_end..].trim_start())?;
    let username = options
        .remove("username")
        .ok_or("it has no username option")?;
    let password = options
        .remove("password")
        .ok_or("it has no password option")?;
    Ok((username, password))
}

/// The `name=value` options after a JAAS line's control flag, each value
/// plain or double-quoted (with backslash escapes). Errors never contain
/// the text.
fn parse_jaas_options(mut rest: &str) -> Result<BTreeMap<String, String>, String> {
    let mut options = BTreeMap::new();
    while !rest.is_empty() {
        let eq = rest
            .find('=')
            .ok_or("malformed option list (expected name=value)")?;
        let name = rest[..eq].trim().to_owned();
        let (value, after) = take_jaas_value(rest[eq + 1..].trim_start())?;
        rest = after;
        if name.is_empty() {
            return Err("malformed option list (empty option name)".into());
        }
        options.insert(name, value);
    }
    Ok(options)
}

/// One JAAS option value at the start of `rest` and what follows it: up
/// to the closing quote, unescaped, or up to the next white space.
fn take_jaas_value(rest: &str) -> Result<(String, &str), String> {
    let Some(quoted) = rest.strip_prefix('"') else {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        return Ok((rest[..end].to_owned(), rest[end..].trim_start()));
    };
    let mut v = String::new();
    let mut chars = quoted.char_indices();
    let mut end = None;
    while let Some((i, ch)) = chars.next() {
        match ch {
            '\\' => {
                if let Some((_, e)) = chars.next() {
                    v.push(e);
                }
            }
            '"' => {
                end = Some(i);
                break;
            }
            _ => v.push(ch),
        }
    }
    let end = end.ok_or("malformed option list (unterminated quote)")?;
    Ok((v, quoted[end + 1..].trim_start()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jaas_lines() {
        let plain = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p\"w";"#;
        assert_eq!(parse_jaas(plain), Ok(("u".into(), "p\"w".into())));
        let scram = "org.apache.kafka.common.security.scram.ScramLoginModule required\n  username=u\n  password=pw ;";
        assert_eq!(parse_jaas(scram), Ok(("u".into(), "pw".into())));
        for bad in [
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"secret\"",
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"secret;",
            "org.apache.kafka.common.security.plain.PlainLoginModule maybe username=u password=secret;",
            "org.apache.kafka.common.security.plain.PlainLoginModule required username=u;",
            "a.B required x=1; c.D required y=2;",
        ] {
            let err = parse_jaas(bad).unwrap_err();
            assert!(!err.contains("secret"), "{err}");
        }
        let err = parse_jaas("com.sun.security.auth.module.Krb5LoginModule required;").unwrap_err();
        assert!(err.contains("Krb5LoginModule"), "{err}");
    }
}
