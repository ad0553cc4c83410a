//! The web configuration file's keys, what is refused and how it is
//! named, basic auth's answers, and that no secret reaches `Debug`.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use hyper::header::{HeaderMap, HeaderValue, AUTHORIZATION};

use super::*;

/// The password of the test users.
const PASSWORD: &str = "s3cret-pass";

/// Certificates made by `scripts/certs.sh` in a fresh directory.
fn certs() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/certs.sh");
    let out = std::process::Command::new("bash")
        .arg(script)
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    dir
}

/// A bcrypt hash of `password` at the lowest cost (fast tests).
fn hash(password: &str) -> String {
    bcrypt::hash(password, 4).unwrap()
}

/// Writes `text` as `web.yml` in `dir` and loads it.
fn load_in(dir: &Path, text: &str) -> Result<Web, WebConfigError> {
    let path = dir.join("web.yml");
    std::fs::write(&path, text).unwrap();
    Web::load(&path)
}

/// The error of loading `text` in `dir`, as one line with its causes.
fn error_in(dir: &Path, text: &str) -> String {
    match load_in(dir, text) {
        Ok(web) => panic!("loaded: {web:?}"),
        Err(e) => crate::chain::DisplayChain(&e).to_string(),
    }
}

#[test]
fn every_key_of_the_format_is_read() {
    let dir = certs();
    let text = format!(
        "tls_server_config:
  cert_file: server.crt
  key_file: server.key
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: ca.crt
  client_allowed_sans: [walrelay.example]
  min_version: TLS12
  max_version: TLS13
  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA256]
  curve_preferences: [X25519, CurveP256, CurveP384, CurveP521]
  prefer_server_cipher_suites: false
http_server_config:
  http2: false
  headers:
    Strict-Transport-Security: max-age=31536000
    X-Content-Type-Options: nosniff
    X-Frame-Options: deny
    X-XSS-Protection: '1; mode=block'
    Content-Security-Policy: \"default-src 'none'\"
basic_auth_users:
  alice: '{}'
rate_limit:
  interval: 1s
  burst: 20
",
        hash(PASSWORD)
    );
    let web = load_in(dir.path(), &text).unwrap();
    assert_eq!(
        web.client_auth(),
        Some(ClientAuth::RequireAndVerifyClientCert)
    );
    assert!(web.has_basic_auth());
    assert_eq!(web.headers.len(), 5);
    assert!(web.rate.is_some());
    // Without TLS keys the listener stays plain, as the toolkit's.
    let plain = load_in(dir.path(), "http_server_config:\n  http2: true\n").unwrap();
    assert!(plain.acceptor().is_none() && !plain.has_basic_auth());
    assert!(load_in(dir.path(), "").unwrap().acceptor().is_none());
}

#[test]
fn inline_certificate_and_key_are_read() {
    let dir = certs();
    let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).unwrap();
    let indent = |pem: String| pem.replace('\n', "\n    ");
    let text = format!(
        "tls_server_config:\n  cert: |\n    {}\n  key: |\n    {}\n  client_ca: |\n    {}\n  client_auth_type: VerifyClientCertIfGiven\n",
        indent(read("server.crt")),
        indent(read("server.key")),
        indent(read("ca.crt")),
    );
    let web = load_in(dir.path(), &text).unwrap();
    assert_eq!(web.client_auth(), Some(ClientAuth::VerifyClientCertIfGiven));
    // The inline key is a secret: not in Debug, nor in an error.
    let key_line = read("server.key").lines().nth(1).unwrap().to_owned();
    assert!(!format!("{web:?}").contains(&key_line));
    let wrong = text.replace("VerifyClientCertIfGiven", "Bogus");
    let err = error_in(dir.path(), &wrong);
    assert!(!err.contains(&key_line), "{err}");
}

#[test]
fn unknown_keys_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    for (text, key) in [
        ("tls_config:\n  cert_file: x\n", "tls_config"),
        ("tls_server_config:\n  certfile: x\n", "certfile"),
        ("http_server_config:\n  http3: true\n", "http3"),
        ("rate_limit:\n  every: 1s\n", "every"),
    ] {
        let err = error_in(dir.path(), text);
        assert!(err.contains(key), "{key}: {err}");
        assert!(err.contains("web.yml"), "{err}");
    }
}

