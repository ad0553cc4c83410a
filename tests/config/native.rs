//! Native TOML configuration without any server: bad configurations exit
//! with code 2 before connecting anywhere, naming the key, and the
//! documented example validates.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Bound on a walrelay command exiting by itself.
const EXIT_WAIT: Duration = Duration::from_secs(30);

/// A TCP port that accepts nothing: a listener the test holds and checks
/// for connection attempts afterwards.
fn silent_listener() -> TcpListener {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.set_nonblocking(true).expect("nonblocking");
    l
}

fn run_walrelay(args: &[&str], config: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_walrelay"));
    cmd.args(args)
        .arg("--config")
        .arg(config)
        .env_remove("WALRELAY_LOG")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn walrelay");
    let deadline = Instant::now() + EXIT_WAIT;
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "walrelay {args:?} did not exit within {EXIT_WAIT:?}:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// Bad configurations exit with code 2 before connecting anywhere, naming
/// the key; the documented example validates.
#[test]
fn bad_config_exits_2_naming_the_key() {
    let pg = silent_listener();
    let kafka = silent_listener();
    let base = format!(
        r#"
[postgres]
host = "127.0.0.1"
port = {pg}
user = "walrelay"
password = "pw"
dbname = "app"

[replication]
slot = "walrelay_cfg"
{{replication}}

[kafka]
bootstrap_servers = "127.0.0.1:{kafka}"
{{kafka}}
"#,
        pg = pg.local_addr().unwrap().port(),
        kafka = kafka.local_addr().unwrap().port()
    );
    let render = |replication: &str, kafka: &str| {
        base.replace("{replication}", replication)
            .replace("{kafka}", kafka)
    };
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "unknown key",
            render("slott = \"x\"", ""),
            "unknown field `slott`",
        ),
        (
            "bad slot name",
            render("", "").replace("walrelay_cfg", "Bad-Slot"),
            "replication.slot",
        ),
        (
            "acks = 1",
            render("", "[kafka.producer]\nacks = \"1\""),
            "kafka.producer.acks",
        ),
        (
            "missing required key",
            render("", "").replace("dbname = \"app\"\n", ""),
            "missing field `dbname`",
        ),
        (
            "bad transform option",
            render(
                "",
                "[[transforms]]\nname = \"r\"\ntype = \"RegexRouter\"\nregex = \"[\"\nreplacement = \"x\"",
            ),
            "transforms.r.regex",
        ),
        (
            "unknown transform",
            render("", "[[transforms]]\nname = \"r\"\ntype = \"NoSuchTransform\""),
            "transforms.r.type",
        ),
        (
            "unknown predicate",
            render(
                "",
                "[[transforms]]\nname = \"f\"\ntype = \"Filter\"\npredicate = \"p\"",
            ),
            "transforms.f.predicate",
        ),
        (
            "unreadable web config file",
            render("", "\n[metrics]\nweb_config_file = \"/nonexistent/web.yml\""),
            "metrics.web_config_file: cannot read the web configuration file /nonexistent/web.yml",
        ),
    ];
    // The base itself is valid: each case fails for its own reason only.
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.toml");
    std::fs::write(&good, render("", "")).unwrap();
    let out = run_walrelay(&["validate"], &good, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A chain of transforms after the router, with a predicate.
    let chained = dir.path().join("chained.toml");
    let chain = "[[transforms]]\nname = \"rename\"\ntype = \"RegexRouter\"\nregex = \"outbox\\\\.event\\\\.(.*)\"\nreplacement = \"events.$1\"\n\n[[transforms]]\nname = \"drop\"\ntype = \"org.apache.kafka.connect.transforms.Filter\"\npredicate = \"payments\"\n\n[[predicates]]\nname = \"payments\"\ntype = \"TopicNameMatches\"\npattern = \"events\\\\.Payment\"\n";
    std::fs::write(&chained, render("", chain)).unwrap();
    let out = run_walrelay(&["validate"], &chained, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (what, text, key) in &cases {
        let file = dir.path().join(format!("{}.toml", what.replace(' ', "_")));
        std::fs::write(&file, text).unwrap();
        for command in ["run", "validate"] {
            let out = run_walrelay(&[command], &file, &[]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{command} with {what}: {stderr}"
            );
            assert!(
                stderr.contains(key),
                "{command} with {what}: the error must name {key}:\n{stderr}"
            );
            assert!(!stderr.contains("\"pw\""), "{stderr}");
        }
    }
    // The command line's --web-config-file (the one way connect-standalone
    // and connect-distributed get one) is read before anything connects.
    let out = run_walrelay(
        &["--web-config-file", "/nonexistent/flag-web.yml", "run"],
        &good,
        &[],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("/nonexistent/flag-web.yml"),
        "the error must name the file of --web-config-file:\n{stderr}"
    );
    for (name, l) in [("postgres", &pg), ("kafka", &kafka)] {
        match l.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Ok((_, peer)) => panic!("walrelay connected to {name} from {peer} with a bad config"),
            Err(e) => panic!("accept: {e}"),
        }
    }
}

