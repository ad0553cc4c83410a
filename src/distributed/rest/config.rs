//! The REST server's settings, read from Connect's worker keys:
//! `listeners` (and the deprecated `rest.host.name`/`rest.port`), the
//! advertised URL (`rest.advertised.*`), the HTTPS listener's stores
//! (`listeners.https.ssl.*`, else `ssl.*`, all or nothing as Connect's
//! `valuesWithPrefixAllOrNothing`), CORS (`access.control.allow.*`),
//! topic tracking, and `rest.extension.classes` (only Connect's basic
//! auth extension, see [`super::auth`]).
//!
//! Owns turning the worker's map into a [`RestConfig`]; errors name the
//! key, never a value. Passwords are kept in [`Secret`]s.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;

use crate::secret::Secret;

use super::auth::BasicAuth;

/// The basic auth extension's class, the one REST extension walrelay has.
pub(crate) const BASIC_AUTH_EXTENSION: &str =
    "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension";

/// walrelay's listener when `listeners` is unset: loopback only, unlike
/// Connect's `http://:8083` (every interface), so an unconfigured worker
/// is not reachable from the network.
pub(crate) const DEFAULT_LISTENER: &str = "http://127.0.0.1:8083";

/// A worker key that is wrong, and why (never its value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RestConfigError {
    /// The key.
    pub(crate) key: String,
    /// What is wrong with it.
    pub(crate) why: String,
}

impl RestConfigError {
    /// An error about `key`.
    pub(crate) fn new(key: &str, why: impl Into<String>) -> RestConfigError {
        RestConfigError {
            key: key.to_owned(),
            why: why.into(),
        }
    }
}

impl fmt::Display for RestConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.why)
    }
}

impl std::error::Error for RestConfigError {}

/// HTTP or HTTPS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    /// `http`.
    Http,
    /// `https`.
    Https,
}

impl Scheme {
    /// `http` or `https`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// One listener: `scheme://host:port` (an empty host binds every
/// interface, as Connect).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Listener {
    /// The scheme.
    pub(crate) scheme: Scheme,
    /// The host to bind (`""`: all interfaces).
    pub(crate) host: String,
    /// The port (0: any free port).
    pub(crate) port: u16,
}