#[test]
fn a_bad_client_auth_type_is_named() {
    let dir = certs();
    let err = error_in(
        dir.path(),
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: RequireCert\n",
    );
    assert!(err.contains("tls_server_config.client_auth_type"), "{err}");
    assert!(err.contains("\"RequireCert\""), "{err}");
    // The toolkit's older name is still read.
    let web = load_in(
        dir.path(),
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: RequireClientCert\n",
    )
    .unwrap();
    assert_eq!(web.client_auth(), Some(ClientAuth::RequireAnyClientCert));
}

#[test]
fn a_missing_certificate_file_is_named() {
    let dir = certs();
    let err = error_in(
        dir.path(),
        "tls_server_config:\n  cert_file: nowhere.crt\n  key_file: server.key\n",
    );
    assert!(err.contains("tls_server_config.cert_file"), "{err}");
    assert!(
        err.contains(&dir.path().join("nowhere.crt").display().to_string()),
        "{err}"
    );
    let err = error_in(dir.path(), "tls_server_config:\n  key_file: server.key\n");
    assert!(err.contains("missing one of cert or cert_file"), "{err}");
    // A key of another certificate.
    let err = error_in(
        dir.path(),
        "tls_server_config:\n  cert_file: server.crt\n  key_file: client.key\n",
    );
    assert!(err.contains("tls_server_config.key_file"), "{err}");
    assert!(err.contains("client.key: does not match"), "{err}");
    let missing = PathBuf::from("/nonexistent/web.yml");
    let err = crate::chain::DisplayChain(&Web::load(&missing).unwrap_err()).to_string();
    assert!(err.contains("/nonexistent/web.yml"), "{err}");
}

#[test]
fn what_cannot_be_honoured_is_refused_by_name() {
    let dir = certs();
    let tls = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";
    for (extra, key, why) in [
        (
            "  min_version: TLS10\n",
            "min_version",
            "TLS10 is not supported",
        ),
        (
            "  max_version: TLS11\n",
            "max_version",
            "TLS11 is not supported",
        ),
        ("  min_version: SSL3\n", "min_version", "\"SSL3\""),
        (
            "  curve_preferences: [P256]\n",
            "curve_preferences",
            "\"P256\"",
        ),
        ("  cipher_suites: [RC4]\n", "cipher_suites", "\"RC4\""),
        (
            "  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
            "cipher_suites",
            "only TLS 1.3",
        ),
        (
            "  client_ca_file: ca.crt\n",
            "client_auth_type",
            "without a client auth type",
        ),
        (
            "  client_auth_type: VerifyClientCertIfGiven\n  client_allowed_sans: [a]\n",
            "client_allowed_sans",
            "RequireAnyClientCert",
        ),
        ("  cert: x\n", "tls_server_config.cert", "not both"),
    ] {
        let err = error_in(dir.path(), &format!("{tls}{extra}"));
        assert!(err.contains(key) && err.contains(why), "{extra}: {err}");
    }
    for (text, key) in [
        (
            "http_server_config:\n  headers:\n    Server: x\n",
            "http_server_config.headers.Server",
        ),
        (
            "http_server_config:\n  headers:\n    X-Frame-Options: allow\n",
            "http_server_config.headers.X-Frame-Options",
        ),
        ("basic_auth_users:\n  bob: plain\n", "basic_auth_users.bob"),
        ("rate_limit:\n  interval: soon\n", "rate_limit.interval"),
    ] {
        let err = error_in(dir.path(), text);
        assert!(err.contains(key), "{text}: {err}");
    }
}

#[test]
fn go_durations() {
    for (text, nanos) in [
        ("0", Some(0)),
        ("1s", Some(1_000_000_000)),
        ("250ms", Some(250_000_000)),
        ("1m30s", Some(90_000_000_000)),
        ("1.5h", Some(5_400_000_000_000)),
        ("-2us", Some(-2_000)),
        ("10", None),
        ("s", None),
        ("", None),
    ] {
        assert_eq!(file::go_duration_nanos(text), nanos, "{text}");
    }
}

/// A header map with `Authorization: <value>`.
fn authorization(value: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(AUTHORIZATION, HeaderValue::from_str(value).unwrap());
    h
}

/// `Basic base64(user:password)`.
fn basic(user: &str, password: &str) -> String {
    let raw = format!("{user}:{password}");
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(raw)
    )
}

