//! TLS to PostgreSQL and SASL/SSL to Kafka against real servers: a private
//! cluster with TLS on test-made certificates, a hostssl-only pg_hba with
//! SCRAM and one certificate role; private brokers with SASL (SCRAM and
//! PLAIN), SASL_SSL and client-certificate SSL listeners.
//!
//! CI wall time: about 30 s (one cluster; two brokers of ~15 s start each,
//! one per Kafka test, running side by side).

use crate::common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use common::relay::{event_id, read_until_ids, Outbox, Relay};
use common::tls::{ScramKafka, TlsPg, CERT_USER, SCRAM_USER};
use common::{create_topic_on, kafka_bootstrap};
use walrelay::config::Config;
use walrelay::postgres::catalog;
use walrelay::postgres::replication::{ConnectParams, ReplicationConnection};

const PG_PASSWORD: &str = "Tls-Scram-Pw-41d7";
const KAFKA_USER: &str = "walrelay_sasl";
const KAFKA_PASSWORD: &str = "Sasl-Scram-Pw-9c2e";

fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn toml_path(p: &Path) -> String {
    p.display().to_string()
}

/// A config for `user` on the TLS cluster; `postgres` holds extra
/// `[postgres]` keys.
fn config(pg: &TlsPg, host: &str, user: &str, postgres: &str) -> Config {
    let text = config_text(pg, host, user, postgres);
    Config::from_toml(&text, Path::new("tls-test.toml"))
        .unwrap_or_else(|e| panic!("config {postgres:?}: {}", chain(&e)))
}

/// The TOML of [`config`].
fn config_text(pg: &TlsPg, host: &str, user: &str, postgres: &str) -> String {
    format!(
        r#"
[postgres]
host = "{host}"
port = {port}
user = "{user}"
dbname = "postgres"
connect_timeout_ms = 20000
{postgres}

[kafka]
bootstrap_servers = "{kafka}"

[metrics]
listen = "127.0.0.1:0"
"#,
        port = pg.pg.port(),
        kafka = kafka_bootstrap(),
    )
}

/// `walrelay check` on the TOML `config`, with `SSL_CERT_FILE` set to
/// `cert_file` (OpenSSL's system trust store) or unset: whether it passed,
/// and its whole output.
async fn check_output(config: String, cert_file: Option<PathBuf>) -> (bool, String) {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut file, config.as_bytes()).unwrap();
    let path = file.path().to_owned();
    let result = check_file_output(path, cert_file).await;
    drop(file);
    result
}

/// [`check_output`] of a configuration file in any form walrelay reads.
async fn check_file_output(config: PathBuf, cert_file: Option<PathBuf>) -> (bool, String) {
    tokio::task::spawn_blocking(move || {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_walrelay"));
        cmd.args(["check", "--config"])
            .arg(&config)
            .env_remove("SSL_CERT_FILE")
            .env_remove("SSL_CERT_DIR");
        if let Some(f) = cert_file {
            cmd.env("SSL_CERT_FILE", f);
        }
        let out = cmd.output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    })
    .await
    .unwrap()
}

/// Connects both ways (replication + SQL); returns whether the SQL
/// session and the walsender run over TLS, or the first error's chain.
async fn try_connect(config: &Config) -> Result<(bool, bool), String> {
    let params = ConnectParams::from_config(&config.postgres);
    let mut repl = ReplicationConnection::connect(&params)
        .await
        .map_err(|e| chain(&e))?;
    repl.identify_system().await.map_err(|e| chain(&e))?;
    let client = catalog::connect(&params).await.map_err(|e| chain(&e))?;
    let sql_ssl: bool = client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .map_err(|e| chain(&e))?
        .get(0);
    let name = &params.application_name;
    let walsender_ssl: bool = client
        .query_one(
            "SELECT bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.backend_type = 'walsender' AND a.application_name = $1",
            &[name],
        )
        .await
        .map_err(|e| chain(&e))?
        .get::<_, Option<bool>>(0)
        .unwrap_or(false);
    Ok((sql_ssl, walsender_ssl))
}

async fn expect_tls(what: &str, config: &Config) {
    match try_connect(config).await {
        Ok((true, true)) => {}
        Ok(other) => panic!("{what}: connected, but not over tls: {other:?}"),
        Err(e) => panic!("{what}: {e}"),
    }
    assert!(
        !format!("{config:?}").contains(PG_PASSWORD),
        "Debug shows the password"
    );
}

