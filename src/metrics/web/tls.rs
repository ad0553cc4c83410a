//! The listener's OpenSSL acceptor, built from `tls_server_config` with
//! the exporter-toolkit's meaning of every key: Go's client auth types
//! (as OpenSSL verify modes), its cipher suite and curve names, TLS
//! versions, SAN matching of client certificates, and ALPN for HTTP/2.
//!
//! Owns opening the certificate, key and CA files; an error names the key
//! and the file, never the key's bytes. What OpenSSL here cannot do
//! exactly as Go does is refused by name, never approximated.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use openssl::pkey::PKey;
use openssl::ssl::{
    select_next_proto, AlpnError, SslAcceptor, SslAcceptorBuilder, SslMethod, SslOptions,
    SslVerifyMode, SslVersion,
};
use openssl::x509::{X509StoreContextRef, X509};

use super::file::TlsServerConfig;
use super::WebConfigError;

/// ALPN, HTTP/2 first (`http2: true`).
const ALPN_H2: &[u8] = b"\x02h2\x08http/1.1";
/// ALPN, HTTP/1.1 only (`http2: false`).
const ALPN_H1: &[u8] = b"\x08http/1.1";

/// Go's `tls.ClientAuthType`, by the toolkit's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientAuth {
    /// No certificate is asked for.
    NoClientCert,
    /// Asked for, not required, not verified.
    RequestClientCert,
    /// Required, not verified.
    RequireAnyClientCert,
    /// Verified if the client sends one.
    VerifyClientCertIfGiven,
    /// Required and verified.
    RequireAndVerifyClientCert,
}

impl ClientAuth {
    /// The toolkit's names (with `RequireClientCert`, which it keeps for
    /// `RequireAnyClientCert`).
    fn parse(name: &str) -> Option<ClientAuth> {
        Some(match name {
            "" | "NoClientCert" => ClientAuth::NoClientCert,
            "RequestClientCert" => ClientAuth::RequestClientCert,
            "RequireAnyClientCert" | "RequireClientCert" => ClientAuth::RequireAnyClientCert,
            "VerifyClientCertIfGiven" => ClientAuth::VerifyClientCertIfGiven,
            "RequireAndVerifyClientCert" => ClientAuth::RequireAndVerifyClientCert,
            _ => return None,
        })
    }

    /// Whether a certificate is required.
    fn requires(self) -> bool {
        matches!(
            self,
            ClientAuth::RequireAnyClientCert | ClientAuth::RequireAndVerifyClientCert
        )
    }

    /// Whether a certificate sent is verified against the client CAs.
    fn verifies(self) -> bool {
        matches!(
            self,
            ClientAuth::VerifyClientCertIfGiven | ClientAuth::RequireAndVerifyClientCert
        )
    }
}

/// What the rest of the listener needs of the TLS settings.
pub(crate) struct Tls {
    /// The acceptor, shared by every connection.
    pub(crate) acceptor: Arc<SslAcceptor>,
    /// The client auth type in force.
    pub(crate) client_auth: ClientAuth,
}

/// Errors of one key, before the file's path is added.
type KeyError = (&'static str, String);

/// Builds the acceptor of `c` (which [`TlsServerConfig::is_enabled`]),
/// `http2` deciding the ALPN protocols. `path` is the web configuration
/// file, for the messages.
pub(super) fn acceptor(
    c: &TlsServerConfig,
    http2: bool,
    path: &Path,
) -> Result<Tls, WebConfigError> {
    build(c, http2).map_err(|(key, reason)| WebConfigError::Invalid {
        path: path.to_owned(),
        key: format!("tls_server_config.{key}"),
        reason,
    })
}

fn build(c: &TlsServerConfig, http2: bool) -> Result<Tls, KeyError> {
    let client_auth = client_auth(c)?;
    let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server())
        .map_err(|e| ("cert_file", format!("cannot set up TLS ({})", reasons(&e))))?;
    identity(&mut b, c)?;
    versions(&mut b, c)?;
    ciphers(&mut b, c)?;
    curves(&mut b, c)?;
    client_cas(&mut b, c, client_auth)?;
    verify(&mut b, client_auth, c.client_allowed_sans.clone());
    let protos = if http2 { ALPN_H2 } else { ALPN_H1 };
    b.set_alpn_select_callback(move |_, client| {
        select_next_proto(protos, client).ok_or(AlpnError::NOACK)
    });
    Ok(Tls {
        acceptor: Arc::new(b.build()),
        client_auth,
    })
}