/// The status, `WWW-Authenticate` and body of what `web` answers.
async fn answer(web: &Web, headers: &HeaderMap) -> Option<(u16, String, String)> {
    use http_body_util::BodyExt;
    let resp = web.refuse(headers).await?;
    let status = resp.status().as_u16();
    let challenge = resp
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    Some((status, challenge, String::from_utf8(body.to_vec()).unwrap()))
}

#[tokio::test]
async fn basic_auth_lets_in_the_right_password_only() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "basic_auth_users:\n  alice: '{}'\n  bob: '{}'\n",
        hash(PASSWORD),
        hash("bobs")
    );
    let web = load_in(dir.path(), &text).unwrap();
    assert_eq!(
        answer(&web, &authorization(&basic("alice", PASSWORD))).await,
        None
    );
    // Twice: the second from the cache, the same answer.
    assert_eq!(
        answer(&web, &authorization(&basic("alice", PASSWORD))).await,
        None
    );
    assert_eq!(
        answer(&web, &authorization(&basic("bob", "bobs"))).await,
        None
    );
    let refused = [
        authorization(&basic("alice", "wrong")),
        authorization(&basic("alice", "bobs")),
        authorization(&basic("mallory", PASSWORD)),
        authorization(&basic("", "")),
        HeaderMap::new(),
        authorization("Basic not-base64!"),
        authorization("Bearer abc"),
        authorization(&format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("alice-without-colon")
        )),
    ];
    for headers in &refused {
        let (status, challenge, body) = answer(&web, headers).await.unwrap();
        assert_eq!(status, 401, "{headers:?}");
        assert_eq!(challenge, "Basic");
        // The same body whatever was wrong, naming nobody.
        assert_eq!(body, UNAUTHORIZED_BODY);
    }
}

#[test]
fn an_unknown_user_costs_a_bcrypt_verification() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "basic_auth_users:\n  alice: '{}'\n",
        bcrypt::hash(PASSWORD, 8).unwrap()
    );
    let web = load_in(dir.path(), &text).unwrap();
    let auth = web.auth.as_ref().unwrap();
    // The decoy has the users' cost: an unknown user is not answered faster.
    let decoy: bcrypt::HashParts = auth.decoy_hash().parse().unwrap();
    assert_eq!(decoy.get_cost(), 8);
    let time = |user: &str| {
        let t = std::time::Instant::now();
        assert!(!auth.verify(user, "wrong"));
        t.elapsed()
    };
    let (known, unknown) = (time("alice"), time("mallory"));
    assert!(unknown * 4 > known, "known {known:?}, unknown {unknown:?}");
}

#[test]
fn debug_shows_no_secret() {
    let dir = certs();
    let alice = hash(PASSWORD);
    let text = format!(
        "tls_server_config:\n  cert_file: server.crt\n  key: |\n    {}\nbasic_auth_users:\n  alice: '{alice}'\n",
        std::fs::read_to_string(dir.path().join("server.key"))
            .unwrap()
            .replace('\n', "\n    ")
    );
    let web = load_in(dir.path(), &text).unwrap();
    let shown = format!("{web:?}");
    let parsed = format!(
        "{:?}",
        file::parse(&text, &dir.path().join("web.yml")).unwrap()
    );
    for debug in [&shown, &parsed] {
        assert!(!debug.contains(&alice), "{debug}");
        assert!(!debug.contains("PRIVATE KEY"), "{debug}");
    }
    assert!(!shown.contains("alice"), "{shown}");
    assert!(shown.contains("basic_auth_users: Some(1)"), "{shown}");
}

#[test]
fn configured_headers_do_not_replace_the_pages_own() {
    let dir = tempfile::tempdir().unwrap();
    let web = load_in(
        dir.path(),
        "http_server_config:\n  headers:\n    Content-Security-Policy: \"default-src 'self'\"\n    X-Frame-Options: sameorigin\n    X-XSS-Protection: ''\n",
    )
    .unwrap();
    let page = web.finish(crate::metrics::page::page());
    assert_eq!(
        page.headers()["content-security-policy"],
        crate::metrics::page::CONTENT_SECURITY_POLICY
    );
    assert_eq!(page.headers()["x-frame-options"], "sameorigin");
    let other = web.finish(hyper::Response::new(http_body_util::Full::default()));
    assert_eq!(
        other.headers()["content-security-policy"],
        "default-src 'self'"
    );
    // Blank: unset.
    assert!(!other.headers().contains_key("x-xss-protection"));
}
