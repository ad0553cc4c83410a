//! `[sink.http]`: the settings of the HTTP sink, their defaults (Debezium
//! Server's where it has one), their validation by key, and the OpenSSL
//! connector they describe. Reads no file but the TLS ones, and opens no
//! connection.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use hyper::header::{self, HeaderName, HeaderValue};
use openssl::ssl::SslConnector;
use serde::Deserialize;

use super::auth::webhook_key;
use super::client::Target;
use super::request::{DEAD_LETTER, IDEMPOTENCY_KEY};
use crate::secret::Secret;
use crate::setting::SettingError;

/// Debezium Server's `headers.prefix`.
pub(crate) const DEFAULT_HEADERS_PREFIX: &str = "X-DEBEZIUM-";
/// Debezium Server's `timeout.ms`.
const DEFAULT_TIMEOUT_MS: u64 = 60_000;
/// Debezium Server's `retries`: attempts in all.
pub(super) const DEFAULT_RETRIES: u32 = 5;
/// Debezium Server's `retry.interval.ms`.
pub(super) const DEFAULT_RETRY_INTERVAL_MS: u64 = 1_000;
/// Debezium Server's `batch.max-size`.
pub(super) const DEFAULT_BATCH_MAX_SIZE: usize = 200;
/// Requests in flight at once (native form).
pub(super) const DEFAULT_MAX_IN_FLIGHT: usize = 4;
/// Most requests in flight walrelay allows.
const MAX_IN_FLIGHT: usize = 64;
/// Debezium Server's `authentication.jwt.token_expiration`, minutes.
pub(super) const DEFAULT_JWT_TOKEN_MINUTES: u64 = 60;
/// Debezium Server's `authentication.jwt.refresh_token_expiration`, minutes.
pub(super) const DEFAULT_JWT_REFRESH_MINUTES: u64 = 1440;
/// The content type (Debezium Server's for `debezium.format.value=json`).
pub(super) const DEFAULT_CONTENT_TYPE: &str = "application/json";

