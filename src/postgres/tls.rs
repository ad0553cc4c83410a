//! TLS to PostgreSQL with libpq's semantics: `sslmode`, `sslrootcert`,
//! `sslcert`/`sslkey` and the `tls-server-end-point` channel binding data
//! SCRAM-SHA-256-PLUS needs.
//!
//! Owns turning the `[postgres]` TLS settings into an OpenSSL connector and
//! upgrading a socket after the server accepted an SSLRequest. It never
//! sends protocol messages and never sees passwords other than the key
//! passphrase, which it hands to OpenSSL only.

use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use openssl::error::ErrorStack;
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use openssl::ssl::{SslConnector, SslConnectorBuilder, SslMethod, SslVerifyMode};
use openssl::x509::{X509Ref, X509VerifyResult, X509};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_openssl::SslStream;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};

use crate::retry::Retry;
use crate::secret::Secret;

use crate::postgres::config::{ChannelBindingMode, PostgresConfig, SslMode};

/// What the server certificate is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verify {
    /// Nothing: encryption only (libpq's `prefer`/`require` without a root
    /// certificate).
    None,
    /// The chain against the root certificate.
    Ca,
    /// The chain and the host name or address.
    Full,
}

/// Where the trusted CA certificates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RootCert {
    /// A PEM file.
    File(PathBuf),
    /// The system's default trust store (`sslrootcert=system`).
    System,
}

/// The TLS half of the connection parameters, resolved from the config
/// (libpq's default files under `~/.postgresql` included).
#[derive(Clone)]
pub struct TlsParams {
    /// libpq's `sslmode`.
    pub(crate) mode: SslMode,
    /// Trusted CAs, if any.
    pub(crate) rootcert: Option<RootCert>,
    /// Client certificate and its key, if any.
    pub(crate) client_cert: Option<(PathBuf, PathBuf)>,
    /// Passphrase of an encrypted key.
    pub(crate) key_password: Option<Secret>,
    /// libpq's `channel_binding`.
    pub(crate) channel_binding: ChannelBindingMode,
}

impl std::fmt::Debug for TlsParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsParams")
            .field("mode", &self.mode)
            .field("rootcert", &self.rootcert)
            .field("client_cert", &self.client_cert)
            .field("key_password", &self.key_password)
            .field("channel_binding", &self.channel_binding)
            .finish()
    }
}

impl Default for TlsParams {
    /// No TLS at all (for tests and tools that talk to a local server).
    fn default() -> Self {
        TlsParams {
            mode: SslMode::Disable,
            rootcert: None,
            client_cert: None,
            key_password: None,
            channel_binding: ChannelBindingMode::Prefer,
        }
    }
}

