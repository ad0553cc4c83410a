//! Secure connections and secrets.

/// Passwords never in any output, log or metrics.
mod secrets;
/// TLS to PostgreSQL, SASL and SSL to Kafka.
mod tls;