/// `[sink.http]`: HTTP (`debezium.sink.http.*`).
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HttpConfig {
    /// The URL every record is POSTed to (`http://` or `https://`).
    pub(crate) url: String,
    /// How long one attempt may take, connecting included (`timeout.ms`,
    /// default 60000).
    #[serde(default)]
    pub(crate) timeout_ms: Option<u64>,
    /// Attempts of one request before the worker pauses and sends again
    /// (`retries`, default 5).
    #[serde(default)]
    pub(crate) retries: Option<u32>,
    /// Pause between those attempts (`retry.interval.ms`, default 1000).
    #[serde(default)]
    pub(crate) retry_interval_ms: Option<u64>,
    /// Requests in flight at once, never two for one key (default 4).
    #[serde(default)]
    pub(crate) max_in_flight: Option<usize>,
    /// `content-type` of every request (default `application/json`).
    #[serde(default)]
    pub(crate) content_type: Option<String>,
    /// Prefix of the HTTP name of each record header (`headers.prefix`,
    /// default `X-DEBEZIUM-`).
    #[serde(default)]
    pub(crate) headers_prefix: Option<String>,
    /// Base64 of each record header's value (`headers.encode.base64`,
    /// default true); off, the value is sent as it is.
    #[serde(default)]
    pub(crate) headers_encode_base64: Option<bool>,
    /// More headers on every request (name → value); the values are
    /// treated as secrets (an API key is one).
    #[serde(default)]
    pub(crate) headers: BTreeMap<String, Secret>,
    /// `Idempotency-Key: <event id>` on each request (default true).
    #[serde(default)]
    pub(crate) idempotency_key: Option<bool>,
    /// Several records per request, as a JSON array (`batch.enabled`).
    #[serde(default)]
    pub(crate) batch: bool,
    /// Records per request with `batch` (`batch.max-size`, default 200).
    #[serde(default)]
    pub(crate) batch_max_size: Option<usize>,
    /// HTTP basic authentication: the user, with `password`.
    #[serde(default)]
    pub(crate) user: Option<String>,
    /// Password of `user`.
    #[serde(default)]
    pub(crate) password: Option<Secret>,
    /// `Authorization: Bearer <token>` on every request.
    #[serde(default)]
    pub(crate) bearer_token: Option<Secret>,
    /// Debezium Server's JWT flow: its base URL (`<url>auth/authenticate`,
    /// `<url>auth/refreshToken`).
    #[serde(default)]
    pub(crate) jwt_url: Option<String>,
    /// The user name the JWT login sends, with `jwt_password`.
    #[serde(default)]
    pub(crate) jwt_username: Option<String>,
    /// The password the JWT login sends (never in `Debug` or logs).
    #[serde(default)]
    pub(crate) jwt_password: Option<Secret>,
    /// Lifetime asked for the token, minutes (default 60).
    #[serde(default)]
    pub(crate) jwt_token_expiration_minutes: Option<u64>,
    /// Lifetime asked for the refresh token, minutes (default 1440).
    #[serde(default)]
    pub(crate) jwt_refresh_token_expiration_minutes: Option<u64>,
    /// OAuth2 client credentials: the token endpoint.
    #[serde(default)]
    pub(crate) oauth2_token_url: Option<String>,
    /// The client id, sent as the HTTP basic user of the token request.
    #[serde(default)]
    pub(crate) oauth2_client_id: Option<String>,
    /// The client secret, its HTTP basic password (never in `Debug` or
    /// logs).
    #[serde(default)]
    pub(crate) oauth2_client_secret: Option<Secret>,
    /// The `scope` of the token request; unset or empty, none is sent.
    #[serde(default)]
    pub(crate) oauth2_scope: Option<String>,
    /// Standard Webhooks signing secret (base64, optionally `whsec_`,
    /// 24 to 64 bytes).
    #[serde(default)]
    pub(crate) webhook_secret: Option<Secret>,
    /// CA certificates (PEM) that sign the receiver's; without it, the
    /// system's trust store.
    #[serde(default)]
    pub(crate) tls_ca_file: Option<PathBuf>,
    /// Client certificate (PEM), with `tls_key_file`.
    #[serde(default)]
    pub(crate) tls_cert_file: Option<PathBuf>,
    /// Client key (PEM).
    #[serde(default)]
    pub(crate) tls_key_file: Option<PathBuf>,
    /// The dead-letter topic (`errors.dead_letter_topic` when bad events go
    /// there), named in `X-Walrelay-Dead-Letter`; set by the sink, not a key.
    #[serde(skip)]
    pub(crate) dead_letter_topic: Option<String>,
}

impl fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redacted = |s: &Option<Secret>| s.as_ref().map(|_| "<redacted>");
        f.debug_struct("HttpConfig")
            .field("url", &crate::secret::redact_userinfo(&self.url))
            .field("timeout_ms", &self.timeout_ms)
            .field("retries", &self.retries)
            .field("retry_interval_ms", &self.retry_interval_ms)
            .field("max_in_flight", &self.max_in_flight)
            .field("content_type", &self.content_type)
            .field("headers_prefix", &self.headers_prefix)
            .field("headers_encode_base64", &self.headers_encode_base64)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("idempotency_key", &self.idempotency_key)
            .field("batch", &self.batch)
            .field("batch_max_size", &self.batch_max_size)
            .field("user", &self.user)
            .field("password", &redacted(&self.password))
            .field("bearer_token", &redacted(&self.bearer_token))
            .field("jwt_url", &self.jwt_url)
            .field("jwt_username", &self.jwt_username)
            .field("jwt_password", &redacted(&self.jwt_password))
            .field(
                "jwt_token_expiration_minutes",
                &self.jwt_token_expiration_minutes,
            )
            .field(
                "jwt_refresh_token_expiration_minutes",
                &self.jwt_refresh_token_expiration_minutes,
            )
            .field("oauth2_token_url", &self.oauth2_token_url)
            .field("oauth2_client_id", &self.oauth2_client_id)
            .field(
                "oauth2_client_secret",
                &redacted(&self.oauth2_client_secret),
            )
            .field("oauth2_scope", &self.oauth2_scope)
            .field("webhook_secret", &redacted(&self.webhook_secret))
            .field("tls_ca_file", &self.tls_ca_file)
            .field("tls_cert_file", &self.tls_cert_file)
            .field("tls_key_file", &self.tls_key_file)
            .field("dead_letter_topic", &self.dead_letter_topic)
            .finish()
    }
}

