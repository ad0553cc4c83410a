//! One connection to one Kafka broker for the group client: TCP (tokio),
//! optionally TLS (OpenSSL), optionally SASL (PLAIN, SCRAM-SHA-256/512, see
//! [`super::sasl`]); Kafka's framing (a 4-byte length before each message),
//! request headers with correlation ids and the client id, ApiVersions
//! negotiation (for each API, the highest version both the broker and
//! walrelay speak) and one request at a time with a timeout.
//!
//! A request that times out or fails on the socket leaves the stream in an
//! unknown place: the connection refuses further requests and the caller
//! opens a new one.

use std::collections::HashMap;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use bytes::BytesMut;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest,
    JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, RequestHeader, ResponseHeader,
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
    SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use openssl::ssl::{SslConnector, SslFiletype, SslMethod, SslVerifyMode};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::sasl;

/// The largest response walrelay accepts (group responses are small).
const MAX_FRAME: usize = 64 * 1024 * 1024;

/// How the group client reaches the brokers: Kafka's `security.protocol`
/// is PLAINTEXT when both are `None`, SSL with `tls`, SASL_PLAINTEXT with
/// `sasl`, SASL_SSL with both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GroupSecurity {
    /// TLS settings (`ssl.*`).
    pub(crate) tls: Option<TlsSettings>,
    /// SASL settings (`sasl.*`).
    pub(crate) sasl: Option<SaslSettings>,
}

/// TLS to the brokers, from PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TlsSettings {
    /// CA certificates (PEM) to trust; `None`: the system's.
    pub(crate) ca_file: Option<PathBuf>,
    /// Client certificate chain (PEM), for brokers that ask for one.
    pub(crate) cert_file: Option<PathBuf>,
    /// The client certificate's private key (PEM, unencrypted).
    pub(crate) key_file: Option<PathBuf>,
    /// Check the broker's certificate names its host
    /// (`ssl.endpoint.identification.algorithm=https`, Kafka's default).
    pub(crate) verify_hostname: bool,
}

/// SASL credentials.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct SaslSettings {
    /// `sasl.mechanism`: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
    pub(crate) mechanism: String,
    /// The user name.
    pub(crate) username: String,
    /// The password.
    pub(crate) password: String,
}

impl std::fmt::Debug for SaslSettings {
    /// Everything but the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslSettings")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// A failure of a connection or of one request on it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnError {
    /// The broker's address is not `host:port`.
    #[error("broker address {broker:?} is not host:port")]
    Address {
        /// The address given.
        broker: String,
    },
    /// TCP connect failed.
    #[error("connecting to broker {broker}: {source}")]
    Connect {
        /// The broker.
        broker: String,
        /// The socket error.
        source: std::io::Error,
    },
    /// Reading or writing failed.
    #[error("broker {broker}, {api}: {source}")]
    Io {
        /// The broker.
        broker: String,
        /// The API being called.
        api: &'static str,
        /// The socket error.
        source: std::io::Error,
    },
    /// No answer in time.
    #[error("broker {broker}, {api}: no answer within {after:?}")]
    Timeout {
        /// The broker.
        broker: String,
        /// The API being called (or `connect`).
        api: &'static str,
        /// The timeout.
        after: Duration,
    },
    /// A TLS setting or the TLS handshake failed.
    #[error("TLS to broker {broker}: {detail}")]
    Tls {
        /// The broker.
        broker: String,
        /// OpenSSL's description.
        detail: String,
    },
    /// A message could not be encoded or decoded.
    #[error("broker {broker}, {api} v{version}: {detail}")]
    Codec {
        /// The broker.
        broker: String,
        /// The API.
        api: &'static str,
        /// The version used.
        version: i16,
        /// What the codec said.
        detail: String,
    },
    /// A response's correlation id is not the request's.
    #[error("broker {broker}, {api}: correlation id {got}, expected {expected}")]
    Correlation {
        /// The broker.
        broker: String,
        /// The API.
        api: &'static str,
        /// The request's id.
        expected: i32,
        /// The response's id.
        got: i32,
    },
    /// The broker and walrelay share no version of an API.
    #[error("broker {broker} speaks {api} v{broker_min}..v{broker_max}, walrelay v{min}..v{max}")]
    Unsupported {
        /// The broker.
        broker: String,
        /// The API.
        api: &'static str,
        /// The broker's lowest.
        broker_min: i16,
        /// The broker's highest (-1: not offered at all).
        broker_max: i16,
        /// walrelay's lowest.
        min: i16,
        /// walrelay's highest.
        max: i16,
    },
    /// The broker answered with an error code.
    #[error("broker {broker}, {api}: {name} ({code}){}", message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    Broker {
        /// The broker.
        broker: String,
        /// The API.
        api: &'static str,
        /// Kafka's error code.
        code: i16,
        /// Its name (`NOT_COORDINATOR`).
        name: String,
        /// The broker's message, when it sent one.
        message: Option<String>,
    },
    /// A response frame is larger than [`MAX_FRAME`] or negative.
    #[error("broker {broker}, {api}: response frame of {size} bytes")]
    Frame {
        /// The broker.
        broker: String,
        /// The API.
        api: &'static str,
        /// The announced size.
        size: i64,
    },
    /// SASL failed (the broker's answer or the SCRAM exchange).
    #[error("SASL {mechanism} with broker {broker}: {detail}")]
    Sasl {
        /// The broker.
        broker: String,
        /// The mechanism.
        mechanism: String,
        /// What went wrong.
        detail: String,
    },
    /// A `sasl.mechanism` walrelay does not implement.
    #[error("sasl.mechanism {mechanism:?} is not supported by the group client (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")]
    Mechanism {
        /// The mechanism configured.
        mechanism: String,
    },
    /// The connection failed earlier and is unusable.
    #[error("broker {broker}: connection unusable after an earlier failure")]
    Broken {
        /// The broker.
        broker: String,
    },
}

