//! The producer's trust and key stores (`ssl.truststore.*`,
//! `ssl.keystore.*`, `ssl.key.password`), translated into librdkafka's PEM
//! and PKCS#12 settings: a PEM file is passed by location, a PKCS#12
//! truststore is opened here and its certificates passed as PEM (librdkafka
//! cannot read one), a JKS store is refused with the command that converts
//! it.
//!
//! Owns reading store files to tell their kind and to extract certificates.
//! It never logs a value, keeps passwords in [`Secret`]s, never puts a
//! password in an error (only the key that names it), and never connects.

use std::path::Path;

use super::{KafkaDraft, Keys};
use crate::config::ConfigError;
use crate::secret::Secret;

/// What a key or trust store file is, by its type setting or its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StoreKind {
    Pem,
    Pkcs12,
    Jks,
}

fn store_kind(declared: Option<&str>, path: &str) -> Option<StoreKind> {
    match declared.map(str::to_ascii_uppercase).as_deref() {
        Some("PEM") => return Some(StoreKind::Pem),
        Some("PKCS12") => return Some(StoreKind::Pkcs12),
        Some("JKS") => return Some(StoreKind::Jks),
        _ => {}
    }
    let bytes = std::fs::read(path).ok()?;
    let start: Vec<u8> = bytes
        .iter()
        .copied()
        .skip_while(u8::is_ascii_whitespace)
        .take(10)
        .collect();
    if start.starts_with(b"-----BEGIN") {
        Some(StoreKind::Pem)
    } else if bytes.starts_with(&[0xFE, 0xED, 0xFE, 0xED]) {
        Some(StoreKind::Jks)
    } else if bytes.first() == Some(&0x30) {
        Some(StoreKind::Pkcs12)
    } else {
        None
    }
}

/// `ssl.truststore.*` → librdkafka's `ssl.ca.location` (PEM file) or
/// `ssl.ca.pem` (the certificates of a PKCS12 truststore, which librdkafka
/// cannot read itself). `ssl.truststore.password` stays in the map unless a
/// PKCS12 store needs it, so it is warned about as ignored otherwise.
pub(super) fn translate_truststore(
    p: &mut Keys,
    kafka: &mut KafkaDraft,
) -> Result<(), ConfigError> {
    let declared = p.take("ssl.truststore.type");
    if let Some(pem) = p.take_raw("ssl.truststore.certificates") {
        kafka.producer.insert("ssl.ca.pem".into(), pem);
    }
    let Some(location) = p.take("ssl.truststore.location") else {
        return Ok(());
    };
    match store_kind(declared.as_deref(), &location) {
        Some(StoreKind::Pem) => {
            kafka.producer.insert("ssl.ca.location".into(), location);
            Ok(())
        }
        Some(StoreKind::Pkcs12) => {
            if kafka.producer.contains_key("ssl.ca.pem") {
                return Err(p.invalid(
                    "ssl.truststore.location",
                    format!(
                        "set either it or {}, not both",
                        p.name("ssl.truststore.certificates")
                    ),
                ));
            }
            // Java opens a truststore without a password too (it then skips
            // the integrity check); OpenSSL's nearest is the empty one.
            let password = Secret::new(p.take_raw("ssl.truststore.password").unwrap_or_default());
            let password_key = p.name("ssl.truststore.password");
            let pem = pkcs12_certificates_pem(Path::new(&location), &password, &password_key)
                .map_err(|why| {
                    p.invalid(
                        "ssl.truststore.location",
                        format!("PKCS12 truststore {location}: {why}"),
                    )
                })?;
            kafka.producer.insert("ssl.ca.pem".into(), pem);
            Ok(())
        }
        Some(StoreKind::Jks) => Err(p.unsupported(
            "ssl.truststore.location",
            "it is a JKS truststore, which librdkafka cannot read; convert it to PKCS12 \
             (keytool -importkeystore -deststoretype PKCS12) or export the CA certificates as PEM \
             (keytool -exportcert -rfc) and set ssl.truststore.type=PEM",
        )),
        None => Err(p.invalid(
            "ssl.truststore.location",
            "cannot read it as a PEM, JKS or PKCS12 file",
        )),
    }
}

