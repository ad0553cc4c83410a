//! SASL for the group client's connections: SaslHandshake (v1) then
//! SaslAuthenticate rounds, with PLAIN (RFC 4616) and SCRAM-SHA-256/512
//! (RFC 5802/7677, the salted-challenge exchange Kafka's `ScramSaslClient`
//! does, computed with OpenSSL's PBKDF2, HMAC and SHA-2). Any other
//! `sasl.mechanism` is refused before anything is sent.

use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use bytes::Bytes;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;
use openssl::hash::MessageDigest;
use openssl::pkey::PKey;
use openssl::sign::Signer;

use super::conn::{Conn, ConnError, SaslSettings};

/// Kafka's lowest SCRAM iteration count (`ScramMechanism.minIterations`).
const MIN_ITERATIONS: u32 = 4096;
/// A bound on the server's iteration count (Kafka's own maximum is 16384).
const MAX_ITERATIONS: u32 = 1 << 20;

/// The mechanisms walrelay implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mechanism {
    /// PLAIN.
    Plain,
    /// SCRAM-SHA-256.
    Sha256,
    /// SCRAM-SHA-512.
    Sha512,
}

impl Mechanism {
    /// Parses `sasl.mechanism`, refusing the ones walrelay lacks.
    fn parse(name: &str) -> Result<Mechanism, ConnError> {
        match name {
            "PLAIN" => Ok(Mechanism::Plain),
            "SCRAM-SHA-256" => Ok(Mechanism::Sha256),
            "SCRAM-SHA-512" => Ok(Mechanism::Sha512),
            other => Err(ConnError::Mechanism {
                mechanism: other.to_string(),
            }),
        }
    }
}

/// Checks `sasl.mechanism` without connecting.
pub(crate) fn check_mechanism(name: &str) -> Result<(), ConnError> {
    Mechanism::parse(name).map(|_| ())
}

/// Authenticates `conn` (after ApiVersions) with `settings`.
pub(crate) async fn authenticate(
    conn: &mut Conn,
    settings: &SaslSettings,
    timeout: Duration,
) -> Result<(), ConnError> {
    let mechanism = Mechanism::parse(&settings.mechanism)?;
    let sasl_err = |conn: &Conn, detail: String| ConnError::Sasl {
        broker: conn.broker().to_string(),
        mechanism: settings.mechanism.clone(),
        detail,
    };
    let hs = SaslHandshakeRequest::default()
        .with_mechanism(StrBytes::from_string(settings.mechanism.clone()));
    let resp = conn.request(&hs, timeout).await?;
    if resp.error_code != 0 {
        let offered: Vec<&str> = resp.mechanisms.iter().map(StrBytes::as_str).collect();
        let err = conn.broker_error("SaslHandshake", resp.error_code, None);
        return Err(sasl_err(
            conn,
            format!("{err}; the broker offers {offered:?}"),
        ));
    }
    match mechanism {
        Mechanism::Plain => {
            let mut msg = Vec::new();
            msg.push(0);
            msg.extend_from_slice(settings.username.as_bytes());
            msg.push(0);
            msg.extend_from_slice(settings.password.as_bytes());
            round(conn, msg, timeout).await?;
            Ok(())
        }
        Mechanism::Sha256 | Mechanism::Sha512 => {
            let digest = if mechanism == Mechanism::Sha256 {
                MessageDigest::sha256()
            } else {
                MessageDigest::sha512()
            };
            let mut scram = Scram::new(digest, &settings.username, &settings.password, &nonce());
            let server_first = round(conn, scram.client_first().into_bytes(), timeout).await?;
            let client_final = scram
                .client_final(&server_first)
                .map_err(|d| sasl_err(conn, d))?;
            let server_final = round(conn, client_final.into_bytes(), timeout).await?;
            scram
                .verify_server_final(&server_final)
                .map_err(|d| sasl_err(conn, d))
        }
    }
}

/// One SaslAuthenticate round: sends `bytes`, returns the broker's.
async fn round(conn: &mut Conn, bytes: Vec<u8>, timeout: Duration) -> Result<Vec<u8>, ConnError> {
    let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes));
    let resp = conn.request(&req, timeout).await?;
    if resp.error_code != 0 {
        return Err(conn.broker_error(
            "SaslAuthenticate",
            resp.error_code,
            resp.error_message.as_ref(),
        ));
    }
    Ok(resp.auth_bytes.to_vec())
}

/// A fresh client nonce: 24 random bytes, base64.
fn nonce() -> String {
    let mut raw = [0u8; 24];
    // OpenSSL's generator; on its (unlikely) failure fall back to rand's.
    if openssl::rand::rand_bytes(&mut raw).is_err() {
        rand::RngCore::fill_bytes(&mut rand::thread_rng(), &mut raw);
    }
    B64.encode(raw)
}

