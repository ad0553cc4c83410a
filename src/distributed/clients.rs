//! The worker's own Kafka clients: the storage topics' producer and
//! consumers and the admin client (librdkafka), and the group membership
//! (walrelay's own client, [`super::group`]), all from the worker file's
//! top-level `bootstrap.servers`, `security.protocol`, `ssl.*` and
//! `sasl.*`, as Connect's worker uses them for its own clients.
//!
//! Owns the mapping of one translation onto both clients. Secrets stay in
//! [`Secret`]s until they are handed to a client; nothing here logs.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rdkafka::ClientConfig;

use super::group::conn::{SaslSettings, TlsSettings};
use super::group::GroupSecurity;
use super::worker::DistributedConfig;
use crate::config::kafka_connect::worker_client_properties;
use crate::config::ConfigError;
use crate::secret::Secret;

/// Both forms of the worker's client settings.
pub(crate) struct WorkerClients {
    /// librdkafka's.
    pub(crate) rdkafka: ClientConfig,
    /// The group client's.
    pub(crate) group: GroupSecurity,
}

/// Translates the worker's client keys.
pub(crate) fn worker_clients(
    worker: &BTreeMap<String, String>,
    dist: &DistributedConfig,
) -> Result<WorkerClients, ConfigError> {
    let (props, secrets) = worker_client_properties(worker)?;
    let mut cc = ClientConfig::new();
    cc.set("bootstrap.servers", &dist.bootstrap);
    if let Some(id) = &dist.client_id {
        cc.set("client.id", id);
    }
    for (k, v) in &props {
        cc.set(k, v);
    }
    for (k, v) in &secrets {
        cc.set(k, v.expose());
    }
    let group = group_security(&props, &secrets)?;
    Ok(WorkerClients { rdkafka: cc, group })
}

/// The group client's settings from the librdkafka properties.
fn group_security(
    props: &BTreeMap<String, String>,
    secrets: &BTreeMap<String, Secret>,
) -> Result<GroupSecurity, ConfigError> {
    let protocol = props
        .get("security.protocol")
        .map_or("plaintext".to_owned(), |p| p.to_ascii_lowercase());
    let (tls, sasl) = match protocol.as_str() {
        "plaintext" => (false, false),
        "ssl" => (true, false),
        "sasl_plaintext" => (false, true),
        "sasl_ssl" => (true, true),
        other => {
            return Err(ConfigError::Invalid {
                key: "security.protocol".into(),
                reason: format!("{other:?} is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
            })
        }
    };
    let inline = ["ssl.ca.pem", "ssl.certificate.pem", "ssl.key.pem"];
    if tls {
        if let Some(k) = inline
            .iter()
            .find(|k| props.contains_key(**k) || secrets.contains_key(**k))
        {
            return Err(ConfigError::Unsupported {
                key: "ssl.truststore.location / ssl.keystore.location".into(),
                reason: format!(
                    "the worker's own clients (group membership) read PEM files only; this \
                     store became {k}: convert it to PEM files (openssl pkcs12 -in STORE -out \
                     FILE.pem) and name them with ssl.truststore.type=PEM / ssl.keystore.type=PEM"
                ),
            });
        }
    }
    let tls = tls.then(|| TlsSettings {
        ca_file: props.get("ssl.ca.location").map(PathBuf::from),
        cert_file: props.get("ssl.certificate.location").map(PathBuf::from),
        key_file: props.get("ssl.key.location").map(PathBuf::from),
        verify_hostname: props
            .get("ssl.endpoint.identification.algorithm")
            .is_none_or(|v| v.eq_ignore_ascii_case("https")),
    });
    let sasl = if sasl {
        let mechanism = props
            .get("sasl.mechanism")
            .or_else(|| props.get("sasl.mechanisms"))
            .cloned()
            .unwrap_or_else(|| "GSSAPI".into());
        Some(SaslSettings {
            mechanism,
            username: props.get("sasl.username").cloned().unwrap_or_default(),
            password: secrets
                .get("sasl.password")
                .map(|s| s.expose().to_owned())
                .unwrap_or_default(),
        })
    } else {
        None
    };
    Ok(GroupSecurity { tls, sasl })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist() -> DistributedConfig {
        let mut w: BTreeMap<String, String> = [
            ("group.id", "g"),
            ("config.storage.topic", "c"),
            ("offset.storage.topic", "o"),
            ("status.storage.topic", "s"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        DistributedConfig::take(&mut w).unwrap()
    }

    #[test]
    fn sasl_ssl_reaches_both_clients_and_plaintext_is_the_default() {
        let w: BTreeMap<String, String> = [
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            (
                "sasl.jaas.config",
                "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"w\" password=\"pw-1\";",
            ),
            ("ssl.truststore.type", "PEM"),
            ("ssl.truststore.location", "/etc/ca.pem"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        let c = worker_clients(&w, &dist()).unwrap();
        let sasl = c.group.sasl.clone().unwrap();
        assert_eq!(
            (
                sasl.mechanism.as_str(),
                sasl.username.as_str(),
                sasl.password.as_str()
            ),
            ("SCRAM-SHA-512", "w", "pw-1")
        );
        assert_eq!(
            c.group.tls.unwrap().ca_file,
            Some(PathBuf::from("/etc/ca.pem"))
        );
        assert!(!format!("{:?}", c.group.sasl).contains("pw-1"));
        let plain = worker_clients(&BTreeMap::new(), &dist()).unwrap();
        assert_eq!(plain.group, GroupSecurity::default());
    }
}
