//! Secrets: passwords and keys that must never reach logs, `Debug` output,
//! error messages or metrics.
//!
//! Owns the [`Secret`] wrapper and the one rule that says which property
//! names hold secrets. It must never print a secret's value; the only way
//! to the value is [`Secret::expose`], called where it is handed to a
//! connection.

use std::fmt;

use serde::Deserialize;

/// A secret string: never shown by `Debug` or `Display`.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself; call only where it is handed to a connection.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// `url` with the user information before `@` in its authority, if any,
/// replaced by `<redacted>`.
pub fn redact_userinfo(url: &str) -> String {
    let authority = url.find("://").map_or(0, |i| i + 3);
    let end = url[authority..]
        .find('/')
        .map_or(url.len(), |i| authority + i);
    match url[authority..end].rfind('@') {
        Some(at) => format!("{}<redacted>{}", &url[..authority], &url[authority + at..]),
        None => url.to_owned(),
    }
}

/// Property names whose values are secrets.
pub fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    k.contains("password")
        || k.contains("secret")
        || k.contains("sasl.jaas")
        || k.ends_with(".key.pem")
}

#[cfg(test)]
mod tests {
    #[test]
    fn user_information_in_a_url_is_redacted() {
        assert_eq!(
            super::redact_userinfo("https://u:p@h:1/a@b"),
            "https://<redacted>@h:1/a@b"
        );
        assert_eq!(
            super::redact_userinfo("u:p@host:4222"),
            "<redacted>@host:4222"
        );
        assert_eq!(
            super::redact_userinfo("nats://host:4222"),
            "nats://host:4222"
        );
    }
}