/// The client side of one SCRAM exchange.
struct Scram {
    /// SHA-256 or SHA-512.
    digest: MessageDigest,
    /// `saslname`-escaped user name.
    user: String,
    /// The password.
    password: String,
    /// The client's nonce.
    client_nonce: String,
    /// Client key's HMAC input after PBKDF2 (set by `client_final`).
    salted: Vec<u8>,
    /// The AuthMessage (set by `client_final`).
    auth_message: String,
}

impl Scram {
    /// An exchange for `user`/`password` with `client_nonce`.
    fn new(digest: MessageDigest, user: &str, password: &str, client_nonce: &str) -> Scram {
        Scram {
            digest,
            user: user.replace('=', "=3D").replace(',', "=2C"),
            password: password.to_string(),
            client_nonce: client_nonce.to_string(),
            salted: Vec::new(),
            auth_message: String::new(),
        }
    }

    /// `client-first-message-bare`.
    fn client_first_bare(&self) -> String {
        format!("n={},r={}", self.user, self.client_nonce)
    }

    /// `client-first-message` (no channel binding, no authzid).
    fn client_first(&self) -> String {
        format!("n,,{}", self.client_first_bare())
    }

    /// `client-final-message` for the server's first message.
    fn client_final(&mut self, server_first: &[u8]) -> Result<String, String> {
        let text = std::str::from_utf8(server_first)
            .map_err(|_| "the server's first message is not UTF-8".to_string())?;
        if let Some(e) = attr(text, 'e') {
            return Err(format!("the server refused: {e}"));
        }
        let nonce = attr(text, 'r').ok_or("the server's first message has no nonce")?;
        if !nonce.starts_with(&self.client_nonce) || nonce.len() == self.client_nonce.len() {
            return Err("the server's nonce does not extend the client's".into());
        }
        let salt = attr(text, 's').ok_or("the server's first message has no salt")?;
        let salt = B64
            .decode(salt)
            .map_err(|_| "the server's salt is not base64".to_string())?;
        let iterations: u32 = attr(text, 'i')
            .and_then(|i| i.parse().ok())
            .ok_or("the server's first message has no iteration count")?;
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(format!("the server asks for {iterations} iterations"));
        }
        let mut salted = vec![0u8; self.digest.size()];
        openssl::pkcs5::pbkdf2_hmac(
            self.password.as_bytes(),
            &salt,
            iterations as usize,
            self.digest,
            &mut salted,
        )
        .map_err(|e| format!("PBKDF2: {e}"))?;
        let without_proof = format!("c=biws,r={nonce}");
        self.auth_message = format!("{},{text},{without_proof}", self.client_first_bare());
        let client_key = self.hmac(&salted, b"Client Key")?;
        let stored_key =
            openssl::hash::hash(self.digest, &client_key).map_err(|e| format!("hash: {e}"))?;
        let signature = self.hmac(&stored_key, self.auth_message.as_bytes())?;
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        self.salted = salted;
        Ok(format!("{without_proof},p={}", B64.encode(proof)))
    }

    /// Checks the server's signature in `server-final-message`.
    fn verify_server_final(&self, server_final: &[u8]) -> Result<(), String> {
        let text = std::str::from_utf8(server_final)
            .map_err(|_| "the server's final message is not UTF-8".to_string())?;
        if let Some(e) = attr(text, 'e') {
            return Err(format!("the server refused: {e}"));
        }
        let got = attr(text, 'v').ok_or("the server's final message has no signature")?;
        let server_key = self.hmac(&self.salted, b"Server Key")?;
        let expected = self.hmac(&server_key, self.auth_message.as_bytes())?;
        if B64.encode(expected) != got {
            return Err(
                "the server's signature is wrong (not the broker holding these credentials?)"
                    .into(),
            );
        }
        Ok(())
    }

    /// HMAC with the exchange's digest.
    fn hmac(&self, key: &[u8], data: &[u8]) -> Result<Vec<u8>, String> {
        let key = PKey::hmac(key).map_err(|e| format!("HMAC key: {e}"))?;
        let mut signer = Signer::new(self.digest, &key).map_err(|e| format!("HMAC: {e}"))?;
        signer.update(data).map_err(|e| format!("HMAC: {e}"))?;
        signer.sign_to_vec().map_err(|e| format!("HMAC: {e}"))
    }
}