async fn expect_error(what: &str, config: &Config, needles: &[&str]) -> String {
    let err = match try_connect(config).await {
        Ok(r) => panic!("{what}: connected ({r:?}) but should have failed"),
        Err(e) => e,
    };
    for n in needles {
        assert!(err.contains(n), "{what}: {n:?} not in: {err}");
    }
    assert!(
        !err.contains(PG_PASSWORD),
        "{what}: error shows the password"
    );
    err
}

/// Every sslmode against a TLS server with hostssl-only pg_hba; channel
/// binding; client certificates; verification failures named clearly; and
/// walrelay relaying end to end with verify-full + a client certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_over_tls() {
    let tls = tokio::task::spawn_blocking(|| TlsPg::start(PG_PASSWORD))
        .await
        .unwrap();
    let ca = toml_path(&tls.cert("ca.crt"));
    let other_ca = toml_path(&tls.cert("other-ca.crt"));
    let scram = |host: &str, extra: &str| {
        config(
            &tls,
            host,
            SCRAM_USER,
            &format!("password = \"{PG_PASSWORD}\"\n{extra}"),
        )
    };

    // disable: the hba has no plain line for the role.
    expect_error(
        "sslmode disable",
        &scram("127.0.0.1", "sslmode = \"disable\""),
        &["28000", "no encryption"],
    )
    .await;
    // allow: plain refused, then TLS.
    expect_tls("sslmode allow", &scram("127.0.0.1", "sslmode = \"allow\"")).await;
    // prefer (the default) and require: TLS without verification.
    expect_tls("sslmode prefer", &scram("127.0.0.1", "")).await;
    expect_tls(
        "sslmode require + channel_binding require",
        &scram(
            "127.0.0.1",
            "sslmode = \"require\"\nchannel_binding = \"require\"",
        ),
    )
    .await;
    // require with a root certificate verifies the chain, like libpq.
    expect_error(
        "require with a wrong root certificate",
        &scram(
            "localhost",
            &format!("sslmode = \"require\"\nsslrootcert = \"{other_ca}\""),
        ),
        &["failed verification", "other-ca.crt"],
    )
    .await;
    // verify-ca ignores the host name; verify-full does not.
    expect_tls(
        "verify-ca by address",
        &scram(
            "127.0.0.1",
            &format!("sslmode = \"verify-ca\"\nsslrootcert = \"{ca}\""),
        ),
    )
    .await;
    expect_error(
        "verify-full with a host name the certificate does not carry",
        &scram(
            "127.0.0.1",
            &format!("sslmode = \"verify-full\"\nsslrootcert = \"{ca}\""),
        ),
        &["failed verification", "mismatch", "verify-full"],
    )
    .await;
    expect_error(
        "verify-full with the wrong CA",
        &scram(
            "localhost",
            &format!("sslmode = \"verify-full\"\nsslrootcert = \"{other_ca}\""),
        ),
        &["failed verification", "other-ca.crt"],
    )
    .await;
    // prefer with a root certificate the server's does not chain to: the
    // handshake fails and, as libpq does, each connection tries again
    // without TLS, which this pg_hba refuses. Without that retry the SQL
    // connection would fail on the certificate instead.
    let prefer_wrong_root = scram("localhost", &format!("sslrootcert = \"{other_ca}\""));
    expect_error(
        "prefer with a wrong root certificate",
        &prefer_wrong_root,
        &["28000", "no encryption"],
    )
    .await;
    let sql_err =
        match catalog::connect(&ConnectParams::from_config(&prefer_wrong_root.postgres)).await {
            Ok(_) => panic!("prefer with a wrong root certificate: sql connection opened"),
            Err(e) => chain(&e),
        };
    assert!(
        sql_err.contains("no encryption") && !sql_err.contains("failed verification"),
        "sql connection under prefer did not retry without tls: {sql_err}"
    );
    expect_tls(
        "verify-full + channel binding required",
        &scram(
            "localhost",
            &format!(
                "sslmode = \"verify-full\"\nsslrootcert = \"{ca}\"\nchannel_binding = \"require\""
            ),
        ),
    )
    .await;
    // sslrootcert = "system": the system's trust store, which OpenSSL takes
    // from SSL_CERT_FILE when set; without the test CA in it, verification
    // fails and `walrelay check` points at the TLS settings.
    let system = config_text(
        &tls,
        "localhost",
        SCRAM_USER,
        &format!(
            "password = \"{PG_PASSWORD}\"\nsslmode = \"verify-full\"\nsslrootcert = \"system\""
        ),
    );
    let (_, out) = check_output(system.clone(), Some(tls.cert("ca.crt"))).await;
    for row in [
        "pass    postgres connection",
        "pass    replication connection",
    ] {
        assert!(
            out.contains(row),
            "sslrootcert = system with the CA: no {row:?} in:\n{out}"
        );
    }
    let (_, out) = check_output(system, None).await;
    for row in [
        "FAIL    postgres connection",
        "FAIL    replication connection",
    ] {
        assert!(
            out.contains(row),
            "sslrootcert = system without the CA: no {row:?} in:\n{out}"
        );
    }
    assert!(
        out.contains("the system trust store") && out.contains("postgres.sslrootcert"),
        "the failure must name the trust store and the setting to check:\n{out}"
    );
    assert!(!out.contains(PG_PASSWORD), "check shows the password");

    // A wrong password: the server's error, never the password.
    expect_error(
        "wrong password",
        &config(
            &tls,
            "localhost",
            SCRAM_USER,
            &format!("password = \"not-{PG_PASSWORD}\"\nsslmode = \"require\""),
        ),
        &["28P01"],
    )
    .await;

    // Certificate authentication.
    let client_crt = toml_path(&tls.cert("client.crt"));
    let client_key = toml_path(&tls.cert("client.key"));
    let cert = |extra: &str| {
        config(
            &tls,
            "localhost",
            CERT_USER,
            &format!(
                "sslmode = \"verify-full\"\nsslrootcert = \"{ca}\"\nsslcert = \"{client_crt}\"\n{extra}"
            ),
        )
    };
    expect_tls(
        "client certificate",
        &cert(&format!("sslkey = \"{client_key}\"")),
    )
    .await;
    let pass_file = toml_path(&tls.cert("client-enc.pass"));
    let enc_key = toml_path(&tls.cert("client-enc.key"));
    expect_tls(
        "encrypted client key",
        &cert(&format!(
            "sslkey = \"{enc_key}\"\nsslpassword_file = \"{pass_file}\""
        )),
    )
    .await;
    expect_error(
        "encrypted client key without its passphrase",
        &cert(&format!("sslkey = \"{enc_key}\"")),
        &["postgres.sslkey", "client-enc.key"],
    )
    .await;
    // cert auth involves no SCRAM, so channel binding cannot be required.
    expect_error(
        "channel binding required with cert auth",
        &cert(&format!(
            "sslkey = \"{client_key}\"\nchannel_binding = \"require\""
        )),
        &["postgres.channel_binding"],
    )
    .await;
    // A key others may read is refused, naming the key.
    let loose = tls.scratch().join("loose.key");
    std::fs::copy(tls.cert("client.key"), &loose).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    expect_error(
        "group-readable key",
        &cert(&format!("sslkey = \"{}\"", toml_path(&loose))),
        &["postgres.sslkey", "loose.key", "chmod 0600"],
    )
    .await;
    // No client certificate: the server refuses the cert role.
    expect_error(
        "cert role without a certificate",
        &config(
            &tls,
            "localhost",
            CERT_USER,
            &format!("sslmode = \"verify-full\"\nsslrootcert = \"{ca}\""),
        ),
        &["28000"],
    )
    .await;

    // A server without TLS (the shared cluster): prefer falls back to plain,
    // require refuses by name.
    let plain_server = |mode: &str| {
        let text = format!(
            "[postgres]\nhost = \"127.0.0.1\"\nport = {}\nuser = \"postgres\"\ndbname = \"postgres\"\n\
             sslmode = \"{mode}\"\n[kafka]\nbootstrap_servers = \"{}\"\n[metrics]\nlisten = \"127.0.0.1:0\"\n",
            common::env().pg_port,
            kafka_bootstrap()
        );
        Config::from_toml(&text, Path::new("plain.toml")).unwrap()
    };
    assert_eq!(
        try_connect(&plain_server("prefer")).await,
        Ok((false, false)),
        "prefer against a server without tls"
    );
    expect_error(
        "require against a server without tls",
        &plain_server("require"),
        &["does not accept tls", "postgres.sslmode = \"require\""],
    )
    .await;

    // End to end: walrelay relays over verify-full with a client
    // certificate (replication, catalog, lag monitor all over TLS).
    let ob = Outbox::new_with("tls_e2e", tls.pg.connect().await).await;
    let topic = ob.topic("");
    create_topic_on(&kafka_bootstrap(), &topic, 1).await;
    let relay_config = format!(
        r#"
[postgres]
host = "localhost"
port = {port}
user = "{CERT_USER}"
dbname = "postgres"
sslmode = "verify-full"
sslrootcert = "{ca}"
sslcert = "{client_crt}"
sslkey = "{enc_key}"
sslpassword_file = "{pass_file}"

[replication]
slot = "{name}"
publication = "{name}"
status_interval_ms = 200

[outbox]
table = "public.{name}"

[kafka]
bootstrap_servers = "{kafka}"

[metrics]
listen = "127.0.0.1:0"
"#,
        port = tls.pg.port(),
        name = ob.name,
        kafka = kafka_bootstrap(),
    );
    let mut relay = Relay::start(&relay_config);
    ob.wait_active(&mut relay).await;
    for n in 1..=3 {
        ob.insert(n, "", &format!("k{n}"), "{\"tls\":true}").await;
    }
    let want: HashSet<String> = (1..=3).map(event_id).collect();
    let records = read_until_ids(&topic, &want, &mut relay).await;
    assert_eq!(common::relay::ids(&records), want);
    let walsender_ssl: Option<bool> = ob
        .client
        .query_one(
            "SELECT bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.backend_type = 'walsender' AND a.usename = $1",
            &[&CERT_USER],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(walsender_ssl, Some(true), "walsender not over tls");
    ob.finish(relay).await;
}