impl Listener {
    /// The address to bind.
    pub(crate) fn bind_addr(&self) -> String {
        if self.host.is_empty() {
            format!("0.0.0.0:{}", self.port)
        } else if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// `ssl.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientAuth {
    /// `none`.
    None,
    /// `requested`: asked for, not required.
    Requested,
    /// `required`.
    Required,
}

/// The HTTPS listener's key and trust stores.
#[derive(Debug, Clone, Default)]
pub(crate) struct TlsSettings {
    /// `ssl.keystore.type` (`JKS` is Connect's default; walrelay reads
    /// PKCS12 and PEM and tells JKS apart by its bytes).
    pub(crate) keystore_type: Option<String>,
    /// `ssl.keystore.location`.
    pub(crate) keystore_location: Option<String>,
    /// `ssl.keystore.password`.
    pub(crate) keystore_password: Option<Secret>,
    /// `ssl.key.password`.
    pub(crate) key_password: Option<Secret>,
    /// `ssl.keystore.key` (PEM, inline).
    pub(crate) keystore_key: Option<Secret>,
    /// `ssl.keystore.certificate.chain` (PEM, inline).
    pub(crate) keystore_chain: Option<String>,
    /// `ssl.truststore.type`.
    pub(crate) truststore_type: Option<String>,
    /// `ssl.truststore.location`.
    pub(crate) truststore_location: Option<String>,
    /// `ssl.truststore.password`.
    pub(crate) truststore_password: Option<Secret>,
    /// `ssl.truststore.certificates` (PEM, inline).
    pub(crate) truststore_certificates: Option<String>,
    /// `ssl.client.auth`.
    pub(crate) client_auth: Option<ClientAuth>,
    /// `ssl.enabled.protocols` (`TLSv1.2`, `TLSv1.3`).
    pub(crate) enabled_protocols: Vec<String>,
    /// The prefix the keys were read under (`listeners.https.` or ``),
    /// for errors.
    pub(crate) prefix: String,
}

/// CORS: Jetty's `CrossOriginHandler` as Connect sets it up.
#[derive(Debug, Clone)]
pub(crate) struct Cors {
    /// `access.control.allow.origin`, split on commas: `*` or regular
    /// expressions matched whole and case-insensitively.
    pub(crate) origins: Vec<String>,
    /// `access.control.allow.methods` (Jetty's default: GET, POST, HEAD).
    pub(crate) methods: Vec<String>,
}

/// The REST server's settings.
#[derive(Debug, Clone)]
pub(crate) struct RestConfig {
    /// Where to listen.
    pub(crate) listeners: Vec<Listener>,
    /// `rest.advertised.host.name`.
    pub(crate) advertised_host: Option<String>,
    /// `rest.advertised.port`.
    pub(crate) advertised_port: Option<u16>,
    /// `rest.advertised.listener`.
    pub(crate) advertised_scheme: Option<Scheme>,
    /// The HTTPS listener's stores (`None` without an HTTPS listener).
    pub(crate) tls: Option<TlsSettings>,
    /// CORS (`None`: no CORS headers, as Connect with an empty
    /// `access.control.allow.origin`).
    pub(crate) cors: Option<Cors>,
    /// HTTP basic auth (the basic auth REST extension).
    pub(crate) basic_auth: Option<BasicAuth>,
    /// `topic.tracking.enable` (default true).
    pub(crate) topic_tracking: bool,
    /// `topic.tracking.allow.reset` (default true).
    pub(crate) topic_tracking_reset: bool,
    /// The level `GET /admin/loggers` answers for `root`.
    pub(crate) log_level: String,
}

impl Default for RestConfig {
    fn default() -> Self {
        RestConfig {
            listeners: vec![Listener {
                scheme: Scheme::Http,
                host: "127.0.0.1".into(),
                port: 8083,
            }],
            advertised_host: None,
            advertised_port: None,
            advertised_scheme: None,
            tls: None,
            cors: None,
            basic_auth: None,
            topic_tracking: true,
            topic_tracking_reset: true,
            log_level: "INFO".into(),
        }
    }
}

/// Parses one listener as Connect's `LISTENER_PATTERN`
/// (`protocol://host:port`, the host optionally in brackets).
pub(crate) fn parse_listener(s: &str) -> Result<Listener, String> {
    const FORMAT: &str = "Listener doesn't have the right format (protocol://hostname:port).";
    let (protocol, rest) = s.split_once("://").ok_or(FORMAT)?;
    let (host, port) = rest.rsplit_once(':').ok_or(FORMAT)?;
    let host = host.strip_prefix('[').unwrap_or(host);
    let host = host.strip_suffix(']').unwrap_or(host);
    let host_ok = host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-%._:".contains(c));
    let digits = port.strip_prefix('-').unwrap_or(port);
    if !host_ok || digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return Err(FORMAT.into());
    }
    let scheme = match protocol.to_ascii_lowercase().as_str() {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        _ => return Err("Listener protocol must be either \"http\" or \"https\".".into()),
    };
    let port = port
        .parse::<u16>()
        .map_err(|_| format!("port {port} is not between 0 and 65535"))?;
    Ok(Listener {
        scheme,
        host: host.to_owned(),
        port,
    })
}

/// A boolean worker key (`true`/`false`, any case, as ConfigDef).
fn bool_key(
    worker: &BTreeMap<String, String>,
    key: &str,
    default: bool,
) -> Result<bool, RestConfigError> {
    match worker.get(key).map(|v| v.trim().to_ascii_lowercase()) {
        None => Ok(default),
        Some(v) if v == "true" => Ok(true),
        Some(v) if v == "false" => Ok(false),
        Some(_) => Err(RestConfigError::new(key, "expected true or false")),
    }
}