/// `client_auth_type`, and what the toolkit refuses with it.
fn client_auth(c: &TlsServerConfig) -> Result<ClientAuth, KeyError> {
    let name = c.client_auth_type.as_deref().unwrap_or("");
    let auth = ClientAuth::parse(name).ok_or_else(|| {
        (
            "client_auth_type",
            format!(
                "{name:?} is not a client auth type; use NoClientCert, RequestClientCert, \
                 RequireAnyClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert"
            ),
        )
    })?;
    let has_ca = c.client_ca_file.is_some() || c.client_ca.is_some();
    if has_ca && auth == ClientAuth::NoClientCert {
        return Err((
            "client_auth_type",
            "client CAs are configured without a client auth type; set one \
             (RequireAndVerifyClientCert to require verified client certificates)"
                .into(),
        ));
    }
    if c.client_allowed_sans.is_some() && !auth.requires() {
        return Err((
            "client_allowed_sans",
            "needs client_auth_type RequireAnyClientCert or RequireAndVerifyClientCert".into(),
        ));
    }
    Ok(auth)
}

/// `cert`/`cert_file` and `key`/`key_file`.
fn identity(b: &mut SslAcceptorBuilder, c: &TlsServerConfig) -> Result<(), KeyError> {
    let (cert_key, cert_pem) = match (&c.cert_file, &c.cert) {
        (Some(_), Some(_)) => return Err(("cert", "give cert or cert_file, not both".into())),
        (Some(file), None) => ("cert_file", read("cert_file", file)?),
        (None, Some(text)) => ("cert", text.clone().into_bytes()),
        (None, None) => return Err(("cert_file", "missing one of cert or cert_file".into())),
    };
    let (key_key, key_pem) = match (&c.key_file, &c.key) {
        (Some(_), Some(_)) => return Err(("key", "give key or key_file, not both".into())),
        (Some(file), None) => ("key_file", read("key_file", file)?),
        (None, Some(secret)) => ("key", secret.expose().as_bytes().to_vec()),
        (None, None) => return Err(("key_file", "missing one of key or key_file".into())),
    };
    let named = |key: &'static str, what: String| (key, named_file(c, key, what));
    let mut chain = X509::stack_from_pem(&cert_pem)
        .map_err(|e| named(cert_key, format!("not a PEM certificate ({})", reasons(&e))))?
        .into_iter();
    let leaf = chain
        .next()
        .ok_or_else(|| named(cert_key, "holds no certificate".into()))?;
    // The key's own error text could quote nothing of it, but say only
    // that it is unreadable.
    let key = PKey::private_key_from_pem(&key_pem).map_err(|_| {
        named(
            key_key,
            "not a PEM private key (encrypted keys are not read)".into(),
        )
    })?;
    b.set_certificate(&leaf)
        .map_err(|e| named(cert_key, format!("cannot be used ({})", reasons(&e))))?;
    b.set_private_key(&key).map_err(|e| {
        named(
            key_key,
            format!("does not match the certificate ({})", reasons(&e)),
        )
    })?;
    for extra in chain {
        b.add_extra_chain_cert(extra)
            .map_err(|e| named(cert_key, format!("cannot be used ({})", reasons(&e))))?;
    }
    b.check_private_key()
        .map_err(|_| named(key_key, "does not match the certificate".into()))
}

/// `min_version` and `max_version`: TLS 1.2 and 1.3 only (TLS 1.0 and
/// 1.1 are named and refused: OpenSSL 3 refuses them at its default
/// security level, so the key could not be honoured).
fn versions(b: &mut SslAcceptorBuilder, c: &TlsServerConfig) -> Result<(), KeyError> {
    let version = |key: &'static str, name: Option<&str>, default: SslVersion| match name {
        None => Ok(default),
        Some("TLS12") => Ok(SslVersion::TLS1_2),
        Some("TLS13") => Ok(SslVersion::TLS1_3),
        Some(v @ ("TLS10" | "TLS11")) => Err((
            key,
            format!(
                "{v} is not supported: the OpenSSL walrelay uses refuses TLS 1.0 and 1.1 at \
                 its default security level; use TLS12 or TLS13"
            ),
        )),
        Some(v) => Err((
            key,
            format!("{v:?} is not one of TLS10, TLS11, TLS12, TLS13"),
        )),
    };
    let min = version("min_version", c.min_version.as_deref(), SslVersion::TLS1_2)?;
    let max = version("max_version", c.max_version.as_deref(), SslVersion::TLS1_3)?;
    if min == SslVersion::TLS1_3 && max == SslVersion::TLS1_2 {
        return Err(("min_version", "is above max_version".into()));
    }
    b.set_min_proto_version(Some(min))
        .and_then(|()| b.set_max_proto_version(Some(max)))
        .map_err(|e| ("min_version", reasons(&e)))
}