/// The `[kafka.producer]` keys of a SASL connection (the caller's TOML
/// continues inside `[kafka.producer]`), then secrets and metrics.
fn sasl_extra(protocol: &str, mechanism: &str, password: &str, tls: &str) -> String {
    format!(
        "\"security.protocol\" = \"{protocol}\"\n\"sasl.mechanism\" = \"{mechanism}\"\n\
         \"sasl.username\" = \"{KAFKA_USER}\"\n\"broker.address.family\" = \"v4\"\n{tls}\n\
         [kafka.secrets]\n\"sasl.password\" = \"{password}\"\n\n\
         [metrics]\nlisten = \"127.0.0.1:0\"\n"
    )
}

/// Runs walrelay with `config` until events `ids` arrive on `topic`
/// (read through the broker's plain listener). Earlier events may arrive
/// again: the previous run was killed, possibly before it confirmed them.
async fn relay_events(ob: &Outbox, config: &str, plain: &str, topic: &str, ids: [u64; 2]) {
    relay_events_from(
        ob,
        Relay::start(config),
        plain,
        topic,
        ids,
        &[KAFKA_PASSWORD],
    )
    .await;
}

/// As [`relay_events`] for a walrelay started any way; none of `secrets`
/// may show up in its log.
async fn relay_events_from(
    ob: &Outbox,
    mut relay: Relay,
    plain: &str,
    topic: &str,
    ids: [u64; 2],
    secrets: &[&str],
) {
    ob.wait_active(&mut relay).await;
    for n in ids {
        ob.insert(n, "", &format!("k{n}"), "{\"tls\":true}").await;
    }
    let want: HashSet<String> = ids.map(event_id).into_iter().collect();
    common::relay::read_until_ids_on(plain, topic, &want, &mut relay).await;
    relay.assert_running();
    let log = relay.log();
    for s in secrets {
        assert!(!log.contains(s), "log shows a password ({} chars)", s.len());
    }
    drop(relay);
    ob.wait_inactive().await;
}