/// A non-blank trimmed value.
fn text(worker: &BTreeMap<String, String>, key: &str) -> Option<String> {
    worker
        .get(key)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// `listeners`, else `rest.host.name`/`rest.port` (Connect 3's deprecated
/// keys, removed in 4.0; walrelay still honours them), else
/// [`DEFAULT_LISTENER`].
fn listeners(worker: &BTreeMap<String, String>) -> Result<Vec<Listener>, RestConfigError> {
    let raw = match worker.get("listeners") {
        Some(v) => v.clone(),
        None if worker.contains_key("rest.host.name") || worker.contains_key("rest.port") => {
            format!(
                "http://{}:{}",
                text(worker, "rest.host.name").unwrap_or_default(),
                text(worker, "rest.port").unwrap_or_else(|| "8083".into())
            )
        }
        None => DEFAULT_LISTENER.into(),
    };
    let items: Vec<&str> = raw.split(',').map(str::trim).collect();
    if raw.trim().is_empty() {
        return Err(RestConfigError::new(
            "listeners",
            "Invalid value for listeners, at least one URL is expected, ex: http://localhost:8080,https://localhost:8443.",
        ));
    }
    items
        .iter()
        .map(|item| {
            if item.is_empty() {
                return Err(RestConfigError::new(
                    "listeners",
                    "Empty URL found when parsing listeners list.",
                ));
            }
            parse_listener(item).map_err(|why| RestConfigError::new("listeners", why))
        })
        .collect()
}

/// The HTTPS listener's stores: every `listeners.https.ssl.*` key when
/// there is one, else the plain `ssl.*` keys.
fn tls_settings(worker: &BTreeMap<String, String>) -> Result<TlsSettings, RestConfigError> {
    let prefixed = worker.keys().any(|k| k.starts_with("listeners.https."));
    let prefix = if prefixed { "listeners.https." } else { "" };
    let get = |k: &str| text(worker, &format!("{prefix}{k}"));
    let secret = |k: &str| worker.get(&format!("{prefix}{k}")).map(Secret::new);
    let client_auth = match get("ssl.client.auth").as_deref() {
        None => None,
        Some("none") => Some(ClientAuth::None),
        Some("requested") => Some(ClientAuth::Requested),
        Some("required") => Some(ClientAuth::Required),
        Some(_) => {
            return Err(RestConfigError::new(
                &format!("{prefix}ssl.client.auth"),
                "expected one of none, requested, required",
            ))
        }
    };
    if get("ssl.cipher.suites").is_some() {
        return Err(RestConfigError::new(
            &format!("{prefix}ssl.cipher.suites"),
            "not supported by walrelay's REST listener (it uses OpenSSL's defaults)",
        ));
    }
    let enabled_protocols = get("ssl.enabled.protocols")
        .map(|v| {
            v.split(',')
                .map(|p| p.trim().to_owned())
                .filter(|p| !p.is_empty())
                .collect()
        })
        .unwrap_or_default();
    Ok(TlsSettings {
        keystore_type: get("ssl.keystore.type"),
        keystore_location: get("ssl.keystore.location"),
        keystore_password: secret("ssl.keystore.password"),
        key_password: secret("ssl.key.password"),
        keystore_key: secret("ssl.keystore.key"),
        keystore_chain: get("ssl.keystore.certificate.chain"),
        truststore_type: get("ssl.truststore.type"),
        truststore_location: get("ssl.truststore.location"),
        truststore_password: secret("ssl.truststore.password"),
        truststore_certificates: get("ssl.truststore.certificates"),
        client_auth,
        enabled_protocols,
        prefix: prefix.to_owned(),
    })
}

/// `access.control.allow.origin` / `access.control.allow.methods`.
fn cors(worker: &BTreeMap<String, String>) -> Option<Cors> {
    let origins = text(worker, "access.control.allow.origin")?;
    let split = |v: String| -> Vec<String> {
        v.split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect()
    };
    let methods = text(worker, "access.control.allow.methods")
        .map(split)
        .unwrap_or_else(|| vec!["GET".into(), "POST".into(), "HEAD".into()]);
    Some(Cors {
        origins: split(origins),
        methods,
    })
}

impl RestConfig {
    /// Reads Connect's worker keys; `env` gives environment variables
    /// (`KAFKA_OPTS`, where Connect deployments name the JAAS file).
    pub(crate) fn from_worker(
        worker: &BTreeMap<String, String>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<RestConfig, RestConfigError> {
        let listeners = listeners(worker)?;
        let advertised_port = match text(worker, "rest.advertised.port") {
            None => None,
            Some(p) => Some(p.parse::<u16>().map_err(|_| {
                RestConfigError::new("rest.advertised.port", "expected a port number")
            })?),
        };
        let advertised_scheme =
            match text(worker, "rest.advertised.listener").map(|s| s.to_ascii_lowercase()) {
                None => None,
                Some(s) if s == "http" => Some(Scheme::Http),
                Some(s) if s == "https" => Some(Scheme::Https),
                Some(_) => {
                    return Err(RestConfigError::new(
                        "rest.advertised.listener",
                        "expected http or https",
                    ))
                }
            };
        let tls = if listeners.iter().any(|l| l.scheme == Scheme::Https) {
            Some(tls_settings(worker)?)
        } else {
            None
        };
        let mut basic_auth = None;
        for class in text(worker, "rest.extension.classes")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty())
        {
            if class != BASIC_AUTH_EXTENSION {
                return Err(RestConfigError::new(
                    "rest.extension.classes",
                    format!("walrelay has only {BASIC_AUTH_EXTENSION}, not {class}"),
                ));
            }
            basic_auth = Some(BasicAuth::from_env(env)?);
        }
        Ok(RestConfig {
            listeners,
            advertised_host: text(worker, "rest.advertised.host.name"),
            advertised_port,
            advertised_scheme,
            tls,
            cors: cors(worker),
            basic_auth,
            topic_tracking: bool_key(worker, "topic.tracking.enable", true)?,
            topic_tracking_reset: bool_key(worker, "topic.tracking.allow.reset", true)?,
            log_level: "INFO".into(),
        })
    }

    /// The advertised scheme: `rest.advertised.listener`, else `http` when
    /// an HTTP listener exists, else `https` (Connect's rule).
    pub(crate) fn advertised_scheme(&self) -> Scheme {
        self.advertised_scheme.unwrap_or_else(|| {
            if self.listeners.iter().any(|l| l.scheme == Scheme::Http) {
                Scheme::Http
            } else {
                Scheme::Https
            }
        })
    }

    /// The worker's URL (`scheme://host:port/`), from the advertised keys
    /// and the first listener of the advertised scheme; `bound` are the
    /// listeners' bound addresses, in order (for port 0 and empty hosts).
    pub(crate) fn advertised_url(&self, bound: &[SocketAddr]) -> String {
        let scheme = self.advertised_scheme();
        let found = self
            .listeners
            .iter()
            .zip(bound.iter().map(Some).chain(std::iter::repeat(None)))
            .find(|(l, _)| l.scheme == scheme);
        let host = self.advertised_host.clone().unwrap_or_else(|| match found {
            // A wildcard listener is no address to reach the worker at
            // (every worker would have the same id): the host's name, as
            // Connect takes it.
            Some((l, _)) if !l.host.is_empty() && !wildcard(&l.host) => l.host.clone(),
            Some((_, Some(addr))) if !addr.ip().is_unspecified() => addr.ip().to_string(),
            _ => local_host_name(),
        });
        let port = self.advertised_port.unwrap_or_else(|| match found {
            Some((l, _)) if l.port > 0 => l.port,
            Some((_, Some(addr))) => addr.port(),
            _ => 8083,
        });
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]")
        } else {
            host
        };
        format!("{}://{host}:{port}/", scheme.as_str())
    }

    /// The worker's id: the advertised URL's `host:port`.
    pub(crate) fn worker_id(&self, bound: &[SocketAddr]) -> String {
        let url = self.advertised_url(bound);
        let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
        rest.trim_end_matches('/').to_owned()
    }
}

/// The machine's host name (what Jetty's URI names for a listener on
/// every interface), or `localhost`.
fn local_host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// Whether a listener's host is a wildcard address (`0.0.0.0`, `::`).
fn wildcard(host: &str) -> bool {
    host.trim_matches(|c| c == '[' || c == ']')
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_unspecified())
}