/// Go's name of a TLS 1.0-1.2 suite to OpenSSL's (Go's
/// `tls.CipherSuites()`); `Some("")` for TLS 1.3's, which Go does not let
/// a configuration change and which are left alone here too.
fn openssl_cipher(go: &str) -> Option<&'static str> {
    Some(match go {
        "TLS_RSA_WITH_AES_128_CBC_SHA" => "AES128-SHA",
        "TLS_RSA_WITH_AES_256_CBC_SHA" => "AES256-SHA",
        "TLS_RSA_WITH_AES_128_GCM_SHA256" => "AES128-GCM-SHA256",
        "TLS_RSA_WITH_AES_256_GCM_SHA384" => "AES256-GCM-SHA384",
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA" => "ECDHE-ECDSA-AES128-SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA" => "ECDHE-ECDSA-AES256-SHA",
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA" => "ECDHE-RSA-AES128-SHA",
        "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA" => "ECDHE-RSA-AES256-SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256" => "ECDHE-ECDSA-AES128-GCM-SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384" => "ECDHE-ECDSA-AES256-GCM-SHA384",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256" => "ECDHE-RSA-AES128-GCM-SHA256",
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384" => "ECDHE-RSA-AES256-GCM-SHA384",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256" => "ECDHE-RSA-CHACHA20-POLY1305",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256" => "ECDHE-ECDSA-CHACHA20-POLY1305",
        "TLS_AES_128_GCM_SHA256" | "TLS_AES_256_GCM_SHA384" | "TLS_CHACHA20_POLY1305_SHA256" => "",
        _ => return None,
    })
}

/// `cipher_suites` and `prefer_server_cipher_suites`.
fn ciphers(b: &mut SslAcceptorBuilder, c: &TlsServerConfig) -> Result<(), KeyError> {
    if c.prefer_server_cipher_suites.unwrap_or(true) {
        b.set_options(SslOptions::CIPHER_SERVER_PREFERENCE);
    } else {
        b.clear_options(SslOptions::CIPHER_SERVER_PREFERENCE);
    }
    let Some(names) = c.cipher_suites.as_ref().filter(|n| !n.is_empty()) else {
        return Ok(());
    };
    let mut list = Vec::with_capacity(names.len());
    for name in names {
        match openssl_cipher(name) {
            Some("") => {}
            Some(ossl) => list.push(ossl),
            None => {
                return Err((
                    "cipher_suites",
                    format!("unknown cipher {name:?} (Go's names, as in tls.CipherSuites())"),
                ))
            }
        }
    }
    if list.is_empty() {
        return Err((
            "cipher_suites",
            "names only TLS 1.3 suites, which cannot be configured; TLS 1.2 would have no \
             cipher left: add TLS 1.2 suites or leave the key out"
                .into(),
        ));
    }
    b.set_cipher_list(&list.join(":"))
        .map_err(|e| ("cipher_suites", reasons(&e)))
}

/// `curve_preferences`, Go's names.
fn curves(b: &mut SslAcceptorBuilder, c: &TlsServerConfig) -> Result<(), KeyError> {
    let Some(names) = c.curve_preferences.as_ref().filter(|n| !n.is_empty()) else {
        return Ok(());
    };
    let mut groups = Vec::with_capacity(names.len());
    for name in names {
        groups.push(match name.as_str() {
            "CurveP256" => "P-256",
            "CurveP384" => "P-384",
            "CurveP521" => "P-521",
            "X25519" => "X25519",
            _ => {
                return Err((
                    "curve_preferences",
                    format!(
                        "unknown curve {name:?}; use CurveP256, CurveP384, CurveP521 or X25519"
                    ),
                ))
            }
        });
    }
    b.set_groups_list(&groups.join(":"))
        .map_err(|e| ("curve_preferences", reasons(&e)))
}