/// Errors of TLS setup and handshakes; each names the setting or file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A configured file cannot be read.
    #[error("cannot read {key} file {path}")]
    ReadFile {
        /// The config key.
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// The operating system's reason (not found, permission, ...).
        #[source]
        source: std::io::Error,
    },
    /// A configured file is not what the key needs.
    #[error("{key} file {path} is not usable: {reason}")]
    BadFile {
        /// The config key.
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The private key may be read by others (libpq refuses it too).
    #[error(
        "postgres.sslkey file {path} has group or world access (mode {mode:o}); chmod 0600 it"
    )]
    KeyPermissions {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Verification needs a root certificate and none is configured.
    #[error("postgres.sslmode = \"{mode}\" verifies the server certificate, but no postgres.sslrootcert is set and ~/.postgresql/root.crt does not exist")]
    NoRootCert {
        /// The `postgres.sslmode` in force (`require`, `verify-ca`, ...).
        mode: &'static str,
    },
    /// OpenSSL refused the setup.
    #[error("cannot set up tls")]
    Setup(#[source] ErrorStack),
    /// The server answered the SSLRequest with no.
    #[error(
        "the server at {addr} does not accept tls, which postgres.sslmode = \"{mode}\" requires"
    )]
    Refused {
        /// `host:port`.
        addr: String,
        /// The `postgres.sslmode` in force (`require`, `verify-ca`, ...).
        mode: &'static str,
    },
    /// The server certificate failed verification.
    #[error("the tls certificate of the server at {addr} failed verification: {reason} (postgres.sslmode = \"{mode}\", checked against {against})")]
    Verification {
        /// `host:port`.
        addr: String,
        /// OpenSSL's verdict, e.g. `hostname mismatch`.
        reason: String,
        /// The `postgres.sslmode` in force (`require`, `verify-ca`, ...).
        mode: &'static str,
        /// The root certificate used.
        against: String,
    },
    /// The handshake failed for another reason (a protocol the two sides
    /// do not share, an alert from the server).
    #[error("tls handshake with {addr} failed")]
    Handshake {
        /// `host:port`.
        addr: String,
        /// OpenSSL's error.
        #[source]
        source: openssl::ssl::Error,
    },
    /// The network broke the handshake (a reset or closed socket): the one
    /// TLS failure that trying again can fix.
    #[error("tls handshake with {addr} failed")]
    HandshakeLost {
        /// `host:port`.
        addr: String,
        /// OpenSSL's error, carrying the socket's.
        #[source]
        source: openssl::ssl::Error,
    },
}

/// Certificates and settings do not fix themselves; a broken network may.
impl From<TlsError> for Retry<TlsError> {
    fn from(e: TlsError) -> Self {
        match e {
            e @ TlsError::HandshakeLost { .. } => Retry::Transient(e),
            e @ (TlsError::ReadFile { .. }
            | TlsError::BadFile { .. }
            | TlsError::KeyPermissions { .. }
            | TlsError::NoRootCert { .. }
            | TlsError::Setup(_)
            | TlsError::Refused { .. }
            | TlsError::Verification { .. }
            | TlsError::Handshake { .. }) => Retry::Definite(e),
        }
    }
}

fn home_file(name: &str) -> Option<PathBuf> {
    let home = std::env::var_os("HOME")?;
    let path = Path::new(&home).join(".postgresql").join(name);
    path.is_file().then_some(path)
}

impl TlsParams {
    /// The TLS settings of `[postgres]`, with libpq's defaults for unset
    /// files (`~/.postgresql/root.crt`, `postgresql.crt`, `postgresql.key`).
    pub(crate) fn from_config(pg: &PostgresConfig) -> TlsParams {
        let rootcert = match pg.sslrootcert.as_deref() {
            Some("system") => Some(RootCert::System),
            Some(path) => Some(RootCert::File(PathBuf::from(path))),
            None => home_file("root.crt").map(RootCert::File),
        };
        let client_cert = match (&pg.sslcert, &pg.sslkey) {
            (Some(c), Some(k)) => Some((c.clone(), k.clone())),
            _ => home_file("postgresql.crt").zip(home_file("postgresql.key")),
        };
        TlsParams {
            mode: pg.sslmode,
            rootcert,
            client_cert,
            key_password: pg.sslpassword.clone(),
            channel_binding: pg.channel_binding,
        }
    }

    /// What the server certificate is checked against: libpq verifies the
    /// chain in every TLS mode once a root certificate exists.
    pub(crate) fn verify(&self) -> Verify {
        match self.mode {
            SslMode::VerifyFull => Verify::Full,
            SslMode::VerifyCa => Verify::Ca,
            _ if self.rootcert.is_some() => Verify::Ca,
            _ => Verify::None,
        }
    }

    fn against(&self) -> String {
        match &self.rootcert {
            Some(RootCert::File(p)) => p.display().to_string(),
            Some(RootCert::System) => "the system trust store".into(),
            None => "nothing".into(),
        }
    }

