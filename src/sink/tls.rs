//! The TLS client side the brokers that connect themselves share (HTTP,
//! NATS): an OpenSSL connector from a section's CA file (else the system's
//! trust store) and client certificate, and the handshake on a TCP
//! stream. OpenSSL is linked already (PostgreSQL's TLS), so no second TLS
//! stack is added.

use std::path::Path;
use std::pin::Pin;

use openssl::ssl::{SslConnector, SslFiletype, SslMethod};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_openssl::SslStream;

/// A section's TLS files, named by the section's keys in errors.
pub(crate) struct ClientTls<'a> {
    /// The section, e.g. `sink.http`.
    pub(crate) section: &'a str,
    /// `tls_ca_file`: CA certificates (PEM) that sign the server's.
    pub(crate) ca: Option<&'a Path>,
    /// `tls_cert_file` and `tls_key_file`: the client's certificate.
    pub(crate) client: Option<(&'a Path, &'a Path)>,
}

impl ClientTls<'_> {
    /// The connector: `ca` (else the system's trust store) and the client
    /// certificate. `system_too`: trust the system's store besides `ca`
    /// (token endpoints, often public).
    pub(crate) fn connector(&self, system_too: bool) -> Result<SslConnector, String> {
        let s = self.section;
        let e = |what: &str, err: openssl::error::ErrorStack| format!("{what}: {err}");
        let mut b = SslConnector::builder(SslMethod::tls_client()).map_err(|x| e("TLS", x))?;
        if system_too || self.ca.is_none() {
            b.set_default_verify_paths()
                .map_err(|x| e("the system's trust store", x))?;
        }
        if let Some(ca) = self.ca {
            b.set_ca_file(ca)
                .map_err(|x| e(&format!("{s}.tls_ca_file {}", ca.display()), x))?;
        }
        if let Some((cert, key)) = self.client {
            b.set_certificate_chain_file(cert)
                .map_err(|x| e(&format!("{s}.tls_cert_file {}", cert.display()), x))?;
            b.set_private_key_file(key, SslFiletype::PEM)
                .map_err(|x| e(&format!("{s}.tls_key_file {}", key.display()), x))?;
            b.check_private_key()
                .map_err(|x| e(&format!("{s}.tls_key_file does not match tls_cert_file"), x))?;
        }
        Ok(b.build())
    }
}

/// The TLS handshake on `io` with `host` (its name checked against the
/// certificate); `origin` names the server in errors.
pub(crate) async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(
    connector: &SslConnector,
    host: &str,
    io: S,
    origin: &str,
) -> Result<SslStream<S>, String> {
    let ssl = connector
        .configure()
        .and_then(|c| c.into_ssl(host))
        .map_err(|e| format!("TLS to {origin}: {e}"))?;
    let mut stream = SslStream::new(ssl, io).map_err(|e| format!("TLS to {origin}: {e}"))?;
    if let Err(e) = Pin::new(&mut stream).connect().await {
        let verdict = stream.ssl().verify_result();
        return Err(format!(
            "TLS handshake with {origin} failed: {e} (certificate verification: {})",
            verdict.error_string()
        ));
    }
    Ok(stream)
}