/// walrelay publishes through SASL_PLAINTEXT with SCRAM-SHA-512 and through
/// SASL_SSL (verified against the test CA) with SCRAM-SHA-256; a wrong
/// password is a clear failure that never shows the password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_over_sasl_scram() {
    let certs_root = tempfile::tempdir().unwrap();
    let certs = certs_root.path().join("certs");
    common::run_script("certs.sh", &[certs.as_os_str()]);
    let kafka = {
        let certs = certs.clone();
        tokio::task::spawn_blocking(move || {
            ScramKafka::start_with_tls(KAFKA_USER, KAFKA_PASSWORD, Some(&certs))
        })
        .await
        .unwrap()
    };
    let ob = Outbox::new("sasl_e2e").await;
    let topic = ob.topic("");
    let plain = kafka.plain_bootstrap();
    create_topic_on(&plain, &topic, 1).await;

    let scram512 = sasl_extra("SASL_PLAINTEXT", "SCRAM-SHA-512", KAFKA_PASSWORD, "");
    relay_events(
        &ob,
        &ob.config_with(&kafka.sasl_bootstrap(), &scram512),
        &plain,
        &topic,
        [1, 2],
    )
    .await;

    let ca = format!(
        "\"ssl.ca.location\" = \"{}\"",
        certs.join("ca.crt").display()
    );
    let scram256 = sasl_extra("SASL_SSL", "SCRAM-SHA-256", KAFKA_PASSWORD, &ca);
    relay_events(
        &ob,
        &ob.config_with(&kafka.sasl_ssl_bootstrap(), &scram256),
        &plain,
        &topic,
        [3, 4],
    )
    .await;

    // `walrelay check` with a wrong password fails on the kafka connection.
    let wrong = sasl_extra("SASL_SSL", "SCRAM-SHA-256", "Wrong-Pw-0000", &ca);
    let (passed, text) =
        check_output(ob.config_with(&kafka.sasl_ssl_bootstrap(), &wrong), None).await;
    assert!(!passed, "check passed with a wrong password:\n{text}");
    // librdkafka reports the SASL failure through its error callback only;
    // the check names the kafka connection and the settings to look at.
    assert!(
        text.contains("FAIL    kafka connection") && text.contains("sasl"),
        "no kafka connection failure in:\n{text}"
    );
    assert!(
        !text.contains("Wrong-Pw-0000"),
        "check shows the password:\n{text}"
    );

    ob.remove().await;
}