    /// The OpenSSL connector for these settings, files read now (so a
    /// rotated certificate is picked up at the next connect). `None` when
    /// `sslmode = disable`.
    pub(crate) fn connector(&self) -> Result<Option<SslConnector>, TlsError> {
        if self.mode == SslMode::Disable {
            return Ok(None);
        }
        let mut builder =
            SslConnector::builder(SslMethod::tls_client()).map_err(TlsError::Setup)?;
        match self.verify() {
            Verify::None => builder.set_verify(SslVerifyMode::NONE),
            Verify::Ca | Verify::Full => {
                builder.set_verify(SslVerifyMode::PEER);
                match &self.rootcert {
                    Some(RootCert::File(path)) => load_root(&mut builder, path)?,
                    Some(RootCert::System) => {
                        builder
                            .set_default_verify_paths()
                            .map_err(TlsError::Setup)?;
                    }
                    None => {
                        return Err(TlsError::NoRootCert {
                            mode: self.mode.as_str(),
                        })
                    }
                }
            }
        }
        if let Some((cert, key)) = &self.client_cert {
            load_client_cert(&mut builder, cert, key, self.key_password.as_ref())?;
        }
        Ok(Some(builder.build()))
    }

    /// Upgrades `tcp` (after the server answered `S` to an SSLRequest) and
    /// returns the stream with its `tls-server-end-point` data.
    pub(crate) async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        connector: &SslConnector,
        host: &str,
        addr: &str,
        tcp: S,
    ) -> Result<(SslStream<S>, Option<Vec<u8>>), TlsError> {
        let mut config = connector.configure().map_err(TlsError::Setup)?;
        config.set_verify_hostname(self.verify() == Verify::Full);
        // SNI only for names, as libpq does.
        config.set_use_server_name_indication(host.parse::<IpAddr>().is_err());
        let ssl = config.into_ssl(host).map_err(TlsError::Setup)?;
        let mut stream = SslStream::new(ssl, tcp).map_err(TlsError::Setup)?;
        if let Err(source) = Pin::new(&mut stream).connect().await {
            let verdict = stream.ssl().verify_result();
            if verdict != X509VerifyResult::OK {
                return Err(TlsError::Verification {
                    addr: addr.to_owned(),
                    reason: verdict.error_string().to_owned(),
                    mode: self.mode.as_str(),
                    against: self.against(),
                });
            }
            let addr = addr.to_owned();
            let lost = source.io_error().is_some();
            return Err(if lost {
                TlsError::HandshakeLost { addr, source }
            } else {
                TlsError::Handshake { addr, source }
            });
        }
        let binding = stream
            .ssl()
            .peer_certificate()
            .and_then(|c| tls_server_end_point(&c));
        Ok((stream, binding))
    }
}

/// tokio-postgres's TLS hook with the same settings, verification and
/// errors as the replication connection.
pub(crate) struct MakeTls {
    params: TlsParams,
    connector: SslConnector,
    addr: String,
}

impl MakeTls {
    /// For connections to `addr` (`host:port`, used in errors).
    pub(crate) fn new(params: TlsParams, connector: SslConnector, addr: String) -> Self {
        MakeTls {
            params,
            connector,
            addr,
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> MakeTlsConnect<S> for MakeTls {
    type Stream = TlsStream<S>;
    type TlsConnect = Connect;
    type Error = TlsError;

    fn make_tls_connect(&mut self, host: &str) -> Result<Connect, TlsError> {
        Ok(Connect {
            params: self.params.clone(),
            connector: self.connector.clone(),
            host: host.to_owned(),
            addr: self.addr.clone(),
        })
    }
}

/// One pending handshake of a tokio-postgres connection.
pub(crate) struct Connect {
    params: TlsParams,
    connector: SslConnector,
    host: String,
    addr: String,
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> TlsConnect<S> for Connect {
    type Stream = TlsStream<S>;
    type Error = TlsError;
    type Future = Pin<Box<dyn Future<Output = Result<TlsStream<S>, TlsError>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let (inner, binding) = self
                .params
                .handshake(&self.connector, &self.host, &self.addr, stream)
                .await?;
            Ok(TlsStream { inner, binding })
        })
    }
}

/// A TLS stream of a tokio-postgres connection, with its channel binding
/// data.
pub(crate) struct TlsStream<S> {
    inner: SslStream<S>,
    binding: Option<Vec<u8>>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for TlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for TlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> tokio_postgres::tls::TlsStream for TlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        match &self.binding {
            Some(data) => ChannelBinding::tls_server_end_point(data.clone()),
            None => ChannelBinding::none(),
        }
    }
}

