//! Error chains for people: an error and every `source()` under it on one
//! line, as logs and command-line messages show them.
//!
//! Owns only the formatting. It knows nothing of walrelay's domain and must
//! never add words of its own to what the errors say (a message may be
//! matched by operators' alerting).

/// Formats an error with its whole `source()` chain: `a: b: c`.
pub struct DisplayChain<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for DisplayChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cur = self.0.source();
        while let Some(e) = cur {
            write!(f, ": {e}")?;
            cur = e.source();
        }
        Ok(())
    }
}