/// Kafka's name of an error code (`NOT_COORDINATOR`), from kafka-protocol's.
pub(crate) fn error_name(code: i16) -> String {
    match kafka_protocol::ResponseError::try_from_code(code) {
        None => "NONE".to_string(),
        Some(kafka_protocol::ResponseError::Unknown(c)) => format!("UNKNOWN_ERROR_CODE_{c}"),
        Some(e) => {
            let camel = format!("{e:?}");
            let mut out = String::with_capacity(camel.len() + 8);
            for (i, ch) in camel.chars().enumerate() {
                if ch.is_ascii_uppercase() && i > 0 {
                    out.push('_');
                }
                out.push(ch.to_ascii_uppercase());
            }
            out
        }
    }
}

/// An API the group client calls: its key, the versions walrelay handles
/// and its response type.
pub(crate) trait Api: Encodable {
    /// Kafka's API key.
    const KEY: ApiKey;
    /// Its name in errors and logs.
    const NAME: &'static str;
    /// The lowest version walrelay speaks.
    const MIN: i16;
    /// The highest version walrelay speaks (at most kafka-protocol's).
    const MAX: i16;
    /// The response.
    type Response: Decodable;
}

/// Implements [`Api`] for a request/response pair.
macro_rules! api {
    ($req:ty, $resp:ty, $key:ident, $name:literal, $min:literal, $max:literal) => {
        impl Api for $req {
            const KEY: ApiKey = ApiKey::$key;
            const NAME: &'static str = $name;
            const MIN: i16 = $min;
            const MAX: i16 = $max;
            type Response = $resp;
        }
    };
}

api!(
    ApiVersionsRequest,
    ApiVersionsResponse,
    ApiVersions,
    "ApiVersions",
    0,
    3
);
api!(
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    FindCoordinator,
    "FindCoordinator",
    1,
    6
);
api!(
    JoinGroupRequest,
    JoinGroupResponse,
    JoinGroup,
    "JoinGroup",
    2,
    9
);
api!(
    SyncGroupRequest,
    SyncGroupResponse,
    SyncGroup,
    "SyncGroup",
    1,
    5
);
api!(
    HeartbeatRequest,
    HeartbeatResponse,
    Heartbeat,
    "Heartbeat",
    1,
    4
);
api!(
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeaveGroup,
    "LeaveGroup",
    1,
    5
);
api!(
    SaslHandshakeRequest,
    SaslHandshakeResponse,
    SaslHandshake,
    "SaslHandshake",
    1,
    1
);
api!(
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslAuthenticate,
    "SaslAuthenticate",
    0,
    2
);

/// A byte stream: plain TCP or TLS over it.
trait Io: AsyncRead + AsyncWrite + Send + Sync + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Sync + Unpin> Io for T {}

/// A connection to one broker, ready for requests.
pub(crate) struct Conn {
    /// `host:port`.
    broker: String,
    /// The client id sent in every header.
    client_id: StrBytes,
    /// The stream.
    io: Box<dyn Io>,
    /// The next correlation id.
    next_correlation: i32,
    /// The broker's version range per API key.
    versions: HashMap<i16, (i16, i16)>,
    /// Set when a request failed on the stream.
    broken: bool,
}