fn load_root(builder: &mut SslConnectorBuilder, path: &Path) -> Result<(), TlsError> {
    const KEY: &str = "postgres.sslrootcert";
    let pem = std::fs::read(path).map_err(|source| TlsError::ReadFile {
        key: KEY,
        path: path.to_owned(),
        source,
    })?;
    let certs = X509::stack_from_pem(&pem).map_err(|_| TlsError::BadFile {
        key: KEY,
        path: path.to_owned(),
        reason: "not a PEM certificate file".into(),
    })?;
    if certs.is_empty() {
        return Err(TlsError::BadFile {
            key: KEY,
            path: path.to_owned(),
            reason: "it holds no PEM certificate".into(),
        });
    }
    let store = builder.cert_store_mut();
    for cert in certs {
        store.add_cert(cert).map_err(TlsError::Setup)?;
    }
    Ok(())
}

fn load_client_cert(
    builder: &mut SslConnectorBuilder,
    cert_path: &Path,
    key_path: &Path,
    password: Option<&Secret>,
) -> Result<(), TlsError> {
    let pem = std::fs::read(cert_path).map_err(|source| TlsError::ReadFile {
        key: "postgres.sslcert",
        path: cert_path.to_owned(),
        source,
    })?;
    let chain = X509::stack_from_pem(&pem).unwrap_or_default();
    let mut chain = chain.into_iter();
    let leaf = chain.next().ok_or_else(|| TlsError::BadFile {
        key: "postgres.sslcert",
        path: cert_path.to_owned(),
        reason: "it holds no PEM certificate".into(),
    })?;
    builder.set_certificate(&leaf).map_err(TlsError::Setup)?;
    for intermediate in chain {
        builder
            .add_extra_chain_cert(intermediate)
            .map_err(TlsError::Setup)?;
    }
    let key = load_key(key_path, password)?;
    builder.set_private_key(&key).map_err(TlsError::Setup)?;
    builder.check_private_key().map_err(|_| TlsError::BadFile {
        key: "postgres.sslkey",
        path: key_path.to_owned(),
        reason: format!(
            "it is not the private key of the certificate in {}",
            cert_path.display()
        ),
    })?;
    Ok(())
}

fn load_key(path: &Path, password: Option<&Secret>) -> Result<PKey<Private>, TlsError> {
    const KEY: &str = "postgres.sslkey";
    let file = std::fs::File::open(path).map_err(|source| TlsError::ReadFile {
        key: KEY,
        path: path.to_owned(),
        source,
    })?;
    check_key_permissions(path, &file)?;
    let bytes = std::fs::read(path).map_err(|source| TlsError::ReadFile {
        key: KEY,
        path: path.to_owned(),
        source,
    })?;
    let pass = password.map(|p| p.expose().as_bytes());
    let is_pem = bytes.trim_ascii_start().starts_with(b"-----BEGIN");
    let parsed = match (is_pem, pass) {
        (true, Some(p)) => PKey::private_key_from_pem_passphrase(&bytes, p),
        // An empty passphrase callback: an encrypted key fails instead of
        // OpenSSL prompting on the terminal.
        (true, None) => PKey::private_key_from_pem_callback(&bytes, |_| Ok(0)),
        (false, Some(p)) => PKey::private_key_from_pkcs8_passphrase(&bytes, p),
        (false, None) => PKey::private_key_from_der(&bytes),
    };
    parsed.map_err(|_| TlsError::BadFile {
        key: KEY,
        path: path.to_owned(),
        reason: if bytes.windows(9).any(|w| w == b"ENCRYPTED") || (!is_pem && pass.is_none()) {
            "cannot read the private key (encrypted without postgres.sslpassword, a wrong passphrase, or not a PEM/DER key)".into()
        } else {
            "cannot read the private key (a wrong postgres.sslpassword, or not a PEM/DER key)".into()
        },
    })
}

