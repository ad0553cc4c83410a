//! The error every stage's settings give when a value is unusable: the key,
//! as the user wrote it, and why.
//!
//! Owns only that shape, so that each stage can validate its own section
//! without knowing the configuration layer above it, and the configuration
//! layer can say which file and form the key came from. It must never carry
//! a value that may be a secret.

/// A bad setting, named by its key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingError {
    /// A value is present but unusable.
    #[error("invalid value for {key}: {reason}")]
    Invalid {
        /// The key, as the file spells it (`sink.http.url`).
        key: String,
        /// What is wrong with the value, worded to follow "invalid value
        /// for <key>: ".
        reason: String,
    },
    /// A required key is absent.
    #[error("{key} is required: {reason}")]
    Missing {
        /// The key, as the file spells it.
        key: String,
        /// Why it is needed or what to set.
        reason: String,
    },
}

impl SettingError {
    /// A value that is present but unusable.
    pub fn invalid(key: impl Into<String>, reason: impl Into<String>) -> Self {
        SettingError::Invalid {
            key: key.into(),
            reason: reason.into(),
        }
    }
}
