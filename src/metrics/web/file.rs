//! The web configuration file as Prometheus exporters read it
//! (`--web.config.file`, the exporter-toolkit's format): its YAML keys,
//! their defaults, and the checks that need nothing but the file itself.
//!
//! Owns the shape of the file: every key of the format is here, each with
//! the toolkit's default, and any other key is refused by name
//! (`deny_unknown_fields`, as the toolkit's strict YAML reading). Relative
//! paths are taken from the file's directory, as the toolkit does. It never
//! opens the files the keys name (`tls` does) and never shows a secret:
//! the inline key and the password hashes are [`Secret`]s.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::secret::Secret;

use super::WebConfigError;

/// The headers the toolkit lets a file add to every answer, with the
/// values it accepts (none listed: any value). The toolkit keeps the list
/// closed on purpose, for the same behaviour in every exporter.
pub(super) const ALLOWED_HEADERS: &[(&str, &[&str])] = &[
    ("Strict-Transport-Security", &[]),
    ("X-Content-Type-Options", &["nosniff"]),
    ("X-Frame-Options", &["deny", "sameorigin"]),
    ("X-XSS-Protection", &[]),
    ("Content-Security-Policy", &[]),
];

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WebFile {
    /// TLS; absent (or without a certificate, key, CA or client auth
    /// type) the listener speaks plain HTTP, as the toolkit's.
    #[serde(default)]
    pub(super) tls_server_config: Option<TlsServerConfig>,
    /// HTTP/2 and the extra headers.
    #[serde(default)]
    pub(super) http_server_config: HttpServerConfig,
    /// User name to bcrypt hash; empty: no basic auth.
    #[serde(default)]
    pub(super) basic_auth_users: BTreeMap<String, Secret>,
    /// A token bucket in front of every request.
    #[serde(default)]
    pub(super) rate_limit: Option<RateLimit>,
}

/// `tls_server_config`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TlsServerConfig {
    /// The server's certificate chain, inline PEM.
    #[serde(default)]
    pub(super) cert: Option<String>,
    /// The server's private key, inline PEM.
    #[serde(default)]
    pub(super) key: Option<Secret>,
    /// The CAs of client certificates, inline PEM.
    #[serde(default)]
    pub(super) client_ca: Option<String>,
    /// The server's certificate chain, a PEM file.
    #[serde(default)]
    pub(super) cert_file: Option<PathBuf>,
    /// The server's private key, a PEM file.
    #[serde(default)]
    pub(super) key_file: Option<PathBuf>,
    /// Go's `tls.ClientAuthType` by name; `NoClientCert` when unset.
    #[serde(default)]
    pub(super) client_auth_type: Option<String>,
    /// The CAs of client certificates, a PEM file.
    #[serde(default)]
    pub(super) client_ca_file: Option<PathBuf>,
    /// Go's cipher suite names (TLS 1.0 to 1.2; TLS 1.3's are accepted and
    /// left alone, as in Go).
    #[serde(default)]
    pub(super) cipher_suites: Option<Vec<String>>,
    /// Go's curve names, in preference order.
    #[serde(default)]
    pub(super) curve_preferences: Option<Vec<String>>,
    /// `TLS10` .. `TLS13`; `TLS12` when unset.
    #[serde(default)]
    pub(super) min_version: Option<String>,
    /// `TLS10` .. `TLS13`; `TLS13` when unset.
    #[serde(default)]
    pub(super) max_version: Option<String>,
    /// The server's order of `cipher_suites` wins; true when unset.
    #[serde(default)]
    pub(super) prefer_server_cipher_suites: Option<bool>,
    /// A client certificate must carry one of these SANs, exactly.
    #[serde(default)]
    pub(super) client_allowed_sans: Option<Vec<String>>,
}

impl TlsServerConfig {
    /// Whether the section asks for TLS at all: the toolkit's
    /// `IsEnabled` (a certificate, key, client CA or client auth type).
    pub(super) fn is_enabled(&self) -> bool {
        let set = |s: &Option<String>| s.as_deref().is_some_and(|s| !s.is_empty());
        let path = |p: &Option<PathBuf>| p.as_ref().is_some_and(|p| !p.as_os_str().is_empty());
        set(&self.cert)
            || self.key.as_ref().is_some_and(|k| !k.expose().is_empty())
            || set(&self.client_ca)
            || path(&self.cert_file)
            || path(&self.key_file)
            || path(&self.client_ca_file)
            || set(&self.client_auth_type)
    }