impl std::fmt::Debug for Conn {
    /// The broker only.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("broker", &self.broker)
            .finish_non_exhaustive()
    }
}

impl Conn {
    /// Connects, does TLS and ApiVersions, then SASL, all within `timeout`.
    pub(crate) async fn open(
        broker: &str,
        client_id: &str,
        security: &GroupSecurity,
        timeout: Duration,
    ) -> Result<Conn, ConnError> {
        let work = Self::open_inner(broker, client_id, security, timeout);
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| ConnError::Timeout {
                broker: broker.to_string(),
                api: "connect",
                after: timeout,
            })?
    }

    /// [`Conn::open`] without the overall timeout.
    async fn open_inner(
        broker: &str,
        client_id: &str,
        security: &GroupSecurity,
        timeout: Duration,
    ) -> Result<Conn, ConnError> {
        let host = host_of(broker)?;
        let tcp = TcpStream::connect(broker)
            .await
            .map_err(|source| ConnError::Connect {
                broker: broker.to_string(),
                source,
            })?;
        let _ = tcp.set_nodelay(true);
        let io: Box<dyn Io> = match &security.tls {
            None => Box::new(tcp),
            Some(tls) => Box::new(tls_handshake(broker, &host, tls, tcp).await?),
        };
        let mut conn = Conn {
            broker: broker.to_string(),
            client_id: StrBytes::from_string(client_id.to_string()),
            io,
            next_correlation: 1,
            versions: HashMap::new(),
            broken: false,
        };
        conn.negotiate(timeout).await?;
        if let Some(settings) = &security.sasl {
            sasl::authenticate(&mut conn, settings, timeout).await?;
        }
        Ok(conn)
    }

    /// The broker's address.
    pub(crate) fn broker(&self) -> &str {
        &self.broker
    }

    /// ApiVersions: v3 first; a broker that refuses it answers in v0.
    async fn negotiate(&mut self, timeout: Duration) -> Result<(), ConnError> {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("walrelay"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let mut resp = self.call(&req, 3, timeout).await?;
        if resp.error_code == 35 {
            resp = self.call(&req, 0, timeout).await?;
        }
        if resp.error_code != 0 {
            return Err(self.broker_error("ApiVersions", resp.error_code, None));
        }
        for k in &resp.api_keys {
            self.versions
                .insert(k.api_key, (k.min_version, k.max_version));
        }
        Ok(())
    }

    /// The version to use for `R`: the highest both sides speak.
    pub(crate) fn version<R: Api>(&self) -> Result<i16, ConnError> {
        let (bmin, bmax) = self
            .versions
            .get(&(R::KEY as i16))
            .copied()
            .unwrap_or((0, -1));
        let v = bmax.min(R::MAX);
        if v < bmin.max(R::MIN) {
            return Err(ConnError::Unsupported {
                broker: self.broker.clone(),
                api: R::NAME,
                broker_min: bmin,
                broker_max: bmax,
                min: R::MIN,
                max: R::MAX,
            });
        }
        Ok(v)
    }

    /// An error for a response's error code.
    pub(crate) fn broker_error(
        &self,
        api: &'static str,
        code: i16,
        message: Option<&StrBytes>,
    ) -> ConnError {
        ConnError::Broker {
            broker: self.broker.clone(),
            api,
            code,
            name: error_name(code),
            message: message.map(ToString::to_string),
        }
    }

    /// Sends `req` at the negotiated version and reads its response.
    pub(crate) async fn request<R: Api>(
        &mut self,
        req: &R,
        timeout: Duration,
    ) -> Result<R::Response, ConnError> {
        let version = self.version::<R>()?;
        self.call(req, version, timeout).await
    }

    /// Sends `req` at `version` and reads its response within `timeout`;
    /// on any failure the connection is marked broken.
    pub(crate) async fn call<R: Api>(
        &mut self,
        req: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response, ConnError> {
        if self.broken {
            return Err(ConnError::Broken {
                broker: self.broker.clone(),
            });
        }
        self.broken = true;
        let frame = self.frame(req, version)?;
        let correlation = self.next_correlation - 1;
        let exchange = self.exchange::<R>(frame);
        let mut body = match tokio::time::timeout(timeout, exchange).await {
            Ok(r) => r?,
            Err(_) => {
                return Err(ConnError::Timeout {
                    broker: self.broker.clone(),
                    api: R::NAME,
                    after: timeout,
                })
            }
        };
        let header_version = R::KEY.response_header_version(version);
        let header = ResponseHeader::decode(&mut body, header_version)
            .map_err(|e| self.codec::<R>(version, &e))?;
        if header.correlation_id != correlation {
            return Err(ConnError::Correlation {
                broker: self.broker.clone(),
                api: R::NAME,
                expected: correlation,
                got: header.correlation_id,
            });
        }
        let resp =
            R::Response::decode(&mut body, version).map_err(|e| self.codec::<R>(version, &e))?;
        self.broken = false;
        Ok(resp)
    }

    /// A codec error for `R`.
    fn codec<R: Api>(&self, version: i16, e: &dyn std::fmt::Display) -> ConnError {
        ConnError::Codec {
            broker: self.broker.clone(),
            api: R::NAME,
            version,
            detail: e.to_string(),
        }
    }

    /// The request's frame: length, header, body.
    fn frame<R: Api>(&mut self, req: &R, version: i16) -> Result<BytesMut, ConnError> {
        let correlation = self.next_correlation;
        self.next_correlation = self.next_correlation.wrapping_add(1).max(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation)
            .with_client_id(Some(self.client_id.clone()));
        let mut buf = BytesMut::with_capacity(256);
        buf.extend_from_slice(&[0, 0, 0, 0]);
        let header_version = R::KEY.request_header_version(version);
        header
            .encode(&mut buf, header_version)
            .map_err(|e| self.codec::<R>(version, &e))?;
        req.encode(&mut buf, version)
            .map_err(|e| self.codec::<R>(version, &e))?;
        let len = i32::try_from(buf.len() - 4).unwrap_or(i32::MAX);
        buf[..4].copy_from_slice(&len.to_be_bytes());
        Ok(buf)
    }

    /// Writes one frame and reads one back (without the length).
    async fn exchange<R: Api>(&mut self, frame: BytesMut) -> Result<bytes::Bytes, ConnError> {
        let io_err = |source| ConnError::Io {
            broker: self.broker.clone(),
            api: R::NAME,
            source,
        };
        self.io.write_all(&frame).await.map_err(io_err)?;
        self.io.flush().await.map_err(io_err)?;
        let mut len = [0u8; 4];
        self.io.read_exact(&mut len).await.map_err(io_err)?;
        let size = i32::from_be_bytes(len);
        let size = usize::try_from(size)
            .ok()
            .filter(|s| *s <= MAX_FRAME && *s >= 4)
            .ok_or(ConnError::Frame {
                broker: self.broker.clone(),
                api: R::NAME,
                size: i64::from(size),
            })?;
        let mut body = BytesMut::zeroed(size);
        self.io.read_exact(&mut body).await.map_err(io_err)?;
        Ok(body.freeze())
    }
}

/// The host part of `host:port` (brackets of an IPv6 literal removed).
fn host_of(broker: &str) -> Result<String, ConnError> {
    let bad = || ConnError::Address {
        broker: broker.to_string(),
    };
    let (host, port) = broker.rsplit_once(':').ok_or_else(bad)?;
    port.parse::<u16>().map_err(|_| bad())?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(bad());
    }
    Ok(host.to_string())
}

