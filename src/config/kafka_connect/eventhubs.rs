//! Debezium Server's `eventhubs` sink onto walrelay's Kafka producer.
//!
//! Debezium Server 3.6.1 publishes to one event hub over AMQP (the Azure
//! SDK): `connectionstring` (the namespace's, `Endpoint=sb://<namespace>/;
//! SharedAccessKeyName=...;SharedAccessKey=...`) and `hubname`, every
//! record to that hub, the record key as the partition key. Event Hubs
//! also speaks the Kafka protocol on port 9093, and that is what walrelay
//! uses: `bootstrap.servers` is the namespace's host on 9093,
//! `security.protocol=SASL_SSL`, `sasl.mechanism=PLAIN`, the user
//! `$ConnectionString` and the connection string as the password (a
//! secret: never logged), and every outbox record goes to the hub's topic.
//! What a consumer sees differs from Debezium Server's AMQP messages, and
//! docs/debezium-server-sinks.md §11 says how; keys that choose partitions
//! another way than by key are refused by name.

use super::{Draft, Keys, Notes};
use crate::config::ConfigError;
use crate::secret::Secret;

/// The Kafka endpoint's port on an Event Hubs namespace.
const KAFKA_PORT: u16 = 9093;

/// The `debezium.sink.eventhubs.*` keys (without the prefix) into the
/// draft's Kafka producer; returns the hub, every record's topic.
pub(in crate::config) fn eventhubs(
    k: &mut Keys,
    draft: &mut Draft,
    notes: &mut Notes,
) -> Result<String, ConfigError> {
    let connection = k
        .take_raw("connectionstring")
        .filter(|c| !c.is_empty())
        .ok_or_else(|| ConfigError::Missing {
            key: k.name("connectionstring"),
            reason: "the Event Hubs namespace's connection string".into(),
        })?;
    let hub = k.take_required("hubname", "the event hub every record goes to")?;
    let host = namespace_host(&connection).ok_or_else(|| {
        k.invalid(
            "connectionstring",
            "has no Endpoint=sb://<namespace>.servicebus.windows.net/ part",
        )
    })?;
    for key in ["partitionid", "partitionkey", "hashmessagekeyfunction"] {
        if k.take(key).is_some_and(|v| !v.trim().is_empty()) {
            return Err(k.unsupported(
                key,
                "walrelay publishes to Event Hubs over its Kafka endpoint, where each record goes \
                 to the partition of its key (Kafka's partitioner); remove the key",
            ));
        }
    }
    match k.take("dynamicpartitionrouting").as_deref().map(str::trim) {
        None | Some("") => {}
        Some(v) if v.eq_ignore_ascii_case("DEFAULT") || v.eq_ignore_ascii_case("KEY") => {}
        Some(_) => {
            return Err(k.unsupported(
                "dynamicpartitionrouting",
                "only DEFAULT and KEY (a record goes to the partition of its key); walrelay \
                 publishes to Event Hubs over its Kafka endpoint",
            ))
        }
    }
    if k.take("maxbatchsize").is_some() {
        notes.ignore(
            k.name("maxbatchsize"),
            "ignored: the Kafka producer batches by itself (batch.size, linger.ms)",
        );
    }
    draft.kafka.bootstrap = Some(format!("{host}:{KAFKA_PORT}"));
    for (key, value) in [
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "PLAIN"),
        ("sasl.username", "$ConnectionString"),
    ] {
        draft
            .kafka
            .producer
            .insert(key.to_owned(), value.to_owned());
    }
    draft
        .kafka
        .secrets
        .insert("sasl.password".to_owned(), Secret::new(connection));
    Ok(hub)
}

/// The namespace's host from `Endpoint=sb://<host>/` in a connection
/// string.
fn namespace_host(connection: &str) -> Option<String> {
    connection.split(';').find_map(|part| {
        let (name, value) = part.split_once('=')?;
        if !name.trim().eq_ignore_ascii_case("Endpoint") {
            return None;
        }
        let rest = value.trim().strip_prefix("sb://")?;
        let host = rest.split('/').next()?.split(':').next()?;
        (!host.is_empty()).then(|| host.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_namespace_host_comes_from_the_endpoint() {
        let c = "Endpoint=sb://shop.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=abc=";
        assert_eq!(
            namespace_host(c).as_deref(),
            Some("shop.servicebus.windows.net")
        );
        assert_eq!(namespace_host("SharedAccessKey=abc"), None);
    }
}
