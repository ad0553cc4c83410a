//! The metrics listener secured by a web configuration file (the
//! Prometheus exporter-toolkit's format, `[metrics] web_config_file`): a
//! real relay whose listener speaks TLS on `scripts/certs.sh`'s
//! certificates, asked with OpenSSL clients (ALPN, client certificates,
//! raw HTTP/1.1 and hyper's HTTP/2) and with the real `walrelay status`
//! binary (`--ca-file`, `--cert-file`/`--key-file`, `--user` with the
//! password from a file or the environment), and the operator's page in
//! headless Chromium through TLS and basic auth. A bad file refuses the
//! start, naming the file and the key.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use openssl::ssl::{SslConnector, SslFiletype, SslMethod, SslVerifyMode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_openssl::SslStream;

use crate::common::kafka_bootstrap;
use crate::common::metrics::free_port;
use crate::common::relay::{Outbox, Relay, WAIT};
use crate::common::run_script;

/// The password of the test user `alice`.
const PASSWORD: &str = "correct-horse-battery-staple";

/// A relay whose listener is secured by `web` (YAML, in the certificates'
/// directory), and where to reach it.
struct Secured {
    relay: Relay,
    port: u16,
    certs: tempfile::TempDir,
    _outbox: Outbox,
}

impl Secured {
    /// Certificates, the web file `web`, and a relay using them; returns
    /// once the listener accepts connections.
    async fn start(test: &str, web: &str) -> Secured {
        let certs = tempfile::tempdir().expect("certs dir");
        run_script("certs.sh", &[certs.path().as_os_str()]);
        let mut secured = Secured::start_in(test, web, certs).await;
        let deadline = Instant::now() + WAIT;
        while TcpStream::connect(("127.0.0.1", secured.port))
            .await
            .is_err()
        {
            secured.relay.assert_running();
            assert!(Instant::now() < deadline, "{}", secured.relay.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        secured
    }

    /// The relay of `web` with the certificates of `certs`, not waited for.
    async fn start_in(test: &str, web: &str, certs: tempfile::TempDir) -> Secured {
        let file = certs.path().join("web.yml");
        std::fs::write(&file, web).expect("write web.yml");
        let outbox = Outbox::new(test).await;
        let port = free_port();
        let config = outbox.config_with(
            &kafka_bootstrap(),
            &format!(
                "[metrics]\nlisten = \"127.0.0.1:{port}\"\nweb_config_file = \"{}\"\n",
                file.display()
            ),
        );
        Secured {
            relay: Relay::start(&config),
            port,
            certs,
            _outbox: outbox,
        }
    }

    /// A file of the certificates' directory.
    fn file(&self, name: &str) -> PathBuf {
        self.certs.path().join(name)
    }

    /// A TLS connection to the listener trusting `ca`, offering `alpn`,
    /// with the client certificate `client` (certs.sh's `client.*`).
    async fn connect(
        &self,
        ca: &str,
        alpn: &[u8],
        client: bool,
    ) -> Result<SslStream<TcpStream>, String> {
        let mut b = SslConnector::builder(SslMethod::tls_client()).map_err(|e| e.to_string())?;
        b.set_ca_file(self.file(ca)).map_err(|e| e.to_string())?;
        b.set_verify(SslVerifyMode::PEER);
        b.set_alpn_protos(alpn).map_err(|e| e.to_string())?;
        if client {
            b.set_certificate_chain_file(self.file("client.crt"))
                .and_then(|()| b.set_private_key_file(self.file("client.key"), SslFiletype::PEM))
                .map_err(|e| e.to_string())?;
        }
        let ssl = b
            .build()
            .configure()
            .and_then(|c| c.into_ssl("localhost"))
            .map_err(|e| e.to_string())?;
        let tcp = TcpStream::connect(("127.0.0.1", self.port))
            .await
            .map_err(|e| e.to_string())?;
        let mut stream = SslStream::new(ssl, tcp).map_err(|e| e.to_string())?;
        Pin::new(&mut stream)
            .connect()
            .await
            .map_err(|e| e.to_string())?;
        Ok(stream)
    }

    /// GET `path` over HTTPS/1.1 (trusting certs.sh's CA), with the client
    /// certificate when `client`, and `authorization`: the whole answer.
    async fn get(
        &self,
        path: &str,
        client: bool,
        authorization: Option<&str>,
    ) -> Result<String, String> {
        let mut s = self.connect("ca.crt", b"\x08http/1.1", client).await?;
        let auth = authorization
            .map(|a| format!("Authorization: {a}\r\n"))
            .unwrap_or_default();
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{auth}\r\n");
        s.write_all(request.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.map_err(|e| e.to_string())?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// `walrelay status` against the listener with `args` and the
    /// password in the environment: exit code, stdout, stderr.
    fn status(&self, args: &[&str], password: Option<&str>) -> (Option<i32>, String, String) {
        let url = format!("https://localhost:{}", self.port);
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_walrelay"));
        cmd.args(["status", "--metrics-addr", &url]).args(args);
        cmd.env_remove("WALRELAY_STATUS_PASSWORD");
        if let Some(p) = password {
            cmd.env("WALRELAY_STATUS_PASSWORD", p);
        }
        let out = cmd.output().expect("run walrelay status");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// The TLS keys of a web file on certs.sh's server certificate.
const TLS: &str = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";

/// `Basic base64(user:password)`.
fn basic(user: &str, password: &str) -> String {
    let raw = format!("{user}:{password}");
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(raw)
    )
}

/// The ALPN protocol the listener chose for a client offering h2 and
/// HTTP/1.1.
async fn alpn(s: &Secured) -> Option<Vec<u8>> {
    let stream = s
        .connect("ca.crt", b"\x02h2\x08http/1.1", false)
        .await
        .expect("tls handshake");
    stream.ssl().selected_alpn_protocol().map(<[u8]>::to_vec)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_serves_https_and_http2_to_clients_of_the_ca() {
    let s = Secured::start("listener_tls", TLS).await;
    let metrics = s.get("/metrics", false, None).await.expect("https get");
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
    assert!(metrics.contains("walrelay_up 1"), "{metrics}");
    // Plain HTTP is not served.
    let plain = walrelay::status::client::get(&format!("127.0.0.1:{}", s.port), "/metrics").await;
    assert!(plain.is_err(), "plain http answered: {plain:?}");
    // A client that trusts another CA refuses the server.
    assert!(s
        .connect("other-ca.crt", b"\x08http/1.1", false)
        .await
        .is_err());
    // HTTP/2 through ALPN, and a real HTTP/2 exchange.
    assert_eq!(alpn(&s).await.as_deref(), Some(&b"h2"[..]));
    let stream = s
        .connect("ca.crt", b"\x02h2", false)
        .await
        .expect("tls handshake");
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .expect("http/2 handshake");
    tokio::spawn(conn);
    let req = hyper::Request::get("https://localhost/healthz")
        .body(http_body_util::Empty::<Bytes>::new())
        .expect("request");
    let resp = send.send_request(req).await.expect("http/2 request");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.version(), hyper::Version::HTTP_2);
    // `walrelay status` over https, trusting the CA; not without it.
    let ca = s.file("ca.crt");
    let (code, out, err) = s.status(&["--ca-file", ca.to_str().expect("utf-8 path")], None);
    assert_eq!(code, Some(0), "{out}\n{err}\n{}", s.relay.log());
    assert!(out.contains("state "), "{out}");
    let (code, _, err) = s.status(&[], None);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&format!("localhost:{}", s.port)), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_off_negotiates_http1_only() {
    let web = format!("{TLS}http_server_config:\n  http2: false\n");
    let s = Secured::start("listener_h1", &web).await;
    assert_eq!(alpn(&s).await.as_deref(), Some(&b"http/1.1"[..]));
    let metrics = s.get("/metrics", false, None).await.expect("https get");
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_are_required_and_verified() {
    let web =
        format!("{TLS}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n");
    let s = Secured::start("listener_mtls", &web).await;
    // Without a certificate: no answer (the handshake, or the first read
    // after it in TLS 1.3, fails).
    let refused = s.get("/metrics", false, None).await;
    assert!(
        !refused.as_deref().unwrap_or("").starts_with("HTTP/1.1 200"),
        "{refused:?}"
    );
    let with = s.get("/metrics", true, None).await.expect("https get");
    assert!(with.starts_with("HTTP/1.1 200"), "{with}");
    let ca = s.file("ca.crt");
    let cert = s.file("client.crt");
    let key = s.file("client.key");
    let path = |p: &Path| p.to_str().expect("utf-8 path").to_owned();
    let (code, out, err) = s.status(
        &[
            "--ca-file",
            &path(&ca),
            "--cert-file",
            &path(&cert),
            "--key-file",
            &path(&key),
        ],
        None,
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    let (code, _, err) = s.status(&["--ca-file", &path(&ca)], None);
    assert_eq!(code, Some(1), "status without a certificate: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic_auth_needs_the_right_password_and_says_nothing_else() {
    let hash = bcrypt::hash(PASSWORD, 4).expect("bcrypt");
    let web = format!("{TLS}basic_auth_users:\n  alice: '{hash}'\n");
    let s = Secured::start("listener_auth", &web).await;
    let right = s
        .get("/api/state", false, Some(&basic("alice", PASSWORD)))
        .await
        .expect("https get");
    assert!(right.starts_with("HTTP/1.1 200"), "{right}");
    let wrong = s
        .get("/metrics", false, Some(&basic("alice", "wrong")))
        .await
        .expect("https get");
    let unknown = s
        .get("/metrics", false, Some(&basic("mallory", PASSWORD)))
        .await
        .expect("https get");
    let none = s.get("/metrics", false, None).await.expect("https get");
    let body = |answer: &str| answer.split_once("\r\n\r\n").map(|(_, b)| b.to_owned());
    for answer in [&wrong, &unknown, &none] {
        assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
        assert!(
            answer
                .to_ascii_lowercase()
                .contains("www-authenticate: basic\r\n"),
            "{answer}"
        );
        assert_eq!(body(answer).as_deref(), Some("Unauthorized\n"), "{answer}");
        assert!(!answer.contains("alice") && !answer.contains("mallory"));
    }
    // `walrelay status` with the password from the environment, then
    // from a file; a wrong one is a clear error.
    let ca = s.file("ca.crt");
    let ca = ca.to_str().expect("utf-8 path");
    let (code, out, err) = s.status(&["--ca-file", ca, "--user", "alice"], Some(PASSWORD));
    assert_eq!(code, Some(0), "{out}\n{err}");
    let password_file = s.file("password");
    std::fs::write(&password_file, format!("{PASSWORD}\n")).expect("write password");
    let pf = password_file.to_str().expect("utf-8 path");
    let (code, out, err) = s.status(
        &["--ca-file", ca, "--user", "alice", "--password-file", pf],
        None,
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    let (code, _, err) = s.status(&["--ca-file", ca, "--user", "alice"], Some("wrong"));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("answered 401 Unauthorized: check --user and the password")
            || err.contains("answered 401: check --user and the password"),
        "{err}"
    );
    assert!(
        err.contains(&format!("https://localhost:{}/api/state", s.port)),
        "{err}"
    );
    assert!(!err.contains("wrong"), "the password in an error: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_web_configuration_file_refuses_the_start() {
    let certs = tempfile::tempdir().expect("certs dir");
    let web = "tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n";
    let mut s = Secured::start_in("listener_bad", web, certs).await;
    let code = s.relay.exit_code(WAIT);
    assert_ne!(code, 0);
    let log = s.relay.log();
    assert!(log.contains("tls_server_config.cert_file"), "{log}");
    assert!(log.contains("missing.crt"), "{log}");
    assert!(log.contains("web.yml"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_works_through_tls_and_basic_auth_in_a_browser() {
    let browser = crate::operator_page::chromium();
    let hash = bcrypt::hash(PASSWORD, 4).expect("bcrypt");
    let web = format!("{TLS}basic_auth_users:\n  alice: '{hash}'\n");
    let s = Secured::start("listener_page", &web).await;
    // Chromium takes the credentials of a top-level URL; the page's own
    // fetches of api/state (same origin) carry them. The test CA is not
    // the browser's, hence --ignore-certificate-errors.
    let url = format!("https://alice:{PASSWORD}@localhost:{}/", s.port);
    let dom =
        crate::operator_page::dump_dom_at(&browser, &url, &["--ignore-certificate-errors"]).await;
    // The page's fetches succeeded: no stale notice, and the pipeline's
    // row (from /api/state) drawn.
    assert!(dom.contains("<span id=\"stale\"></span>"), "{dom}");
    assert!(
        dom.contains("<tr data-pipeline=\"default\""),
        "no row of the pipeline:\n{dom}"
    );
    // Without credentials nothing is served: see the basic auth test.
}
