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

/// Property names whose values are secrets.
pub fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    k.contains("password")
        || k.contains("secret")
        || k.contains("sasl.jaas")
        || k.ends_with(".key.pem")
}