/// Headers a `[sink.http] headers` entry may not set: HTTP's own framing,
/// and what walrelay sets itself.
const RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "content-type",
    IDEMPOTENCY_KEY,
    DEAD_LETTER,
];

impl HttpConfig {
    /// Checks the section; the error names the key.
    pub(crate) fn validate(&self) -> Result<(), SettingError> {
        let target =
            Target::parse(&self.url).map_err(|why| SettingError::invalid("sink.http.url", why))?;
        for (key, zero) in [
            ("sink.http.timeout_ms", self.timeout_ms == Some(0)),
            ("sink.http.retries", self.retries == Some(0)),
            ("sink.http.batch_max_size", self.batch_max_size == Some(0)),
            ("sink.http.max_in_flight", self.max_in_flight == Some(0)),
        ] {
            if zero {
                return Err(SettingError::invalid(key, "must be at least 1"));
            }
        }
        if self.max_in_flight.is_some_and(|n| n > MAX_IN_FLIGHT) {
            return Err(SettingError::invalid(
                "sink.http.max_in_flight",
                format!("must be at most {MAX_IN_FLIGHT}"),
            ));
        }
        if let Some(ct) = &self.content_type {
            if ct.trim().is_empty() || HeaderValue::from_str(ct).is_err() {
                return Err(SettingError::invalid(
                    "sink.http.content_type",
                    "must be a one-line header value",
                ));
            }
        }
        if HeaderName::from_bytes(format!("{}ID", self.prefix()).as_bytes()).is_err() {
            return Err(SettingError::invalid(
                "sink.http.headers_prefix",
                "must be the start of an HTTP header name (letters, digits, `-`, `_`, `.`, ...)",
            ));
        }
        self.validate_headers()?;
        self.validate_auth()?;
        let tls_keys = [
            ("sink.http.tls_ca_file", self.tls_ca_file.is_some()),
            ("sink.http.tls_cert_file", self.tls_cert_file.is_some()),
            ("sink.http.tls_key_file", self.tls_key_file.is_some()),
        ];
        if !target.tls {
            if let Some((key, _)) = tls_keys.iter().find(|(_, set)| *set) {
                return Err(SettingError::invalid(
                    *key,
                    "is a TLS setting and sink.http.url is http://; use https://",
                ));
            }
        }
        if self.tls_cert_file.is_some() != self.tls_key_file.is_some() {
            return Err(SettingError::invalid(
                "sink.http.tls_key_file",
                "tls_cert_file and tls_key_file go together",
            ));
        }
        Ok(())
    }