/// A password file made by `scripts/certs.sh`, without its newline.
fn password_in(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim_end()
        .to_owned()
}

/// walrelay publishes through SASL_PLAINTEXT with PLAIN, and to a listener
/// that requires a client certificate: with a PEM certificate and an
/// encrypted key in native TOML, and with a PKCS#12 keystore plus a Java
/// PKCS#12 truststore in Kafka Connect's worker + connector files. Without
/// a client certificate `walrelay check` fails on the kafka connection. No
/// password shows up in any log or output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_over_ssl_and_sasl_plain() {
    let certs_root = tempfile::tempdir().unwrap();
    let certs = certs_root.path().join("certs");
    common::run_script("certs.sh", &[certs.as_os_str()]);
    let truststore = certs.join("truststore.p12");
    assert!(
        truststore.exists(),
        "certs.sh wrote no truststore.p12 (is keytool installed?)"
    );
    let kafka = {
        let certs = certs.clone();
        tokio::task::spawn_blocking(move || {
            ScramKafka::start_with_tls(KAFKA_USER, KAFKA_PASSWORD, Some(&certs))
        })
        .await
        .unwrap()
    };
    let ob = Outbox::new("mtls_e2e").await;
    let topic = ob.topic("");
    let plain = kafka.plain_bootstrap();
    create_topic_on(&plain, &topic, 1).await;
    let key_password = password_in(&certs.join("client-enc.pass"));
    let p12_password = password_in(&certs.join("client.p12.pass"));
    let trust_password = password_in(&certs.join("truststore.p12.pass"));
    let all_secrets = [
        KAFKA_PASSWORD,
        key_password.as_str(),
        p12_password.as_str(),
        trust_password.as_str(),
    ];
    let scratch = certs_root.path();

    // (a) SASL_PLAINTEXT with PLAIN, native TOML.
    let plain_sasl = sasl_extra("SASL_PLAINTEXT", "PLAIN", KAFKA_PASSWORD, "");
    relay_events(
        &ob,
        &ob.config_with(&kafka.sasl_bootstrap(), &plain_sasl),
        &plain,
        &topic,
        [1, 2],
    )
    .await;

    // (b) Mutual TLS with a PEM certificate and an encrypted PEM key whose
    // passphrase is a secret, native TOML.
    let pem_tls = format!(
        "\"security.protocol\" = \"ssl\"\n\"broker.address.family\" = \"v4\"\n\
         \"ssl.ca.location\" = \"{}\"\n\"ssl.certificate.location\" = \"{}\"\n\
         \"ssl.key.location\" = \"{}\"\n\n\
         [kafka.secrets]\n\"ssl.key.password\" = \"{key_password}\"\n\n\
         [metrics]\nlisten = \"127.0.0.1:0\"\n",
        toml_path(&certs.join("ca.crt")),
        toml_path(&certs.join("client.crt")),
        toml_path(&certs.join("client-enc.key")),
    );
    relay_events_from(
        &ob,
        Relay::start(&ob.config_with(&kafka.mtls_bootstrap(), &pem_tls)),
        &plain,
        &topic,
        [3, 4],
        &all_secrets,
    )
    .await;

    // (c) Kafka Connect standalone files: PKCS#12 keystore and Java's
    // PKCS#12 truststore (type left for walrelay to detect).
    let worker = scratch.join("worker.properties");
    std::fs::write(
        &worker,
        format!(
            "bootstrap.servers={bootstrap}\n\
             key.converter=org.apache.kafka.connect.storage.StringConverter\n\
             value.converter=org.apache.kafka.connect.storage.StringConverter\n\
             offset.storage.file.filename={scratch}/connect.offsets\n\
             producer.security.protocol=SSL\n\
             producer.ssl.keystore.type=PKCS12\n\
             producer.ssl.keystore.location={keystore}\n\
             producer.ssl.keystore.password={p12_password}\n\
             producer.ssl.truststore.location={truststore}\n\
             producer.ssl.truststore.password={trust_password}\n",
            bootstrap = kafka.mtls_bootstrap(),
            scratch = scratch.display(),
            keystore = certs.join("client.p12").display(),
            truststore = truststore.display(),
        ),
    )
    .unwrap();
    let connector = scratch.join("connector.properties");
    std::fs::write(
        &connector,
        format!(
            "name=mtls-outbox\n\
             connector.class=io.debezium.connector.postgresql.PostgresConnector\n\
             database.hostname=127.0.0.1\n\
             database.port={pg_port}\n\
             database.user=postgres\n\
             database.dbname=postgres\n\
             topic.prefix={name}\n\
             plugin.name=pgoutput\n\
             slot.name={name}\n\
             publication.name={name}\n\
             table.include.list=public.{name}\n\
             snapshot.mode=no_data\n\
             transforms=outbox\n\
             transforms.outbox.type=io.debezium.transforms.outbox.EventRouter\n",
            pg_port = common::env().pg_port,
            name = ob.name,
        ),
    )
    .unwrap();
    relay_events_from(
        &ob,
        Relay::start_args(
            &[
                std::ffi::OsStr::new("--metrics-addr"),
                std::ffi::OsStr::new("127.0.0.1:0"),
                std::ffi::OsStr::new("connect-standalone"),
                worker.as_os_str(),
                connector.as_os_str(),
            ],
            scratch.join("mtls-connect.log"),
        ),
        &plain,
        &topic,
        [5, 6],
        &all_secrets,
    )
    .await;

    // (d) No client certificate (Debezium Server's form, trusting the
    // PKCS#12 truststore): the broker refuses the handshake and `walrelay
    // check` fails on the kafka connection without showing a password.
    let server = scratch.join("application.properties");
    std::fs::write(
        &server,
        format!(
            "debezium.sink.type=kafka\n\
             debezium.sink.kafka.producer.bootstrap.servers={bootstrap}\n\
             debezium.sink.kafka.producer.security.protocol=SSL\n\
             debezium.sink.kafka.producer.ssl.truststore.location={truststore}\n\
             debezium.sink.kafka.producer.ssl.truststore.type=PKCS12\n\
             debezium.sink.kafka.producer.ssl.truststore.password={trust_password}\n\
             debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n\
             debezium.source.offset.storage.file.filename={scratch}/offsets.dat\n\
             debezium.source.database.hostname=127.0.0.1\n\
             debezium.source.database.port={pg_port}\n\
             debezium.source.database.user=postgres\n\
             debezium.source.database.dbname=postgres\n\
             debezium.source.plugin.name=pgoutput\n\
             debezium.source.topic.prefix={name}\n\
             debezium.source.slot.name={name}\n\
             debezium.source.publication.name={name}\n\
             debezium.source.table.include.list=public.{name}\n\
             debezium.source.snapshot.mode=no_data\n\
             debezium.transforms=outbox\n\
             debezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter\n",
            bootstrap = kafka.mtls_bootstrap(),
            truststore = truststore.display(),
            scratch = scratch.display(),
            pg_port = common::env().pg_port,
            name = ob.name,
        ),
    )
    .unwrap();
    let (passed, text) = check_file_output(server, None).await;
    assert!(
        !passed,
        "check passed without a client certificate:\n{text}"
    );
    assert!(
        text.contains("FAIL    kafka connection") && text.contains("ssl"),
        "no kafka connection failure in:\n{text}"
    );
    for s in all_secrets {
        assert!(
            !text.contains(s),
            "check shows a password ({} chars):\n{text}",
            s.len()
        );
    }

    ob.remove().await;
}