/// Every certificate in the PKCS12 file at `path`, as PEM. The reason it
/// fails names what to check (`password_key` is how the file spells the
/// password's key) and never contains the password.
fn pkcs12_certificates_pem(
    path: &Path,
    password: &Secret,
    password_key: &str,
) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read it: {e}"))?;
    let store = openssl::pkcs12::Pkcs12::from_der(&bytes).map_err(|e| {
        format!(
            "not a PKCS12 file ({})",
            crate::metrics::web::tls::reasons(&e)
        )
    })?;
    let parsed = store.parse2(password.expose()).map_err(|e| {
        let reasons = crate::metrics::web::tls::reasons(&e);
        if reasons.contains("mac verify failure") {
            format!("wrong password ({password_key}) or a damaged file")
        } else if reasons.contains("unsupported") {
            // Stores written by Java 8 and OpenSSL 1.1 use RC2-40, which
            // OpenSSL 3 keeps in its legacy provider.
            format!(
                "it uses an algorithm this OpenSSL does not provide ({reasons}); re-create it \
                 with keytool from Java 17+ or export the certificates as PEM"
            )
        } else {
            format!("cannot open it with {password_key} ({reasons})")
        }
    })?;
    let mut pem = Vec::new();
    let own = parsed.cert.iter().map(|c| &**c);
    for cert in own.chain(parsed.ca.iter().flatten()) {
        let text = cert.to_pem().map_err(|e| {
            format!(
                "cannot convert a certificate to PEM ({})",
                crate::metrics::web::tls::reasons(&e)
            )
        })?;
        pem.extend_from_slice(&text);
    }
    if pem.is_empty() {
        return Err("it holds no certificate".into());
    }
    String::from_utf8(pem).map_err(|_| "a certificate did not convert to ASCII PEM".into())
}