/// `client_ca_file`/`client_ca`: the CAs client certificates are verified
/// against and named to the client. Without them a verifying auth type
/// verifies against the system's roots, as Go does.
fn client_cas(
    b: &mut SslAcceptorBuilder,
    c: &TlsServerConfig,
    auth: ClientAuth,
) -> Result<(), KeyError> {
    let (key, pem) = match (&c.client_ca_file, &c.client_ca) {
        (Some(_), Some(_)) => {
            return Err((
                "client_ca",
                "give client_ca or client_ca_file, not both".into(),
            ))
        }
        (Some(file), None) => ("client_ca_file", read("client_ca_file", file)?),
        (None, Some(text)) => ("client_ca", text.clone().into_bytes()),
        (None, None) if auth.verifies() => {
            return b
                .set_default_verify_paths()
                .map_err(|e| ("client_ca_file", reasons(&e)))
        }
        (None, None) => return Ok(()),
    };
    let named = |what: String| (key, named_file(c, key, what));
    let cas = X509::stack_from_pem(&pem)
        .map_err(|e| named(format!("not PEM certificates ({})", reasons(&e))))?;
    if cas.is_empty() {
        return Err(named("holds no certificate".into()));
    }
    for ca in &cas {
        b.cert_store_mut()
            .add_cert(ca.clone())
            .and_then(|()| b.add_client_ca(ca))
            .map_err(|e| named(format!("cannot be used ({})", reasons(&e))))?;
    }
    Ok(())
}

/// The verify mode and callback of `auth`, with `client_allowed_sans`
/// checked on the client's own certificate (a mismatch ends the
/// handshake, as the toolkit's `VerifyPeerCertificate`).
fn verify(b: &mut SslAcceptorBuilder, auth: ClientAuth, sans: Option<Vec<String>>) {
    let mode = match auth {
        ClientAuth::NoClientCert => return b.set_verify(SslVerifyMode::NONE),
        a if a.requires() => SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT,
        _ => SslVerifyMode::PEER,
    };
    let verifies = auth.verifies();
    b.set_verify_callback(mode, move |preverified, ctx| {
        (preverified || !verifies) && sans.as_deref().is_none_or(|s| san_allowed(ctx, s))
    });
}

/// Whether the certificate being verified is not the client's own, or
/// carries one of `allowed` among its DNS, e-mail, IP and URI SANs.
fn san_allowed(ctx: &X509StoreContextRef, allowed: &[String]) -> bool {
    if ctx.error_depth() != 0 {
        return true;
    }
    let Some(names) = ctx
        .current_cert()
        .and_then(openssl::x509::X509Ref::subject_alt_names)
    else {
        return false;
    };
    names.iter().any(|n| {
        let ip = n.ipaddress().and_then(|b| match b.len() {
            4 => <[u8; 4]>::try_from(b).ok().map(std::net::IpAddr::from),
            16 => <[u8; 16]>::try_from(b).ok().map(std::net::IpAddr::from),
            _ => None,
        });
        let text = n
            .dnsname()
            .or_else(|| n.email())
            .or_else(|| n.uri())
            .map(str::to_owned)
            .or_else(|| ip.map(|ip| ip.to_string()));
        text.is_some_and(|t| allowed.contains(&t))
    })
}

/// The bytes of the file `key` names.
fn read(key: &'static str, file: &PathBuf) -> Result<Vec<u8>, KeyError> {
    std::fs::read(file).map_err(|e| (key, format!("cannot read {}: {e}", file.display())))
}

/// `what`, about the file `key` names (or the inline value).
fn named_file(c: &TlsServerConfig, key: &str, what: String) -> String {
    let file = match key {
        "cert_file" => c.cert_file.as_ref(),
        "key_file" => c.key_file.as_ref(),
        "client_ca_file" => c.client_ca_file.as_ref(),
        _ => None,
    };
    match file {
        Some(f) => format!("{}: {what}", f.display()),
        None => format!("the inline value: {what}"),
    }
}

/// Why OpenSSL failed: its reason strings, without the file and line
/// noise of its `Display`. The one copy for every OpenSSL error walrelay
/// reports (the listener's TLS, Connect's REST TLS, the keystores).
pub(crate) fn reasons(e: &openssl::error::ErrorStack) -> String {
    let r: Vec<&str> = e
        .errors()
        .iter()
        .filter_map(openssl::error::Error::reason)
        .collect();
    if r.is_empty() {
        "no reason given".into()
    } else {
        r.join(": ")
    }
}
