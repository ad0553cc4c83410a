//! Where the static build finds the platform's CA certificates.
//!
//! The OpenSSL compiled into the static binary (feature `static`) looks for
//! its default CA file and directory under its own build prefix
//! (`/usr/local/ssl`), which no distribution fills. So, at start and only
//! in that build, when neither `SSL_CERT_FILE` nor `SSL_CERT_DIR` names an
//! existing path, walrelay looks for the platform's bundle where the
//! distributions keep it (the `openssl-probe` crate's list: Debian's
//! `/etc/ssl/certs/ca-certificates.crt`, Red Hat's, Alpine's, SUSE's, ...)
//! and sets those two variables, which OpenSSL, librdkafka's default
//! verify paths and the rustls clients' native roots all read. The image
//! sets `SSL_CERT_FILE` itself. A dynamic build uses the system's OpenSSL,
//! which knows its own paths, and is left alone.

/// Sets `SSL_CERT_FILE`/`SSL_CERT_DIR` for the static build (see the
/// module's documentation). Must run first in `main`, before any thread
/// exists: it changes the process's environment.
pub fn find_ca_certificates() {
    #[cfg(feature = "static")]
    set_from_probe();
}

/// The static build's part of [`find_ca_certificates`].
#[cfg(feature = "static")]
fn set_from_probe() {
    if openssl_probe::has_ssl_cert_env_vars() {
        return;
    }
    let found = openssl_probe::probe();
    if let Some(file) = &found.cert_file {
        std::env::set_var("SSL_CERT_FILE", file);
    }
    if !found.cert_dir.is_empty() {
        if let Ok(dirs) = std::env::join_paths(&found.cert_dir) {
            std::env::set_var("SSL_CERT_DIR", dirs);
        }
    }
}
