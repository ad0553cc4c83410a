//! The HTTPS listener's OpenSSL acceptor, from Connect's store keys:
//! PEM and PKCS12 key and trust stores (a JKS store is refused with the
//! `keytool` command that converts it), `ssl.client.auth`, and
//! `ssl.enabled.protocols`.
//!
//! Owns opening the store files. Errors name the key (with the prefix it
//! was read under), never a password.

use openssl::pkcs12::Pkcs12;
use openssl::pkey::{PKey, Private};
use openssl::ssl::{SslAcceptor, SslMethod, SslVerifyMode, SslVersion};
use openssl::x509::store::X509StoreBuilder;
use openssl::x509::X509;

use super::config::{ClientAuth, RestConfigError, TlsSettings};
use crate::metrics::web::tls::reasons;

/// A store's kind, by its type key or its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// PEM text.
    Pem,
    /// PKCS#12.
    Pkcs12,
    /// Java's own format, which OpenSSL cannot read.
    Jks,
}

/// Tells the kind of the store in `bytes` (`declared`: its type key).
fn kind(declared: Option<&str>, bytes: &[u8]) -> Option<Kind> {
    if bytes.starts_with(&[0xFE, 0xED, 0xFE, 0xED]) {
        return Some(Kind::Jks);
    }
    match declared.map(str::to_ascii_uppercase).as_deref() {
        Some("PEM") => return Some(Kind::Pem),
        Some("PKCS12") => return Some(Kind::Pkcs12),
        _ => {}
    }
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(0);
    if bytes[start..].starts_with(b"-----BEGIN") {
        Some(Kind::Pem)
    } else if bytes.first() == Some(&0x30) {
        Some(Kind::Pkcs12)
    } else {
        None
    }
}

/// The key, its certificate and the chain of the keystore.
type Identity = (PKey<Private>, X509, Vec<X509>);

/// Reads the keystore (`ssl.keystore.*`).
fn identity(t: &TlsSettings) -> Result<Identity, RestConfigError> {
    let key_name = format!("{}ssl.keystore.location", t.prefix);
    let err = |why: String| RestConfigError::new(&key_name, why);
    let (key_pem, chain_pem): (Vec<u8>, Vec<u8>) = match (&t.keystore_location, &t.keystore_key) {
        (Some(location), _) => {
            let bytes =
                std::fs::read(location).map_err(|e| err(format!("cannot read {location}: {e}")))?;
            match kind(t.keystore_type.as_deref(), &bytes) {
                Some(Kind::Pem) => (bytes.clone(), bytes),
                Some(Kind::Pkcs12) => return pkcs12_identity(&bytes, t).map_err(err),
                Some(Kind::Jks) => {
                    return Err(err(format!(
                        "{location} is a JKS keystore, which walrelay cannot read; convert it: keytool -importkeystore -srckeystore {location} -destkeystore {location}.p12 -deststoretype PKCS12"
                    )))
                }
                None => return Err(err(format!("cannot read {location} as a PEM, JKS or PKCS12 file"))),
            }
        }
        (None, Some(key)) => (
            key.expose().as_bytes().to_vec(),
            t.keystore_chain.clone().unwrap_or_default().into_bytes(),
        ),
        (None, None) => return Err(err("an HTTPS listener needs a keystore".into())),
    };
    let pkey = match &t.key_password {
        Some(pw) => PKey::private_key_from_pem_passphrase(&key_pem, pw.expose().as_bytes()),
        None => PKey::private_key_from_pem(&key_pem),
    }
    .map_err(|e| err(format!("cannot read the private key ({})", reasons(&e))))?;
    let mut certs = X509::stack_from_pem(&chain_pem)
        .map_err(|e| {
            err(format!(
                "cannot read the certificate chain ({})",
                reasons(&e)
            ))
        })?
        .into_iter();
    let cert = certs
        .next()
        .ok_or_else(|| err("no certificate in the keystore".into()))?;
    Ok((pkey, cert, certs.collect()))
}

/// The key and certificates of a PKCS12 keystore.
fn pkcs12_identity(bytes: &[u8], t: &TlsSettings) -> Result<Identity, String> {
    let password = t.keystore_password.as_ref().map_or("", |p| p.expose());
    let parsed = Pkcs12::from_der(bytes)
        .and_then(|p| p.parse2(password))
        .map_err(|e| {
            format!(
                "cannot open the PKCS12 keystore with {}ssl.keystore.password ({})",
                t.prefix,
                reasons(&e)
            )
        })?;
    let key = parsed
        .pkey
        .ok_or("the PKCS12 keystore holds no private key")?;
    let cert = parsed
        .cert
        .ok_or("the PKCS12 keystore holds no certificate")?;
    let chain = parsed
        .ca
        .map(|s| s.into_iter().collect())
        .unwrap_or_default();
    Ok((key, cert, chain))
}