#[cfg(unix)]
fn check_key_permissions(path: &Path, file: &std::fs::File) -> Result<(), TlsError> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata().map_err(|source| TlsError::ReadFile {
        key: "postgres.sslkey",
        path: path.to_owned(),
        source,
    })?;
    let mode = meta.mode() & 0o777;
    // libpq's rule: 0600 or stricter, or 0640 when owned by root (a key
    // managed by the system, shared with a group).
    let ok = if meta.uid() == 0 {
        mode & 0o037 == 0
    } else {
        mode & 0o077 == 0
    };
    if ok {
        Ok(())
    } else {
        Err(TlsError::KeyPermissions {
            path: path.to_owned(),
            mode,
        })
    }
}

#[cfg(not(unix))]
fn check_key_permissions(_path: &Path, _file: &std::fs::File) -> Result<(), TlsError> {
    Ok(())
}

/// RFC 5929 `tls-server-end-point`: the server certificate hashed with its
/// signature's digest, SHA-256 when that is MD5 or SHA-1.
pub(crate) fn tls_server_end_point(cert: &X509Ref) -> Option<Vec<u8>> {
    let algorithms = cert
        .signature_algorithm()
        .object()
        .nid()
        .signature_algorithms()?;
    let digest = match algorithms.digest {
        Nid::MD5 | Nid::SHA1 => MessageDigest::sha256(),
        nid => MessageDigest::from_nid(nid)?,
    };
    cert.digest(digest).ok().map(|d| d.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(mode: SslMode, root: bool) -> TlsParams {
        TlsParams {
            mode,
            rootcert: root.then(|| RootCert::File("/nonexistent/root.crt".into())),
            ..TlsParams::default()
        }
    }

    #[test]
    fn verification_follows_libpq() {
        assert_eq!(params(SslMode::Prefer, false).verify(), Verify::None);
        assert_eq!(params(SslMode::Require, false).verify(), Verify::None);
        // A root certificate makes require (and prefer) verify the chain.
        assert_eq!(params(SslMode::Require, true).verify(), Verify::Ca);
        assert_eq!(params(SslMode::Prefer, true).verify(), Verify::Ca);
        assert_eq!(params(SslMode::VerifyCa, true).verify(), Verify::Ca);
        assert_eq!(params(SslMode::VerifyFull, true).verify(), Verify::Full);
    }

    #[test]
    fn disable_builds_no_connector() {
        assert!(params(SslMode::Disable, true)
            .connector()
            .unwrap()
            .is_none());
    }

    #[test]
    fn verify_without_root_is_refused() {
        let err = params(SslMode::VerifyFull, false).connector().unwrap_err();
        assert!(err.to_string().contains("postgres.sslrootcert"), "{err}");
    }

    #[test]
    fn missing_root_file_names_the_key() {
        let err = params(SslMode::VerifyCa, true).connector().unwrap_err();
        assert!(
            err.to_string()
                .contains("postgres.sslrootcert file /nonexistent/root.crt"),
            "{err}"
        );
    }

    #[test]
    fn key_password_is_redacted() {
        let p = TlsParams {
            key_password: Some(Secret::new("k3y-pass-phrase")),
            ..TlsParams::default()
        };
        assert!(!format!("{p:?}").contains("k3y-pass-phrase"));
    }
}
