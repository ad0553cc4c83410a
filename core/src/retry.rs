//! Whether trying again can help, carried by the error itself: a failure is
//! [`Retry::Transient`] (reconnect with backoff) or [`Retry::Definite`]
//! (stop, say why, exit non-zero). The class is decided where the failure
//! happens, where the code knows why (a SQLSTATE, an I/O error, a refusal),
//! and whoever chooses between reconnecting and stopping matches on it
//! instead of asking the error again.
//!
//! Owns only the shape. It knows no domain, never decides a class itself and
//! never changes what an error says: a `Retry` displays as the error it
//! carries and has the same causes.

use std::error::Error;
use std::fmt;

/// What a failure allows, for an error that records it beside its other
/// fields (a server error's SQLSTATE, judged when the error arrived).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Waiting and trying again can help.
    Transient,
    /// Trying again cannot help.
    Definite,
}

/// An error and whether trying again can help.
#[derive(Debug)]
pub enum Retry<E> {
    /// A lost connection, a server restarting, a resource taken for now:
    /// reconnect with backoff.
    Transient(E),
    /// A refusal, a missing capability, bad input or a broken invariant:
    /// stop and say why.
    Definite(E),
}

impl<E> Retry<E> {
    /// `error` as `class` says.
    pub fn new(class: Class, error: E) -> Self {
        match class {
            Class::Transient => Retry::Transient(error),
            Class::Definite => Retry::Definite(error),
        }
    }

    /// The class alone.
    pub fn class(&self) -> Class {
        match self {
            Retry::Transient(_) => Class::Transient,
            Retry::Definite(_) => Class::Definite,
        }
    }

    /// The error, whatever its class.
    pub fn get_ref(&self) -> &E {
        match self {
            Retry::Transient(e) | Retry::Definite(e) => e,
        }
    }

    /// The error, its class dropped.
    pub fn into_inner(self) -> E {
        match self {
            Retry::Transient(e) | Retry::Definite(e) => e,
        }
    }

    /// The error wrapped in an outer one, in the same class.
    pub fn map<F>(self, wrap: impl FnOnce(E) -> F) -> Retry<F> {
        match self {
            Retry::Transient(e) => Retry::Transient(wrap(e)),
            Retry::Definite(e) => Retry::Definite(wrap(e)),
        }
    }
}

impl<E: fmt::Display> fmt::Display for Retry<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.get_ref().fmt(f)
    }
}

impl<E: Error> Error for Retry<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.get_ref().source()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::DisplayChain;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn a_retry_says_what_its_error_says() {
        let e = Retry::Transient(Outer(std::io::Error::other("inner")));
        assert_eq!(e.to_string(), "outer");
        assert_eq!(DisplayChain(&e).to_string(), "outer: inner");
    }

    #[test]
    fn the_class_survives_wrapping() {
        let e = Retry::new(Class::Definite, std::io::Error::other("x")).map(Outer);
        assert!(matches!(e, Retry::Definite(Outer(_))));
        assert_eq!(e.class(), Class::Definite);
        let e = Retry::new(Class::Transient, 1).map(|n| n + 1);
        assert_eq!(e.class(), Class::Transient);
        assert_eq!(*e.get_ref(), 2);
        assert_eq!(e.into_inner(), 2);
    }
}