/// The TLS handshake over `tcp`, trusting `ca_file` (or the system's CAs),
/// presenting the client certificate when configured.
async fn tls_handshake(
    broker: &str,
    host: &str,
    tls: &TlsSettings,
    tcp: TcpStream,
) -> Result<tokio_openssl::SslStream<TcpStream>, ConnError> {
    let err = |detail: String| ConnError::Tls {
        broker: broker.to_string(),
        detail,
    };
    let mut builder = SslConnector::builder(SslMethod::tls_client())
        .map_err(|e| err(format!("OpenSSL setup: {e}")))?;
    if let Some(ca) = &tls.ca_file {
        builder
            .set_ca_file(ca)
            .map_err(|e| err(format!("CA file {}: {e}", ca.display())))?;
    }
    match (&tls.cert_file, &tls.key_file) {
        (Some(cert), Some(key)) => {
            builder
                .set_certificate_chain_file(cert)
                .map_err(|e| err(format!("client certificate {}: {e}", cert.display())))?;
            builder
                .set_private_key_file(key, SslFiletype::PEM)
                .map_err(|e| err(format!("client key {}: {e}", key.display())))?;
            builder
                .check_private_key()
                .map_err(|e| err(format!("client key does not match the certificate: {e}")))?;
        }
        (None, None) => {}
        _ => {
            return Err(err(
                "a client certificate needs both its file and its key file".into(),
            ))
        }
    }
    builder.set_verify(SslVerifyMode::PEER);
    let connector = builder.build();
    let mut config = connector
        .configure()
        .map_err(|e| err(format!("OpenSSL setup: {e}")))?;
    config.set_verify_hostname(tls.verify_hostname);
    let ssl = config
        .into_ssl(host)
        .map_err(|e| err(format!("OpenSSL setup for host {host}: {e}")))?;
    let mut stream =
        tokio_openssl::SslStream::new(ssl, tcp).map_err(|e| err(format!("OpenSSL setup: {e}")))?;
    Pin::new(&mut stream)
        .connect()
        .await
        .map_err(|e| err(format!("handshake: {e}")))?;
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_names_are_kafkas() {
        assert_eq!(error_name(16), "NOT_COORDINATOR");
        assert_eq!(error_name(79), "MEMBER_ID_REQUIRED");
        assert_eq!(error_name(27), "REBALANCE_IN_PROGRESS");
        assert_eq!(error_name(0), "NONE");
        assert_eq!(error_name(9999), "UNKNOWN_ERROR_CODE_9999");
    }

    #[test]
    fn hosts_of_addresses() {
        assert_eq!(host_of("kafka-1:9092").unwrap(), "kafka-1");
        assert_eq!(host_of("[::1]:9092").unwrap(), "::1");
        assert!(host_of("kafka-1").is_err());
        assert!(host_of(":9092").is_err());
    }

    #[tokio::test]
    async fn negotiates_versions_with_the_test_broker() {
        let Ok(broker) = std::env::var("WALRELAY_TEST_KAFKA") else {
            eprintln!(
                "WALRELAY_TEST_KAFKA unset: skipping negotiates_versions_with_the_test_broker"
            );
            return;
        };
        let sec = GroupSecurity::default();
        let conn = Conn::open(&broker, "walrelay-test", &sec, Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(conn.version::<JoinGroupRequest>().unwrap(), 9);
        assert_eq!(conn.version::<HeartbeatRequest>().unwrap(), 4);
        assert!(conn.version::<SyncGroupRequest>().unwrap() >= 3);
    }

    #[tokio::test]
    async fn tls_to_a_plaintext_port_fails_naming_the_broker() {
        let Ok(broker) = std::env::var("WALRELAY_TEST_KAFKA") else {
            eprintln!("WALRELAY_TEST_KAFKA unset: skipping tls_to_a_plaintext_port_fails_naming_the_broker");
            return;
        };
        let sec = GroupSecurity {
            tls: Some(TlsSettings {
                ca_file: None,
                cert_file: None,
                key_file: None,
                verify_hostname: true,
            }),
            sasl: None,
        };
        let err = Conn::open(&broker, "walrelay-test", &sec, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(err.to_string().contains(&broker), "{err}");
    }

    /// A key and a certificate for `cn` (with `san` as DNS name), signed
    /// by `issuer` (self-signed CA when `None`).
    fn cert(
        cn: &str,
        san: Option<&str>,
        issuer: Option<(
            &openssl::x509::X509,
            &openssl::pkey::PKey<openssl::pkey::Private>,
        )>,
    ) -> (
        openssl::x509::X509,
        openssl::pkey::PKey<openssl::pkey::Private>,
    ) {
        use openssl::x509::extension::{BasicConstraints, SubjectAlternativeName};
        let key =
            openssl::pkey::PKey::from_rsa(openssl::rsa::Rsa::generate(2048).unwrap()).unwrap();
        let mut name = openssl::x509::X509NameBuilder::new().unwrap();
        name.append_entry_by_text("CN", cn).unwrap();
        let name = name.build();
        let mut b = openssl::x509::X509Builder::new().unwrap();
        b.set_version(2).unwrap();
        let serial = openssl::bn::BigNum::from_u32(rand::random::<u32>() >> 1).unwrap();
        b.set_serial_number(&serial.to_asn1_integer().unwrap())
            .unwrap();
        b.set_subject_name(&name).unwrap();
        b.set_pubkey(&key).unwrap();
        b.set_not_before(&openssl::asn1::Asn1Time::days_from_now(0).unwrap())
            .unwrap();
        b.set_not_after(&openssl::asn1::Asn1Time::days_from_now(2).unwrap())
            .unwrap();
        match issuer {
            None => {
                b.set_issuer_name(&name).unwrap();
                b.append_extension(BasicConstraints::new().critical().ca().build().unwrap())
                    .unwrap();
                b.sign(&key, openssl::hash::MessageDigest::sha256())
                    .unwrap();
            }
            Some((ca, ca_key)) => {
                b.set_issuer_name(ca.subject_name()).unwrap();
                if let Some(dns) = san {
                    let ext = SubjectAlternativeName::new()
                        .dns(dns)
                        .build(&b.x509v3_context(Some(ca), None))
                        .unwrap();
                    b.append_extension(ext).unwrap();
                }
                b.sign(ca_key, openssl::hash::MessageDigest::sha256())
                    .unwrap();
            }
        }
        (b.build(), key)
    }

    /// Writes PEM bytes to a file in `dir`.
    fn pem(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// A TLS front for the test broker on 127.0.0.1 (certificate for
    /// `localhost`, client certificates signed by the CA required), and
    /// the files the client needs: (port, ca, client cert, client key).
    async fn tls_front(
        broker: String,
        dir: &tempfile::TempDir,
    ) -> (u16, PathBuf, PathBuf, PathBuf) {
        use openssl::ssl::SslAcceptor;
        let (ca, ca_key) = cert("walrelay test CA", None, None);
        let (server, server_key) = cert("localhost", Some("localhost"), Some((&ca, &ca_key)));
        let (client, client_key) = cert("worker", None, Some((&ca, &ca_key)));
        let ca_file = pem(dir, "ca.pem", &ca.to_pem().unwrap());
        let mut acc = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server()).unwrap();
        acc.set_certificate(&server).unwrap();
        acc.set_private_key(&server_key).unwrap();
        acc.set_ca_file(&ca_file).unwrap();
        acc.set_verify(SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT);
        let acc = acc.build();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acc, broker) = (acc.clone(), broker.clone());
                tokio::spawn(async move {
                    let ssl = openssl::ssl::Ssl::new(acc.context()).unwrap();
                    let mut tls = tokio_openssl::SslStream::new(ssl, tcp).unwrap();
                    if Pin::new(&mut tls).accept().await.is_err() {
                        return;
                    }
                    let mut up = TcpStream::connect(broker).await.unwrap();
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
                });
            }
        });
        let cert_file = pem(dir, "client.pem", &client.to_pem().unwrap());
        let key_file = pem(
            dir,
            "client.key",
            &client_key.private_key_to_pem_pkcs8().unwrap(),
        );
        (port, ca_file, cert_file, key_file)
    }

    #[tokio::test]
    async fn tls_with_ca_client_certificate_and_hostname_verification() {
        let Ok(broker) = std::env::var("WALRELAY_TEST_KAFKA") else {
            eprintln!("WALRELAY_TEST_KAFKA unset: skipping tls_with_ca_client_certificate_and_hostname_verification");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let (port, ca, cert, key) = tls_front(broker, &dir).await;
        let t = Duration::from_secs(10);
        let tls = |verify_hostname, client: bool| GroupSecurity {
            tls: Some(TlsSettings {
                ca_file: Some(ca.clone()),
                cert_file: client.then(|| cert.clone()),
                key_file: client.then(|| key.clone()),
                verify_hostname,
            }),
            sasl: None,
        };
        let by_name = format!("localhost:{port}");
        let by_ip = format!("127.0.0.1:{port}");
        // Through TLS, ApiVersions reaches the broker.
        let conn = Conn::open(&by_name, "t", &tls(true, true), t)
            .await
            .unwrap();
        assert_eq!(conn.version::<JoinGroupRequest>().unwrap(), 9);
        // The certificate names localhost, not 127.0.0.1.
        let e = Conn::open(&by_ip, "t", &tls(true, true), t)
            .await
            .unwrap_err();
        assert!(matches!(e, ConnError::Tls { .. }), "{e}");
        Conn::open(&by_ip, "t", &tls(false, true), t).await.unwrap();
        // The front requires a client certificate.
        assert!(Conn::open(&by_name, "t", &tls(true, false), t)
            .await
            .is_err());
        // Without the CA, the front's certificate is not trusted.
        let mut untrusted = tls(true, true);
        if let Some(s) = untrusted.tls.as_mut() {
            s.ca_file = None;
        }
        let e = Conn::open(&by_name, "t", &untrusted, t).await.unwrap_err();
        assert!(e.to_string().contains(&by_name), "{e}");
    }
}
