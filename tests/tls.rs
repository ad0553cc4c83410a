//! TLS to PostgreSQL and SASL to Kafka against real servers: a private
//! cluster with TLS on test-made certificates, a hostssl-only pg_hba with
//! SCRAM and one certificate role; a private broker with a SCRAM listener.
//!
//! CI wall time: about 30 s (one cluster, one broker start of ~15 s).

mod common;

use std::collections::HashSet;
use std::path::Path;

use common::relay::{event_id, read_until_ids, Outbox, Relay};
use common::tls::{ScramKafka, TlsPg, CERT_USER, SCRAM_USER};
use common::{create_topic_on, kafka_bootstrap};
use walrelay::config::Config;
use walrelay::relay::connect_params;
use walrelay::source::catalog;
use walrelay::source::replication::ReplicationConnection;

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
    let text = format!(
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
    );
    Config::from_toml(&text, Path::new("tls-test.toml"))
        .unwrap_or_else(|e| panic!("config {postgres:?}: {}", chain(&e)))
}

/// Connects both ways (replication + SQL); returns whether the SQL
/// session and the walsender run over TLS, or the first error's chain.
async fn try_connect(config: &Config) -> Result<(bool, bool), String> {
    let params = connect_params(config);
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
    let mut relay = Relay::start(config);
    ob.wait_active(&mut relay).await;
    for n in ids {
        ob.insert(n, "", &format!("k{n}"), "{\"sasl\":true}").await;
    }
    let want: HashSet<String> = ids.map(event_id).into_iter().collect();
    common::relay::read_until_ids_on(plain, topic, &want, &mut relay).await;
    relay.assert_running();
    assert!(
        !relay.log().contains(KAFKA_PASSWORD),
        "log shows the password"
    );
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
    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(
        &mut file,
        ob.config_with(&kafka.sasl_ssl_bootstrap(), &wrong)
            .as_bytes(),
    )
    .unwrap();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_walrelay"))
            .args(["check", "--config"])
            .arg(file.path())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !out.status.success(),
        "check passed with a wrong password:\n{text}"
    );
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

    // Clean up like Outbox::finish (the relays are gone already).
    let name = ob.name.clone();
    ob.client
        .execute("SELECT pg_drop_replication_slot($1)", &[&name])
        .await
        .expect("drop slot");
    ob.client
        .batch_execute(&format!(
            "DROP PUBLICATION IF EXISTS {name}; DROP TABLE {name}"
        ))
        .await
        .expect("drop publication and table");
}