#[test]
fn documented_example_config_validates() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/walrelay.toml");
    let out = run_walrelay(
        &["validate"],
        &example,
        &[("WALRELAY_PG_PASSWORD", "example-password")],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("ok"), "{stdout}");
    assert!(!stdout.contains("example-password"), "{stdout}");
    // Without the variable the example names what is missing.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_walrelay"));
    let out = cmd
        .args(["validate", "--config"])
        .arg(&example)
        .env_remove("WALRELAY_PG_PASSWORD")
        .output()
        .expect("run walrelay");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("postgres.password_env") && stderr.contains("WALRELAY_PG_PASSWORD"),
        "{stderr}"
    );
}

/// `walrelay validate` of a documented example in `config/`, with its
/// password variable set; returns what it printed, after checking it
/// exited 0.
fn validate_example(name: &str) -> String {
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("config")
        .join(name);
    let out = run_walrelay(
        &["validate"],
        &example,
        &[("WALRELAY_PG_PASSWORD", "example-password")],
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The polling source's example validates, and names what it needs.
#[test]
fn documented_poll_example_validates() {
    let stdout = validate_example("walrelay-poll.toml");
    assert!(stdout.contains("ok"), "{stdout}");
}

/// `[replication] failover` parses to the flag, defaults to false, and
/// refuses anything but a boolean (TOML's error points at its line).
#[test]
fn replication_failover_flag() {
    let base = r#"
[postgres]
host = "127.0.0.1"
user = "walrelay"
dbname = "app"

[outbox]
table = "public.outbox"

[kafka]
bootstrap_servers = "127.0.0.1:9092"
"#;
    let parse = |extra: &str| {
        walrelay::config::Config::from_toml(&format!("{base}{extra}"), Path::new("f.toml"))
    };
    let plain = parse("").expect("valid config");
    assert!(!plain.replication.failover);
    let on = parse("\n[replication]\nfailover = true\n").expect("valid config");
    assert!(on.replication.failover);
    let err = parse("\n[replication]\nfailover = \"yes\"\n").expect_err("a string is not a bool");
    let text = walrelay::chain::DisplayChain(&err).to_string();
    assert!(
        text.contains("expected a boolean") && text.contains("line 14"),
        "{text}"
    );
}

/// The several-pipelines example validates and names its pipelines.
#[test]
fn documented_pipelines_example_validates() {
    let stdout = validate_example("walrelay-pipelines.toml");
    assert!(
        stdout.contains("ok (3 pipelines: orders, billing, legacy)"),
        "{stdout}"
    );
}

/// `[sink]` chooses another broker: its section validates by key, and
/// what only Kafka can give (exactly-once) or a `[kafka]` section beside
/// it is refused by name before anything is connected.
#[test]
fn another_broker_refuses_what_only_kafka_gives() {
    let base = "[postgres]\nhost = \"127.0.0.1\"\nport = 1\nuser = \"u\"\ndbname = \"d\"\n\n\
                [outbox]\ntable = \"public.outbox\"\n\n";
    let nats =
        "[sink]\ntype = \"nats-jetstream\"\n\n[sink.nats]\nurl = \"nats://127.0.0.1:4222\"\n";
    let cases = [
        (format!("{base}{nats}"), None),
        (
            format!("{base}{nats}\n[kafka]\nexactly_once = true\n"),
            Some("kafka.exactly_once"),
        ),
        (
            format!("{base}{nats}\n[kafka]\nbootstrap_servers = \"k:9092\"\n"),
            Some("kafka"),
        ),
        (
            format!("{base}[sink]\ntype = \"nats-jetstream\"\n"),
            Some("sink.nats"),
        ),
        (
            format!("{base}[sink]\ntype = \"redis\"\n\n[sink.redis]\naddress = \"nohost\"\n"),
            Some("sink.redis.address"),
        ),
        (
            format!("{base}[sink]\ntype = \"carrier-pigeon\"\n"),
            Some("unknown variant `carrier-pigeon`, expected one of `kafka`, `nats-jetstream`, `redis`"),
        ),
    ];
    for (text, refused) in cases {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("walrelay.toml");
        std::fs::write(&path, &text).expect("write");
        let out = run_walrelay(&["validate"], &path, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        match refused {
            None => assert_eq!(out.status.code(), Some(0), "{text}\n{stderr}"),
            Some(key) => {
                assert_eq!(out.status.code(), Some(2), "{text}\n{stderr}");
                assert!(stderr.contains(key), "{key} not named: {stderr}");
            }
        }
    }
}