/// The truststore's certificates (`ssl.truststore.*`).
fn trusted(t: &TlsSettings) -> Result<Vec<X509>, RestConfigError> {
    let key_name = format!("{}ssl.truststore.location", t.prefix);
    let err = |why: String| RestConfigError::new(&key_name, why);
    let mut out = Vec::new();
    if let Some(pem) = &t.truststore_certificates {
        out.extend(X509::stack_from_pem(pem.as_bytes()).map_err(|e| err(reasons(&e)))?);
    }
    let Some(location) = &t.truststore_location else {
        return Ok(out);
    };
    let bytes = std::fs::read(location).map_err(|e| err(format!("cannot read {location}: {e}")))?;
    match kind(t.truststore_type.as_deref(), &bytes) {
        Some(Kind::Pem) => out.extend(X509::stack_from_pem(&bytes).map_err(|e| err(reasons(&e)))?),
        Some(Kind::Pkcs12) => {
            let pw = t.truststore_password.as_ref().map_or("", |p| p.expose());
            let p = Pkcs12::from_der(&bytes).and_then(|p| p.parse2(pw)).map_err(|e| {
                err(format!(
                    "cannot open the PKCS12 truststore with {}ssl.truststore.password ({})",
                    t.prefix,
                    reasons(&e)
                ))
            })?;
            out.extend(p.cert);
            out.extend(p.ca.into_iter().flatten());
        }
        Some(Kind::Jks) => {
            return Err(err(format!(
                "{location} is a JKS truststore, which walrelay cannot read; convert it: keytool -importkeystore -srckeystore {location} -destkeystore {location}.p12 -deststoretype PKCS12"
            )))
        }
        None => return Err(err(format!("cannot read {location} as a PEM, JKS or PKCS12 file"))),
    }
    Ok(out)
}

/// The lowest and highest of `ssl.enabled.protocols` (Kafka's default:
/// TLSv1.2 and TLSv1.3).
fn versions(t: &TlsSettings) -> Result<(SslVersion, SslVersion), RestConfigError> {
    let mut seen = Vec::new();
    for p in &t.enabled_protocols {
        seen.push(match p.as_str() {
            "TLSv1.2" => 2,
            "TLSv1.3" => 3,
            "TLSv1.1" => 1,
            _ => {
                return Err(RestConfigError::new(
                    &format!("{}ssl.enabled.protocols", t.prefix),
                    format!("unknown protocol {p}"),
                ))
            }
        });
    }
    let v = |n| match n {
        1 => SslVersion::TLS1_1,
        2 => SslVersion::TLS1_2,
        _ => SslVersion::TLS1_3,
    };
    Ok((
        v(seen.iter().copied().min().unwrap_or(2)),
        v(seen.iter().copied().max().unwrap_or(3)),
    ))
}

/// The acceptor of the HTTPS listeners.
pub(crate) fn acceptor(t: &TlsSettings) -> Result<SslAcceptor, RestConfigError> {
    let (key, cert, chain) = identity(t)?;
    let ssl_err = |e: openssl::error::ErrorStack| {
        RestConfigError::new(&format!("{}ssl.keystore.location", t.prefix), reasons(&e))
    };
    let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server()).map_err(ssl_err)?;
    b.set_private_key(&key).map_err(ssl_err)?;
    b.set_certificate(&cert).map_err(ssl_err)?;
    for c in chain {
        b.add_extra_chain_cert(c).map_err(ssl_err)?;
    }
    b.check_private_key().map_err(ssl_err)?;
    let (min, max) = versions(t)?;
    b.set_min_proto_version(Some(min)).map_err(ssl_err)?;
    b.set_max_proto_version(Some(max)).map_err(ssl_err)?;
    let trust = trusted(t)?;
    if !trust.is_empty() {
        let mut store = X509StoreBuilder::new().map_err(ssl_err)?;
        for c in trust {
            store.add_cert(c).map_err(ssl_err)?;
        }
        b.set_verify_cert_store(store.build()).map_err(ssl_err)?;
    }
    match t.client_auth.unwrap_or(ClientAuth::None) {
        ClientAuth::None => b.set_verify(SslVerifyMode::NONE),
        ClientAuth::Requested => b.set_verify(SslVerifyMode::PEER),
        ClientAuth::Required => {
            b.set_verify(SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT);
        }
    }
    Ok(b.build())
}