    fn validate_headers(&self) -> Result<(), SettingError> {
        for (name, value) in &self.headers {
            let key = format!("sink.http.headers.\"{name}\"");
            let parsed = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| SettingError::invalid(key.clone(), "is not an HTTP header name"))?;
            if RESERVED_HEADERS.contains(&parsed.as_str()) {
                return Err(SettingError::invalid(
                    key,
                    "is set by walrelay itself (content_type sets content-type)",
                ));
            }
            if parsed == header::AUTHORIZATION && self.auth_keys().next().is_some() {
                return Err(SettingError::invalid(
                    key,
                    "authorization is set by the authentication configured in [sink.http]",
                ));
            }
            if HeaderValue::from_str(value.expose()).is_err() {
                return Err(SettingError::invalid(
                    key,
                    "its value must be a one-line header value",
                ));
            }
        }
        Ok(())
    }

    /// The authentication methods set, each named by one of its keys.
    fn auth_keys(&self) -> impl Iterator<Item = &'static str> + '_ {
        [
            (
                "sink.http.user",
                self.user.is_some() || self.password.is_some(),
            ),
            ("sink.http.bearer_token", self.bearer_token.is_some()),
            (
                "sink.http.jwt_url",
                self.jwt_url.is_some()
                    || self.jwt_username.is_some()
                    || self.jwt_password.is_some(),
            ),
            (
                "sink.http.oauth2_token_url",
                self.oauth2_token_url.is_some()
                    || self.oauth2_client_id.is_some()
                    || self.oauth2_client_secret.is_some(),
            ),
            ("sink.http.webhook_secret", self.webhook_secret.is_some()),
        ]
        .into_iter()
        .filter(|(_, set)| *set)
        .map(|(key, _)| key)
    }

    fn validate_auth(&self) -> Result<(), SettingError> {
        let methods: Vec<&str> = self.auth_keys().collect();
        if methods.len() > 1 {
            return Err(SettingError::invalid(
                methods[1],
                format!(
                    "one authentication at a time: {} is set too (Debezium Server's \
                     authentication.type also names one)",
                    methods[0]
                ),
            ));
        }
        if self.user.is_some() != self.password.is_some() {
            return Err(SettingError::invalid(
                "sink.http.password",
                "user and password go together",
            ));
        }
        self.validate_jwt()?;
        self.validate_oauth2()?;
        if let Some(secret) = &self.webhook_secret {
            webhook_key(secret.expose())
                .map_err(|why| SettingError::invalid("sink.http.webhook_secret", why))?;
        }
        Ok(())
    }

    /// The JWT keys: all three or none, a usable URL, and the lifetimes
    /// only with the flow.
    fn validate_jwt(&self) -> Result<(), SettingError> {
        let jwt = [
            ("sink.http.jwt_url", self.jwt_url.is_some()),
            ("sink.http.jwt_username", self.jwt_username.is_some()),
            ("sink.http.jwt_password", self.jwt_password.is_some()),
        ];
        if jwt.iter().any(|(_, s)| *s) {
            if let Some((key, _)) = jwt.iter().find(|(_, s)| !*s) {
                return Err(SettingError::Missing {
                    key: (*key).to_owned(),
                    reason: "jwt_url, jwt_username and jwt_password go together".into(),
                });
            }
            let url = format!("{}auth/authenticate", self.jwt_url.as_deref().unwrap_or(""));
            Target::parse(&url).map_err(|why| SettingError::invalid("sink.http.jwt_url", why))?;
        } else {
            for (key, set) in [
                (
                    "sink.http.jwt_token_expiration_minutes",
                    self.jwt_token_expiration_minutes.is_some(),
                ),
                (
                    "sink.http.jwt_refresh_token_expiration_minutes",
                    self.jwt_refresh_token_expiration_minutes.is_some(),
                ),
            ] {
                if set {
                    return Err(SettingError::invalid(
                        key,
                        "belongs to the JWT flow (jwt_url), which is not set",
                    ));
                }
            }
        }
        Ok(())
    }

    /// The OAuth2 keys: all three or none, a usable URL, and the scope
    /// only with the flow.
    fn validate_oauth2(&self) -> Result<(), SettingError> {
        let oauth2 = [
            (
                "sink.http.oauth2_token_url",
                self.oauth2_token_url.is_some(),
            ),
            (
                "sink.http.oauth2_client_id",
                self.oauth2_client_id.is_some(),
            ),
            (
                "sink.http.oauth2_client_secret",
                self.oauth2_client_secret.is_some(),
            ),
        ];
        if oauth2.iter().any(|(_, s)| *s) {
            if let Some((key, _)) = oauth2.iter().find(|(_, s)| !*s) {
                return Err(SettingError::Missing {
                    key: (*key).to_owned(),
                    reason: "oauth2_token_url, oauth2_client_id and oauth2_client_secret go \
                             together"
                        .into(),
                });
            }
            Target::parse(self.oauth2_token_url.as_deref().unwrap_or(""))
                .map_err(|why| SettingError::invalid("sink.http.oauth2_token_url", why))?;
        } else if self.oauth2_scope.is_some() {
            return Err(SettingError::invalid(
                "sink.http.oauth2_scope",
                "belongs to OAuth2 (oauth2_token_url), which is not set",
            ));
        }
        Ok(())
    }

    pub(super) fn prefix(&self) -> &str {
        self.headers_prefix
            .as_deref()
            .unwrap_or(DEFAULT_HEADERS_PREFIX)
    }

    pub(super) fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS))
    }

    /// An OpenSSL connector: `tls_ca_file` (else the system's trust store)
    /// and the client certificate. `system_too`: trust the system's store
    /// besides `tls_ca_file` (token endpoints, often public).
    pub(super) fn tls(&self, system_too: bool) -> Result<SslConnector, String> {
        crate::sink::tls::ClientTls {
            section: "sink.http",
            ca: self.tls_ca_file.as_deref(),
            client: self
                .tls_cert_file
                .as_deref()
                .zip(self.tls_key_file.as_deref()),
        }
        .connector(system_too)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str) -> HttpConfig {
        HttpConfig {
            url: url.into(),
            ..HttpConfig::default()
        }
    }

    fn err(c: &HttpConfig) -> String {
        c.validate().unwrap_err().to_string()
    }

    #[test]
    fn the_url_is_checked_by_key() {
        assert!(config("http://127.0.0.1:8080/events").validate().is_ok());
        assert!(config("https://[::1]/e?x=1").validate().is_ok());
        for bad in ["", "127.0.0.1:8080", "ftp://h/x", "http://u:p@h/x"] {
            assert!(err(&config(bad)).contains("sink.http.url"), "{bad}");
        }
    }

    #[test]
    fn settings_are_refused_by_key() {
        let with = |f: &dyn Fn(&mut HttpConfig)| {
            let mut c = config("http://h/e");
            f(&mut c);
            err(&c)
        };
        assert!(with(&|c| c.timeout_ms = Some(0)).contains("sink.http.timeout_ms"));
        assert!(with(&|c| c.retries = Some(0)).contains("sink.http.retries"));
        assert!(with(&|c| c.max_in_flight = Some(1000)).contains("sink.http.max_in_flight"));
        assert!(
            with(&|c| c.headers_prefix = Some("X DBZ".into())).contains("sink.http.headers_prefix")
        );
        assert!(with(&|c| c.tls_ca_file = Some("/ca.pem".into())).contains("sink.http.tls_ca_file"));
        assert!(with(&|c| c.user = Some("u".into())).contains("sink.http.password"));
        assert!(with(&|c| {
            c.user = Some("u".into());
            c.password = Some(Secret::new("p"));
            c.bearer_token = Some(Secret::new("t"));
        })
        .contains("sink.http.bearer_token"));
        assert!(
            with(&|c| c.jwt_url = Some("http://auth/".into())).contains("sink.http.jwt_username")
        );
        assert!(with(&|c| c.oauth2_scope = Some("s".into())).contains("sink.http.oauth2_scope"));
        assert!(
            with(&|c| c.webhook_secret = Some(Secret::new("whsec_c2hvcnQ=")))
                .contains("sink.http.webhook_secret")
        );
        assert!(with(&|c| {
            c.headers.insert("Content-Length".into(), Secret::new("1"));
        })
        .contains("sink.http.headers.\"Content-Length\""));
        assert!(with(&|c| {
            c.headers.insert("X-Ok".into(), Secret::new("a\nb"));
        })
        .contains("sink.http.headers.\"X-Ok\""));
        let mut c = config("https://h/e");
        c.tls_cert_file = Some("/c.pem".into());
        assert!(err(&c).contains("sink.http.tls_key_file"));
    }

    #[test]
    fn secrets_stay_out_of_debug() {
        let c = HttpConfig {
            url: "https://h/e".into(),
            user: Some("app".into()),
            password: Some(Secret::new("hunter2")),
            bearer_token: Some(Secret::new("tok-secret")),
            jwt_password: Some(Secret::new("jwt-secret")),
            oauth2_client_secret: Some(Secret::new("oauth-secret")),
            webhook_secret: Some(Secret::new("whsec-secret")),
            headers: [("X-Api-Key".to_owned(), Secret::new("api-secret"))].into(),
            ..HttpConfig::default()
        };
        let shown = format!("{c:?}");
        for secret in [
            "hunter2",
            "tok-secret",
            "jwt-secret",
            "oauth-secret",
            "whsec-secret",
            "api-secret",
        ] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(
            shown.contains("X-Api-Key") && shown.contains("app"),
            "{shown}"
        );
    }
}