pub(super) fn translate_keystore(p: &mut Keys, kafka: &mut KafkaDraft) -> Result<(), ConfigError> {
    let declared = p.take("ssl.keystore.type");
    let store_password = p.take_raw("ssl.keystore.password");
    if let Some(key_password) = p.take_raw("ssl.key.password") {
        kafka
            .secrets
            .insert("ssl.key.password".into(), Secret::new(key_password));
    }
    if let Some(key) = p.take_raw("ssl.keystore.key") {
        kafka.secrets.insert("ssl.key.pem".into(), Secret::new(key));
    }
    if let Some(chain) = p.take_raw("ssl.keystore.certificate.chain") {
        kafka.producer.insert("ssl.certificate.pem".into(), chain);
    }
    let Some(location) = p.take("ssl.keystore.location") else {
        return Ok(());
    };
    match store_kind(declared.as_deref(), &location) {
        Some(StoreKind::Pem) => {
            // One PEM file holding the key and the certificate chain.
            kafka
                .producer
                .insert("ssl.certificate.location".into(), location.clone());
            kafka.producer.insert("ssl.key.location".into(), location);
        }
        Some(StoreKind::Pkcs12) => {
            kafka
                .producer
                .insert("ssl.keystore.location".into(), location);
            if let Some(pw) = store_password {
                kafka
                    .secrets
                    .insert("ssl.keystore.password".into(), Secret::new(pw));
            }
        }
        Some(StoreKind::Jks) => {
            return Err(p.unsupported(
                "ssl.keystore.location",
                "it is a JKS keystore, which librdkafka cannot read; convert it to PKCS12 \
                 (keytool -importkeystore -deststoretype PKCS12) or PEM",
            ))
        }
        None => {
            return Err(p.invalid(
                "ssl.keystore.location",
                "cannot read it as a PEM, JKS or PKCS12 file",
            ))
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::tests::data_props;
    use super::super::{from_connect, Translation};

    /// A self-signed CA certificate and its key, made in memory.
    fn test_ca(
        cn: &str,
    ) -> (
        openssl::pkey::PKey<openssl::pkey::Private>,
        openssl::x509::X509,
    ) {
        use openssl::{
            asn1::Asn1Time, bn::BigNum, ec, hash::MessageDigest, nid::Nid, pkey::PKey, x509,
        };
        let group = ec::EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
        let key = PKey::from_ec_key(ec::EcKey::generate(&group).unwrap()).unwrap();
        let mut name = x509::X509NameBuilder::new().unwrap();
        name.append_entry_by_text("CN", cn).unwrap();
        let name = name.build();
        let mut b = x509::X509Builder::new().unwrap();
        b.set_version(2).unwrap();
        b.set_serial_number(&BigNum::from_u32(1).unwrap().to_asn1_integer().unwrap())
            .unwrap();
        b.set_subject_name(&name).unwrap();
        b.set_issuer_name(&name).unwrap();
        b.set_pubkey(&key).unwrap();
        b.set_not_before(&Asn1Time::days_from_now(0).unwrap())
            .unwrap();
        b.set_not_after(&Asn1Time::days_from_now(1).unwrap())
            .unwrap();
        b.sign(&key, MessageDigest::sha256()).unwrap();
        (key, b.build())
    }

    /// A worker whose producer trusts `store` (type `store_type` if given,
    /// password `password` if given); the translation or its error chain.
    fn with_truststore(
        store: &Path,
        store_type: Option<&str>,
        password: Option<&str>,
    ) -> Result<Translation, String> {
        let mut worker = data_props("connect-standalone.properties");
        worker.insert("producer.security.protocol".into(), "SSL".into());
        worker.insert(
            "producer.ssl.truststore.location".into(),
            store.display().to_string(),
        );
        if let Some(t) = store_type {
            worker.insert("producer.ssl.truststore.type".into(), t.into());
        }
        if let Some(pw) = password {
            worker.insert("producer.ssl.truststore.password".into(), pw.into());
        }
        let connector = data_props("outbox-connector.properties");
        from_connect(worker, connector, Path::new("w"), Path::new("c"))
            .map_err(|e| crate::chain::DisplayChain(&e).to_string())
    }

    #[test]
    fn pkcs12_truststore() {
        let dir = tempfile::tempdir().unwrap();
        let (_, ca) = test_ca("walrelay unit CA");
        let (_, other) = test_ca("walrelay other unit CA");
        let mut cas = openssl::stack::Stack::new().unwrap();
        cas.push(ca.clone()).unwrap();
        cas.push(other.clone()).unwrap();
        let password = "Trust-Store-Pw-5a1";
        let mut builder = openssl::pkcs12::Pkcs12::builder();
        builder.ca(cas);
        let store = dir.path().join("truststore.p12");
        std::fs::write(&store, builder.build2(password).unwrap().to_der().unwrap()).unwrap();
        let want = format!(
            "{}{}",
            String::from_utf8(ca.to_pem().unwrap()).unwrap(),
            String::from_utf8(other.to_pem().unwrap()).unwrap()
        );

        // Declared or detected: every certificate goes to ssl.ca.pem and the
        // password is used, not warned about.
        for declared in [Some("PKCS12"), Some("pkcs12"), None] {
            let t = with_truststore(&store, declared, Some(password)).unwrap();
            let k = &t.config.kafka;
            assert_eq!(k.producer["ssl.ca.pem"], want, "{declared:?}");
            assert!(!k.producer.contains_key("ssl.ca.location"));
            assert!(!t.ignored("producer.ssl.truststore.password"));
            assert!(!format!("{:?}", t.config).contains(password));
        }

        // A wrong or missing password: named, never shown.
        for wrong in [Some("Not-The-Pw-77"), None] {
            let err = with_truststore(&store, Some("PKCS12"), wrong).unwrap_err();
            assert!(
                err.contains("producer.ssl.truststore.location")
                    && err.contains("truststore.p12")
                    && err.contains("wrong password (producer.ssl.truststore.password)"),
                "{err}"
            );
            assert!(
                !err.contains("Not-The-Pw-77") && !err.contains(password),
                "{err}"
            );
        }

        // A store holding only a key has nothing to trust.
        let (key, _) = test_ca("unused");
        let mut builder = openssl::pkcs12::Pkcs12::builder();
        builder.pkey(&key);
        let keyonly = dir.path().join("key-only.p12");
        std::fs::write(
            &keyonly,
            builder.build2(password).unwrap().to_der().unwrap(),
        )
        .unwrap();
        let err = with_truststore(&keyonly, None, Some(password)).unwrap_err();
        assert!(
            err.contains("producer.ssl.truststore.location")
                && err.contains("key-only.p12")
                && err.contains("no certificate"),
            "{err}"
        );

        // Declared PKCS12 but unreadable or not PKCS12 at all.
        let missing = dir.path().join("missing.p12");
        let err = with_truststore(&missing, Some("PKCS12"), Some(password)).unwrap_err();
        assert!(
            err.contains("producer.ssl.truststore.location")
                && err.contains("missing.p12")
                && err.contains("cannot read"),
            "{err}"
        );
        let junk = dir.path().join("junk.p12");
        std::fs::write(&junk, b"\x30\x03\x02\x01\x00").unwrap();
        let err = with_truststore(&junk, None, Some(password)).unwrap_err();
        assert!(
            err.contains("junk.p12") && err.contains("not a PKCS12 file"),
            "{err}"
        );
        assert!(!err.contains(password), "{err}");

        // Certificates inline and a PKCS12 file at once: ambiguous.
        let mut worker = data_props("connect-standalone.properties");
        worker.insert(
            "producer.ssl.truststore.location".into(),
            store.display().to_string(),
        );
        worker.insert("producer.ssl.truststore.password".into(), password.into());
        worker.insert("producer.ssl.truststore.certificates".into(), want.clone());
        let err = from_connect(
            worker,
            data_props("outbox-connector.properties"),
            Path::new("w"),
            Path::new("c"),
        )
        .unwrap_err();
        let text = crate::chain::DisplayChain(&err).to_string();
        assert!(
            text.contains("producer.ssl.truststore.certificates"),
            "{text}"
        );

        // A PEM truststore leaves the password unused: warned about.
        let pem = dir.path().join("ca.pem");
        std::fs::write(&pem, &want).unwrap();
        let t = with_truststore(&pem, None, Some(password)).unwrap();
        assert_eq!(
            t.config.kafka.producer["ssl.ca.location"],
            pem.to_str().unwrap()
        );
        assert!(t.ignored("producer.ssl.truststore.password"));
    }
}
