//! Secure servers for the TLS, SASL and secrets tests: a private PostgreSQL
//! cluster with TLS on certificates made by `scripts/certs.sh` and a
//! hostssl-only pg_hba, and a private Kafka broker with a SASL SCRAM
//! listener (`scripts/kafka.sh` with `WALRELAY_KAFKA_SCRAM`) and optionally
//! SASL_SSL and mutual-TLS listeners (`WALRELAY_KAFKA_TLS`).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{private_dir, read_port, repo_root, run_script, PrivatePg};

/// The SCRAM role of [`TlsPg`] (password auth over TLS only).
pub(crate) const SCRAM_USER: &str = "walrelay_tls";
/// The certificate role of [`TlsPg`] (`cert` auth: CN = role name).
pub(crate) const CERT_USER: &str = "walrelay_cert";

/// pg_hba: the superuser keeps trust on loopback (test setup only); every
/// other role must use TLS, SCRAM or a client certificate.
const HBA: &str = "\
local   all          all                            trust
local   replication  all                            trust
host    all          postgres        127.0.0.1/32   trust
host    replication  postgres        127.0.0.1/32   trust
hostssl all          walrelay_cert   127.0.0.1/32   cert
hostssl replication  walrelay_cert   127.0.0.1/32   cert
hostssl all          all             127.0.0.1/32   scram-sha-256
hostssl replication  all             127.0.0.1/32   scram-sha-256
";

/// A private cluster with TLS on, a SCRAM role with `password` and a
/// certificate role, both superusers (walrelay creates publications).
pub(crate) struct TlsPg {
    /// The cluster.
    pub pg: PrivatePg,
    certs_root: tempfile::TempDir,
}

impl TlsPg {
    /// Starts the cluster; blocks (call through `spawn_blocking`).
    pub(crate) fn start(password: &str) -> TlsPg {
        let pg = PrivatePg::start();
        let certs_root = private_dir("walrelay-certs-");
        let certs = certs_root.path().join("certs");
        run_script("certs.sh", &[certs.as_os_str(), OsStr::new(CERT_USER)]);
        let hba = certs_root.path().join("pg_hba.conf");
        std::fs::write(&hba, HBA).expect("write pg_hba");
        run_script(
            "pg.sh",
            &[
                OsStr::new("ssl"),
                pg.dir().as_os_str(),
                certs.as_os_str(),
                hba.as_os_str(),
            ],
        );
        let sql = format!(
            "CREATE ROLE {SCRAM_USER} LOGIN REPLICATION SUPERUSER PASSWORD '{password}'; \
             CREATE ROLE {CERT_USER} LOGIN REPLICATION SUPERUSER;"
        );
        run_script(
            "pg.sh",
            &[
                OsStr::new("psql"),
                pg.dir().as_os_str(),
                OsStr::new("-c"),
                OsStr::new(&sql),
            ],
        );
        TlsPg { pg, certs_root }
    }

    /// A file made by `scripts/certs.sh` (`ca.crt`, `client.key`, ...).
    pub(crate) fn cert(&self, name: &str) -> PathBuf {
        self.certs_root.path().join("certs").join(name)
    }

    /// A scratch directory next to the certificates.
    pub(crate) fn scratch(&self) -> &Path {
        self.certs_root.path()
    }
}

/// A private broker whose extra SASL_PLAINTEXT (and optionally SASL_SSL)
/// listener accepts `user` with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN,
/// with certificates also an SSL listener for client certificates;
/// removed on drop.
pub(crate) struct ScramKafka {
    root: tempfile::TempDir,
    dir: PathBuf,
    port: u16,
    sasl_port: u16,
}

impl ScramKafka {
    /// Formats and starts the broker; blocks for seconds.
    pub(crate) fn start(user: &str, password: &str) -> ScramKafka {
        ScramKafka::start_with_tls(user, password, None)
    }

    /// As [`ScramKafka::start`], plus a SASL_SSL listener serving
    /// `certs`/server.crt (made by `scripts/certs.sh`) and an SSL listener
    /// requiring a client certificate signed by `certs`/ca.crt when given.
    pub(crate) fn start_with_tls(user: &str, password: &str, certs: Option<&Path>) -> ScramKafka {
        let root = private_dir("walrelay-kafka-sasl-");
        let dir = root.path().join("kafka");
        let mut cmd = Command::new(repo_root().join("scripts/kafka.sh"));
        cmd.arg("start")
            .arg(&dir)
            .env("WALRELAY_OWNER_PID", std::process::id().to_string())
            .env("WALRELAY_KAFKA_SCRAM", format!("{user}:{password}"))
            .stdin(Stdio::null());
        if let Some(certs) = certs {
            cmd.env("WALRELAY_KAFKA_TLS", certs);
        }
        let out = cmd.output().expect("run kafka.sh");
        assert!(
            out.status.success(),
            "kafka.sh start failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = read_port(&dir);
        let sasl_port = std::fs::read_to_string(dir.join("sasl_port"))
            .expect("sasl_port")
            .trim()
            .parse()
            .expect("sasl port number");
        ScramKafka {
            root,
            dir,
            port,
            sasl_port,
        }
    }

    /// The PLAINTEXT listener (topic setup and test consumers).
    pub(crate) fn plain_bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The SASL_PLAINTEXT listener.
    pub(crate) fn sasl_bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.sasl_port)
    }

    /// The SASL_SSL listener, by the name its certificate carries.
    pub(crate) fn sasl_ssl_bootstrap(&self) -> String {
        let port = std::fs::read_to_string(self.dir.join("ssl_port")).expect("ssl_port");
        format!("localhost:{}", port.trim())
    }

    /// The SSL listener that requires a client certificate signed by the
    /// test CA (started with certificates only), by the name its
    /// certificate carries.
    pub(crate) fn mtls_bootstrap(&self) -> String {
        let port = std::fs::read_to_string(self.dir.join("mtls_port")).expect("mtls_port");
        format!("localhost:{}", port.trim())
    }
}

impl Drop for ScramKafka {
    fn drop(&mut self) {
        let status = Command::new(repo_root().join("scripts/kafka.sh"))
            .arg("rm")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .status();
        if !matches!(status, Ok(s) if s.success()) {
            eprintln!(
                "warning: could not remove the private broker in {}",
                self.root.path().display()
            );
        }
    }
}