/// The value of attribute `name` in a SCRAM message (`a=value,b=...`).
fn attr(text: &str, name: char) -> Option<&str> {
    text.split(',').find_map(|part| {
        let mut chars = part.chars();
        (chars.next() == Some(name) && chars.next() == Some('=')).then(|| &part[2..])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 section 3's SCRAM-SHA-256 example, message for message.
    #[test]
    fn scram_sha256_matches_rfc7677() {
        let mut s = Scram::new(
            MessageDigest::sha256(),
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO",
        );
        assert_eq!(s.client_first(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        assert_eq!(
            s.client_final(server_first).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        s.verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap();
        assert!(s.verify_server_final(b"v=AAAA").is_err());
        assert!(s.verify_server_final(b"e=invalid-proof").is_err());
    }

    #[test]
    fn scram_refuses_bad_server_messages() {
        let mut s = Scram::new(MessageDigest::sha512(), "u=1,x", "p", "abc");
        assert_eq!(s.client_first(), "n,,n=u=3D1=2Cx,r=abc");
        assert!(s.client_final(b"r=zzz,s=AAAA,i=4096").is_err()); // nonce not ours
        assert!(s.client_final(b"r=abcd,s=AAAA,i=10").is_err()); // too few iterations
        assert!(s.client_final(b"r=abcd,s=!!,i=4096").is_err()); // salt not base64
        assert!(s.client_final(b"e=unknown-user").is_err());
        assert!(s.client_final(b"r=abcd,s=AAAA,i=4096").is_ok());
    }

    #[test]
    fn other_mechanisms_are_refused_by_name() {
        for m in ["GSSAPI", "OAUTHBEARER", "plain"] {
            let e = check_mechanism(m).unwrap_err().to_string();
            assert!(e.contains("sasl.mechanism") && e.contains(m), "{e}");
        }
        check_mechanism("SCRAM-SHA-512").unwrap();
    }

    /// A SASL/PLAIN front for the test broker: answers SaslHandshake v1
    /// and SaslAuthenticate v2 itself (bytes written by hand from Kafka's
    /// message schemas), checks `user`/`secret`, forwards the rest.
    async fn plain_front(broker: String) -> u16 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut down, _)) = listener.accept().await {
                let broker = broker.clone();
                tokio::spawn(async move {
                    let mut up = tokio::net::TcpStream::connect(broker).await.unwrap();
                    loop {
                        let Ok(len) = down.read_i32().await else {
                            return;
                        };
                        let mut frame = vec![0u8; len as usize];
                        down.read_exact(&mut frame).await.unwrap();
                        let key = i16::from_be_bytes([frame[0], frame[1]]);
                        let corr = &frame[4..8];
                        let client_len = i16::from_be_bytes([frame[8], frame[9]]) as usize;
                        let body = &frame[10 + client_len..];
                        let mut out = Vec::new();
                        out.extend_from_slice(corr); // response header: correlation id
                        match key {
                            17 => {
                                // SaslHandshake v1: error_code, mechanisms [STRING]
                                out.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0, 5]);
                                out.extend_from_slice(b"PLAIN");
                            }
                            36 => {
                                // Request header v2 ends with tagged fields (0);
                                // body: auth_bytes COMPACT_BYTES (len + 1).
                                let n = body[1] as usize - 1;
                                let ok = &body[2..2 + n] == b"\0user\0secret";
                                out.push(0); // response header v1: no tagged fields
                                if ok {
                                    out.extend_from_slice(&[0, 0]); // error_code
                                    out.push(0); // error_message: null
                                } else {
                                    out.extend_from_slice(&58i16.to_be_bytes());
                                    out.push(4); // error_message: 3 bytes
                                    out.extend_from_slice(b"bad");
                                }
                                out.push(1); // auth_bytes: empty
                                out.extend_from_slice(&0i64.to_be_bytes()); // session_lifetime_ms
                                out.push(0); // no tagged fields
                            }
                            _ => {
                                up.write_all(&len.to_be_bytes()).await.unwrap();
                                up.write_all(&frame).await.unwrap();
                                let n = up.read_i32().await.unwrap();
                                let mut resp = vec![0u8; n as usize];
                                up.read_exact(&mut resp).await.unwrap();
                                out = resp;
                            }
                        }
                        down.write_all(&(out.len() as i32).to_be_bytes())
                            .await
                            .unwrap();
                        down.write_all(&out).await.unwrap();
                    }
                });
            }
        });
        port
    }

    #[tokio::test]
    async fn sasl_plain_through_a_front_of_the_test_broker() {
        use crate::distributed::group::conn::GroupSecurity;
        use kafka_protocol::messages::JoinGroupRequest;
        let Ok(broker) = std::env::var("WALRELAY_TEST_KAFKA") else {
            eprintln!(
                "WALRELAY_TEST_KAFKA unset: skipping sasl_plain_through_a_front_of_the_test_broker"
            );
            return;
        };
        let addr = format!("127.0.0.1:{}", plain_front(broker).await);
        let sec = |password: &str| GroupSecurity {
            tls: None,
            sasl: Some(SaslSettings {
                mechanism: "PLAIN".into(),
                username: "user".into(),
                password: password.into(),
            }),
        };
        let t = Duration::from_secs(10);
        let conn = Conn::open(&addr, "t", &sec("secret"), t).await.unwrap();
        assert_eq!(conn.version::<JoinGroupRequest>().unwrap(), 9);
        let e = Conn::open(&addr, "t", &sec("wrong"), t)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("SASL_AUTHENTICATION_FAILED") && e.contains("bad"),
            "{e}"
        );
        let mut gss = sec("secret");
        if let Some(s) = gss.sasl.as_mut() {
            s.mechanism = "GSSAPI".into();
        }
        let e = Conn::open(&addr, "t", &gss, t)
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("sasl.mechanism"), "{e}");
    }
}