    /// Relative paths made relative to `dir` (the file's directory), as
    /// the toolkit's `SetDirectory`.
    pub(super) fn set_directory(&mut self, dir: &Path) {
        for path in [
            &mut self.cert_file,
            &mut self.key_file,
            &mut self.client_ca_file,
        ]
        .into_iter()
        .flatten()
        {
            if !path.as_os_str().is_empty() && path.is_relative() {
                *path = dir.join(&*path);
            }
        }
    }
}

/// `http_server_config`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HttpServerConfig {
    /// Offer HTTP/2 through ALPN (TLS only).
    #[serde(default = "default_http2")]
    pub(super) http2: bool,
    /// Extra response headers, only those of [`ALLOWED_HEADERS`].
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
}

impl Default for HttpServerConfig {
    fn default() -> Self {
        HttpServerConfig {
            http2: default_http2(),
            headers: BTreeMap::new(),
        }
    }
}

fn default_http2() -> bool {
    true
}

/// `rate_limit`: Go's `rate.NewLimiter(rate.Every(interval), burst)`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RateLimit {
    /// Time between two requests, a Go duration (`1s`, `250ms`); 0
    /// disables the limiter.
    #[serde(default)]
    pub(super) interval: Option<GoDuration>,
    /// Requests allowed at once.
    #[serde(default)]
    pub(super) burst: u32,
}

/// A Go `time.Duration` in YAML: a string Go's `ParseDuration` reads, or
/// an integer of nanoseconds.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum GoDuration {
    /// Nanoseconds.
    Nanos(i64),
    /// `1m30s`, `250ms`, ...
    Text(String),
}

/// Reads `text`, the file at `path`: the keys, with the file's directory
/// applied to relative paths, and the headers checked.
pub(super) fn parse(text: &str, path: &Path) -> Result<WebFile, WebConfigError> {
    let mut file: WebFile = if text.trim().is_empty() {
        WebFile::default()
    } else {
        serde_saphyr::from_str(text).map_err(|e| WebConfigError::Parse {
            path: path.to_owned(),
            message: e.to_string(),
        })?
    };
    let dir = path.parent().unwrap_or_else(|| Path::new(""));
    if let Some(tls) = file.tls_server_config.as_mut() {
        tls.set_directory(dir);
    }
    check_headers(&file.http_server_config.headers).map_err(|(key, reason)| {
        WebConfigError::Invalid {
            path: path.to_owned(),
            key,
            reason,
        }
    })?;
    Ok(file)
}

/// The toolkit's `validateHeaderConfig`: only the allowed headers, and of
/// those with a closed set of values, one of them.
fn check_headers(headers: &BTreeMap<String, String>) -> Result<(), (String, String)> {
    for (name, value) in headers {
        let key = format!("http_server_config.headers.{name}");
        let Some((_, values)) = ALLOWED_HEADERS.iter().find(|(n, _)| n == name) else {
            let allowed: Vec<&str> = ALLOWED_HEADERS.iter().map(|(n, _)| *n).collect();
            return Err((
                key,
                format!(
                    "this header can not be configured; the format allows {}",
                    allowed.join(", ")
                ),
            ));
        };
        if !values.is_empty() && !value.is_empty() && !values.contains(&value.as_str()) {
            return Err((key, format!("{value:?} is not one of {values:?}")));
        }
    }
    Ok(())
}

/// A Go duration: `ParseDuration`'s syntax (a sign, then decimal numbers
/// each with a unit of `ns`, `us`, `µs`, `ms`, `s`, `m`, `h`; `0` alone),
/// in nanoseconds.
pub(super) fn go_duration_nanos(text: &str) -> Option<i128> {
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += number * scale;
    }
    let nanos = total.round() as i128;
    Some(if negative { -nanos } else { nanos })
}
