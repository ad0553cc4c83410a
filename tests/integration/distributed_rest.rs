//! Connect's REST API side by side: the same sequence of calls against the
//! real Kafka Connect 4.1.1 distributed worker running Debezium 3.6.1
//! (`scripts/debezium.sh distributed`) and against `walrelay
//! connect-distributed`, each in a group and storage topics of its own on
//! the shared broker, each with its own outbox table. Status codes and
//! bodies must be equal once each side's own names (table, slot, worker
//! id, commit, cluster id) are masked.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::distributed::http;
use crate::common::metrics::free_port;
use crate::common::relay::{tail, Outbox, Relay};
use crate::common::{env, unique_name};

/// How long a state change may take to show in `/status`.
const SETTLE: Duration = Duration::from_secs(120);

/// One side: where its REST API is and what to mask in its answers.
struct Side {
    name: &'static str,
    addr: String,
    table: String,
}

impl Side {
    fn call(&self, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
        let body = body.map(|b| b.replace("<T>", &self.table));
        let (code, text) = http(&self.addr, method, path, body.as_deref());
        (code, self.mask(&text))
    }

    /// The answer with this side's own names masked, its bytes otherwise
    /// untouched (key order is part of what is compared).
    fn mask(&self, text: &str) -> String {
        let out = text.replace(&self.table, "<T>").replace(&self.addr, "<W>");
        let re = regex::Regex::new(r#""(commit|kafka_cluster_id)":"[^"]*""#).expect("regex");
        re.replace_all(&out, "\"$1\":\"<masked>\"").into_owned()
    }

    /// Waits until the connector's status has `state` for the connector
    /// and `tasks` for its tasks (None: no task).
    fn wait_state(&self, connector: &str, state: &str, task: Option<&str>) {
        let deadline = Instant::now() + SETTLE;
        loop {
            let (code, text) = self.call("GET", &format!("/connectors/{connector}/status"), None);
            if code == 200 {
                let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                let tasks = v["tasks"].as_array().cloned().unwrap_or_default();
                let ok = v["connector"]["state"] == state
                    && match task {
                        None => tasks.is_empty(),
                        Some(t) => tasks.len() == 1 && tasks[0]["state"] == t,
                    };
                if ok {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "{}: {connector} never reached {state}/{task:?}: {code} {text}",
                self.name
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

/// The real Connect distributed worker, stopped on drop.
struct ConnectWorker {
    dir: PathBuf,
}

impl ConnectWorker {
    fn start(dir: &Path, worker: &Path) -> (ConnectWorker, String) {
        let out = Command::new(repo().join("scripts/debezium.sh"))
            .arg("distributed")
            .arg(dir)
            .arg(worker)
            .env("WALRELAY_OWNER_PID", std::process::id().to_string())
            .stdin(Stdio::null())
            .output()
            .expect("run debezium.sh");
        assert!(
            out.status.success(),
            "debezium.sh distributed failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = std::fs::read_to_string(dir.join("rest_port")).expect("rest_port");
        (
            ConnectWorker {
                dir: dir.to_owned(),
            },
            format!("127.0.0.1:{}", port.trim()),
        )
    }
}

impl Drop for ConnectWorker {
    fn drop(&mut self) {
        let _ = Command::new(repo().join("scripts/debezium.sh"))
            .arg("stop")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status();
    }
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn worker_text(group: &str, extra: &str) -> String {
    format!(
        "bootstrap.servers={}\n\
         group.id={group}\n\
         config.storage.topic={group}-configs\n\
         offset.storage.topic={group}-offsets\n\
         status.storage.topic={group}-status\n\
         config.storage.replication.factor=1\n\
         offset.storage.replication.factor=1\n\
         status.storage.replication.factor=1\n\
         key.converter=org.apache.kafka.connect.json.JsonConverter\n\
         value.converter=org.apache.kafka.connect.json.JsonConverter\n\
         key.converter.schemas.enable=false\n\
         value.converter.schemas.enable=false\n\
         {extra}",
        env().kafka
    )
}

/// The connector's configuration, `<T>` standing for each side's table.
fn config(extra: &str) -> String {
    format!(
        "{{\"connector.class\":\"io.debezium.connector.postgresql.PostgresConnector\",\
         \"plugin.name\":\"pgoutput\",\"database.hostname\":\"127.0.0.1\",\
         \"database.port\":\"{}\",\"database.user\":\"postgres\",\"database.dbname\":\"postgres\",\
         \"topic.prefix\":\"<T>\",\"table.include.list\":\"public.<T>\",\"slot.name\":\"<T>\",\
         \"publication.name\":\"<T>\",\"publication.autocreate.mode\":\"filtered\",\
         \"tasks.max\":\"1\",\"transforms\":\"outbox\",\
         \"transforms.outbox.type\":\"io.debezium.transforms.outbox.EventRouter\"{extra}}}",
        env().pg_port
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_calls_answer_as_connect_distributed_does() {
    let theirs_ob = Outbox::new("restdbz").await;
    let ours_ob = Outbox::new("restwal").await;
    let dir = tempfile::tempdir().expect("dir");
    let dbz_dir = dir.path().join("connect");
    std::fs::create_dir_all(&dbz_dir).expect("dir");
    let dbz_worker = dir.path().join("connect.properties");
    // Both workers resolve `${file:...}` references (FileConfigProvider).
    let secrets = dir.path().join("secrets.properties");
    std::fs::write(&secrets, "pw=not-needed-with-trust\n").expect("write");
    let providers = "config.providers=file\n\
                     config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider\n";
    std::fs::write(&dbz_worker, worker_text(&unique_name("restdbz"), providers)).expect("write");
    let (_connect, dbz_addr) = ConnectWorker::start(&dbz_dir, &dbz_worker);
    let port = free_port();
    let our_worker = dir.path().join("walrelay.properties");
    std::fs::write(
        &our_worker,
        worker_text(
            &unique_name("restwal"),
            &format!("listeners=http://127.0.0.1:{port}\n{providers}"),
        ),
    )
    .expect("write");
    let relay = Relay::start_args(
        &["connect-distributed", our_worker.to_str().expect("utf-8")],
        dir.path().join("walrelay.log"),
    );
    let our_addr = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + SETTLE;
    while http_ok(&our_addr).is_none() {
        assert!(
            Instant::now() < deadline,
            "walrelay never answered:\n{}",
            tail(&relay.log(), 40)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let sides = [
        Side {
            name: "connect",
            addr: dbz_addr,
            table: theirs_ob.name.clone(),
        },
        Side {
            name: "walrelay",
            addr: our_addr,
            table: ours_ob.name.clone(),
        },
    ];
    let create = format!("{{\"name\":\"n1\",\"config\":{}}}", config(""));
    // A second connector with its password behind a config provider: every
    // GET shows the reference, never the secret.
    let second = config(&format!(
        ",\"database.password\":\"${{file:{}:pw}}\"",
        secrets.display()
    ))
    .replace("\"slot.name\":\"<T>\"", "\"slot.name\":\"<T>_2\"")
    .replace(
        "\"publication.name\":\"<T>\"",
        "\"publication.name\":\"<T>_2\"",
    );
    let updated = config(",\"transforms.outbox.route.topic.replacement\":\"<T>.rerouted\"");
    // Each step: the call, then a state to wait for on both sides.
    type Step<'a> = (
        &'a str,
        &'a str,
        Option<String>,
        Option<(&'a str, Option<&'a str>)>,
    );
    let steps: Vec<Step<'_>> = vec![
        ("GET", "/", None, None),
        ("GET", "/connectors", None, None),
        ("POST", "/connectors", Some(create.clone()), Some(("RUNNING", Some("RUNNING")))),
        ("POST", "/connectors", Some(create), None),
        (
            "POST",
            "/connectors",
            Some(r#"{"name":"n3","config":{"name":"n4","connector.class":"io.debezium.connector.postgresql.PostgresConnector"}}"#.into()),
            None,
        ),
        ("GET", "/connectors", None, None),
        ("GET", "/connectors/n1", None, None),
        ("GET", "/connectors/n1/config", None, None),
        ("GET", "/connectors/n1/tasks", None, None),
        ("GET", "/connectors/n1/status", None, None),
        ("GET", "/connectors/n1/tasks/0/status", None, None),
        ("GET", "/connectors/n1/tasks/1/status", None, None),
        ("GET", "/connectors?expand=status", None, None),
        ("GET", "/connectors/nope", None, None),
        ("GET", "/connectors/nope/status", None, None),
        ("PUT", "/connectors/n1/config", Some(updated), Some(("RUNNING", Some("RUNNING")))),
        ("GET", "/connectors/n1", None, None),
        ("PATCH", "/connectors/n1/config", Some(r#"{"poll.interval.ms":"700","heartbeat.interval.ms":null}"#.into()), Some(("RUNNING", Some("RUNNING")))),
        ("GET", "/connectors/n1/config", None, None),
        ("PATCH", "/connectors/nope/config", Some(r#"{"a":"b"}"#.into()), None),
        ("DELETE", "/connectors/n1/offsets", None, None),
        ("PATCH", "/connectors/n1/offsets", Some(r#"{"offsets":[{"partition":{"server":"<T>"},"offset":{"lsn":1}}]}"#.into()), None),
        ("GET", "/connectors/nope/offsets", None, None),
        ("PUT", "/connectors/n1/pause", None, Some(("PAUSED", Some("PAUSED")))),
        ("GET", "/connectors/n1/status", None, None),
        ("PUT", "/connectors/n1/resume", None, Some(("RUNNING", Some("RUNNING")))),
        ("GET", "/connectors/n1/status", None, None),
        ("POST", "/connectors/n1/restart", None, None),
        ("POST", "/connectors/n1/restart?includeTasks=true&onlyFailed=true", None, None),
        ("POST", "/connectors/n1/restart?includeTasks=true", None, Some(("RUNNING", Some("RUNNING")))),
        ("POST", "/connectors/nope/restart", None, None),
        ("PUT", "/connectors/nope/pause", None, None),
        ("PUT", "/connectors/nope/stop", None, None),
        ("POST", "/connectors/n1/tasks/5/restart", None, None),
        ("PUT", "/connectors/n1/stop", None, Some(("STOPPED", None))),
        ("GET", "/connectors/n1/status", None, None),
        ("GET", "/connectors/n1/tasks", None, None),
        ("PUT", "/connectors/n1/resume", None, Some(("RUNNING", Some("RUNNING")))),
        ("DELETE", "/connectors/n1", None, None),
        ("PUT", "/connectors/n2/config", Some(second), Some(("RUNNING", Some("RUNNING")))),
        ("GET", "/connectors/n2/config", None, None),
        ("GET", "/connectors/n2/tasks", None, None),
        ("DELETE", "/connectors/n2", None, None),
        ("GET", "/connectors/n1", None, None),
        ("DELETE", "/connectors/n1", None, None),
        ("GET", "/connectors", None, None),
    ];
    let mut differences = Vec::new();
    for (i, (method, path, body, wait)) in steps.iter().enumerate() {
        let answers: Vec<(u16, String)> = sides
            .iter()
            .map(|s| s.call(method, path, body.as_deref()))
            .collect();
        eprintln!(
            "step {i}: {method} {path} -> {} {}",
            answers[1].0, answers[1].1
        );
        if answers[0] != answers[1] {
            differences.push(format!(
                "step {i}: {method} {path}\n  connect:  {} {}\n  walrelay: {} {}",
                answers[0].0, answers[0].1, answers[1].0, answers[1].1
            ));
        }
        if let Some((state, task)) = wait {
            // The connector of the path (`POST /connectors` creates n1).
            let connector = path
                .split(['/', '?'])
                .nth(2)
                .filter(|c| !c.is_empty())
                .unwrap_or("n1");
            for s in &sides {
                s.wait_state(connector, state, *task);
            }
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} answers differ:\n{}",
        differences.len(),
        steps.len(),
        differences.join("\n")
    );
    drop(relay);
    drop(_connect);
    theirs_ob.remove_all().await;
    ours_ob.remove_all().await;
}

fn http_ok(addr: &str) -> Option<()> {
    std::net::TcpStream::connect(addr).ok().map(|_| ())
}
